# The CPU's EXP2 as float32 arithmetic (tg_exp2f in tinygrad/renderer/cstyle.py) against the correctly rounded 2**x (numpy in float64,
# rounded once): a dense sweep of float32 inputs over the whole range where the result is neither 0 nor inf, subnormal results included,
# and the special values; the kernel must also be free of libm exp2f calls (the point: the compiler inlines and vectorizes it).
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Device
from tinygrad.codegen import get_program

pytestmark = pytest.mark.cpu

def _ulps(got:np.ndarray, ref:np.ndarray) -> np.ndarray:
  """Distance in float32 steps (ordered bit patterns: the sign-magnitude order mapped onto integers, so -0 and +0 are one value)."""
  def key(a):
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7fffffff), i)
  return np.abs(key(got) - key(ref))

def _sweep() -> np.ndarray:
  # every 389th float32 bit pattern from 0 to 200, either sign (all 2.2e9 were checked once against a numpy model of the same float32
  # arithmetic: at most 1 ulp; every one here would take minutes), dense in every binade, plus the neighbours of the integers and
  # half-integers, where the range reduction switches
  pos = np.arange(0, 0x43480000, 389, dtype=np.uint32).view(np.float32)     # 0 .. 200 (0x43480000 is 200.0)
  grid = np.arange(-300, 301, dtype=np.float32) / np.float32(2)
  near = np.concatenate([np.nextafter(grid, np.float32(np.inf)), np.nextafter(grid, np.float32(-np.inf)), grid])
  return np.concatenate([pos, -pos, near]).astype(np.float32)

def test_exp2_max_1ulp_dense():
  x = _sweep()
  got = Tensor(x).exp2().numpy()
  with np.errstate(over="ignore"): ref = np.exp2(x.astype(np.float64)).astype(np.float32)
  err = _ulps(got, ref)
  assert len(x) > 5_000_000
  assert err.max() <= 1, f"exp2({x[err.argmax()]!r}) = {got[err.argmax()]!r}, correctly rounded {ref[err.argmax()]!r}"
  # subnormal and overflowing results are part of the sweep
  assert (ref[np.isfinite(ref)] < np.finfo(np.float32).tiny).sum() > 1000 and np.isinf(ref).sum() > 1000

def test_exp2_special_values():
  tiny = np.finfo(np.float32).tiny
  x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 128.0, 127.99999, -126.0, -149.0, -149.5, -150.0, -151.0, 1e30, -1e30, 3e38, -3e38,
                tiny, -tiny, 1e-45, 0.5, -0.5, 1.5], dtype=np.float32)
  got = Tensor(x).exp2().numpy()
  with np.errstate(over="ignore"): ref = np.exp2(x.astype(np.float64)).astype(np.float32)
  assert np.isnan(got[0]) and _ulps(got[1:], ref[1:]).max() <= 1, (got, ref)
  # integers (f = 0: the polynomial is exactly 1) give exact powers of two, subnormal ones included; overflow is inf, underflow 0
  ints = np.isfinite(x) & (x == np.round(x))
  assert np.array_equal(got[ints], ref[ints]) and np.array_equal(got[1:3], [np.inf, 0.0]), (x[ints], got[ints], ref[ints])

def test_exp_softmax_sigmoid_through_poly():
  # exp, softmax and sigmoid are built on EXP2 (of x*log2(e), whose rounding is amplified by |x*log2(e)|: relative 2**-24*ln2 per unit of
  # the exponent, up to 60 here); their float32 results stay that close to numpy's float64 values
  x = np.random.default_rng(0).standard_normal((64, 257)).astype(np.float32) * 20
  t = Tensor(x)
  np.testing.assert_allclose(t.exp().numpy(), np.exp(x.astype(np.float64)), rtol=6e-6)
  e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
  np.testing.assert_allclose(t.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=6e-6, atol=1e-30)
  np.testing.assert_allclose(t.sigmoid().numpy(), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=6e-6)

def test_exp2_float64_keeps_libm():
  x = np.linspace(-1000, 1000, 4001)
  np.testing.assert_allclose(Tensor(x).exp2().numpy(), np.exp2(x), rtol=3e-16, atol=0)

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_exp2_half_bfloat16(dt):
  # the float32 result (<= 1 ulp of float32) rounded once to the dtype
  x = np.linspace(-30, 17, 4001).astype(np.float32)
  got = Tensor(x).cast(dt).exp2().cast(dtypes.float64).numpy()
  xin = Tensor(x).cast(dt).cast(dtypes.float64).numpy()
  ref = Tensor(np.exp2(xin)).cast(dt).cast(dtypes.float64).numpy()
  # a float32 result 1 ulp off can round to the neighbouring half/bfloat16 only on an exact tie: allow those, nothing else
  bad = got != ref
  assert bad.sum() <= 2, (xin[bad], got[bad], ref[bad])

def test_exp2_kernel_has_no_libm_call():
  # pinned C text: which function the renderer calls (its polynomial helper, defined once, not libm's exp2f) is what is tested
  src = _render(Tensor.empty(64).exp2())
  assert "__builtin_exp2f" not in src and "tg_exp2f(" in src and src.count("static inline float tg_exp2f") == 1
  assert "__builtin_exp2(" in _render(Tensor.empty(64, dtype=dtypes.float64).exp2())

def _render(t:Tensor) -> str:
  (ast,) = [si.ast for si in t.schedule()[0]]
  return get_program(ast, Device["CPU"].renderer).src
