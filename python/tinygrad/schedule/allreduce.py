"""All-reduce between devices, which the scheduler orders like any other kernels and copies.

  all_reduce(op, xs)  xs: one value per device (same shape and dtype, each on its own device); returns one value per device, each the
                      reduction (op: ADD, MAX or MUL) of all of xs, and every device's result has the same bits

Where the devices' kind has a collective of its own (Compiled.has_all_reduce: NCCL on CUDA; NULL with NULL_ALLREDUCE=1), the result
is one node, MSELECT(ALLREDUCE(*xs, arg=op), i) being device i's value, and one schedule item calls the collective (schedule_collectives,
below). Otherwise it is a graph of copies and elementwise ops, in one of two variants chosen by size (tinygrad 0.14's RING: 0 never
ring, 1 from RING_ALLREDUCE_THRESHOLD elements on more than two devices, 2 always ring):
  tree  the values are combined pairwise up a binary tree onto the first device, which sends the result back down: 2 log2(n) rounds of
        whole-value copies; for small values, where the number of rounds matters more than the bytes
  ring  the flat value is cut into n chunks; n-1 rounds pass each chunk along the ring, each device adding its own part (reduce-scatter),
        then n-1 rounds pass the finished chunks along (all-gather): each device sends 2(n-1)/n of the value in all, whatever n
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Callable
from tinygrad.uop.ops import UOp, UPat, Ops, PatternMatcher, graph_rewrite
from tinygrad.uop.call import substitute_outside_calls
from tinygrad.dtype import DType, dtypes
from tinygrad.device import Device
from tinygrad.helpers import prod, RING, RING_ALLREDUCE_THRESHOLD
from tinygrad.schedule.item import ScheduleItem
from tinygrad.schedule.buffers import new_buffer, buffer_of, buffer_view, realized_view
from tinygrad.schedule.call import pm_skip_realized

def copy_to(x:UOp, device:str) -> UOp:
  """x (a value on one device) on `device` (x itself when it is there already)."""
  return x if x.device == device else UOp(Ops.COPY, x.dtype, (x,), (x.device, device))

def combine(op:Ops, a:UOp, b:UOp) -> UOp: return a.alu(op, b)

def join(pieces:list[UOp], axis:int) -> UOp:
  """Values on one device joined along axis (zero padding and adds: the pieces are disjoint, so an add only ever meets the padding);
  empty pieces are left out."""
  pieces = [p for p in pieces if p.shape[axis]]
  assert pieces, "join of empty pieces only"
  fill = -0.0 if dtypes.is_float(pieces[0].dtype) else 0   # -0.0 is the exact identity of +: a -0.0 element stays -0.0
  total, off, ret = sum(p.shape[axis] for p in pieces), 0, None
  for p in pieces:
    q = p.pad(tuple((off, total - off - p.shape[axis]) if i == axis else None for i in range(len(p.shape))), value=fill)
    ret = q if ret is None else ret + q
    off += p.shape[axis]
  return ret  # type: ignore[return-value]

def split_sizes(n:int, parts:int) -> list[int]:
  """n split into `parts` sizes as even as they can be, the larger ones first (10 into 3: 4, 3, 3)."""
  return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]

def tree_all_reduce(op:Ops, xs:list[UOp]) -> list[UOp]:
  devices = [x.device for x in xs]
  vals = list(xs)
  step = 1
  while step < len(vals):
    for i in range(0, len(vals) - step, 2 * step): vals[i] = combine(op, vals[i], copy_to(vals[i + step], devices[i]))
    step *= 2
  # the result goes back down the same tree: each device copies it from its parent, so every device holds the first device's bits
  out: list[UOp|None] = [None] * len(xs)
  out[0] = vals[0]
  while step > 1:
    step //= 2
    for i in range(0, len(vals) - step, 2 * step): out[i + step] = copy_to(out[i], devices[i + step])  # type: ignore[arg-type]
  return out  # type: ignore[return-value]

def ring_all_reduce(op:Ops, xs:list[UOp]) -> list[UOp]:
  n, devices, shape = len(xs), [x.device for x in xs], xs[0].shape
  sizes = split_sizes(prod(shape), n)
  bounds = [(sum(sizes[:c]), sum(sizes[:c + 1])) for c in range(n)]
  flat = [x.reshape((prod(shape),)) for x in xs]
  # acc[i][c]: device i's partial of chunk c
  acc = [[f.shrink((b,)) for b in bounds] for f in flat]
  for s in range(n - 1):
    sent = [(i, (i - s) % n, acc[i][(i - s) % n]) for i in range(n)]
    for i, c, part in sent:
      j = (i + 1) % n
      acc[j][c] = combine(op, acc[j][c], copy_to(part, devices[j]))
  # device i now holds chunk (i + 1) % n complete; the all-gather passes the finished chunks on around the ring
  done: list[list[UOp|None]] = [[None] * n for _ in range(n)]
  for i in range(n): done[i][(i + 1) % n] = acc[i][(i + 1) % n]
  for s in range(n - 1):
    for i in range(n):
      c, j = (i + 1 - s) % n, (i + 1) % n
      done[j][c] = copy_to(done[i][c], devices[j])  # type: ignore[arg-type]
  return [join(row, 0).reshape(shape) for row in done]  # type: ignore[arg-type]

def all_reduce(op:Ops, xs:list[UOp]) -> list[UOp]:
  """One reduced value per device (see the module docstring)."""
  if op not in (Ops.ADD, Ops.MAX, Ops.MUL): raise NotImplementedError(f"all-reduce of {op} (ADD, MAX and MUL are supported)")
  if len(xs) == 1: return list(xs)
  if has_collective(devices := tuple(x.device for x in xs), xs[0].dtype) and all(isinstance(d, int) for d in xs[0].shape):
    _collectives[0] = True
    ar = UOp(Ops.ALLREDUCE, xs[0].dtype, tuple(xs), op)
    return [UOp(Ops.MSELECT, ar.dtype, (ar,), i) for i in range(len(devices))]
  n = prod(xs[0].shape)
  # two devices: the tree is one copy each way, the ring two half copies each way plus the cuts and joins
  use_ring = RING.value >= 2 or (RING.value == 1 and len(xs) > 2 and n >= RING_ALLREDUCE_THRESHOLD.value)
  return ring_all_reduce(op, xs) if use_ring and n >= len(xs) else tree_all_reduce(op, xs)

# ***** a device collective *****

def has_collective(devices:tuple[str, ...], dtype:DType) -> bool:
  """Whether values of dtype on devices (distinct, all of one kind) all-reduce through their kind's collective (Compiled.has_all_reduce)."""
  if len(set(devices)) != len(devices) or len({d.split(":")[0] for d in devices}) != 1: return False
  return Device.get_class(devices[0]).has_all_reduce(devices, dtype)

# whether this process built a collective node: until it does, no graph has one and scheduling skips looking for them
_collectives = [False]

@dataclass(frozen=True)
class AllReduceInfo:
  """The arg of a collective's schedule item, ALLREDUCE(arg=AllReduceInfo) with bufs [*outputs, *inputs], one of each per device."""
  name: str
  op: Ops

# a reshape of a collective's result (ctx: its buffers, seen with the reduced shape as its MSELECT was) is a view of its buffer, which
# the rest of the graph then reads as it is, with no kernel copying it
pm_collapse_views = PatternMatcher([
  (UPat(Ops.RESHAPE, src=(UPat(Ops.RESHAPE, src=(UPat(Ops.BUFFER, name="b"),)),), name="r"),
   lambda ctx, r, b: buffer_view(b, r.shape) if b in ctx else None),
])

Schedule = Callable[[list[UOp], list[str]], tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]]

def schedule_collectives(targets:list[UOp], devices:list[str], schedule:Schedule) \
    -> tuple[list[ScheduleItem], list[UOp], dict[UOp, UOp], dict[str, int]]:
  """(the items that compute the inputs of the collectives in targets' graph and run the collectives, in run order; targets with each
  collective's results replaced by their buffers; {node: BUFFER} for what those items computed; the bound Variables' values).
  `schedule` schedules targets on one device each (create_schedule_with_vars' own scheduler). As schedule/call.py does for a call,
  each collective's inputs are a schedule of their own, the collective reads their buffers into buffers of its own, and the rest of the
  graph reads those."""
  if not _collectives[0]: return [], targets, {}, {}
  sink = UOp(Ops.SINK, dtypes.void, tuple(targets))
  items: list[ScheduleItem] = []
  ret: dict[UOp, UOp] = {}
  var_vals: dict[str, int] = {}
  # innermost first: the first collective in toposort has none below it
  while (ar := next((u for u in sink.toposort(gate=lambda u: realized_view(u) is None) if u.op is Ops.ALLREDUCE), None)) is not None:
    xs, devs = list(ar.src), list(ar.device)
    sub, sret, vals = schedule(xs, devs)
    items.extend(sub)
    var_vals.update(vals)
    ret.update(sret)
    n = prod(ar.shape)
    outs = [new_buffer(d, n, ar.dtype) for d in devs]
    ins = [sret[x] for x in xs]
    info = AllReduceInfo(f"allreduce {ar.arg.name.lower()} {n * ar.dtype.itemsize:8d}, {len(devs)} {devs[0].split(':')[0]}", ar.arg)
    items.append(ScheduleItem(UOp(Ops.ALLREDUCE, ar.dtype, (), info), [buffer_of(b) for b in outs + ins], [], outs + ins))
    done = {u: buffer_view(b, u.shape) for u, b in sret.items() if u.shape is not None}
    done.update({UOp(Ops.MSELECT, ar.dtype, (ar,), i): buffer_view(b, ar.shape) for i, b in enumerate(outs)})
    sink = graph_rewrite(substitute_outside_calls(sink, done), pm_collapse_views, ctx=set(outs), bpm=pm_skip_realized, name="collective results")
  return items, list(sink.src), ret, var_vals
