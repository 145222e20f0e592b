# The memory planner's pure parts (tinygrad/engine/memory.py): the placement of lifetimes in an arena, and which buffers of a list
# of items get planned, on PYTHON buffers (nothing runs).
from dataclasses import dataclass
import numpy as np
from hypothesis import given, settings, strategies as st
from tinygrad.device import Buffer, BufferSpec
from tinygrad.dtype import dtypes
from tinygrad.engine.memory import plan_offsets, memory_planner, plan_schedule, ARENA_ALIGN
from tinygrad.helpers import Context, GlobalCounters

def live_bytes_peak(lifetimes) -> int:
  """The most bytes live at one item: no placement can use less."""
  return max((sum(n for f, l, n in lifetimes if f <= i <= l) for i in range(max(l for _, l, _ in lifetimes) + 1)), default=0)

def assert_valid(lifetimes, offsets, size):
  for i, (f1, l1, n1) in enumerate(lifetimes):
    assert offsets[i] % ARENA_ALIGN == 0 and offsets[i] + n1 <= size
    for j in range(i):
      f2, l2, n2 = lifetimes[j]
      if f1 <= l2 and f2 <= l1:   # live at once: their bytes must not meet
        assert offsets[i] + n1 <= offsets[j] or offsets[j] + n2 <= offsets[i], (lifetimes[i], offsets[i], lifetimes[j], offsets[j])

lifetime = st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(1, 600)).map(lambda t: (t[0], t[0] + t[1], t[2]))

@settings(max_examples=300, deadline=None)
@given(lts=st.lists(lifetime, min_size=1, max_size=16))
def test_plan_offsets_never_overlaps_live_buffers(lts):
  lts = tuple(lts)
  offsets, size = plan_offsets(lts)
  assert_valid(lts, offsets, size)
  # never worse than no sharing (with the alignment padding), never better than the bytes live at once
  assert live_bytes_peak(lts) <= size <= sum(-(-n // ARENA_ALIGN) * ARENA_ALIGN for _, _, n in lts)

def test_plan_offsets_shares_disjoint_lifetimes():
  # a chain a -> b -> c -> d: each buffer lives two items; a and c, b and d can share
  lts = ((0, 1, 1000), (1, 2, 1000), (2, 3, 1000), (3, 4, 1000))
  offsets, size = plan_offsets(lts)
  assert size == 1024 + 1000 and offsets[0] == offsets[2] and offsets[1] == offsets[3] != offsets[0]
  # all live at once: side by side
  offsets, size = plan_offsets(((0, 3, 100), (1, 3, 100), (2, 3, 100)))
  assert sorted(offsets) == [0, 64 * 2, 64 * 4] and size == 64 * 4 + 100
  assert plan_offsets(()) == ((), 0)

def test_plan_offsets_fills_gaps():
  # the big buffer goes first at 0; the small ones live with it only partly and reuse the space left by each other
  lts = ((0, 9, 4096), (0, 2, 256), (3, 5, 256), (6, 9, 256))
  offsets, size = plan_offsets(lts)
  assert offsets[0] == 0 and offsets[1] == offsets[2] == offsets[3] == 4096 and size == 4096 + 256

@dataclass
class Item:
  bufs: list

def bufs(n, size=16, device="PYTHON", **kw): return [Buffer(device, size, dtypes.float32, **kw) for _ in range(n)]

def test_planner_chain_and_keep():
  x, a, b, c, out = bufs(5)
  items = [Item([a, x]), Item([b, a]), Item([c, b]), Item([out, c])]
  plan = memory_planner(items, keep={x, out})
  assert set(plan) == {a, b, c} and x not in plan and out not in plan
  arena = plan[a].base
  assert all(v.base is arena and v._base is arena for v in plan.values()) and arena.nbytes < 3 * a.nbytes
  assert plan[a].offset == plan[c].offset != plan[b].offset   # a and c never live at once
  assert all(v.size == 16 and v.dtype is dtypes.float32 for v in plan.values())
  assert memory_planner(items, keep={x, out, a, b, c}) == {}

def test_planner_leaves_inputs_views_and_options():
  x, a, b, c, d, out = bufs(6)
  spec, = bufs(1, options=BufferSpec(host=True))
  v = d.view(2, dtypes.float32, 0)
  # x is read before any write (an input even without keep); d is the base of a view in the items; spec has options
  items = [Item([a, x]), Item([spec, a]), Item([b, spec, v]), Item([c, b]), Item([out, c, x])]
  plan = memory_planner(items, keep=set())
  assert x not in plan and d not in plan and v not in plan and spec not in plan
  assert set(plan) == {a, b, c, out}   # out is not in keep here: a caller that forgets keep loses its outputs
  with Context(NO_MEMORY_PLANNER=1): assert memory_planner(items, keep=set()) == {}

def test_planner_per_device_and_nothing_to_share():
  a, b = bufs(2)
  # both live at once: no arena (nothing saved), and a single buffer is never planned
  assert memory_planner([Item([a]), Item([b, a])], keep=set()) == {}
  assert memory_planner([Item([a])], keep=set()) == {}
  p1, p2, p3 = bufs(3)
  n1, n2, n3 = bufs(3, device="NULL")
  plan = memory_planner([Item([p1]), Item([n1]), Item([p2, p1]), Item([n2, n1]), Item([p3, p2]), Item([n3, n2])], keep=set())
  assert plan[p1].base is plan[p3].base is not plan[n1].base and plan[n1].device == "NULL" and plan[p1].device == "PYTHON"

def test_plan_schedule_and_memory_accounting():
  x, a, b, c, out = bufs(5, size=1024)
  items = [Item([a, x]), Item([b, a]), Item([c, b]), Item([out, c])]
  plan_schedule(items, keep={x, out})
  views = [items[0].bufs[0], items[1].bufs[0], items[2].bufs[0]]
  assert items[1].bufs[1] is views[0] and items[3].bufs == [out, views[2]] and all(v._base is not None for v in views)
  GlobalCounters.reset()
  before = GlobalCounters.mem_used
  for v in views: v.ensure_allocated()   # the views allocate their arena once
  arena = views[0].base
  assert GlobalCounters.mem_used - before == arena.nbytes == 2 * 4096   # a and c at 0, b after them
  assert GlobalCounters.max_mem_used == GlobalCounters.mem_used
  views[0].copyin(np.full(1024, 7, np.float32).data)
  np.testing.assert_array_equal(views[2].numpy(), np.full(1024, 7, np.float32))   # a and c share their bytes
  del views, items, arena, v
  assert GlobalCounters.mem_used == before and GlobalCounters.max_mem_used == before + 1024 * 4 * 2

def test_max_mem_used_is_a_peak():
  GlobalCounters.reset()
  start = GlobalCounters.mem_used
  a = Buffer("PYTHON", 100, dtypes.uint8).ensure_allocated()
  b = Buffer("PYTHON", 50, dtypes.uint8).ensure_allocated()
  del a, b
  assert GlobalCounters.mem_used == start and GlobalCounters.max_mem_used == start + 150
  GlobalCounters.reset()
  assert GlobalCounters.max_mem_used == start

def test_empty_buffers_are_not_planned():
  a, b, c = [Buffer("PYTHON", 0, dtypes.uint8) for _ in range(3)]
  assert memory_planner([Item([a]), Item([b, a]), Item([c, b])], keep=set()) == {}

def test_plan_schedule_keeps_allocated_buffers():
  # b is written first here but already holds memory (data from before the schedule): memory_planner alone would move it, a schedule
  # run by Tensor.realize keeps it
  x, a, b, c, out = bufs(5)
  b.ensure_allocated()
  items = [Item([a, x]), Item([b, a]), Item([c, b]), Item([out, c])]
  assert b in memory_planner(items, keep={x, out})
  plan_schedule(items, keep={x, out})
  assert items[1].bufs[0] is b and items[2].bufs[1] is b and items[0].bufs[0] is not a and items[0].bufs[0].offset == items[2].bufs[0].offset
