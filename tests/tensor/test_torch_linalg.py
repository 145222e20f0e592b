import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor  # noqa: E402

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (4, 5))])
def test_matmul(sa, sb):
  compare(lambda a, b: a @ b, lambda a, b: a @ b, [sa, sb], atol=1e-5, rtol=1e-5)
  compare(lambda a, b: a.dot(b), lambda a, b: torch.matmul(a, b), [sa, sb], atol=1e-5, rtol=1e-5)

def test_matmul_int_and_dtype():
  a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(12, dtype=np.int32).reshape(3, 4)
  compare(lambda x, y: x @ y, lambda x, y: x @ y, vals=[a, b])
  compare(lambda x, y: x.matmul(y, reverse=True), lambda x, y: y @ x, [(4, 3), (2, 4)], atol=1e-5, rtol=1e-5)

@pytest.mark.parametrize("formula,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("ii->i", [(3, 3)]),
                                            ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("i,j->ij", [(3,), (2,)]), ("...ij,...jk", [(2, 2, 3), (3, 2)]),
                                            ("ijk,ik->j", [(2, 3, 4), (2, 4)]), ("i,i->", [(5,), (5,)]), ("abc->", [(2, 3, 2)])])
def test_einsum(formula, shapes):
  compare(lambda *ts: Tensor.einsum(formula, *ts), lambda *ts: torch.einsum(formula, *ts), shapes, atol=1e-5, rtol=1e-5)

def _fix_signs(a, ref, axis):
  # columns (axis=-2) or rows (axis=-1) are unique up to sign: align each with the reference
  s = np.sign(np.sum(a * ref, axis=axis, keepdims=True))
  return a * np.where(s == 0, 1, s)

@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5, 3)])
def test_qr(shape):
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  q, r = (t.numpy() for t in Tensor(x).qr())
  tq, tr = (t.numpy() for t in torch.linalg.qr(torch.tensor(x), mode="complete" if shape[-2] > shape[-1] else "reduced"))
  assert q.shape == tq.shape and r.shape == tr.shape, (q.shape, tq.shape, r.shape, tr.shape)
  np.testing.assert_allclose(q @ r, x, atol=1e-5)
  k = min(shape[-2:])
  np.testing.assert_allclose(_fix_signs(q[..., :k], tq[..., :k], -2), tq[..., :k], atol=1e-5)
  np.testing.assert_allclose(np.abs(r), np.abs(tr), atol=1e-5)

@pytest.mark.parametrize("shape,full", [((4, 3), True), ((3, 5), False), ((2, 3, 3), True)])
def test_svd(shape, full):
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  u, s, vh = (t.numpy() for t in Tensor(x).svd(full_matrices=full))
  tu, ts, tvh = (t.numpy() for t in torch.linalg.svd(torch.tensor(x), full_matrices=full))
  assert (u.shape, s.shape, vh.shape) == (tu.shape, ts.shape, tvh.shape)
  np.testing.assert_allclose(s, ts, atol=1e-4, rtol=1e-4)
  k = min(shape[-2:])
  np.testing.assert_allclose(_fix_signs(u[..., :, :k], tu[..., :, :k], -2), tu[..., :, :k], atol=1e-3)
  np.testing.assert_allclose(_fix_signs(vh[..., :k, :], tvh[..., :k, :], -1), tvh[..., :k, :], atol=1e-3)
