"""Reductions, scans and sorting beyond tinygrad/mixin/reduce.py: statistics, any/all, arg-reductions, cumulative ops, sort and topk.
Each is written with the primitive ops (REDUCE, movement, WHERE): a scan is a reduce over a masked square window (split into blocks
for long axes), sort is a bitonic network of movement ops and WHERE that carries every element's index along."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinygrad.uop import Ops
from tinygrad.uop.ops import identity_element
from tinygrad.dtype import dtypes, sum_acc_dtype, sum_dtype
from tinygrad.helpers import prod
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

SCAN_BLOCK = 256  # a scan over more than 2*SCAN_BLOCK elements runs in blocks: within each, then over the blocks' totals

def _isnan(x:Tensor) -> Tensor: return x.ne(x) if dtypes.is_float(x.dtype) else x._full(False, dtypes.bool)

def _before(a:Tensor, b:Tensor, ia:Tensor, ib:Tensor, descending:bool) -> Tensor:
  """Whether (a, ia) sorts before (b, ib): by value (NaN above everything, like numpy and torch), ties by the original index."""
  lt, eq = (b < a, a.eq(b)) if descending else (a < b, a.eq(b))
  if dtypes.is_float(a.dtype):
    na, nb = _isnan(a), _isnan(b)
    lt = lt | ((na & nb.logical_not()) if descending else (nb & na.logical_not()))
    eq = eq | (na & nb)
  return lt | (eq & (ia < ib))

class TensorReduceMixin:
  # ***** statistics *****
  def _count(self, axis) -> int: return prod(s for i, s in enumerate(self.shape) if i in self._axes(axis))
  def var(self, axis=None, keepdim=False, correction=1) -> Tensor:
    """The variance over axis with Bessel's correction (divides by max(n - correction, 0)); ints give float32."""
    out_dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.float32
    sq = (self - self.mean(axis, keepdim=True)).square()
    return sq.cast(sum_acc_dtype(sq.dtype)).sum(axis, keepdim).div(max(self._count(axis) - correction, 0)).cast(out_dt)
  def std(self, axis=None, keepdim=False, correction=1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def var_mean(self, axis=None, keepdim=False, correction=1) -> tuple[Tensor, Tensor]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim=False, correction=1) -> tuple[Tensor, Tensor]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def any(self, axis=None, keepdim=False) -> Tensor:
    """Whether any element is true (nonzero, NaN counts) over axis; False for an empty reduction."""
    return self.cast(dtypes.bool).max(axis, keepdim)
  def all(self, axis=None, keepdim=False) -> Tensor:
    """Whether every element is true over axis; True for an empty reduction."""
    return self.logical_not().any(axis, keepdim).logical_not()

  # ***** arg-reductions *****
  def argmax(self, axis=None, keepdim=False) -> Tensor:
    """The int32 index of the first maximum over axis (of the flattened tensor when axis is None); a NaN is the maximum, as in
    numpy."""
    if axis is None: return self.flatten().argmax(0).reshape((1,) * self.ndim if keepdim else ())
    if self.ndim == 0:
      self._norm_axis(axis)
      return self._full(0, dtypes.int32)
    ax = self._norm_axis(axis)
    if (n := self.shape[ax]) == 0: raise IndexError(f"argmax/argmin of an empty dim {ax} of shape {self.shape}")
    hit = self.eq(self.max(ax, keepdim=True)) | _isnan(self)
    # the first hit has the largest n - i
    rev = type(self).arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - ax - 1))
    return (n - hit.where(rev, 0).max(ax, keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim=False) -> Tensor:
    """The int32 index of the first minimum over axis (NaN first, as in numpy)."""
    return self._inverse().argmax(axis, keepdim)

  # ***** scans *****
  def _scan_window(self, op:Ops) -> Tensor:
    """The inclusive scan by op over the last dim: each output reduces a masked row of the square (n, n) window."""
    n = self.shape[-1]
    i = type(self).arange(n, device=self.device)
    mask = i.reshape(n, 1) >= i.reshape(1, n)
    win = mask.where(self.unsqueeze(-2), identity_element(op, self.dtype))
    return win._reduce(op, -1)
  def _scan(self, axis:int, op:Ops) -> Tensor:
    """The inclusive scan by op along axis: quadratic in a block, so a long axis is scanned in blocks of SCAN_BLOCK, then the
    blocks' totals are scanned and combined into every following block."""
    ax = self._norm_axis(axis)
    if self.ndim == 0 or self.shape[ax] == 0: return self
    x, n = self.transpose(ax, -1), self.shape[ax]
    if n <= 2 * SCAN_BLOCK: ret = x._scan_window(op)
    else:
      pad = -n % SCAN_BLOCK
      blocks = x.pad(((0, 0),) * (x.ndim - 1) + ((0, pad),), value=identity_element(op, x.dtype) if pad else 0.0)
      blocks = blocks.reshape(x.shape[:-1] + ((n + pad) // SCAN_BLOCK, SCAN_BLOCK))._scan_window(op)
      totals = blocks[..., -1]._scan(-1, op)
      # block k combines with the totals of blocks before it: shift by one, the first gets the identity
      before = totals.pad(((0, 0),) * (totals.ndim - 1) + ((1, -1),), value=identity_element(op, x.dtype))
      ret = blocks.alu(op, before.unsqueeze(-1)._expand_to(blocks.shape)).flatten(-2)[..., :n]
    return ret.transpose(ax, -1)
  def cumsum(self, axis:int=0) -> Tensor:
    """The cumulative sum along axis, in sum's accumulation dtype (small ints give int32, as sum does)."""
    acc = sum_acc_dtype(self.dtype)
    return self.cast(acc)._scan(axis, Ops.ADD).cast(sum_dtype(self.dtype))
  def cumprod(self, axis:int) -> Tensor:
    """The cumulative product along axis, in self's dtype."""
    return self._scan(axis, Ops.MUL)
  def cummax(self, axis:int=0) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the running maximum along axis. As in torch, a tie takes the later index and a NaN, once seen,
    stays the value with the index of the first NaN."""
    if self.ndim == 0:
      self._norm_axis(axis)
      return self, self._full(0, dtypes.int32)
    ax = self._norm_axis(axis)
    values = self._scan(ax, Ops.MAX)
    if (n := self.shape[ax]) == 0: return values, values.cast(dtypes.int32)
    x, v = self.transpose(ax, -1), values.transpose(ax, -1)
    i = type(self).arange(n, device=self.device)
    upto = i.reshape(1, n) <= i.reshape(n, 1)    # [out position, source position]
    xs, vs = x.unsqueeze(-2), v.unsqueeze(-1)
    last_eq = (upto & xs.eq(vs)).where(i + 1, 0).max(-1) - 1
    if not dtypes.is_float(self.dtype): return values, last_eq.cast(dtypes.int32).transpose(ax, -1)
    first_nan = n - (upto & _isnan(xs)).where(n - i, 0).max(-1)
    return values, _isnan(v).where(first_nan, last_eq).cast(dtypes.int32).transpose(ax, -1)
  def cummin(self, axis:int=0) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the running minimum along axis (ties and NaN as cummax)."""
    values, indices = self._inverse().cummax(axis)
    return values._inverse(), indices
  def logcumsumexp(self, axis=0) -> Tensor:
    """log(cumsum(exp(x))) along axis without overflow: each output is shifted by its running maximum (an infinite maximum
    by 0, so -inf stays -inf and inf stays inf)."""
    if self.ndim == 0:
      self._norm_axis(axis)
      return self._to_float()
    ax = self._norm_axis(axis)
    x = self._to_float().transpose(ax, -1)
    if (n := x.shape[-1]) == 0: return x.transpose(ax, -1)
    m = x._scan(-1, Ops.MAX)
    # the shift cancels, so it carries no gradient (through the running max it would be NaN at -inf)
    shift = (m.eq(float("inf")) | m.eq(float("-inf"))).where(0.0, m).detach()
    i = type(self).arange(n, device=self.device)
    upto = i.reshape(1, n) <= i.reshape(n, 1)
    # masked before exp: a later term may overflow where it is masked off, and its zero gradient times inf would be NaN
    terms = upto.where(x.unsqueeze(-2) - shift.unsqueeze(-1), float("-inf")).exp()
    total = terms.sum(-1)
    # an all -inf prefix sums to 0: its -inf output is a constant (log's infinite slope times exp's 0 would be NaN)
    some = total.ne(0)  # (NaN stays NaN)
    return some.where(some.where(total, 1).log() + shift, float("-inf")).transpose(ax, -1)

  # ***** sorting *****
  def sort(self, dim:int=-1, descending:bool=False) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) sorted along dim, stable (equal values keep their order); NaN sorts above every value, as in torch.
    A bitonic network over the dim padded to a power of two, carrying each element's original index."""
    d = self._norm_axis(dim)
    if self.ndim == 0 or self.shape[d] <= 1: return self, self._full(0, dtypes.int32)
    x, n = self.transpose(d, -1), self.shape[d]
    k = (n - 1).bit_length()
    pad = ((0, 0),) * (x.ndim - 1) + ((0, 2**k - n),)
    # padding sorts after every real element: the extreme value (NaN above all for floats) and a larger index
    fill = (float("nan") if dtypes.is_float(x.dtype) else x.dtype.max) if not descending else x.dtype.min
    v = x.pad(pad, value=fill) if 2**k != n else x
    idx = type(self).arange(2**k, device=self.device)._expand_to(v.shape)
    lead = v.shape[:-1]
    for stage in range(1, k + 1):
      for sub in range(stage - 1, -1, -1):
        # pairs at distance 2**sub; the first step of a stage compares mirrored positions of each block of 2**stage instead
        half = 2**sub
        shp = lead + (2**k // (2 * half), 2, half)
        vv, ii = v.reshape(shp), idx.reshape(shp)
        a, b, ia, ib = vv[..., 0, :], vv[..., 1, :], ii[..., 0, :], ii[..., 1, :]
        if sub == stage - 1: b, ib = b.flip(-1), ib.flip(-1)
        keep = _before(a, b, ia, ib, descending)
        lo, hi, ilo, ihi = keep.where(a, b), keep.where(b, a), keep.where(ia, ib), keep.where(ib, ia)
        if sub == stage - 1: hi, ihi = hi.flip(-1), ihi.flip(-1)
        v = lo.unsqueeze(-2).cat(hi.unsqueeze(-2), dim=-2).reshape(v.shape).contiguous()
        idx = ilo.unsqueeze(-2).cat(ihi.unsqueeze(-2), dim=-2).reshape(v.shape).contiguous()
    return v[..., :n].transpose(d, -1), idx[..., :n].cast(dtypes.int32).transpose(d, -1)
  def argsort(self, dim:int=-1, descending:bool=False) -> Tensor:
    """The int32 indices that sort self along dim (stable)."""
    return self.sort(dim, descending)[1]
  def topk(self, k:int, dim:int=-1, largest:bool=True, sorted_:bool=True) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) of the k largest (or smallest) elements along dim, in sorted order (also when sorted_=False, whose
    order is unspecified)."""
    d = self._norm_axis(dim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n:
      raise ValueError(f"topk: k={k!r} is out of range for dim {d} of shape {self.shape}")
    v, i = self.sort(d, descending=largest)
    if self.ndim == 0: return v, i
    cut = tuple((0, k) if j == d else None for j in range(self.ndim))
    return v.shrink(cut), i.shrink(cut)

__all__ = ["TensorReduceMixin"]
