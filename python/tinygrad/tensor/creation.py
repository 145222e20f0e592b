"""Creating tensors: from constants and shapes (const, full, zeros, ones, empty, invalids, eye, arange, linspace, the *_like forms,
meshgrid), and from memory outside tinygrad (from_blob, from_url)."""
from __future__ import annotations
from typing import TYPE_CHECKING
import math
import weakref
from tinygrad.dtype import DType, DTypeLike, dtypes, to_dtype, Invalid, truncate, strong_dtype
from tinygrad.helpers import prod, argfix, fetch
from tinygrad.schedule.buffers import new_buffer, buffer_view, buffer_of
from tinygrad.tensor.common import canon_device, broadcast_shape, check_tensors, leaf
from tinygrad.tensor.multi import empty_on
from tinygrad.uop.ops import UOp, ssimplify, smax, srender
if TYPE_CHECKING:
  from tinygrad.tensor.core import Tensor
  from tinygrad.uop.ops import UOp

# Tensor.empty's BUFFERs: realize() allocates them (a schedule's outputs are allocated by the kernels that write them)
unallocated: weakref.WeakSet[UOp] = weakref.WeakSet()

def _dtype_or(dtype:DTypeLike|None, default:DType) -> DType: return to_dtype(dtype) if dtype is not None else default

def _check_const(what:str, b) -> None:
  if not isinstance(b, (bool, int, float)): raise TypeError(f"{what} takes a Python bool, int or float, got {type(b).__name__} {b!r}")

class CreationMixin:
  # ***** creation *****
  @classmethod
  def const(cls, b, dtype:DType|None=None) -> Tensor:
    """A 0-d constant (no buffer); a Python value keeps its weak dtype unless dtype is given, as in tinygrad."""
    from tinygrad.uop.ops import UOp
    _check_const("const", b)
    return cls(UOp.const(b, to_dtype(dtype) if dtype is not None else None))
  def const_like(self, b, dtype:DType|None=None) -> Tensor:
    """The constant b in this tensor's shape and dtype (or dtype): a broadcast constant, no buffer."""
    _check_const("const_like", b)
    return self._new(self.uop.const_like(b, to_dtype(dtype) if dtype is not None else None)).reshape((1,) * self.ndim).expand(self.shape)
  @classmethod
  def empty(cls, *shape, device:str|None=None, dtype:DTypeLike|None=None, requires_grad:bool|None=None) -> Tensor:
    """A tensor of this shape in a new, uninitialized buffer. As in tinygrad, the buffer is allocated when first used (realize, a kernel
    reading it), so building a graph never opens the device. A symbolic shape gets a buffer of the largest size its Variables allow."""
    shape, dt = cls._check_shape(shape, "empty", symbolic=True), _dtype_or(dtype, dtypes.default_float)
    if isinstance(device := canon_device(device), tuple): return leaf(empty_on(cls, shape, device, dt), requires_grad)
    unallocated.add(buf := new_buffer(device, int(n.vmax) if isinstance(n := prod(shape), UOp) else n, dt))
    return leaf(cls(buffer_view(buf, shape), device=device), requires_grad)
  def empty_like(self, dtype:DTypeLike|None=None, device:str|None=None) -> Tensor:
    return type(self).empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=device if device is not None else self.device)
  @classmethod
  def invalids(cls, *shape, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    """A tensor of Invalid values (bool unless dtype is given, as Invalid's own dtype is): an anonymous buffer, its values unspecified.
    The tensor graph has no Invalid constant, so this is an empty buffer (what 0.14's Invalid fill becomes once realized)."""
    return cls.empty(*shape, dtype=_dtype_or(dtype, dtypes.bool), device=device)
  @classmethod
  def full(cls, shape, fill_value, dtype:DTypeLike|None=None, device:str|None=None, buffer=True, requires_grad:bool|None=None) -> Tensor:
    """fill_value in the given shape, in a buffer of its own (as in tinygrad 0.14: a new buffer the value is assigned into, so two
    equal full tensors are independent for assign, __setitem__ and gradients). buffer=False gives the broadcast constant instead,
    which fuses into the kernels that read it (equal constants are one interned node)."""
    shape = cls._check_shape((shape,), "full", symbolic=True)
    # a symbolic shape has no buffer of its own: it is the broadcast constant
    if any(isinstance(s, UOp) for s in shape): buffer = False
    if fill_value is Invalid: return cls.invalids(shape, dtype=dtype, device=device)
    val = cls(fill_value, device=device, dtype=dtype)
    # a buffer is never weak: a Python value without a dtype is stored as the default int/float (as in 0.14)
    if buffer and val.dtype in dtypes.weaks: val = cls(fill_value, device=device, dtype=strong_dtype(val.dtype))
    val = val.reshape((1,) * len(shape)).expand(shape)
    return leaf(cls.empty(shape, dtype=val.dtype, device=device).assign(val) if buffer else val, requires_grad)
  def full_like(self, fill_value, dtype:DTypeLike|None=None, device:str|None=None, buffer=True, requires_grad:bool|None=None) -> Tensor:
    return type(self).full(self.shape, fill_value, dtype=dtype if dtype is not None else self.dtype,
                       device=device if device is not None else self.device, buffer=buffer, requires_grad=requires_grad)
  def _full(self, fill_value, dtype:DTypeLike|None=None) -> Tensor:
    """The mixins' primitive (see mixin/movement.py): fill_value as a broadcast constant of self's shape."""
    return self.full_like(fill_value, dtype, buffer=False)
  @classmethod
  def zeros(cls, *shape, **kwargs) -> Tensor: return cls.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kwargs})
  @classmethod
  def ones(cls, *shape, **kwargs) -> Tensor: return cls.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kwargs})
  def zeros_like(self, **kwargs) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs) -> Tensor: return self.full_like(1, **kwargs)
  @classmethod
  def arange(cls, start, stop=None, step=1, dtype:DTypeLike|None=None, device:str|None=None, requires_grad:bool|None=None) -> Tensor:
    """Values from start (inclusive) to stop (exclusive) by step, numpy's values in dtype; an int dtype unless an argument is a float.
    A graph without host data: the positions come from _positions, so it fuses into the kernels that read it."""
    if requires_grad is not None: return leaf(cls.arange(start, stop, step, dtype, device), requires_grad)
    if stop is None: start, stop = 0, start
    if any(isinstance(v, UOp) for v in (start, stop, step)): return _symbolic_arange(cls, start, stop, step, dtype, device)
    for v in (start, stop, step): _check_const("arange", v)
    dt = _dtype_or(dtype, dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) else dtypes.default_int)
    if step == 0: raise ValueError("arange needs a nonzero step")
    n = max(-((start - stop) // step) if all(isinstance(v, int) for v in (start, stop, step)) else math.ceil((stop - start) / step), 0)
    # an int range the default int can't hold is int64 (as in tinygrad 0.14): positions past 2**31 index big tensors
    last = start + (n - 1) * step
    if dtype is None and dt is dtypes.default_int and n > 0 and not dt.min <= min(start, last) <= max(start, last) <= dt.max: dt = dtypes.int64
    if n > 0 and dtypes.is_int(dt) and not dt.min <= min(start, last) <= max(start, last) <= dt.max:
      raise OverflowError(f"arange [{start}, {stop}) is not representable in dtype {dt}")
    if n == 0: return cls.full((0,), 0, dtype=dt, device=device, buffer=False)
    i = _positions(cls, n, device)
    if not dtypes.is_float(dt): return (i.cast(dt) * step + start).cast(dt) if step != 1 or start != 0 else i.cast(dt)
    # numpy's float fill: value 0 is start and value 1 start+step (each rounded to dt once), value i is v0 + i*(v1 - v0) computed in
    # the dtype (in float32 for the 16-bit floats)
    cdt = dt if dt.itemsize >= 4 else dtypes.float32
    v0, v1 = truncate[dt](start), truncate[dt](start + step)
    delta = truncate[cdt](v1 - v0)
    ret = i.cast(cdt) * delta + v0
    if n > 1 and truncate[dt](truncate[cdt](v0 + delta)) != v1: ret = i.eq(1).where(v1, ret)
    return ret.cast(dt)
  @classmethod
  def eye(cls, n:int, m:int|None=None, dtype:DTypeLike|None=None, device:str|None=None, requires_grad:bool|None=None) -> Tensor:
    """The n x m identity: ones where the row index equals the column index (computed in the kernel from two aranges)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, 0 if m is None else m)):
      raise TypeError(f"eye needs int sizes, got {n!r}, {m!r}")
    if n < 0 or (m is not None and m < 0): raise ValueError(f"eye needs non-negative sizes, got {n}, {m}")
    rows, cols = cls.arange(n, device=device), cls.arange(n if m is None else m, device=device)
    return leaf((rows.unsqueeze(1) == cols.unsqueeze(0)).cast(dtype or dtypes.default_float), requires_grad)
  @classmethod
  def linspace(cls, start, stop, steps:int, dtype:DTypeLike|None=None, device:str|None=None, requires_grad:bool|None=None) -> Tensor:
    if requires_grad is not None: return leaf(cls.linspace(start, stop, steps, dtype, device), requires_grad)
    if not isinstance(steps, int) or isinstance(steps, bool): raise TypeError(f"linspace needs an int number of steps, got {steps!r}")
    if steps < 0: raise ValueError(f"linspace needs steps >= 0, got {steps}")
    dt = _dtype_or(dtype, dtypes.default_float)
    if dt is dtypes.bool: raise ValueError("linspace with bool dtype is not supported")
    if steps == 1: return cls([start], device=device, dtype=dt)
    step = (stop - start) / max(steps - 1, 1)
    return (cls.arange(steps, device=device).cast(dtypes.default_float) * step + start).cast(dt)
  def meshgrid(self, *args:Tensor, indexing:str="ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 0-d or 1-d tensors: "ij" gives shape (len(self), len(args[0]), ...), "xy" swaps the first two."""
    if indexing not in ("ij", "xy"): raise RuntimeError(f'meshgrid indexing must be "ij" or "xy", got {indexing!r}')
    tensors = (self, *args)
    check_tensors("meshgrid", tensors)
    if bad := [t.shape for t in tensors if t.ndim > 1]: raise RuntimeError(f"meshgrid takes 0-d or 1-d tensors, got shapes {bad}")
    if len(tensors) == 1: return tensors
    # the axis each input runs along; "xy" puts the first two inputs on each other's axis
    axes = list(range(len(tensors))) if indexing == "ij" else [1, 0] + list(range(2, len(tensors)))
    shaped = [t.reshape(tuple(-1 if i == ax else 1 for i in range(len(tensors)))) for t, ax in zip(tensors, axes)]
    shape = broadcast_shape(*(t.shape for t in shaped))
    return tuple(t.expand(shape) for t in shaped)
  @classmethod
  def from_blob(cls, ptr:int, shape:tuple[int, ...], **kwargs) -> Tensor:
    """A tensor over memory at address ptr, not copied and not owned: the memory must outlive the tensor (CPU-side devices only)."""
    if not isinstance(ptr, int) or isinstance(ptr, bool) or ptr <= 0: raise ValueError(f"from_blob needs a nonzero int address, got {ptr!r}")
    dt, device = _dtype_or(kwargs.pop("dtype", None), dtypes.default_float), canon_device(kwargs.pop("device", None))
    if kwargs: raise TypeError(f"from_blob got unexpected arguments {sorted(kwargs)}")
    shape = cls._check_shape((shape,), "from_blob")
    buf = new_buffer(device, prod(shape), dt)
    buffer_of(buf).allocate(external_ptr=ptr)
    return cls(buffer_view(buf, shape), device=device)
  @classmethod
  def from_url(cls, url:str, gunzip:bool=False, **kwargs) -> Tensor:
    """The bytes at url (fetched once into the download cache, through helpers.fetch) as a uint8 tensor unless dtype is given."""
    import pathlib
    if not isinstance(url, (str, pathlib.Path)): raise TypeError(f"from_url needs a URL or path string, got {type(url).__name__}")
    return cls(pathlib.Path(fetch(str(url), gunzip=gunzip)), **kwargs)

def _symbolic_arange(cls:type[Tensor], start, stop, step, dtype:DTypeLike|None, device:str|None) -> Tensor:
  """arange with symbolic bounds (bound Variable expressions): the positions up to the largest count the Variables allow, shrunk to
  the count, so one kernel serves every value."""
  for v in (start, stop, step):
    if not (isinstance(v, UOp) and dtypes.is_int(v.dtype)) and not (isinstance(v, int) and not isinstance(v, bool)):
      raise TypeError(f"a symbolic arange takes ints or int Variable expressions, got {v!r}")
  # the count rounds up away from zero: the step's sign must be the same for every value of its Variables
  if (lo := step.vmin if isinstance(step, UOp) else step) <= 0 <= (hi := step.vmax if isinstance(step, UOp) else step):
    raise ValueError(f"a symbolic arange needs a step that is never 0 and of one sign, got {srender(step)} in [{lo}, {hi}]")
  dt = _dtype_or(dtype, dtypes.default_int)
  n = ssimplify(smax((stop - start + (step - 1 if lo > 0 else step + 1)) // step, 0))
  if not isinstance(n, UOp): return cls.arange(start, stop, step, dtype=dt, device=device)
  i = _positions(cls, int(n.vmax), device).shrink(((0, n),))
  return (i.cast(dt) * step + start).cast(dt)

def _positions(cls:type[Tensor], n:int, device:str|None) -> Tensor:
  """0, 1, ..., n-1 (int32, int64 past its range) from a constant and movement ops only: row i of an (n, n) bool mask holds k < i (a
  row of n Trues then n+1 Falses, tiled with a stride one less than its length, so each row is the previous one shifted right by
  one), and position i is its row's count. The scheduler folds that sum into a closed form (schedule/rangeify.py), so this is an
  elementwise kernel without a loop over n, and comparisons against it fold into indexed loads."""
  width = 2 * n + 1
  row = cls.full((n,), True, dtype=dtypes.bool, device=device, buffer=False).pad(((0, n + 1),))
  mask = row.reshape(1, width).expand(n, width).reshape(n * width).shrink(((0, n * (width - 1)),)).reshape(n, width - 1)
  dt = dtypes.int32 if n <= dtypes.int32.max else dtypes.int64
  return mask.shrink(((0, n), (n, 2 * n))).cast(dt).sum(1, dtype=dt)

__all__ = ["CreationMixin"]
