"""Linear algebra: dot/matmul, einsum, and the iterative factorisations (QR by Householder reflections, SVD by one-sided Jacobi
rotations, Newton-Schulz orthogonalisation), all as broadcast multiplies and sums."""
from __future__ import annotations
from typing import TYPE_CHECKING, Sequence
import functools
import string
from tinygrad.dtype import DTypeLike, least_upper_dtype, to_dtype
from tinygrad.helpers import argfix, argsort
from tinygrad.tensor.common import TensorBase
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

class EinsumFormulaError(RuntimeError, ValueError):
  """A malformed einsum formula: torch raises RuntimeError for it, tinygrad 0.14 (mostly) ValueError; this is both."""

class LinalgMixin:
  def dot(self, w:Tensor, dtype:DTypeLike|None=None) -> Tensor:
    """Sum product of self's last dim with w's last (1-d w) or second-to-last dim, batch dims broadcast (numpy's matmul). The
    sum accumulates in dtype when given (the result is then of dtype), else in the promoted dtype's accumulator."""
    if not isinstance(w, TensorBase): w = type(self)(w, device=self.device)
    if self.ndim == 0 or w.ndim == 0: raise RuntimeError(f"both tensors need to be at least 1D, got {self.ndim}D and {w.ndim}D "
                                                         f"(shapes {self.shape} and {w.shape})")
    wk = -min(w.ndim, 2)
    if self.shape[-1] != w.shape[wk]: raise RuntimeError(f"cannot dot {self.shape} and {w.shape} ({self.shape[-1]} != {w.shape[wk]})")
    both = 1 if self.ndim > 1 and w.ndim > 1 else 0
    # x: (..., m, [1], k), w: (..., [1], n, k): the product sums over the last dim
    x = self.reshape(*self.shape[:-1], *[1] * both, self.shape[-1])
    wt = w.reshape(*w.shape[:-2], *[1] * both, *w.shape[wk:]).transpose(-1, wk)
    return (x * wt).sum(-1, dtype=dtype).cast(least_upper_dtype(self.dtype, w.dtype) if dtype is None else to_dtype(dtype))
  def matmul(self, x:Tensor, reverse:bool=False, dtype:DTypeLike|None=None) -> Tensor:
    """self @ x (x @ self when reverse); see dot."""
    if not isinstance(x, TensorBase): x = type(self)(x, device=self.device)
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)

  @classmethod
  def einsum(cls, formula:str, *operands:Tensor|Sequence[Tensor], dtype:DTypeLike|None=None) -> Tensor:
    """Einstein summation, as numpy/torch: 'ij,jk->ik', implicit output (the letters used once, sorted), '...' for broadcast
    dims and repeated letters within an operand (a diagonal)."""
    if not isinstance(formula, str): raise TypeError(f"einsum needs a formula string, got {type(formula).__name__}")
    xs, formula = list(argfix(*operands)), formula.replace(" ", "")
    if not all(isinstance(x, TensorBase) for x in xs): raise TypeError(f"einsum operands must be Tensors, got {[type(x).__name__ for x in xs]}")
    lhs, arrow, rhs = formula.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(xs): raise EinsumFormulaError(f"einsum {formula!r} has {len(inputs)} operands, got {len(xs)}")
    for what, s in [(f"operand {i}", s) for i, s in enumerate(inputs)] + [("the output", rhs)]:
      if s.count("...") > 1: raise EinsumFormulaError(f"einsum {formula!r}: {what} ({s!r}) has more than one ellipsis '...'")
      if bad := [c for c in s.replace("...", "") if c not in string.ascii_letters]:
        raise EinsumFormulaError(f"einsum {formula!r}: invalid subscript {bad[0]!r}")
    # '...' becomes fresh letters: as many as the most dims any operand's ellipsis stands for, right-aligned (broadcasting)
    free = [c for c in string.ascii_letters if c not in formula]
    ell_n = [x.ndim - len(s.replace("...", "")) if "..." in s else 0 for s, x in zip(inputs, xs)]
    if any(n < 0 for n in ell_n): raise EinsumFormulaError(f"einsum {formula!r}: an operand has fewer dims than its subscripts")
    ell = "".join(free[:max(ell_n, default=0)])
    inputs = [s.replace("...", ell[len(ell) - n:]) for s, n in zip(inputs, ell_n)]
    if arrow: rhs = rhs.replace("...", ell)
    else:
      letters = "".join(inputs)
      rhs = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    for s, x in zip(inputs, xs):
      if len(s) != x.ndim: raise EinsumFormulaError(f"einsum {formula!r}: subscripts {s!r} don't match an operand of shape {x.shape}")
    if len(set(rhs)) != len(rhs) or any(c not in "".join(inputs) for c in rhs):
      raise EinsumFormulaError(f"einsum {formula!r}: output subscripts {rhs!r} must be distinct letters of the inputs")
    # a letter repeated within one operand takes its diagonal
    for i, (s, x) in enumerate(zip(inputs, xs)):
      while (rep := next((c for c in s if s.count(c) > 1), None)) is not None:
        j, k = s.index(rep), s.index(rep, s.index(rep) + 1)
        x, s = x._diagonal_of(j, k), s[:j] + s[j+1:k] + s[k+1:] + rep
      inputs[i], xs[i] = s, x
    sizes: dict[str, int] = {}
    for s, x in zip(inputs, xs):
      for c, n in zip(s, x.shape):
        if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
          raise RuntimeError(f"einsum {formula!r}: subscript {c!r} has sizes {sizes[c]} and {n}")
        sizes[c] = max(sizes[c], n)
    alpha = sorted(sizes)
    # (a list argument: a 0-d operand permutes by the empty order)
    aligned = [x.permute([s.index(c) for c in sorted(s)]).reshape([x.shape[s.index(c)] if c in s else 1 for c in alpha])
               for s, x in zip(inputs, xs)]
    prod_ = functools.reduce(lambda a, b: a * b, aligned)._expand_to(tuple(sizes[c] for c in alpha))
    ret = prod_.sum([i for i, c in enumerate(alpha) if c not in rhs], dtype=dtype)
    return ret.permute(argsort(argsort(list(rhs)))) if ret.ndim else ret
  def _diagonal_of(self, j:int, k:int) -> Tensor:
    """The diagonal over dims j < k (of one size n), moved to the last dim: flattening the two dims, padding each row of n by one
    and reading every (n+1)-th element leaves the diagonal."""
    n = self.shape[j]
    if self.shape[k] != n: raise RuntimeError(f"einsum: a repeated subscript needs equal sizes, got {self.shape[j]} and {self.shape[k]}")
    rest = [d for d in range(self.ndim) if d not in (j, k)]
    x = self.permute(*rest, j, k).reshape(*[self.shape[d] for d in rest], n * n)
    x = x.pad(tuple([None] * len(rest) + [(0, n)])).reshape(*[self.shape[d] for d in rest], n, n + 1)
    return x.shrink(tuple([None] * len(rest) + [None, (0, 1)])).reshape(*[self.shape[d] for d in rest], n)

  # ***** factorisations *****
  def _check_matrix(self, what:str) -> None:
    if self.ndim < 2: raise RuntimeError(f"{what} expects a tensor of two or more dimensions, got shape {self.shape}")
  def qr(self) -> tuple[Tensor, Tensor]:
    """Q (orthogonal, (..., m, m)) and R (upper triangular, (..., m, n)) with self = Q @ R, by Householder reflections."""
    self._check_matrix("qr")
    batch, m, n = self.shape[:-2], self.shape[-2], self.shape[-1]
    R, Q = self, type(self).eye(m, device=self.device, dtype=self.dtype).reshape(*[1] * len(batch), m, m).expand(*batch, m, m)
    rows = type(self).arange(m, device=self.device)
    for i in range(min(m, n)):
      # the reflector v (zero above row i, v[i] = 1) maps column i below the diagonal onto -sign(x_i)*|x| e_i
      x = (rows >= i).where(R[..., :, i], 0)
      norm = (x * x).sum(-1, keepdim=True).sqrt()
      xi = (rows == i).where(x, 0).sum(-1, keepdim=True)
      sgn = (xi < 0).where(-1.0, 1.0)
      u0 = xi + sgn * norm
      nonzero = norm.ne(0)
      v = ((rows == i).where(u0, x) / nonzero.where(u0, 1)).unsqueeze(-1)
      tau_v = nonzero.where(sgn * u0 / nonzero.where(norm, 1), 0).unsqueeze(-1) * v   # tau * v, tau = 2 / |v|^2
      R = R - tau_v @ (v.transpose(-2, -1) @ R)
      Q = Q - (Q @ v) @ tau_v.transpose(-2, -1)
    return Q, R
  def svd(self, full_matrices:bool=True) -> tuple[Tensor, Tensor, Tensor]:
    """U, S (descending), Vh with self = U @ diag(S) @ Vh: QR first, then one-sided Jacobi sweeps on R (round-robin pairs of
    columns rotated until orthogonal); the values are sorted by ranking them with comparisons (a permutation matrix)."""
    self._check_matrix("svd")
    batch, m, n = self.shape[:-2], self.shape[-2], self.shape[-1]
    Q, R = (self if m >= n else self.transpose(-2, -1)).qr()
    k, big = min(m, n), max(m, n)
    dev, dt = self.device, self.dtype
    eye = type(self).eye(k, device=dev, dtype=dt)
    U, V = R[..., :k, :k].contiguous(), eye.reshape(*[1] * len(batch), k, k).expand(*batch, k, k).contiguous()
    order, h = list(range(k)), k // 2
    for _ in range(4 * k):   # ~4 sweeps of k-1 rounds converge for the sizes this is meant for
      if h == 0: break
      # this round's pairs (order[p], order[k-1-p]); P selects the paired columns: the first h, then their partners
      left, right = order[:h], order[k - h:][::-1]
      sel = type(self)([[1.0 if c == col else 0.0 for col in left + right] for c in range(k)], device=dev, dtype=dt)
      pair = U @ sel
      ul, ur = pair[..., :h], pair[..., h:]
      gamma, alpha, beta = (ul * ur).sum(-2, keepdim=True), (ul * ul).sum(-2, keepdim=True), (ur * ur).sum(-2, keepdim=True)
      rot = gamma.ne(0)
      zeta = (beta - alpha) / (2 * rot.where(gamma, 1))
      t = rot.where((zeta < 0).where(-1.0, 1.0) / (zeta.abs() + (1 + zeta * zeta).sqrt()), 0)
      c = (1 + t * t).sqrt().reciprocal()
      s = c * t
      # the rotation: identity plus, per pair (a, b), (c-1) at (a,a) and (b,b), s at (a,b), -s at (b,a)
      mi, mj = sel[:, :h].transpose(0, 1), sel[:, h:].transpose(0, 1)      # (h, k) one-hot rows of a and b
      cm, sm = (c - 1).reshape(*batch, h, 1, 1), s.reshape(*batch, h, 1, 1)
      rmat = eye + (cm * (mi.unsqueeze(-1) * mi.unsqueeze(-2) + mj.unsqueeze(-1) * mj.unsqueeze(-2)) +
                    sm * (mi.unsqueeze(-1) * mj.unsqueeze(-2) - mj.unsqueeze(-1) * mi.unsqueeze(-2))).sum(-3)
      U, V = U @ rmat, V @ rmat
      order = [order[0]] + [order[-1]] + order[1:-1] if k % 2 == 0 else order[-1:] + order[:-1]
    S = (U * U).sum(-2).sqrt()
    # rank of each value (ties broken by position) -> permutation matrix perm[i, r] = (rank_i == r)
    before = (S.unsqueeze(-1) < S.unsqueeze(-2)) | ((S.unsqueeze(-1) == S.unsqueeze(-2)) & (type(self).arange(k, device=dev).reshape(k, 1) >
                                                                                            type(self).arange(k, device=dev)))
    rank = before.cast(dt).sum(-1)
    perm = (rank.unsqueeze(-1) == type(self).arange(k, device=dev, dtype=dt)).cast(dt)
    S = (S.unsqueeze(-2) @ perm).squeeze(-2)
    U = (U @ perm) / S.ne(0).where(S, 1).unsqueeze(-2)
    V = V @ perm
    # U lives in the top-left k x k block of the big x big identity, rotated by Q
    pad = tuple([None] * len(batch) + [(0, big - k), (0, big - k)])
    eye_big = type(self).eye(big, device=dev, dtype=dt)
    U = Q @ (U.pad(pad) + eye_big - eye.pad(((0, big - k), (0, big - k))))
    if not full_matrices: U = U[..., :k]
    return (U, S, V.transpose(-2, -1)) if m >= n else (V, S, U.transpose(-2, -1))
  def newton_schulz(self, steps:int, params:tuple[int, ...], eps:float=1.0e-7) -> Tensor:
    """steps iterations of the odd polynomial X -> sum_i params[i] * (X X^T)^i X on self scaled to unit Frobenius norm (pushes the
    singular values toward 1, as Muon does)."""
    self._check_matrix("newton_schulz")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    G = self / ((self * self).sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term, acc = G @ G.transpose(-2, -1), G, None
      for i, p in enumerate(params):
        if i: term = gram @ term
        acc = p * term if acc is None else acc + p * term
      G = acc
    return G

__all__ = ["LinalgMixin"]
