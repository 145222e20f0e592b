# Tensor's elementwise ops (unary math, activations, binary and ternary ops) against numpy: forward values over ordinary and edge
# inputs (nan, +-inf, +-0, huge, tiny), result dtypes per input dtype, IEEE NaN behaviour of comparisons and max/min, and errors.
import math
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes

pytestmark = pytest.mark.cpu
NAN, INF = float("nan"), float("inf")
EDGE = [NAN, INF, -INF, 0.0, -0.0, 1e30, -1e30, 3e38, 1e-30, -1e-30, 1e-42, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 3.0, 20.0, -20.0,
        88.0, 100.0, -100.0, 1e10]
ORDINARY = list(np.linspace(-6, 6, 49))
X = np.array(EDGE + ORDINARY, dtype=np.float32)
UNIT = np.array([NAN, INF, -INF, 0.0, -0.0, 1e-30, 1e-8, -1e-8, 1.0, -1.0, 1.0000001, -1.5, 2.0] + list(np.linspace(-0.999, 0.999, 41)),
                dtype=np.float32)

def _erf(x): return np.vectorize(math.erf, otypes=[np.float64])(x)
def _softplus(x, beta=1.0): return np.logaddexp(0, beta * x) / beta
def _sigmoid(x): return 1 / (1 + np.exp(-x))
def _round_half_even(x): return np.round(x)
def _elu(x, alpha=1.0): return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))
def _gelu_tanh(x): return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
def _gelu_none(x): return 0.5 * x * (1 + _erf(x / math.sqrt(2)))

# name, numpy reference (in float64, rounded to float32 for the comparison), inputs
UNARY = [
  ("sin", np.sin, X), ("cos", np.cos, X), ("tan", np.tan, X), ("exp", np.exp, X), ("log", np.log, X), ("log2", np.log2, X),
  ("log10", np.log10, X), ("sqrt", np.sqrt, X), ("rsqrt", lambda x: 1 / np.sqrt(x), X), ("reciprocal", np.reciprocal, X),
  ("sinh", np.sinh, X), ("cosh", np.cosh, X), ("tanh", np.tanh, X), ("atan", np.arctan, X), ("asinh", np.arcsinh, X),
  ("acosh", np.arccosh, X), ("asin", np.arcsin, UNIT), ("acos", np.arccos, UNIT), ("atanh", np.arctanh, UNIT), ("erf", _erf, X),
  ("round", _round_half_even, X), ("sign", np.sign, X), ("abs", np.abs, X), ("neg", np.negative, X), ("trunc", np.trunc, X),
  ("floor", np.floor, X), ("ceil", np.ceil, X), ("square", np.square, X),
  ("relu", lambda x: np.maximum(x, 0), X), ("relu6", lambda x: np.clip(x, 0, 6), X), ("sigmoid", _sigmoid, X),
  ("hardsigmoid", lambda x: np.clip(x / 6 + 0.5, 0, 1), X), ("hardswish", lambda x: x * np.clip(x + 3, 0, 6) / 6, X),
  ("hardtanh", lambda x: np.clip(x, -1, 1), X), ("leaky_relu", lambda x: np.where(x < 0, 0.01 * x, x), X), ("elu", _elu, X),
  ("celu", _elu, X), ("selu", lambda x: 1.0507 * _elu(x, 1.67326), X), ("gelu", _gelu_tanh, X), ("quick_gelu", lambda x: x * _sigmoid(1.702 * x), X),
  ("silu", lambda x: x * _sigmoid(x), X), ("swish", lambda x: x * _sigmoid(x), X), ("mish", lambda x: x * np.tanh(_softplus(x)), X),
  ("softplus", _softplus, X), ("logsigmoid", lambda x: -_softplus(-x), X), ("softsign", lambda x: x / (1 + np.abs(x)), X),
]

def _check(got:np.ndarray, want:np.ndarray, rtol:float, atol:float, x:np.ndarray):
  want = want.astype(got.dtype)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN positions differ for inputs {x}")
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"inputs {x}")

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,ref,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32(name, ref, x):
  got = getattr(Tensor(x), name)().numpy()
  assert got.dtype == np.float32
  _check(got, ref(x.astype(np.float64)), 2e-6, 1e-7 if name not in ("erf", "gelu") else 2e-7, x)

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,ref,x", [u for u in UNARY if u[0] not in ("erf", "gelu")],  # erf: float32-grade fit
                         ids=lambda u: u if isinstance(u, str) else "")
def test_unary_float64(name, ref, x):
  x = x.astype(np.float64)
  got = getattr(Tensor(x, dtype=dtypes.float64), name)().numpy()
  assert got.dtype == np.float64
  _check(got, ref(x), 1e-12, 1e-300, x)

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,ref,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float16(name, ref, x):
  x = x.astype(np.float16)
  got = getattr(Tensor(x, dtype=dtypes.float16), name)().numpy()
  assert got.dtype == np.float16
  _check(got, ref(x.astype(np.float64)), 3e-3, 1e-3, x)

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,ref,x", [u for u in UNARY if u[0] in ("sin", "cos", "tan", "tanh", "erf", "atan", "round", "sign", "sigmoid", "relu",
                                                                     "softplus", "asinh", "gelu")], ids=lambda u: u if isinstance(u, str) else "")
def test_unary_python_device(name, ref, x):
  got = getattr(Tensor(x, device="PYTHON"), name)().numpy()
  _check(got, ref(x.astype(np.float64)), 2e-6, 2e-7, x)

def test_gelu_exact():
  np.testing.assert_allclose(Tensor(X[30:]).gelu(approximate="none").numpy(), _gelu_none(X[30:].astype(np.float64)), rtol=1e-6, atol=2e-7)

def test_activation_parameters():
  x = np.array(ORDINARY, dtype=np.float32)
  t = Tensor(x)
  np.testing.assert_allclose(t.softplus(beta=3.0).numpy(), _softplus(x.astype(np.float64), 3.0), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(t.leaky_relu(0.2).numpy(), np.where(x < 0, 0.2 * x, x), rtol=1e-6)
  np.testing.assert_allclose(t.elu(0.5).numpy(), _elu(x.astype(np.float64), 0.5), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(t.celu(2.0).numpy(), np.maximum(x, 0) + np.minimum(0, 2.0 * np.expm1(x / 2.0)), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(t.hardtanh(-2, 3).numpy(), np.clip(x, -2, 3))
  np.testing.assert_allclose(t.hardsigmoid(0.2, 0.3).numpy(), np.clip(0.2 * x + 0.3, 0, 1), rtol=1e-6)

def test_large_argument_trig():
  # the argument reduction must be exact: pi/2 - x rounded to float32 would give cos(1e10) = 0.4875
  for dt, npdt in ((dtypes.float32, np.float32), (dtypes.float64, np.float64)):
    x = np.array([1e10, -1e10, 3e38, 1e20, 12345.678, 1e6 + 0.5, 2.0, -2.0, 1.9999999], dtype=npdt)
    for name, ref in (("cos", np.cos), ("sin", np.sin), ("tan", np.tan)):
      np.testing.assert_allclose(getattr(Tensor(x, dtype=dt), name)().numpy(), ref(x), rtol=1e-5 if npdt is np.float32 else 1e-12, err_msg=name)
  assert abs(Tensor([1e10]).cos().item() - 0.8731) < 1e-4
  big = np.array([1e300, -1.7e308], dtype=np.float64)
  np.testing.assert_allclose(Tensor(big, dtype=dtypes.float64).cos().numpy(), np.cos(big), rtol=1e-9)

@pytest.mark.parametrize("name,ref", [("sinh", np.sinh), ("tanh", np.tanh), ("asinh", np.arcsinh), ("atanh", np.arctanh), ("atan", np.arctan),
                                      ("asin", np.arcsin), ("erf", _erf), ("sin", np.sin), ("tan", np.tan)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_small_arguments_keep_relative_precision(name, ref):
  x = np.array([1e-8, -1e-8, 1e-20, 3e-5], dtype=np.float32)
  np.testing.assert_allclose(getattr(Tensor(x), name)().numpy(), ref(x.astype(np.float64)), rtol=2e-6)

def test_round_half_to_even():
  x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 2.5000002, 8388607.5, 8388609.0, 1e30, -3.5], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).round().numpy(), np.round(x))

@pytest.mark.parametrize("f,ref", [(lambda t: t.isnan(), np.isnan), (lambda t: t.isinf(), np.isinf), (lambda t: t.isfinite(), np.isfinite),
                                   (lambda t: t.isinf(detect_negative=False), np.isposinf), (lambda t: t.isinf(detect_positive=False), np.isneginf),
                                   (lambda t: t.isinf(False, False), lambda x: np.zeros(x.shape, bool))],
                         ids=["isnan", "isinf", "isfinite", "isposinf", "isneginf", "isinf_none"])
def test_isnan_isinf_isfinite(f, ref):
  x = np.array([NAN, INF, -INF, 0.0, -1.0, 3e38], dtype=np.float32)
  np.testing.assert_array_equal(f(Tensor(x)).numpy(), ref(x))

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.bool, dtypes.uint8], ids=str)
def test_isnan_isinf_isfinite_non_float(dt):
  i = Tensor([0, 1, 1], dtype=dt)
  assert i.isnan().dtype is dtypes.bool and i.isinf().dtype is dtypes.bool and i.isfinite().dtype is dtypes.bool
  assert i.isnan().tolist() == [False] * 3 and i.isinf().tolist() == [False] * 3 and i.isfinite().tolist() == [True] * 3

# ***** NaN and IEEE comparisons *****

A = np.array([NAN, 1.0, NAN, -INF, INF, 0.0, -0.0, 2.0, -3.0], dtype=np.float32)
B = np.array([1.0, NAN, NAN, INF, INF, -0.0, 0.0, 2.0, 5.0], dtype=np.float32)

@pytest.mark.parametrize("device", DEVICES)
def test_comparisons_ieee(device):
  a, b = Tensor(A, device=device), Tensor(B, device=device)
  for got, want in (((a < b), A < B), ((a > b), A > B), ((a <= b), A <= B), ((a >= b), A >= B), ((a == b), A == B), ((a != b), A != B),
                    ((a >= 1.0), A >= 1.0), ((a <= 1.0), A <= 1.0), ((2.0 >= a), 2.0 >= A), ((2.0 <= a), 2.0 <= A)):
    np.testing.assert_array_equal(got.numpy(), want)

def test_int_comparisons_unchanged():
  a, b = np.array([1, 2, 3, -5], np.int32), np.array([2, 2, 1, -5], np.int32)
  np.testing.assert_array_equal((Tensor(a) >= Tensor(b)).numpy(), a >= b)
  np.testing.assert_array_equal((Tensor(a) <= Tensor(b)).numpy(), a <= b)

@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates(device):
  a, b = Tensor(A, device=device), Tensor(B, device=device)
  np.testing.assert_array_equal(a.maximum(b).numpy(), np.maximum(A, B))
  np.testing.assert_array_equal(a.minimum(b).numpy(), np.minimum(A, B))
  np.testing.assert_array_equal(a.relu().numpy(), np.maximum(A, 0))
  np.testing.assert_array_equal(a.clamp(-1, 1).numpy(), np.clip(A, -1, 1))
  np.testing.assert_array_equal(a.maximum(1.0).numpy(), np.maximum(A, 1.0))
  np.testing.assert_array_equal(a.minimum(1.0).numpy(), np.minimum(A, 1.0))

def test_nan_constant_folding():
  # constants fold at compile time: the fold must agree with the kernel
  assert math.isnan(Tensor(1.0).maximum(NAN).item()) and math.isnan(Tensor(NAN).maximum(1.0).item())
  assert math.isnan(Tensor(1.0).minimum(NAN).item()) and math.isnan(Tensor(NAN).minimum(1.0).item())
  assert (Tensor(NAN) >= 1.0).item() is False and (Tensor(1.0) <= NAN).item() is False

# ***** binary and ternary *****

P = np.array([NAN, INF, -INF, 0.0, -0.0, 1e30, -1e30, 1e-30, 0.5, -0.5, 3.0, -3.0, 88.0, -100.0], dtype=np.float32)
Q = np.array([1.0, INF, INF, -0.0, 0.0, 1e30, 2.0, -1e-30, -2.0, 100.0, -3.0, NAN, 90.0, -101.0], dtype=np.float32)

BINARY = [("add", lambda p, q: p + q, np.add), ("sub", lambda p, q: p - q, np.subtract), ("mul", lambda p, q: p * q, np.multiply),
          ("div", lambda p, q: p / q, np.divide), ("pow", lambda p, q: p ** q, np.power), ("maximum", lambda p, q: p.maximum(q), np.maximum),
          ("minimum", lambda p, q: p.minimum(q), np.minimum), ("copysign", lambda p, q: p.copysign(q), np.copysign),
          ("logaddexp", lambda p, q: p.logaddexp(q), np.logaddexp), ("lerp", lambda p, q: p.lerp(q, 0.25), lambda a, b: a + (b - a) * 0.25),
          ("mod", lambda p, q: p % q, np.mod), ("fmod", lambda p, q: p.fmod(q), np.fmod)]

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,f,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("device", DEVICES)
def test_binary_float(device, name, f, ref):
  pd, qd = P.astype(np.float64), Q.astype(np.float64)
  got, want = f(Tensor(P, device=device), Tensor(Q, device=device)).numpy(), ref(pd, qd)
  if name in ("mod", "fmod"):  # x - trunc(x/y)*y: exact only where x/y is small
    sel = np.isfinite(pd / qd) & (np.abs(pd / qd) < 1e6)
    got, want = got[sel], want[sel]
  _check(got, want, 2e-6, 1e-30, P)

def test_copysign_signbit_and_dtypes():
  np.testing.assert_array_equal(np.signbit(Tensor([1.0, 1.0, -2.0]).copysign(Tensor([-0.0, 0.0, -NAN])).numpy()), [True, False, True])
  i = Tensor([3, -4, 5], dtype=dtypes.int32).copysign(Tensor([-1, 2, 0], dtype=dtypes.int32))
  assert i.dtype is dtypes.int32 and i.tolist() == [-3, 4, 5]
  assert Tensor([True, False]).copysign(Tensor([True, True])).dtype is dtypes.bool
  assert Tensor([1.0, 2.0]).copysign(-1).tolist() == [-1.0, -2.0]
  assert Tensor([1.0], dtype=dtypes.float16).copysign(-1.0).dtype is dtypes.float16

@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 1e-3, "atol": 0.0}, {"rtol": 0.0, "atol": 0.2}], ids=str)
def test_isclose(kw):
  a = np.array([1.0, 1.0, NAN, INF, INF, -INF, 1e10, 0.0, 1e-9], dtype=np.float32)
  b = np.array([1.0 + 1e-6, 1.1, NAN, INF, -INF, -INF, 1e10 + 1e5, 1e-9, 0.0], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), **kw).numpy(), np.isclose(a, b, **kw))

def test_allclose():
  a, b = np.array([1.0, NAN, INF], dtype=np.float32), np.array([1.0 + 1e-6, NAN, INF], dtype=np.float32)
  for kw in ({}, {"equal_nan": True}):
    got = Tensor(a).allclose(Tensor(b), **kw)
    assert got.shape == () and got.dtype is dtypes.bool and got.item() == np.allclose(a, b, **kw)

def test_isclose_int_bool():
  assert Tensor([1, 2], dtype=dtypes.int32).isclose(Tensor([1, 3], dtype=dtypes.int32)).tolist() == [True, False]
  assert Tensor([True, False]).isclose(Tensor([True, True])).tolist() == [True, False]

def test_masked_fill_and_where():
  x = Tensor([[1.0, 2.0], [3.0, 4.0]])
  m = Tensor([True, False])
  assert x.masked_fill(m, -1).tolist() == [[-1.0, 2.0], [-1.0, 4.0]]
  assert x.masked_fill(m, Tensor(NAN)).numpy()[0, 0] != x.masked_fill(m, Tensor(NAN)).numpy()[0, 0]
  assert x.masked_fill(m, 7).dtype is dtypes.float32
  assert Tensor([1, 2], dtype=dtypes.int32).masked_fill(Tensor([False, True]), 9).tolist() == [1, 9]
  with pytest.raises(RuntimeError, match="broadcast|shape"): x.masked_fill(Tensor([True, False, True]), 0)
  with pytest.raises(TypeError, match="masked_fill needs a Tensor mask, got list"): x.masked_fill([True, False], 0)

def test_lerp_tensor_weight():
  s, e, w = np.float32([0, 1, 2]), np.float32([10, -1, 2]), np.float32([0.5, 0.25, 1.0])
  np.testing.assert_allclose(Tensor(s).lerp(Tensor(e), Tensor(w)).numpy(), s + (e - s) * w, rtol=1e-6)

# ***** dtypes *****

FLOAT_OUT = ["sin", "cos", "tan", "exp", "log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "sinh", "cosh", "tanh", "atan", "asin", "acos",
             "asinh", "acosh", "atanh", "erf", "sigmoid", "hardsigmoid", "hardswish", "leaky_relu", "elu", "celu", "selu", "gelu", "quick_gelu",
             "silu", "swish", "mish", "softplus", "logsigmoid", "softsign"]
SAME_OUT = ["relu", "relu6", "hardtanh", "abs", "sign", "trunc", "floor", "ceil", "round", "square", "neg"]

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint8, dtypes.int64])
def test_result_dtypes(dt):
  t = Tensor([1, 0, 2], dtype=dt)
  for name in FLOAT_OUT:
    want = dt if dtypes.is_float(dt) else dtypes.float32
    assert getattr(t, name)().dtype is want, name
  for name in SAME_OUT:
    if name == "neg" and dtypes.is_unsigned(dt): continue
    assert getattr(t, name)().dtype is dt, name
  for name in ("isnan", "isinf", "isfinite"): assert getattr(t, name)().dtype is dtypes.bool

def test_int_values():
  x = np.array([-7, -1, 0, 3, 100], dtype=np.int32)
  t = Tensor(x)
  np.testing.assert_array_equal(t.sign().numpy(), np.sign(x))
  np.testing.assert_array_equal(t.relu6().numpy(), np.clip(x, 0, 6))
  np.testing.assert_array_equal(t.hardtanh().numpy(), np.clip(x, -1, 1))
  np.testing.assert_array_equal(t.round().numpy(), x)
  np.testing.assert_allclose(t.sigmoid().numpy(), _sigmoid(x.astype(np.float64)), rtol=1e-6)
  np.testing.assert_array_equal(Tensor([0, 5, 255], dtype=dtypes.uint8).sign().numpy(), [0, 1, 1])
  assert Tensor([True, False]).sign().tolist() == [True, False]

def test_binary_dtypes():
  f16, i32 = Tensor([1.0], dtype=dtypes.float16), Tensor([1], dtype=dtypes.int32)
  assert f16.logaddexp(f16).dtype is dtypes.float16 and i32.logaddexp(i32).dtype is dtypes.float32
  assert f16.maximum(i32).dtype is dtypes.float16 and i32.maximum(i32).dtype is dtypes.int32
  assert (f16 >= i32).dtype is dtypes.bool and (i32 <= 2.5).dtype is dtypes.bool
  assert i32.lerp(Tensor([3.0]), 0.5).dtype is dtypes.float32

# ***** errors *****

def test_errors():
  with pytest.raises(RuntimeError, match="approximate='fast'"): Tensor([1.0]).gelu(approximate="fast")
  with pytest.raises(RuntimeError, match="shape|broadcast"): Tensor([1.0, 2.0]).copysign(Tensor([1.0, 2.0, 3.0]))
  with pytest.raises(RuntimeError, match="shape|broadcast"): Tensor([1.0, 2.0]).logaddexp(Tensor([1.0, 2.0, 3.0]))
  with pytest.raises(RuntimeError, match="shape|broadcast"): Tensor([1.0, 2.0]).isclose(Tensor([1.0, 2.0, 3.0]))
  with pytest.raises(TypeError, match="str"): Tensor([1.0]).copysign("x")
  with pytest.raises(RuntimeError, match="at least one"): Tensor([1.0]).clamp()
  with pytest.raises(RuntimeError, match="needs int"): Tensor([1.0]) & Tensor([1.0])
  with pytest.raises(RuntimeError, match="needs int"): Tensor([1.0]) << 1
  with pytest.raises(RuntimeError, match="bool"): Tensor([True]) - Tensor([False])
  with pytest.raises(RuntimeError, match="rounding_mode"): Tensor([1.0]).div(2, rounding_mode="up")
  with pytest.raises(RuntimeError, match="negative integer powers"): Tensor([2], dtype=dtypes.int32) ** -1
  assert (Tensor([2.0]) ** -1).item() == 0.5 and (Tensor([2]) ** 2).tolist() == [4]

def test_ufix():
  t = Tensor([1.0, 2.0])
  assert t.ufix(t) is t
  u = t.ufix(3)
  assert u.shape == () and u.device == t.device and u.item() == 3
  assert t.ufix(2.5).dtype == dtypes.weakfloat   # a Python value is weak, as in 0.14
  with pytest.raises(TypeError): t.ufix("x")
