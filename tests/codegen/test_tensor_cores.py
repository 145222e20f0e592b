# The TC action without a device: the fragment layouts of mma.m16n8k16 against the PTX ISA's formulas, the emulated instruction against
# numpy, what Opt(TC) makes of a matmul's AST and when it refuses (KernelOptError), the heuristics and BEAM's actions on a renderer with
# tensor cores, and the renderer contract's WMMA. Numerics of whole kernels: tests/codegen/test_tensor_cores_emulated.py; CUDA source and NVRTC:
# tests/renderer/test_cuda_render.py.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, AxisType
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, apply_opts, ranges_of, range_size
from tinygrad.codegen.opt.ranges import WARP
from tinygrad.codegen.opt.heuristic import optimize_ast
from tinygrad.codegen.opt.search import kernel_actions
from tinygrad.codegen import get_program
from tinygrad.renderer import check_linear, KernelContractError
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.renderer.tc import CUDA_SM80, cuda_tensor_cores, emulate_wmma

TC = CUDA_SM80[0]

def _ptx_a(lane:int, i:int) -> tuple[int, int]:
  # PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type", A (.f16/.bf16)
  group, tid = lane >> 2, lane % 4
  row = group if i < 2 or 4 <= i < 6 else group + 8
  col = tid * 2 + (i & 1) + (8 if i >= 4 else 0)
  return row, col
def _ptx_b(lane:int, i:int) -> tuple[int, int]: return (lane % 4) * 2 + (i & 1) + (8 if i >= 2 else 0), lane >> 2
def _ptx_c(lane:int, i:int) -> tuple[int, int]: return (lane >> 2) + (8 if i >= 2 else 0), (lane % 4) * 2 + (i & 1)

@pytest.mark.parametrize("which,ref", [(0, _ptx_a), (1, _ptx_b), (2, _ptx_c)])
def test_m16n8k16_layouts_are_the_ptx_ones(which, ref):
  got = {(lane, i): TC.coords(which, lane, i) for lane in range(32) for i in range(TC.elements_per_thread[which])}
  assert got == {k: ref(*k) for k in got}
  N, M, K = TC.dims
  assert sorted(got.values()) == sorted(np.ndindex(*((M, K), (K, N), (M, N))[which]))   # every element held by exactly one lane

def test_tensor_cores_by_arch():
  assert [tc.dtype_in for tc in cuda_tensor_cores("sm_80")] == [dtypes.half, dtypes.bfloat16]
  assert all(tc.dtype_out is dtypes.float32 and tc.dims == (8, 16, 16) for tc in cuda_tensor_cores("sm_90a"))
  assert cuda_tensor_cores("sm_75") == [] and cuda_tensor_cores("bogus") == []
  assert CUDARenderer().tensor_cores == CUDA_SM80 and ClangRenderer().tensor_cores == []
  assert CUDA_SM80[0].name == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
  assert CUDA_SM80[1].name == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

def test_emulated_instruction_is_a_matmul():
  rng = np.random.default_rng(1)
  A, B, C = (rng.standard_normal(s).astype(np.float16).astype(np.float32) for s in ((16, 16), (16, 8), (16, 8)))
  frags = [([A[TC.coords(0, ln, i)] for i in range(8)], [B[TC.coords(1, ln, i)] for i in range(4)], [C[TC.coords(2, ln, i)] for i in range(4)])
           for ln in range(32)]
  D = np.zeros((16, 8), np.float32)
  for ln, d in enumerate(emulate_wmma(TC, frags)):
    for i, v in enumerate(d): D[TC.coords(2, ln, i)] = v
  np.testing.assert_allclose(D, A @ B + C, rtol=1e-6, atol=1e-6)

def _matmul_ast(m:int, k:int, n:int, dt=dtypes.half):
  with Context(DEV="CPU"):
    c = Tensor.empty(m, k, dtype=dt).matmul(Tensor.empty(k, n, dtype=dt), dtype=dtypes.float if dt != dtypes.float else None)
    return [si.ast for si in c.schedule()[0] if si.ast.op is not Ops.COPY][-1]

def _tc(ast, arg=(-1, 0, 1), axis=0, ren=None): return apply_opt(ast, Opt(OptOps.TC, axis, arg), ren or CUDARenderer())

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_tc_makes_a_warp_and_a_wmma(dt):
  ast, m_o, n_o = _tc(_matmul_ast(64, 32, 48, dt))
  wmma = [u for u in ast.toposort() if u.op is Ops.WMMA]
  assert len(wmma) == 1 and wmma[0].arg.dtype_in is dt and len(wmma[0].src) == 16 and wmma[0].dtype is dtypes.float32
  warp = [r for r in ranges_of(ast, AxisType.LOCAL)]
  assert len(warp) == 1 and warp[0].arg[0] == WARP and range_size(warp[0]) == 32
  assert [range_size(r) for r in ranges_of(ast, AxisType.UPCAST)] == [2, 2]                 # the 4 C elements of each thread
  assert range_size(m_o) == 64 // 16 and range_size(n_o) == 48 // 8
  assert [range_size(r) for r in ranges_of(ast, AxisType.REDUCE)] == [32 // 16] and not ranges_of(ast, AxisType.UNROLL)
  assert ast.arg.applied_opts == (Opt(OptOps.TC, 0, (-1, 0, 1)),)

def test_tc_program_launch_and_estimates():
  # a block per 16 x 8 output tile, one warp each; the estimated ops are the matmul's multiply-adds (the accumulation is the instruction's)
  spec = get_program(_tc(_matmul_ast(64, 32, 48))[0], CUDARenderer())
  assert spec.global_size == (4, 6, 1) and spec.local_size == (32, 1, 1)
  assert spec.estimates.ops == 2 * 64 * 32 * 48

@pytest.mark.parametrize("make,opts,ren,match", [
  (lambda: _matmul_ast(32, 32, 32, dtypes.float), [Opt(OptOps.TC, 0, (-1, 0, 1))], CUDARenderer, r"no tensor core .* dtypes.float x dtypes.float"),
  (lambda: _matmul_ast(32, 40, 32), [Opt(OptOps.TC, 0, (-1, 0, 1))], CUDARenderer, r"size 10 is not a multiple of 4 \(tc_opt=2 pads"),
  (lambda: _matmul_ast(24, 32, 32), [Opt(OptOps.TC, 0, (-1, 0, 1))], CUDARenderer, r"size 24 is not a multiple of 16 \(tc_opt=2 pads"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (-1, 0, 1))], ClangRenderer, r"has no tensor cores"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.TC, 0, (-1, 0, 1))], CUDARenderer, r"must come first"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 1, (-1, 0, 1))], CUDARenderer, r"axis 1: the kernel has 1 \(N, M, K\) range choices"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (2, 0, 1))], CUDARenderer, r"tc_select 2"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (-1, 3, 1))], CUDARenderer, r"tc_opt must be"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (-1, 0, 2))], CUDARenderer, r"use_tensor_cores must be 1"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (1, 0, 1))], CUDARenderer, r"no tensor core .* dtypes.half x dtypes.half"),  # the bf16 one
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (-1, 0, 1)), Opt(OptOps.UPCAST, 2, 2)], CUDARenderer,
   r"LOCAL range \(-1,\) of size 32 is a tensor core.s warp"),
  (lambda: _matmul_ast(32, 32, 32), [Opt(OptOps.TC, 0, (-1, 0, 1)), Opt(OptOps.GROUP, 0, 2)], CUDARenderer, r"no GROUP with tensor cores"),
])
def test_tc_refuses(make, opts, ren, match):
  with pytest.raises(KernelOptError, match=match): apply_opts(make(), opts, ren())

def test_tc_refuses_a_kernel_without_a_matmul():
  with Context(DEV="CPU"): ast = [si.ast for si in Tensor.empty(32, 32, dtype=dtypes.half).exp().schedule()[0]][-1]
  with pytest.raises(KernelOptError, match="exactly one reduce, the kernel has 0"): _tc(ast)
  with Context(DEV="CPU"): ast = [si.ast for si in Tensor.empty(32, 32, dtype=dtypes.half).max(axis=1).schedule()[0]][-1]
  with pytest.raises(KernelOptError, match="need a sum"): _tc(ast)

def test_tc_opt_2_pads_m_and_n():
  ast, m_o, n_o = _tc(_matmul_ast(24, 32, 12), (-1, 2, 1))
  assert range_size(m_o) == 2 and range_size(n_o) == 2   # 24 -> 32, 12 -> 16
  gated = [u for u in ast.toposort() if u.op in (Ops.LOAD, Ops.STORE) and len(u.src) == 3]
  assert len(gated) == 8 + 4 + 1   # every A and B element load and the store check their padded range

def test_tc_opt_2_pads_k_of_loads_only():
  ast, _, _ = _tc(_matmul_ast(32, 40, 32), (-1, 2, 1))   # K = 10 x the scheduler's unroll of 4: 10 -> 12, 48 = 3 steps of 16
  assert [range_size(r) for r in ranges_of(ast, AxisType.REDUCE)] == [3]
  with Context(DEV="CPU"):
    t = Tensor.empty(32, 40, dtype=dtypes.half).exp().matmul(Tensor.empty(40, 32, dtype=dtypes.half), dtype=dtypes.float)
    ast = [si.ast for si in t.schedule()[0] if si.ast.op is not Ops.COPY][-1]
  with pytest.raises(KernelOptError, match="K=40 is not a multiple of 16 and a sum of products of other values than loads can't be padded"):
    _tc(ast, (-1, 2, 1))

def test_heuristics_pick_tc_first():
  for dt in (dtypes.half, dtypes.bfloat16):
    ast = optimize_ast(_matmul_ast(128, 64, 128, dt), CUDARenderer())
    assert ast.arg.applied_opts[0].op is OptOps.TC and any(u.op is Ops.WMMA for u in ast.toposort())
    assert [o.op for o in ast.arg.applied_opts[1:]] == [OptOps.UPCAST, OptOps.UPCAST, OptOps.LOCAL]
  assert not any(o.op is OptOps.TC for o in optimize_ast(_matmul_ast(128, 64, 128, dtypes.float), CUDARenderer()).arg.applied_opts)
  assert not any(o.op is OptOps.TC for o in optimize_ast(_matmul_ast(128, 40, 128), CUDARenderer()).arg.applied_opts)   # K: no TC
  with Context(TC=0): assert not any(o.op is OptOps.TC for o in optimize_ast(_matmul_ast(128, 64, 128), CUDARenderer()).arg.applied_opts)

def test_beam_actions_include_tc_where_it_applies():
  acts = kernel_actions(_matmul_ast(64, 64, 64), CUDARenderer())
  assert any(a.op is OptOps.TC for a in acts) and all(any(u.op is Ops.WMMA for u in ast.toposort()) for a, ast in acts.items() if a.op is OptOps.TC)
  assert not any(a.op is OptOps.TC for a in kernel_actions(_matmul_ast(64, 64, 64, dtypes.float), CUDARenderer()))
  assert not any(a.op is OptOps.TC for a in kernel_actions(_matmul_ast(64, 64, 64), ClangRenderer()))

def test_wmma_in_the_linear_contract():
  a, b = (UOp.const(1.0, dtypes.half) for _ in range(2))
  bad = UOp(Ops.WMMA, dtypes.float32, (a, b), TC)
  with pytest.raises(KernelContractError, match="WMMA takes 16 scalars"): check_linear([UOp(Ops.SINK, dtypes.void), bad])

def test_emulated_wmma_needs_whole_warps():
  from tinygrad.renderer.python import PythonRenderer, _wmma
  w = UOp(Ops.WMMA, dtypes.float32, (UOp.const(1.0, dtypes.half),) * 12 + (UOp.const(0.0, dtypes.float32),) * 4, TC)
  with pytest.raises(KernelContractError, match="a WMMA needs lidx0 to be whole warps of 32 threads"):
    PythonRenderer().render([UOp(Ops.SINK, dtypes.void), w])
  # a lane that did not put its fragments in the warp's slots (threads out of lock-step) is an error, not a silent zero
  frags = [([0.0] * 8, [0.0] * 4, [0.0] * 4)] * 31 + [None]
  with pytest.raises(RuntimeError, match=r"lanes \[31\] of the warp did not reach"): _wmma(TC.name, frags + [None], 0)
