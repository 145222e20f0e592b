# Gradients at the edge points where torch defines a value (abs and copysign at 0, acosh at 1, atanh at +-1, logaddexp with
# infinities and equal inputs, logcumsumexp with large and -inf entries), sigmoid at extreme inputs, and pow with constant int
# exponents; expected values are the derivatives written out by hand and evaluated in numpy float64.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

def value_and_grad(fn, xs, *others):
  x = Tensor(np.array(xs, dtype=np.float32), requires_grad=True)
  y = fn(x, *others)
  y.sum().backward()
  return y.numpy(), x.grad.numpy()

@pytest.mark.cpu
def test_abs_gradient_at_zero_is_zero():
  xs = np.array([0.0, -0.0, -1.5, 2.0], np.float32)
  val, grad = value_and_grad(lambda x: x.abs(), xs)
  np.testing.assert_array_equal(val, np.abs(xs))
  assert not np.signbit(val[1])  # |-0.0| is +0.0
  np.testing.assert_array_equal(grad, np.sign(xs))

@pytest.mark.cpu
def test_copysign_gradient_at_zero_is_zero():
  xs, ys = np.array([0.0, -1.0, 2.0, -3.0], np.float32), np.array([1.0, -1.0, 1.0, 1.0], np.float32)
  val, grad = value_and_grad(lambda x: x.copysign(Tensor(ys)), xs)
  np.testing.assert_array_equal(val, np.copysign(xs, ys))
  np.testing.assert_array_equal(grad, np.sign(xs) * np.sign(ys))

@pytest.mark.cpu
def test_acosh_gradient_at_one_is_inf():
  xs = np.array([1.0, 2.0, 10.0], np.float32)
  val, grad = value_and_grad(lambda x: x.acosh(), xs)
  np.testing.assert_allclose(val, np.arccosh(xs.astype(np.float64)), rtol=1e-6)
  with np.errstate(divide="ignore"): ref = 1 / np.sqrt(xs.astype(np.float64) ** 2 - 1)
  assert grad[0] == np.inf
  np.testing.assert_allclose(grad[1:], ref[1:], rtol=1e-6)

@pytest.mark.cpu
def test_acosh_gradient_below_minus_one_is_torchs():
  # torch's acosh'(x) = 1/sqrt(x*x-1) for x <= -1 too, where acosh(x) is NaN; NaN between -1 and 1; 0 at -inf
  xs = np.array([-1.0, -1.5, -2.0, -300.0, -np.inf, -0.5, 0.0], np.float32)
  val, grad = value_and_grad(lambda x: x.acosh(), xs)
  assert np.isnan(val).all()
  with np.errstate(divide="ignore", invalid="ignore"): ref = 1 / np.sqrt(xs.astype(np.float64) ** 2 - 1)
  np.testing.assert_allclose(grad, ref, rtol=1e-6)

@pytest.mark.cpu
def test_atanh_gradient_at_plus_minus_one_is_inf():
  xs = np.array([1.0, -1.0, 0.5, -0.25], np.float32)
  val, grad = value_and_grad(lambda x: x.atanh(), xs)
  with np.errstate(divide="ignore"):
    np.testing.assert_allclose(val, np.arctanh(xs.astype(np.float64)), rtol=1e-6)
    ref = 1 / (1 - xs.astype(np.float64) ** 2)
  assert list(grad[:2]) == [np.inf, np.inf]
  np.testing.assert_allclose(grad[2:], ref[2:], rtol=1e-6)

@pytest.mark.cpu
def test_logaddexp_gradients_with_infinities_and_equal_inputs():
  inf = np.inf
  a, b = np.array([0.0, 1.0, -inf, 2.0, 3.0], np.float32), np.array([-inf, inf, 0.0, 2.0, -1.0], np.float32)
  ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
  out = ta.logaddexp(tb)
  out.sum().backward()
  np.testing.assert_allclose(out.numpy(), np.logaddexp(a.astype(np.float64), b), rtol=1e-6)
  # d/da = 1 / (1 + exp(b - a)): half each where a == b
  with np.errstate(over="ignore"):
    ga, gb = 1 / (1 + np.exp(b.astype(np.float64) - a)), 1 / (1 + np.exp(a.astype(np.float64) - b))
  np.testing.assert_allclose(ta.grad.numpy(), ga, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(tb.grad.numpy(), gb, rtol=1e-6, atol=1e-7)

@pytest.mark.cpu
@pytest.mark.parametrize("xs", [[1000.0, -np.inf, 2000.0, -1000.0], [-np.inf, -np.inf, 0.0, 1.0], [80.0, 90.0, 100.0, -5.0]])
def test_logcumsumexp_large_and_minus_inf_entries(xs):
  x64 = np.array(xs, np.float64)
  val, grad = value_and_grad(lambda x: x.logcumsumexp(), xs)
  ref = np.logaddexp.accumulate(x64)
  np.testing.assert_allclose(val, ref, rtol=1e-6)
  # d/dx_j sum_i y_i = sum over i >= j of exp(x_j - y_i)
  with np.errstate(invalid="ignore"):
    ref_grad = np.array([sum(np.exp(x64[j] - ref[i]) if x64[j] != -np.inf else 0.0 for i in range(j, len(xs))) for j in range(len(xs))])
  assert np.isfinite(grad).all()
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)

@pytest.mark.cpu
def test_sigmoid_extreme_inputs():
  xs = np.array([-1e4, 1e4, -100.0, 100.0, 0.0, -88.0, 88.0], np.float32)
  val, grad = value_and_grad(lambda x: x.sigmoid(), xs)
  with np.errstate(over="ignore"): ref = 1 / (1 + np.exp(-xs.astype(np.float64)))
  assert not np.isnan(val).any() and np.isfinite(grad).all()
  assert val[0] == 0.0 and val[1] == 1.0
  np.testing.assert_allclose(val, ref, rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(grad, ref * (1 - ref), rtol=1e-4, atol=1e-30)

@pytest.mark.cpu
def test_hand_written_sigmoid_extreme_inputs():
  # exp(x) / (1 + exp(x)) as users write it: exp overflows to inf past 88, and inf/inf (inf * 1/inf) would be NaN in the value and
  # the gradient; small values keep their precision (1 - 1/(1+e) would round exp(-20)/(1+exp(-20)) to 0)
  xs = np.array([300.0, -300.0, 100.0, -100.0, 88.0, 20.0, -20.0, 0.5, 0.0, -3.0], np.float32)
  val, grad = value_and_grad(lambda x: x.exp() / (1 + x.exp()), xs)
  with np.errstate(over="ignore"): ref = 1 / (1 + np.exp(-xs.astype(np.float64)))
  np.testing.assert_allclose(val, ref, rtol=1e-6, atol=1e-30)
  # (the gradient is s - s*s there, as in torch: near s = 1 it cancels, so its error is absolute)
  np.testing.assert_allclose(grad, ref * (1 - ref), rtol=1e-5, atol=1e-7)
  assert np.isfinite(grad).all()

@pytest.mark.cpu
def test_ratio_with_infinite_input_is_its_limit():
  # x * (1/(1+x)) (and x/(1+x)) at x = inf is 1, the limit, not inf * 0; elsewhere as computed in float64
  xs = np.array([np.inf, 1e30, 3.0, 1.0, 0.5, 1e-30, 0.0, -0.5, -3.0], np.float32)
  x = Tensor(xs)
  x64 = xs.astype(np.float64)
  with np.errstate(invalid="ignore"): ref = np.where(np.isinf(x64), 1.0, x64 / (1 + x64))
  np.testing.assert_allclose((x * (1 + x).reciprocal()).numpy(), ref, rtol=1e-6, atol=0)
  np.testing.assert_allclose((x / (x + 1)).numpy(), ref, rtol=1e-6, atol=0)

@pytest.mark.cpu
@pytest.mark.parametrize("e", [2, 3, 0, -1])
def test_pow_constant_int_exponent_float(e):
  xs = np.array([0.0, -2.0, 3.0, 0.5], np.float32)
  val, grad = value_and_grad(lambda x: x ** e, xs)
  x64 = xs.astype(np.float64)
  with np.errstate(divide="ignore"):
    np.testing.assert_allclose(val, x64 ** e, rtol=1e-6)
    ref_grad = np.zeros_like(x64) if e == 0 else e * x64 ** (e - 1)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-6)

@pytest.mark.cpu
@pytest.mark.parametrize("e", [2, 3, 0])
def test_pow_constant_int_exponent_int(e):
  xs = np.array([0, -2, 3, 7], np.int32)
  out = Tensor(xs) ** e
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), xs ** e)

def test_pow_int_negative_exponent_raises():
  with pytest.raises(RuntimeError, match="negative integer power"): (Tensor([1, 2, 3]) ** -1).numpy()

@pytest.mark.cpu
@pytest.mark.parametrize("dtype,exps", [(dtypes.int32, (1, 2, 7, 13)), (dtypes.int64, (3, 39)), (dtypes.uint8, (5,))])
def test_int_pow_constant_exponent_is_exact_and_wraps_as_numpy(dtype, exps):
  # POW through a float rounded past 2**24 (11**7 was 19487172); numpy's integer power wraps in the dtype, and so does ours
  npdt = {dtypes.int32: np.int32, dtypes.int64: np.int64, dtypes.uint8: np.uint8}[dtype]
  xs = np.array([11, -3, 7, 0, 1, 2] if dtype is not dtypes.uint8 else [11, 3, 7, 0, 1, 2], dtype=npdt)
  for e in exps: np.testing.assert_array_equal((Tensor(xs, dtype=dtype) ** e).numpy(), xs ** e)
