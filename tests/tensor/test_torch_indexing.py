import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor  # noqa: E402
import torch.nn.functional as F  # noqa: E402

I1, I2 = np.array([[0, 2], [2, 1]]), np.array([1, 0])

def _sub(key, lib):
  def conv(k):
    if k == "I1": return Tensor(I1) if lib == "ours" else torch.tensor(I1)
    if k == "I2": return Tensor(I2) if lib == "ours" else torch.tensor(I2)
    return k
  return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)

class _Rec:
  def __getitem__(self, k): return k
R = _Rec()
KEYS = {"int": R[1], "neg_int": R[-1, 2], "slice": R[1:3, ::2], "none_ellipsis": R[None, ..., 1], "list": R[[0, 3, 3]],
        "tensor_idx": R[:, "I1"], "two_tensors": R["I1", "I2"], "mixed": R["I2", 1:, "I2"], "ellipsis_tensor": R[..., "I2"],
        "neg_slice": R[-3:-1, -1:], "empty": R[2:1], "list_2d": R[[[0, 1], [2, 3]], [1, 2]]}

@pytest.mark.parametrize("name", list(KEYS))
def test_getitem(name):
  k = KEYS[name]
  compare(lambda x: x[_sub(k, "ours")], lambda x: x[_sub(k, "torch")], [(4, 3, 4)])

def test_getitem_negative_step():
  # torch has no negative steps: its reference is flip + a positive step
  compare(lambda x: x[::-2, 1:], lambda x: x.flip(0)[::2, 1:], [(5, 3)])
  compare(lambda x: x[3:0:-2, ::-1], lambda x: x.flip(0)[1:4:2].flip(1), [(5, 3)])

def test_setitem_matches_torch():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  ours, ref = Tensor(a).contiguous().realize(), torch.tensor(a)
  for k, v in [((1, slice(None)), 7.0), ((slice(None), 2), np.array([1.0, 2.0, 3.0], dtype=np.float32)), ((slice(0, 2), slice(1, 3)), -1.0)]:
    ours[k] = Tensor(v) if isinstance(v, np.ndarray) else v
    ref[k] = torch.tensor(v) if isinstance(v, np.ndarray) else v
  np.testing.assert_array_equal(ours.numpy(), ref.numpy())

def test_gather_scatter():
  idx = np.array([[0, 2, 1], [1, 1, 0]])
  compare(lambda x: x.gather(1, Tensor(idx)), lambda x: x.gather(1, torch.tensor(idx)), [(2, 4)])
  compare(lambda x: x.gather(0, Tensor(idx)), lambda x: x.gather(0, torch.tensor(idx)), [(3, 3)])
  idx2 = np.array([[0, 2, 1], [3, 0, 2]])
  compare(lambda x, s: x.scatter(1, Tensor(idx2), s), lambda x, s: x.scatter(1, torch.tensor(idx2), s), [(2, 4), (2, 3)])
  compare(lambda x: x.scatter(1, Tensor(idx2), 2.5), lambda x: x.scatter(1, torch.tensor(idx2), 2.5), [(2, 4)])

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  idx = np.array([[0, 1, 0, 1], [2, 2, 0, 0]])
  # grads of amax/amin with ties and prod are defined differently; compare values only for those
  compare(lambda x, s: x.scatter_reduce(1, Tensor(idx), s, reduce, include_self=include_self),
          lambda x, s: x.scatter_reduce(1, torch.tensor(idx), s, reduce, include_self=include_self), [(2, 3), (2, 4)],
          grad=reduce in ("sum", "mean"), atol=1e-5, rtol=1e-5)

def test_masked_and_one_hot():
  m = np.array([[True, False, True], [False, False, True]])
  compare(lambda x: x.masked_select(Tensor(m)), lambda x: x.masked_select(torch.tensor(m)), [(2, 3)])
  compare(lambda x: x.masked_fill(Tensor(m), -1.0), lambda x: x.masked_fill(torch.tensor(m), -1.0), [(2, 3)])
  compare(lambda x: x.nonzero(), lambda x: x.nonzero(), vals=[np.array([[0, 1, 0], [2, 0, 3]], dtype=np.int32)])
  v = np.array([[0, 3], [2, 1]], dtype=np.int64)
  compare(lambda x: x.one_hot(4), lambda x: F.one_hot(x, 4), vals=[v], check_dtype=False)
