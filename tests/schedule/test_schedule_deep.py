# Deep and large graphs schedule without RecursionError, in time linear in their size (issue 9, item 2). The scheduler is graph
# rewrites and loops over toposorts: no Python recursion, so the interpreter's recursion limit never applies.
import gc
import sys
import time
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, AxisType
from tests.helpers.kernels import kinds

def _chain(n:int, x:Tensor) -> Tensor:
  for _ in range(n): x = x * 1.0001 + 0.5
  return x

def _np_chain(n:int, x:np.ndarray) -> np.ndarray:
  for _ in range(n): x = x * np.float32(1.0001) + np.float32(0.5)
  return x

@pytest.fixture
def low_recursion_limit():
  # far below the depth of every graph here: any recursion over the graph would fail
  old = sys.getrecursionlimit()
  sys.setrecursionlimit(400)
  yield
  sys.setrecursionlimit(old)

def test_chain_10000_schedules_into_one_kernel(low_recursion_limit):
  items, _ = _chain(10_000, Tensor(np.ones(16, dtype=np.float32))).schedule()
  assert len(items) == 1 and kinds(items[0].ast) == [(AxisType.LOOP, 16)]
  assert sum(1 for u in items[0].ast.toposort() if u.op is Ops.MUL) == 10_000

@pytest.mark.cpu
def test_chain_10000_realizes_like_numpy():
  x = np.linspace(-1, 1, 3, dtype=np.float32)   # 3 elements: not upcast, the C stays one chain of 20,000 ops
  np.testing.assert_allclose(_chain(10_000, Tensor(x)).numpy(), _np_chain(10_000, x), rtol=1e-5)

def test_chain_200_realizes_on_python_device():
  # the report: 200 chained ops raised RecursionError on realize()
  x = np.arange(4, dtype=np.float32)
  np.testing.assert_allclose(_chain(200, Tensor(x, device="PYTHON")).numpy(), _np_chain(200, x), rtol=1e-6)

def _mlp(layers:int, width:int=8) -> tuple[Tensor, list[Tensor], list[Tensor]]:
  rng = np.random.default_rng(0)
  ws = [Tensor(rng.standard_normal((width, width), dtype=np.float32) * 0.3) for _ in range(layers)]
  x = Tensor(rng.standard_normal((2, width), dtype=np.float32))
  acts = [x]
  for w in ws: acts.append((acts[-1] @ w).relu())
  return acts[-1], acts, ws

def test_mlp_1000_layers_forward_and_backward_shaped(low_recursion_limit):
  out, acts, ws = _mlp(1000)
  # a backward-shaped graph by hand (no autograd yet): grad of sum(out) through each relu and matmul, and each weight's gradient
  grad, dws = Tensor.ones(*out.shape), []
  for a_in, a_out, w in zip(reversed(acts[:-1]), reversed(acts[1:]), reversed(ws)):
    grad = grad * (a_out > 0).cast(grad.dtype)
    dws.append(a_in.T @ grad)
    grad = grad @ w.T
  items, bufs = out.schedule()
  shapes = {tuple(kinds(si.ast)) for si in items}   # one matmul kernel per layer, all alike
  assert len(items) == 1000 and len(shapes) == 1 and any(k is AxisType.REDUCE for k, _ in next(iter(shapes)))
  items, bufs = dws[-1].schedule(grad.sum(), *dws[:3])
  kernels = [si for si in items if si.ast.op is Ops.SINK]
  assert len(kernels) >= 2000
  # run order: each kernel after the kernels that write what it reads
  written = {b for b in (si.buf_uops[0] for si in items)}
  seen = set()
  for si in items:
    assert all(b in seen or b not in written for b in si.buf_uops[1:])
    seen.add(si.buf_uops[0])

@pytest.mark.cpu
def test_mlp_deep_forward_realizes_like_numpy():
  out, acts, ws = _mlp(300)
  ref = acts[0].numpy()
  for w in ws: ref = np.maximum(ref @ w.numpy(), 0)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-6)

def test_graph_of_100000_nodes(low_recursion_limit):
  x = Tensor(np.arange(16, dtype=np.float32))
  for i in range(20_000):
    x = (x * 1.0001).reshape(4, 4).permute(1, 0).reshape(16) + 0.5
    if i % 2000 == 1999: x = x.contiguous()
  n = len(x.uop.toposort())
  assert n > 100_000
  items, _ = x.schedule()
  assert len(items) == 10

def _schedule_time(n:int, base:Tensor) -> float:
  x = _chain(n, base)
  # this thread's CPU time with the collector off: other processes and GC pauses (which grow with the heap) don't count
  gc.disable()
  try:
    st = time.thread_time()
    x.schedule()
    return time.thread_time() - st
  finally: gc.enable()

def test_schedule_time_is_linear():
  # the two sizes are timed alternately and each keeps its fastest run: other processes on the machine only ever add time, so the
  # minimum is the cost of the work itself and both sizes see the same conditions
  base = Tensor(np.ones((4, 4), dtype=np.float32))
  with Context(SCACHE=0):
    _schedule_time(50, base)   # warm-up
    small, big = [], []
    for _ in range(7):
      small.append(_schedule_time(200, base))
      big.append(_schedule_time(2000, base))
    ratio = min(big) / min(small)
  assert ratio < 15, f"scheduling 10x the ops took {ratio:.1f}x the time"
