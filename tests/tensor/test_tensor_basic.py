# Tensor -> schedule -> codegen -> C -> CPU, checked against numpy.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Device
from tinygrad.helpers import GlobalCounters

pytestmark = pytest.mark.cpu

def close(t:Tensor, ref, atol=1e-5, rtol=1e-5):
  got = t.numpy()
  ref = np.asarray(ref)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

class TestCreation:
  def test_from_list(self):
    t = Tensor([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3) and t.dtype is dtypes.int32 and t.ndim == 2 and t.numel() == 6
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
  def test_dtypes_inferred(self):
    assert Tensor([1.0, 2]).dtype is dtypes.float32
    assert Tensor([True, False]).dtype is dtypes.bool
    assert Tensor(np.arange(3, dtype=np.int16)).dtype is dtypes.int16
    assert Tensor(3.5).dtype is dtypes.weakfloat and Tensor(3).dtype is dtypes.weakint   # weak Python scalars, as in 0.14
  def test_explicit_dtype(self):
    t = Tensor([1, 2, 3], dtype=dtypes.float16)
    assert t.dtype is dtypes.float16
    close(t, np.array([1, 2, 3], dtype=np.float16))
  def test_scalar(self):
    t = Tensor(2.5)
    assert t.shape == () and t.item() == 2.5
  def test_numpy_roundtrip(self):
    a = rnd(3, 4)
    close(Tensor(a), a)
  def test_bytes(self):
    t = Tensor(b"\x01\x02\xff")
    assert t.dtype is dtypes.uint8 and t.tolist() == [1, 2, 255]
  def test_full_zeros_ones(self):
    close(Tensor.full((2, 3), 7.0), np.full((2, 3), 7.0, dtype=np.float32))
    close(Tensor.zeros(2, 2), np.zeros((2, 2)))
    close(Tensor.ones((3,)), np.ones(3))
    assert Tensor.full((2,), 3).dtype is dtypes.int32
  def test_arange(self):
    assert Tensor.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert Tensor.arange(2, 10, 3).tolist() == [2, 5, 8]
    close(Tensor.arange(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32))
  def test_empty(self):
    t = Tensor.empty(4, 5)
    assert t.shape == (4, 5) and t.dtype is dtypes.float32
    assert t.numpy().shape == (4, 5)
  def test_device(self):
    assert Tensor([1]).device == Device.DEFAULT
  def test_item_errors(self):
    with pytest.raises(ValueError): Tensor([1, 2]).item()
  def test_zero_size(self):
    t = Tensor.zeros(0, 3) + 1
    assert t.numpy().shape == (0, 3)
  def test_like(self):
    a = Tensor([[1, 2]])
    assert a.zeros_like().tolist() == [[0, 0]] and a.ones_like().tolist() == [[1, 1]]

class TestElementwise:
  @pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
  def test_binary(self, op):
    a, b = rnd(3, 4), rnd(3, 4, seed=1)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
         "maximum": lambda x, y: x.maximum(y) if isinstance(x, Tensor) else np.maximum(x, y),
         "minimum": lambda x, y: x.minimum(y) if isinstance(x, Tensor) else np.minimum(x, y)}[op]
    close(f(Tensor(a), Tensor(b)), f(a, b))
  @pytest.mark.parametrize("op", ["neg", "sqrt", "exp", "log", "exp2", "log2", "sin", "cos", "reciprocal", "relu", "abs"])
  def test_unary(self, op):
    a = rnd(5, 3)
    x = np.abs(a) + 0.1 if op in ("sqrt", "log", "log2") else a
    ref = {"neg": lambda v: -v, "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "exp2": np.exp2, "log2": np.log2, "sin": np.sin, "cos": np.cos,
           "reciprocal": lambda v: 1 / v, "relu": lambda v: np.maximum(v, 0), "abs": np.abs}[op](x)
    close(getattr(Tensor(x), op)(), ref, atol=1e-5, rtol=1e-4)
  def test_broadcast(self):
    a, b = rnd(3, 1), rnd(1, 4, seed=1)
    close(Tensor(a) + Tensor(b), a + b)
    c = rnd(4, seed=2)
    close(Tensor(a) * Tensor(c), a * c)
  def test_broadcast_error(self):
    with pytest.raises(RuntimeError, match=r"\(3, 2\).*\(3,\)"): Tensor.ones(3, 2) + Tensor.ones(3)
  def test_scalars(self):
    a = rnd(2, 3)
    close(Tensor(a) * 2 + 1, a * 2 + 1)
    close(1 - Tensor(a), 1 - a)
    close(2 / Tensor(a), 2 / a, rtol=1e-4)
  def test_comparisons(self):
    a, b = np.array([1, 2, 3, 4]), np.array([4, 2, 1, 4])
    for name, f in [("lt", lambda x, y: x < y), ("gt", lambda x, y: x > y), ("le", lambda x, y: x <= y), ("ge", lambda x, y: x >= y),
                    ("eq", lambda x, y: x == y), ("ne", lambda x, y: x != y)]:
      t = f(Tensor(a), Tensor(b))
      assert t.dtype is dtypes.bool, name
      np.testing.assert_equal(t.numpy(), f(a, b))
  def test_where(self):
    a, b = rnd(3, 3), rnd(3, 3, seed=1)
    close((Tensor(a) > 0).where(Tensor(a), Tensor(b)), np.where(a > 0, a, b))
    close((Tensor(a) > 0).where(Tensor(a), 0.5), np.where(a > 0, a, 0.5))
    close((Tensor(a) > 0).where(1.0, 0.0), np.where(a > 0, 1.0, 0.0).astype(np.float32))
  def test_cast(self):
    a = np.array([1.7, -2.5, 3.2], dtype=np.float32)
    np.testing.assert_equal(Tensor(a).cast(dtypes.int32).numpy(), a.astype(np.int32))
    np.testing.assert_equal(Tensor(a).cast(dtypes.bool).numpy(), a.astype(bool))
    np.testing.assert_equal(Tensor([1, 2]).cast(dtypes.float16).numpy(), np.array([1, 2], dtype=np.float16))
  def test_bitwise(self):
    a, b = np.array([1, 6, 12], dtype=np.int32), np.array([3, 5, 10], dtype=np.int32)
    np.testing.assert_equal((Tensor(a) & Tensor(b)).numpy(), a & b)
    np.testing.assert_equal((Tensor(a) | Tensor(b)).numpy(), a | b)
    np.testing.assert_equal((Tensor(a) ^ Tensor(b)).numpy(), a ^ b)
    np.testing.assert_equal((~Tensor(a)).numpy(), ~a)

class TestPromotion:
  @pytest.mark.parametrize("dt,scalar,expected", [
    (dtypes.int32, 1, dtypes.int32), (dtypes.int32, 1.5, dtypes.float32), (dtypes.float16, 2.0, dtypes.float16),
    (dtypes.uint8, 3, dtypes.uint8), (dtypes.bool, 1, dtypes.int32), (dtypes.int8, True, dtypes.int8)])
  def test_weak_scalars(self, dt, scalar, expected):
    assert (Tensor([1, 0], dtype=dt) + scalar).dtype is expected
  def test_tensor_tensor(self):
    assert (Tensor([1], dtype=dtypes.int8) + Tensor([1], dtype=dtypes.int16)).dtype is dtypes.int16
    assert (Tensor([1], dtype=dtypes.int32) + Tensor([1.0])).dtype is dtypes.float32
    assert (Tensor([1], dtype=dtypes.float16) * Tensor([1.0], dtype=dtypes.float32)).dtype is dtypes.float32
  def test_int_div_is_float(self):
    t = Tensor([1, 2, 3]) / 2
    assert t.dtype is dtypes.float32
    close(t, np.array([0.5, 1, 1.5]))
  def test_uint8_wraps(self):
    np.testing.assert_equal((Tensor([250], dtype=dtypes.uint8) + 10).numpy(), np.array([4], dtype=np.uint8))

class TestReduce:
  @pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "prod"])
  @pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (-1, -3)])
  @pytest.mark.parametrize("keepdim", [False, True])
  def test_reduce(self, op, axis, keepdim):
    a = rnd(2, 3, 4)
    ref = getattr(np, op)(a, axis=axis, keepdims=keepdim)
    close(getattr(Tensor(a), op)(axis=axis, keepdim=keepdim), ref, atol=1e-5, rtol=1e-4)
  def test_int_sum_dtype(self):
    t = Tensor([[1, 2], [3, 4]], dtype=dtypes.int8).sum(0)
    assert t.dtype is dtypes.int32 and t.tolist() == [4, 6]
  def test_int_min_max(self):
    a = np.array([[3, -7, 5], [2, 9, -1]], dtype=np.int32)
    np.testing.assert_equal(Tensor(a).min(1).numpy(), a.min(1))
    np.testing.assert_equal(Tensor(a).max(0).numpy(), a.max(0))
    u = np.array([3, 200, 7], dtype=np.uint8)
    assert Tensor(u).min().item() == 3 and Tensor(u).max().item() == 200
  def test_bool_reduce(self):
    b = np.array([[True, False], [True, True]])
    np.testing.assert_equal(Tensor(b).max(1).numpy(), b.max(1))
    np.testing.assert_equal(Tensor(b).sum(1).numpy(), b.sum(1))
  def test_axis_error(self):
    with pytest.raises(IndexError, match=r"\(2, 3\)"): Tensor.ones(2, 3).sum(2)
  def test_reduce_of_reduce(self):
    a = rnd(4, 5)
    close(Tensor(a).sum(1).max(), a.sum(1).max(), rtol=1e-5)
    close((Tensor(a).sum(1, keepdim=True) * Tensor(a)).sum(0), (a.sum(1, keepdims=True) * a).sum(0), rtol=1e-4)
  def test_empty_reduce(self):
    assert Tensor.ones(0, 3).sum(0).tolist() == [0, 0, 0]

class TestMovement:
  def test_reshape(self):
    a = rnd(2, 6)
    close(Tensor(a).reshape(3, 4), a.reshape(3, 4))
    close(Tensor(a).reshape(-1), a.reshape(-1))
    close(Tensor(a).reshape(4, -1) + 1, a.reshape(4, -1) + 1)
  def test_reshape_error(self):
    with pytest.raises(ValueError, match=r"size mismatch, can't reshape \(2, 3\).*-> \(5,\)"): Tensor.ones(2, 3).reshape(5)
  def test_permute_transpose(self):
    a = rnd(2, 3, 4)
    close(Tensor(a).permute(2, 0, 1), a.transpose(2, 0, 1))
    close(Tensor(a).transpose(0, 2), a.swapaxes(0, 2))
    close(Tensor(a[0]).T, a[0].T)
  def test_expand(self):
    a = rnd(3, 1)
    close(Tensor(a).expand(3, 4), np.broadcast_to(a, (3, 4)))
    close(Tensor(a).expand(2, -1, 5), np.broadcast_to(a, (2, 3, 5)))
  def test_pad_shrink_flip(self):
    a = rnd(3, 4)
    close(Tensor(a).pad(((1, 2), (0, 1))), np.pad(a, ((1, 2), (0, 1))))
    close(Tensor(a).pad((1, 1)), np.pad(a, ((0, 0), (1, 1))))
    close(Tensor(a).pad(((1, 1), None), value=2.0), np.pad(a, ((1, 1), (0, 0)), constant_values=2.0))
    close(Tensor(a).shrink(((1, 3), (0, 2))), a[1:3, 0:2])
    close(Tensor(a).flip(0), a[::-1])
    close(Tensor(a).flip((0, 1)), a[::-1, ::-1])
  def test_flatten_squeeze_unsqueeze(self):
    a = rnd(2, 1, 3)
    close(Tensor(a).flatten(), a.flatten())
    close(Tensor(a).flatten(1), a.reshape(2, 3))
    close(Tensor(a).squeeze(), a.squeeze())
    close(Tensor(a).squeeze(1), a.squeeze(1))
    close(Tensor(a).unsqueeze(0), a[None])
    close(Tensor(a).unsqueeze(-1), a[..., None])
  @pytest.mark.parametrize("idx", [
    0, -1, (1, 2), slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(5, 0, -2), (slice(None), 1),
    (None, 1), (Ellipsis, 0), (Ellipsis, slice(1, 3), None), (1, slice(None, None, -3)), slice(3, 1)])
  def test_getitem(self, idx):
    a = rnd(6, 5)
    close(Tensor(a)[idx], a[idx])
  def test_getitem_errors(self):
    with pytest.raises(IndexError, match="out of bounds"): Tensor.ones(3)[3]
    with pytest.raises(IndexError, match="too many"): Tensor.ones(3)[0, 0]
  def test_chain_noncontiguous(self):
    a = rnd(4, 6)
    t = Tensor(a).permute(1, 0)[::2].flip(1).pad(((1, 0), (0, 2)))[1:, ::-1].reshape(-1)
    ref = np.pad(a.T[::2][:, ::-1], ((1, 0), (0, 2)))[1:, ::-1].reshape(-1)
    close(t, ref)
    close(t * 2 + Tensor(ref), ref * 3)
  def test_cat_stack(self):
    a, b = rnd(2, 3), rnd(4, 3, seed=1)
    close(Tensor(a).cat(Tensor(b)), np.concatenate([a, b]))
    close(Tensor(a).cat(Tensor(a), dim=1), np.concatenate([a, a], 1))
    close(Tensor.stack(Tensor(a), Tensor(a), dim=1), np.stack([a, a], 1))
  def test_matmul(self):
    a, b = rnd(3, 4), rnd(4, 5, seed=1)
    close(Tensor(a) @ Tensor(b), a @ b, rtol=1e-4)
    close(Tensor(a).dot(Tensor(b)), a @ b, rtol=1e-4)
    v = rnd(4, seed=2)
    close(Tensor(a) @ Tensor(v), a @ v, rtol=1e-4)
    close(Tensor(v) @ Tensor(b), v @ b, rtol=1e-4)
    close(Tensor(rnd(2, 3, 4)) @ Tensor(rnd(2, 4, 2, seed=1)), rnd(2, 3, 4) @ rnd(2, 4, 2, seed=1), rtol=1e-4)
  def test_matmul_error(self):
    with pytest.raises(RuntimeError, match=r"\(3, 4\).*\(3, 4\)"): Tensor.ones(3, 4) @ Tensor.ones(3, 4)
  def test_contiguous(self):
    a = rnd(3, 4)
    close(Tensor(a).T.contiguous(), a.T)

class TestLaziness:
  def test_realize_multiple(self):
    a = Tensor([1.0, 2.0])
    b, c = a + 1, a * 3
    b.realize(c)
    assert b.tolist() == [2.0, 3.0] and c.tolist() == [3.0, 6.0]
  def test_reuse_after_realize(self):
    a = Tensor([1.0, 2.0]) + 1
    b = a * 2
    a.realize()
    GlobalCounters.reset()
    assert b.tolist() == [4.0, 6.0]
    assert GlobalCounters.kernel_count == 1

class TestMoreCreation:
  def test_eye(self):
    np.testing.assert_equal(Tensor.eye(3).numpy(), np.eye(3, dtype=np.float32))
    np.testing.assert_equal(Tensor.eye(2, 4, dtype=dtypes.int32).numpy(), np.eye(2, 4, dtype=np.int32))
  def test_linspace(self):
    close(Tensor.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    close(Tensor.linspace(-2, 3, 1), np.linspace(-2, 3, 1, dtype=np.float32))
    assert Tensor.linspace(0, 1, 0).shape == (0,)
