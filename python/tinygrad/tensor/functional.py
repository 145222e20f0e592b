"""nn functional ops: softmax and its kin, linear, normalisation, attention and interpolation. Convolutions and pooling are in
pooling.py, losses in losses.py."""
from __future__ import annotations
from typing import TYPE_CHECKING, Callable
import functools
import math
from tinygrad.dtype import DTypeLike, dtypes, least_upper_dtype, to_dtype
from tinygrad.helpers import argfix
from tinygrad.tensor.common import check_tensors
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

class FunctionalMixin:
  # ***** softmax and log-sum-exp (the max is subtracted first, so large inputs don't overflow exp) *****
  def logsumexp(self, axis=None, keepdim:bool=False) -> Tensor:
    """log(sum(exp(self))) over axis, computed as max + log(sum(exp(self - max)))."""
    # the shift cancels out of the value, so no gradient flows through it (detach: backward builds no max-gradient kernels)
    m = self.max(axis=axis, keepdim=True).detach()
    # an infinite max would make self - max NaN: shift by 0 there (the result is then the max itself, as it should be)
    m = (m.abs() < float("inf")).where(m, 0) if dtypes.is_float(self.dtype) else m
    ret = (self - m).exp().sum(axis=axis, keepdim=True).log() + m
    return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)))
  def _softmax_parts(self, axis, dtype:DTypeLike|None) -> tuple[Tensor, Tensor, Tensor]:
    """(self - max, exp of it, its sum over axis), in dtype when given."""
    shifted = self - self.max(axis=axis, keepdim=True).detach()   # the shift cancels: no gradient through it (as 0.14)
    if dtype is not None: shifted = shifted.cast(to_dtype(dtype))
    e = shifted.exp()
    return shifted, e, e.sum(axis=axis, keepdim=True)
  def softmax(self, axis=-1, dtype:DTypeLike|None=None) -> Tensor:
    """exp(self) normalised to sum to 1 over axis."""
    _, e, s = self._softmax_parts(axis, dtype)
    return e * s.reciprocal()
  def log_softmax(self, axis=-1, dtype:DTypeLike|None=None) -> Tensor:
    """log(softmax(self)), as (self - max) - log(sum(exp(self - max)))."""
    shifted, _, s = self._softmax_parts(axis, dtype)
    return shifted - s.log()
  def softmin(self, axis=-1, dtype:DTypeLike|None=None) -> Tensor:
    """softmax of -self."""
    return (-self).softmax(axis, dtype)

  # ***** layers *****
  def sequential(self, ll:list[Callable[[Tensor], Tensor]]) -> Tensor:
    """Applies each function of ll in turn."""
    return functools.reduce(lambda x, f: f(x), ll, self)
  def linear(self, weight:Tensor, bias:Tensor|None=None, dtype:DTypeLike|None=None) -> Tensor:
    """self @ weight + bias (weight is (in, out), the transpose of torch's; a 1-d weight scales elementwise)."""
    check_tensors("linear", [weight] + ([bias] if bias is not None else []))
    if dtype is not None:
      dt = to_dtype(dtype)
      return self.cast(dt).linear(weight.cast(dt), bias.cast(dt) if bias is not None else None)
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x if bias is None else x + bias

  # ***** normalisation *****
  def layernorm(self, axis:int|tuple[int, ...]=-1, eps:float=1e-5) -> Tensor:
    """(self - mean) / sqrt(var + eps) over axis (biased variance, no affine)."""
    y = self - self.mean(axis, keepdim=True)
    return y * (y * y).mean(axis, keepdim=True).add(eps).sqrt().reciprocal()
  def batchnorm(self, weight:Tensor|None, bias:Tensor|None, mean:Tensor, invstd:Tensor, axis:int|tuple[int, ...]=1) -> Tensor:
    """(self - mean) * weight * invstd + bias, the statistics laid along axis (the channel axis, 1 by default)."""
    check_tensors("batchnorm", [t for t in (weight, bias, mean, invstd) if t is not None])
    axes = tuple(self._norm_axis(a) for a in argfix(axis))
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    x = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return x if bias is None else x + bias.reshape(shape)
  def normalize(self, p:float=2.0, dim:int=1, eps:float=1e-12) -> Tensor:
    """self divided by its p-norm along dim (at least eps); p=0 counts the nonzero entries."""
    norm = self.ne(0).sum(dim, keepdim=True) if p == 0 else self.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
    return self / norm.maximum(eps)

  # ***** attention *****
  def scaled_dot_product_attention(self, key:Tensor, value:Tensor, attn_mask:Tensor|None=None, dropout_p:float=0.0,
                                   is_causal:bool=False, enable_gqa:bool=False) -> Tensor:
    """softmax(self @ key^T / sqrt(head dim) + mask) @ value. A bool mask keeps where True; is_causal keeps key j <= query i;
    enable_gqa repeats each key/value head for its group of query heads."""
    check_tensors("scaled_dot_product_attention", [key, value] + ([attn_mask] if attn_mask is not None else []))
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise RuntimeError(f"attention needs at least 2-d query, key and value, got {self.shape}, {key.shape}, {value.shape}")
    if self.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
      raise RuntimeError(f"attention shapes don't match: query {self.shape}, key {key.shape}, value {value.shape}")
    if enable_gqa:
      if self.ndim < 3 or key.ndim < 3 or self.shape[-3] % key.shape[-3] or self.shape[-3] % value.shape[-3]:
        raise RuntimeError(f"enable_gqa needs query heads a multiple of key/value heads, got {self.shape}, {key.shape}, {value.shape}")
      key, value = (t._repeat_heads(self.shape[-3] // t.shape[-3]) for t in (key, value))
    qk = self.matmul(key.transpose(-2, -1), dtype=least_upper_dtype(self.dtype, key.dtype, dtypes.float32)) * (1 / math.sqrt(self.shape[-1]))
    if is_causal:
      if attn_mask is not None: raise RuntimeError("attention can't take both attn_mask and is_causal=True")
      lq, lk = qk.shape[-2], qk.shape[-1]
      attn_mask = type(self).arange(lq, device=self.device).reshape(lq, 1) >= type(self).arange(lk, device=self.device)
    if attn_mask is not None:
      qk = qk + (attn_mask.where(0, float("-inf")) if attn_mask.dtype == dtypes.bool else attn_mask)
    attn = qk.cast(self.dtype).softmax(-1)
    # dropout is the identity unless training (and p > 0), as in tinygrad
    if dropout_p: attn = attn.dropout(dropout_p)
    return attn @ value
  def _repeat_heads(self, n:int) -> Tensor:
    """Each head (dim -3) repeated n times in place: (..., h, s, d) -> (..., h*n, s, d)."""
    if n == 1: return self
    sh = self.shape
    return self.reshape(*sh[:-2], 1, *sh[-2:]).expand(*sh[:-2], n, *sh[-2:]).reshape(*sh[:-3], sh[-3] * n, *sh[-2:])

  # ***** resampling *****
  def interpolate(self, size:tuple[int, ...], mode:str="linear", align_corners:bool=False) -> Tensor:
    """Resamples the last len(size) dims to size: 'linear' (bi/trilinear over several dims), 'nearest' or 'nearest-exact'.
    Each dim is a selection by index masks (arange comparisons), so values are picked exactly."""
    if not isinstance(size, (tuple, list)) or not size or len(size) > self.ndim or not all(isinstance(s, int) and s > 0 for s in size):
      raise ValueError(f"interpolate needs a size of 1 to {self.ndim} positive ints for shape {self.shape}, got {size!r}")
    # torch's names for linear over 2 and 3 dims
    if (ndims := {"bilinear": 2, "trilinear": 3}.get(mode)) is not None:
      if len(size) != ndims: raise ValueError(f"interpolate mode {mode!r} resamples {ndims} dims, got size {size!r}")
      mode = "linear"
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise ValueError(f"interpolate mode must be linear, bilinear, trilinear, nearest or nearest-exact, got {mode!r}")
    if align_corners and mode != "linear": raise ValueError(f"align_corners needs mode='linear', got {mode!r}")
    x = self
    for ax in range(self.ndim - len(size), self.ndim):
      x = x._resample_axis(ax, size[ax - self.ndim + len(size)], mode, align_corners)
    return x.cast(self.dtype)
  def _resample_axis(self, ax:int, out:int, mode:str, align_corners:bool) -> Tensor:
    n, dev = self.shape[ax], self.device
    pos = type(self).arange(out, device=dev)
    x, trail = self.unsqueeze(ax), (1,) * (self.ndim - ax - 1)
    def hits(index:Tensor) -> Tensor:   # (out, n, 1...): index[j] == source position p
      return (index.reshape(out, 1) == type(self).arange(n, device=dev)).reshape(out, n, *trail)
    if mode == "linear":
      # source coordinate num/den of each output, clipped into [0, n-1]; low/high are its neighbours, frac the weight of high.
      # One sum over the source positions takes both neighbours (where, not a weight matrix: an inf elsewhere can't leak in)
      num, den = (pos * (n - 1), out - 1) if align_corners else ((pos * 2 + 1) * n - out, out * 2)
      den = max(den, 1)
      num = num.clip(0, (n - 1) * den)
      low, high, frac = num // den, (num + den - 1) // den, ((num % den).cast(dtypes.float32) / den).reshape(out, 1, *trail)
      return (hits(low).where(x * (1 - frac), 0) + hits(high).where(x * frac, 0)).sum(ax + 1)
    scale, posf = n / out, pos.cast(dtypes.float32)
    index = (scale * (posf + 0.5) if mode == "nearest-exact" else scale * posf).cast(dtypes.int32).clip(0, n - 1)
    return hits(index).where(x, 0).sum(ax + 1, dtype=self.dtype)

__all__ = ["FunctionalMixin"]
