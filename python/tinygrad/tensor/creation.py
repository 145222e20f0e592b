"""Creating tensors: from constants and shapes (full, zeros, ones, empty, eye, arange, linspace and the *_like forms)."""
from __future__ import annotations
from typing import TYPE_CHECKING
import math
from tinygrad.dtype import DTypeLike, dtypes, to_dtype
from tinygrad.helpers import prod, argfix, make_tuple, check_host_alloc
from tinygrad.schedule.buffers import new_buffer, buffer_view, buffer_of
from tinygrad.tensor.common import canon_device
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class CreationMixin:
  # ***** creation *****
  @staticmethod
  def empty(*shape, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    shape, dt = Tensor._check_shape(shape, "empty"), to_dtype(dtype) if dtype is not None else dtypes.default_float
    buf = new_buffer(canon_device(device), prod(shape), dt)
    buffer_of(buf).allocate()
    return Tensor(buffer_view(buf, shape), device=device)
  @staticmethod
  def full(shape, fill_value, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    shape = Tensor._check_shape(make_tuple(shape, 1) if isinstance(shape, int) else tuple(shape), "full")
    return Tensor(fill_value, device=device, dtype=dtype).reshape((1,) * len(shape)).expand(shape)
  @staticmethod
  def zeros(*shape, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    return Tensor.full(argfix(*shape), 0.0, device=device, dtype=dtype or dtypes.default_float)
  @staticmethod
  def ones(*shape, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    return Tensor.full(argfix(*shape), 1.0, device=device, dtype=dtype or dtypes.default_float)
  @staticmethod
  def arange(start, stop=None, step=1, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    import numpy as np
    if stop is None: start, stop = 0, start
    dt = to_dtype(dtype) if dtype is not None else (dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step))
                                                     else dtypes.default_int)
    if step == 0: raise ValueError("arange needs a nonzero step")
    n = max(math.ceil((stop - start) / step), 0)
    check_host_alloc(n * 8, f"arange of {n} elements")   # its values are built on the host first
    if all(isinstance(v, int) for v in (start, stop, step)): vals = start + np.arange(n, dtype=np.int64) * step
    else: vals = np.array([start + i * step for i in range(n)], dtype=np.float64 if dtypes.is_float(dt) else np.int64)
    return Tensor(vals, device=device, dtype=dt)
  @staticmethod
  def eye(n:int, m:int|None=None, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    """The n x m identity: ones where the row index equals the column index (computed in the kernel from two aranges)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, 0 if m is None else m)):
      raise TypeError(f"eye needs int sizes, got {n!r}, {m!r}")
    if n < 0 or (m is not None and m < 0): raise ValueError(f"eye needs non-negative sizes, got {n}, {m}")
    rows, cols = Tensor.arange(n, device=device), Tensor.arange(n if m is None else m, device=device)
    return (rows.unsqueeze(1) == cols.unsqueeze(0)).cast(dtype or dtypes.default_float)
  @staticmethod
  def linspace(start, stop, steps:int, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    if not isinstance(steps, int) or isinstance(steps, bool): raise TypeError(f"linspace needs an int number of steps, got {steps!r}")
    if steps < 0: raise ValueError(f"linspace needs steps >= 0, got {steps}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if steps == 1: return Tensor([start], device=device, dtype=dt)
    step = (stop - start) / max(steps - 1, 1)
    return (Tensor.arange(steps, device=device).cast(dtypes.default_float) * step + start).cast(dt)
  def full_like(self, fill_value, dtype:DTypeLike|None=None) -> Tensor:
    return Tensor.full(self.shape, fill_value, device=self.device, dtype=dtype or self.dtype)
  def zeros_like(self, dtype:DTypeLike|None=None) -> Tensor: return self.full_like(0, dtype)
  def ones_like(self, dtype:DTypeLike|None=None) -> Tensor: return self.full_like(1, dtype)

__all__ = ["CreationMixin"]
