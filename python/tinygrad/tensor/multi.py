"""Tensors on several devices: shard, shard_, shard_like (tinygrad 0.14's API). A sharded tensor's device is the tuple of its devices and its
UOp an MSTACK of its shards; the graph built on it is lowered to per-device graphs when it is scheduled (tinygrad/schedule/multi.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinygrad.uop.ops import UOp, Ops
from tinygrad.device import canonicalize_device
from tinygrad.schedule.multi import shard_uop, mstack, sharding_axis, lower_uop, reshard
from tinygrad.tensor.autograd import track
from tinygrad.tensor import disk
if TYPE_CHECKING:
  from tinygrad.tensor.core import Tensor

def device_kind(d:str) -> str: return d.split(":", 1)[0]

def canon_devices(devices) -> tuple[str, ...]:
  """devices (a tuple or list of names) canonicalized; ValueError when they are not all of one kind (a shard set is one backend)."""
  if isinstance(devices, str) or not isinstance(devices, (tuple, list)) or not devices:
    raise ValueError(f"shard needs a tuple of device names, got {devices!r}")
  canon = tuple(canonicalize_device(d) for d in devices)
  if len({device_kind(d) for d in canon}) > 1:
    raise ValueError(f"can't shard over devices of different kinds {canon}: every device of a shard set must be of one kind")
  return canon

def on_devices(t:Tensor, u:UOp, device) -> Tensor:
  """A tensor of u on device (a name or a tuple), keeping t's requires_grad (as Tensor.to does)."""
  ret = type(t).__new__(type(t))
  ret.uop, ret._device, ret.requires_grad, ret.grad, ret.is_param = u, device, t.requires_grad, None, t.is_param
  track(ret)
  return ret

class MultiMixin:
  __slots__ = ()
  def shard(self:Tensor, devices:tuple[str, ...], axis:int|None=None) -> Tensor:  # type: ignore[misc]
    """This tensor split over devices along axis (None: a copy on each device). Sizes need not divide: 10 rows over 3 devices are 4, 3
    and 3 rows (tinygrad 0.14 refuses uneven shards)."""
    if isinstance(self.device, tuple): raise RuntimeError("can't shard a multi-device tensor")
    devices = canon_devices(devices)
    if len(devices) == 1: return self.to(devices[0])
    ax = None if axis is None else self._norm_axis(axis)
    src = disk.contiguous_view(self.uop, self.device, type(self)) if disk.is_disk(self.device) else self.uop
    ret = on_devices(self, shard_uop(src, self.device, devices, ax), devices)
    if self.grad is not None: ret.grad = self.grad.shard(devices, ax)
    return ret
  def shard_(self:Tensor, devices:tuple[str, ...], axis:int|None=None) -> Tensor:  # type: ignore[misc]
    """Shards this tensor in place."""
    return self.replace(self.shard(devices, axis))
  def shard_like(self:Tensor, y:Tensor) -> Tensor:  # type: ignore[misc]
    """This tensor on y's devices, sharded as y is."""
    if isinstance(y.device, str): return self.to(y.device)
    axis = sharding_axis(y.uop)
    if isinstance(self.device, tuple):
      if self.device == y.device and sharding_axis(self.uop) == axis: return self
      return self.to(self.device[0]).shard(y.device, axis)
    return self.shard(y.device, axis)

def to_devices(t:Tensor, devices:tuple[str, ...]) -> Tensor:
  """Tensor.to with a tuple of devices: a copy on each (a sharded tensor on other devices is gathered first)."""
  if isinstance(t.device, tuple):
    if t.device == devices: return t
    t = t.to(t.device[0])
  return t.shard(devices)

def empty_on(cls, shape, devices:tuple[str, ...], dtype) -> Tensor:
  """Tensor.empty on several devices: an uninitialized buffer of the whole shape on each."""
  shards = [cls.empty(*shape, device=d, dtype=dtype) for d in devices]
  return on_devices(shards[0], mstack([s.uop for s in shards], None), devices)

def assign_shards(t:Tensor, x:Tensor) -> Tensor:
  """Tensor.assign into a sharded tensor: each shard writes its part of x (resharded like t) in place."""
  target, value = lower_uop(t.uop), lower_uop(x.uop)
  if target.op is not Ops.MSTACK: raise RuntimeError(f"assign to a sharded tensor of shape {t.shape} needs its shards")
  shards = []
  for s, v, d in zip(target.src, reshard(value, target), t.device):
    ts = type(t)(s, device=d)
    ts._assign(type(t)(v, device=d), share=None)
    shards.append(ts.uop)
  t.uop = mstack(shards, target.arg)
  return t
