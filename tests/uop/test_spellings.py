# One spelling per op (tinygrad/mixin/mathtraits.py): a - b is ADD(a, MUL(b, -1)), a / b is MUL(a, RECIPROCAL(b)), a == b a negated CMPNE,
# minimum a max of negations, a >= b for floats (b < a) | (a == b). The numbers are numpy's on CPU and PYTHON, graphs built with UOp
# arithmetic run like Tensor's, and the C is the plain operator (the codegen's render forms), not the spelled-out form.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes
from tinygrad.dtype import _to_np_dtype
from tinygrad.engine.realize import get_spec

F = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-45, 7.0, -7.25, 0.5], np.float32)
G = np.array([0.5, 3.0, -0.0, 0.0, 2.0, np.inf, 1.0, -3e38, 2.0, 7.0, 0.0, np.nan], np.float32)

def ints(dt):
  info = np.iinfo(_to_np_dtype(dt))
  a = np.array([0, 1, -1, 5, info.min + 1, info.max, 7, -3, 100, 2], np.int64)
  b = np.array([3, 1, 2, -5, 1, info.max, -7, -3, 9, info.min + 1], np.int64)
  return [np.clip(x, info.min, info.max).astype(_to_np_dtype(dt)) for x in (a, b)]

EXACT = {  # name: (tinygrad, numpy) on two operands; every one is exact (no rounding beyond the op's own)
  "sub": (lambda x, y: x - y, lambda a, b: a - b), "rsub": (lambda x, y: 5 - x, lambda a, b: a.dtype.type(5) - a),
  "sub_const": (lambda x, y: x - 3, lambda a, b: a - a.dtype.type(3)), "neg": (lambda x, y: -x, lambda a, b: -a),
  "eq": (lambda x, y: x == y, lambda a, b: a == b), "ne": (lambda x, y: x != y, lambda a, b: a != b),
  "ge": (lambda x, y: x >= y, lambda a, b: a >= b), "le": (lambda x, y: x <= y, lambda a, b: a <= b),  # IEEE: NaN >= x is False
  "eq_const": (lambda x, y: x == 7, lambda a, b: a == 7), "logical_not": (lambda x, y: x.logical_not(), lambda a, b: a == 0),
  "maximum": (lambda x, y: x.maximum(y), np.maximum),  # NaN propagates
  "abs": (lambda x, y: x.abs(), lambda a, b: np.where(a < 0, -a, a)),
  "relu": (lambda x, y: x.relu(), lambda a, b: np.maximum(a, a.dtype.type(0))),
}

def run(f, device, a, b):
  with np.errstate(all="ignore"): return f(Tensor(a, device=device), Tensor(b, device=device)).numpy()

@pytest.mark.parametrize("name", list(EXACT))
@pytest.mark.parametrize("device", DEVICES)
def test_float_exact(device, name):
  f, ref = EXACT[name]
  with np.errstate(all="ignore"): want = ref(F, G)
  np.testing.assert_array_equal(run(f, device, F, G), want)

@pytest.mark.parametrize("name, dt", [pytest.param(n, dt, id=f"{n}-{dt.name}") for n in EXACT
                                      for dt in (dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64)])
@pytest.mark.parametrize("device", DEVICES)
def test_int_exact(device, name, dt):
  a, b = ints(dt)
  f, ref = EXACT[name]
  with np.errstate(all="ignore"): np.testing.assert_array_equal(run(f, device, a, b), ref(a, b))

@pytest.mark.parametrize("device", DEVICES)
def test_division_rounds_once(device):
  # a / b and a / 3 are one IEEE division (the FDIV the codegen prints), not a times a rounded reciprocal
  a = np.array([1.0, 10.0, 7.0, -5.0, 0.1, 3.0, 1e30, 0.0], np.float32)
  with np.errstate(divide="ignore"): np.testing.assert_array_equal(run(lambda x, y: x / y, device, a, G[:8]), np.divide(a, G[:8]))
  np.testing.assert_array_equal(run(lambda x, y: x / 3, device, a, a), a / np.float32(3))
  np.testing.assert_array_equal(run(lambda x, y: x.mean(), device, a[:6], a), np.float32(a[:6].sum(dtype=np.float32) / np.float32(6)))
  i = np.array([7, -7, 1, 0, 100], np.int32)
  np.testing.assert_array_equal(run(lambda x, y: x / 2, device, i, i), (i / np.float32(2)).astype(np.float32))

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.int8, dtypes.bool], ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_minimum(device, dt):
  a, b = (F[np.isfinite(F)], G[np.isfinite(F)]) if dt is dtypes.float32 else ints(dt) if dt is not dtypes.bool else \
    (np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool))
  if dt is dtypes.float32: b = np.where(np.isnan(b), 1.0, b).astype(np.float32)
  np.testing.assert_array_equal(run(lambda x, y: x.minimum(y), device, a, b), np.minimum(a, b))
  np.testing.assert_array_equal(run(lambda x, y: x.min(), device, a, b), np.min(a))

@pytest.mark.parametrize("device", DEVICES)
def test_bools(device):
  a, b = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
  for f, want in ((lambda x, y: x + y, a | b), (lambda x, y: x * y, a & b), (lambda x, y: -x, ~a), (lambda x, y: x == y, a == b),
                  (lambda x, y: (x + y) != True, ~(a | b))):  # noqa: E712
    np.testing.assert_array_equal(run(f, device, a, b), want)

@pytest.mark.parametrize("device", DEVICES)
def test_graphs_built_by_uop_arithmetic_run(device):
  # the same graph written over UOps (the mixins on UOp) realizes to numpy's numbers
  a, b = np.arange(12, dtype=np.float32).reshape(3, 4) - 5, np.linspace(1, 3, 12, dtype=np.float32).reshape(3, 4)
  x, y = Tensor(a, device=device), Tensor(b, device=device)
  u = ((x.uop - y.uop) / 2).maximum(y.uop.neg()).sum(axis=1).reshape(3, 1).expand(3, 4).permute(1, 0).flip(0).pad(((0, 1), (1, 0)), value=1.5)
  want = np.pad(np.flip(np.maximum((a - b) / 2, -b).sum(axis=1).reshape(3, 1).repeat(4, 1).T, 0), ((0, 1), (1, 0)), constant_values=1.5)
  np.testing.assert_allclose(Tensor(u, device=device).numpy(), want, rtol=1e-6)

@pytest.mark.cpu
def test_c_prints_the_operators():
  def c(t:Tensor) -> str:
    items, _ = t.schedule()
    return "\n".join(get_spec(si, si.bufs[0].device).src for si in items)
  x, y = Tensor(F, device="CPU"), Tensor(G, device="CPU")
  for t, op in ((x - y, "-"), (x / y, "/"), (x / 3, "/3.0f"), (-x, "-"), (x == y, "=="), (x - 1, "-1.0f")):
    src = c(t)
    assert op in src and "*(-1" not in src and "(1/" not in src and "!=" not in src, src
  src = c(x.minimum(y))
  assert "?" in src and "-" not in src.split("{", 1)[1].replace("data", ""), src  # one select per lane, no negations
