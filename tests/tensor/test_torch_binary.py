import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor  # noqa: E402

BINARY = {
  "add": (lambda a, b: a + b, lambda a, b: a + b, -2, 2), "sub": (lambda a, b: a - b, lambda a, b: a - b, -2, 2),
  "mul": (lambda a, b: a * b, lambda a, b: a * b, -2, 2), "div": (lambda a, b: a / b, lambda a, b: a / b, 0.5, 2),
  "pow": (lambda a, b: a ** b, lambda a, b: a ** b, 0.5, 2), "maximum": (lambda a, b: a.maximum(b), torch.maximum, -2, 2),
  "minimum": (lambda a, b: a.minimum(b), torch.minimum, -2, 2), "copysign": (lambda a, b: a.copysign(b), torch.copysign, -2, 2),
  "logaddexp": (lambda a, b: a.logaddexp(b), torch.logaddexp, -3, 3), "fmod": (lambda a, b: a.fmod(b), torch.fmod, 0.3, 3),
  "mod": (lambda a, b: a % b, lambda a, b: a % b, 0.3, 3), "rsub": (lambda a, b: 2.5 - a * b, lambda a, b: 2.5 - a * b, -2, 2),
  "rdiv": (lambda a, b: 1.5 / (a + b), lambda a, b: 1.5 / (a + b), 0.5, 2),
}

@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("shapes", [[(2, 1, 4), (3, 1)], [(4,), ()]], ids=["bcast", "scalar"])
def test_binary(name, shapes):
  ours, theirs, low, high = BINARY[name]
  compare(ours, theirs, shapes, low=low, high=high, atol=1e-5, rtol=1e-5)

def test_mod_negative_operands():
  a = np.array([-7.5, -3.0, 3.0, 7.5, 5.0, -5.0], dtype=np.float32)
  b = np.array([2.0, -2.0, -2.5, 3.0, -3.0, 3.0], dtype=np.float32)
  compare(lambda x, y: x % y, lambda x, y: x % y, vals=[a, b])
  compare(lambda x, y: x.fmod(y), torch.fmod, vals=[a, b])

def test_ternary():
  compare(lambda c, a, b: (c > 0).where(a, b), lambda c, a, b: torch.where(c > 0, a, b), [(3, 1), (1, 4), (3, 4)])
  compare(lambda a, b, w: a.lerp(b, w), torch.lerp, [(2, 3), (2, 3), (3,)], low=0, high=1)
  compare(lambda a: a.lerp(Tensor([1.0, 2.0, 3.0]), 0.25), lambda a: torch.lerp(a, torch.tensor([1.0, 2.0, 3.0]), 0.25), [(2, 3)])
  compare(lambda a: a.clamp(-0.5, 0.7), lambda a: a.clamp(-0.5, 0.7), [(3, 4)])
  compare(lambda a: a.clip(min_=-0.5), lambda a: a.clip(min=-0.5), [(3, 4)])
  compare(lambda a, lo, hi: a.clamp(lo, hi), lambda a, lo, hi: a.clamp(lo, hi), vals=[[1.0, -3.0, 0.5], [0.0, -1.0, 0.7], [2.0, 1.0, 0.9]])
  compare(lambda a, m: a.masked_fill(m, 3.0), lambda a, m: a.masked_fill(m, 3.0), [(3, 4)], vals=[np.array([True, False, True, False])])

def test_int_binary_and_bitwise():
  a = np.array([[-7, -3, 0, 5, 9]], dtype=np.int32)
  b = np.array([[2], [-3], [4]], dtype=np.int32)
  for op in [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x & y, lambda x, y: x | y,
             lambda x, y: x ^ y, lambda x, y: x.maximum(y), lambda x, y: x < y, lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x >= y]:
    compare(op, op, vals=[a, b])
  compare(lambda x: ~x, lambda x: ~x, vals=[a])
  compare(lambda x: x << 2, lambda x: x << 2, vals=[a])
  compare(lambda x: x >> 1, lambda x: x >> 1, vals=[a])
  compare(lambda x, y: x.fmod(y), torch.fmod, vals=[a, b])
  compare(lambda x, y: x / y, lambda x, y: x / y, vals=[a, b])

def test_bool_ops():
  a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
  for op in [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: x == y]: compare(op, op, vals=[a, b])
  compare(lambda x: x.logical_not(), torch.logical_not, vals=[a])
  compare(lambda x, y: x + y.int(), lambda x, y: x + y.int(), vals=[a, b])

@pytest.mark.parametrize("da,db", [(np.int32, np.float32), (np.bool_, np.int32), (np.int8, np.int32), (np.uint8, np.int16), (np.float16, np.float32),
                                   (np.int64, np.float16), (np.bool_, np.float32)])
def test_dtype_promotion(da, db):
  x = np.array([1, 0, 2], dtype=da)
  y = np.array([3, 1, 0], dtype=db)
  compare(lambda a, b: a + b, lambda a, b: a + b, vals=[x, y], grad=False)
  compare(lambda a, b: a * b, lambda a, b: a * b, vals=[x, y], grad=False)

@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float16, np.bool_, np.uint8])
def test_python_scalar_weak_types(dt):
  x = np.array([1, 0, 2], dtype=dt)
  # bool + int is the default int: int32 in tinygrad, int64 in torch
  res = compare(lambda a: a + 2, lambda a: a + 2, vals=[x], grad=False, check_dtype=dt is not np.bool_)
  if dt is np.bool_: assert res[0][0].dtype == np.int32
  compare(lambda a: a * 1.5, lambda a: a * 1.5, vals=[x], grad=False)
  compare(lambda a: a > 1, lambda a: a > 1, vals=[x], grad=False)

def test_comparisons_and_isclose():
  a = np.array([1.0, np.nan, 2.0, -0.0, np.inf], dtype=np.float32)
  b = np.array([1.0, 1.0, 2.0 + 1e-7, 0.0, np.inf], dtype=np.float32)
  for op in [lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x == y, lambda x, y: x != y]:
    compare(op, op, vals=[a, b], grad=False)
  compare(lambda x, y: x.isclose(y), torch.isclose, vals=[a, b], grad=False)
  compare(lambda x, y: x.isclose(y, equal_nan=True), lambda x, y: torch.isclose(x, y, equal_nan=True), vals=[a, b], grad=False)
  # allclose is a 0-d bool Tensor in tinygrad
  assert Tensor(a[:1]).allclose(Tensor(b[:1])).item() == torch.allclose(torch.tensor(a[:1]), torch.tensor(b[:1]))

def test_nan_propagation():
  a = np.array([1.0, np.nan, -2.0, np.nan], dtype=np.float32)
  b = np.array([np.nan, 3.0, -1.0, np.nan], dtype=np.float32)
  for op in [lambda x, y: x.maximum(y), lambda x, y: x.minimum(y)]: compare(op, op, vals=[a, b], grad=False)
  compare(lambda x: x.relu(), torch.relu, vals=[a], grad=False)
  compare(lambda x: x.clamp(0, 1), lambda x: x.clamp(0, 1), vals=[a], grad=False)
