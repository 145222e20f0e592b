"""Whole models (tests/helpers/onnx_models.py) run by OnnxRunner match onnxruntime to 1e-4 relative."""
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
ort = pytest.importorskip("onnxruntime")
from tests.helpers.onnx_models import resnet_style, bert_style, yolo_style  # noqa: E402

@pytest.mark.parametrize("build", [resnet_style, bert_style, yolo_style], ids=["resnet", "bert", "yolo"])
def test_model_matches_onnxruntime(build):
  from tinygrad.nn.onnx import OnnxRunner
  model, inputs = build()
  session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
  want = session.run(None, inputs)
  got = OnnxRunner(model)(inputs)
  for (name, w) in zip([o.name for o in model.graph.output], want):
    np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-4, atol=1e-5, err_msg=name)
