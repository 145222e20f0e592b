# scatter / scatter_reduce against numpy loops (every reduce mode, with and without self's own value) and the errors torch raises.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

IDX = np.array([[0, 1, 2, 0], [1, 2, 0, 1], [0, 0, 1, 2]], np.int32)
SRC = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
SELF = np.full((3, 4), 2.0, np.float32)

def np_scatter_reduce(self_, idx, src, reduce, include_self):
  """torch's definition, dim 0: out[idx[i, j], j] combines src[i, j] (and self's value if include_self)."""
  vals = {}
  for i in range(idx.shape[0]):
    for j in range(idx.shape[1]): vals.setdefault((idx[i, j], j), []).append(src[i, j])
  out = self_.astype(np.float64).copy()
  for (r, c), v in vals.items():
    v = ([self_[r, c]] if include_self else []) + v
    out[r, c] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](v)
  return out

@pytest.mark.cpu
def test_scatter_last_writer_and_scalar():
  out = Tensor(SELF).scatter(0, Tensor(IDX[:2]), Tensor(SRC)).numpy()
  ref = SELF.copy()
  for i in range(2):
    for j in range(4): ref[IDX[i, j], j] = SRC[i, j]
  np.testing.assert_array_equal(out, ref)
  out = Tensor(SELF).scatter(1, Tensor(np.array([[3], [0], [1]], np.int32)), 7.0).numpy()
  ref = SELF.copy()
  ref[0, 3] = ref[1, 0] = ref[2, 1] = 7.0
  np.testing.assert_array_equal(out, ref)

@pytest.mark.cpu
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_modes(reduce, include_self):
  out = Tensor(SELF).scatter_reduce(0, Tensor(IDX), Tensor(SRC), reduce=reduce, include_self=include_self).numpy()
  np.testing.assert_allclose(out, np_scatter_reduce(SELF, IDX, SRC, reduce, include_self), rtol=1e-6)

@pytest.mark.cpu
def test_scatter_reduce_int_mean_floors():
  s, src = np.array([0, 0, 5], np.int32), np.array([3, 4, 1, 2], np.int32)
  out = Tensor(s).scatter_reduce(0, Tensor(np.array([0, 0, 1, 2], np.int32)), Tensor(src), reduce="mean").numpy()
  np.testing.assert_array_equal(out, [7 // 3, 1 // 2, 7 // 2])

def test_scatter_errors():
  t, idx = Tensor(SELF), Tensor(IDX)
  with pytest.raises(RuntimeError, match=r"self.dtype=dtypes.float must equal src.dtype=dtypes.int"):
    t.scatter(0, idx, Tensor(SRC).cast(dtypes.int32))
  with pytest.raises(RuntimeError, match=r"dtype"): t.scatter_reduce(0, idx, Tensor(SRC).cast(dtypes.int32), reduce="sum")
  with pytest.raises(RuntimeError, match=r"needs as many dims"): t.scatter(0, Tensor([0, 1]), Tensor(SRC))
  with pytest.raises(RuntimeError, match=r"integer index"): t.scatter(0, idx.float(), Tensor(SRC))
  with pytest.raises(RuntimeError, match=r"reduce='foo'"): t.scatter_reduce(0, idx, Tensor(SRC), reduce="foo")
  with pytest.raises(TypeError, match=r"reduce"): t.scatter(0, idx, Tensor(SRC), reduce="max")
  with pytest.raises(IndexError, match=r"out of range"): t.scatter(2, idx, Tensor(SRC))

def _oob_calls():
  t = Tensor(SELF)
  return {"scatter": lambda i: t.scatter(0, i, Tensor(SRC)), "scatter scalar": lambda i: t.scatter(0, i, 7.0),
          "scatter add": lambda i: t.scatter(0, i, Tensor(SRC), reduce="add"),
          "scatter_reduce": lambda i: t.scatter_reduce(0, i, Tensor(SRC), reduce="amax", include_self=False),
          "gather": lambda i: t.gather(0, i)}

@pytest.mark.parametrize("op", ["scatter", "scatter scalar", "scatter add", "scatter_reduce", "gather"])
@pytest.mark.parametrize("bad", [3, -1, 1000])
def test_out_of_bounds_index_is_an_error(op, bad):
  # torch raises; writing (or reading) nothing for such an index would be a silently wrong result
  idx = IDX.copy()
  idx[1, 2] = bad
  with pytest.raises(RuntimeError, match=rf"{op.split()[0]}: index {bad} is out of bounds for dimension 0 with size 3"): _oob_calls()[op](Tensor(idx))

@pytest.mark.cpu
@pytest.mark.parametrize("make", [
  lambda: Tensor(IDX[:2].tolist()).flip(1),                       # a view of a list's buffer
  lambda: Tensor(IDX[:1]).expand(3, 4).contiguous(),              # a broadcast row (through CONTIGUOUS, not yet realized)
  lambda: Tensor.full((2, 4), 2).pad(((0, 1), (0, 0))),           # Tensor.full's buffer, padded with zeros
  lambda: Tensor(IDX.astype(np.int64)).cast(dtypes.int32).to("PYTHON").to("CPU"),   # copies and an int cast
])
def test_in_bounds_views_are_read_and_computed(make):
  # the values an index view holds, read on the host, pass the check; the result is as numpy's
  idx = make()
  ref, src = SELF.copy(), SRC.copy()
  iv = idx.numpy()
  for i in range(iv.shape[0]):
    for j in range(iv.shape[1]): ref[iv[i, j], j] = src[i, j]
  np.testing.assert_array_equal(Tensor(SELF).scatter(0, make(), Tensor(SRC)).numpy(), ref)

@pytest.mark.cpu
@pytest.mark.parametrize("make", [
  lambda: Tensor([[0, 1, 2, 5]]).flip(1),
  lambda: Tensor([[5, 0, 1, 2]]).expand(2, 4),
  lambda: Tensor.full((2, 4), 3),
  lambda: Tensor.full((2, 4), 4, buffer=False),
  lambda: Tensor(np.array([[0, 1, 2, 9]], np.int64)).to("PYTHON"),
  lambda: (Tensor([[2, 1]]) + 1).realize(),
])
def test_out_of_bounds_views_are_errors(make):
  with pytest.raises(RuntimeError, match=r"scatter: index \d is out of bounds for dimension 0 with size 3"):
    Tensor(SELF).scatter(0, make(), Tensor(SRC))

@pytest.mark.cpu
def test_shrunk_away_values_are_not_checked():
  # a value outside the view the index is does not count
  out = Tensor(SELF).scatter(0, Tensor([[0, 1, 2, 9]])[:, :3], Tensor(SRC)).numpy()
  ref = SELF.copy()
  ref[0, 0], ref[1, 1], ref[2, 2] = SRC[0, 0], SRC[0, 1], SRC[0, 2]
  np.testing.assert_array_equal(out, ref)

def test_computed_index_is_not_realized_for_the_check():
  # an index that needs a kernel is not run early to check it (documented: such an index is not checked)
  from tinygrad.helpers import GlobalCounters
  idx = Tensor(IDX) + 0
  before = GlobalCounters.kernel_count
  out = Tensor(SELF).scatter(0, idx, Tensor(SRC))
  assert GlobalCounters.kernel_count == before
  assert out.shape == (3, 4)
