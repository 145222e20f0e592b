"""Indexing: __getitem__ with ints, slices, None and ..."""
from __future__ import annotations
from typing import TYPE_CHECKING

if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class IndexingMixin:
  def __getitem__(self, indices) -> Tensor:
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    if adv := [type(i).__name__ for i in idx if not (i is None or i is Ellipsis or isinstance(i, (int, slice)))]:
      raise TypeError(f"indexing with {adv[0]} (advanced indexing) is not supported yet: use ints, slices, None and ...")
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (shape {self.shape})")
    if any(i is Ellipsis for i in idx):
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx = idx[:e] + [slice(None)] * (self.ndim - n_real) + idx[e+1:]
    else: idx += [slice(None)] * (self.ndim - n_real)
    x, dim, final = self, 0, []
    for i in idx:
      if i is None:
        final.append(1)
        continue
      n = x.shape[dim]
      if isinstance(i, bool) or not isinstance(i, (int, slice)):
        raise TypeError(f"index of type {type(i).__name__} is not supported (ints, slices, None, ...)")
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
        i = i + n if i < 0 else i
        x = x.shrink(tuple((i, i+1) if d == dim else None for d in range(x.ndim)))
      else:
        start, stop, step = i.indices(n)
        cnt = len(range(start, stop, step))
        if step < 0:
          x = x.flip(dim)
          start, step = n - 1 - start, -step
        if cnt == 0: x = x.shrink(tuple((0, 0) if d == dim else None for d in range(x.ndim)))
        else:
          end = start + (cnt - 1) * step + 1
          x = x.shrink(tuple((start, end) if d == dim else None for d in range(x.ndim)))
          if step > 1:
            x = x.pad(tuple((0, cnt * step - (end - start)) if d == dim else None for d in range(x.ndim)))
            x = x.reshape(x.shape[:dim] + (cnt, step) + x.shape[dim+1:])
            x = x.shrink(tuple((0, 1) if d == dim + 1 else None for d in range(x.ndim)))
            x = x.reshape(x.shape[:dim+1] + x.shape[dim+2:])
        final.append(cnt)
      dim += 1
    # the int-indexed dims are size 1 in x; the final shape drops them and adds the None dims
    out, d = [], 0
    for i in idx:
      if i is None: out.append(1)
      else:
        if not isinstance(i, int): out.append(x.shape[d])
        d += 1
    return x.reshape(tuple(out))

__all__ = ["IndexingMixin"]
