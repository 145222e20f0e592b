# The CUDA backend without a GPU: CUDARenderer's source for each kind of kernel (launch dims, shared memory and barriers, half/bfloat16,
# vectors, math), and DEV=NULL:CUDA, which renders every kernel of real Tensor programs with it and compiles each one with NVRTC (the
# tests that compile skip without cuda-python and the nvrtc wheel: pip install '.[cuda]'). Clear errors for DEV=CUDA without cuda-python
# or without a GPU. The GPU half lives in tests/runtime/test_cuda.py.
import os
import sys
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Device, nn
from tinygrad.device import CompileError, CompilerNotFoundError
from tinygrad.helpers import Context
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opts
from tinygrad.renderer import verify_linear
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg
from tinygrad.dtype import AddrSpace

def _have_nvrtc() -> bool:
  try:
    from tinygrad.runtime.support.compiler_cuda import nvrtc_version
    nvrtc_version()
  except Exception: return False
  return True
needs_nvrtc = pytest.mark.skipif(not _have_nvrtc(), reason="cuda-python / the NVRTC library are not installed (pip install '.[cuda]')")

# ***** rendering (no compiler) *****

def _ast(*tensors:Tensor):
  """The kernel ASTs of realizing tensors (their schedule, without running it)."""
  return [si.ast for si in tensors[0].schedule(*tensors[1:])[0] if si.ast.op is not Ops.COPY]

def _src(t:Tensor, opts=None, arch="sm_80") -> str:
  ren = CUDARenderer(target=None)
  ren.target = ren.target.replacedefault(arch=arch)
  ast = _ast(t)[-1]
  if opts is not None: ast = apply_opts(ast, opts, ren)
  return get_program(ast, ren).src

def test_renderer_capabilities():
  ren = CUDARenderer()
  assert ren.has_local and ren.has_shared and not ren.has_threads and ren.supports_float4
  assert ren.local_max == (1024, 1024, 64) and ren.global_max == (2**31 - 1, 65535, 65535) and ren.shared_max == 49152
  assert ren.arch == "sm_80"

def test_elementwise_is_a_global_kernel_with_launch_bounds():
  with Context(DEV="CPU"): src = _src(Tensor.empty(4096) * 2 + 1)
  assert 'extern "C" __global__ void __launch_bounds__(' in src
  assert "blockIdx.x" in src and "threadIdx.x" in src
  assert "float4" in src and "make_float4(" in src      # the optimizer's UPCAST: one 16-byte load and store per thread
  assert "restrict " not in src.replace("__restrict__", "")   # C's restrict is not C++

def test_group_reduce_uses_shared_memory_and_a_barrier():
  with Context(DEV="CPU"): src = _src(Tensor.empty(64, 4096).sum(axis=1), [Opt(OptOps.GROUPTOP, 0, 16)])
  assert "__shared__ float temp0[" in src and "__syncthreads();" in src and "__launch_bounds__(16)" in src

def test_math_and_special_values():
  with Context(DEV="CPU"):
    a = Tensor.empty(64)
    src = _src((a.exp2() + a.log2() + a.sqrt() + a.sin() + a.maximum(float("inf")) + (a < float("nan")).float()).contiguous())
  for fn in ("exp2f(", "log2f(", "sqrtf(", "__int_as_float(0x7f800000)"): assert fn in src, fn
  assert "__builtin" not in src

@pytest.mark.parametrize("dt,ctype,header", [(dtypes.half, "half", "cuda_fp16.h"), (dtypes.bfloat16, "__nv_bfloat16", "cuda_bf16.h")])
def test_half_types_are_cuda_types_computed_as_float(dt, ctype, header):
  with Context(DEV="CPU"): src = _src((Tensor.empty(64, dtype=dt) * 3).exp())
  assert f"#include <{header}>" in src and f"{ctype}* __restrict__ data0" in src and "float" in src

def test_bitcast_through_memcpy():
  with Context(DEV="CPU"): src = _src(Tensor.empty(64).bitcast(dtypes.int32) + 1)
  assert "tg_bitcast<int>(" in src and "memcpy" in src

def test_unaligned_vector_access_is_split():
  # a shifted slice reads 4 consecutive floats from an index the vector's alignment doesn't divide: a float4 load would fault there
  with Context(DEV="CPU"):
    x = Tensor.empty(4097)
    src = _src(x[1:] * 2)
  loads = [line for line in src.splitlines() if "data1_4097" in line and "=" in line]
  assert loads and not any("*((float4*)(data1_4097" in line for line in loads), src
  assert "make_float4(data1_4097[" in src, src

def test_wide_vectors_are_structs():
  # an 8-lane UPCAST of an int64 output: CUDA has no 8-lane vector types, the renderer declares one
  ren = CUDARenderer()
  assert ren.vector_type(dtypes.float32, 4) == "float4" and ren.vector_type(dtypes.int64, 2) == "longlong2"
  assert ren.vector_type(dtypes.float32, 8) == "tg_float8" and "__align__(16)" in ren.render_vector_prefix(dtypes.float32, 8)
  assert ren.render_vector_prefix(dtypes.float32, 4) == ""
  with Context(DEV="CPU"): src = _src(Tensor.empty(4096) + 1, [Opt(OptOps.UPCAST, 0, 8)])
  assert "struct __align__(16) tg_float8 { float v[8]; };" in src and ".v[7]" in src

def test_local_buffer_contract_kernel():
  # a hand-written linear kernel with a local BUFFER and a BARRIER renders with __shared__ and __syncthreads
  P = lambda slot, n: UOp(Ops.PARAM, dtypes.float, (UOp.const(n, dtypes.int),), ParamArg(slot, dtypes.float))
  out, inp = P(0, 4), P(1, 32)
  g = UOp(Ops.SPECIAL, dtypes.int, (UOp.const(4, dtypes.int),), "gidx0")
  lid = UOp(Ops.SPECIAL, dtypes.int, (UOp.const(8, dtypes.int),), "lidx0")
  tmp = UOp(Ops.BUFFER, dtypes.float, (UOp.const(8, dtypes.int),), ParamArg(0, dtypes.float, addrspace=AddrSpace.LOCAL))
  st = tmp.index(lid).store(inp.index(g * 8 + lid).load())
  after = tmp.after(UOp(Ops.BARRIER, dtypes.void, (st,)))
  acc = after.index(UOp.const(0, dtypes.int)).load()
  for j in range(1, 8): acc = acc + after.index(UOp.const(j, dtypes.int)).load()
  sink = UOp(Ops.SINK, dtypes.void, (out.index(g).store(acc),), "group_sums")
  src = CUDARenderer().render(list(sink.toposort()))
  assert "__align__(16) __shared__ float temp0[8];" in src and "__syncthreads();" in src and "__launch_bounds__(8)" in src
  assert "int gidx0 = blockIdx.x;" in src and "int lidx0 = threadIdx.x;" in src

# ***** DEV=NULL:CUDA: every kernel of a Tensor program rendered for CUDA and compiled by NVRTC *****

@pytest.fixture
def null_cuda(monkeypatch):
  """Runs the test's Tensor code on NULL:CUDA; yields the list of CUDA sources compiled (each checked by NVRTC)."""
  srcs: list[str] = []
  with Context(DEV="NULL:CUDA"):
    comp = Device["NULL"].compiler
    assert type(comp).__name__ == "CUDACompiler"
    orig = comp.compile_cached_many
    def spy(batch, jobs=None):
      srcs.extend(batch)
      return orig(batch, jobs)
    monkeypatch.setattr(comp, "compile_cached_many", spy)
    yield srcs
  # every kernel met the renderer contract (SPEC) and is CUDA
  assert srcs and all('extern "C" __global__' in s for s in srcs)

def _check_programs(srcs:list[str]):
  """The generated kernels pass the linear-UOp contract and CUDARenderer's checks again, from the cached specs."""
  from tinygrad.engine.realize import _specs
  specs = [s for s in _specs.values() if s.src in srcs]
  assert specs
  for s in specs: CUDARenderer().check(verify_linear(s.uops))

@needs_nvrtc
def test_null_cuda_elementwise_and_reduce(null_cuda):
  a, b = Tensor.rand(33, 65), Tensor.rand(33, 65)
  Tensor.realize(a + b, a * b - 1, (a / b).sqrt(), a.maximum(b), (a < b).where(a, b), a.exp().log(), a.sin(), a.sum(), a.max(axis=0),
                 a.sum(axis=1), a.argmax(axis=1), (a * 1000).cast(dtypes.int32) // 7, (a * 100).cast(dtypes.uint8) + 3, a.cast(dtypes.int64) << 3)
  _check_programs(null_cuda)

@needs_nvrtc
def test_null_cuda_matmul_and_conv2d(null_cuda):
  x, w = Tensor.rand(2, 3, 16, 16), Tensor.rand(8, 3, 3, 3)
  Tensor.realize(Tensor.rand(64, 96) @ Tensor.rand(96, 48), x.conv2d(w, padding=1).relu(), x.max_pool2d(2), x.avg_pool2d(2))
  _check_programs(null_cuda)

@needs_nvrtc
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_null_cuda_half_types(null_cuda, dt):
  a, b = Tensor.rand(32, 48).cast(dt), Tensor.rand(48, 40).cast(dt)
  Tensor.realize(a @ b, (a * 2 + 1).exp(), a.sum(axis=1), a.softmax(), a.cast(dtypes.float32), a.bitcast(dtypes.int16), a.max())
  assert any(("half" if dt is dtypes.half else "__nv_bfloat16") in s for s in null_cuda)

_MMA = {dtypes.half: "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", dtypes.bfloat16: "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_tc_renders_mma_sync(dt):
  # Opt(TC): the reduce is one inline-asm mma.sync per K step on the thread's fragments (numerics: tests/codegen/test_tensor_cores_emulated.py)
  with Context(DEV="CPU"): t = Tensor.empty(64, 32, dtype=dt).matmul(Tensor.empty(32, 48, dtype=dt), dtype=dtypes.float)
  src = _src(t, [Opt(OptOps.TC, 0, (-1, 0, 1))])
  fn = f"tg_mma_m16n8k16_{dt.name}"
  assert f'asm volatile("{_MMA[dt]} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%10, %11, %12, %13}};"' in src
  assert f"__device__ __forceinline__ float4 {fn}(" in src and src.count(f"{fn}(") == 2   # the helper and one call in the loop
  # which accumulates into the thread's 4 accumulators itself (codegen/opt/tc.py pm_wmma_acc): C is them, D is stored back
  assert "acc0[0], acc0[1], acc0[2], acc0[3]);" in src and "acc0[3] = alu" in src and "acc0[0]+" not in src
  assert "__launch_bounds__(32)" in src and "int lidx0 = threadIdx.x;" in src         # one warp: lidx0
  assert "__floats2half2_rn(a0, a1)" in src if dt is dtypes.half else "__floats2bfloat162_rn(a0, a1)" in src

@needs_nvrtc
def test_null_cuda_tensor_cores(null_cuda):
  # DEV=NULL:CUDA: the GPU heuristics put an fp16/bf16 matmul on tensor cores (TC first) and NVRTC compiles the mma.sync for sm_80; the
  # same kernels compile for sm_90 too
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  for dt in (dtypes.half, dtypes.bfloat16):
    a, b = Tensor.rand(128, 64).cast(dt), Tensor.rand(64, 96).cast(dt)
    Tensor.realize(a @ b, a[:64].matmul(b[:, :64], dtype=dtypes.float).relu())
  mma = {dt: [s for s in null_cuda if m in s] for dt, m in _MMA.items()}
  assert all(len(v) == 2 for v in mma.values())
  _check_programs(null_cuda)
  for s in mma[dtypes.half] + mma[dtypes.bfloat16]: assert CUDACompiler("sm_90").compile(s)[:4] == b"\x7fELF"

@needs_nvrtc
@pytest.mark.parametrize("dt,ctype", [(dtypes.fp8e4m3, "__nv_fp8_e4m3"), (dtypes.fp8e5m2, "__nv_fp8_e5m2")])
def test_null_cuda_fp8(null_cuda, dt, ctype):
  a = Tensor.rand(32, 32).cast(dt).realize()
  Tensor.realize((a * 2).exp(), a.float() @ a.float(), a.bitcast(dtypes.uint8), a.cast(dtypes.half), a.sum(axis=1), (a + 1).cast(dt))
  assert any(f"{ctype}* __restrict__ data0" in s and "#include <cuda_fp8.h>" in s for s in null_cuda)

def test_fp8_only_where_the_renderer_has_it():
  from tinygrad.renderer import KernelContractError
  with Context(DEV="PYTHON"):
    with pytest.raises(KernelContractError, match="fp8e4m3 is not supported by PythonRenderer"): Tensor([1.0, 2.0]).cast(dtypes.fp8e4m3).realize()
    assert dtypes.fp8e4m3 in CUDARenderer().supported_dtypes() and dtypes.fp8e4m3fnuz not in CUDARenderer().supported_dtypes()

@needs_nvrtc
def test_null_cuda_softmax_and_big_reduce(null_cuda):
  x = Tensor.rand(64, 1000)
  Tensor.realize(x.softmax(axis=1), x.log_softmax(axis=1), Tensor.rand(200000).sum(), Tensor.rand(4, 50000).max(axis=1))
  # the long reduces with few outputs are grouped across a block's threads through shared memory
  assert any("__shared__" in s and "__syncthreads();" in s for s in null_cuda)

@needs_nvrtc
def test_null_cuda_grouped_reduce_opt(null_cuda):
  from tinygrad.engine.realize import get_spec
  from tinygrad.engine.realize import run_schedule
  with Context(BEAM=0):
    sched = Tensor.rand(16, 512).sum(axis=1).schedule()[0]
  run_schedule(sched)   # the GPU heuristic picks GROUPTOP for a few long rows: partials in __shared__ memory, a barrier, a final sum
  assert any("__shared__" in s for s in null_cuda), [get_spec(si, "NULL").applied_opts for si in sched]

@needs_nvrtc
def test_null_cuda_mlp_training_step(null_cuda):
  class MLP:
    def __init__(self): self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 4)
    def __call__(self, x): return self.l2(self.l1(x).relu())
  model = MLP()
  opt = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-3)
  with Context(TRAINING=1):
    loss = model(Tensor.rand(8, 16)).sparse_categorical_crossentropy(Tensor([0, 1, 2, 3, 0, 1, 2, 3]))
    opt.zero_grad()
    loss.backward()
    opt.step()
  Tensor.realize(loss)
  assert len(null_cuda) >= 3
  _check_programs(null_cuda)

@needs_nvrtc
def test_null_cuda_arch_from_dev():
  with Context(DEV="NULL:CUDA:sm_90"):
    dev = Device["NULL"]
    assert dev.renderer.arch == "sm_90" and dev.compiler.arch == "sm_90"
    lib = dev.compiler.compile_cached(dev.renderer.to_program(get_program(_ast(Tensor.empty(256) + 1)[-1], dev.renderer).uops).src)
  assert lib[:4] == b"\x7fELF"   # a cubin: NVRTC 12 knows sm_90
  with Context(DEV="NULL:CUDA"): assert Device["NULL"].renderer.arch == "sm_80"

@needs_nvrtc
def test_program_loaded_per_arch():
  # the same source compiled for sm_80 and then sm_90 in one process gives two programs, each from its own arch's binary
  ast = _ast(Tensor.empty(256) + 1)[-1]
  progs = {}
  for arch in ("sm_80", "sm_90"):
    with Context(DEV=f"NULL:CUDA:{arch}"):
      dev = Device["NULL"]
      spec = dev.renderer.to_program(get_program(ast, dev.renderer).uops)
      progs[arch] = (spec.src, dev.get_program(spec).lib)
  assert progs["sm_80"][0] == progs["sm_90"][0] and progs["sm_80"][1] != progs["sm_90"][1]

@needs_nvrtc
def test_compile_error_shows_the_numbered_source_and_the_log():
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  src = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_name;\n}\n'
  with pytest.raises(CompileError, match=r"(?s)identifier \"undefined_name\" is undefined.*   2    a\[0\] = undefined_name;"):
    CUDACompiler("sm_80").compile(src)

@needs_nvrtc
def test_compile_many_on_threads_matches_compile():
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  comp = CUDACompiler("sm_80")
  srcs = [f'extern "C" __global__ void k{i}(float* a) {{ a[threadIdx.x] *= {i}.0f; }}' for i in range(3)]
  assert comp.compile_many(srcs) == [comp.compile(s) for s in srcs]
  with pytest.raises(CompileError, match="k_bad"): comp.compile_many(srcs + ['extern "C" __global__ void k_bad(float* a) { a[0] = b; }'])

def test_bad_arch_is_a_clear_error():
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  with pytest.raises(ValueError, match="sm_<major><minor>"): CUDACompiler("ampere")

# ***** DEV=CUDA says what is missing *****

def test_cuda_without_cuda_python(monkeypatch):
  from tinygrad.runtime import ops_cuda
  from tinygrad.runtime.support import compiler_cuda
  monkeypatch.setitem(sys.modules, "cuda.bindings", None)   # `from cuda.bindings import driver` raises ImportError
  ops_cuda.device_count.cache_clear()
  try:
    with pytest.raises(RuntimeError, match=r"needs cuda-python, which is not installed: pip install 'tinygrad\[cuda\]'"): ops_cuda.CUDADevice("CUDA")
    with pytest.raises(CompilerNotFoundError, match="NVRTC from cuda-python, which is not installed"): compiler_cuda.CUDACompiler().compile("")
    assert not ops_cuda.cuda_usable()
  finally: ops_cuda.device_count.cache_clear()

def test_cuda_without_a_gpu():
  from tinygrad.runtime import ops_cuda
  pytest.importorskip("cuda.bindings.driver")
  if ops_cuda.cuda_usable(): pytest.skip("a GPU is here")
  with pytest.raises(RuntimeError, match="DEV=CUDA: .*(driver|GPU)"): Device["CUDA:7"]
  with Context(DEV=""): assert Device.DEFAULT == "CPU"   # no GPU: the CPU is the default device

def test_default_device_without_a_driver_does_not_import_cuda_python():
  # importing cuda-python's driver module costs ~0.3 s: without the NVIDIA driver library the default device is CPU without it
  import subprocess
  from tinygrad.runtime import ops_cuda
  if ops_cuda._driver_library_present(): pytest.skip("the NVIDIA driver is here")
  code = "import sys; from tinygrad import Device; print(Device.DEFAULT, 'cuda.bindings.driver' in sys.modules)"
  env = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEVICE")}
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
  assert out.stdout.split() == ["CPU", "False"], out

def test_default_device_prefers_a_gpu(monkeypatch):
  import tinygrad.device as device
  from tinygrad.runtime import ops_cuda
  monkeypatch.setattr(ops_cuda, "cuda_usable", lambda: True)
  device.Device._preferred_default.cache_clear()
  monkeypatch.delenv("DEVICE", raising=False)
  try:
    with Context(DEV=""): assert Device.DEFAULT == "CUDA"
    with Context(DEV="CPU"): assert Device.DEFAULT == "CPU"
  finally: device.Device._preferred_default.cache_clear()
  np.testing.assert_equal(Tensor([1, 2], device="CPU").numpy(), [1, 2])

@needs_nvrtc
def test_beam_workers_compile_for_the_renderers_arch():
  # a BEAM worker rebuilds the compiler from the payload: for CUDA it must target the same arch (an sm_80 cubin doesn't load on sm_90)
  import pickle
  from tinygrad.codegen.opt import search
  with Context(DEV="NULL:CUDA:sm_90"):
    ren = Device["NULL"].renderer
    ast = _ast(Tensor.empty(64, 64).sum(axis=1))[-1]
    data = search.worker_payload(ast, [[Opt(OptOps.LOCAL, 0, 16)]], ren)
    assert pickle.loads(data)[-1] == (type(ren.compiler), ("sm_90",))
    ok, res = search.run_payload(data)
  assert ok == "ok" and res[0][0] == "ok", res
  assert search._compilers[(type(ren.compiler), ("sm_90",))].arch == "sm_90"
