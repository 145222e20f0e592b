# Validity gates after expansion (tinygrad/codegen/expander.py simplifies them with the ranges' bounds) and the folds of the gates that
# became constants or repeat a load's own gate (tinygrad/codegen pm_gates). No device needed.
from tinygrad.codegen import pm_const_fold
from tinygrad.codegen.expander import pm_expand
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType, graph_rewrite

def P(slot, n): return UOp(Ops.PARAM, dtypes.float, (UOp.const(n, dtypes.int),), ParamArg(slot, dtypes.float))
def R(n, axis, kind=AxisType.LOOP): return UOp(Ops.RANGE, dtypes.weakint, (UOp.const(n),), (axis, kind))
def gated_load(buf, idx, gate): return UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (buf, idx)), UOp.const(0.0, dtypes.float), gate))
def store(buf, idx, val): return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (buf, idx)), val))

def lowered(sink:UOp) -> UOp: return graph_rewrite(graph_rewrite(sink, pm_expand), pm_const_fold)

def test_lane_gates_that_always_hold_are_folded():
  # 4 upcast lanes of a gated load: lane*34 + r < 136 holds for every lane when r < 34, so no lane keeps a gate
  out, src, r, u = P(0, 136), P(1, 136), R(34, 0), R(4, 1, AxisType.UPCAST)
  x = u*34 + r
  sink = UOp(Ops.SINK, dtypes.void, (store(out, x, gated_load(src, x, x < 136)),))
  ret = lowered(sink)
  assert not [v for v in ret.toposort() if v.op is Ops.CMPLT]
  loads = [v for v in ret.toposort() if v.op is Ops.LOAD]
  assert len(loads) == 4 and all(len(v.src) == 1 for v in loads)

def test_lane_gates_that_depend_on_the_lane_stay():
  # lane*34 + r < 100: lanes 0 and 1 always hold (at most 67), lane 2 holds for r < 32 only, lane 3 never
  out, src, r, u = P(0, 136), P(1, 136), R(34, 0), R(4, 1, AxisType.UPCAST)
  x = u*34 + r
  ret = lowered(UOp(Ops.SINK, dtypes.void, (store(out, x, gated_load(src, x, x < 100)),)))
  loads = [v for v in ret.toposort() if v.op is Ops.LOAD]
  gates = [v.src[2] for v in loads if len(v.src) == 3]
  assert len(loads) == 3 and len(gates) == 1 and gates[0].op is Ops.CMPLT and gates[0].src[1].arg == 32   # lane 3 reads nothing
  assert sum(1 for v in ret.toposort() if v.op is Ops.STORE) == 4

def test_a_mask_applied_again_is_dropped():
  src, r = P(1, 64), R(64, 0)
  a, b = r < 40, r.ne(3)
  ld = gated_load(src, r, a & b)
  # the valid mask around the load repeats a condition of the load's own gate: the load alone (it reads 0.0 when the gate fails)
  assert graph_rewrite(a.where(ld, UOp.const(0.0, dtypes.float)), pm_const_fold) is ld
  assert graph_rewrite((a & b).where(ld, UOp.const(0.0, dtypes.float)), pm_const_fold) is ld
  # a condition that is not part of the gate, or another alternative value, keeps the WHERE
  other = (r < 20).where(ld, UOp.const(0.0, dtypes.float))
  assert graph_rewrite(other, pm_const_fold) is other
  alt = a.where(ld, UOp.const(1.0, dtypes.float))
  assert graph_rewrite(alt, pm_const_fold) is alt

def test_constant_gates_fold():
  src, r = P(1, 64), R(64, 0)
  x, y = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (src, r)),)), UOp.const(2.0, dtypes.float)
  assert graph_rewrite(UOp.const(True, dtypes.bool).where(x, y), pm_const_fold) is x
  assert graph_rewrite(UOp.const(False, dtypes.bool).where(x, y), pm_const_fold) is y
  assert graph_rewrite(gated_load(src, r, UOp.const(True, dtypes.bool)), pm_const_fold) is x
  out = P(0, 64)
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, r)), y, UOp.const(True, dtypes.bool)))
  assert graph_rewrite(st, pm_const_fold) is UOp(Ops.STORE, dtypes.void, st.src[:2])
