"""Whole models (tests/helpers/onnx_models.py, random weights) run by OnnxRunner and by onnxruntime's CPU provider: the outputs agree
to 1e-4 relative (with an absolute floor of 1e-4 of the output's largest value, for entries near zero)."""
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from tests.helpers import onnx_models  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner, onnx_ops  # noqa: E402

def check_against_onnxruntime(model, inputs:dict[str, np.ndarray]) -> None:
  session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
  want = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
  got = OnnxRunner(model)(inputs)
  assert list(got) == list(want)
  for name, w in want.items():
    g = got[name].numpy()
    assert g.shape == w.shape and g.dtype == w.dtype, f"{name}: {g.shape} {g.dtype} vs onnxruntime's {w.shape} {w.dtype}"
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()), err_msg=name)

def test_resnet():
  rng = np.random.default_rng(1)
  check_against_onnxruntime(onnx_models.resnet(), {"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)})

def test_bert():
  rng = np.random.default_rng(2)
  ids = rng.integers(0, 1000, (2, 16)).astype(np.int64)
  mask = np.ones((2, 16), np.int64)
  mask[1, 11:] = 0   # the second sequence is padded
  check_against_onnxruntime(onnx_models.bert(), {"input_ids": ids, "attention_mask": mask})

# runs as soon as the operators land (s15-nn writes Resize); strict, so a pass here is noticed
@pytest.mark.xfail("Resize" not in onnx_ops, reason="waits for the Resize operator", raises=NotImplementedError, strict=True)
def test_yolo():
  rng = np.random.default_rng(3)
  check_against_onnxruntime(onnx_models.yolo(), {"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)})
