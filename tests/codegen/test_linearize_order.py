# The linearizer's order keeps live ranges short (tinygrad/codegen/linearizer.py, codegen/liveness.py): peak live values of
# matmul and conv kernels under measured bounds, a reduce's loop before the values computed beside it, and linear time.
import gc
import time
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp, Ops, ParamArg, AxisType
from tinygrad.codegen import lower_ast, linearize
from tinygrad.codegen.liveness import live_intervals, peak_live
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opts

def P(slot, n=64): return UOp(Ops.PARAM, dtypes.float, (UOp.const(n, dtypes.int),), ParamArg(slot, dtypes.float))
def R(n, axis): return UOp(Ops.RANGE, dtypes.int, (UOp.const(n, dtypes.int),), (axis, AxisType.LOOP))
def END(body, r): return UOp(Ops.END, dtypes.void, (body, r))

def test_liveness_of_a_loop():
  out, a, r0, r1 = P(0), P(1), R(4, 0), R(4, 1)
  x = a.index(r0).load()                 # loaded in loop r0, used in every iteration of r1: live to r1's END
  y = a.index(r1).load()
  s = x + y
  st = out.index(r0 * 4 + r1).store(s)
  e1 = END(st, r1)
  uops = [UOp(Ops.SINK, dtypes.void, ()), out, a, r0, a.index(r0), x, r1, a.index(r1), y, s, out.index(r0 * 4 + r1), st, e1, END(e1, r0)]
  iv = live_intervals(uops)
  assert iv[x] == (5, 12) and iv[y] == (8, 9) and iv[s] == (9, 11)
  assert peak_live(uops) == 2

# fixed opts (not the heuristic's, which may change): 4x4 output lanes of a matmul, 4 channels by 2 columns of a conv
def matmul():
  return Tensor.empty(64, 64, device="PYTHON") @ Tensor.empty(64, 64, device="PYTHON"), [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4)]
def conv():
  return (Tensor.empty(1, 16, 14, 14, device="PYTHON").conv2d(Tensor.empty(16, 16, 3, 3, device="PYTHON"), padding=1),
          [Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UPCAST, 0, 4)])

# measured: the order before (sources in graph order) had 28 and 20; 16 accumulators need the 16 lanes of B live while each row of A
# is used, so the matmul is near its floor
@pytest.mark.parametrize("kernel,bound", [(matmul, 26), (conv, 18)])
def test_peak_live_values(kernel, bound):
  t, opts = kernel()
  items, _ = t.schedule()
  uops = lower_ast(apply_opts(items[-1].ast, opts)).uops
  assert peak_live(uops) <= bound

def test_reduce_runs_before_the_values_beside_it():
  # out = x*3 + sum(y): the reduce's loop comes first, so x*3 is not live across it
  x, y = Tensor.empty(8, 1, device="PYTHON"), Tensor.empty(8, 32, device="PYTHON")
  items, _ = (x * 3 + y.sum(axis=1, keepdim=True)).schedule()
  uops = lower_ast(items[-1].ast).uops
  red_end = max(i for i, u in enumerate(uops) if u.op is Ops.END and u.src[1].arg[-1] is AxisType.REDUCE)
  mul = next(i for i, u in enumerate(uops) if u.op is Ops.MUL and u.dtype is dtypes.float)
  assert mul > red_end

@pytest.mark.parametrize("device", DEVICES)
def test_reordered_kernels_compute_the_same(device):
  rng = np.random.default_rng(0)
  a, b, c = rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal((24, 8)).astype(np.float32), rng.standard_normal(16)
  ta, tb, tc = Tensor(a, device=device), Tensor(b, device=device), Tensor(c.astype(np.float32), device=device)
  got = ((ta @ tb).relu() * 2 + tc.reshape(16, 1) - ta.sum(axis=1, keepdim=True)).numpy()
  np.testing.assert_allclose(got, np.maximum(a @ b, 0) * 2 + c.reshape(16, 1).astype(np.float32) - a.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)

def _tree_kernel(n:int) -> UOp:
  # a loop storing a deep chain and a wide balanced sum of n loads each
  out, a, r = P(0), P(1), R(64, 0)
  v = a.index(r).load()
  for i in range(n): v = v * 1.5 + float(i)
  xs = [a.index(r + i % 7).load() * float(i) for i in range(n)]
  while len(xs) > 1: xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return UOp(Ops.SINK, dtypes.void, (END(out.index(r).store(v + xs[0]), r),))

def _linearize_time(n:int) -> float:
  sink = _tree_kernel(n)
  # this thread's CPU time with the collector off: other processes and GC pauses (which grow with the heap) don't count
  gc.disable()
  try:
    st = time.thread_time()
    linearize(sink)
    return time.thread_time() - st
  finally: gc.enable()

def test_linearize_time_is_linear():
  # fastest of a few alternating runs: other processes only ever add time
  small, big = [], []
  for _ in range(3):
    small.append(_linearize_time(500))
    big.append(_linearize_time(5000))
  assert (ratio := min(big) / min(small)) < 20, f"linearizing 10x the ops took {ratio:.1f}x the time"
