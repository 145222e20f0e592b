"""OnnxRunner itself: the ways a model arrives, checks of the graph's inputs, errors for bad files and unsupported models raised before
any kernel runs, external data (also above protobuf's 2 GB), devices, DEBUGONNX, tinygrad 0.14's names and gradients."""
import pathlib
import subprocess
import sys
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.helpers import GlobalCounters, getenv  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner, OnnxValue, OnnxNode, Domain, OpSetId, onnx_ops, onnx_op, MAX_OPSET  # noqa: E402

W = np.array([0.5, -2.0, 1.0], dtype=np.float32)

def add_relu_model(opset:int=17, w:np.ndarray=W) -> onnx.ModelProto:
  """out = relu(x + w + y), x and y of shape (N, 3) sharing the symbolic N, w an initializer."""
  x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3]) for n in "xy")
  out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 3])
  nodes = [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Add", ["s", "y"], ["t"]), helper.make_node("Relu", ["t"], ["out"])]
  graph = helper.make_graph(nodes, "add_relu", [x, y], [out], [numpy_helper.from_array(w, "w")])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

def expected(x, y, w=W): return np.maximum(x + w + y, 0)

X = np.array([[1, 2, -3], [-4, 5, 6]], dtype=np.float32)
Y = np.array([[0.5, 0.5, 0.5], [1, 1, 1]], dtype=np.float32)

def raises_before_kernels(exc, match, fn):
  GlobalCounters.reset()
  with pytest.raises(exc, match=match): fn()
  assert GlobalCounters.kernel_count == 0, "the error came after kernels ran"

# ---- the ways a model arrives

@pytest.mark.parametrize("form", ["path", "str", "bytes", "tensor", "proto"])
def test_load_forms(tmp_path, form):
  model = add_relu_model()
  data = model.SerializeToString()
  (tmp_path / "m.onnx").write_bytes(data)
  src = {"path": tmp_path / "m.onnx", "str": str(tmp_path / "m.onnx"), "bytes": data, "proto": model,
         "tensor": Tensor(np.frombuffer(data, dtype=np.uint8).copy(), dtype=dtypes.uint8)}[form]
  out = OnnxRunner(src)({"x": X, "y": Y})
  assert list(out) == ["out"]
  np.testing.assert_allclose(out["out"].numpy(), expected(X, Y))

def test_load_wrong_kinds():
  with pytest.raises(TypeError, match="uint8"): OnnxRunner(Tensor([1.0, 2.0]))
  with pytest.raises(TypeError, match="int"): OnnxRunner(12)

# ---- graph input checks

def test_inputs_accept_tensors_lists_and_bind_dim_params():
  runner = OnnxRunner(add_relu_model())
  np.testing.assert_allclose(runner({"x": Tensor(X), "y": Y.tolist()})["out"].numpy(), expected(X, Y))
  # N is bound per call: another batch size is fine in the next one
  np.testing.assert_allclose(runner({"x": X[:1], "y": Y[:1]})["out"].numpy(), expected(X[:1], Y[:1]))

@pytest.mark.parametrize("inputs, exc, match", [
  ({"x": X}, ValueError, "'y' is missing"),
  ({"x": X, "y": Y, "z": X}, ValueError, "no input named 'z'"),
  ({"x": X.astype(np.int32), "y": Y}, TypeError, "'x' must have dtype float"),
  ({"x": Tensor(X, dtype=dtypes.half), "y": Y}, TypeError, "'x' must have dtype float, got half"),
  ({"x": X[None], "y": Y}, ValueError, r"'x' must have shape \('N', 3\), got \(1, 2, 3\)"),
  ({"x": np.ones((2, 4), np.float32), "y": Y}, ValueError, "'x' must have shape.*dim 1 differs"),
  # N is 2 from x, so y's 3 rows disagree
  ({"x": X, "y": np.ones((3, 3), np.float32)}, ValueError, r"'y' must have shape.*'N': 2.*dim 0 differs"),
  ({"x": None, "y": Y}, ValueError, "'x' is not optional"),
])
def test_input_errors(inputs, exc, match):
  runner = OnnxRunner(add_relu_model())
  raises_before_kernels(exc, match, lambda: runner(inputs))

def _io_model(value_info:onnx.ValueInfoProto, op:str) -> onnx.ModelProto:
  out = helper.make_tensor_value_info("out", TensorProto.BOOL if op == "OptionalHasElement" else TensorProto.INT64, [])
  graph = helper.make_graph([helper.make_node(op, ["v"], ["out"])], "io", [value_info], [out])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])

def test_optional_input():
  opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
  runner = OnnxRunner(_io_model(helper.make_value_info("v", opt_type), "OptionalHasElement"))
  assert runner.graph_inputs["v"].is_optional and runner.graph_inputs["v"].dtype == dtypes.float
  assert runner({"v": np.ones(2, np.float32)})["out"].item() is True
  assert runner({"v": None})["out"].item() is False
  assert runner({})["out"].item() is False
  raises_before_kernels(ValueError, "'v' must have shape", lambda: runner({"v": np.ones(3, np.float32)}))

def test_sequence_input():
  seq_type = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
  runner = OnnxRunner(_io_model(helper.make_value_info("v", seq_type), "SequenceLength"))
  assert runner.graph_inputs["v"].is_sequence
  assert runner({"v": [np.ones(2, np.float32), np.ones(3, np.float32), Tensor([1.0])]})["out"].item() == 3
  raises_before_kernels(TypeError, "'v' is a sequence", lambda: runner({"v": np.ones(2, np.float32)}))
  raises_before_kernels(TypeError, r"'v\[1\]' must have dtype float", lambda: runner({"v": [np.ones(2, np.float32), np.ones(2, np.int32)]}))

# ---- bad files and unsupported models: clear errors, nothing run

def test_bad_files(tmp_path):
  data = add_relu_model().SerializeToString()
  (tmp_path / "trunc.onnx").write_bytes(data[:len(data) // 2])
  raises_before_kernels(ValueError, "trunc.onnx is not a valid ONNX model", lambda: OnnxRunner(tmp_path / "trunc.onnx"))
  raises_before_kernels(ValueError, "not a valid ONNX model", lambda: OnnxRunner(data[:len(data) - 7]))
  (tmp_path / "text.onnx").write_text("this is a text file, not a model\n")
  raises_before_kernels(ValueError, "text.onnx is not a valid ONNX model", lambda: OnnxRunner(tmp_path / "text.onnx"))
  raises_before_kernels(FileNotFoundError, "missing.onnx", lambda: OnnxRunner(tmp_path / "missing.onnx"))

def test_opset_too_new():
  raises_before_kernels(NotImplementedError, f"opset {MAX_OPSET + 1}, newer than the newest supported \\({MAX_OPSET}\\)",
                        lambda: OnnxRunner(add_relu_model(opset=MAX_OPSET + 1)))

def test_unsupported_operator(monkeypatch):
  # Relu is valid ONNX, so onnx's checker passes it: the error is ours
  monkeypatch.delitem(onnx_ops, "Relu")
  raises_before_kernels(NotImplementedError, r"node 2 \(Relu\).*'Relu' is not supported", lambda: OnnxRunner(add_relu_model()))

def test_invalid_operator_and_attribute():
  model = add_relu_model()
  model.graph.node[2].op_type = "Frobnicate"
  raises_before_kernels(ValueError, "Frobnicate", lambda: OnnxRunner(model))
  model = add_relu_model()
  model.graph.node[2].attribute.append(helper.make_attribute("gain", 2.0))
  raises_before_kernels(ValueError, "gain", lambda: OnnxRunner(model))

def test_unknown_domain():
  model = add_relu_model()
  model.opset_import.append(helper.make_opsetid("org.example", 1))
  model.graph.node[2].domain = "org.example"
  raises_before_kernels(NotImplementedError, "domain 'org.example'", lambda: OnnxRunner(model))
  # importing a domain no node uses is fine
  model = add_relu_model()
  model.opset_import.append(helper.make_opsetid("org.example", 1))
  np.testing.assert_allclose(OnnxRunner(model)({"x": X, "y": Y})["out"].numpy(), expected(X, Y))

@pytest.fixture
def scale_op():
  """A test-only operator in the com.microsoft domain (which onnx's checker does not know, so only we check its attributes)."""
  onnx_op("TestOnlyScale", 1, Domain.MICROSOFT)(lambda x, scale=1.0: x * scale)
  yield
  del onnx_ops["TestOnlyScale"]

def _scale_model(**attrs) -> onnx.ModelProto:
  x, out = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])
  node = helper.make_node("TestOnlyScale", ["x"], ["out"], name="scaler", domain="com.microsoft", **attrs)
  graph = helper.make_graph([node], "scale", [x], [out])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])

def test_unknown_attribute(scale_op):
  runner = OnnxRunner(_scale_model(scale=3.0))
  np.testing.assert_allclose(runner({"x": W})["out"].numpy(), W * 3)
  runner = OnnxRunner(_scale_model(scale=3.0, bias=1.0))
  raises_before_kernels(NotImplementedError, r"'scaler' \(TestOnlyScale\): attribute 'bias' of TestOnlyScale is not supported",
                        lambda: runner({"x": W}))

# ---- external data

def test_external_data(tmp_path):
  w = np.arange(4096, dtype=np.float32).reshape(1024, 4)[:, :3].copy()[-1] / 1000
  model = add_relu_model(w=w)
  onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin", size_threshold=0)
  assert (tmp_path / "ext.bin").stat().st_size == w.nbytes
  out = OnnxRunner(tmp_path / "ext.onnx")({"x": X, "y": Y})["out"]
  np.testing.assert_allclose(out.numpy(), expected(X, Y, w))
  # the bytes alone don't say where the external file is
  with pytest.raises(ValueError, match="'w' is in an external file"): OnnxRunner((tmp_path / "ext.onnx").read_bytes())
  (tmp_path / "ext.bin").unlink()
  with pytest.raises(ValueError, match="ext.bin.*not regular file"): OnnxRunner(tmp_path / "ext.onnx")

def _big_external_model(d:pathlib.Path, n:int) -> None:
  """A model with a float32 weight of n elements in a sparse external file (only its first 12 bytes written): out = w[idx]."""
  w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n], data_location=TensorProto.EXTERNAL)
  for k, v in {"location": "big.bin", "offset": "0", "length": str(4 * n)}.items(): w.external_data.add(key=k, value=v)
  with open(d / "big.bin", "wb") as f:
    f.write(np.array([1.5, -2.5, 4.0], dtype=np.float32).tobytes())
    f.truncate(4 * n)
  idx, out = helper.make_tensor_value_info("idx", TensorProto.INT64, [2]), helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])
  graph = helper.make_graph([helper.make_node("Gather", ["w", "idx"], ["out"])], "big", [idx], [out], [w])
  (d / "big.onnx").write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())

BIG = 2**29 + 1024   # float32s: just over 2 GiB, beyond what one protobuf message can hold

@pytest.mark.skipif(not pathlib.Path("/proc/self/status").exists(), reason="reads the peak memory from Linux's /proc")
def test_over_2gb_loads_lazily(tmp_path):
  _big_external_model(tmp_path, BIG)
  # loading reads none of the 2 GiB: the peak memory of a process that only loads stays far below it
  # the peak is read from /proc (VmHWM, this process's own address space): getrusage's ru_maxrss survives exec, so a child of a big
  # pytest worker would report the worker's peak
  code = ("from tinygrad.nn.onnx import OnnxRunner; r = OnnxRunner(%r); w = r.graph_values['w']; assert w.shape == (%d,), w.shape; "
          "print(next(int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM:')))") % (str(tmp_path / "big.onnx"), BIG)
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr
  assert int(res.stdout.split()[-1]) < 1024 * 1024, f"peak RSS {res.stdout.split()[-1]} KiB while loading"

@pytest.mark.slow
def test_over_2gb_runs(tmp_path):
  _big_external_model(tmp_path, BIG)
  out = OnnxRunner(tmp_path / "big.onnx")({"idx": np.array([2, 0], dtype=np.int64)})["out"]
  np.testing.assert_array_equal(out.numpy(), np.array([4.0, 1.5], dtype=np.float32))

# ---- devices, DEBUGONNX, tinygrad 0.14's names, gradients

def test_to_device():
  runner = OnnxRunner(add_relu_model()).to("CPU")
  assert runner.graph_values["w"].device == "CPU"
  out = runner({"x": X, "y": Y})["out"]
  assert out.device == "CPU"
  np.testing.assert_allclose(out.numpy(), expected(X, Y))

def test_debugonnx(capsys, monkeypatch):
  runner = OnnxRunner(add_relu_model())
  runner({"x": X, "y": Y}, debug=1)
  lines = capsys.readouterr().out.splitlines()
  assert [ln.split()[1] for ln in lines] == ["Add", "Add", "Relu"]
  monkeypatch.setenv("DEBUGONNX", "1")
  getenv.cache_clear()
  try:
    runner({"x": X, "y": Y})
    assert len(capsys.readouterr().out.splitlines()) == 3
  finally:
    monkeypatch.delenv("DEBUGONNX")
    getenv.cache_clear()

def test_014_names():
  runner = OnnxRunner(add_relu_model())
  assert runner.graph_inputs == {"x": OnnxValue(("N", 3), dtypes.float), "y": OnnxValue(("N", 3), dtypes.float)}
  assert runner.graph_outputs == ("out",)
  assert [n.op for n in runner.graph_nodes] == ["Add", "Add", "Relu"] and all(isinstance(n, OnnxNode) for n in runner.graph_nodes)
  assert runner.graph_nodes[0].opset_id == OpSetId(Domain.ONNX, 17) and runner.graph_nodes[0].inputs == ("x", "w")
  np.testing.assert_array_equal(runner.graph_values["w"].numpy(), W)
  assert OpSetId(Domain.ONNX, 13) in onnx_ops["Softmax"]

def test_gradients_reach_initializers_and_inputs():
  runner = OnnxRunner(add_relu_model())
  w = runner.graph_values["w"].requires_grad_()
  x = Tensor(X, requires_grad=True)
  runner({"x": x, "y": Y})["out"].sum().backward()
  active = (X + W + Y > 0).astype(np.float32)
  np.testing.assert_allclose(x.grad.numpy(), active)
  np.testing.assert_allclose(w.grad.numpy(), active.sum(0))

# ---- shapes computed from inputs' shapes and constants: read once per input shape, so TinyJit can capture the graph

def _bert_inputs(seed:int, batch:int, seq:int) -> dict:
  rng = np.random.default_rng(seed)
  return {"input_ids": rng.integers(0, 50, (batch, seq)).astype(np.int64), "attention_mask": np.ones((batch, seq), np.int64)}

def test_shape_computations_follow_input_shapes():
  from tests.helpers.onnx_models import bert
  model = bert(layers=1, dim=16, heads=2, ffn=32, vocab=50, max_seq=16)
  runner, fresh = OnnxRunner(model), lambda inputs: OnnxRunner(model)(inputs)["hidden_states"].numpy()
  # seq 8, then 12 (a new Range limit and Reshape), then 8 again: each as a runner that never ran another shape computes it
  for seq in (8, 12, 8):
    inputs = _bert_inputs(seq, 2, seq)
    np.testing.assert_allclose(runner(inputs)["hidden_states"].numpy(), fresh(inputs), rtol=1e-5, atol=1e-5)

def test_tinyjit_captures_a_model_with_shape_computations():
  from tinygrad import TinyJit
  from tests.helpers.onnx_models import bert
  model = bert(layers=1, dim=16, heads=2, ffn=32, vocab=50, max_seq=16)
  runner, reference = OnnxRunner(model), OnnxRunner(model)
  jit = TinyJit(lambda **kw: runner(kw)["hidden_states"].realize())
  for seed in range(4):
    inputs = _bert_inputs(seed, 2, 8)
    got = jit(**{k: Tensor(v).realize() for k, v in inputs.items()}).numpy()
    np.testing.assert_allclose(got, reference(inputs)["hidden_states"].numpy(), rtol=1e-5, atol=1e-5)
  assert jit.captured is not None
