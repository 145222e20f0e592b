# Regressions for the differences the opt-in torch group (`pytest -m torch`) found, checked here against numpy / math so CI (no torch)
# keeps them fixed: erf to 1 ulp, -0.0 kept by cat/sort/pad, the mean of ints in float32 whatever DEFAULT_FLOAT is.
import math
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes, Context

@pytest.mark.parametrize("device", DEVICES)
def test_erf_float64_to_an_ulp(device):
  x = np.concatenate([np.linspace(-7, 7, 1401), [0.999999, 1.0, 1.000001, -1.0, 5.99, 6.0, 6.01, 1e-300, -1e-8]])
  want = np.array([math.erf(v) for v in x])
  np.testing.assert_allclose(Tensor(x, device=device).erf().numpy(), want, rtol=4.5e-16, atol=0)

@pytest.mark.parametrize("device", DEVICES)
def test_erf_float32_and_specials(device):
  x = np.linspace(-5, 5, 2001, dtype=np.float32)
  want = np.array([math.erf(float(v)) for v in x])
  np.testing.assert_allclose(Tensor(x, device=device).erf().numpy(), want, rtol=2e-7, atol=1e-30)
  got = Tensor([np.nan, np.inf, -np.inf, -0.0, 30.0], device=device).erf().numpy()
  np.testing.assert_array_equal(got[1:], [1.0, -1.0, -0.0, 1.0])
  assert np.isnan(got[0]) and np.signbit(got[3])

@pytest.mark.parametrize("device", DEVICES)
def test_cat_and_pad_keep_negative_zero(device):
  a, b = np.array([-0.0, 1.0], np.float32), np.array([0.0, -0.0, -2.0], np.float32)
  got = Tensor(a, device=device).cat(Tensor(b, device=device)).numpy()
  np.testing.assert_array_equal(np.signbit(got), np.signbit(np.concatenate([a, b])))
  got = Tensor(a, device=device).pad((1, 1), value=-0.0).numpy()
  np.testing.assert_array_equal(np.signbit(got), np.signbit(np.pad(a, 1, constant_values=-0.0)))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_keeps_signed_zeros(device, descending):
  v = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0], np.float32)
  vals, idx = Tensor(v, device=device).sort(descending=descending)
  order = np.argsort(-v if descending else v, kind="stable")
  np.testing.assert_array_equal(idx.numpy(), order)
  np.testing.assert_array_equal(np.signbit(vals.numpy()), np.signbit(v[order]))

@pytest.mark.cpu
@pytest.mark.parametrize("default_float", ["HALF", "FLOAT"])
def test_mean_of_ints_is_float32(default_float):
  with Context(DEFAULT_FLOAT=default_float):
    for data in ([1, 2, 4], [60000, 60000], [True, False, False]):
      m = Tensor(data).mean()
      assert m.dtype is dtypes.float32
      np.testing.assert_allclose(m.numpy(), np.mean(np.array(data, dtype=np.float64)), rtol=1e-7)
    assert Tensor([1.0, 2.0]).mean().dtype is dtypes.default_float

def _grad(f, v):
  x = Tensor(np.array(v, np.float32), requires_grad=True)
  f(x).sum().backward()
  return x.grad.numpy()

@pytest.mark.cpu
def test_gradients_far_out_and_near_zero():
  # closed forms: sigmoid' = s(1-s) (0.14 and the 1/(1+exp(-x)) form give NaN at -100), asinh' = 1/sqrt(1+x*x) (log1p's exact branch
  # counted 1/w twice: 2.0 at 1e-8; log(0) in the unused branch made 0 NaN), softplus' = sigmoid, logsigmoid' = sigmoid(-x)
  v = np.array([-100.0, -20.0, -1e-8, 0.0, 1e-8, 3.0, 100.0])
  s = 1 / (1 + np.exp(-v))
  np.testing.assert_allclose(_grad(lambda x: x.sigmoid(), v), s * (1 - s), rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(_grad(lambda x: x.asinh(), v), 1 / np.sqrt(1 + v * v), rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(_grad(lambda x: x.softplus(), v), s, rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(_grad(lambda x: x.logsigmoid(), v), 1 - s, rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(Tensor(v.astype(np.float32)).sigmoid().numpy(), s, rtol=1e-6, atol=1e-38)
