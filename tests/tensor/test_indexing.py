# Indexing against numpy: __getitem__ (basic and advanced), __setitem__, assign and in-place operators, gather/scatter,
# scatter_reduce, masked_select, nonzero, one_hot; error paths name the sizes.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5) * 0.5 - 3

def close(t:Tensor, ref):
  got = t.numpy()
  ref = np.asarray(ref)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)

I = np.array
GET = [
  1, -1, (0, 2, -1), slice(None, None, -1), (slice(1, None, 2), slice(None, None, -3)), (Ellipsis, slice(4, 0, -2)),
  (None, 1, None, slice(1, 3)), (slice(5, 2),), (Ellipsis, slice(3, 3)), (slice(-100, 100, 7),),
  [2, 0, -1], ([[0], [2]], slice(None), [1, 4]), (slice(None), [1, 1, 3], [0, -1, 2]), (Ellipsis, [[4, 0]]),
  (slice(None), [0, 2], None, [1, 3]), (1, [0, 3], slice(None, None, -2)), ([0, 2], slice(1, 3), [4, 0]),
]

def _np_index(ix):
  # numpy's rule puts advanced dims first when an int separates them from the others; tinygrad (and we) treat ints as basic
  return ix

@pytest.mark.cpu
@pytest.mark.parametrize("ix", GET, ids=[str(i) for i in range(len(GET))])
def test_getitem(ix):
  tix = tuple(Tensor(np.array(i, dtype=np.int32)) if isinstance(i, list) else i for i in ix) if isinstance(ix, tuple) else \
    (Tensor(np.array(ix, dtype=np.int32)) if isinstance(ix, list) else ix)
  close(Tensor(A)[tix], A[ix])
  close(Tensor(A)[ix], A[ix])   # lists index like int tensors

@pytest.mark.cpu
def test_getitem_int_between_tensors_is_basic():
  # as tinygrad 0.14 (and torch): the int selects first, so the tensor dims stay in place
  assert Tensor(A)[0, :, [1, 2]].shape == (4, 2)
  close(Tensor(A)[0, :, [1, 2]], A[0][:, [1, 2]])

@pytest.mark.parametrize("ix", [(1, slice(None, None, -2)), ([2, 0], slice(1, 3)), (slice(None), [[1], [3]], [0, 4])])
def test_getitem_python(ix):
  close(Tensor(A, device="PYTHON")[ix], A[ix])

@pytest.mark.cpu
def test_getitem_dtypes():
  b = Tensor(A > 0)
  assert b[[0, 2], 1].dtype == dtypes.bool and b[[0, 2], 1].tolist() == (A > 0)[[0, 2], 1].tolist()
  h = Tensor(A).cast(dtypes.float16)[Tensor([1, 0])]
  assert h.dtype == dtypes.float16
  close(h.float(), A[[1, 0]])
  close(Tensor(A).cast(dtypes.int8)[:, [3]], A.astype(np.int8)[:, [3]])

GET_ERRORS = [
  (lambda t: t[3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
  (lambda t: t[:, -5], IndexError, "dimension 1 with size 4"),
  (lambda t: t[0, 0, 0, 0], IndexError, r"\(3, 4, 5\)"),
  (lambda t: t[..., ...], IndexError, "single ellipsis"),
  (lambda t: t[Tensor([True, False, True])], IndexError, "bool"),
  (lambda t: t[Tensor([0.5])], IndexError, "float"),
  (lambda t: t["a"], IndexError, "str"),
  (lambda t: t[Tensor([[0, 1]]), :, Tensor([0, 1, 2])], IndexError, r"\(1, 2\), \(3,\)"),
]

@pytest.mark.cpu
@pytest.mark.parametrize("f,exc,match", GET_ERRORS)
def test_getitem_errors(f, exc, match):
  with pytest.raises(exc, match=match): f(Tensor(A))

SET = [
  (1, 7.0), ((0, 2, -1), -1.0), (slice(None, None, -2), np.arange(20, dtype=np.float32).reshape(4, 5)),
  ((Ellipsis, slice(4, 0, -3)), 2.5), ((slice(1, 3), None, 0), np.ones((2, 1, 5), np.float32) * 9), ((slice(2, 2),), 5.0),
  ((slice(None), slice(None, None, 2), slice(1, None, 2)), np.arange(4, dtype=np.float32).reshape(1, 2, 2)),
  (([0, 2], slice(None), [1, 3]), np.array([[100.0], [200.0]], np.float32)), ([2, 0], 11.0), ((1, [0, 3]), -5.0),
]

@pytest.mark.cpu
@pytest.mark.parametrize("ix,v", SET, ids=[str(i) for i in range(len(SET))])
def test_setitem(ix, v):
  t, ref = Tensor(A.copy()).realize(), A.copy()
  view = t.reshape(12, 5)   # a view of the buffer sees the write, as in tinygrad
  t[ix] = Tensor(v) if isinstance(v, np.ndarray) else v
  ref[ix] = v
  close(t, ref)
  close(view, ref.reshape(12, 5))

SET_ADVANCED = [
  (slice(None), [0, 2], [1, -1]),                      # adjacent tensor indices after a slice: their dims stay in place
  ([[0], [2]], slice(1, 3), I([4, 0])),                # separated: the broadcast dims go in front
  (Ellipsis, [3, 0, 3]),                               # a repeated entry: the last write wins, as in numpy
  ([2, 2, 0, 2], 1, slice(None, None, -2)),            # with an int and a flipped strided slice
  (None, [1], slice(None), [0, 0]),
]

@pytest.mark.cpu
@pytest.mark.parametrize("ix", SET_ADVANCED, ids=[str(i) for i in range(len(SET_ADVANCED))])
def test_setitem_advanced_matches_numpy(ix):
  t, ref = Tensor(A.copy()).realize(), A.copy()
  v = np.arange(ref[ix].size, dtype=np.float32).reshape(ref[ix].shape) + 100
  t[ix] = Tensor(v)
  ref[ix] = v
  close(t, ref)
  lazy, ref2 = Tensor(A) + 1, A + 1   # a tensor not realized yet takes the result
  lazy[ix] = Tensor(v)
  ref2[ix] = v
  close(lazy, ref2)

@pytest.mark.cpu
def test_setitem_advanced_work_is_entries_times_size():
  # tinygrad's test_setitem case (numpy's "combining advanced and basic indexing"): 24 index entries write into 12M elements. Each
  # element looks at the 24 entries only, never at all 360,000 values (that schedule ran for hours)
  from tinygrad.engine.realize import get_spec
  from tinygrad.uop.ops import Ops
  t = Tensor.zeros(10, 20, 30, 40, 50, dtype=dtypes.int).contiguous().realize()
  ind_1, ind_2 = Tensor([5, 3, 7, 8]), Tensor([[[0], [1], [2]], [[3], [4], [5]]])
  v = Tensor.arange(2*3*4*10*30*50).reshape(2, 3, 4, 10, 30, 50)
  t[:, ind_1, :, ind_2, :] = v
  schedule, _ = t.schedule()
  ops = sum(get_spec(si, si.bufs[0].device).estimates.ops for si in schedule if si.ast.op is not Ops.COPY)
  assert ops <= 8 * 24 * t.numel(), f"{ops:.3g} ops for a setitem of 24 entries into {t.numel()} elements"
  n = np.zeros((10, 20, 30, 40, 50), dtype=np.int32)
  n[:, ind_1.numpy(), :, ind_2.numpy(), :] = v.numpy()
  np.testing.assert_equal(t.numpy(), n)

@pytest.mark.parametrize("device", [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"])
def test_setitem_device(device):
  t = Tensor([[1, 2, 3], [4, 5, 6]], device=device)
  t[1, ::-2] = 2.9   # cast to the tensor's dtype, as numpy
  t[:, 1] = Tensor([7, 8], device=device)
  assert t.tolist() == [[1, 7, 3], [2, 8, 2]]

@pytest.mark.cpu
def test_setitem_errors():
  t = Tensor(A)
  with pytest.raises(RuntimeError, match=r"\(3,\) to the indexed shape \(4, 5\)"): t[0] = Tensor([1.0, 2.0, 3.0])
  with pytest.raises(IndexError, match="size 3"): t[5] = 1.0

@pytest.mark.cpu
def test_assign():
  t = Tensor([1.0, 2.0, 3.0]).realize()
  same = t
  assert t.assign(Tensor([4.0, 5.0, 6.0])) is t
  assert same.tolist() == [4.0, 5.0, 6.0]
  t.assign(t * 2)   # the value reads the buffer it overwrites
  assert t.tolist() == [8.0, 10.0, 12.0]
  t.assign(1.5)
  assert t.tolist() == [1.5, 1.5, 1.5]
  lazy = Tensor.arange(3).float() + 1
  lazy.assign(Tensor([0.0, 0.0, 1.0]))
  assert lazy.tolist() == [0.0, 0.0, 1.0]
  with pytest.raises(RuntimeError, match=r"dtypes.float.*dtypes.int"): t.assign(Tensor([1, 2, 3]))
  with pytest.raises(RuntimeError, match=r"\(2,\) to shape \(3,\)"): t.assign(Tensor([1.0, 2.0]))

@pytest.mark.cpu
def test_inplace_operators():
  a = Tensor([[1.0, 2.0], [3.0, 4.0]]).realize()
  alias = a
  a += 1
  a -= Tensor([0.5, 1.0])
  a *= 2
  a /= 4
  a **= 2
  a @= Tensor([[1.0, 0.0], [0.0, 2.0]])
  ref = ((((np.array([[1.0, 2.0], [3.0, 4.0]]) + 1 - [0.5, 1.0]) * 2) / 4) ** 2) @ np.array([[1.0, 0.0], [0.0, 2.0]])
  assert alias is a
  close(alias, ref)
  b = Tensor([12, 7, 5]).realize()
  b //= 2
  b &= 6
  b |= 1
  b ^= 2
  b <<= 2
  b >>= 1
  r = ((((np.array([12, 7, 5]) // 2) & 6) | 1) ^ 2) << 2
  assert b.tolist() == (r >> 1).tolist()

@pytest.mark.cpu
def test_gather():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  idx = np.array([[3, 0, 0], [1, 2, 3]])
  close(Tensor(x).gather(1, Tensor(idx)), np.take_along_axis(x[:2], idx, 1))   # index may be smaller outside dim
  idx0 = np.array([[2, 0], [1, 1]])
  close(Tensor(x).gather(0, Tensor(idx0)), np.take_along_axis(x[:, :2], idx0, 0))
  assert Tensor(x).int().gather(-1, Tensor(idx)).dtype == dtypes.int32

def _np_scatter(x, dim, idx, src, combine=None):
  out = x.copy()
  for pos in np.ndindex(*idx.shape):
    tgt = list(pos)
    tgt[dim] = idx[pos]
    out[tuple(tgt)] = src[pos] if combine is None else combine(out[tuple(tgt)], src[pos])
  return out

@pytest.mark.cpu
def test_scatter():
  x = np.zeros((3, 4), np.float32)
  idx = np.array([[2, 0, 1, 2], [0, 1, 2, 0]])
  src = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
  close(Tensor(x).scatter(0, Tensor(idx), Tensor(src)), _np_scatter(x, 0, idx, src))
  idx1 = np.array([[3, 3], [0, 1]])   # duplicates without reduce: the last writer wins
  close(Tensor(x).scatter(1, Tensor(idx1), Tensor(src)), _np_scatter(x, 1, idx1, src))
  ones = np.ones((3, 4), np.float32)
  close(Tensor(ones).scatter(1, Tensor(idx1), Tensor(src), reduce="add"), _np_scatter(ones, 1, idx1, src, np.add))
  close(Tensor(ones * 2).scatter(1, Tensor(idx1), Tensor(src), reduce="multiply"), _np_scatter(ones * 2, 1, idx1, src, np.multiply))
  close(Tensor(x).scatter(0, Tensor(idx), 3.5), _np_scatter(x, 0, idx, np.full(idx.shape, 3.5)))

@pytest.mark.cpu
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  x = np.array([[1.0, -2.0, 3.0, 4.0], [0.5, 6.0, -7.0, 8.0]], np.float32)
  idx = np.array([[0, 0, 2], [3, 3, 3]])
  src = np.array([[5.0, -1.0, 2.0], [3.0, 9.0, -4.0]], np.float32)
  groups = {}
  for pos in np.ndindex(*idx.shape): groups.setdefault((pos[0], idx[pos]), []).append(src[pos])
  ref = x.copy()
  f = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
  for tgt, vals in groups.items(): ref[tgt] = f(vals + [x[tgt]] if include_self else vals)
  close(Tensor(x).scatter_reduce(1, Tensor(idx), Tensor(src), reduce, include_self=include_self), ref)

@pytest.mark.cpu
def test_scatter_reduce_int_mean():
  got = Tensor([10, 1, 1]).scatter_reduce(0, Tensor([0, 0]), Tensor([3, 4]), "mean")
  assert got.dtype == dtypes.int32 and got.tolist() == [5, 1, 1]

def test_scatter_python():
  dev = "PYTHON"
  got = Tensor([1.0, 1.0, 1.0], device=dev).scatter_reduce(0, Tensor([2, 2, 0], device=dev), Tensor([5.0, 6.0, 7.0], device=dev), "mean")
  assert got.tolist() == [4.0, 1.0, 4.0]
  assert Tensor([[1, 2], [3, 4]], device="PYTHON").gather(1, Tensor([[1], [0]], device="PYTHON")).tolist() == [[2], [3]]

SCATTER_ERRORS = [
  (lambda t: t.gather(0, Tensor([0.5])), RuntimeError, "integer index"),
  (lambda t: t.gather(0, Tensor([1])), RuntimeError, r"\(1,\).*\(2, 3\)"),
  (lambda t: t.gather(0, Tensor([[0, 1, 0, 1]])), RuntimeError, r"\(1, 4\).*\(2, 3\)"),
  (lambda t: t.gather(2, Tensor([[0]])), IndexError, "dimension 2"),
  (lambda t: t.scatter(0, Tensor([[0]]), Tensor([[1.0]]), reduce="max"), TypeError, "max"),
  (lambda t: t.scatter(0, Tensor([[0, 1]]), Tensor([[1.0]])), RuntimeError, r"\(1, 1\).*\(1, 2\)"),
  (lambda t: t.scatter_reduce(0, Tensor([[0]]), Tensor([[1.0]]), "foo"), RuntimeError, "foo"),
]

@pytest.mark.cpu
@pytest.mark.parametrize("f,exc,match", SCATTER_ERRORS)
def test_scatter_errors(f, exc, match):
  with pytest.raises(exc, match=match): f(Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))

@pytest.mark.cpu
def test_masked_select_nonzero():
  x = np.array([[1.0, 0.0, -2.0], [0.0, 5.0, 0.0]], np.float32)
  close(Tensor(x).masked_select(Tensor(x != 0)), x[x != 0])
  close(Tensor(x).masked_select(Tensor([True, False, True])), x[np.broadcast_to([True, False, True], x.shape)])
  close(Tensor(x).masked_select(Tensor(x > 0), size=4, fill_value=-1), [1.0, 5.0, -1.0, -1.0])
  assert Tensor(x).nonzero().tolist() == np.argwhere(x).tolist()
  assert Tensor([0, 3, 0, 4]).nonzero().tolist() == [[1], [3]]
  assert Tensor([0, 3, 0, 4]).nonzero(size=3, fill_value=-1).tolist() == [[1], [3], [-1]]
  assert Tensor([False, False]).nonzero().shape == (0, 1)
  assert Tensor(3.0).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)
  with pytest.raises(RuntimeError, match="bool mask"): Tensor(x).masked_select(Tensor(x))
  with pytest.raises(RuntimeError, match=r"\(3, 1\).*\(2, 3\)"): Tensor(x).masked_select(Tensor([[True], [False], [True]]))

@pytest.mark.cpu
def test_one_hot():
  got = Tensor([[0, 2], [1, 1]]).one_hot(3)
  assert got.tolist() == np.eye(3, dtype=np.int32)[[[0, 2], [1, 1]]].tolist() and dtypes.is_int(got.dtype)
  assert Tensor([5]).one_hot(3).tolist() == [[0, 0, 0]]
  with pytest.raises(ValueError, match="-1"): Tensor([1]).one_hot(-1)
  with pytest.raises(RuntimeError, match="float"): Tensor([1.0]).one_hot(2)

@pytest.mark.cpu
def test_assign_through_views():
  # writes to a view of a realized buffer reach the buffer (as torch; tinygrad 0.14 does it for shrinks)
  a, ref = Tensor(np.arange(12).reshape(3, 4)).realize(), np.arange(12).reshape(3, 4)
  v = a.T[::-1, 1:]
  v *= 10
  ref.T[::-1, 1:] *= 10
  assert a.tolist() == ref.tolist() and v.tolist() == ref.T[::-1, 1:].tolist()
  w = a[::2, 1::2]
  w[0] = Tensor([-1, -2])
  ref[::2, 1::2][0] = [-1, -2]
  assert a.tolist() == ref.tolist()
  r = a.reshape(2, 6)
  r.assign(r + 1)
  assert a.tolist() == (ref + 1).tolist()
  p = a.pad(((1, 0), None))   # the padded row has no place in the buffer: only the buffer's part is written
  p += 100
  assert a.tolist() == (ref + 101).tolist() and p.shape == (4, 4)

@pytest.mark.cpu
def test_write_into_numpy_shared_buffer_is_private():
  a = Tensor(np.arange(1 << 16, dtype=np.float32)).realize()
  before = a.numpy()
  a[0] = 5.0
  assert before[0] == 0.0 and a[0].item() == 5.0

@pytest.mark.cpu
@pytest.mark.parametrize("idx", [lambda: Tensor([5]), lambda: [5], lambda: Tensor([0, -4]), lambda: Tensor(np.array([[1], [3]], dtype=np.int32))])
def test_out_of_range_index_is_an_index_error(idx):
  # as torch raises (0.14 reads 0): the index's values are on the host, so checking them costs no kernel
  x = Tensor([1.0, 2.0, 3.0])
  with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 3"): x[idx()]
  y = Tensor.zeros(3).contiguous().realize()
  with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 3"): y[idx()] = 1.0

@pytest.mark.cpu
def test_in_range_negative_indices_still_index():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_equal(Tensor(x)[Tensor([-1, 0, -3])].numpy(), x[[-1, 0, -3]])
  np.testing.assert_equal(Tensor(x)[:, [3, -4]].numpy(), x[:, [3, -4]])
