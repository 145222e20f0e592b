"""OnnxRunner's API: the ways a model is given, graph input checks, and clear errors for bad files, opsets, operators and attributes,
raised before any kernel runs."""
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.helpers import GlobalCounters  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner, OnnxValue  # noqa: E402

def _model(nodes=None, inputs=None, outputs=None, inits=(), opset=17):
  nodes = nodes or [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["out"])]
  inputs = inputs or [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3]) for n in ("x", "y")]
  outputs = outputs or [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 3])]
  return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])

X = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
Y = np.ones((2, 3), np.float32)

def test_every_way_of_giving_the_model(tmp_path):
  model = _model()
  path = tmp_path / "m.onnx"
  onnx.save(model, str(path))
  raw = model.SerializeToString()
  for src in (model, str(path), path, raw, Tensor(np.frombuffer(raw, np.uint8).copy())):
    np.testing.assert_equal(OnnxRunner(src)({"x": X, "y": Y})["out"].numpy(), np.maximum(X + Y, 0))

def test_graph_inputs_describe_the_model():
  r = OnnxRunner(_model())
  assert r.graph_inputs == {"x": OnnxValue(("N", 3), dtypes.float32), "y": OnnxValue(("N", 3), dtypes.float32)}
  assert r.graph_outputs == ("out",)
  assert [n.op for n in r.graph_nodes] == ["Add", "Relu"]

def _no_kernel_runs(fn, exc, *words):
  before = GlobalCounters.kernel_count
  with pytest.raises(exc) as e: fn()
  assert GlobalCounters.kernel_count == before, "an error was raised after kernels ran"
  for w in words: assert w in str(e.value), f"{w!r} not in {e.value}"

def test_input_errors_name_the_input():
  r = OnnxRunner(_model())
  _no_kernel_runs(lambda: r({"x": X}), ValueError, "'y'", "missing")
  _no_kernel_runs(lambda: r({"x": X, "y": Y, "z": Y}), ValueError, "'z'")
  _no_kernel_runs(lambda: r({"x": X.astype(np.int32), "y": Y}), TypeError, "'x'", "float", "int")
  _no_kernel_runs(lambda: r({"x": X[:, :2], "y": Y}), ValueError, "'x'", "(2, 2)")
  _no_kernel_runs(lambda: r({"x": X[None], "y": Y}), ValueError, "'x'")
  # the symbolic dim N binds once per call: x and y must agree on it
  _no_kernel_runs(lambda: r({"x": X, "y": np.ones((5, 3), np.float32)}), ValueError, "'y'", "N")
  assert r({"x": np.ones((5, 3), np.float32), "y": np.ones((5, 3), np.float32)})["out"].shape == (5, 3)

def test_scalars_and_lists_take_the_input_dtype():
  model = _model(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                 outputs=[helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])])
  assert OnnxRunner(model)({"x": [1, -2, 3], "y": 1})["out"].tolist() == [2, 0, 4]

def test_bad_files(tmp_path):
  missing = tmp_path / "nope.onnx"
  _no_kernel_runs(lambda: OnnxRunner(missing), FileNotFoundError, "nope.onnx")
  raw = _model().SerializeToString()
  (trunc := tmp_path / "trunc.onnx").write_bytes(raw[:len(raw) // 2])
  _no_kernel_runs(lambda: OnnxRunner(trunc), ValueError, "trunc.onnx")
  (text := tmp_path / "text.onnx").write_text("this is not a model\n" * 10)
  _no_kernel_runs(lambda: OnnxRunner(text), ValueError, "text.onnx")
  _no_kernel_runs(lambda: OnnxRunner(Tensor([1.0, 2.0])), TypeError, "uint8")

def test_unsupported_opset_operator_and_attribute():
  newer = _model(opset=17)
  newer.opset_import[0].version = 99
  _no_kernel_runs(lambda: OnnxRunner(newer), NotImplementedError, "opset 99")
  # an operator of a domain we don't know (the checker can't check it), and an ONNX operator we don't implement
  custom = _model(nodes=[helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("FancyRelu", ["s"], ["out"], domain="com.example")])
  custom.opset_import.append(helper.make_opsetid("com.example", 1))
  _no_kernel_runs(lambda: OnnxRunner(custom), NotImplementedError, "FancyRelu", "node 1", "com.example")
  from tinygrad.nn.onnx import onnx_ops
  saved = onnx_ops.pop("Relu")
  try: _no_kernel_runs(lambda: OnnxRunner(_model()), NotImplementedError, "'Relu'", "node 1")
  finally: onnx_ops["Relu"] = saved
  odd = _model(nodes=[helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["out"], flavour=3)])
  # onnx's checker knows every standard operator's attributes
  _no_kernel_runs(lambda: OnnxRunner(odd), ValueError, "flavour", "Relu")

def test_external_data(tmp_path):
  w = np.arange(12, dtype=np.float32).reshape(3, 4)
  model = _model(nodes=[helper.make_node("MatMul", ["x", "w"], ["out"])], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 outputs=[helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])], inits=[numpy_helper.from_array(w, "w")])
  onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
  assert (tmp_path / "weights.bin").stat().st_size == w.nbytes
  np.testing.assert_allclose(OnnxRunner(tmp_path / "m.onnx")({"x": X})["out"].numpy(), X @ w)

def test_gradients_reach_the_weights():
  w = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
  model = _model(nodes=[helper.make_node("MatMul", ["x", "w"], ["out"])], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 outputs=[helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 2])], inits=[numpy_helper.from_array(w, "w")])
  r = OnnxRunner(model)
  weight = r.graph_values["w"].requires_grad_()
  r({"x": X})["out"].sum().backward()
  np.testing.assert_allclose(weight.grad.numpy(), X.sum(0)[:, None].repeat(2, 1))

def test_if_subgraph_sees_outer_values():
  then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
  else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
  model = _model(nodes=[helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
                 inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                 outputs=[helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])])
  r = OnnxRunner(model)
  assert r({"c": True, "x": [1, 2, 3]})["out"].tolist() == [2, 4, 6]
  assert r({"c": False, "x": [1, 2, 3]})["out"].tolist() == [-1, -2, -3]

def test_import_error_without_onnx(monkeypatch):
  import builtins
  real = builtins.__import__
  def fake(name, *a, **k):
    if name == "onnx": raise ImportError("no onnx")
    return real(name, *a, **k)
  monkeypatch.setattr(builtins, "__import__", fake)
  from tinygrad.nn.onnx.model import import_onnx
  with pytest.raises(ImportError, match=r"pip install"): import_onnx()
