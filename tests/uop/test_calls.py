# Calls in the UOp graph without a device (tinygrad/uop/call.py, schedule/call.py, gradient.py): the FUNCTION/CALL/PARAM forms, the
# open-loop check, hand-written kernels lowered to kernel ASTs, inlining (a nested body's PARAMs untouched), gradients as backward calls.
import pytest
from tinygrad import dtypes
from tinygrad.uop.ops import UOp, Ops, AxisType, CallInfo, ParamArg
from tinygrad.uop.call import body_params, substitute_outside_calls, open_ranges_of
from tinygrad.schedule.call import hand_written_ast, inline_functions, bind_params
from tinygrad.gradient import compute_gradient

def P(slot, shape=(4,), dt=dtypes.float): return UOp.param(slot, dt, shape, "CPU")

def test_param_shape_and_errors():
  p = P(1, (2, 3))
  assert p.op is Ops.PARAM and p.shape == (2, 3) and p.dtype is dtypes.float and p.arg.slot == 1 and p.arg.device == "CPU"
  assert UOp.param(0, dtypes.int, ()).shape == ()
  assert UOp.param(0, dtypes.int).shape is None
  with pytest.raises(RuntimeError, match="cannot create param for weak dtype"): UOp.param(0, dtypes.weakfloat, (2,))
  # a kernel's flat PARAM(CONST size) keeps no shape
  assert UOp(Ops.PARAM, dtypes.float, (UOp.const(8, dtypes.int),), ParamArg(0, dtypes.float)).shape is None

def test_call_forms():
  a, b = P(0), P(1)
  f = (a * b).call(a, b, name="mul")
  assert f.op is Ops.FUNCTION and f.dtype is dtypes.void and f.src[0].op is Ops.TUPLE and f.arg == CallInfo(None, "mul")
  g = f.gettuple(0)
  assert g.op is Ops.GETTUPLE and g.dtype is dtypes.float and g.shape == (4,)
  two = UOp.maketuple(a + b, (a * b).sum(0)).call(a, b)
  assert [x is y for x, y in zip(two.src[0].src, (a + b, (a * b).sum(0)))] == [True, True] and two.gettuple(1).shape == ()
  sink = UOp.placeholder((4,), dtypes.float, 0)[UOp.range(4, 0)].store(1.0).end(UOp.range(4, 0)).sink()
  c = sink.call(a)
  assert c.op is Ops.CALL and c.src == (sink, a)
  with pytest.raises(TypeError, match="gettuple needs a FUNCTION or TUPLE"): c.gettuple(0)
  assert repr(CallInfo(None, "x", True)) == "CallInfo(None, 'x', True, False)"

def test_open_ranges_and_call_error():
  B = UOp.placeholder((4, 5), dtypes.float, 0)
  i, j = UOp.range(4, 0), UOp.range(5, 1)
  st = B[i, j].store(1.0)
  assert open_ranges_of(st) == [i, j] and open_ranges_of(st.end(j)) == [i] and open_ranges_of(st.end(j).end(i)) == []
  st.end(j).end(i).sink().call(B)   # closed: fine
  with pytest.raises(RuntimeError, match=r"RANGE \(axis 0, size 4\) of k is never closed by an END"): st.end(j).sink().call(B, name="k")

def test_indexing_is_for_kernel_buffers():
  with pytest.raises(TypeError, match="indexing a UOp is for the buffers of a hand-written kernel"): P(0)[1]
  with pytest.raises(TypeError, match="must be ints or UOps"): UOp.placeholder((4,), dtypes.float, 0)[1.5]

def test_hand_written_ast():
  O, A = UOp.placeholder((3,), dtypes.float, 0), UOp.placeholder((3, 5), dtypes.float, 1)
  i, k = UOp.range(3, 0), UOp.range(5, 1, AxisType.REDUCE)
  acc = O[i].set(0.0)
  acc = acc[i].set(acc.after(k)[i] + A.T[k, i], end=k)   # a transposed view: flat index i*5 + k
  ast = hand_written_ast(acc.end(i).sink(arg="rows"))
  assert ast.arg.name == "rows" and [s.op for s in ast.src] == [Ops.END]
  params = sorted({u for u in ast.toposort() if u.op is Ops.PARAM}, key=lambda p: p.arg.slot)
  assert [(p.src[0].arg, p.shape) for p in params] == [(3, None), (15, None)]
  loads = [u for u in ast.toposort() if u.op is Ops.LOAD]
  a_idx = next(ld.src[0] for ld in loads if ld.src[0].src[0] is params[1])
  assert a_idx.src[1].render() == "(r0*5+r1)"
  # every INDEX is flat, and an INDEX is loaded where it is read, stored to where it is written
  assert all(len(u.src) == 2 for u in ast.toposort() if u.op is Ops.INDEX)
  assert all(s.src[0].op is Ops.INDEX and s.src[1].op is not Ops.INDEX for s in ast.toposort() if s.op is Ops.STORE)

def test_inline_and_nested_scopes():
  a, b = P(0), P(1)
  inner = (a * 2).call(b)          # a nested call: its PARAM 0 is the same node as the outer body's
  body = inner.gettuple(0) + a
  assert body_params(body) == [a, b]   # only this scope's (and the nested call's arguments)
  sub = substitute_outside_calls(body, {a: b * 3})
  assert sub.src[0].src[0].src[0] is UOp.maketuple(a * 2) and sub.src[1] is b * 3   # the nested body is left alone
  outer = body.call(P(5), P(6))
  assert inline_functions(UOp.sink(outer.gettuple(0))).src[0] is P(6) * 2 + P(5)

def test_bind_params_checks():
  f = (P(0) + 1).call(P(0, (3,)))
  with pytest.raises(TypeError, match=r"arg 0 shape mismatch: expected \(4,\), got \(3,\)"): bind_params(f)
  f = (P(0) + 1).call(P(0, dt=dtypes.half))
  with pytest.raises(TypeError, match="arg 0 dtype mismatch: expected dtypes.float, got dtypes.half"): bind_params(f)

def test_gradient_is_a_backward_call():
  a, b, x, w = P(0), P(1), P(7), P(8)
  f = (a * b).sum(0).call(x, w, name="dot")
  grads = compute_gradient(f.gettuple(0), UOp.param(9, dtypes.float, (), "CPU"), {x, w})
  gx, gw = grads[x], grads[w]
  assert gx.op is Ops.GETTUPLE and gx.src[0] is gw.src[0] and {gx.arg, gw.arg} == {0, 1}
  bwd = gx.src[0]
  assert bwd.op is Ops.FUNCTION and bwd.arg.name == "dot_backward" and set(bwd.src[1:]) == {x, w, UOp.param(9, dtypes.float, (), "CPU")}
  # with only one target the backward call computes only that gradient
  only = compute_gradient(f.gettuple(0), UOp.param(9, dtypes.float, (), "CPU"), {w})
  assert x not in only and len(only[w].src[0].src[0].src) == 1
