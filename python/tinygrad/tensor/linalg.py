"""Linear algebra: dot and matmul."""
from __future__ import annotations
from typing import TYPE_CHECKING

if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class LinalgMixin:
  def dot(self, w:Tensor) -> Tensor: return self.matmul(w)
  def matmul(self, w:Tensor) -> Tensor:
    if not isinstance(w, Tensor): w = Tensor(w, device=self.device)
    if self.ndim == 0 or w.ndim == 0: raise RuntimeError(f"matmul needs at least 1-d tensors, got {self.shape} and {w.shape}")
    x, wt = self, w
    if x.ndim == 1: x = x.unsqueeze(0)
    if wt.ndim == 1: wt = wt.unsqueeze(-1)
    if x.shape[-1] != wt.shape[-2]: raise RuntimeError(f"matmul shapes {self.shape} and {w.shape} don't match ({x.shape[-1]} != {wt.shape[-2]})")
    ret = (x.unsqueeze(-2) * wt.transpose(-1, -2).unsqueeze(-3)).sum(-1)
    if self.ndim == 1: ret = ret.squeeze(-2)
    if w.ndim == 1: ret = ret.squeeze(-1)
    return ret

__all__ = ["LinalgMixin"]
