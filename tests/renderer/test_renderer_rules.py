# The C renderer is a table of per-op rules (tinygrad/renderer/cstyle.py base_rewrite) plus dialect attributes: a GPU dialect is a
# subclass that overrides a few of them. No compiler needed: these check the text.
import pytest
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.renderer import KernelContractError
from tinygrad.renderer.cstyle import CStyleLanguage, ClangRenderer, base_rewrite
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, ParamArg, AxisType

def P(slot, n, dt=dtypes.float): return UOp(Ops.PARAM, dt, (UOp.const(n, dtypes.int),), ParamArg(slot, dt))
def i(v): return UOp.const(v, dtypes.int)
def alu(op, a, b): return UOp(op, dtypes.int, (a, b))
def special(name, n): return UOp(Ops.SPECIAL, dtypes.int, (n if isinstance(n, UOp) else i(n),), name)

def reverse_in_groups(groups=4, threads=8, n=None) -> list[UOp]:
  """out[g*T + l] = in[g*T + (T-1-l)]: each thread stores its element into local memory, a barrier, then reads its mirror's."""
  out, inp = P(0, groups*threads), P(1, groups*threads)
  g, lid = special("gidx0", groups if n is None else n), special("lidx0", threads)
  tmp = UOp(Ops.BUFFER, dtypes.float, (i(threads),), ParamArg(0, dtypes.float, addrspace=AddrSpace.LOCAL))
  gi = alu(Ops.ADD, alu(Ops.MUL, g, i(threads)), lid)
  st = tmp.index(lid).store(inp.index(gi).load())
  bar = UOp(Ops.BARRIER, dtypes.void, (st,))
  st2 = out.index(gi).store(tmp.after(bar).index(alu(Ops.SUB, i(threads - 1), lid)).load())
  return list(UOp(Ops.SINK, dtypes.void, (st2,), "reverse").toposort())

class CUDAish(CStyleLanguage):
  """A CUDA-flavoured dialect: five attributes and one rule (a bitcast spelled with CUDA's intrinsic)."""
  device = "CUDAISH"
  kernel_typedef = 'extern "C" __global__ void'
  buffer_suffix = ""
  smem_prefix = "__shared__ "
  barrier = "__syncthreads();"
  code_for_workitem = {"g": lambda d: f"blockIdx.{'xyz'[int(d)]}", "l": lambda d: f"threadIdx.{'xyz'[int(d)]}"}
  string_rewrite = PatternMatcher([
    (UPat(Ops.BITCAST, dtypes.float, src=(UPat(dtype=dtypes.int, name="v"),), name="x"), lambda ctx, x, v: f"__int_as_float({ctx.opnd(x, v)})"),
  ]) + base_rewrite

class OpenCLish(CStyleLanguage):
  """An OpenCL-flavoured dialect: attributes only."""
  device = "OPENCLISH"
  kernel_typedef = "__kernel void"
  buffer_prefix = "__global "
  buffer_suffix = ""
  smem_align = "__attribute__ ((aligned (16))) "
  smem_prefix = "__local "
  barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
  code_for_workitem = {"g": lambda d: f"get_group_id({d})", "l": lambda d: f"get_local_id({d})"}
  type_map = {**CStyleLanguage.type_map, dtypes.uint32: "uint"}

def test_cuda_dialect_renders_dims_local_memory_and_barrier():
  assert CUDAish().render(reverse_in_groups()) == """\
extern "C" __global__ void reverse(float* data0_32, const float* data1_32) {
  int gidx0 = blockIdx.x;
  int lidx0 = threadIdx.x;
  int alu0 = (gidx0*8)+lidx0;
  __shared__ float temp0[8];
  float val0 = data1_32[alu0];
  temp0[lidx0] = val0;
  __syncthreads();
  data0_32[alu0] = temp0[7-lidx0];
}
"""

def test_opencl_dialect_is_attributes_only():
  src = OpenCLish().render(reverse_in_groups())
  assert src.startswith("__kernel void reverse(__global float* data0_32, const __global float* data1_32) {\n  int gidx0 = get_group_id(0);\n")
  assert "  int lidx0 = get_local_id(0);\n" in src and "\n  __attribute__ ((aligned (16))) __local float temp0[8];\n" in src
  assert "  barrier(CLK_LOCAL_MEM_FENCE);\n" in src

def test_a_subclass_rule_wins_and_the_rest_fall_through():
  out, inp = P(0, 1), P(1, 1, dtypes.int)
  st = out.index(i(0)).store(inp.index(i(0)).load().bitcast(dtypes.float))
  uops = list(UOp(Ops.SINK, dtypes.void, (st,), "bc").toposort())
  assert "data0_1[0] = __int_as_float(val0);" in CUDAish().render(uops)
  assert "union" in ClangRenderer().render(uops) and "union" in OpenCLish().render(uops)  # the base rule

def test_literal_and_type_attributes():
  class Suffixed(CStyleLanguage):
    float_suffix, int_suffix, type_map = "F", {dtypes.uint32: "U"}, {dtypes.bool: "bool", dtypes.uint32: "uint"}
  out = P(0, 1, dtypes.uint32)
  x = out.index(i(0)).load()
  st = out.index(i(0)).store(UOp(Ops.ADD, dtypes.uint32, (x, UOp.const(3, dtypes.uint32))))
  src = Suffixed().render(list(UOp(Ops.SINK, dtypes.void, (st,), "lit").toposort()))
  assert "uint* restrict data0_1" in src and "val0+3U" in src
  assert Suffixed().render_literal(1.5, dtypes.float32) == "1.5F" and ClangRenderer().render_literal(1.5, dtypes.float32) == "1.5f"

def test_clang_has_no_gpu_dims():
  with pytest.raises(KernelContractError, match=r"ClangRenderer has no GPU dims \(code_for_workitem\) for SPECIAL gidx0"):
    ClangRenderer().render(reverse_in_groups())

def test_symbolic_launch_size():
  n = UOp.variable("n", 1, 16, dtypes.int, param=True)
  uops = reverse_in_groups(n=n)
  src = CUDAish().render(uops)
  assert "const int n)" in src and "int gidx0 = blockIdx.x;" in src
  spec = CUDAish().to_program(uops)
  assert spec.global_size[0] is n and spec.global_size[1:] == (1, 1) and spec.local_size == (8, 1, 1)
  assert spec.launch_dims({"n": 3}) == ((3, 1, 1), (8, 1, 1)) and spec.launch_dims({n: 5})[0] == (5, 1, 1)
  with pytest.raises(RuntimeError, match="launch size 'n' needs a value"): spec.launch_dims({})

def test_capabilities_declared():
  r = ClangRenderer()
  assert r.has_threads and not r.has_local and not r.has_shared and r.global_max[0] >= 1 and r.supports_float4 and r.tensor_cores == []
  from tinygrad.renderer.python import PythonRenderer
  assert not PythonRenderer().has_threads and not PythonRenderer().has_local

def test_estimates_count_every_launch():
  assert CUDAish().to_program(reverse_in_groups()).estimates.lds == 4 * 8 * (4 + 4)  # 32 threads, a float in and out each
  n = UOp.variable("n", 1, 16, dtypes.int, param=True)
  assert CUDAish().to_program(reverse_in_groups(n=n)).estimate({"n": 3}).lds == 3 * 8 * 8

def _loop_kernel(trip:int, body_ops:int, math:bool=False, inner_trip:int|None=None) -> list[UOp]:
  """out[r] = a sum of `body_ops` adds of a[r] (through EXP2 with math), inside a loop of `trip` steps (around a loop of inner_trip)."""
  out, a = P(0, 4096), P(1, 4096)
  r = UOp(Ops.RANGE, dtypes.int, (i(trip),), (0, AxisType.LOOP))
  uops = [out, a, r]
  idx = r
  if inner_trip is not None:
    r2 = UOp(Ops.RANGE, dtypes.int, (i(inner_trip),), (1, AxisType.LOOP))
    idx = alu(Ops.ADD, r, r2)
    uops += [r2, idx]
  v = a.index(idx).load()
  uops += [a.index(idx), v]
  if math: uops.append(v := UOp(Ops.EXP2, dtypes.float, (v,)))
  for _ in range(body_ops):
    uops.append(v := UOp(Ops.ADD, dtypes.float, (v, v)))
  st = out.index(idx).store(v)
  uops += [out.index(idx), st]
  if inner_trip is not None: uops.append(st := UOp(Ops.END, dtypes.void, (st, r2)))
  return uops + [UOp(Ops.END, dtypes.void, (st, r)), UOp(Ops.SINK, dtypes.void, (), "k")]

@pytest.mark.parametrize("trip, body_ops, math, inner_trip, disabled", [
  (192, 40, False, None, True),    # a long loop around a big (already unrolled) body: clang's partial unroll only copies it
  (192, 4, False, None, False),    # a small body: unrolling lets clang vectorize and pipeline it
  (8, 40, False, None, False),     # a short loop: clang may unroll it fully (an unrolled 8-step reduce lets the loads be hoisted)
  (192, 40, True, None, False),    # transcendentals: unrolled copies are vectorized together
  (64, 1, False, 32, True),        # a loop around a long loop: clang's unroll copies the inner loop whole
  (4, 1, False, 32, True),         # however short
  (4, 1, False, 3, False),         # around a short loop, which clang unrolls away: unrolling both is clang's call
])
def test_clang_unroll_pragma(trip, body_ops, math, inner_trip, disabled):
  src = ClangRenderer().render(_loop_kernel(trip, body_ops, math, inner_trip))   # the pragma's text is the rule under test
  outer = f"for (int ridx0 = 0; ridx0 < {trip}; ridx0++) {{"
  assert (f"#pragma clang loop unroll(disable)\n  {outer}" in src) == disabled, src
  assert src.count("#pragma") == (1 if disabled else 0)   # never on the inner loop here (a one-op body)

def test_clang_offset_access_is_pointer_arithmetic():
  # out[r] = a[2r] + a[2r+1]: the CPU kernels compile with -fwrapv, under which a[(2r)+1] is at sext(2r+1), not provably next to a[2r],
  # so clang can't combine the two loads; (a+2r)[1] is pointer arithmetic. Other dialects, and an index with a name, keep buf[i]
  def kernel(second:bool) -> list[UOp]:
    out, a, b = P(0, 64), P(1, 128, dtypes.uint8), P(2, 128, dtypes.uint8)
    r = UOp(Ops.RANGE, dtypes.int, (i(64),), (0, AxisType.LOOP))
    even = alu(Ops.MUL, r, i(2))
    odd = alu(Ops.ADD, even, i(1))
    loads = [a.index(even).load(), a.index(odd).load()] + ([b.index(odd).load()] if second else [])
    vals = [ld.cast(dtypes.float) for ld in loads]
    v = vals[0]
    for w in vals[1:]: v = UOp(Ops.ADD, dtypes.float, (v, w))
    st = out.index(r).store(v)
    return list(UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, r)),), "k").toposort())
  src = ClangRenderer().render(kernel(False))
  assert "(data1_128+alu0)[1]" in src and "data1_128[alu0]" in src, src
  assert "data1_128[alu0+1]" in CUDAish().render(kernel(False))
  src = ClangRenderer().render(kernel(True))   # 2r+1 used twice: a named value, read as it is
  assert "data1_128[alu1]" in src and "data2_128[alu1]" in src, src
