"""ONNX's float8 conversions (Cast/CastLike with saturate=0 or 1, QuantizeLinear to float8) from every source dtype, checked bit for bit
against onnx's reference evaluator on the values where rounding, saturation and overflow differ: the largest finite values, the
midpoints around them, infinities and NaN."""
import numpy as np
import pytest
pytestmark = pytest.mark.cpu
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from tinygrad import dtypes  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner  # noqa: E402

FP8 = {TensorProto.FLOAT8E4M3FN: dtypes.fp8e4m3, TensorProto.FLOAT8E5M2: dtypes.fp8e5m2, TensorProto.FLOAT8E4M3FNUZ: dtypes.fp8e4m3fnuz,
       TensorProto.FLOAT8E5M2FNUZ: dtypes.fp8e5m2fnuz}
# around e4m3fnuz's 240 (halfway 248), e4m3fn's 448 (464), the e5m2 formats' 57344 (61440), and ordinary values
PROBES = [0.0, -0.0, 1.0, -2.5, 0.3, 1e-5, 240.0, 244.0, 247.0, 248.0, 249.0, 255.0, 448.0, 456.0, 463.0, 464.0, 465.0, 480.0, 1000.0,
          -1000.0, 57344.0, 59392.0, 61439.0, 61440.0, 61441.0, 65504.0, -65504.0, 1e9, -1e9, np.inf, -np.inf, np.nan]

def _one_node(op:str, in_type:int, out_type:int, **attrs) -> onnx.ModelProto:
  inputs = [helper.make_tensor_value_info("x", in_type, [None])]
  if op == "QuantizeLinear": inits, names = [numpy_helper.from_array(np.array(2.0, np.float32), "s")], ["x", "s"]
  else: inits, names = [], ["x"]
  graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], op, inputs, [helper.make_tensor_value_info("y", out_type, [None])],
                            inits)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])

def _check(model:onnx.ModelProto, x:np.ndarray):
  want = ReferenceEvaluator(model).run(None, {"x": x})[0]
  got = OnnxRunner(model)({"x": x})["y"]
  got_bits, want_bits = got.bitcast(dtypes.uint8).numpy(), want.view(np.uint8)
  nan = np.isnan(want.astype(np.float32))
  assert np.isnan(got.numpy()[nan]).all(), f"x={x[nan]}: want NaN, got {got.numpy()[nan]}"
  bad = ~nan & (got_bits != want_bits)
  assert not bad.any(), f"x={x[bad]}: got {got.numpy()[bad]} ({got_bits[bad]}), want {want.astype(np.float32)[bad]} ({want_bits[bad]})"

@pytest.mark.parametrize("to", list(FP8), ids=lambda t: TensorProto.DataType.Name(t))
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name)
def test_cast(to, saturate, src):
  with np.errstate(over="ignore"): x = np.array(PROBES, dtype=src)
  _check(_one_node("Cast", helper.np_dtype_to_tensor_dtype(np.dtype(src)), to, to=to, saturate=saturate), x)

@pytest.mark.parametrize("to", list(FP8), ids=lambda t: TensorProto.DataType.Name(t))
def test_cast_from_ints(to):
  x = np.array([0, 1, -7, 240, 247, 248, 249, 448, 464, 465, 61440, 61441, -70000, 2**31 - 1], np.int32)
  for saturate in (0, 1): _check(_one_node("Cast", TensorProto.INT32, to, to=to, saturate=saturate), x)

@pytest.mark.parametrize("to", list(FP8), ids=lambda t: TensorProto.DataType.Name(t))
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_linear(to, saturate):
  # x / 2 rounded to the float8 format (its zero point is 0): the same saturation as Cast
  x = np.array(PROBES, np.float32) * 2
  _check(_one_node("QuantizeLinear", TensorProto.FLOAT, to, output_dtype=to, saturate=saturate), x)
