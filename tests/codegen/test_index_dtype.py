# The late index dtype pass (tinygrad/codegen/index_dtype.py): weakint index math gets int32 where its bounds fit and int64 where
# they don't, and floor division/modulo become ops the renderers have, exactly.
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp, Ops, AxisType, ParamArg, graph_rewrite
from tinygrad.codegen import pm_const_fold
from tinygrad.codegen.index_dtype import pm_lower_index
from tinygrad.renderer import check_linear, KernelContractError

W, I32, I64 = dtypes.weakint, dtypes.int32, dtypes.int64

def lower(u:UOp) -> UOp: return graph_rewrite(u, pm_lower_index, name="lower index dtype")
def rng(n:int, axis:int=0) -> UOp: return UOp.range(n, axis, AxisType.LOOP)
def dtypes_of(u:UOp) -> set: return {x.dtype for x in u.toposort()}
def by_op(u:UOp, op:Ops) -> list[UOp]: return [x for x in u.toposort() if x.op is op]

def test_small_index_is_int32_everywhere():
  r0, r1 = rng(100), rng(25, 1)
  out = lower(r0 * 100 + r1 * 4 + 3)
  assert dtypes_of(out) == {I32}
  assert all(r.src[0].dtype is I32 for r in by_op(out, Ops.RANGE))

def test_loop_past_int32_is_int64():
  out = lower(rng(2**33 + 7))
  assert out.dtype is I64 and out.src[0].dtype is I64 and out.src[0].arg == 2**33 + 7

def test_end_of_exactly_2_31_needs_int64():
  # the counter itself fits (its max is 2**31-1), but the literal it is compared with does not
  assert lower(rng(2**31)).dtype is I64 and lower(rng(2**31 - 1)).dtype is I32

def test_only_the_wide_part_widens():
  r0, r1 = rng(65540), rng(32772, 1)
  out = lower(r0 * 32772 + r1)   # max 65539*32772 + 32771 > 2**31
  assert out.dtype is I64 and out.op is Ops.ADD
  mul, r1_cast = out.src
  assert mul.dtype is I64 and mul.src[0].op is Ops.CAST and mul.src[0].src[0].dtype is I32   # the loop counters stay int32
  assert r1_cast.op is Ops.CAST and r1_cast.src[0].dtype is I32 and W not in dtypes_of(out)

def test_offsets_and_sizes():
  buf = UOp(Ops.PARAM, dtypes.uint8, (UOp.const(2**31 + 5, W),), ParamArg(0, dtypes.uint8))
  ld = UOp(Ops.LOAD, dtypes.uint8, (UOp(Ops.INDEX, dtypes.uint8, (buf, UOp.const(2**31 + 4, W))),))
  small = UOp(Ops.LOAD, dtypes.uint8, (UOp(Ops.INDEX, dtypes.uint8, (buf, UOp.const(7, W))),))
  out = lower(UOp(Ops.SINK, dtypes.void, (ld, small)))
  idx = by_op(out, Ops.INDEX)
  assert {(i.src[1].arg, i.src[1].dtype) for i in idx} == {(2**31 + 4, I64), (7, I32)}
  assert by_op(out, Ops.PARAM)[0].src[0].dtype is I64 and W not in dtypes_of(out)

def test_variables_get_the_width_of_their_range():
  small, big = UOp.variable("n", 1, 1000, param=True), UOp.variable("m", 0, 2**40, param=True)
  out = lower(UOp(Ops.SINK, dtypes.void, (small + 1, big + 1)))
  params = {p.arg.name: p for p in out.toposort() if p.op is Ops.PARAM}
  assert params["n"].dtype is I32 and params["n"].arg.dtype is I32 and params["m"].dtype is I64 and params["m"].arg.dtype is I64

def test_comparison_of_mixed_widths():
  out = lower(rng(2**32) < rng(10, 1))
  assert out.dtype is dtypes.bool and out.src[0].dtype is I64 and out.src[1].op is Ops.CAST and out.src[1].dtype is I64
  out = lower(rng(10) < UOp.const(2**31 + 1, W))   # a wide literal widens the comparison, never wraps
  assert out.src[0].dtype is I64 and out.src[1].dtype is I64 and out.src[1].arg == 2**31 + 1

def test_weak_literals_commit_to_the_op_they_meet():
  x = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (UOp(Ops.PARAM, dtypes.float, (UOp.const(4, W),),
                                                                  ParamArg(0, dtypes.float)),
                                                               UOp.const(0, W))),))
  out = lower(UOp(Ops.MUL, dtypes.float, (x, UOp.const(2, W))))
  assert out.src[1].dtype is dtypes.float and out.src[1].arg == 2.0 and W not in dtypes_of(out)

# ** floor division **

def test_nonnegative_floor_ops_are_c_ops():
  r = rng(1000)
  assert lower(r // 7).op is Ops.CDIV and lower(r % 7).op is Ops.CMOD
  # by powers of two: a shift and a mask (C's signed / and % need fix-ups the compiler can't always drop)
  d, m = lower(r // 8), lower(r % 8)
  assert (d.op, d.src[1].arg, m.op, m.src[1].arg) == (Ops.SHR, 3, Ops.AND, 7)
  assert lower(UOp(Ops.CDIV, W, (r, UOp.const(16, W)))).op is Ops.SHR and lower(UOp(Ops.CMOD, W, (r, UOp.const(16, W)))).op is Ops.AND
  # C ops that may see a negative dividend stay (they truncate: shifting would floor)
  neg = r + (-500)
  assert lower(UOp(Ops.CDIV, W, (neg, UOp.const(16, W)))).op is Ops.CDIV

def _eval(u:UOp, x:UOp, v:int) -> int:
  lowered_x = lower(x)
  ret = graph_rewrite(u.substitute({lowered_x: UOp.const(v, lowered_x.dtype)}), pm_const_fold)
  assert ret.op is Ops.CONST, ret
  return ret.arg

@pytest.mark.parametrize("lo,hi", [(-50, 50), (-2**33, 2**33)])
@given(st.integers(min_value=-30, max_value=30).filter(lambda b: b != 0), st.data())
@settings(max_examples=60, deadline=None)
def test_floor_ops_are_exact(lo, hi, b, data):
  # weakint (the index pass shifts the dividend by the bounds) and int32/int64 values (the general sign correction)
  for dt in (W, I64) if hi > 2**31 else (W, I32):
    x = UOp.variable("x", lo, hi, dt, param=True)
    bu = UOp.const(b, dt)
    fd, fm = lower(UOp(Ops.FLOORDIV, dt, (x, bu))), lower(UOp(Ops.FLOORMOD, dt, (x, bu)))
    assert not {Ops.FLOORDIV, Ops.FLOORMOD} & {u.op for u in fd.toposort() | fm.toposort()} and W not in dtypes_of(fd) | dtypes_of(fm)
    for v in data.draw(st.lists(st.integers(lo, hi), min_size=1, max_size=8)) + [lo, hi, 0]:
      assert (_eval(fd, x, v), _eval(fm, x, v)) == (v // b, v % b), (dt, v, b)

# ** the renderer contract rejects what the pass must remove **

def test_contract_rejects_weakint_ops_and_floor_ops():
  r = UOp(Ops.RANGE, I32, (UOp.const(4, I32),), (0, AxisType.LOOP))
  weak = UOp(Ops.ADD, W, (r, UOp.const(1, W)))
  with pytest.raises(KernelContractError, match="weak dtypes must be committed"): check_linear([r, weak])
  fl = UOp(Ops.FLOORDIV, I32, (r, UOp.const(2, I32)))
  with pytest.raises(KernelContractError, match="FLOORDIV to CDIV/CMOD"): check_linear([r, fl])
