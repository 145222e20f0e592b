# The schedule cache: a graph scheduled before (same structure, same realized nodes, same buffer shapes) reuses its kernel ASTs with
# this call's buffers. Results must be those of a fresh schedule.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context, GlobalCounters
import tinygrad.schedule as sched

DEVICES = [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"]

def _graph(a:Tensor, b:Tensor) -> Tensor: return (a @ b).maximum(0) + a.sum(axis=0)

@pytest.mark.parametrize("dev", DEVICES)
def test_a_repeated_graph_hits_and_uses_this_calls_buffers(dev):
  rng = np.random.default_rng(7)
  arrays = [rng.standard_normal((5, 5), dtype=np.float32) for _ in range(4)]
  ta = [Tensor(x, device=dev).realize() for x in arrays]
  out0 = _graph(ta[0], ta[1])
  items0, _ = out0.schedule()
  out0.realize()
  n = len(sched.schedule_cache)
  for i, j in ((1, 2), (3, 0), (2, 1)):
    out = _graph(ta[i], ta[j])
    items, bufs = out.schedule()
    assert len(sched.schedule_cache) == n                      # a hit: nothing new cached
    assert [si.ast for si in items] == [si.ast for si in items0]   # the same kernels
    assert all(si.outputs for si in items)                      # the tensor-graph nodes are mapped back to this call's graph
    GlobalCounters.reset()
    out.realize()
    assert GlobalCounters.kernel_count == len(items)
    ref = np.maximum(arrays[i] @ arrays[j], 0) + arrays[i].sum(axis=0)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
  # one buffer in both places is another graph (one input, not two): its own schedule, same result
  np.testing.assert_allclose(_graph(ta[2], ta[2]).numpy(), np.maximum(arrays[2] @ arrays[2], 0) + arrays[2].sum(axis=0), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("dev", DEVICES)
def test_realized_nodes_and_shapes_are_part_of_the_key(dev):
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=dev).realize()
  a = x + 1
  np.testing.assert_array_equal(((x + 1) * 2).numpy(), (np.arange(12).reshape(3, 4) + 1) * 2)
  a.realize()                                                   # now x + 1 is a buffer: (x + 1) * 2 reads it
  GlobalCounters.reset()
  np.testing.assert_array_equal(((x + 1) * 2).numpy(), (np.arange(12).reshape(3, 4) + 1) * 2)
  assert GlobalCounters.kernel_count == 1
  y = Tensor(np.arange(12, dtype=np.int32).reshape(4, 3), device=dev).realize()   # other shape and dtype: its own schedule
  np.testing.assert_array_equal(((y + 1) * 2).numpy(), (np.arange(12).reshape(4, 3) + 1) * 2)
  assert ((y + 1) * 2).dtype is dtypes.int32

@pytest.mark.parametrize("dev", DEVICES)
def test_random_numbers_are_not_reused(dev):
  Tensor.manual_seed(11)
  first = Tensor.rand(64, device=dev).numpy()
  second = Tensor.rand(64, device=dev).numpy()
  assert not np.array_equal(first, second)
  Tensor.manual_seed(11)
  np.testing.assert_array_equal(Tensor.rand(64, device=dev).numpy(), first)

def test_scache_zero_bypasses_the_cache():
  x = Tensor([1.0, 2.0, 3.0], device="PYTHON").realize()
  with Context(SCACHE=0):
    n = len(sched.schedule_cache)
    assert (x * 3.25 + 0.5).tolist() == [3.75, 7.0, 10.25]
    assert len(sched.schedule_cache) == n

def test_the_cache_holds_no_buffers():
  import gc
  import weakref
  x = Tensor(np.ones(4, np.float32), device="PYTHON").realize()
  buf = weakref.ref(x._buffer())
  (x * 5.5).realize()
  del x
  gc.collect()
  assert buf() is None                                          # the cached schedule did not keep the input alive

def test_the_cache_keeps_no_realized_graph_alive():
  import gc
  import weakref
  x = (Tensor.full((1000,), 3.0, device="PYTHON") * 2).contiguous()   # a graph without any input buffer
  x.realize()
  buf = weakref.ref(x._buffer())
  del x
  gc.collect()
  assert buf() is None

def test_each_thread_count_gets_its_own_plan():
  # a sum of stored values stays one kernel up to STREAM_CORES threads and splits into partial sums past it: a plan made under one
  # thread count must not be replayed under the other
  x = Tensor.empty(1 << 22, device="NULL")
  plans = {}
  for threads in (8, 1, 8, 1):
    with Context(NUM_CPU_THREADS=threads):
      items, _ = x.sum().schedule()
      with Context(SCACHE=0): fresh, _ = x.sum().schedule()
    assert [si.ast for si in items] == [si.ast for si in fresh], f"under NUM_CPU_THREADS={threads} the cache gave another plan"
    plans.setdefault(threads, len(items))
  assert plans[8] != plans[1], plans

def test_each_split_threshold_gets_its_own_plan():
  # REDUCEOP_SPLIT_THRESHOLD (schedule/knobs.py SPLIT_MIN) decides whether a big sum is split into partial sums: a plan made under one
  # threshold must not be replayed under another
  x = Tensor.empty(1 << 22, device="NULL")
  plans = {}
  for threshold in (1 << 20, 1 << 23, 1 << 20, 1 << 23):
    with Context(NUM_CPU_THREADS=8, REDUCEOP_SPLIT_THRESHOLD=threshold):
      items, _ = x.sum().schedule()
      with Context(SCACHE=0): fresh, _ = x.sum().schedule()
    assert [si.ast for si in items] == [si.ast for si in fresh], f"under REDUCEOP_SPLIT_THRESHOLD={threshold} the cache gave another plan"
    plans.setdefault(threshold, len(items))
  assert plans[1 << 20] > plans[1 << 23], plans

def test_every_setting_the_scheduler_reads_is_in_the_key():
  # the ContextVars the scheduler's modules import either change the plan (then they are in the cache key) or only check it / switch
  # the cache / print it (SPEC, SCACHE, DEBUG)
  import ast
  import importlib
  import pathlib
  import pkgutil
  from tinygrad import helpers
  # RING/RING_ALLREDUCE_THRESHOLD choose how a sharded graph is lowered (schedule/multi.py), before the key is made: they change the
  # graph that is keyed, not the plan of one
  neutral = {"SPEC", "SCACHE", "DEBUG", "RING", "RING_ALLREDUCE_THRESHOLD"}
  read = set()
  for path in (pathlib.Path(sched.__file__).parent).glob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ImportFrom) and node.module == "tinygrad.helpers":
        read |= {a.name for a in node.names if isinstance(getattr(helpers, a.name), helpers.ContextVar)}
      if isinstance(node, ast.Call) and ast.unparse(node.func) in ("getenv", "os.getenv", "os.environ.get"): read.add(ast.unparse(node))
  # and the knobs the environment may set (schedule/knobs.py: ContextVars defined in the scheduler's package)
  for m in pkgutil.iter_modules(sched.__path__):
    read |= {v.key for v in vars(importlib.import_module(f"tinygrad.schedule.{m.name}")).values() if isinstance(v, helpers.ContextVar)}
  assert read - neutral == {v.key for v in sched.PLAN_SETTINGS}, read

def test_debug1_says_hit_or_miss(capsys):
  # the same graph at another value of a bound Variable is a hit; DEBUG=1 prints which (schedules of more than one kernel)
  from tinygrad import Variable
  a = Tensor(np.arange(40, dtype=np.float32).reshape(8, 5)).realize()
  v = Variable("rows_dbg", 1, 8)
  def run(n:int) -> str:
    capsys.readouterr()
    with Context(DEBUG=1): (a[:v.bind(n)].sum(0) + a[:v.bind(n)].max()).realize()
    return capsys.readouterr().out
  assert "schedule cache miss" in run(3)
  assert "schedule cache hit" in (out := run(5)) and "miss" not in out
