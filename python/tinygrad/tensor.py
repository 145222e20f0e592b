"""Tensor: a lazy n-d array. Operations build a tensor graph of UOps (see tinygrad/uop/shape.py for its conventions);
realize() schedules the graph into kernels (tinygrad.schedule), which are lowered, rendered, compiled and run (tinygrad.engine)."""
from __future__ import annotations
import hashlib
import math
import threading
import time
from typing import Any
from tinygrad.uop.ops import UOp, Ops
from tinygrad.mixin.mathtraits import MathTrait, _weak
from tinygrad.mixin.movement import MovementMixin
from tinygrad.mixin.reduce import ReduceMixin
from tinygrad.dtype import DType, DTypeLike, dtypes, to_dtype, least_upper_dtype, strong_dtype, _to_np_dtype, _from_np_dtype, bitcast
from tinygrad.helpers import prod, argfix, make_tuple, ceildiv, check_host_alloc
from tinygrad.device import Device
from tinygrad.schedule import create_schedule, schedule_to_linear
from tinygrad.schedule.buffers import new_buffer, buffer_view, buffer_of, as_buffer, mark_realized
from tinygrad.engine.realize import run_schedule

__all__ = ["Tensor"]

_rng_lock = threading.Lock()   # threads drawing at once must each advance the counter (else they get the same numbers)

def _canon_device(device:str|None) -> str: return Device.canonicalize(device) if device is not None else Device.DEFAULT

def _broadcast_shape(*shapes:tuple[int, ...]) -> tuple[int, ...]:
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  ret = []
  for dims in zip(*padded):
    non1 = {d for d in dims if d != 1}
    if len(non1) > 1: raise RuntimeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    ret.append(non1.pop() if non1 else 1)
  return tuple(ret)

class Tensor(MathTrait, MovementMixin, ReduceMixin):
  __slots__ = ("uop", "_device", "requires_grad")

  def __init__(self, data:Any, device:str|None=None, dtype:DTypeLike|None=None, requires_grad:bool|None=None):
    self.requires_grad = requires_grad
    dtype = to_dtype(dtype) if dtype is not None else None
    self._device = _canon_device(device)
    if isinstance(data, UOp):
      self.uop = data if dtype is None or data.dtype is dtype else UOp(Ops.CAST, dtype, (data,), dtype)
      return
    if isinstance(data, (bool, int, float)):
      dt = dtype or strong_dtype(_weak(data))
      if isinstance(data, int) and not isinstance(data, bool) and dtypes.is_int(dt) and not dt.min <= data <= dt.max:
        raise OverflowError(f"Python int {data} doesn't fit in {dt} (range [{dt.min}, {dt.max}])")
      self.uop = UOp.const(dt.const(data), dt)
      return
    import numpy as np
    if isinstance(data, (bytes, bytearray)): data, dtype = np.frombuffer(data, dtype=np.uint8), dtype or dtypes.uint8
    if isinstance(data, np.generic): data = np.asarray(data)
    if isinstance(data, (list, tuple)):
      dt = dtype or (strong_dtype(dtypes.from_py(data)) if _nonempty(data) else dtypes.default_float)
      npdt = _to_np_dtype(dt)
      arr = np.array(data, dtype=npdt if npdt is not None else np.float32)
    elif isinstance(data, np.ndarray):
      arr, dt = data, dtype or _from_np_dtype(data.dtype)
      npdt = _to_np_dtype(dt)
      if npdt is not None and arr.dtype != npdt: arr = arr.astype(npdt)
      elif npdt is None: arr = arr.astype(np.float32)
    else: raise TypeError(f"can't make a Tensor from {type(data).__name__}")
    arr = np.ascontiguousarray(arr).reshape(arr.shape)   # ascontiguousarray makes a 0-d array 1-d
    buf = new_buffer(self._device, arr.size, _from_np_dtype(arr.dtype))
    buffer_of(buf).allocate().copyin(memoryview(arr.reshape(-1).view(np.uint8)))
    self.uop = buffer_view(buf, arr.shape)
    if buf.dtype is not dt: self.uop = UOp(Ops.CAST, dt, (self.uop,), dt)

  # ***** properties *****
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self._device
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self): return f"<Tensor {self.shape} {self.dtype} on {self.device}>"
  # as in tinygrad: `if t:`, `t in list`, `a == b and ...` would otherwise be silently True for any tensor
  def __bool__(self): raise TypeError("__bool__ on Tensor is not defined")
  def _new(self, u:UOp) -> Tensor:
    ret = Tensor.__new__(Tensor)
    ret.uop, ret._device, ret.requires_grad = u, self._device, None
    return ret

  # ***** running *****
  def schedule(self, *lst:Tensor):
    """The kernels realize() would run (a list of ScheduleItems, in run order), and {tensor uop: BUFFER}. Nothing runs and the
    tensors are unchanged; see schedule_linear for tinygrad 0.14's form."""
    _tensors("schedule", lst)
    return create_schedule([t.uop for t in (self,) + lst], [t.device for t in (self,) + lst])
  def linear_with_vars(self, *lst:Tensor) -> tuple[UOp, dict[str, int]]:
    """tinygrad 0.14's schedule API: the LINEAR UOp that realizes these tensors (src: one CALL(kernel AST, *BUFFERs) per kernel or
    copy, in run order) and the values of its symbolic variables (none yet: always {}). As in tinygrad, the tensors now refer to
    their output buffers, which hold the data once `tinygrad.engine.realize.run_linear(linear, var_vals)` has run it."""
    tensors = (self,) + _tensors("linear_with_vars", lst)
    items, bufs = create_schedule([t.uop for t in tensors], [t.device for t in tensors])
    _bind_buffers(tensors, bufs)
    return schedule_to_linear(items), {}
  def schedule_linear(self, *lst:Tensor) -> UOp:
    """The LINEAR UOp of linear_with_vars (which see), for a schedule without variables."""
    linear, var_vals = self.linear_with_vars(*lst)
    if var_vals: raise RuntimeError(f"schedule_linear can't bind variables {sorted(var_vals)}: use linear_with_vars")
    return linear
  def realize(self, *lst:Tensor) -> Tensor:
    tensors = (self,) + _tensors("realize", lst)
    items, bufs = create_schedule([t.uop for t in tensors], [t.device for t in tensors])
    run_schedule(items)
    _bind_buffers(tensors, bufs)
    return self
  def _buffer(self):
    t = self if (b := as_buffer(self.uop)) is not None and b.src[0].arg == self.numel() else self.contiguous()
    t.realize()
    return buffer_of(as_buffer(t.uop))
  def numpy(self):
    import numpy as np
    if self.numel() == 0: return np.zeros(self.shape, dtype=_to_np_dtype(self.dtype) or np.float32)
    # writable and independent of the tensor, as in tinygrad: a large CPU buffer is shared copy-on-write (no copy until either side
    # writes), anything else is copied once
    return self._buffer().numpy(share=True).reshape(self.shape)
  def data(self) -> memoryview:
    return self._buffer().as_buffer()
  def tolist(self): return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
    return self.numpy().reshape(()).item()
  def to(self, device:str|None) -> Tensor:
    """This tensor on `device` (lazy: the realize that needs it copies the data, after computing it on this tensor's device)."""
    if device is not None and not isinstance(device, str): raise ValueError(f"to() takes one device name, got {device!r}")
    if (device := _canon_device(device)) == self.device: return self
    ret = Tensor.__new__(Tensor)
    ret.uop, ret._device, ret.requires_grad = UOp(Ops.COPY, self.dtype, (self.uop,), (self.device, device)), device, self.requires_grad
    return ret
  def to_(self, device:str|None) -> Tensor:
    """Moves this tensor to `device` in place."""
    ret = self.to(device)
    self.uop, self._device = ret.uop, ret._device
    return self
  def contiguous(self) -> Tensor:
    if self.uop.op in (Ops.CONTIGUOUS, Ops.COPY) or ((b := as_buffer(self.uop)) is not None and b.src[0].arg == self.numel()): return self
    return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))

  # ***** creation *****
  @staticmethod
  def empty(*shape, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    shape, dt = Tensor._check_shape(shape, "empty"), to_dtype(dtype) if dtype is not None else dtypes.default_float
    buf = new_buffer(_canon_device(device), prod(shape), dt)
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

  # ***** random numbers *****
  # Counter-based: every draw on a device reads that device's key (from the seed) and a 64-bit counter, and the kernel computes
  # threefry(key, counter + i) for each element i. The counter advances on the host, so the same seed gives the same bits on
  # every device and in every run (the same bits as tinygrad 0.14), and the kernels stay the same from draw to draw.
  _seed: int = int(time.time())
  _device_seeds: dict[str, Tensor] = {}
  _device_rng_counters: dict[str, int] = {}
  @staticmethod
  def manual_seed(seed:int=0) -> None:
    """Sets the seed of all random ops and restarts every device's counter."""
    if not isinstance(seed, int) or isinstance(seed, bool): raise TypeError(f"manual_seed needs an int, got {type(seed).__name__} {seed!r}")
    Tensor._seed, Tensor._device_seeds, Tensor._device_rng_counters = seed, {}, {}
  @staticmethod
  def _next_counter(device:str, num:int) -> tuple[Tensor, Tensor]:
    """(key, counter) for drawing num 32-bit words on device: two uint32 tensors of shape (2,), the counter as [low, high]."""
    with _rng_lock: return Tensor._next_counter_locked(device, num)
  @staticmethod
  def _next_counter_locked(device:str, num:int) -> tuple[Tensor, Tensor]:
    if device not in Tensor._device_seeds:
      dev_key = int.from_bytes(hashlib.sha256(len(Tensor._device_seeds).to_bytes(4, "big")).digest(), "big")
      Tensor._device_seeds[device] = Tensor([dev_key & 0xffffffff, Tensor._seed & 0xffffffff], device=device, dtype=dtypes.uint32)
      Tensor._device_rng_counters[device] = 0
    start = Tensor._device_rng_counters[device]
    Tensor._device_rng_counters[device] = (start + num) & 0xffffffffffffffff
    return Tensor._device_seeds[device], Tensor([start & 0xffffffff, start >> 32], device=device, dtype=dtypes.uint32)
  @staticmethod
  def _threefry_random_bits(key:Tensor, counts0:Tensor, counts1:Tensor) -> Tensor:
    x = (counts1.cast(dtypes.uint64) << 32) | counts0.cast(dtypes.uint64)
    x = x.threefry((key[1].cast(dtypes.uint64) << 32) | key[0].cast(dtypes.uint64))
    # the low words then the high words (x.cast(uint32).cat((x >> 32).cast(uint32))), written so that each output word computes
    # one threefry: both halves index the same x
    shift = Tensor([0, 32], device=x.device, dtype=dtypes.uint64).reshape(2, 1)
    return (x.reshape(1, -1).expand(2, x.shape[0]) >> shift).cast(dtypes.uint32).flatten()
  @staticmethod
  def _random_bits(key:Tensor, counter:Tensor, num:int) -> Tensor:
    """num random uint32 words: a per-draw key from (key, counter), then threefry of the word counters under it."""
    low, high = counter[0:1], counter[1:2]
    bits = []
    for i in range(0, num, dtypes.uint32.max):
      chunk = min(num - i, dtypes.uint32.max)
      c_low = low + (i & 0xffffffff)
      c_high = high + (i >> 32) + (c_low < low).cast(dtypes.uint32)
      draw_key = Tensor._threefry_random_bits(key, c_low, c_high)
      counts0 = Tensor.arange(ceildiv(chunk, 2), device=key.device, dtype=dtypes.uint32)
      counts1 = counts0 + ceildiv(chunk, 2)
      bits.append(Tensor._threefry_random_bits(draw_key, counts0, counts1)[:chunk])
    return bits[0].cat(*bits[1:])
  @staticmethod
  def _words_as(bits:Tensor, udt:DType) -> Tensor:
    """The uint32 words reinterpreted (little-endian) as a flat tensor of the unsigned dtype udt."""
    if udt.itemsize == 4: return bits
    if udt.itemsize == 8:
      w = bits.reshape(-1, 2)
      return w[:, 0].cast(udt) | (w[:, 1].cast(udt) << 32)
    parts = [((bits >> (k * udt.bitsize)) & (2 ** udt.bitsize - 1)).cast(udt) for k in range(4 // udt.itemsize)]
    return Tensor.stack(*parts, dim=1).flatten()
  @staticmethod
  def _bits_to_rand(bits:Tensor, shape:tuple[int, ...], dtype:DType) -> Tensor:
    # the top mantissa-many bits under the exponent of 1.0 make a float in [1, 2); minus 1 it is uniform in [0, 1)
    _, nmant = dtypes.finfo(dtype)
    udt = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[dtype.itemsize]
    ubits = Tensor._words_as(bits, udt)
    one = bitcast(1.0, dtype, udt)
    return ((ubits >> (dtype.bitsize - nmant)) | one).bitcast(dtype)[:prod(shape)].sub(1).reshape(shape)
  @staticmethod
  def _check_shape(shape, what:str) -> tuple[int, ...]:
    shape = argfix(*shape)
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
      raise ValueError(f"{what} needs a shape of non-negative ints, got {shape}")
    return tuple(shape)
  @staticmethod
  def rand(*shape, device:str|None=None, dtype:DTypeLike|None=None, contiguous:bool=True) -> Tensor:
    """Uniform random values in [0, 1) (a float dtype, the default float unless given), drawn in a kernel from the seeded counter."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt) or dt in dtypes.weaks or dt in dtypes.fp8s: raise ValueError(f"rand needs a float dtype, got {dt}")
    shape, device = Tensor._check_shape(shape, "rand"), _canon_device(device)
    check_host_alloc(prod(shape) * dt.itemsize, f"rand of shape {shape}")
    if prod(shape) == 0: return Tensor.zeros(shape, device=device, dtype=dt)
    key, counter = Tensor._next_counter(device, ceildiv(prod(shape) * dt.itemsize, 4))
    out = Tensor._bits_to_rand(Tensor._random_bits(key, counter, ceildiv(prod(shape) * dt.itemsize, 4)), shape, dt)
    return out.contiguous() if contiguous else out
  def rand_like(self, **kwargs) -> Tensor:
    return Tensor.rand(*self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @staticmethod
  def randn(*shape, dtype:DTypeLike|None=None, device:str|None=None, **kwargs) -> Tensor:
    """Standard normal values (Box-Muller of two float32 uniform draws), cast to dtype (the default float unless given)."""
    shape = Tensor._check_shape(shape, "randn")
    src = Tensor.rand(2, *shape, device=device, dtype=dtypes.float32, **kwargs)
    return src[0].mul(2 * math.pi).cos().mul((1 - src[1]).log().mul(-2).sqrt()).cast(to_dtype(dtype) if dtype is not None else
                                                                                        dtypes.default_float)
  def randn_like(self, dtype:DTypeLike|None=None, **kwargs) -> Tensor:
    return Tensor.randn(*self.shape, dtype=dtype if dtype is not None else self.dtype, device=kwargs.pop("device", self.device), **kwargs)
  @staticmethod
  def randint(*shape, low:int=0, high:int=10, dtype:DTypeLike=dtypes.int32, **kwargs) -> Tensor:
    """Uniform random ints in [low, high)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
      raise TypeError(f"randint needs int low and high, got {low=}, {high=}")
    if not dtypes.is_int(dt := to_dtype(dtype)): raise TypeError(f"randint needs an int dtype, got {dt}")
    if low >= high: raise ValueError(f"randint needs low < high, got {low=}, {high=}")
    if not (dt.min <= low and high - 1 <= dt.max): raise OverflowError(f"randint range [{low}, {high}) doesn't fit in {dt}")
    # floor(u * n) of a uniform u in [0, 1) stays below n (never rounds up to it) when n fits the float's mantissa
    if (n := high - low) > 2 ** 53: raise ValueError(f"randint can draw from at most 2**53 values, got [{low}, {high})")
    u = Tensor.rand(*Tensor._check_shape(shape, "randint"), dtype=dtypes.float32 if n <= 2 ** 24 else dtypes.float64, **kwargs)
    return ((u * n).cast(dtypes.int64) + low).cast(dt)
  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype:DTypeLike|None=None, **kwargs) -> Tensor:
    """Uniform random values in [low, high)."""
    shape = Tensor._check_shape(shape, "uniform")
    if low >= high: raise ValueError(f"uniform needs low < high, got {low=}, {high=}")
    return ((high - low) * Tensor.rand(*shape, **kwargs)).cast(dtype if dtype is not None else dtypes.default_float) + low
  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, **kwargs) -> Tensor:
    if std < 0: raise ValueError(f"normal needs std >= 0, got {std=}")
    return std * Tensor.randn(*shape, **kwargs) + mean
  @staticmethod
  def scaled_uniform(*shape, **kwargs) -> Tensor:
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5)
  @staticmethod
  def glorot_uniform(*shape, **kwargs) -> Tensor:
    bound = (6 / (argfix(*shape)[0] + prod(argfix(*shape)[1:]))) ** 0.5
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)
  @staticmethod
  def kaiming_uniform(*shape, a:float=0.01, **kwargs) -> Tensor:
    bound = (6 / (1 + a ** 2) / prod(argfix(*shape)[1:])) ** 0.5
    return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)
  @staticmethod
  def kaiming_normal(*shape, a:float=0.01, **kwargs) -> Tensor:
    std = (2 / (1 + a ** 2) / prod(argfix(*shape)[1:])) ** 0.5
    return Tensor.normal(*shape, mean=0.0, std=std, **kwargs)

  # ***** the primitives of the mixins (tinygrad/mixin): movement, reductions and elementwise ops are written there, once *****
  def _mop(self, op:Ops, arg) -> Tensor: return self._new(self.uop._mop(op, arg))
  def _rop(self, op:Ops, axes:tuple[int, ...]) -> Tensor: return self._new(self.uop._rop(op, axes))
  def alu(self, op:Ops, *srcs:Tensor) -> Tensor:
    if not isinstance(op, Ops): raise TypeError(f"alu needs an Ops, got {type(op).__name__}")
    return self._new(self.uop.alu(op, *[s.uop for s in _tensors("alu", srcs)]))
  def cast(self, dtype:DTypeLike) -> Tensor: return self._new(self.uop.cast(dtype))
  def bitcast(self, dtype:DTypeLike) -> Tensor:
    # a kernel may reinterpret across itemsizes (the linear contract checks it), a tensor element can't
    if (dt := to_dtype(dtype)).itemsize != self.dtype.itemsize: raise RuntimeError(f"bitcast from {self.dtype} to {dt} needs the same itemsize")
    return self._new(self.uop.bitcast(dt))
  def _broadcasted(self, y, reverse:bool=False, match_dtype:bool=True) -> tuple[Tensor, Tensor]:
    """self and y (a Tensor or a Python value) as two operands of one dtype (unless match_dtype=False) and one shape. The dtypes
    and the constant a Python value becomes are UOp's rule for tensor-level nodes (so Tensor and UOp build the same nodes); only
    the device check and broadcasting two shapes are Tensor's own."""
    if not isinstance(y, Tensor):
      a, b = self.uop._broadcasted(y, reverse, match_dtype)
      return self._new(a), self._new(b)
    self._same_device(y)
    x, y = (self._new(u) for u in self.uop._broadcasted(y.uop, reverse, match_dtype))
    if x.shape == y.shape: return x, y
    shape = _broadcast_shape(x.shape, y.shape)
    return x._expand_to(shape), y._expand_to(shape)
  def _same_device(self, *others:Tensor) -> None:
    if bad := [t.device for t in others if t.device != self.device]:
      raise RuntimeError(f"expected all tensors on the same device, got {self.device} and {bad[0]} (shapes {self.shape} and "
                         f"{[t.shape for t in others if t.device != self.device][0]}); move them with .to()")
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
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
  def __rmatmul__(self, x): return Tensor(x, device=self.device).matmul(self) if not isinstance(x, Tensor) else x.matmul(self)

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

  # ***** combining *****
  def cat(self, *args:Tensor, dim:int=0) -> Tensor:
    tensors = (self,) + _tensors("cat", args)
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
    d = _tensors("stack", args)[0]._norm_axis(dim, extra=1)
    return args[0].unsqueeze(d).cat(*[t.unsqueeze(d) for t in args[1:]], dim=d)

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

def _bind_buffers(tensors:tuple[Tensor, ...], bufs:dict[UOp, UOp]) -> None:
  """Points each tensor (and every graph holding its old UOp) at the buffer its schedule writes."""
  for t in tensors:
    if (b := bufs.get(t.uop)) is None: continue
    view = buffer_view(b, t.shape)
    if view is not t.uop:
      mark_realized(t.uop, view)
      t.uop = view

def _tensors(what:str, ts) -> tuple[Tensor, ...]:
  if bad := [type(t).__name__ for t in ts if not isinstance(t, Tensor)]: raise TypeError(f"{what} takes Tensors, got {', '.join(bad)}")
  return tuple(ts)

def _nonempty(data) -> bool:
  return len(data) > 0 and (not isinstance(data[0], (list, tuple)) or any(_nonempty(d) for d in data))
