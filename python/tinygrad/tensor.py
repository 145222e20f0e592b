"""Tensor: a lazy n-d array. Operations build a tensor graph of UOps (see tinygrad/schedule/shape.py for its conventions);
realize() schedules the graph into kernels (tinygrad.schedule), which are lowered, rendered, compiled and run (tinygrad.engine)."""
from __future__ import annotations
import hashlib
import math
import time
from typing import Any
from tinygrad.uop.ops import UOp, Ops
from tinygrad.mixin.mathtraits import OperatorMixin
from tinygrad.dtype import DType, DTypeLike, dtypes, to_dtype, least_upper_dtype, strong_dtype, sum_acc_dtype, _to_np_dtype, _from_np_dtype, bitcast
from tinygrad.helpers import prod, argfix, make_tuple, ceildiv
from tinygrad.device import Device
from tinygrad.schedule import create_schedule, schedule_to_linear
from tinygrad.schedule.buffers import new_buffer, buffer_view, buffer_of, as_buffer, mark_realized
from tinygrad.schedule.shape import shape_of
from tinygrad.engine.realize import run_schedule

__all__ = ["Tensor"]

def _canon_device(device:str|None) -> str: return Device.canonicalize(device) if device is not None else Device.DEFAULT

def _weak(x) -> DType:
  if isinstance(x, bool): return dtypes.bool
  if isinstance(x, int): return dtypes.weakint
  if isinstance(x, float): return dtypes.weakfloat
  raise TypeError(f"can't use {type(x).__name__} {x!r} in a Tensor operation")

def _broadcast_shape(*shapes:tuple[int, ...]) -> tuple[int, ...]:
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  ret = []
  for dims in zip(*padded):
    non1 = {d for d in dims if d != 1}
    if len(non1) > 1: raise RuntimeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    ret.append(non1.pop() if non1 else 1)
  return tuple(ret)

class Tensor(OperatorMixin):
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
    arr = np.ascontiguousarray(arr)
    buf = new_buffer(self._device, arr.size, _from_np_dtype(arr.dtype))
    buffer_of(buf).allocate().copyin(memoryview(arr.reshape(-1).view(np.uint8)))
    self.uop = buffer_view(buf, arr.shape)
    if buf.dtype is not dt: self.uop = UOp(Ops.CAST, dt, (self.uop,), dt)

  # ***** properties *****
  @property
  def shape(self) -> tuple[int, ...]: return shape_of(self.uop)
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self._device
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return prod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self): return f"<Tensor {self.shape} {self.dtype} on {self.device}>"
  def _new(self, u:UOp) -> Tensor:
    ret = Tensor.__new__(Tensor)
    ret.uop, ret._device, ret.requires_grad = u, self._device, None
    return ret

  # ***** running *****
  def schedule(self, *lst:Tensor):
    """The kernels realize() would run (a list of ScheduleItems, in run order), and {tensor uop: BUFFER}. Nothing runs and the
    tensors are unchanged; see schedule_linear for tinygrad 0.14's form."""
    return create_schedule([t.uop for t in (self,) + lst], [t.device for t in (self,) + lst])
  def linear_with_vars(self, *lst:Tensor) -> tuple[UOp, dict[str, int]]:
    """tinygrad 0.14's schedule API: the LINEAR UOp that realizes these tensors (src: one CALL(kernel AST, *BUFFERs) per kernel or
    copy, in run order) and the values of its symbolic variables (none yet: always {}). As in tinygrad, the tensors now refer to
    their output buffers, which hold the data once `tinygrad.engine.realize.run_linear(linear, var_vals)` has run it."""
    tensors = (self,) + lst
    items, bufs = create_schedule([t.uop for t in tensors], [t.device for t in tensors])
    _bind_buffers(tensors, bufs)
    return schedule_to_linear(items), {}
  def schedule_linear(self, *lst:Tensor) -> UOp:
    """The LINEAR UOp of linear_with_vars (which see), for a schedule without variables."""
    linear, var_vals = self.linear_with_vars(*lst)
    if var_vals: raise RuntimeError(f"schedule_linear can't bind variables {sorted(var_vals)}: use linear_with_vars")
    return linear
  def realize(self, *lst:Tensor) -> Tensor:
    tensors = (self,) + lst
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
    shape, dt = argfix(*shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    buf = new_buffer(_canon_device(device), prod(shape), dt)
    buffer_of(buf).allocate()
    return Tensor(buffer_view(buf, shape), device=device)
  @staticmethod
  def full(shape, fill_value, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    shape = make_tuple(shape, 1) if isinstance(shape, int) else tuple(shape)
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
    n = max(math.ceil((stop - start) / step), 0)
    if all(isinstance(v, int) for v in (start, stop, step)): vals = start + np.arange(n, dtype=np.int64) * step
    else: vals = np.array([start + i * step for i in range(n)], dtype=np.float64 if dtypes.is_float(dt) else np.int64)
    return Tensor(vals, device=device, dtype=dt)
  @staticmethod
  def eye(n:int, m:int|None=None, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
    """The n x m identity: ones where the row index equals the column index (computed in the kernel from two aranges)."""
    if n < 0 or (m is not None and m < 0): raise ValueError(f"eye needs non-negative sizes, got {n}, {m}")
    rows, cols = Tensor.arange(n, device=device), Tensor.arange(n if m is None else m, device=device)
    return (rows.unsqueeze(1) == cols.unsqueeze(0)).cast(dtype or dtypes.default_float)
  @staticmethod
  def linspace(start, stop, steps:int, device:str|None=None, dtype:DTypeLike|None=None) -> Tensor:
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
    return Tensor.uniform(*shape, low=low, high=high, dtype=dt, **kwargs)
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

  # ***** elementwise *****
  def _alu(self, op:Ops, *srcs:Tensor, dtype:DType|None=None) -> Tensor:
    return self._new(UOp(op, dtype or self.dtype, (self.uop,) + tuple(s.uop for s in srcs)))
  def cast(self, dtype:DTypeLike) -> Tensor:
    dt = to_dtype(dtype)
    return self if dt is self.dtype else self._new(UOp(Ops.CAST, dt, (self.uop,), dt))
  def bitcast(self, dtype:DTypeLike) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize: raise RuntimeError(f"bitcast from {self.dtype} to {dt} needs the same itemsize")
    return self if dt is self.dtype else self._new(UOp(Ops.BITCAST, dt, (self.uop,), dt))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  def _const_like(self, x, dtype:DType) -> Tensor:
    return Tensor(dtype.const(x), device=self.device, dtype=dtype).reshape((1,) * self.ndim).expand(self.shape) if self.ndim else \
      Tensor(dtype.const(x), device=self.device, dtype=dtype)
  def _same_device(self, *others:Tensor) -> None:
    if bad := [t.device for t in others if t.device != self.device]:
      raise RuntimeError(f"expected all tensors on the same device, got {self.device} and {bad[0]} (shapes {self.shape} and "
                         f"{[t.shape for t in others if t.device != self.device][0]}); move them with .to()")
  def _broadcasted(self, y, reverse:bool=False, match_dtype:bool=True) -> tuple[Tensor, Tensor]:
    x = self
    if isinstance(y, Tensor): x._same_device(y)
    if not isinstance(y, Tensor):
      out = strong_dtype(least_upper_dtype(x.dtype, _weak(y))) if match_dtype else strong_dtype(_weak(y))
      x, y = x.cast(out), x._const_like(y, out)
    elif match_dtype and x.dtype is not y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(out), y.cast(out)
    if reverse: x, y = y, x
    shape = _broadcast_shape(x.shape, y.shape)
    return x._expand_to(shape), y._expand_to(shape)
  def _expand_to(self, shape:tuple[int, ...]) -> Tensor:
    if self.shape == shape: return self
    return self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)

  def add(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.OR if a.dtype is dtypes.bool else Ops.ADD, b)
  def sub(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype is dtypes.bool: raise RuntimeError("subtraction of bool tensors is not supported, use logical_xor")
    return a._alu(Ops.SUB, b)
  def mul(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(Ops.AND if a.dtype is dtypes.bool else Ops.MUL, b)
  def div(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_float(a.dtype): a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    return a._alu(Ops.FDIV, b)
  def neg(self) -> Tensor: return self.logical_not() if self.dtype is dtypes.bool else self._alu(Ops.NEG)
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._alu(Ops.CMPNE, self._const_like(True, dtypes.bool), dtype=dtypes.bool)
  def _cmp(self, op:Ops, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._alu(op, b, dtype=dtypes.bool)
  def __lt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x)
  def __gt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True)
  def __ge__(self, x) -> Tensor: return (self < x).logical_not()
  def __le__(self, x) -> Tensor: return (self > x).logical_not()
  def __eq__(self, x) -> Tensor: return self._cmp(Ops.CMPEQ, x)  # type: ignore[override]
  def __ne__(self, x) -> Tensor: return self._cmp(Ops.CMPNE, x)  # type: ignore[override]
  __hash__ = object.__hash__
  def maximum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._alu(Ops.MAX, b)
  def minimum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return (a < b).where(a, b)
  def where(self, x, y) -> Tensor:
    self._same_device(*[t for t in (x, y) if isinstance(t, Tensor)])
    cond = self.cast(dtypes.bool)
    if isinstance(x, Tensor) and isinstance(y, Tensor): x, y = x._broadcasted(y)
    elif isinstance(x, Tensor): x, y = x._broadcasted(y)
    elif isinstance(y, Tensor): y, x = y._broadcasted(x)
    else:
      dt = strong_dtype(least_upper_dtype(_weak(x), _weak(y)))
      x, y = Tensor(x, device=self.device, dtype=dt), Tensor(y, device=self.device, dtype=dt)
    shape = _broadcast_shape(cond.shape, x.shape, y.shape)
    cond, x, y = cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape)
    return cond._alu(Ops.WHERE, x, y, dtype=x.dtype)
  def bitwise_and(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.XOR, x, reverse)
  def _bitwise(self, op:Ops, x, reverse) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not (dtypes.is_int(a.dtype) or a.dtype is dtypes.bool): raise RuntimeError(f"{op} needs int or bool tensors, got {a.dtype}")
    return a._alu(op, b)
  def bitwise_not(self) -> Tensor:
    if self.dtype is dtypes.bool: return self.logical_not()
    if not dtypes.is_int(self.dtype): raise RuntimeError(f"bitwise_not needs an int or bool tensor, got {self.dtype}")
    return self._alu(Ops.XOR, self._const_like(-1 if not dtypes.is_unsigned(self.dtype) else self.dtype.max, self.dtype))

  def lshift(self, x, reverse=False) -> Tensor:
    """`self << x` on int tensors (bits shifted out are lost; the dtype wraps). A shift outside [0, bits) is undefined."""
    return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x, reverse=False) -> Tensor:
    """`self >> x` on int tensors: logical for unsigned dtypes, arithmetic (sign-filling) for signed ones."""
    return self._shift(Ops.SHR, x, reverse)
  def _shift(self, op:Ops, x, reverse) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): raise RuntimeError(f"{'<<' if op is Ops.SHL else '>>'} needs int tensors, got {a.dtype} (shapes {a.shape})")
    return a._alu(op, b)
  def threefry(self, key:Tensor) -> Tensor:
    """Threefry-2x32 (20 rounds) of the uint64 counters in self under the uint64 key: a counter-based random bit generator. The
    kernel AST keeps it as one THREEFRY op; the codegen decomposes it into uint32 adds, xors and rotations."""
    a, b = self._broadcasted(key)
    if a.dtype is not dtypes.uint64: raise RuntimeError(f"threefry needs uint64 tensors, got {self.dtype} and {key.dtype}")
    return a._alu(Ops.THREEFRY, b)

  # unary math (ints compute in the default float)
  def _float_unary(self, op:Ops) -> Tensor:
    x = self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
    return x._alu(op)
  def sqrt(self) -> Tensor: return self._float_unary(Ops.SQRT)
  def exp2(self) -> Tensor: return self._float_unary(Ops.EXP2)
  def log2(self) -> Tensor: return self._float_unary(Ops.LOG2)
  def sin(self) -> Tensor: return self._float_unary(Ops.SIN)
  def reciprocal(self) -> Tensor: return self._float_unary(Ops.RECIPROCAL)
  def exp(self) -> Tensor: return (self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)).mul(1 / math.log(2)).exp2()
  def log(self) -> Tensor: return self.log2().mul(math.log(2))
  def cos(self) -> Tensor: return (self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)).sub(math.pi / 2, True).sin()
  def relu(self) -> Tensor: return (self > 0).where(self, 0)
  def abs(self) -> Tensor: return (self < 0).where(-self, self)
  def square(self) -> Tensor: return self * self

  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return Tensor(x, device=self.device).matmul(self) if not isinstance(x, Tensor) else x.matmul(self)

  # ***** reductions *****
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted({self._norm_axis(a) for a in axes}))
  def _norm_axis(self, a:int, extra:int=0) -> int:
    n = self.ndim + extra
    if not -max(n, 1) <= a < max(n, 1): raise IndexError(f"dimension {a} is out of range for a tensor of shape {self.shape} "
                                                          f"(expected to be in [{-max(n, 1)}, {max(n, 1) - 1}])")
    return a + n if a < 0 else a
  def _reduce(self, op:Ops, axis=None, keepdim:bool=False) -> Tensor:
    axes = tuple(a for a in self._axes(axis) if a < self.ndim)
    ret = self._new(UOp(Ops.REDUCE, self.dtype, (self.uop,), (op, axes))) if axes else self
    if keepdim: return ret
    return ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis=None, keepdim=False, dtype:DTypeLike|None=None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    ret = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    return ret.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else ret
  def prod(self, axis=None, keepdim=False, dtype:DTypeLike|None=None) -> Tensor:
    return self.cast(to_dtype(dtype) if dtype is not None else self.dtype)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim=False) -> Tensor: return self._reduce(Ops.MAX, axis, keepdim)
  def _inverse(self) -> Tensor:
    if dtypes.is_float(self.dtype): return -self
    return self.logical_not() if self.dtype is dtypes.bool else ~self
  def min(self, axis=None, keepdim=False) -> Tensor: return self._inverse().max(axis, keepdim)._inverse()
  def mean(self, axis=None, keepdim=False) -> Tensor:
    x = self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)
    cnt = prod(s for i, s in enumerate(self.shape) if i in self._axes(axis))
    ret = x.sum(axis, keepdim)
    return ret.div(cnt) if cnt > 0 else ret.mul(float("nan"))

  # ***** movement *****
  def reshape(self, shape, *args) -> Tensor:
    shape = tuple(argfix(shape, *args))
    if shape.count(-1) > 1: raise RuntimeError(f"only one dimension can be inferred, got {shape}")
    if -1 in shape:
      rest = prod(s for s in shape if s != -1)
      if rest == 0 or self.numel() % rest: raise RuntimeError(f"shape {shape} is invalid for input of shape {self.shape}")
      shape = tuple(self.numel() // rest if s == -1 else s for s in shape)
    if any(not isinstance(s, int) or s < 0 for s in shape): raise RuntimeError(f"invalid shape {shape}")
    if prod(shape) != self.numel(): raise RuntimeError(f"shape {shape} is invalid for input of shape {self.shape} ({self.numel()} elements)")
    return self if shape == self.shape else self._new(UOp(Ops.RESHAPE, self.dtype, (self.uop,), shape))
  def permute(self, order, *args) -> Tensor:
    order = tuple(self._norm_axis(a) for a in argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): raise RuntimeError(f"permute order {order} is not a permutation of the dims of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._new(UOp(Ops.PERMUTE, self.dtype, (self.uop,), order))
  def expand(self, shape, *args) -> Tensor:
    shape = tuple(argfix(shape, *args))
    if len(shape) < self.ndim: raise RuntimeError(f"can't expand {self.shape} to {shape}: fewer dims")
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    new = tuple(o if s == -1 else s for s, o in zip(shape, x.shape))
    if any(o != 1 and o != s for s, o in zip(new, x.shape)): raise RuntimeError(f"can't expand {self.shape} to {shape}")
    return x if new == x.shape else x._new(UOp(Ops.EXPAND, self.dtype, (x.uop,), new))
  def pad(self, padding, value:float=0.0) -> Tensor:
    if all(isinstance(p, int) for p in padding):  # torch style: (left, right) pairs from the last dim
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise ValueError(f"invalid padding {padding} for shape {self.shape}")
      pairs = [(0, 0)] * self.ndim
      for i in range(len(padding) // 2): pairs[self.ndim - 1 - i] = (padding[2*i], padding[2*i+1])
    else:
      if len(padding) != self.ndim: raise ValueError(f"padding {padding} needs one entry per dim of {self.shape}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    x = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for s, (b, a) in zip(self.shape, pairs)))
    pos = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
    if all(p == (0, 0) for p in pos): return x
    ret = x._new(UOp(Ops.PAD, x.dtype, (x.uop,), pos))
    if value == 0: return ret
    mask = x._new(UOp(Ops.PAD, dtypes.bool, (x._const_like(True, dtypes.bool).uop,), pos))
    return mask.where(ret, value)
  def shrink(self, arg) -> Tensor:
    if len(arg) != self.ndim: raise ValueError(f"shrink {arg} needs one entry per dim of {self.shape}")
    arg = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
    if any(not 0 <= b <= e <= s for (b, e), s in zip(arg, self.shape)): raise ValueError(f"invalid shrink {arg} for shape {self.shape}")
    if all(a == (0, s) for a, s in zip(arg, self.shape)): return self
    return self._new(UOp(Ops.SHRINK, self.dtype, (self.uop,), arg))
  def flip(self, axis, *args) -> Tensor:
    axes = {self._norm_axis(a) for a in argfix(axis, *args)}
    flips = tuple(i in axes and s > 1 for i, s in enumerate(self.shape))
    return self if not any(flips) else self._new(UOp(Ops.FLIP, self.dtype, (self.uop,), flips))
  def transpose(self, dim0:int=1, dim1:int=0) -> Tensor:
    order = list(range(self.ndim))
    d0, d1 = self._norm_axis(dim0), self._norm_axis(dim1)
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.transpose() if self.ndim >= 2 else self
  def flatten(self, start_dim:int=0, end_dim:int=-1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._norm_axis(start_dim), self._norm_axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e+1]),) + self.shape[e+1:])
  def squeeze(self, dim:int|None=None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    d = self._norm_axis(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d+1:])
  def unsqueeze(self, dim:int) -> Tensor:
    d = self._norm_axis(dim, extra=1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def __getitem__(self, indices) -> Tensor:
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (shape {self.shape})")
    if Ellipsis in idx:
      e = idx.index(Ellipsis)
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
    tensors = (self,) + args
    self._same_device(*args)
    d = self._norm_axis(dim)
    for t in tensors:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise RuntimeError(f"cat needs the same shape except in dim {d}, got {[t.shape for t in tensors]}")
    dt = least_upper_dtype(*(t.dtype for t in tensors))
    total, off, ret = sum(t.shape[d] for t in tensors), 0, None
    for t in tensors:
      p = t.cast(dt).pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(self.ndim)))
      ret = p if ret is None else ret._alu(Ops.OR if dt is dtypes.bool else Ops.ADD, p)
      off += t.shape[d]
    return ret
  @staticmethod
  def stack(*args:Tensor, dim:int=0) -> Tensor:
    if len(args) == 1 and isinstance(args[0], (list, tuple)): args = tuple(args[0])
    d = args[0]._norm_axis(dim, extra=1)
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

def _nonempty(data) -> bool:
  return len(data) > 0 and (not isinstance(data[0], (list, tuple)) or any(_nonempty(d) for d in data))
