"""The reductions (sum, prod, max, min, mean), written once for Tensor and UOp.

Primitive each class provides: `_rop(op, axes)`, the REDUCE node over sorted distinct axes, which keeps them as size-1 dims (see
tinygrad/uop/shape.py). A reduction is that node, then a reshape dropping the reduced dims unless keepdim; reducing no axis is the
identity. Also needs the movement and elementwise mixins (reshape, cast, neg, ~, div).
"""
from __future__ import annotations
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes, DTypeLike, sum_acc_dtype, sum_dtype, to_dtype
from tinygrad.helpers import prod

class ReduceMixin:
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = [self._norm_axis(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(set(axes)) != len(axes): raise RuntimeError(f"dim {max(axes, key=axes.count)} appears multiple times in the list of dims {axis}")
    # a 0-d tensor takes axis 0 or -1 (as torch): there is nothing to reduce
    return tuple(sorted(a for a in axes if 0 <= a < self.ndim))
  def _reduce(self, op:Ops, axis=None, keepdim:bool=False):
    axes = self._axes(axis)
    ret = self._rop(op, axes) if axes else self
    if keepdim: return ret
    return ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis=None, keepdim=False, dtype:DTypeLike|None=None):
    """Sums in sum_acc_dtype (bools and small ints in the default int, half/bfloat16/fp8 in float32, cast back: sum_dtype) unless dtype is given."""
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    return ret.cast(sum_dtype(self.dtype)) if dtype is None else ret
  def prod(self, axis=None, keepdim=False, dtype:DTypeLike|None=None):
    return self.cast(to_dtype(dtype) if dtype is not None else self.dtype)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim=False): return self._reduce(Ops.MAX, axis, keepdim)
  def _inverse(self):
    """An order-reversing map onto the same dtype (its own inverse): min is _inverse(max(_inverse(x)))."""
    if dtypes.is_float(self.dtype): return -self
    return self.logical_not() if self.dtype is dtypes.bool else ~self
  def min(self, axis=None, keepdim=False): return self._inverse().max(axis, keepdim)._inverse()
  def mean(self, axis=None, keepdim=False):
    """Ints and bools give float32 whatever DEFAULT_FLOAT is (0.14's dtype), summed in float32 (0.14 divides in the default float,
    so under HALF a mean of ints like 60000 overflows)."""
    cnt = prod(s for i, s in enumerate(self.shape) if i in self._axes(axis))
    dt = self.dtype
    ret = (self.cast(dtypes.float32) if dt is dtypes.bool or (dtypes.is_int(dt) and dt not in dtypes.weaks) else self).sum(axis, keepdim)
    return ret.div(cnt) if cnt > 0 else ret.mul(float("nan"))

__all__ = ["ReduceMixin"]
