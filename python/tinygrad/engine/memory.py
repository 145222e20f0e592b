"""The memory planner: buffers that live only inside a list of kernels share memory where their lifetimes do not overlap.

A buffer's lifetime is the span of items from the first to the last that uses it. The buffers the planner may move (plannable: base
buffers without options, not in `keep`, written by the first item that uses them, on a device whose allocator has views) are placed
at offsets of one arena per device so that two buffers whose lifetimes intersect get disjoint byte ranges; each is replaced by a
view of its arena (Buffer.view). The arena is one allocation, counted once in GlobalCounters.mem_used; the views count nothing.

  memory_planner(items, keep) -> {buffer: its view of an arena}   items: anything with `.bufs` (ScheduleItems, the JIT's captured
                                                                 list), in run order; keep: every buffer that is observable outside
                                                                 the items (inputs, outputs, assign targets, what a Tensor holds)
  plan_offsets(lifetimes)     -> (offsets, arena size)            the placement alone, for (first, last, nbytes) triples
  plan_schedule(items, keep)  -> items                            memory_planner applied to the items' bufs (Tensor.realize)

A buffer read before its first write holds data from before the items, so it is never planned even when `keep` misses it. Runs are
synchronous (each item finishes before the next starts), so a copy needs no lane of its own. NO_MEMORY_PLANNER=1 turns planning off.
"""
from __future__ import annotations
import functools
from typing import Protocol, Sequence
from tinygrad.device import Buffer, Device
from tinygrad.dtype import dtypes
from tinygrad.helpers import DEBUG, NO_MEMORY_PLANNER, round_up

__all__ = ["memory_planner", "plan_offsets", "plan_schedule", "ARENA_ALIGN"]

# where a buffer may start in an arena: a cache line, more than any vector access of the renderers needs (their vector types are
# aligned to the element)
ARENA_ALIGN = 64

class HasBufs(Protocol):
  bufs: list

@functools.lru_cache(maxsize=4096)
def plan_offsets(lifetimes:tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, ...], int]:
  """Byte offsets for buffers given as (first item, last item, nbytes), and the arena size they need: two buffers whose item spans
  [first, last] intersect get disjoint byte ranges [offset, offset + nbytes). Greedy by size: the biggest buffer first, each at the
  lowest ARENA_ALIGN-aligned offset that fits between the buffers already placed that are live with it. Cached: a training loop plans
  the same schedule every step."""
  offsets = [0] * len(lifetimes)
  placed: list[int] = []
  for i in sorted(range(len(lifetimes)), key=lambda i: (-lifetimes[i][2], lifetimes[i][0], i)):
    first, last, nbytes = lifetimes[i]
    busy = sorted((offsets[j], offsets[j] + lifetimes[j][2]) for j in placed if lifetimes[j][0] <= last and first <= lifetimes[j][1])
    off = 0
    for start, end in busy:
      if off + nbytes <= start: break   # busy is sorted by start and off is past every earlier end: the gap before start fits
      off = max(off, round_up(end, ARENA_ALIGN))
    offsets[i] = off
    placed.append(i)
  return tuple(offsets), max((o + lt[2] for o, lt in zip(offsets, lifetimes)), default=0)

@functools.cache
def _has_views(device:str) -> bool:
  return Device[device].allocator.has_views

def memory_planner(items:Sequence[HasBufs], keep:set[Buffer]) -> dict[Buffer, Buffer]:
  """{planned buffer: the view of its device's arena that replaces it} for the buffers used only inside `items` (run in order):
  see the module docstring for which buffers are planned. Every buffer in `keep` stays where it is. A device whose plannable
  buffers can't share anything (fewer than two, or all live at once) gets no arena."""
  if NO_MEMORY_PLANNER: return {}
  first: dict[Buffer, int] = {}
  last: dict[Buffer, int] = {}
  fixed: set[Buffer] = set()   # read before written, or the base of a view the items use
  for i, si in enumerate(items):
    for slot, b in enumerate(si.bufs):
      if b is None: continue
      if b._base is not None:
        fixed.add(b._base)
        continue
      if b not in first:
        first[b] = i
        if slot != 0: fixed.add(b)   # slot 0 is the one output of a kernel (and a copy's destination)
      last[b] = i
  by_device: dict[str, list[tuple[Buffer, int]]] = {}
  for b in first:
    if b not in keep and b not in fixed and b.options is None and (nbytes := b.nbytes) and not b.allocated_views and _has_views(b.device):
      by_device.setdefault(b.device, []).append((b, nbytes))
  ret: dict[Buffer, Buffer] = {}
  for device, bufs in by_device.items():
    if len(bufs) < 2: continue
    offsets, size = plan_offsets(tuple((first[b], last[b], nbytes) for b, nbytes in bufs))
    if size >= (total := sum(nbytes for _, nbytes in bufs)): continue
    if DEBUG >= 2: print(f"memory planner: {len(bufs)} buffers on {device} share {size} bytes instead of {total}")
    arena = Buffer(device, size, dtypes.uint8)
    for (b, _), off in zip(bufs, offsets): ret[b] = arena.view(b.size, b.dtype, off)
  return ret

def plan_schedule(items:list, keep:set[Buffer]) -> list:
  """The items (a schedule about to run for the first time) with every planned buffer replaced by its arena view (memory_planner; the
  items' bufs lists are rewritten in place). A buffer already allocated holds data from before the schedule: it is kept too."""
  if plan := memory_planner(items, keep | {b for si in items for b in si.bufs if b is not None and b.is_allocated()}):
    for si in items: si.bufs = [plan.get(b, b) for b in si.bufs]
  return items
