# dot/matmul (shapes, dtypes, errors), einsum (explicit, implicit, '...', diagonals) and the factorisations against numpy.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def close(t:Tensor, ref, atol=1e-5, rtol=1e-5):
  got, ref = t.numpy(), np.asarray(ref)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)

class TestMatmul:
  @pytest.mark.parametrize("dev", DEVICES)
  @pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((3,), (5, 3, 2)),
                                     ((2, 1, 2, 3), (4, 3, 5)), ((1, 3), (2, 3, 1))])
  def test_shapes(self, dev, sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=1)
    close(Tensor(a, device=dev) @ Tensor(b, device=dev), np.matmul(a, b), atol=1e-5)
    close(Tensor(a, device=dev).dot(Tensor(b, device=dev)), np.matmul(a, b), atol=1e-5)
  @pytest.mark.cpu
  def test_reverse_and_rmatmul(self):
    a, b = rnd(2, 3), rnd(4, 2, seed=1)
    close(Tensor(a).matmul(Tensor(b), reverse=True), b @ a, atol=1e-5)
    close(b.tolist() @ Tensor(a), b @ a, atol=1e-5)
    close(Tensor(b) @ a.tolist(), b @ a, atol=1e-5)
  @pytest.mark.cpu
  def test_dtypes(self):
    assert (Tensor([1, 2, 3]) @ Tensor([4, 5, 6])).dtype is dtypes.int32
    assert (Tensor([1, 2], dtype=dtypes.int8) @ Tensor([1.0, 2.0])).dtype is dtypes.float32
    r = Tensor([100, 100], dtype=dtypes.int8) @ Tensor([1, 1], dtype=dtypes.int8)
    assert r.dtype is dtypes.int8 and r.item() == np.int8(-56)   # accumulates in int, wraps on the cast back, as tinygrad
    assert (Tensor([1, 2], dtype=dtypes.half) @ Tensor([1, 2], dtype=dtypes.half)).dtype is dtypes.half
    b = Tensor([True, False]) @ Tensor([True, True])
    assert b.dtype is dtypes.bool and b.item() is True
    r = Tensor([[1, 2]], dtype=dtypes.half).matmul(Tensor([[3], [4]], dtype=dtypes.half), dtype=dtypes.float32)
    assert r.dtype is dtypes.float32 and r.tolist() == [[11.0]]
  @pytest.mark.cpu
  def test_errors(self):
    with pytest.raises(RuntimeError, match=r"cannot dot \(3, 4\) and \(2, 3\)"): Tensor.ones(2, 3).matmul(Tensor.ones(3, 4), reverse=True)
    with pytest.raises(RuntimeError, match=r"at least 1D, got 2D and 0D \(shapes \(2, 3\) and \(\)\)"): Tensor.ones(2, 3).dot(Tensor(2.0))
    with pytest.raises(RuntimeError, match=r"shapes \(2, 3, 1, 4\) and \(5, 1, 2, 4\) can't be broadcast"):
      Tensor.ones(2, 3, 4) @ Tensor.ones(5, 4, 2)

class TestEinsum:
  @pytest.mark.parametrize("formula,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij->...ji", [(2, 3, 4)]), ("i...,i", [(2, 3, 4), (2,)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->j", [(3, 3, 2)]), ("ba,ca->bc", [(2, 3), (4, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), (" i j , j k -> k i ", [(2, 3), (3, 4)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("b...,b...->b...", [(2, 3), (2, 1)]), ("ijk->kji", [(2, 3, 4)]), ("i", [(3,)])])
  @pytest.mark.cpu
  def test_formulas(self, formula, shapes):
    ops = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    close(Tensor.einsum(formula, *[Tensor(o) for o in ops]), np.einsum(formula.replace(" ", ""), *ops), atol=1e-5)
  @pytest.mark.parametrize("dev", DEVICES)
  def test_list_operands_and_dtype(self, dev):
    a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(12, dtype=np.int32).reshape(3, 4)
    r = Tensor.einsum("ij,jk->ik", [Tensor(a, device=dev), Tensor(b, device=dev)])
    assert r.dtype is dtypes.int32
    np.testing.assert_array_equal(r.numpy(), a @ b)
    assert Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b), dtype=dtypes.float32).dtype is dtypes.float32
  @pytest.mark.cpu
  def test_errors(self):
    a = Tensor.ones(2, 3)
    with pytest.raises(ValueError, match="has 2 operands, got 1"): Tensor.einsum("ij,jk->ik", a)
    with pytest.raises(RuntimeError, match="subscript 'j' has sizes 3 and 2"): Tensor.einsum("ij,jk->ik", a, a)
    with pytest.raises(ValueError, match="output subscripts 'k' must be distinct letters of the inputs"): Tensor.einsum("ij->k", a)
    with pytest.raises(ValueError, match=r"subscripts 'ijk' don't match an operand of shape \(2, 3\)"): Tensor.einsum("ijk->i", a)
    with pytest.raises(RuntimeError, match="repeated subscript needs equal sizes, got 2 and 3"): Tensor.einsum("ii->i", a)
    with pytest.raises(ValueError, match="invalid subscript '1'"): Tensor.einsum("i1->i", a)
    with pytest.raises(TypeError, match="operands must be Tensors"): Tensor.einsum("ij->i", np.ones((2, 3)))
    with pytest.raises(TypeError, match="einsum needs a formula string, got list"): Tensor.einsum([a], a)
  @pytest.mark.parametrize("formula, msg", [
    ("...i...,i->", r"operand 0 \('...i...'\) has more than one ellipsis"),
    ("...i->......", r"the output \('......'\) has more than one ellipsis"),
    ("..i->i", "invalid subscript '.'"),
    ("i->i->i", "invalid subscript '-'"),
    ("i->ii", "output subscripts 'ii' must be distinct"),
  ])
  def test_malformed_formula(self, formula, msg):
    # torch raises RuntimeError for a malformed formula, tinygrad 0.14 mostly ValueError: the error is both
    x, v = Tensor.ones(2, 3), Tensor.ones(3)
    ops = (x, v) if "," in formula else (v,)
    for exc in (RuntimeError, ValueError):
      with pytest.raises(exc, match=msg): Tensor.einsum(formula, *ops)

class TestFactorisations:
  @pytest.mark.cpu
  @pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
  def test_qr(self, shape):
    a = rnd(*shape)
    Q, R = Tensor(a).qr()
    q, r = Q.numpy(), R.numpy()
    m = shape[-2]
    assert q.shape == shape[:-2] + (m, m) and r.shape == shape
    np.testing.assert_allclose(q @ r, a, atol=1e-4)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(m), q.shape), atol=1e-5)
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-5)
    # the same R as LAPACK up to the sign of each row
    rr = np.linalg.qr(a.astype(np.float64), mode="complete")[1]
    np.testing.assert_allclose(np.abs(r), np.abs(rr), atol=1e-4)
  @pytest.mark.cpu
  def test_qr_zero_column(self):
    a = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0]], np.float32)
    Q, R = Tensor(a).qr()
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), a, atol=1e-5)
  @pytest.mark.cpu
  @pytest.mark.parametrize("shape,full", [((4, 4), True), ((5, 3), True), ((3, 5), False), ((2, 3, 3), True), ((5, 4), False)])
  def test_svd(self, shape, full):
    a = rnd(*shape)
    U, S, Vh = Tensor(a).svd(full_matrices=full)
    u, s, vh = U.numpy(), S.numpy(), Vh.numpy()
    ref_u, ref_s, ref_vh = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert u.shape == ref_u.shape and s.shape == ref_s.shape and vh.shape == ref_vh.shape
    np.testing.assert_allclose(s, ref_s, atol=1e-4, rtol=1e-4)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-4)
  @pytest.mark.cpu
  def test_svd_rank_deficient_sorted(self):
    a = np.outer([1.0, 2.0, 3.0], [1.0, 0.0, -1.0]).astype(np.float32) + np.diag([0.0, 0.5, 0.0]).astype(np.float32)
    _, S, _ = Tensor(a).svd()
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a)[1], atol=1e-4)
    assert (np.diff(S.numpy()) <= 1e-6).all()
  @pytest.mark.cpu
  @pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 4)])
  def test_newton_schulz(self, shape):
    a, params = rnd(*shape), (3.4445, -4.7750, 2.0315)
    def ns(g):
      if g.shape[-2] > g.shape[-1]: return np.swapaxes(ns(np.swapaxes(g, -1, -2)), -1, -2)
      g = g / (np.sqrt((g * g).sum(axis=(-2, -1), keepdims=True)) + 1e-7)
      for _ in range(5):
        gram = g @ np.swapaxes(g, -1, -2)
        g = params[0] * g + params[1] * gram @ g + params[2] * gram @ gram @ g
      return g
    close(Tensor(a).newton_schulz(5, params), ns(a.astype(np.float64)), atol=1e-4)
  @pytest.mark.cpu
  def test_newton_schulz_orthogonalises(self):
    out = Tensor(np.eye(3, dtype=np.float32) + 0.3 * rnd(3, 3)).newton_schulz(10, (1.5, -0.5)).numpy()
    np.testing.assert_allclose(out @ out.T, np.eye(3), atol=1e-3)
  @pytest.mark.cpu
  def test_errors(self):
    for f in (lambda t: t.qr(), lambda t: t.svd(), lambda t: t.newton_schulz(1, (1,))):
      with pytest.raises(RuntimeError, match=r"expects a tensor of two or more dimensions, got shape \(3,\)"): f(Tensor.ones(3))
