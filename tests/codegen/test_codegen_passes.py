# The codegen's passes as tables (tinygrad/codegen/__init__.py PASSES): each a PatternMatcher whose rules match the op they change, the
# whole-kernel facts a rule needs made once into its context. Checked on hand-built kernels: end loops (stores sharing loops), reduce
# to accumulator (REDUCEs over the same ranges share a loop; a nested REDUCE lowers inside its outer one), and the optimizer left out
# by its flag when lower_ast is given the Opts.
import numpy as np
from tinygrad import Tensor
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp, Ops, AxisType, ParamArg, KernelInfo, PatternMatcher
from tinygrad.codegen import PASSES, Pass, full_rewrite_to_sink, lower_ast
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.renderer.python import PythonRenderer

W = dtypes.weakint
def loop(n:int, axis:int) -> UOp: return UOp.range(n, axis, AxisType.LOOP)
def red_range(n:int, axis:int) -> UOp: return UOp.range(n, axis, AxisType.REDUCE)
def param(slot:int, n:int) -> UOp: return UOp(Ops.PARAM, dtypes.float, (UOp.const(n, W),), ParamArg(slot, dtypes.float))
def store(slot:int, idx:UOp, val:UOp, n:int=64) -> UOp: return param(slot, n).index(idx).store(val)
def kernel(*stores:UOp) -> UOp: return UOp(Ops.SINK, dtypes.void, stores, KernelInfo("k"))
def the_pass(name:str) -> Pass: return next(p for p in PASSES if p.name == name)
def by_op(u:UOp, op:Ops) -> list[UOp]: return [x for x in u.toposort() if x.op is op]

def test_every_pass_is_a_table():
  assert PASSES and all(isinstance(p, Pass) and isinstance(p.matcher, PatternMatcher) for p in PASSES)
  assert len({p.name for p in PASSES}) == len(PASSES)

def test_stores_in_the_same_loops_share_them():
  r0, r1 = loop(4, 0), loop(8, 1)
  a, b = store(0, r0 * 8 + r1, UOp.const(1.0, dtypes.float)), store(1, r0 * 8 + r1, UOp.const(2.0, dtypes.float))
  out = the_pass("end loops").run(kernel(a, b))
  (outer,) = out.src
  assert outer.op is Ops.END and outer.src[1] is r0
  inner = outer.src[0]
  assert inner.op is Ops.END and inner.src[1] is r1 and inner.src[0].op is Ops.GROUP and inner.src[0].src == (a, b)

def test_stores_in_different_inner_loops_share_the_outer_one():
  r0, r1, r2 = loop(4, 0), loop(8, 1), loop(2, 2)
  a, b = store(0, r0 * 8 + r1, UOp.const(1.0, dtypes.float)), store(1, r0 * 2 + r2, UOp.const(2.0, dtypes.float), 8)
  c = store(2, r0, UOp.const(3.0, dtypes.float), 4)
  (outer,) = the_pass("end loops").run(kernel(a, b, c)).src
  assert outer.op is Ops.END and outer.src[1] is r0 and outer.src[0].op is Ops.GROUP
  ea, eb, sc = outer.src[0].src
  assert (ea.op, ea.src[0], ea.src[1]) == (Ops.END, a, r1) and (eb.op, eb.src[0], eb.src[1]) == (Ops.END, b, r2) and sc is c

def test_a_kernel_that_closes_its_own_loops_is_left_alone():
  r0 = loop(4, 0)
  ended = UOp(Ops.END, dtypes.void, (store(0, r0, UOp.const(1.0, dtypes.float)), r0))
  sink = kernel(ended, UOp(Ops.END, dtypes.void, (store(1, r0, UOp.const(2.0, dtypes.float)), r0)))
  assert the_pass("end loops").run(sink) is sink

def test_reduces_over_the_same_ranges_share_one_loop():
  r0, k = loop(4, 0), red_range(16, 1)
  x = param(1, 64).index(r0 * 16 + k).load()
  s = UOp(Ops.REDUCE, dtypes.float, (x, k), (Ops.ADD,))
  m = UOp(Ops.REDUCE, dtypes.float, (x, k), (Ops.MAX,))
  sink = the_pass("end loops").run(kernel(store(0, r0, s + m, 4)))
  out = the_pass("reduce to accumulator").run(sink)
  assert not by_op(out, Ops.REDUCE)
  ends = [e for e in by_op(out, Ops.END) if e.src[1] is k]
  assert len(ends) == 1 and ends[0].src[0].op is Ops.GROUP and len(ends[0].src[0].src) == 2   # one loop updates both accumulators
  assert len({b.arg.slot for b in by_op(out, Ops.BUFFER)}) == 1   # one float accumulator, a slot per REDUCE

def test_a_nested_reduce_lowers_inside_its_outer_loop():
  r0, k0, k1 = loop(2, 0), red_range(4, 1), red_range(8, 2)
  inner = UOp(Ops.REDUCE, dtypes.float, (param(1, 64).index(r0 * 32 + k0 * 8 + k1).load(), k1), (Ops.ADD,))
  outer = UOp(Ops.REDUCE, dtypes.float, (inner * inner, k0), (Ops.ADD,))
  out = the_pass("reduce to accumulator").run(the_pass("end loops").run(kernel(store(0, r0, outer, 2))))
  assert not by_op(out, Ops.REDUCE) and {e.src[1] for e in by_op(out, Ops.END)} == {r0, k0, k1}
  assert sorted(b.arg.slot for b in set(by_op(out, Ops.BUFFER))) == [0, 1]

def test_a_staged_sum_is_right():
  # the scheduler stages a long sum as a REDUCE nested in another's loop (one kernel); the PYTHON device runs it without a compiler
  x = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
  t = Tensor(x, device="PYTHON").sum()
  (si,) = [si for si in t.schedule()[0] if si.ast.op is Ops.SINK]
  assert any(any(u.op is Ops.REDUCE for u in r.src[0].toposort()) for r in by_op(si.ast, Ops.REDUCE))
  np.testing.assert_allclose(t.numpy(), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)

def test_given_opts_leave_the_optimizer_out():
  r0, r1, k = loop(16, 0), loop(16, 1), red_range(16, 2)
  val = UOp(Ops.REDUCE, dtypes.float, (param(1, 256).index(r0 * 16 + k).load() * param(2, 256).index(k * 16 + r1).load(), k), (Ops.ADD,))
  ast = kernel(store(0, r0 * 16 + r1, val, 256))
  ren = PythonRenderer()
  assert lower_ast(ast, ren).sink.arg.applied_opts   # the heuristics choose some
  opts = (Opt(OptOps.UPCAST, 0, 4),)
  assert lower_ast(ast, ren, opts).sink.arg.applied_opts == opts
  assert full_rewrite_to_sink(ast, ren, [p for p in PASSES if not p.chooses_opts]).arg.applied_opts == ()
