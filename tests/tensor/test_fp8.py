# float8 tensors on the CPU: every code decoded, casts from float32/float64/half/ints rounded exactly (round-half-even, finite values beyond
# the range saturating, infinity kept by e5m2 and NaN in the formats without one), and arithmetic rounded to the dtype after every op.
# The references are computed here from the formats' bit layouts (exponent bits, mantissa bits, bias, special codes) in numpy.
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, dtypes
from tinygrad.dtype import fp8_max

pytestmark = pytest.mark.cpu

# (exponent bits, mantissa bits, exponent bias, largest finite code, has infinity, NaN codes (without the sign))
LAYOUTS = {dtypes.fp8e4m3: (4, 3, 7, 0x7E, False, (0x7F,)), dtypes.fp8e5m2: (5, 2, 15, 0x7B, True, (0x7D, 0x7E, 0x7F)),
           dtypes.fp8e4m3fnuz: (4, 3, 8, 0x7F, False, ()), dtypes.fp8e5m2fnuz: (5, 2, 16, 0x7F, False, ())}
FP8S = pytest.mark.parametrize("dt", list(LAYOUTS), ids=lambda d: d.name)

def decode(dt) -> np.ndarray:
  """The float64 value of each of the 256 codes."""
  e, m, bias, _, has_inf, nans = LAYOUTS[dt]
  codes = np.arange(256)
  sign = np.where(codes & 0x80, -1.0, 1.0)
  exp, mant = (codes >> m) & ((1 << e) - 1), (codes & ((1 << m) - 1)).astype(np.float64)
  mag = np.where(exp == 0, np.ldexp(mant, 1 - bias - m), np.ldexp(mant + (1 << m), exp - bias - m))
  vals = sign * mag
  if has_inf: vals[[0x7C, 0xFC]] = [np.inf, -np.inf]
  for n in nans: vals[[n, n | 0x80]] = np.nan
  if dt in (dtypes.fp8e4m3fnuz, dtypes.fp8e5m2fnuz): vals[0x80] = np.nan   # no -0: its code is the one NaN
  return vals

def encode(dt, x:np.ndarray) -> np.ndarray:
  """The code of each float64 value: the nearest finite value (a tie takes the even code), beyond the largest one saturating."""
  _, _, _, max_code, has_inf, nans = LAYOUTS[dt]
  fnuz = dt in (dtypes.fp8e4m3fnuz, dtypes.fp8e5m2fnuz)
  grid = decode(dt)[:max_code + 1]   # the non-negative finite values, increasing with the code
  a = np.abs(x)
  hi = np.clip(np.searchsorted(grid, np.nan_to_num(a, posinf=0.0)), 1, max_code)
  lo = hi - 1
  with np.errstate(invalid="ignore"): dlo, dhi = np.abs(a - grid[lo]), np.abs(grid[hi] - a)   # inf - inf: specials are set below
  code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
  code = np.where(a > grid[max_code], max_code, code)
  neg = np.signbit(x)
  out = np.where(neg & ~(fnuz & (code == 0)), code | 0x80, code)
  nan_code = 0x80 if fnuz else (0x7F | np.where(neg, 0x80, 0))
  out = np.where(np.isinf(x), nan_code if not has_inf else np.where(neg, 0xFC, 0x7C), out)
  return np.where(np.isnan(x), nan_code, out).astype(np.uint8)

def codes_of(t:Tensor) -> np.ndarray: return t.bitcast(dtypes.uint8).numpy()

def assert_codes(dt, got:np.ndarray, want:np.ndarray, inputs):
  """got == want code for code, except that a NaN's sign is free (C and numpy may differ on the sign of the NaN that inf-inf makes)."""
  nan = np.isnan(decode(dt))
  bad = np.nonzero((got != want) & ~(nan[got] & nan[want]))[0]
  assert len(bad) == 0, f"{len(bad)} wrong codes, e.g. input {np.asarray(inputs)[bad[:5]]}: got {got[bad[:5]]}, want {want[bad[:5]]}"

def assert_values(got:np.ndarray, want:np.ndarray):
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
  np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])

def float32_probes(dt) -> np.ndarray:
  """Every finite value, the midpoints between neighbours, one float32 ulp either side of each, the range's edges and the specials."""
  vals = decode(dt)
  fin = np.unique(vals[np.isfinite(vals)])
  mids = (fin[:-1] + fin[1:]) / 2
  top = fin[-1] + (fin[-1] - fin[-2]) / 2   # halfway to the step beyond the largest value
  base = np.concatenate([fin, mids, [top, -top, 2 * top, fin[-1] * 1e3, 3e38, -3e38, 1e-30, -1e-30, 1e-45, 0.0, -0.0]]).astype(np.float32)
  around = np.concatenate([np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))])
  return np.concatenate([base, around, np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32)])

@FP8S
def test_every_code_decodes(dt):
  codes = np.arange(256, dtype=np.uint8)
  t = Tensor(codes).bitcast(dt)
  assert_values(t.cast(dtypes.float32).numpy().astype(np.float64), decode(dt))
  assert_values(t.numpy().astype(np.float64), decode(dt))   # numpy() of an fp8 Tensor: float32 values
  assert_values(t.cast(dtypes.float64).numpy(), decode(dt))
  assert_values(t.cast(dtypes.half).numpy().astype(np.float64), decode(dt))   # every fp8 value is a half

@FP8S
def test_every_code_round_trips(dt):
  vals = decode(dt)
  want = encode(dt, vals)   # the code itself, but a NaN code gives the format's NaN
  assert_codes(dt, codes_of(Tensor(vals.astype(np.float32)).cast(dt)), want, vals)
  # through a kernel that loads and stores fp8 (a copy of the bits stays bits)
  t = Tensor(np.arange(256, dtype=np.uint8)).bitcast(dt)
  assert_codes(dt, codes_of((t * 1).cast(dtypes.float32).cast(dt)), want, vals)

@FP8S
def test_float32_casts_round_exactly(dt):
  x = float32_probes(dt)
  assert_codes(dt, codes_of(Tensor(x).cast(dt)), encode(dt, x.astype(np.float64)), x)

@FP8S
def test_every_half_casts_exactly(dt):
  x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
  assert_codes(dt, codes_of(Tensor(x).cast(dt)), encode(dt, x.astype(np.float64)), x)

@FP8S
def test_float64_casts_round_once(dt):
  # just above or below a midpoint by far less than a float32 ulp: a double narrowed to float32 first would land on the midpoint and
  # round to even, the wrong way for half of these
  fin = np.unique(decode(dt)[np.isfinite(decode(dt))])
  mids = (fin[:-1] + fin[1:]) / 2
  x = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), mids, [1e300, -1e300, 1e-300]])
  assert_codes(dt, codes_of(Tensor(x, dtype=dtypes.float64).cast(dt)), encode(dt, x), x)

def test_float64_to_half_rounds_once():
  # the same double rounding for half: 1 + 2**-11 + 2**-40 is just above the midpoint between 1 and 1 + 2**-10
  x = np.array([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11 - 2.0**-40, -(2048 + 1 + 2.0**-30)], np.float64)
  np.testing.assert_array_equal(Tensor(x).cast(dtypes.half).numpy(), x.astype(np.float16))

@FP8S
def test_int_casts(dt):
  ints = np.arange(-70000, 70001, 7, dtype=np.int32)
  assert_codes(dt, codes_of(Tensor(ints).cast(dt)), encode(dt, ints.astype(np.float64)), ints)
  assert_codes(dt, codes_of(Tensor(ints.astype(np.int64)).cast(dt)), encode(dt, ints.astype(np.float64)), ints)
  small = np.arange(-128, 128, dtype=np.int8)
  assert_codes(dt, codes_of(Tensor(small).cast(dt)), encode(dt, small.astype(np.float64)), small)
  # to ints: truncation toward zero of the (finite) values
  vals = decode(dt)
  fin = np.isfinite(vals) & (np.abs(vals) < 2**31)
  got = Tensor(np.arange(256, dtype=np.uint8)).bitcast(dt).cast(dtypes.int32).numpy()
  np.testing.assert_array_equal(got[fin], np.trunc(vals[fin]).astype(np.int32))

@FP8S
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max"])
def test_arithmetic_rounds_to_the_dtype(dt, op):
  # all pairs of finite codes: each result is the exact result rounded to the dtype (float32's 24 bits make the float32 result
  # round the same way: at least 2*4+2 bits)
  vals = decode(dt)
  fin = np.nonzero(np.isfinite(vals))[0].astype(np.uint8)
  a_codes, b_codes = np.repeat(fin, len(fin)), np.tile(fin, len(fin))
  a, b = Tensor(a_codes).bitcast(dt), Tensor(b_codes).bitcast(dt)
  av, bv = vals[a_codes], vals[b_codes]
  fn = {"add": (lambda x, y: x + y, np.add), "sub": (lambda x, y: x - y, np.subtract), "mul": (lambda x, y: x * y, np.multiply),
        "div": (lambda x, y: x / y, np.divide),
        # MAX keeps a when a == b (so of 0 and -0 the first): (a < b or b is NaN) ? b : a
        "max": (lambda x, y: x.maximum(y), lambda x, y: np.where((x < y) | np.isnan(y), y, x))}[op]
  out = fn[0](a, b)
  assert out.dtype is dt
  with np.errstate(divide="ignore", invalid="ignore"): want = encode(dt, fn[1](av, bv))
  assert_codes(dt, codes_of(out), want, list(zip(av, bv)))

@FP8S
def test_fused_ops_round_after_each_op(dt):
  # (a * b) + c in fp8 rounds the product to fp8 before the add; sum and matmul accumulate in float32 and round once at the end (a
  # matmul's products are fp8 values: each rounded)
  a, b, c = np.array([1.25, 3.0, -0.75], np.float32), np.array([1.25, 1.75, 3.0], np.float32), np.array([0.125, 2.0, 1.0], np.float32)
  ta, tb, tc = (Tensor(v).cast(dt) for v in (a, b, c))
  q = lambda v: decode(dt)[encode(dt, np.asarray(v, np.float64))]   # noqa: E731
  np.testing.assert_array_equal((ta * tb + tc).numpy(), q(q(q(a) * q(b)) + q(c)))
  s = ta.sum()
  assert s.dtype is dt and s.item() == q(np.sum(q(a), dtype=np.float64))
  m = ta.reshape(1, 3) @ tb.reshape(3, 1)
  assert m.dtype is dt and m.item() == q(np.sum(q(q(a) * q(b)), dtype=np.float64))
  assert ta.cumsum().dtype is dt

@FP8S
def test_reduces_start_from_a_value_of_the_dtype(dt):
  # max/min reduces (and scatter_reduce's amax/amin) start from dt.min/dt.max: -inf would be NaN in the formats without an infinity
  vals = decode(dt)
  x = np.sort(vals[np.isfinite(vals)])[::7].astype(np.float32)
  t = Tensor(x).cast(dt)
  assert (t.max().item(), t.min().item()) == (x.max(), x.min())
  np.testing.assert_array_equal(t.reshape(-1, 1).expand(-1, 40).max(axis=1).numpy(), x)
  got = Tensor.zeros(2, dtype=dt).scatter_reduce(0, Tensor([0, 1, 0]), Tensor([-3.0, -2.0, -1.0]).cast(dt), "amin", include_self=False)
  np.testing.assert_array_equal(got.numpy(), [-3.0, -2.0])

@FP8S
def test_bitcasts(dt):
  codes = np.arange(256, dtype=np.uint8)
  t = Tensor(codes).bitcast(dt)
  np.testing.assert_array_equal(t.bitcast(dtypes.uint8).numpy(), codes)   # NaN codes keep their bits through a bitcast
  np.testing.assert_array_equal(t.bitcast(dtypes.int8).numpy(), codes.view(np.int8))
  np.testing.assert_array_equal(Tensor(codes.view(np.int8)).bitcast(dt).bitcast(dtypes.uint8).numpy(), codes)

@FP8S
@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=32, max_size=32))
def test_random_float32_casts(dt, xs):
  x = np.array(xs, np.float32)
  assert_codes(dt, codes_of(Tensor(x).cast(dt)), encode(dt, x.astype(np.float64)), x)

@FP8S
@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=32, max_size=32), st.lists(st.integers(0, 255), min_size=32, max_size=32))
def test_random_code_products(dt, ac, bc):
  # a * b + b over any codes, NaN and infinity included: the product is rounded to the dtype before the add
  a, b = np.array(ac, np.uint8), np.array(bc, np.uint8)
  vals = decode(dt)
  with np.errstate(invalid="ignore", over="ignore"): want = encode(dt, vals[encode(dt, vals[a] * vals[b])] + vals[b])
  ta, tb = Tensor(a).bitcast(dt), Tensor(b).bitcast(dt)
  assert_codes(dt, codes_of(ta * tb + tb), want, list(zip(vals[a], vals[b])))

def test_largest_finite_values():
  for dt, (_, _, _, max_code, _, _) in LAYOUTS.items():
    assert Tensor([1e6, -1e6]).cast(dt).numpy().tolist() == [decode(dt)[max_code], -decode(dt)[max_code]] == [fp8_max(dt), -fp8_max(dt)]
  assert math.isnan(Tensor([math.inf]).cast(dtypes.fp8e4m3).item()) and Tensor([-math.inf]).cast(dtypes.fp8e5m2).item() == -math.inf
