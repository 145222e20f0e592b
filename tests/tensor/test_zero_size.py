# Zero-sized tensors (Tensor([]), shapes with a 0) through every kind of op, against numpy: creation, clone, elementwise, reductions
# (their identities; max of an empty tensor is -inf as in tinygrad 0.14, argmax of an empty dim raises as in torch), matmul with a zero
# dim, cat/stack with empty pieces, movement ops and reshapes of zero-sized shapes, indexing, cumulative ops, sort/topk, and reading
# the data back.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

pytestmark = pytest.mark.cpu

def same(t:Tensor, want) -> None:
  want = np.asarray(want)
  got = t.numpy()
  assert t.shape == want.shape and got.shape == want.shape, (t.shape, want.shape)
  np.testing.assert_equal(got, want)

def Z(*shape): return Tensor.ones(*shape).contiguous()    # a realized-on-use buffer of a zero-sized shape

def test_creation_and_readback():
  t = Tensor([])
  assert (t.shape, t.dtype, t.tolist(), t.numpy().dtype) == ((0,), dtypes.float32, [], np.float32)
  for make, shape in [(lambda: Tensor.zeros(0), (0,)), (lambda: Tensor.full((0, 2), 3.0), (0, 2)), (lambda: Tensor.empty(0, 3), (0, 3)),
                      (lambda: Tensor.rand(3, 2, 0), (3, 2, 0)), (lambda: Tensor.randn(0), (0,)), (lambda: Tensor.eye(0), (0, 0)),
                      (lambda: Tensor.arange(0), (0,)), (lambda: Tensor.arange(5, 2), (0,)), (lambda: Tensor.linspace(0, 1, 0), (0,)),
                      (lambda: Tensor(np.zeros((2, 0, 3), np.int16)), (2, 0, 3)), (lambda: Tensor([[], []], dtype=dtypes.int8), (2, 0))]:
    t = make()
    same(t, np.zeros(shape, dtype=t.numpy().dtype))
    assert t.realize().shape == shape and t.tolist() == np.zeros(shape).tolist()
  with pytest.raises(ValueError, match="one element"): Tensor([]).item()

def test_clone_contiguous_to():
  for t in (Tensor([]), Z(0, 4), Tensor.zeros(3, 0).T):
    want = np.zeros(t.shape, np.float32)
    same(t.clone(), want)
    same(t.contiguous(), want)
    same(t.to("PYTHON"), want)
    same(t.clone(device="PYTHON"), want)
  assert Tensor([]).clone().realize().shape == (0,)

@pytest.mark.parametrize("op", [lambda x: x + 1, lambda x: x * x, lambda x: x.exp(), lambda x: (x > 0).where(x, 2.0), lambda x: x.cast(dtypes.int32),
                                lambda x: x.bitcast(dtypes.int32), lambda x: x.maximum(x), lambda x: x.isnan(), lambda x: -x.relu().sqrt(),
                                lambda x: x + Tensor.ones(4), lambda x: x.softmax(-1), lambda x: x.softmax(0), lambda x: x.layernorm()])
def test_elementwise_and_broadcast(op):
  out = op(Z(0, 4))
  assert out.shape == (0, 4) and out.numpy().shape == (0, 4) and out.tolist() == []
  assert (Tensor.ones(0, 1) + Tensor.ones(1, 4)).shape == (0, 4) and (Tensor.ones(3, 1) * Tensor.ones(0)).shape == (3, 0)

def test_reductions():
  e, z = Tensor([]), Z(0, 4)
  a = np.zeros((0, 4), np.float32)
  same(e.sum(), np.float32(0)), same(e.prod(), np.float32(1))
  same(z.sum(0), a.sum(0)), same(z.sum(1), a.sum(1)), same(z.sum(0, keepdim=True), a.sum(0, keepdims=True)), same(z.prod(0), a.prod(0))
  same(Tensor.ones(3, 2, 0).sum(axis=2), np.zeros((3, 2))), same(Tensor.ones(3, 2, 0).sum(axis=1), np.zeros((3, 0)))
  # numpy's mean/var of nothing (nan), without its warnings
  same(e.mean(), np.float32(np.nan)), same(z.mean(0), np.full(4, np.nan, np.float32)), same(e.var(), np.float32(np.nan))
  same(z.std(0), np.full(4, np.nan, np.float32))
  # the reduce identities, as tinygrad 0.14 gives them (numpy and torch raise for max/min of an empty array)
  same(e.max(), np.float32(-np.inf)), same(e.min(), np.float32(np.inf)), same(z.max(0), np.full(4, -np.inf, np.float32))
  same(z.max(1), np.zeros(0, np.float32)), same(Tensor([], dtype=dtypes.int32).max(), np.int32(np.iinfo(np.int32).min))
  same(Tensor([], dtype=dtypes.int8).sum(), np.int32(0)), same(Tensor([], dtype=dtypes.int32).prod(), np.int32(1))
  assert e.any().item() is False and e.all().item() is True and e.logsumexp(0).item() == -np.inf
  same(z.argmax(1), np.zeros(0, np.int32))

@pytest.mark.parametrize("f", [lambda x: x.argmax(), lambda x: x.argmin(), lambda x: Z(0, 4).argmax(0), lambda x: Z(0, 4).argmin(0)])
def test_argmax_over_an_empty_dim_raises(f):
  # torch raises; tinygrad 0.14 returns -2**31 (an index that does not exist)
  with pytest.raises(IndexError, match="empty"): f(Tensor([]))

@pytest.mark.parametrize("sa,sb", [((0, 4), (4, 3)), ((3, 0), (0, 4)), ((3, 4), (4, 0)), ((0, 0), (0, 0)), ((0,), (0, 8)), ((0,), (0,)),
                                   ((2, 0, 3), (3, 5)), ((8, 0), (0, 8))])
def test_matmul_with_a_zero_dim(sa, sb):
  a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
  same(Tensor(a) @ Tensor(b), a @ b)
  same(Tensor(a).dot(Tensor(b)), a @ b)

def test_cat_and_stack_with_empty_pieces():
  a, b = np.arange(12, dtype=np.float32).reshape(3, 2, 2), np.zeros((3, 2, 0), np.float32)
  same(Tensor(a).cat(Tensor(b), dim=2), np.concatenate([a, b], 2)), same(Tensor(b).cat(Tensor(a), dim=2), np.concatenate([b, a], 2))
  for d in range(3): same(Tensor(b).cat(Tensor(b), dim=d), np.concatenate([b, b], d))
  same(Tensor.cat(Tensor([]), Tensor([1.0, 2.0]), Tensor([])), np.array([1.0, 2.0], np.float32))
  same(Tensor.cat(Z(0, 4), Tensor.ones(2, 4)), np.ones((2, 4), np.float32))
  same(Tensor.stack(Tensor([]), Tensor([])), np.zeros((2, 0), np.float32)), same(Tensor.stack(Z(0, 4), Z(0, 4), dim=1), np.zeros((0, 2, 4)))

@pytest.mark.parametrize("src,dst", [((0, 4), (4, 0)), ((0,), (0, 0, 3)), ((0,), (-1, 3)), ((0, 4), (-1,)), ((0, 4), (2, -1)), ((3, 2, 0), (7, 0)),
                                     ((3, 2, 0), (0,)), ((2, 0, 3), (0, 5, 1))])
def test_reshape_of_zero_sized_shapes(src, dst):
  same(Tensor.zeros(*src).reshape(dst), np.zeros(src, np.float32).reshape(dst))

@pytest.mark.parametrize("src,dst", [((0,), (1,)), ((0,), ()), ((3, 2, 0), ()), ((0, 4), (0, -1)), ((0, 4), (-1, -1))])
def test_reshape_of_zero_sized_shapes_errors(src, dst):
  # a size mismatch, or a -1 that a zero size leaves undetermined (numpy and torch raise; 0.14 divides by zero for (0, -1))
  with pytest.raises((RuntimeError, ValueError)): Tensor.zeros(*src).reshape(dst)

def test_movement_ops():
  a = np.zeros((0, 4), np.float32)
  z = Z(0, 4)
  same(z.permute(1, 0), a.T), same(z.T, a.T), same(z.flip(0), a), same(z.flatten(), a.flatten()), same(Tensor([]).unsqueeze(0), np.zeros((1, 0)))
  same(Tensor.ones(0, 1).squeeze(), np.zeros(0)), same(Tensor.ones(0, 1).expand(0, 5), np.zeros((0, 5)))
  same(Tensor.ones(1, 3).expand(0, 3), a[:, :3])
  same(Tensor([]).repeat(3), np.zeros(0)), same(Tensor([1.0, 2.0]).repeat(0), np.zeros(0))
  same(Tensor.rand(3, 2, 0).pad((None, None, (1, 1)), value=1), np.ones((3, 2, 2))), same(Tensor([]).pad((1, 2)), np.zeros(3))
  same(Tensor.rand(3, 2, 0).pad(((1, 1), None, None), value=1), np.ones((5, 2, 0)))
  t = Tensor.rand(3, 4).realize()
  for arg, shape in [((None, (2, 2)), (3, 0)), (((2, 2), None), (0, 4)), (((2, 2), (2, 2)), (0, 0))]: assert t.shrink(arg).realize().shape == shape
  assert [x.shape for x in Tensor([]).split(1)] == [(0,)] and [x.shape for x in z.chunk(2, 1)] == [(0, 2), (0, 2)]
  same(Tensor.ones(0, 3).tril(), np.zeros((0, 3))), same(Tensor.ones(0, 1, 4, 4).conv2d(Tensor.ones(2, 1, 3, 3)), np.zeros((0, 2, 2, 2)))
  same(Tensor.ones(0, 1, 4, 4).max_pool2d(), np.zeros((0, 1, 2, 2))), same(Tensor.ones(0, 1, 2, 2).interpolate((4, 4)), np.zeros((0, 1, 4, 4)))

def test_indexing():
  a, z = np.zeros((0, 4), np.float32), Z(0, 4)
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  empty_idx = Tensor([], dtype=dtypes.int32)
  same(z[:, 1], a[:, 1]), same(z[1:], a[1:]), same(Tensor(x)[1:1], x[1:1]), same(Tensor(x)[:, 3:1], x[:, 3:1]), same(Tensor(x)[2:5:-1], x[2:5:-1])
  same(Tensor(x)[empty_idx], x[np.zeros(0, np.int32)]), same(z[empty_idx], a[np.zeros(0, np.int32)])
  same(Tensor(x)[:, empty_idx], x[:, np.zeros(0, np.int32)]), same(Tensor(x)[[]], x[np.zeros(0, np.int32)])
  same(Tensor(x).gather(1, Tensor.zeros(3, 0, dtype=dtypes.int32)), np.zeros((3, 0), np.float32))
  same(Tensor([]).masked_select(Tensor([]) > 0), np.zeros(0, np.float32)), same(empty_idx.one_hot(3), np.zeros((0, 3), np.int32))
  with pytest.raises(IndexError, match="out of bounds"): z[0]
  t = Tensor.zeros(0, 4).contiguous()
  t[:] = 2.0
  same(t, a)
  same(Tensor.zeros(0, 4).contiguous().assign(Tensor.ones(0, 4)), a)

def test_cumulative_sort_topk():
  a = np.zeros((0, 3), np.float32)
  for ax in (0, 1):
    same(Tensor(a).cumsum(ax), np.cumsum(a, ax)), same(Tensor(a).cumprod(ax), np.cumprod(a, ax))
  same(Tensor([]).cumsum(), np.zeros(0)), same(Tensor.ones(2, 3, 0).cumprod(2), np.zeros((2, 3, 0)))
  for f in (Tensor.cummax, Tensor.cummin):
    v, i = f(Tensor(a), 0)
    same(v, a), same(i, a.astype(np.int32))
  v, i = Tensor([]).sort()
  same(v, np.zeros(0, np.float32)), same(i, np.zeros(0, np.int32))
  v, i = Tensor(a).sort(0)
  same(v, a), same(i, a.astype(np.int32))
  v, i = Tensor([]).topk(0)
  same(v, np.zeros(0, np.float32)), same(i, np.zeros(0, np.int32))
  v, i = Tensor.ones(0, 5).topk(2, dim=1)
  same(v, np.zeros((0, 2), np.float32)), same(i, np.zeros((0, 2), np.int32))
  same(Tensor([]).argsort(), np.zeros(0, np.int32))

def test_gradient_of_zero_sized():
  t = Tensor.ones(0, 3, requires_grad=True)
  (t * 2).sum().backward()
  same(t.grad, np.zeros((0, 3), np.float32))
  u = Tensor.ones(2, 0, requires_grad=True)
  (u.max(1) + u.sum(1)).sum().backward()
  same(u.grad, np.zeros((2, 0), np.float32))
