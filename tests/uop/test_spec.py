# The written spec (tinygrad/uop/spec.py): hand-built good and bad UOps for every stage. No device is used.
import os
import re
import subprocess
import sys
import pytest
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType
from tinygrad.uop.spec import spec_tensor, spec_kernel, spec_lowered, spec_linear, type_verify
from tinygrad.renderer import verify_linear

def ic(v): return UOp.const(v, dtypes.int)

def test_spec_is_on_by_default():
  # tinygrad 0.14's default: SPEC=1 (checked in a fresh interpreter, without SPEC in the environment)
  env = {k: v for k, v in os.environ.items() if k != "SPEC"}
  out = subprocess.run([sys.executable, "-c", "from tinygrad.helpers import SPEC; print(SPEC.value)"], env=env, capture_output=True, text=True)
  assert out.stdout.strip() == "1", out.stderr

def raises(stage:str, *pieces:str):
  """pytest.raises for a spec failure whose message names the stage and contains the given pieces (in order)."""
  return pytest.raises(RuntimeError, match=re.escape(f"SPEC: the {stage} is invalid at UOp ") + r"\d+: " + ".*".join(re.escape(p) for p in pieces))

# ***** tensor graph *****

def buf(n=16, dt=dtypes.float, device="CPU", uid=0):
  return UOp(Ops.BUFFER, dt, (ic(n),), ParamArg(uid, dt, device=device))

def view(b, shape): return UOp(Ops.RESHAPE, b.dtype, (b,), shape)

class TestTensorSpec:
  def test_good_graph(self):
    a, b = view(buf(), (4, 4)), view(buf(uid=1), (4, 4))
    s = UOp(Ops.REDUCE, dtypes.float, (UOp(Ops.MUL, dtypes.float, (a, UOp(Ops.PERMUTE, dtypes.float, (b,), (1, 0)))),), (Ops.ADD, (1,)))
    p = UOp(Ops.PAD, dtypes.float, (s,), ((1, 0), (0, 2)))
    sh = UOp(Ops.SHRINK, dtypes.float, (p,), ((0, 4), (1, 2)))
    e = UOp(Ops.EXPAND, dtypes.float, (sh,), (4, 3))
    f = UOp(Ops.FLIP, dtypes.float, (e,), (True, False))
    c = UOp(Ops.CONTIGUOUS, dtypes.float, (UOp(Ops.CMPLT, dtypes.bool, (f, f)).cast(dtypes.float),))
    type_verify(UOp(Ops.SINK, dtypes.void, (c,)), spec_tensor, "tensor graph")

  def test_alu_operand_dtype(self):
    a = view(buf(), (4, 4))
    bad = UOp(Ops.ADD, dtypes.float, (a, view(buf(dt=dtypes.int, uid=1), (4, 4))))
    with raises("tensor graph", "Ops.ADD dtypes.float arg=None with 2 srcs", "(Ops.RESHAPE dtypes.float (4, 4), Ops.RESHAPE dtypes.int (4, 4))",
                "breaks the rule at spec.py:"):
      type_verify(bad, spec_tensor, "tensor graph")

  def test_alu_operand_shapes(self):
    bad = UOp(Ops.ADD, dtypes.float, (view(buf(), (4, 4)), view(buf(uid=1), (16,))))
    with raises("tensor graph", "Ops.ADD dtypes.float", "breaks the rule"): type_verify(bad, spec_tensor, "tensor graph")

  def test_comparison_is_bool(self):
    a = view(buf(), (4, 4))
    with raises("tensor graph", "Ops.CMPLT dtypes.float"): type_verify(UOp(Ops.CMPLT, dtypes.float, (a, a)), spec_tensor, "tensor graph")

  def test_where_condition_is_bool(self):
    a = view(buf(), (4, 4))
    with raises("tensor graph", "Ops.WHERE"): type_verify(UOp(Ops.WHERE, dtypes.float, (a, a, a)), spec_tensor, "tensor graph")

  def test_float_only_ops(self):
    a = view(buf(dt=dtypes.int), (4, 4))
    with raises("tensor graph", "Ops.SQRT dtypes.int"): type_verify(UOp(Ops.SQRT, dtypes.int, (a,)), spec_tensor, "tensor graph")

  def test_reshape_must_keep_size(self):
    with raises("tensor graph", "Ops.RESHAPE dtypes.float arg=(5, 4)"): type_verify(view(buf(), (5, 4)), spec_tensor, "tensor graph")

  def test_expand_only_size_1_dims(self):
    bad = UOp(Ops.EXPAND, dtypes.float, (view(buf(), (4, 4)),), (8, 4))
    with raises("tensor graph", "Ops.EXPAND", "arg=(8, 4)"): type_verify(bad, spec_tensor, "tensor graph")

  def test_permute_is_a_permutation(self):
    bad = UOp(Ops.PERMUTE, dtypes.float, (view(buf(), (4, 4)),), (0, 0))
    with raises("tensor graph", "Ops.PERMUTE"): type_verify(bad, spec_tensor, "tensor graph")

  def test_shrink_in_bounds(self):
    bad = UOp(Ops.SHRINK, dtypes.float, (view(buf(), (4, 4)),), ((0, 5), (0, 4)))
    with raises("tensor graph", "Ops.SHRINK"): type_verify(bad, spec_tensor, "tensor graph")

  def test_reduce_axes(self):
    a = view(buf(), (4, 4))
    for arg in ((Ops.ADD, (2,)), (Ops.SUB, (0,)), (Ops.ADD, ()), (Ops.ADD, (1, 0))):
      with raises("tensor graph", "Ops.REDUCE"): type_verify(UOp(Ops.REDUCE, dtypes.float, (a,), arg), spec_tensor, "tensor graph")

  def test_movement_keeps_dtype(self):
    with raises("tensor graph", "Ops.RESHAPE dtypes.int"):
      type_verify(UOp(Ops.RESHAPE, dtypes.int, (buf(),), (4, 4)), spec_tensor, "tensor graph")

  def test_const_arg_matches_dtype(self):
    with raises("tensor graph", "Ops.CONST dtypes.int arg=1.5"): type_verify(UOp(Ops.CONST, dtypes.int, (), 1.5), spec_tensor, "tensor graph")
    with raises("tensor graph", "Ops.CONST dtypes.bool arg=1"): type_verify(UOp(Ops.CONST, dtypes.bool, (), 1), spec_tensor, "tensor graph")

  def test_buffer_needs_a_device(self):
    with raises("tensor graph", "Ops.BUFFER"): type_verify(buf(device=None), spec_tensor, "tensor graph")

  def test_kernel_ops_are_not_tensor_ops(self):
    p = UOp(Ops.PARAM, dtypes.float, (ic(4),), ParamArg(0, dtypes.float))
    with raises("tensor graph", "Ops.PARAM dtypes.float arg=ParamArg(0, dtypes.float)", "it matches no rule"):
      type_verify(p, spec_tensor, "tensor graph")

  def test_names_the_position(self):
    a = view(buf(), (4, 4))
    sink = UOp(Ops.SINK, dtypes.void, (UOp(Ops.CMPLT, dtypes.float, (a, a)),))
    pos = list(sink.toposort()).index(sink.src[0])
    with pytest.raises(RuntimeError, match=rf"at UOp {pos}: Ops.CMPLT"): type_verify(sink, spec_tensor, "tensor graph")

# ***** kernel AST *****

def P(slot, dt=dtypes.float, n=16): return UOp(Ops.PARAM, dt, (ic(n),), ParamArg(slot, dt))
def R(n, axis=0, kind=AxisType.LOOP): return UOp(Ops.RANGE, dtypes.int, (ic(n),), (axis, kind))
class KI:
  name = "E_16"

def kernel(value_fn=lambda ld, r: ld):
  out, a, r = P(0), P(1), R(16)
  ld = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (a, r)),))
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, r)), value_fn(ld, r)))
  return UOp(Ops.SINK, dtypes.void, (st,), KI())

class TestKernelSpec:
  def test_good_elementwise(self):
    type_verify(kernel(lambda ld, r: UOp(Ops.ADD, dtypes.float, (ld, UOp.const(1.0, dtypes.float)))), spec_kernel, "kernel AST")

  def test_good_reduce_and_gated_load(self):
    out, a, r0, r1 = P(0, n=4), P(1), R(4), R(4, 1, AxisType.REDUCE)
    idx = UOp(Ops.ADD, dtypes.int, (UOp(Ops.MUL, dtypes.int, (r0, ic(4))), r1))
    gate = UOp(Ops.CMPLT, dtypes.bool, (r1, ic(3)))
    ld = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (a, idx)), UOp.const(0.0, dtypes.float), gate))
    red = UOp(Ops.REDUCE, dtypes.float, (ld, r1), (Ops.MAX,))
    sink = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, r0)), red)),), KI())
    type_verify(sink, spec_kernel, "kernel AST")

  def test_store_value_dtype(self):
    with raises("kernel AST", "Ops.STORE dtypes.void", "Ops.INDEX dtypes.float, Ops.CAST dtypes.int"):
      type_verify(kernel(lambda ld, r: ld.cast(dtypes.int)), spec_kernel, "kernel AST")

  def test_index_must_be_int(self):
    out = P(0)
    bad = UOp(Ops.INDEX, dtypes.float, (out, UOp.const(1.0, dtypes.float)))
    with raises("kernel AST", "Ops.INDEX dtypes.float"): type_verify(bad, spec_kernel, "kernel AST")

  def test_index_dtype_is_the_buffers(self):
    with raises("kernel AST", "Ops.INDEX dtypes.int"): type_verify(UOp(Ops.INDEX, dtypes.int, (P(0), ic(0))), spec_kernel, "kernel AST")

  def test_load_gate_is_bool(self):
    a = P(1)
    bad = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (a, ic(0))), UOp.const(0.0, dtypes.float), ic(1)))
    with raises("kernel AST", "Ops.LOAD dtypes.float", "breaks the rule"): type_verify(bad, spec_kernel, "kernel AST")

  def test_reduce_over_loop_range(self):
    r = R(4)
    bad = UOp(Ops.REDUCE, dtypes.float, (UOp.const(1.0, dtypes.float), r), (Ops.ADD,))
    with raises("kernel AST", "Ops.REDUCE dtypes.float arg=(Ops.ADD,)"): type_verify(bad, spec_kernel, "kernel AST")

  def test_range_arg(self):
    with raises("kernel AST", "Ops.RANGE dtypes.int arg=(0,)"):
      type_verify(UOp(Ops.RANGE, dtypes.int, (ic(4),), (0,)), spec_kernel, "kernel AST")

  def test_movement_ops_are_not_kernel_ops(self):
    bad = kernel(lambda ld, r: UOp(Ops.RESHAPE, dtypes.float, (ld,), (1,)))
    with raises("kernel AST", "Ops.RESHAPE", "it matches no rule"): type_verify(bad, spec_kernel, "kernel AST")

  def test_sink_holds_stores(self):
    with raises("kernel AST", "Ops.SINK dtypes.void"):
      type_verify(UOp(Ops.SINK, dtypes.void, (UOp.const(1.0, dtypes.float),), KI()), spec_kernel, "kernel AST")

  def test_param_dtype_matches_arg(self):
    bad = UOp(Ops.PARAM, dtypes.int, (ic(4),), ParamArg(0, dtypes.float))
    with raises("kernel AST", "Ops.PARAM dtypes.int"): type_verify(bad, spec_kernel, "kernel AST")

# ***** lowered kernel *****

def lowered(red_op=Ops.ADD, acc_space=AddrSpace.REG):
  """out[0] = sum(a[r]) as the codegen lowers it: a register accumulator."""
  out, a, r = P(0, n=1), P(1), R(16, 0, AxisType.REDUCE)
  acc = UOp(Ops.BUFFER, dtypes.float, (ic(1),), ParamArg(0, dtypes.float, addrspace=acc_space))
  init = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (acc, ic(0))), UOp.const(0.0, dtypes.float)))
  idx = UOp(Ops.INDEX, dtypes.float, (acc.after(init, r), ic(0)))
  ld_a = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (a, r)),))
  body = UOp(Ops.STORE, dtypes.void, (idx, UOp(red_op, dtypes.float, (UOp(Ops.LOAD, dtypes.float, (idx,)), ld_a))))
  end = UOp(Ops.END, dtypes.void, (body, r))
  res = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (acc.after(end), ic(0))),))
  return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, ic(0))), res)),), KI())

class TestLoweredSpec:
  def test_good(self): type_verify(lowered(), spec_lowered, "lowered kernel")

  def test_reduce_must_be_gone(self):
    r = R(4, 0, AxisType.REDUCE)
    red = UOp(Ops.REDUCE, dtypes.float, (UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (P(1), r)),)), r), (Ops.ADD,))
    sink = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (P(0), ic(0))), red)),), KI())
    type_verify(sink, spec_kernel, "kernel AST")  # fine before lowering
    with raises("lowered kernel", "Ops.REDUCE", "it matches no rule"): type_verify(sink, spec_lowered, "lowered kernel")

  def test_accumulator_is_local(self):
    with raises("lowered kernel", "Ops.BUFFER dtypes.float"): type_verify(lowered(acc_space=AddrSpace.GLOBAL), spec_lowered, "lowered kernel")

  def test_end_closes_a_range(self):
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (P(0), ic(0))), UOp.const(1.0, dtypes.float)))
    with raises("lowered kernel", "Ops.END dtypes.void"): type_verify(UOp(Ops.END, dtypes.void, (st, ic(3))), spec_lowered, "lowered kernel")

  def test_accumulate_dtype(self):
    with raises("lowered kernel", "Ops.CMPLT dtypes.float"): type_verify(lowered(Ops.CMPLT), spec_lowered, "lowered kernel")

# ***** linear program *****

def linear(value_fn=lambda ld: ld):
  out, a, r = P(0), P(1), R(16)
  ia = UOp(Ops.INDEX, dtypes.float, (a, r))
  ld = UOp(Ops.LOAD, dtypes.float, (ia,))
  v = value_fn(ld)
  io = UOp(Ops.INDEX, dtypes.float, (out, r))
  st = UOp(Ops.STORE, dtypes.void, (io, v))
  return [UOp(Ops.SINK, dtypes.void, (), KI()), out, a, r, ia, ld, *([v] if v is not ld else []), io, st, UOp(Ops.END, dtypes.void, (st, r))]

class TestLinearSpec:
  def test_good(self):
    verify_linear(linear())
    verify_linear(linear(lambda ld: UOp(Ops.MUL, dtypes.float, (ld, UOp(Ops.CONST, dtypes.weakfloat, (), 2.0)))))

  def test_dtypes(self):
    bad = linear(lambda ld: UOp(Ops.ADD, dtypes.int, (ld, ic(1))))
    with pytest.raises(RuntimeError, match=r"SPEC: the linear program is invalid: uop 6 \(Ops.ADD, dtypes.int\): it breaks the rule at spec.py:\d+"):
      verify_linear(bad)
    with raises("linear program", "Ops.ADD dtypes.int"): type_verify(bad, spec_linear, "linear program")

  def test_weak_float_is_not_an_int(self):
    r = R(16)
    ok = linear(lambda ld: UOp(Ops.ADD, dtypes.float, (ld, UOp(Ops.MUL, dtypes.float, (ld, UOp(Ops.CONST, dtypes.weakint, (), 2))))))
    type_verify(ok, spec_linear, "linear program")  # a weak int literal fits a float
    bad = linear(lambda ld: UOp(Ops.ADD, dtypes.int, (r, UOp(Ops.CONST, dtypes.weakfloat, (), 2.5))))
    with pytest.raises(RuntimeError, match=re.escape("uop 6 (Ops.ADD, dtypes.int)") + r".*its srcs: " +
                       re.escape("Ops.RANGE dtypes.int (0, AxisType.LOOP), Ops.CONST dtypes.weakfloat 2.5")):
      verify_linear(bad)

  def test_order_comes_from_check_linear(self):
    uops = linear()
    uops[4], uops[5] = uops[5], uops[4]
    with pytest.raises(RuntimeError, match=r"SPEC: the linear program is invalid: uop 4 \(Ops.LOAD, dtypes.float\) uses Ops.INDEX"):
      verify_linear(uops)

  def test_stage_name_in_message(self):
    uops = linear()
    del uops[-1]  # the RANGE is never closed
    with pytest.raises(RuntimeError, match=r"SPEC: the linear program of E_16 is invalid: the Ops.RANGE of uop 3 is never closed"):
      verify_linear(uops, "linear program of E_16")

  def test_tensor_ops_are_not_linear_ops(self):
    uops = linear()
    uops.insert(1, UOp(Ops.CONTIGUOUS, dtypes.float, (uops[1],)))
    uops[1], uops[2] = uops[2], uops[1]
    with pytest.raises(RuntimeError, match=r"SPEC: the linear program is invalid: .*CONTIGUOUS"): verify_linear(uops)
