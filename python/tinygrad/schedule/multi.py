"""Tensors on several devices (Tensor.shard): the tensor graph says what to compute on the whole (logical) tensor, and this pass says
which device computes which part, before the scheduler cuts kernels.

A sharded value is MSTACK(*shards, arg=axis): shard i lives on device i (its own graph, on that device alone), and the logical tensor is
the shards joined along `axis` (sizes may differ: 10 rows over 3 devices are 4, 3, 3; a shard may be empty), or, with axis None, each
shard is the whole tensor (a copy per device). Its device is the tuple of the shards' devices; its shape the logical one.

Tensor operations build the logical graph over MSTACKs (autograd differentiates that graph, so a gradient is the gradient of the whole
tensor). `lower_multi` rewrites it with `pm_multi`, one rule per op, from the sources up, into MSTACKs of per-device graphs:
  elementwise    per shard, once the sources share one sharding (a copy per device is cut to each shard's part; a source sharded
                 another way is gathered first)
  movement       per shard where the sharded axis survives (reshape keeps a shard's elements together, shrink and pad cut or grow the
                 edge shards); otherwise the value is gathered (all-gather: every device gets the whole) and moved on each device
  reduce         per shard; over the sharded axis the partial results are all-reduced (schedule/allreduce.py), a copy per device
  copy           to one device: the shards copied there and joined; from one device to several: a copy per device
The nodes outside the MSTACKs are on one device or on none (constants), so the scheduler schedules each shard as it would a tensor.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, Ops, GroupOp, PatternMatcher, UPat
from tinygrad.helpers import prod
from tinygrad.dtype import dtypes
from tinygrad.schedule.allreduce import all_reduce, copy_to, join, split_sizes

__all__ = ["mstack", "shard_uop", "lower_multi", "lower_uop", "sharding_axis", "reshard", "split_sizes", "pm_multi", "any_sharded"]

# whether this process made a sharded value: until it does, no graph has one and scheduling skips this pass
_sharded = [False]
def any_sharded() -> bool: return _sharded[0]

def mstack(shards:list[UOp]|tuple[UOp, ...], axis:int|None) -> UOp:
  _sharded[0] = True
  return UOp(Ops.MSTACK, shards[0].dtype, tuple(shards), axis)

def shard_bounds(ms:UOp) -> list[tuple[int, int]]:
  """(start, end) of each shard along the sharded axis."""
  out, off = [], 0
  for s in ms.src:
    out.append((off, off + s.shape[ms.arg]))
    off += s.shape[ms.arg]
  return out

def _cut(x:UOp, axis:int, b:tuple[int, int]) -> UOp:
  return x.shrink(tuple(b if i == axis else None for i in range(len(x.shape))))

def shard_uop(x:UOp, src_device:str|None, devices:tuple[str, ...], axis:int|None) -> UOp:
  """x (on src_device, or on none: a constant) split over devices along axis (None: a copy on each)."""
  def put(v:UOp, d:str) -> UOp: return v if src_device is None or src_device == d else UOp(Ops.COPY, v.dtype, (v,), (src_device, d))
  if axis is None: return mstack([put(x, d) for d in devices], None)
  sizes = split_sizes(x.shape[axis], len(devices))
  return mstack([put(_cut(x, axis, (sum(sizes[:i]), sum(sizes[:i + 1]))), d) for i, d in enumerate(devices)], axis)

# ***** changing a sharded value's sharding *****

def gather(ms:UOp) -> UOp:
  """The whole value on every device (an all-gather), as MSTACK(axis=None)."""
  if ms.arg is None: return ms
  live = [s for s in ms.src if s.shape[ms.arg]]
  return mstack([join([copy_to(s, d) for s in live], ms.arg) for d in ms.device], None)

def reshard(x:UOp, like:UOp) -> list[UOp]:
  """x (a sharded value on like's devices, or a value on no device) as per-device shards of like's sharding."""
  if x.op is Ops.MSTACK:
    if x.device != like.device: raise RuntimeError(f"sharded tensors on different devices meet: {x.device} and {like.device}")
    if x.arg == like.arg and all(a.shape == b.shape for a, b in zip(x.src, like.src)): return list(x.src)
    whole = list(gather(x).src)
  else: whole = [x] * len(like.src)
  if like.arg is None: return whole
  return [_cut(w, like.arg, b) for w, b in zip(whole, shard_bounds(like))]

# ***** the rules *****

def _elementwise(root:UOp) -> UOp|None:
  multis = [s for s in root.src if s.op is Ops.MSTACK]
  if not multis: return None
  # the sharding of the result: the first source sharded along an axis, else a copy per device
  like = next((m for m in multis if m.arg is not None), multis[0])
  per = [reshard(s, like) for s in root.src]
  return mstack([root.replace(src=tuple(p[i] for p in per)) for i in range(len(like.src))], like.arg)

def _per_shard(ms:UOp, fn) -> list[UOp]: return [fn(s) for s in ms.src]

def _reduce(root:UOp, ms:UOp) -> UOp:
  op, axes = root.arg
  # a reduce over axes of size 1 is its source (a shard of one row sends that row to the all-reduce as it is, with no kernel to copy it)
  local = _per_shard(ms, lambda s: s if all(s.shape[a] == 1 for a in axes) else s._rop(op, axes))
  if ms.arg is None or ms.arg not in axes: return mstack(local, ms.arg)
  # partial results of an empty shard are the op's identity (a reduce over nothing), so every shard takes part
  return mstack(all_reduce(op, local), None)

def _reshape(root:UOp, ms:UOp) -> UOp:
  if ms.arg is None: return mstack(_per_shard(ms, lambda s: s.reshape(root.arg)), None)
  old, new, ax = ms.shape, root.arg, ms.arg
  if all(isinstance(s, int) for s in old + tuple(new)):
    outer, inner = prod(old[:ax]), prod(old[ax + 1:])
    # the new axis that splits the same way: the same elements before it, and each shard's elements a whole number of its rows
    for k in range(len(new)):
      if prod(new[:k]) != outer or new[k] == 1 and k + 1 < len(new) and prod(new[:k + 1]) == outer: continue
      rest = prod(new[k + 1:])
      sizes = [s.shape[ax] * inner for s in ms.src]
      if rest and all(n % rest == 0 for n in sizes) and sum(n // rest for n in sizes) == new[k]:
        return mstack([s.reshape(tuple(n // rest if i == k else d for i, d in enumerate(new))) for s, n in zip(ms.src, sizes)], k)
      break
  return mstack(_per_shard(gather(ms), lambda s: s.reshape(new)), None)

def _expand(root:UOp, ms:UOp) -> UOp:
  if ms.arg is not None and root.arg[ms.arg] != ms.shape[ms.arg]:
    return mstack(_per_shard(gather(ms), lambda s: s.expand(root.arg)), None)
  return mstack([s.expand(tuple(s.shape[i] if i == ms.arg else d for i, d in enumerate(root.arg))) for s in ms.src], ms.arg)

def _permute(root:UOp, ms:UOp) -> UOp:
  return mstack(_per_shard(ms, lambda s: s.permute(root.arg)), None if ms.arg is None else root.arg.index(ms.arg))

def _pad(root:UOp, ms:UOp) -> UOp:
  if ms.arg is None: return mstack(_per_shard(ms, lambda s: s._mop(Ops.PAD, root.arg)), None)
  ax, (before, after), n = ms.arg, root.arg[ms.arg], len(ms.src)
  return mstack([s._mop(Ops.PAD, tuple(((before if i == 0 else 0), (after if i == n - 1 else 0)) if d == ax else p
                                       for d, p in enumerate(root.arg))) for i, s in enumerate(ms.src)], ax)

def _shrink(root:UOp, ms:UOp) -> UOp:
  if ms.arg is None: return mstack(_per_shard(ms, lambda s: s._mop(Ops.SHRINK, root.arg)), None)
  ax, (start, end) = ms.arg, root.arg[ms.arg]
  if not isinstance(start, int) or not isinstance(end, int):
    return mstack(_per_shard(gather(ms), lambda s: s._mop(Ops.SHRINK, root.arg)), None)
  out = []
  for s, (lo, hi) in zip(ms.src, shard_bounds(ms)):
    a, b = min(max(start, lo), hi) - lo, max(min(end, hi), lo) - lo
    out.append(s._mop(Ops.SHRINK, tuple((a, max(a, b)) if d == ax else p for d, p in enumerate(root.arg))))
  return mstack(out, ax)

def _flip(root:UOp, ms:UOp) -> UOp:
  if ms.arg is not None and root.arg[ms.arg]: return mstack(_per_shard(gather(ms), lambda s: s._mop(Ops.FLIP, root.arg)), None)
  return mstack(_per_shard(ms, lambda s: s._mop(Ops.FLIP, root.arg)), ms.arg)

def _copy(root:UOp, ms:UOp) -> UOp:
  dst = root.arg[1]
  if isinstance(dst, tuple):
    if dst == ms.device: return ms
    root = UOp(Ops.COPY, ms.dtype, (ms,), (ms.device, dst[0]))
    return shard_uop(_copy(root, ms), dst[0], dst, None)
  if ms.arg is None: return copy_to(ms.src[0], dst)
  return join([copy_to(s, dst) for s in ms.src if s.shape[ms.arg]], ms.arg)

def _broadcast_copy(root:UOp, x:UOp) -> UOp|None:
  # a value on one device copied to several (Tensor.to(devices)): a copy on each
  if isinstance(root.arg[0], tuple) and x.op is not Ops.MSTACK: return x   # a value on no device (a constant) is on any device
  if not isinstance(root.arg[1], tuple) or x.op is Ops.MSTACK: return None
  return shard_uop(x, root.arg[0], root.arg[1], None)

def _unsupported(root:UOp) -> UOp|None:
  if any(s.op is Ops.MSTACK for s in root.src):
    raise NotImplementedError(f"{root.op} on a sharded tensor is not supported (devices {root.device})")
  return None

_ELEMENTWISE = tuple(GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH})
pm_multi = PatternMatcher([
  (UPat(_ELEMENTWISE, name="root", custom_early_reject={Ops.MSTACK}), _elementwise),
  (UPat(Ops.REDUCE, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _reduce),
  (UPat(Ops.RESHAPE, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _reshape),
  (UPat(Ops.EXPAND, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _expand),
  (UPat(Ops.PERMUTE, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _permute),
  (UPat(Ops.PAD, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _pad),
  (UPat(Ops.SHRINK, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _shrink),
  (UPat(Ops.FLIP, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _flip),
  (UPat(Ops.COPY, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), _copy),
  (UPat(Ops.COPY, src=(UPat.var("x"),), name="root"), _broadcast_copy),
  (UPat(Ops.MSELECT, src=(UPat(Ops.MSTACK, name="ms"),), name="root"), lambda root, ms: ms.src[root.arg]),
  # any other op meeting a sharded value
  (UPat(tuple(set(Ops) - {Ops.MSTACK, Ops.SINK}), name="root", custom_early_reject={Ops.MSTACK}), _unsupported),
])

# a node's lowering is kept in its own __dict__ (so it lives as long as the node): the scheduler's realized marks are on the lowered
# nodes, so a graph built before a realize (a loss read after the optimizer step that computed it) finds them again when it is lowered
# again; a node the lowering leaves as it is keeps _UNCHANGED, so a later lowering doesn't walk its graph again
_LOWERED = "_multi_lowered"
_UNCHANGED = object()

def _lowered_of(x:UOp) -> UOp: return x if (v := x.__dict__.get(_LOWERED)) is None or v is _UNCHANGED else v
def _not_lowered(x:UOp) -> bool: return _LOWERED not in x.__dict__

def lower_uop(u:UOp) -> UOp:
  """u with its sharded values lowered: an MSTACK of per-device graphs when u is on several devices."""
  # a walk applying pm_multi rather than graph_rewrite: it keeps the map from each node to its lowered node (_LOWERED above)
  if not _not_lowered(u): return _lowered_of(u)
  # (the walk does not enter a node lowered before, nor list it: its sources take its lowered node from its __dict__)
  for n in u.toposort(gate=_not_lowered):
    src = tuple(_lowered_of(x) for x in n.src)
    new = n if all(a is b for a, b in zip(src, n.src)) else n.replace(src=src)
    if (new.op is Ops.COPY or any(x.op is Ops.MSTACK for x in src)) and (r := pm_multi.rewrite(new)) is not None: new = r
    n.__dict__[_LOWERED] = _UNCHANGED if new is n else new
  return _lowered_of(u)

def sharding_axis(u:UOp) -> int|None:
  """The axis u (on several devices) is split along, None for a copy per device."""
  return (u if u.op is Ops.MSTACK else lower_uop(u)).arg if isinstance(u.device, tuple) else None

def lower_multi(targets:list[UOp], devices:list) -> tuple[list[UOp], list[str], list[tuple[int|None, list[int]]]]:
  """The per-device targets of targets on (possibly) several devices, their devices, and for each original target (its sharding
  axis, or None for one device or a copy per device; the indices of its per-device targets) to put the results back together."""
  lowered = lower_uop(UOp(Ops.SINK, dtypes.void, tuple(targets))).src
  out_t: list[UOp] = []
  out_d: list[str] = []
  groups: list[tuple[int|None, list[int]]] = []
  for t, low, d in zip(targets, lowered, devices):
    if not isinstance(d, tuple):
      groups.append((None, [len(out_t)]))
      out_t.append(low)
      out_d.append(d)
      continue
    if low.op is not Ops.MSTACK:
      # a value on no device (a constant expression) wanted on several: computed on the first, copied to the others
      low = mstack([low] + [UOp(Ops.COPY, low.dtype, (low,), (d[0], x)) for x in d[1:]], None)
    idx = []
    for s, sd in zip(low.src, d):
      idx.append(len(out_t))
      out_t.append(s)
      out_d.append(sd)
    groups.append((low.arg, idx))
  return out_t, out_d, groups
