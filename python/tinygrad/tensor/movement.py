"""Movement ops that only Tensor has (they combine several tensors): cat and stack. The movement ops shared with UOp are in
tinygrad/mixin/movement.py."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinygrad.dtype import least_upper_dtype
from tinygrad.tensor.common import check_tensors
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class TensorMovementMixin:
  # ***** combining *****
  def cat(self, *args:Tensor, dim:int=0) -> Tensor:
    tensors = (self,) + check_tensors("cat", args)
    self._same_device(*args)
    d = self._norm_axis(dim)
    for t in tensors:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise RuntimeError(f"cat needs the same shape except in dim {d}, got {[t.shape for t in tensors]}")
    dt = least_upper_dtype(*(t.dtype for t in tensors))
    total, off, ret = sum(t.shape[d] for t in tensors), 0, None
    for t in tensors:
      p = t.cast(dt).pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(self.ndim)))
      ret = p if ret is None else ret + p
      off += t.shape[d]
    return ret
  @staticmethod
  def stack(*args:Tensor, dim:int=0) -> Tensor:
    if len(args) == 1 and isinstance(args[0], (list, tuple)): args = tuple(args[0])
    if not args: raise ValueError("stack needs at least one tensor")
    d = check_tensors("stack", args)[0]._norm_axis(dim, extra=1)
    return args[0].unsqueeze(d).cat(*[t.unsqueeze(d) for t in args[1:]], dim=d)

__all__ = ["TensorMovementMixin"]
