"""Random numbers: a counter-based generator (threefry) seeded by manual_seed, and the distributions built on it."""
from __future__ import annotations
from typing import TYPE_CHECKING
import hashlib
import math
import threading
import time
from tinygrad.dtype import DType, DTypeLike, dtypes, to_dtype, bitcast
from tinygrad.mixin.movement import size_ok
from tinygrad.helpers import prod, argfix, ceildiv, check_host_alloc, TRAINING
from tinygrad.tensor.common import canon_device, check_tensors, leaf
from tinygrad.engine.realize import capturing
from tinygrad.uop import Ops

_rng_lock = threading.Lock()   # threads drawing at once must each advance the counter (else they get the same numbers)
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

def advance_rng_counter(tensor_class:type[Tensor], device:str, num:int) -> tuple[Tensor, int]:
  """(device's key, the counter value to draw num words at) of tensor_class's generator, advanced past them as a draw does: what a
  TinyJit replay of captured draws writes into their counter buffers, so each replay draws new numbers."""
  with _rng_lock: return tensor_class._advance_counter(device, num)

class RandomMixin:
  # ***** random numbers *****
  # Counter-based: every draw on a device reads that device's key (from the seed) and a 64-bit counter, and the kernel computes
  # threefry(key, counter + i) for each element i. The counter advances on the host, so the same seed gives the same bits on
  # every device and in every run (the same bits as tinygrad 0.14), and the kernels stay the same from draw to draw.
  _seed: int = int(time.time())
  _device_seeds: dict[str, Tensor] = {}
  _device_rng_counters: dict[str, int] = {}
  @classmethod
  def manual_seed(cls, seed:int=0) -> None:
    """Sets the seed of all random ops and restarts every device's counter."""
    if not isinstance(seed, int) or isinstance(seed, bool): raise TypeError(f"manual_seed needs an int, got {type(seed).__name__} {seed!r}")
    cls._seed, cls._device_seeds, cls._device_rng_counters = seed, {}, {}
  @classmethod
  def _next_counter(cls, device:str, num:int) -> tuple[Tensor, Tensor]:
    """(key, counter) for drawing num 32-bit words on device: two uint32 tensors of shape (2,), the counter as [low, high]."""
    with _rng_lock: return cls._next_counter_locked(device, num)
  @classmethod
  def _next_counter_locked(cls, device:str, num:int) -> tuple[Tensor, Tensor]:
    key, start = cls._advance_counter(device, num)
    counter = cls([start & 0xffffffff, start >> 32], device=device, dtype=dtypes.uint32)
    # a TinyJit capturing this draw refreshes the counter's buffer at each replay (else every replay would draw the same numbers)
    if capturing: capturing[-1].add_rng(device, num, key, counter)
    return key, counter
  @classmethod
  def _advance_counter(cls, device:str, num:int) -> tuple[Tensor, int]:
    """(the device's key, the counter value to draw num words at), advancing the counter past them; the caller holds _rng_lock."""
    if device not in cls._device_seeds:
      dev_key = int.from_bytes(hashlib.sha256(len(cls._device_seeds).to_bytes(4, "big")).digest(), "big")
      cls._device_seeds[device] = cls([dev_key & 0xffffffff, cls._seed & 0xffffffff], device=device, dtype=dtypes.uint32)
      cls._device_rng_counters[device] = 0
    start = cls._device_rng_counters[device]
    cls._device_rng_counters[device] = (start + num) & 0xffffffffffffffff
    return cls._device_seeds[device], start
  @classmethod
  def _threefry_random_bits(cls, key:Tensor, counts0:Tensor, counts1:Tensor) -> Tensor:
    x = (counts1.cast(dtypes.uint64) << 32) | counts0.cast(dtypes.uint64)
    x = x.threefry((key[1].cast(dtypes.uint64) << 32) | key[0].cast(dtypes.uint64))
    # the low words then the high words (x.cast(uint32).cat((x >> 32).cast(uint32))), written so that each output word computes
    # one threefry: both halves index the same x
    shift = cls([0, 32], device=x.device, dtype=dtypes.uint64).reshape(2, 1)
    return (x.reshape(1, -1).expand(2, x.shape[0]) >> shift).cast(dtypes.uint32).flatten()
  @classmethod
  def random_bits(cls, key:Tensor, counter:Tensor, num:int) -> Tensor:
    """num random uint32 words from a uint32 key and counter of shape (2,) ([low, high]): a per-draw key from (key, counter),
    then threefry of the word counters under it. rand and the other draws use it with the seeded key and counter."""
    check_tensors("random_bits", (key, counter))
    if key.dtype is not dtypes.uint32 or counter.dtype is not dtypes.uint32 or key.shape != (2,) or counter.shape != (2,):
      raise ValueError(f"random_bits needs uint32 key and counter of shape (2,), got {key.dtype} {key.shape} and {counter.dtype} {counter.shape}")
    if not isinstance(num, int) or num < 0: raise ValueError(f"random_bits needs a non-negative int count, got {num!r}")
    if num == 0: return counter[0:0]
    low, high = counter[0:1], counter[1:2]
    bits = []
    for i in range(0, num, dtypes.uint32.max):
      chunk = min(num - i, dtypes.uint32.max)
      c_low = low + (i & 0xffffffff)
      c_high = high + (i >> 32) + (c_low < low).cast(dtypes.uint32)
      draw_key = cls._threefry_random_bits(key, c_low, c_high)
      counts0 = cls.arange(ceildiv(chunk, 2), device=key.device, dtype=dtypes.uint32)
      counts1 = counts0 + ceildiv(chunk, 2)
      bits.append(cls._threefry_random_bits(draw_key, counts0, counts1)[:chunk])
    return bits[0].cat(*bits[1:])
  @classmethod
  def _words_as(cls, bits:Tensor, udt:DType) -> Tensor:
    """The uint32 words reinterpreted (little-endian) as a flat tensor of the unsigned dtype udt."""
    if udt.itemsize == 4: return bits
    if udt.itemsize == 8:
      w = bits.reshape(-1, 2)
      return w[:, 0].cast(udt) | (w[:, 1].cast(udt) << 32)
    parts = [((bits >> (k * udt.bitsize)) & (2 ** udt.bitsize - 1)).cast(udt) for k in range(4 // udt.itemsize)]
    return cls.stack(*parts, dim=1).flatten()
  @classmethod
  def _bits_to_rand(cls, bits:Tensor, shape:tuple[int, ...], dtype:DType) -> Tensor:
    # the top mantissa-many bits under the exponent of 1.0 make a float in [1, 2); minus 1 it is uniform in [0, 1)
    _, nmant = dtypes.finfo(dtype)
    udt = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[dtype.itemsize]
    ubits = cls._words_as(bits, udt)
    one = bitcast(1.0, dtype, udt)
    return ((ubits >> (dtype.bitsize - nmant)) | one).bitcast(dtype)[:prod(shape)].sub(1).reshape(shape)
  @staticmethod
  def _check_shape(shape, what:str, symbolic:bool=False) -> tuple[int, ...]:
    """shape as a tuple of ints >= 0 (ValueError naming `what` otherwise); symbolic=True also takes sizes that are bound Variable
    expressions."""
    shape = argfix(*shape)
    if not all((isinstance(s, int) and not isinstance(s, bool) and s >= 0) or (symbolic and size_ok(s)) for s in shape):
      raise ValueError(f"{what} needs a shape of non-negative ints, got {shape}")
    return tuple(shape)
  @classmethod
  def rand(cls, *shape, device:str|None=None, dtype:DTypeLike|None=None, contiguous:bool=True, requires_grad:bool|None=None) -> Tensor:
    """Uniform random values in [0, 1) (a float dtype, the default float unless given), drawn in a kernel from the seeded counter."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt) or dt in dtypes.weaks or dt in dtypes.fp8s: raise ValueError(f"rand needs a float dtype, got {dt}")
    shape, device = cls._check_shape(shape, "rand"), canon_device(device)
    if isinstance(device, tuple):   # drawn on the first device, a copy on each (the same numbers everywhere)
      return leaf(cls.rand(*shape, device=device[0], dtype=dt, contiguous=contiguous).shard(device), requires_grad)
    check_host_alloc(prod(shape) * dt.itemsize, f"rand of shape {shape}")
    if prod(shape) == 0: return cls.zeros(shape, device=device, dtype=dt, requires_grad=requires_grad)
    key, counter = cls._next_counter(device, ceildiv(prod(shape) * dt.itemsize, 4))
    out = cls._bits_to_rand(cls.random_bits(key, counter, ceildiv(prod(shape) * dt.itemsize, 4)), shape, dt)
    return leaf(out.contiguous() if contiguous else out, requires_grad)
  def rand_like(self, **kwargs) -> Tensor:
    return type(self).rand(*self.shape, device=kwargs.pop("device", self.device), dtype=kwargs.pop("dtype", self.dtype), **kwargs)
  @classmethod
  def randn(cls, *shape, dtype:DTypeLike|None=None, device:str|None=None, requires_grad:bool|None=None, **kwargs) -> Tensor:
    """Standard normal values (Box-Muller of two float32 uniform draws), cast to dtype (the default float unless given)."""
    shape = cls._check_shape(shape, "randn")
    src = cls.rand(2, *shape, device=device, dtype=dtypes.float32, **kwargs)
    ret = src[0].mul(2 * math.pi).cos().mul((1 - src[1]).log().mul(-2).sqrt())
    return leaf(ret.cast(to_dtype(dtype) if dtype is not None else dtypes.default_float), requires_grad)
  def randn_like(self, dtype:DTypeLike|None=None, **kwargs) -> Tensor:
    return type(self).randn(*self.shape, dtype=dtype if dtype is not None else self.dtype, device=kwargs.pop("device", self.device), **kwargs)
  @classmethod
  def randint(cls, *shape, low:int=0, high:int=10, dtype:DTypeLike=dtypes.int32, **kwargs) -> Tensor:
    """Uniform random ints in [low, high)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
      raise TypeError(f"randint needs int low and high, got {low=}, {high=}")
    if not dtypes.is_int(dt := to_dtype(dtype)): raise TypeError(f"randint needs an int dtype, got {dt}")
    if low >= high: raise ValueError(f"randint needs low < high, got {low=}, {high=}")
    if not (dt.min <= low and high - 1 <= dt.max): raise OverflowError(f"randint range [{low}, {high}) doesn't fit in {dt}")
    # floor(u * n) of a uniform u in [0, 1) stays below n (never rounds up to it) when n fits the float's mantissa
    if (n := high - low) > 2 ** 53: raise ValueError(f"randint can draw from at most 2**53 values, got [{low}, {high})")
    u = cls.rand(*cls._check_shape(shape, "randint"), dtype=dtypes.float32 if n <= 2 ** 24 else dtypes.float64, **kwargs)
    return ((u * n).cast(dtypes.int64) + low).cast(dt)
  @classmethod
  def uniform(cls, *shape, low=0.0, high=1.0, dtype:DTypeLike|None=None, requires_grad:bool|None=None, **kwargs) -> Tensor:
    """Uniform random values in [low, high)."""
    shape = cls._check_shape(shape, "uniform")
    if low >= high: raise ValueError(f"uniform needs low < high, got {low=}, {high=}")
    u, dt = cls.rand(*shape, **kwargs), to_dtype(dtype) if dtype is not None else dtypes.default_float
    # (high - low) * u + low rounded once, as tinygrad 0.14's kernels compute it (its C and CUDA compilers contract it into an fma):
    # the same seed gives the same layer initializations bit for bit
    if u.dtype is dt and dt in (dtypes.float32, dtypes.float64): ret = u.alu(Ops.MULACC, u._broadcasted(high - low)[1], u._broadcasted(low)[1])
    else: ret = ((high - low) * u).cast(dt) + low
    return leaf(ret, requires_grad)
  @classmethod
  def normal(cls, *shape, mean=0.0, std=1.0, requires_grad:bool|None=None, **kwargs) -> Tensor:
    if std < 0: raise ValueError(f"normal needs std >= 0, got {std=}")
    return leaf(std * cls.randn(*shape, **kwargs) + mean, requires_grad)
  @classmethod
  def scaled_uniform(cls, *shape, **kwargs) -> Tensor:
    return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(argfix(*shape)) ** -0.5)
  @classmethod
  def glorot_uniform(cls, *shape, **kwargs) -> Tensor:
    bound = (6 / (argfix(*shape)[0] + prod(argfix(*shape)[1:]))) ** 0.5
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)
  @classmethod
  def kaiming_uniform(cls, *shape, a:float=0.01, **kwargs) -> Tensor:
    bound = (6 / (1 + a ** 2) / prod(argfix(*shape)[1:])) ** 0.5
    return cls.uniform(*shape, low=-bound, high=bound, **kwargs)
  @classmethod
  def kaiming_normal(cls, *shape, a:float=0.01, **kwargs) -> Tensor:
    std = (2 / (1 + a ** 2) / prod(argfix(*shape)[1:])) ** 0.5
    return cls.normal(*shape, mean=0.0, std=std, **kwargs)

  @classmethod
  def randperm(cls, n:int, device=None, dtype=dtypes.int32, **kwargs) -> Tensor:
    """A random permutation of 0..n-1: the order that sorts n uniform draws."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0: raise ValueError(f"randperm needs a non-negative int n, got {n!r}")
    return cls.rand(n, device=device, **kwargs).argsort().cast(dtype)
  def multinomial(self:Tensor, num_samples:int=1, replacement:bool=False) -> Tensor:
    """num_samples category indices drawn with probabilities proportional to self (1-d: one distribution; 2-d: one per row)."""
    if not 1 <= self.ndim <= 2: raise RuntimeError(f"multinomial needs a 1-d or 2-d tensor of weights, got shape {self.shape}")
    if not isinstance(num_samples, int) or num_samples <= 0: raise RuntimeError(f"multinomial needs num_samples > 0, got {num_samples!r}")
    weight = self.unsqueeze(0) if self.ndim == 1 else self
    if not replacement and num_samples > weight.shape[1]:
      raise RuntimeError(f"multinomial can't draw {num_samples} samples without replacement from {weight.shape[1]} categories")
    if replacement or num_samples == 1:
      # inverse CDF: each uniform draw picks the first category whose cumulative weight passes it
      cdf = (cw := weight.cumsum(1).float()) / cw[:, -1].unsqueeze(1)
      draws = type(self).rand(num_samples, cdf.shape[0], 1, device=self.device)
      indices = (draws >= cdf).sum(2).permute(1, 0)
    else:
      # Efraimidis-Spirakis: the k largest log2(u)/w are a weighted draw without replacement
      indices = (weight.rand_like(dtype=dtypes.float32).log2() / weight).topk(num_samples, dim=1)[1]
    return (indices.squeeze(0) if self.ndim == 1 else indices).cast(dtypes.int32)
  def dropout(self:Tensor, p=0.5) -> Tensor:
    """Zeroes each element with probability p and scales the rest by 1/(1-p), only while training (Context(TRAINING=1))."""
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not TRAINING or p == 0: return self
    if p == 1: return self.const_like(0)
    return (self.rand_like(dtype=dtypes.default_float, contiguous=False) >= p).contiguous().where(self, 0) / (1.0 - p)

__all__ = ["RandomMixin"]
