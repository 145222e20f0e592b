# Kernel optimizations as changes of typed ranges (tinygrad/codegen/opt/): the ranges of optimized ASTs, shift_to, names read off
# the ranges, and every optimization applied on its own and run on CPU and PYTHON against numpy.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.kernels import ast_of, kinds, run, rand
from tinygrad import Tensor, dtypes
from tinygrad.device import Device
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt import heuristic as opt
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, shift_to, ranges_of, kernel_name
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations

L, R, T, U, N = AxisType.LOOP, AxisType.REDUCE, AxisType.THREAD, AxisType.UPCAST, AxisType.UNROLL

def test_matmul_ranges():
  a, b = Tensor(rand(64, 64), device="PYTHON").realize(), Tensor(rand(64, 64, seed=1), device="PYTHON").realize()
  ast, _ = ast_of(a @ b)
  # the scheduler: a LOOP per output dim, the reduce of 64 as 16 REDUCE steps of an UNROLL of 4 (the names: kernel_name's own test,
  # the names are read off the ranges as tinygrad 0.14 spells them)
  assert kinds(ast) == [(L, 64), (L, 64), (R, 16), (N, 4)] and ast.arg.name == kernel_name(ast) == "r_64_64_16_4"
  opt = hand_coded_optimizations(ast, threads=4)
  # rows: 4 threads of 4 loop steps of 4 upcast rows; columns: 16 loop steps of 4 upcast columns
  assert kinds(opt) == [(T, 4), (L, 4), (U, 4), (L, 16), (U, 4), (R, 16), (N, 4)]
  assert kernel_name(opt) == "r_4_4_4_16_4_16_4"
  # an Opt's axis counts the ranges by kind first (tinygrad 0.14): after THREAD the loops come first, (L 16, L 64, T 4, R 16, N 4)
  assert opt.arg.applied_opts == (Opt(OptOps.THREAD, 0, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UPCAST, 0, 4))
  assert kinds(hand_coded_optimizations(ast, threads=1)) == [(L, 16), (U, 4), (L, 16), (U, 4), (R, 16), (N, 4)]

def test_small_reduce_unrolled_and_sum_axis0():
  x = Tensor(rand(3, 7), device="PYTHON").realize()
  assert kinds(hand_coded_optimizations(ast_of(x.max(axis=1))[0], 1)) == [(L, 3), (N, 7)]
  y = Tensor(rand(64, 64), device="PYTHON").realize()
  # x.sum(axis=0): the one output loop is upcast twice; the second split sits between the loop and the first one
  opt = hand_coded_optimizations(ast_of(y.sum(axis=0))[0], 1)
  assert kinds(opt) == [(L, 4), (U, 4), (U, 4), (R, 16), (N, 4)] and kernel_name(opt) == "r_4_4_4_16_4"
  # x.sum(axis=1): the lanes would read 4 rows, nothing becomes a vector load: no upcast
  assert kinds(hand_coded_optimizations(ast_of(y.sum(axis=1))[0], 1)) == [(L, 64), (R, 16), (N, 4)]

def _q8_gemv(device:str, rows:int, cols:int) -> tuple[Tensor, np.ndarray]:
  """x @ w.T with w stored as Q8_0-style blocks (a float16 scale, then 32 int8 values) decoded by Tensor ops, and its numpy value."""
  rng = np.random.default_rng(0)
  blocks = rng.integers(0, 256, size=(rows * cols // 32, 34), dtype=np.uint8)
  blocks[:, :2] = (rng.standard_normal((len(blocks), 1)) * 0.01).astype(np.float16).view(np.uint8)
  x = rand(1, cols)
  b = Tensor(blocks, device=device).realize()
  w = (b[:, 2:].bitcast(dtypes.int8).cast(dtypes.float32) * b[:, :2].bitcast(dtypes.float16).cast(dtypes.float32)).reshape(rows, cols)
  want = x @ (blocks[:, 2:].view(np.int8).astype(np.float32) * blocks[:, :2].view(np.float16).astype(np.float32)).reshape(rows, cols).T
  return Tensor(x, device=device).realize() @ w.T, want

@pytest.mark.parametrize("device", DEVICES)
def test_decoded_weight_sum_unrolls_a_vector_per_step(device):
  # a sum over values decoded from packed int8 bytes takes DECODE_UNROLL (16) elements per step, a float sum REDUCE_UNROLL (4): the 16
  # byte lanes are one vector load, the scale is decoded once per 16 elements, not once per 4
  out, want = _q8_gemv(device, 8, 256)
  ast, _ = ast_of(out)
  assert kinds(ast) == [(L, 8), (R, 16), (N, 16)]
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
  a, w = Tensor(rand(1, 256), device=device).realize(), Tensor(rand(8, 256, seed=1), device=device).realize()
  assert kinds(ast_of(a @ w.T)[0]) == [(L, 8), (R, 64), (N, 4)]

def test_shift_to():
  x = Tensor(rand(100), device="PYTHON").realize()
  ast, _ = ast_of(x + 1)
  (r,) = ranges_of(ast)
  ret, outer, inner = shift_to(ast, r, 4, U)
  assert kinds(ret) == [(L, 25), (U, 4)] and kernel_name(ret) == "E_25_4" and outer.arg == (r.arg[0], 0, L) and inner.arg == (r.arg[0], 1, U)
  ret, outer, inner = shift_to(ast, r, 5, T, top=True)
  assert kinds(ret) == [(T, 5), (L, 20)] and kernel_name(ret) == "E_5_20"
  ret, outer, inner = shift_to(ast, r, 100, U)   # the whole range: the outer part of size 1 is gone
  assert outer is None and kinds(ret) == [(U, 100)]
  with pytest.raises(ValueError, match="can't split range.*100 by 3"): shift_to(ast, r, 3, U)
  with pytest.raises(KernelOptError, match="the kernel has 0 reduce ranges"): apply_opt(ast, Opt(OptOps.UNROLL, 0, 4))
  with pytest.raises(KernelOptError, match="the kernel has 1 ranges"): apply_opt(ast, Opt(OptOps.UPCAST, 1, 4))
  # the index is r_outer*4 + r_inner: no RANGE r is left anywhere
  ret, _, _ = shift_to(ast, r, 4, U)
  assert r not in ret.toposort() and all(u.op is not Ops.RANGE or u.dtype is r.dtype for u in ret.toposort())

# every optimization on its own, on both devices (THREAD too: the PYTHON device runs the launches one after another)
CASES = [
  ("matmul", (OptOps.UPCAST, 1, 4)), ("matmul", (OptOps.UPCAST, 0, 4)), ("matmul", (OptOps.THREAD, 0, 4)), ("matmul", (OptOps.UNROLL, 0, 0)),
  ("matmul", (OptOps.UNROLL, 0, 2)), ("sum0", (OptOps.UPCAST, 0, 4)), ("sum0", (OptOps.UPCAST, 0, 16)), ("sum1", (OptOps.UPCAST, 0, 2)),
  ("sum1", (OptOps.THREAD, 0, 3)), ("elementwise", (OptOps.UPCAST, 1, 4)), ("elementwise", (OptOps.THREAD, 0, 2)),
  ("elementwise", (OptOps.UPCAST, 0, 8)),
]

def _program(name:str, device:str):
  a, b = rand(12, 16), rand(16, 8, seed=1)
  ta, tb = Tensor(a, device=device).realize(), Tensor(b, device=device).realize()
  if name == "matmul": return ta @ tb, a @ b
  if name == "sum0": return ta.sum(axis=0), a.sum(axis=0)
  if name == "sum1": return ta.sum(axis=1), a.sum(axis=1)
  return (ta * 2 + 1).T.contiguous(), (a * 2 + 1).T

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,o", CASES)
def test_each_opt_numerics(device, name, o):
  t, want = _program(name, device)
  ast, bufs = ast_of(t)
  ret = apply_opt(ast, Opt(*o))[0]
  assert ret.arg.applied_opts == (Opt(*o),) and ret.arg.name == kernel_name(ret)
  np.testing.assert_allclose(run(ret, bufs, device).reshape(want.shape), want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_all_heuristics_numerics(device, monkeypatch):
  monkeypatch.setattr(opt, "THREAD_MIN_WORK", 64)   # thread this small matmul too
  t, want = _program("matmul", device)
  ast, bufs = ast_of(t)
  ret = hand_coded_optimizations(ast, threads=3)
  assert [r.arg[-1] for r in ranges_of(ret)][0] is T
  np.testing.assert_allclose(run(ret, bufs, device).reshape(want.shape), want, rtol=1e-5, atol=1e-5)

def test_thread_is_special_core_id():
  t, _ = _program("elementwise", "PYTHON")
  ast, _ = ast_of(t)
  uops = lower_ast(apply_opt(ast, Opt(OptOps.THREAD, 0, 4))[0]).uops
  (sp,) = [u for u in uops if u.op is Ops.SPECIAL]
  assert sp.arg == "core_id" and sp.src[0].arg == 4 and not any(u.op is Ops.RANGE and u.arg[-1] is T for u in uops)
  spec = Device["PYTHON"].renderer.to_program(uops)
  assert spec.global_size == (4, 1, 1) and spec.core_id == 0

def test_name_without_ranges():
  ast, _ = ast_of(Tensor([3.0], device="PYTHON") + 1)
  assert ranges_of(ast) == [] and kernel_name(ast) == ast.arg.name == "E_1"

def test_weakint_ranges():
  # the scheduler rewrite builds indices in weakint, whose symbolic rules order operands by their args (split args must compare)
  from tinygrad.uop.ops import ParamArg, graph_rewrite
  from tinygrad.dtype import dtypes
  from tinygrad.uop.ops import KernelInfo
  from tinygrad.codegen.expander import pm_expand, expand_context
  W, M = dtypes.weakint, 64
  def P(slot): return UOp(Ops.PARAM, dtypes.float, (UOp.const(M*M, W),), ParamArg(slot, dtypes.float))
  r0, r1, k, u = UOp.range(M, 0, L), UOp.range(M, 1, L), UOp.range(16, 2, R), UOp.range(4, 3, N)
  val = UOp(Ops.REDUCE, dtypes.float, (P(1).index(r0*M + k*4 + u).load() * P(2).index((k*4 + u)*M + r1).load(), k, u), (Ops.ADD,))
  ast = UOp(Ops.SINK, dtypes.void, (P(0).index(r0*M + r1).store(val),), KernelInfo("matmul"))
  opt = hand_coded_optimizations(ast, 4)
  assert kinds(opt) == [(T, 4), (L, 4), (U, 4), (L, 16), (U, 4), (R, 16), (N, 4)] and all(r.dtype is W for r in ranges_of(opt))
  ex = graph_rewrite(opt, pm_expand, ctx=expand_context(opt), walk=True).toposort()
  # B's row: one vector load per UNROLL lane; A's 4 consecutive reduce elements: one vector load per row lane; each output row: one
  # vector store. 16 accumulators (one REDUCE per output lane: B's loads along the UNROLL lanes are not consecutive)
  assert sum(x.op is Ops.SHRINK for x in ex) == 12 and sum(x.op is Ops.REDUCE for x in ex) == 16
