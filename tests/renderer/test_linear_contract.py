# The linear-UOp contract checks (tinygrad/renderer/__init__.py): a bad kernel raises KernelContractError naming the UOp. No device needed.
import pytest
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.renderer import KernelContractError, check_linear
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.renderer.python import PythonRenderer
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType
from tinygrad.uop.spec import spec_linear, type_verify, vector_width
from tinygrad.helpers import Context

def P(slot, dt=dtypes.float, n=4): return UOp(Ops.PARAM, dt, (UOp.const(n, dtypes.int),), ParamArg(slot, dt))
def R(n, axis=0): return UOp(Ops.RANGE, dtypes.int, (UOp.const(n, dtypes.int),), (axis, AxisType.LOOP))
def END(body, r): return UOp(Ops.END, dtypes.void, (body, r))
def copy_kernel():
  out, a, r = P(0), P(1), R(4)
  ld = a.index(r).load()
  st = out.index(r).store(ld)
  return [out, a, r, a.index(r), ld, out.index(r), st, END(st, r)]

def test_a_good_kernel():
  k = check_linear(copy_kernel())
  assert k.name == "test" and [b.arg.slot for b in k.bufs] == [0, 1] and k.writable == {k.bufs[0]} and not k.vars

def test_src_must_come_first():
  uops = copy_kernel()
  uops[3], uops[4] = uops[4], uops[3]
  with pytest.raises(KernelContractError, match=r"uop 3 \(Ops.LOAD, dtypes.float\) uses Ops.INDEX \(dtypes.float\) that is not earlier"):
    check_linear(uops)

def test_value_used_after_its_loop():
  out, a, r = P(0), P(1), R(4)
  ld = a.index(r).load()
  st = out.index(r).store(ld)
  e = END(st, r)
  late = out.index(UOp.const(0, dtypes.int)).store(ld)
  with pytest.raises(KernelContractError, match=r"uses Ops.LOAD from uop 4, defined inside the Ops.RANGE of uop 2 which closed at uop 7"):
    check_linear([out, a, r, a.index(r), ld, out.index(r), st, e, out.index(UOp.const(0, dtypes.int)), late])

def test_blocks_must_nest():
  out, a, r0, r1 = P(0), P(1), R(2, 0), R(2, 1)
  st = out.index(r0).store(a.index(r1).load())
  ld = st.src[1]
  with pytest.raises(KernelContractError, match=r"closes the Ops.RANGE of uop 2, but the innermost open block is the Ops.RANGE of uop 3"):
    check_linear([out, a, r0, r1, a.index(r1), ld, out.index(r0), st, END(st, r0), END(st, r1)])
  with pytest.raises(KernelContractError, match=r"the Ops.RANGE of uop 2 is never closed"): check_linear(copy_kernel()[:-1])

def test_ops_outside_the_contract():
  out, a = P(0), P(1)
  bad = UOp(Ops.REDUCE, dtypes.float, (a.index(UOp.const(0, dtypes.int)).load(),), (Ops.ADD,))
  with pytest.raises(KernelContractError, match="Ops.REDUCE is not part of the linear-UOp contract"):
    check_linear([out, a, a.index(UOp.const(0, dtypes.int)), bad.src[0], bad])
  x = P(1, dtypes.uint64).index(UOp.const(0, dtypes.uint64)).load()
  tf = UOp(Ops.THREEFRY, dtypes.uint64, (x, x))
  uops = [P(0, dtypes.uint64), x.src[0].src[0], x.src[0], x, tf]
  with pytest.raises(KernelContractError, match="ClangRenderer has no code for Ops.THREEFRY; the codegen must decompose it"):
    ClangRenderer().render(uops)
  with pytest.raises(KernelContractError, match="empty kernel"): check_linear([])
  with pytest.raises(KernelContractError, match="item 0 of the linear list is a int"): check_linear([3])

def test_renderer_takes_a_checked_kernel_without_walking_it_again(monkeypatch):
  import tinygrad.renderer as renderer_mod
  uops = copy_kernel()
  expected = ClangRenderer().render(uops)
  k = renderer_mod.verify_linear(uops)
  x = P(1, dtypes.uint64).index(UOp.const(0, dtypes.int)).load()
  tf = UOp(Ops.THREEFRY, dtypes.uint64, (x, x))
  with_threefry = check_linear([x.src[0].src[0], x.src[0], x, tf])   # the contract allows any ALU op: renderers differ
  monkeypatch.setattr(renderer_mod, "check_linear", lambda *a, **kw: pytest.fail("a checked kernel was checked again"))
  ren = ClangRenderer()
  assert ren.check(k) is k and ren.to_program(k).src == expected
  assert ren.to_program(k, name="renamed").name == "renamed"
  # the renderer's own check still runs on a checked kernel: an op it has no code for
  with pytest.raises(KernelContractError, match=r"uop 3 \(Ops.THREEFRY.*ClangRenderer has no code for Ops.THREEFRY"): ren.check(with_threefry)

def test_bad_srcs():
  out, a = P(0), P(1)
  c0 = UOp.const(0, dtypes.int)
  val = UOp(Ops.ADD, dtypes.float, (UOp.const(1.0, dtypes.float), UOp.const(2.0, dtypes.float)))
  with pytest.raises(KernelContractError, match="memory INDEX needs a PARAM/BUFFER"): check_linear([val, val.index(c0)])
  with pytest.raises(KernelContractError, match="LOAD gate must be bool"):
    check_linear([a, a.index(c0), val, UOp(Ops.LOAD, dtypes.float, (a.index(c0), val, val))])
  dup = P(0, dtypes.int)
  with pytest.raises(KernelContractError, match=r"slot\(s\) \[0\] are used by more than one PARAM"): check_linear([out, dup])
  f8 = P(2, dtypes.fp8e4m3)
  # fp8 is up to the renderer (the C and CUDA ones have it): the contract takes it, the Python renderer's check rejects it
  check_linear([f8])
  ClangRenderer().check([f8])
  with pytest.raises(KernelContractError, match="dtype dtypes.fp8e4m3 is not supported by PythonRenderer"): PythonRenderer().check([f8])
  with pytest.raises(KernelContractError, match="SHRINK width must be a CONST in"):
    check_linear([a, UOp(Ops.SHRINK, dtypes.float, (a, c0, UOp.const(3, dtypes.int)))])
  with pytest.raises(KernelContractError, match="BITCAST between different sizes"):
    check_linear([a, a.index(c0), a.index(c0).load(), a.index(c0).load().bitcast(dtypes.half)])

def test_renderer_errors():
  r = UOp(Ops.RANGE, dtypes.weakint, (UOp.const(4, dtypes.weakint),), (0, AxisType.LOOP))
  with pytest.raises(KernelContractError, match="weak dtypes must be committed"): ClangRenderer().render([r, END(UOp(Ops.NOOP), r)])
  inv = P(0).index(UOp.const(0, dtypes.int)).store(UOp.invalid())
  with pytest.raises(KernelContractError, match="Invalid constant"): ClangRenderer().render([inv.src[0].src[0], inv.src[0], inv])

def test_variable_names():
  out = P(0, dtypes.int, 1)
  vs = [UOp.variable(n, 0, 9, dtypes.int, param=True).replace(arg=ParamArg(i+1, dtypes.int, (0, 9), 1, n, AddrSpace.ALU))
        for i, n in enumerate(["for", "alu0", "ok", "ok"])]
  s = out.index(UOp.const(0, dtypes.int)).store(vs[0] + vs[1] + vs[2] + vs[3])
  uops = [out, *vs, s.src[0], s.src[1].src[0].src[0], s.src[1].src[0], s.src[1], s]
  src = ClangRenderer().render(uops)
  assert "const int var0, const int var1, const int ok, const int var3)" in src
  assert "def kernel(buf0, var0, var1, ok, var3):" in PythonRenderer().render(uops)

def SP(name, n): return UOp(Ops.SPECIAL, dtypes.int, (n if isinstance(n, UOp) else UOp.const(n, dtypes.int),), name)

def test_specials_and_launch_size():
  out = P(0, dtypes.float, 64)
  g0, g1, l0 = SP("gidx0", 4), SP("gidx1", 2), SP("lidx0", 8)
  st = out.index(g0 + l0 + g1).store(UOp.const(1.0, dtypes.float))
  k = check_linear([out, g0, g1, l0, *[u for u in st.src[0].src[1].toposort() if u.op is Ops.ADD], st.src[0], st])
  assert set(k.specials) == {"gidx0", "gidx1", "lidx0"} and not k.vars
  from tinygrad.renderer import launch_size
  assert launch_size(k) == ((4, 2, 1), (8, 1, 1))

def test_special_errors():
  out = P(0)
  def chk(*uops): return check_linear([out, *uops])
  with pytest.raises(KernelContractError, match="SPECIAL name must be one of"): chk(SP("gidx3", 4))
  with pytest.raises(KernelContractError, match="SPECIAL gidx0 appears twice"): chk(SP("gidx0", 4), SP("gidx0", 8))
  r = R(4)
  with pytest.raises(KernelContractError, match="a launch dimension must be at the top level, not inside the Ops.RANGE"):
    chk(r, SP("lidx0", 4), END(UOp(Ops.NOOP), r))
  ld = out.index(UOp.const(0, dtypes.int)).load().cast(dtypes.int)
  with pytest.raises(KernelContractError, match="a launch size .* may only use CONSTs, variable PARAMs"):
    chk(out.index(UOp.const(0, dtypes.int)), ld.src[0], ld, SP("gidx0", ld))
  with pytest.raises(KernelContractError, match=r"SPECIAL core_id can't be mixed with GPU dims \['gidx0'\]"): chk(SP("core_id", 4), SP("gidx0", 4))
  v = UOp.variable("core_id", 0, 3, dtypes.int, param=True)
  with pytest.raises(KernelContractError, match="SPECIAL core_id and a variable named core_id"): chk(v, SP("core_id", 4))

def test_core_id_special_is_the_last_argument():
  out, n = P(0), UOp.variable("n", 1, 8, dtypes.int, param=True)
  core = SP("core_id", n)
  st = out.index(core).store(UOp.const(1.0, dtypes.float))
  uops = [out, n, core, st.src[0], st]
  k = check_linear(uops)
  assert k.vars == [n, core]
  src = ClangRenderer().render(uops)
  assert "(float* restrict data0_4, const int n, const int core_id) {" in src and "data0_4[core_id] = 1.0f;" in src
  assert "def kernel(buf0, n, core_id):" in PythonRenderer().render(uops)
  spec = PythonRenderer().to_program(uops)
  assert spec.global_size == (n, 1, 1) and spec.launch_dims({"n": 5}) == ((5, 1, 1), None) and spec.vals({"n": 5}) == (5, 0)

def test_spec_checks_specials():
  from tinygrad.renderer import verify_linear
  out = P(0)
  g = SP("gidx0", 4)
  st = out.index(g).store(UOp.const(1.0, dtypes.float))
  verify_linear([out, g, st.src[0], st])
  bad = UOp(Ops.SPECIAL, dtypes.float, (UOp.const(4, dtypes.int),), "gidx0")
  with pytest.raises(RuntimeError, match="SPEC: the linear program is invalid"): verify_linear([out, bad])

# ***** one validator: the renderer's check runs uop/spec.py's spec_linear (srcs and dtypes), its walk only order and scopes *****

def test_render_checks_dtypes_without_spec():
  # an int ADD of a float load: what SPEC's dtype rules say, said by every render too (SPEC=0 renders without the SPEC hooks)
  out, a, r = P(0), P(1), R(4)
  ld = a.index(r).load()
  bad = UOp(Ops.ADD, dtypes.int, (ld, UOp.const(1, dtypes.int)))
  st = out.index(r).store(bad)
  uops = [out, a, r, a.index(r), ld, bad, out.index(r), st, END(st, r)]
  with Context(SPEC=0), pytest.raises(KernelContractError, match=r"uop 5 \(Ops.ADD, dtypes.int\): it breaks the rule at spec.py:\d+; "
                                      r"its srcs: Ops.LOAD dtypes.float, Ops.CONST dtypes.int 1"):
    ClangRenderer().render(uops)

def test_int_only_ops_name_the_dtype():
  out, a, r = P(0), P(1), R(4)
  ld = a.index(r).load()
  div = UOp(Ops.CDIV, dtypes.float, (ld, ld))
  st = out.index(r).store(div)
  with pytest.raises(KernelContractError, match=r"uop 5 \(Ops.CDIV, dtypes.float\): Ops.CDIV is an int op, not for dtypes.float \(FDIV divides"):
    ClangRenderer().render([out, a, r, a.index(r), ld, div, out.index(r), st, END(st, r)])

def test_src_rules_are_the_spec_tables():
  # the messages of the src rules come from spec_linear itself: type_verify says them as check_linear does
  a, c0 = P(1), UOp.const(0, dtypes.int)
  sh = UOp(Ops.SHRINK, dtypes.float, (a, c0, UOp.const(4, dtypes.int)))
  st = UOp(Ops.STORE, dtypes.void, (sh, UOp.const(1.0, dtypes.float)))
  with pytest.raises(RuntimeError, match=r"SPEC: the linear program is invalid at UOp 2: Ops.STORE .*STORE of a 1-lane value to a 4-lane access"):
    type_verify([a, sh, st], spec_linear, "linear program")
  with pytest.raises(KernelContractError, match=r"uop 2 \(Ops.STORE, dtypes.void\): STORE of a 1-lane value to a 4-lane access"):
    check_linear([a, sh, st])
  buf = UOp(Ops.BUFFER, dtypes.float, (UOp.const(0, dtypes.int),), ParamArg(0, dtypes.float, addrspace=AddrSpace.REG))
  with pytest.raises(KernelContractError, match="uop 0 .*a BUFFER needs a literal size > 0"): check_linear([buf])

def test_vector_widths():
  a, c0 = P(1, n=16), UOp.const(0, dtypes.int)
  v = UOp(Ops.SHRINK, dtypes.float, (a, c0, UOp.const(4, dtypes.int))).load()
  acc = v
  for _ in range(3000): acc = UOp(Ops.ADD, dtypes.float, (acc, v))   # a long chain: followed once, no recursion
  assert vector_width(acc) == 4 and vector_width(UOp(Ops.INDEX, dtypes.float, (acc, UOp.const(3, dtypes.int)))) == 1
  out = P(0, n=16)
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.SHRINK, dtypes.float, (out, c0, UOp.const(4, dtypes.int))), acc))
  k = check_linear([out, a, v.src[0], v, *[u for u in acc.toposort() if u.op is Ops.ADD], st.src[0], st])
  assert k.lanes[acc] == 4 and k.lanes[st.src[0]] == 4
  lane = UOp(Ops.INDEX, dtypes.float, (v, UOp.const(4, dtypes.int)))
  with pytest.raises(KernelContractError, match="lane 4 out of range for a 4-lane vector"): check_linear([a, v.src[0], v, lane])
