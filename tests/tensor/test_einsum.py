# einsum forms beyond plain contractions, against np.einsum: ellipsis, repeated indices (diagonal, trace), implicit output.
import numpy as np
import pytest
from tinygrad import Tensor

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

@pytest.mark.cpu
@pytest.mark.parametrize("formula,shapes", [
  ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
  ("ij,jk", [(3, 4), (4, 5)]), ("i,i", [(5,)]*2), ("ij->", [(3, 4)]), ("...ii->...i", [(2, 3, 3)]), ("ba", [(3, 4)]),
  ("i,j", [(3,), (4,)]), ("bii,bjj->bij", [(2, 3, 3), (2, 4, 4)]), ("ij...,jk...->ik...", [(3, 4, 2), (4, 5, 2)]),
])
def test_einsum_matches_numpy(formula, shapes):
  xs = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
  out = Tensor.einsum(formula, *[Tensor(x) for x in xs])
  np.testing.assert_allclose(out.numpy(), np.einsum(formula, *xs), rtol=1e-5, atol=1e-5)

@pytest.mark.cpu
def test_einsum_scalar_operand():
  assert Tensor.einsum("->", Tensor(3.0)).item() == 3.0
  assert Tensor.einsum(",i->i", Tensor(2.0), Tensor([1.0, 2.0])).tolist() == [2.0, 4.0]

@pytest.mark.cpu
def test_einsum_repeated_index_gradient():
  a = rnd(3, 3)
  t = Tensor(a, requires_grad=True)
  Tensor.einsum("ii", t).backward()
  np.testing.assert_array_equal(t.grad.numpy(), np.eye(3, dtype=np.float32))
