"""The ONNX package's backend node tests (one-operator models with inputs and expected outputs) and how one is run and checked.
Standalone (onnx, numpy and a tinygrad's tinygrad.nn.onnx only), so benches/onnx_node_suite.py runs the same check on tinygrad 0.14."""
from __future__ import annotations
import os
import pickle
import tempfile
import warnings
from typing import Any
import numpy as np

def load_cases() -> dict[str, Any]:
  """{name: onnx TestCase}. onnx makes them by running its reference code (seconds), so they are cached per onnx version."""
  import onnx
  path = os.path.join(tempfile.gettempdir(), f"tinygrad-onnx-node-cases-{onnx.__version__}.pkl")
  try:
    with open(path, "rb") as f: return pickle.load(f)
  except (OSError, EOFError, pickle.UnpicklingError, AttributeError): pass
  import onnx.backend.test.loader as loader
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cases = {c.name: c for c in loader.load_model_tests(kind="node")}
  tmp = f"{path}.{os.getpid()}"
  with open(tmp, "wb") as f: pickle.dump(cases, f)
  os.replace(tmp, path)
  return cases

def op_types(case:Any) -> list[str]: return sorted({n.op_type for n in case.model.graph.node})

def _ml_dtype(dt:np.dtype) -> bool:
  """numpy dtypes from ml_dtypes (bfloat16, float8, int4, ...), which Tensor.numpy() gives as float32: compared as the same bits. They
  are kind "V", but float8_e5m2 registers as kind "f"."""
  return dt.kind == "V" or dt.name.startswith("float8")

def _to_numpy(v:Any, like:Any) -> Any:
  from tinygrad.tensor import Tensor
  if isinstance(v, (list, tuple)): return [_to_numpy(x, y) for x, y in zip(v, like)] if isinstance(like, list) else list(v)
  if isinstance(v, Tensor):
    if isinstance(like, np.ndarray) and like.dtype.itemsize == v.dtype.itemsize and _ml_dtype(like.dtype):
      return v.bitcast({1: "uint8", 2: "uint16"}[v.dtype.itemsize]).numpy().view(like.dtype)
    out = v.numpy()
    # numpy's bfloat16/float8 (ml_dtypes) compare as the same bits
    if isinstance(like, np.ndarray) and like.dtype != out.dtype and like.dtype.itemsize == out.dtype.itemsize and like.dtype.name != out.dtype.name:
      try: out = out.view(like.dtype)
      except (TypeError, ValueError): pass
    return out
  return v

def check_output(name:str, want:Any, got:Any, rtol:float, atol:float) -> None:
  if isinstance(want, list):
    assert isinstance(got, list), f"{name}: expected a sequence, got {type(got).__name__}"
    assert len(want) == len(got), f"{name}: expected {len(want)} elements, got {len(got)}"
    for i, (w, g) in enumerate(zip(want, got)): check_output(f"{name}[{i}]", w, g, rtol, atol)
    return
  if want is None:
    assert got is None, f"{name}: expected an empty optional, got {got!r}"
    return
  got = np.asarray(got)
  assert want.shape == got.shape, f"{name}: expected shape {want.shape}, got {got.shape}"
  if want.dtype.kind == "O" or want.dtype.kind in "SU": np.testing.assert_array_equal(want.astype(object), got.astype(object), err_msg=name)
  else:
    assert want.dtype == got.dtype, f"{name}: expected dtype {want.dtype}, got {got.dtype}"
    if _ml_dtype(want.dtype) or want.dtype.name == "bfloat16":
      want, got = want.astype(np.float32), got.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)

def _from_proto(v:Any) -> Any:
  # onnx keeps the data of dtypes numpy lacks (bfloat16, float8, int4, ...) as TensorProtos
  import onnx
  if isinstance(v, onnx.TensorProto): return onnx.numpy_helper.to_array(v)
  return [_from_proto(x) for x in v] if isinstance(v, list) else v

def run_case(case:Any, runner_cls:Any) -> None:
  """Run every data set of one case through runner_cls (an OnnxRunner class) and check its outputs as onnx's backend test does."""
  model = case.model
  runner = runner_cls(model) if _takes_proto(runner_cls) else runner_cls(_as_tensor_bytes(model))
  input_names = [i.name for i in model.graph.input if i.name not in {init.name for init in model.graph.initializer}]
  output_names = [o.name for o in model.graph.output]
  for inputs, outputs in case.data_sets:
    inputs, outputs = _from_proto(inputs), _from_proto(outputs)
    got = runner(dict(zip(input_names, inputs)))
    for name, want in zip(output_names, outputs):
      check_output(name, want, _to_numpy(got[name], want), case.rtol, case.atol)

def _takes_proto(runner_cls:Any) -> bool:
  # ours takes an onnx.ModelProto; tinygrad 0.14's takes a path or the file's bytes as a Tensor
  return getattr(runner_cls, "__module__", "").startswith("tinygrad.nn.onnx.")

def _as_tensor_bytes(model:Any) -> Any:
  from tinygrad.tensor import Tensor
  from tinygrad.dtype import dtypes
  return Tensor(np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy(), dtype=dtypes.uint8)
