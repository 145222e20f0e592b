"""Tensor: a lazy n-d array. This file holds the class, its constructor, properties and running; the operations are written
in tinygrad/mixin (shared with UOp) and in the files of this package by kind (creation, random, movement, indexing, linalg, ...).
Operations build a tensor graph of UOps (see tinygrad/uop/shape.py for its conventions); realize() schedules the graph into
kernels (tinygrad.schedule), which are lowered, rendered, compiled and run (tinygrad.engine)."""
from __future__ import annotations
import functools
import pathlib
import weakref
from typing import Any
from tinygrad.uop.ops import UOp, Ops, GroupOp, ssimplify, srender
from tinygrad.mixin.mathtraits import MathTrait, weak_dtype_of
from tinygrad.mixin.movement import MovementMixin
from tinygrad.mixin.reduce import ReduceMixin
from tinygrad.dtype import DType, DTypeLike, dtypes, to_dtype, strong_dtype, least_upper_dtype, truncate, to_np_dtype, from_np_dtype
from tinygrad.schedule import create_schedule, create_schedule_with_vars, schedule_to_linear
from tinygrad.schedule.buffers import new_buffer, buffer_view, buffer_of, as_buffer, mark_realized, pending_write, next_buffer_id
from tinygrad.engine.realize import run_schedule, capturing
from tinygrad.engine.memory import plan_schedule
from tinygrad.tensor import disk
from tinygrad.tensor.common import TensorBase, canon_device, broadcast_shape, check_tensors
from tinygrad.mixin.movement import shape_str
from tinygrad.helpers import prod
from tinygrad.tensor.creation import CreationMixin, unallocated
from tinygrad.tensor.random import RandomMixin
from tinygrad.tensor.movement import TensorMovementMixin
from tinygrad.tensor.indexing import IndexingMixin
from tinygrad.tensor.linalg import LinalgMixin
from tinygrad.tensor.elementwise import ElementwiseMixin
from tinygrad.tensor.reduce import TensorReduceMixin
from tinygrad.tensor.functional import FunctionalMixin
from tinygrad.tensor.pooling import PoolingMixin
from tinygrad.tensor.losses import LossMixin
from tinygrad.tensor.autograd import AutogradMixin, track, live_add, forget
from tinygrad.tensor.hashing import HashingMixin
from tinygrad.tensor.calls import CallMixin
from tinygrad.tensor.multi import MultiMixin, to_devices, on_devices

__all__ = ["Tensor"]

class Tensor(TensorBase, MathTrait, MovementMixin, ReduceMixin, CreationMixin, RandomMixin, TensorMovementMixin, IndexingMixin, LinalgMixin,
             ElementwiseMixin, TensorReduceMixin, FunctionalMixin, PoolingMixin, LossMixin, AutogradMixin, HashingMixin, CallMixin, MultiMixin):
  __slots__ = ("uop", "_device", "requires_grad", "grad", "is_param")   # grad, is_param: autograd.py

  def __init__(self, data:Any, device:str|None=None, dtype:DTypeLike|None=None, requires_grad:bool|None=None):
    self.requires_grad, self.grad, self.is_param = requires_grad, None, True
    track(self)
    dtype = to_dtype(dtype) if dtype is not None else None
    self._device = canon_device(device)
    if isinstance(self._device, tuple):
      # on several devices: made on the first, then a copy on each (a Python value needs no device at all)
      devices, self._device = self._device, self._device[0]
      self._init(data, dtype, self._device)
      if self.uop.device is not None: self.uop = on_devices(self, self.uop, self._device).shard(devices).uop
      self._device = devices
    else: self._init(data, dtype, device)
    if requires_grad: self.requires_grad_()   # (a float dtype only)

  def _init(self, data:Any, dtype:DType|None, device:str|None):
    if isinstance(data, UOp):
      self.uop = data if dtype is None or data.dtype is dtype else UOp(Ops.CAST, dtype, (data,), dtype)
      return
    if data is None: data = 0.0   # tinygrad 0.14's Tensor(None): the constant 0.0
    if isinstance(data, (bool, int, float)):
      # as in tinygrad 0.14, a Python int or float without a dtype is weak (weakint/weakfloat): it takes the type of the tensor it
      # meets, and is stored (numpy, realize) as the default int/float; an int the default int can't hold is int64 (uint64 past it)
      dt = dtype or weak_dtype_of(data)
      if dt is dtypes.weakint and not dtypes.default_int.min <= data <= dtypes.default_int.max: dt = _int_dtype_for(data, data)
      elif dtypes.is_int(dt) and dt is not dtypes.weakint: data = _stored_int(data, dt)
      self.uop = UOp.const(dt.const(data) if dt not in dtypes.weaks else data, dt)
      # a scalar that requires grad is a parameter (torch's leaf): a float buffer of its own, not the interned constant backward skips
      if self.requires_grad: self.uop = Tensor.full((), data, dtype=strong_dtype(dt), device=device).uop
      return
    if dtype in dtypes.weaks: raise RuntimeError(f"cannot create storage for weak dtype {dtype}: give a concrete dtype")
    import numpy as np
    if isinstance(data, pathlib.Path):
      # the file as a DISK tensor of its bytes (or of dtype), as in tinygrad 0.14; with a device, copied there when realized
      self.uop = disk.from_path(data, dtype)
      if device is None: self._device = self.uop.arg.device
      elif self._device != self.uop.arg.device: self.uop = UOp(Ops.COPY, self.uop.dtype, (self.uop,), (self.uop.arg.device, self._device))
      return
    if isinstance(data, (bytes, bytearray)): data, dtype = np.frombuffer(data, dtype=np.uint8), dtype or dtypes.uint8
    if isinstance(data, np.generic): data = np.asarray(data)
    if isinstance(data, (list, tuple)):
      dt = dtype or (strong_dtype(dtypes.from_py(data)) if _nonempty(data) else dtypes.default_float)
      npdt = to_np_dtype(dt)
      # a float past a 16-bit float's range is inf, as a cast gives (no warning)
      with np.errstate(over="ignore"):
        try: arr = np.array(data, dtype=npdt if npdt is not None else np.float32)
        except OverflowError:
          # numpy refuses ints out of the dtype's range: an inferred dtype widens to int64 (uint64), a given int dtype wraps
          if not dtypes.is_int(dt): raise
          if dtype is None: dt = _int_dtype_for(*_int_range(data))
          arr = np.array(_nested_map(data, lambda x: _stored_int(x, dt)), dtype=to_np_dtype(dt))
    elif isinstance(data, np.ndarray):
      arr, dt = data, dtype or from_np_dtype(data.dtype)
      npdt = to_np_dtype(dt)
      if npdt is not None and arr.dtype != npdt: arr = arr.astype(npdt)
      elif npdt is None: arr = arr.astype(np.float32)
    else: raise TypeError(f"can't make a Tensor from {type(data).__name__}")
    arr = np.ascontiguousarray(arr).reshape(arr.shape)   # ascontiguousarray makes a 0-d array 1-d
    buf = new_buffer(self._device, arr.size, from_np_dtype(arr.dtype))
    buffer_of(buf).allocate().copyin(memoryview(arr.reshape(-1).view(np.uint8)))
    self.uop = buffer_view(buf, arr.shape)
    if buf.dtype is not dt: self.uop = UOp(Ops.CAST, dt, (self.uop,), dt)

  # ***** properties *****
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str|tuple[str, ...]: return self._device
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim:int|None=None) -> int|tuple[int, ...]:
    """The shape, or the length of dimension `dim` (negative counts from the end)."""
    if dim is None: return self.shape
    if not -len(self.shape) <= dim < len(self.shape):
      raise IndexError(f"dimension {dim} out of range for a tensor of shape {self.shape} ({len(self.shape)} dims)")
    return self.shape[dim]
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self):
    grad = getattr(self, "grad", None)
    return f"<Tensor <UOp {self.device} {self.shape} {self.dtype.name}> on {self.device} with grad {grad.uop if grad is not None else None!r}>"
  # as in tinygrad: `if t:`, `t in list`, `a == b and ...` would otherwise be silently True for any tensor
  def __bool__(self): raise TypeError("__bool__ on Tensor is not defined")
  def _new(self, u:UOp) -> Tensor:
    if type(self._device) is str and self._device.startswith("DISK"): u = disk.fold(u, self._device, type(self))
    ret = Tensor.__new__(Tensor)
    ret.uop, ret._device, ret.requires_grad, ret.grad, ret.is_param = u, self._device, None, None, True
    live_add(weakref.ref(ret, forget))   # autograd's set of live tensors (track, inlined)
    return ret

  # ***** running *****
  def schedule(self, *lst:Tensor):
    """The kernels realize() would run (a list of ScheduleItems, in run order), and {tensor uop: BUFFER}. Nothing runs and the
    tensors are unchanged; see schedule_linear for tinygrad 0.14's form."""
    tensors = _stored((self,) + check_tensors("schedule", lst))
    return create_schedule([t.uop for t in tensors], [t.device for t in tensors])
  def linear_with_vars(self, *lst:Tensor) -> tuple[UOp, dict[str, int]]:
    """tinygrad 0.14's schedule API: the LINEAR UOp that realizes these tensors (src: one CALL(kernel AST, *BUFFERs) per kernel or
    copy, in run order) and the values of its bound Variables ({name: value}; the kernels keep the Variables unbound). As in tinygrad,
    the tensors now refer to their output buffers, which hold the data once `tinygrad.engine.realize.run_linear(linear, var_vals)`
    has run it."""
    tensors = _stored((self,) + check_tensors("linear_with_vars", lst))
    items, bufs, var_vals = create_schedule_with_vars([t.uop for t in tensors], [t.device for t in tensors])
    _bind_buffers(tensors, bufs)
    return schedule_to_linear(items), var_vals
  def schedule_linear(self, *lst:Tensor) -> UOp:
    """The LINEAR UOp of linear_with_vars (which see), for a schedule without variables."""
    linear, var_vals = self.linear_with_vars(*lst)
    if var_vals: raise RuntimeError(f"schedule_linear can't bind variables {sorted(var_vals)}: use linear_with_vars")
    return linear
  def realize(self, *lst:Tensor, do_update_stats=True) -> Tensor:
    """Computes these tensors (also as `Tensor.realize(a, b, ...)`); `do_update_stats` is 0.14's flag (the counters always count).
    A tensor of a weak dtype is a constant expression of Python values: it has no storage and is left as it is (as in 0.14)."""
    if not (tensors := _stored((self,) + check_tensors("realize", lst))): return self
    for t in tensors:
      # a DISK tensor is realized as a view of its file (no kernel runs on a file): one that isn't a byte range of it is an error here
      if disk.is_disk(t.device) and t.uop.op in GroupOp.Movement: t.uop = disk.contiguous_view(t.uop, t.device, type(t))
    first_new = next_buffer_id()   # BUFFERs numbered from here on are made by this schedule
    items, bufs, var_vals = create_schedule_with_vars([t.uop for t in tensors], [t.device for t in tensors])
    # the buffers the tensors get and those that existed before keep their memory (one not allocated yet too: a Tensor.empty KV cache
    # that a call body writes is read again by the next call); the others (intermediates, which nothing holds after this call) share
    # arenas where their lifetimes allow (engine/memory.py)
    keep = {buffer_of(x) for b in bufs.values() for x in (_shard_buffers(b) if b.op is Ops.MSTACK else (b,))} | \
      {buffer_of(b) for si in items for b in si.buf_uops if b.arg.slot < first_new}
    run_schedule(plan_schedule(items, keep), var_vals)
    _bind_buffers(tensors, bufs)
    # Tensor.empty's buffer is allocated when first used: realizing it is a use
    for t in tensors:
      if (b := as_buffer(t.uop)) is not None and b in unallocated:
        buffer_of(b).ensure_allocated()
        unallocated.discard(b)
    return self
  def _buffer(self):
    if isinstance(self.device, tuple): return self.to(self.device[0])._buffer()   # a sharded tensor's data: its shards joined on one
    if any(isinstance(s, UOp) for s in self.shape):
      raise RuntimeError(f"no data for a symbolic shape {shape_str(self.shape)}: shrink it to int sizes first (t.shrink(...) or t[:5])")
    # reading data on the host while a TinyJit captures would freeze the value into every replay
    if capturing: capturing[-1].host_read()
    if self.dtype in dtypes.weaks: return self.cast(strong_dtype(self.dtype))._buffer()   # stored as the default int/float
    t = self if ((b := as_buffer(self.uop)) is not None and b.src[0].arg == self.numel()) or pending_write(self.uop) is not None \
      else self.contiguous()
    t.realize()
    return buffer_of(as_buffer(t.uop))
  def numpy(self):
    import numpy as np
    if self.numel() == 0: return np.zeros(self.shape, dtype=to_np_dtype(strong_dtype(self.dtype)) or np.float32)
    # writable and independent of the tensor, as in tinygrad: a large CPU buffer is shared copy-on-write (no copy until either side
    # writes), anything else is copied once
    return self._buffer().numpy(share=True).reshape(self.shape)
  def data(self) -> memoryview:
    return self._buffer().as_buffer()
  def tolist(self): return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
    return self.numpy().reshape(()).item()
  def to(self, device:str|tuple[str, ...]|None) -> Tensor:
    """This tensor on `device` (lazy: the realize that needs it copies the data, after computing it on this tensor's device). A tuple of
    devices: a copy on each (see shard)."""
    if device is not None and not isinstance(device, (str, tuple, list)): raise ValueError(f"to() takes a device name, got {device!r}")
    if (device := canon_device(device)) == self.device: return self
    if isinstance(device, tuple): return to_devices(self, device)
    src = disk.contiguous_view(self.uop, self.device, type(self)) if disk.is_disk(self.device) else self.uop
    ret = Tensor.__new__(Tensor)
    ret.uop, ret._device, ret.requires_grad = UOp(Ops.COPY, self.dtype, (src,), (self.device, device)), device, self.requires_grad
    ret.grad, ret.is_param = None if self.grad is None else self.grad.to(device), self.is_param
    track(ret)
    return ret
  def to_(self, device:str|None) -> Tensor:
    """Moves this tensor to `device` in place."""
    ret = self.to(device)
    self.uop, self._device, self.grad = ret.uop, ret._device, ret.grad
    return self
  def clone(self, device:str|None=None) -> Tensor:
    """A copy of this tensor in a buffer of its own (on `device` if given)."""
    # a copy to another device already lands in a new buffer
    if device is not None and (ret := self.to(device)) is not self: return ret
    # a weak constant gets storage of the default int/float (as in 0.14)
    src = self if self.dtype not in dtypes.weaks else self.cast(strong_dtype(self.dtype))
    if any(isinstance(s, UOp) for s in src.shape): ret = self._new(UOp(Ops.CONTIGUOUS, src.dtype, (src.uop,)))
    # a new buffer the value is assigned into: two clones of one tensor are two tensors (a CONTIGUOUS of the same source would be one
    # interned node, so writing one clone would write the other)
    else: ret = Tensor.empty(src.shape, dtype=src.dtype, device=self.device).assign(src)
    if self.grad is not None: ret.grad = self.grad.clone()   # as in 0.14
    return ret
  def replace(self, x:Tensor) -> Tensor:
    """Makes this tensor refer to x's data (shape must match; dtype and device may change)."""
    check_tensors("replace", (x,))
    if self.shape != x.shape: raise RuntimeError(f"replace needs the same shape, got {self.shape} and {x.shape}")
    self.uop, self._device = x.uop, x.device
    return self
  def decode_hevc_frame(self, frame_pos, shape:tuple[int, ...], state:Tensor, ref_frames:list[Tensor]|None=None) -> Tensor:
    raise NotImplementedError("decode_hevc_frame needs a hardware HEVC decoder (tinygrad's NV backend); no device here has one")
  def contiguous(self) -> Tensor:
    # a weak tensor is a constant of Python values, without storage (as in 0.14)
    if self.dtype in dtypes.weaks or self.uop.op in (Ops.CONTIGUOUS, Ops.COPY) or pending_write(self.uop) is not None or \
       ((b := as_buffer(self.uop)) is not None and b.src[0].arg == self.numel()) or \
       (self.uop.op is Ops.MSTACK and all((b := as_buffer(s)) is not None and b.src[0].arg == prod(s.shape) for s in self.uop.src)): return self
    return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

  # ***** the primitives of the mixins (tinygrad/mixin): movement, reductions and elementwise ops are written there, once *****
  def _mop(self, op:Ops, arg) -> Tensor: return self._new(self.uop._mop(op, arg))
  def _rop(self, op:Ops, axes:tuple[int, ...]) -> Tensor: return self._new(self.uop._rop(op, axes))
  def alu(self, op:Ops, *srcs:Tensor) -> Tensor:
    if not isinstance(op, Ops): raise TypeError(f"alu needs an Ops, got {type(op).__name__}")
    return self._new(self.uop.alu(op, *[s.uop for s in check_tensors("alu", srcs)]))
  def cast(self, dtype:DTypeLike) -> Tensor: return self._new(self.uop.cast(dtype))
  def bitcast(self, dtype:DTypeLike) -> Tensor:
    """The bits reinterpreted as dtype. Another itemsize regroups the bytes of the last dim (little-endian, as tinygrad): 4 floats
    of shape (..., n) are (..., n*4) uint8s or (..., n/2) uint64s; the last dim's bytes must divide into the new itemsize."""
    if disk.is_disk(self.device): return disk.bitcast(self, to_dtype(dtype))
    if (dt := to_dtype(dtype)).itemsize == self.dtype.itemsize: return self._new(self.uop.bitcast(dt))
    if self.dtype in dtypes.weaks or dt in dtypes.weaks or dt == dtypes.bool or self.dtype == dtypes.bool:
      raise RuntimeError(f"bitcast from {self.dtype} to {dt} needs the same itemsize (weak and bool dtypes have no bytes to regroup)")
    nbytes = UOp.const(dtypes.weakint, self.shape[-1] if self.ndim else 1) * self.dtype.itemsize
    if self.ndim == 0 or (n := nbytes.simplify().divide_exact(UOp.const(dtypes.weakint, dt.itemsize))) is None:
      raise RuntimeError(f"bitcast of shape {shape_str(self.shape)} from {self.dtype} to {dt}: the last dim's {srender(nbytes)} bytes "
                         f"are not a multiple of {dt.itemsize}")
    old_u, new_u = (to_dtype(f"uint{8 * d.itemsize}") for d in (self.dtype, dt))
    x, lead = self.bitcast(old_u), self.shape[:-1]
    if dt.itemsize > self.dtype.itemsize:   # k old elements make one new one, the first one the lowest bits
      k = dt.itemsize // self.dtype.itemsize
      x = x.reshape(*lead, ssimplify(n), k)
      out = functools.reduce(lambda a, b: a | b, [x[..., j].cast(new_u) << (8 * self.dtype.itemsize * j) for j in range(k)])
    else:                                   # one old element makes k new ones, the lowest bits first
      k = self.dtype.itemsize // dt.itemsize
      out = Tensor.stack(*[(x >> (8 * dt.itemsize * j)).cast(new_u) for j in range(k)], dim=-1).reshape(*lead, ssimplify(n))
    return out.bitcast(dt)
  def _broadcasted(self, y, reverse:bool=False, match_dtype:bool=True) -> tuple[Tensor, Tensor]:
    """self and y (a Tensor or a Python value) as two operands of one dtype (unless match_dtype=False) and one shape. The dtypes
    and the constant a Python value becomes are UOp's rule for tensor-level nodes (so Tensor and UOp build the same nodes); only
    the device check and broadcasting two shapes are Tensor's own."""
    # a symbolic value (a bound Variable expression, t * v) is a 0-d tensor of it, as in tinygrad 0.14
    if isinstance(y, UOp): y = Tensor(y, device=self.device)
    if not isinstance(y, Tensor):
      # next to a weak tensor of some shape a Python value is a weak 0-d tensor, broadcast below (UOp's rule makes it shapeless)
      if self.dtype not in dtypes.weaks or not self.shape:
        a, b = self.uop._broadcasted(y, reverse, match_dtype)
        return self._new(a), self._new(b)
      y = Tensor(y, device=self.device)
    self._same_device(y)
    weak_x, weak_y = self.dtype in dtypes.weaks, y.dtype in dtypes.weaks
    if match_dtype and not (weak_x and weak_y) and (weak_x or weak_y or least_upper_dtype(self.dtype, y.dtype) in dtypes.weaks):
      # a weak constant (Tensor.const) next to a typed tensor, or two dtypes whose promotion is weak (int8 and uint64 meet at weakfloat):
      # both become the strong dtype of their promotion, as 0.14 stores them (nothing weak is stored)
      out = strong_dtype(least_upper_dtype(self.dtype, y.dtype))
      xu, yu = (_as_dtype(y.uop, out), _as_dtype(self.uop, out)) if reverse else (_as_dtype(self.uop, out), _as_dtype(y.uop, out))
    else: xu, yu = self.uop._broadcasted(y.uop, reverse, match_dtype)
    x, y = self._new(xu), self._new(yu)
    if x.shape == y.shape: return x, y
    shape = broadcast_shape(x.shape, y.shape)
    return x._expand_to(shape), y._expand_to(shape)
  def _same_device(self, *others:Tensor) -> None:
    if bad := [t.device for t in others if t.device != self.device]:
      raise RuntimeError(f"expected all tensors on the same device, got {self.device} and {bad[0]} (shapes {self.shape} and "
                         f"{[t.shape for t in others if t.device != self.device][0]}); move them with .to()")
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  # ***** elementwise (beyond tinygrad/mixin/mathtraits.py) *****
  def __eq__(self, x) -> Tensor: return self.eq(x)  # type: ignore[override]
  __hash__ = object.__hash__
  def threefry(self, key:Tensor) -> Tensor:
    """Threefry-2x32 (20 rounds) of the uint64 counters in self under the uint64 key: a counter-based random bit generator. The
    kernel AST keeps it as one THREEFRY op; the codegen decomposes it into uint32 adds, xors and rotations."""
    a, b = self._broadcasted(key)
    if a.dtype is not dtypes.uint64:
      raise RuntimeError(f"threefry needs uint64 tensors, got {self.dtype} and {getattr(key, 'dtype', type(key).__name__)}")
    return a.alu(Ops.THREEFRY, b)

  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return self.matmul(x, reverse=True)

def _as_dtype(u:UOp, dt:DType) -> UOp:
  """u cast to dt; a constant (a CONST, maybe reshaped and expanded: Tensor(3), full(..., buffer=False)) is that constant of dt, so a
  Python value meeting a tensor is the same node whether it came as a number or as a weak tensor."""
  if u.dtype is dt: return u
  movs: list[UOp] = []
  c = u
  while c.op in (Ops.RESHAPE, Ops.EXPAND):
    movs.append(c)
    c = c.src[0]
  if c.op is not Ops.CONST: return u.cast(dt)
  ret = UOp.const(dt.const(c.arg), dt)
  for m in reversed(movs): ret = UOp(m.op, dt, (ret,), m.arg)
  return ret

def _stored(tensors:tuple[Tensor, ...]) -> tuple[Tensor, ...]:
  # a tensor of a weak dtype is a constant expression of Python values, with no storage: nothing to schedule (as in 0.14)
  return tuple(t for t in tensors if t.dtype not in dtypes.weaks)

def _is_constant(u:UOp) -> bool:
  while u.op in GroupOp.Movement or u.op is Ops.CAST: u = u.src[0]
  return u.op is Ops.CONST

def _shard_buffers(ms:UOp) -> list[UOp]: return [b for s in ms.src if (b := as_buffer(s)) is not None]

def _bind_buffers(tensors:tuple[Tensor, ...], bufs:dict[UOp, UOp]) -> None:
  """Points each tensor (and every graph holding its old UOp) at the buffer its schedule writes; the writes of Tensor.assign
  (AFTER nodes) the schedule runs are realized too, so that no later schedule runs them again."""
  for t in tensors:
    if (b := bufs.get(t.uop)) is None: continue
    if b.op is Ops.MSTACK:   # a sharded tensor: an MSTACK of its shards' buffers (each one computed on its device)
      t.uop = b
      continue
    view = buffer_view(b, t.shape)
    if view is not t.uop:
      # a constant (a CONST under views) is one interned node that every graph using the value shares: marking it would make them all
      # load it from this buffer (and hide it from the codegen's constant rules); recomputing it is free
      if not _is_constant(t.uop): mark_realized(t.uop, view)
      t.uop = view
  for u, b in bufs.items():
    # an assign's storage (flat), or a hand-written kernel's argument after it ran (tinygrad/schedule/call.py), seen with its shape
    if u.op is Ops.AFTER: mark_realized(u, buffer_view(b, u.shape))


def _stored_int(x, dt:DType) -> int:
  """A Python bool, int or float stored in int dtype dt as tinygrad 0.14, torch and a C cast store it: a float truncated toward zero
  (inf and nan raise, as int() does), then wrapped to dt's width (-1 into uint8 is 255). A value outside the 64-bit range no integer
  dtype holds is an error (0.14 wraps it silently)."""
  v = int(x)
  if not -2**63 <= v < 2**64: raise OverflowError(f"Python int {v} is outside the 64-bit range: it can't be stored in {dt}")
  return truncate[dt](v)

def _int_dtype_for(lo:int, hi:int) -> DType:
  """The int dtype for Python ints in [lo, hi] without a given dtype: the default int, else int64, else uint64 (numpy's choice)."""
  for dt in (dtypes.default_int, dtypes.int64, dtypes.uint64):
    if dt.min <= lo and hi <= dt.max: return dt
  raise OverflowError(f"Python ints in [{lo}, {hi}] fit no integer dtype")

def _int_range(data) -> tuple[int, int]:
  vals = [int(x) for x in _nested_map(data, None)]
  return min(vals), max(vals)

def _nested_map(data, fn):
  """fn applied to each scalar of a nested list/tuple (kept nested); fn None: the scalars, flattened."""
  if fn is None: return [y for x in data for y in _nested_map(x, None)] if isinstance(data, (list, tuple)) else [data]
  return [_nested_map(x, fn) for x in data] if isinstance(data, (list, tuple)) else fn(data)

def _nonempty(data) -> bool:
  return len(data) > 0 and (not isinstance(data[0], (list, tuple)) or any(_nonempty(d) for d in data))
