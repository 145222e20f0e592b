# The CUDA renderer: the C renderer's rules (renderer/cstyle.py) with CUDA's spelling. What differs from C: kernels are
# `extern "C" __global__` with __launch_bounds__ (the threads per block), launch dims are blockIdx/threadIdx, local BUFFERs are
# __shared__ and a BARRIER is __syncthreads(), half/bfloat16/fp8 buffers hold the types of cuda_fp16.h/cuda_bf16.h/cuda_fp8.h (values
# are still computed as float and rounded after every op, as the contract says), vectors are CUDA's vector types (float4, int2, ...;
# a struct for 8 and 16 lanes), math is CUDA's libdevice functions, and bitcasts go through memcpy (C++ has no compound literals).
# From sm_80 on, the TC action's WMMA is an inline-asm mma.sync.aligned.m16n8k16 (fp16/bf16 in, fp32 accumulation) in a helper.
# NVRTC compiles it (runtime/support/compiler_cuda.py); DEV=NULL:CUDA renders and compiles every kernel without a GPU.
from __future__ import annotations
from typing import Callable, Sequence
from tinygrad.helpers import strip_parens, prod
from tinygrad.dtype import DType, dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.renderer import LinearKernel, const_value, launch_size, mem_root
from tinygrad.renderer.cstyle import CStyleLanguage, base_rewrite, _CWriter, _EMULATED, _fsuffix
from tinygrad.renderer.tc import TensorCore, cuda_tensor_cores

# CUDA's own vector types (vector_types.h, always there under NVRTC): 2 and 4 lanes of 1- to 4-byte elements, 2 of 8-byte ones
_VEC_BASE = {dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort", dtypes.int32: "int",
             dtypes.uint32: "uint", dtypes.int64: "longlong", dtypes.uint64: "ulonglong", dtypes.float32: "float", dtypes.float64: "double"}
_LANE_NAMES = "xyzw"

def _builtin_vector(dt:DType, lanes:int) -> bool: return dt in _VEC_BASE and (lanes == 2 or (lanes == 4 and dt.itemsize <= 4))
def _vector_align(dt:DType, lanes:int) -> int:
  """The alignment of a vector type in bytes: its size for CUDA's (float4: 16), capped at 16 for the structs."""
  return dt.itemsize * lanes if _builtin_vector(dt, lanes) else min(16, dt.itemsize * lanes)

# half/bfloat16 are stored as CUDA's types and computed as float: the helper names of cstyle's _EMULATED, defined with CUDA's
# round-to-nearest-even conversions
_HALF_HELPERS = """#include <cuda_fp16.h>
__device__ __forceinline__ float tg_h2f(half x) { return __half2float(x); }
__device__ __forceinline__ half tg_f2h(float x) { return __float2half_rn(x); }
__device__ __forceinline__ float tg_rh(float x) { return __half2float(__float2half_rn(x)); }"""
_BF16_HELPERS = """#include <cuda_bf16.h>
__device__ __forceinline__ float tg_bf2f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ __nv_bfloat16 tg_f2bf(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ float tg_rbf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }"""
# fp8 (cuda_fp8.h): finite values beyond the range saturate (__NV_SATFINITE); an infinity is e4m3's NaN and stays e5m2's infinity
def _fp8_helpers(kind:str, inf_code:int) -> str:
  t = f"__nv_fp8_{kind}"
  return f"""__device__ __forceinline__ float tg_{kind}_2f({t} x) {{ return (float)x; }}
__device__ __forceinline__ {t} tg_f2{kind}(float x) {{
  {t} r;
  r.__x = isinf(x) ? (__nv_fp8_storage_t)(signbit(x) ? {inf_code | 0x80:#x} : {inf_code:#x})
                   : __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_{kind.upper()});
  return r;
}}
__device__ __forceinline__ float tg_r{kind}(float x) {{ return (float)tg_f2{kind}(x); }}"""
_FP8_HELPERS = {dtypes.fp8e4m3: "#include <cuda_fp8.h>\n" + _fp8_helpers("e4m3", 0x7f),
                dtypes.fp8e5m2: "#include <cuda_fp8.h>\n" + _fp8_helpers("e5m2", 0x7c)}
# the same bits as another type of the same size (memcpy compiles to a register move)
_BITCAST_HELPER = "template <class T, class F> __device__ __forceinline__ T tg_bitcast(F x) { T r; memcpy(&r, &x, sizeof(T)); return r; }"

# tensor cores (renderer/tc.py): one helper per instruction, taking the thread's fragment elements as floats (half/bfloat16 values are
# computed as float, so packing them back into pairs is exact) and returning its D elements
_MMA_TYPES = {dtypes.half: ("half2", "__floats2half2_rn"), dtypes.bfloat16: ("__nv_bfloat162", "__floats2bfloat162_rn")}
def _mma_fn(tc:TensorCore) -> str: return f"tg_mma_m{tc.dims[1]}n{tc.dims[0]}k{tc.dims[2]}_{tc.dtype_in.name}"
def _mma_helper(tc:TensorCore) -> str:
  pair, pack = _MMA_TYPES[tc.dtype_in]
  na, nb, nc = tc.elements_per_thread
  args = ", ".join([f"float a{i}" for i in range(na)] + [f"float b{i}" for i in range(nb)] + [f"float c{i}" for i in range(nc)])
  def regs(x:str, n:int) -> str: return ", ".join(f"{pack}({x}{i}, {x}{i+1})" for i in range(0, n, 2))
  ops = [f"%{i}" for i in range(nc + na // 2 + nb // 2 + nc)]
  ins = [f'"r"(A[{i}])' for i in range(na // 2)] + [f'"r"(B[{i}])' for i in range(nb // 2)] + [f'"f"(c{i})' for i in range(nc)]
  groups = [ops[:nc], ops[nc:nc + na // 2], ops[nc + na // 2:nc + na // 2 + nb // 2], ops[nc + na // 2 + nb // 2:]]
  asm = f"{tc.name} " + ", ".join("{" + ", ".join(g) + "}" for g in groups) + ";"
  return f"""{_HEADERS[tc.dtype_in]}
__device__ __forceinline__ float{nc} {_mma_fn(tc)}({args}) {{
  {pair} a[{na // 2}] = {{{regs("a", na)}}};
  {pair} b[{nb // 2}] = {{{regs("b", nb)}}};
  const unsigned *A = reinterpret_cast<const unsigned*>(a), *B = reinterpret_cast<const unsigned*>(b);
  float{nc} d;
  asm volatile("{asm}"
    : {", ".join(f'"=f"(d.{_LANE_NAMES[i]})' for i in range(nc))}
    : {", ".join(ins)});
  return d;
}}"""
_HEADERS = {dtypes.half: "#include <cuda_fp16.h>", dtypes.bfloat16: "#include <cuda_bf16.h>"}

def _wmma(ctx:_CWriter, x:UOp) -> str:
  ctx.analyses.setdefault("mma", {})[x.arg] = None
  return f"{_mma_fn(x.arg)}({', '.join(strip_parens(ctx.opnd(x, s)) for s in x.src)})"

# ***** the rules CUDA puts in front of the C ones *****

def _lane_of(v:str, dt:DType, lanes:int, i:int) -> str: return f"{v}.{_LANE_NAMES[i]}" if _builtin_vector(dt, lanes) else f"{v}.v[{i}]"
def _lane(ctx:_CWriter, vec:UOp, i:int) -> str:
  v = ctx.r[vec]
  return _lane_of(v if v.isidentifier() else f"({v})", vec.dtype, ctx.k.lanes[vec], i)

def _stack(ctx:_CWriter, dt:DType, elems:list[str]) -> str:
  name = ctx.vector(dt, len(elems))
  return f"make_{name}({','.join(elems)})" if _builtin_vector(dt, len(elems)) else f"{name}{{{{{','.join(elems)}}}}}"

def _aligned(ctx:_CWriter, x:UOp) -> bool:
  """Whether a vector access (SHRINK) starts at a multiple of its type's alignment: buffers are allocated 256-byte aligned and local
  arrays are declared 16-byte aligned, so an index the vector's alignment (in elements) provably divides is aligned."""
  n = ctx.k.lanes[x]
  return x.src[1].divides(max(1, _vector_align(x.dtype, n) // x.dtype.itemsize)) is not None

def _elements(ctx:_CWriter, x:UOp) -> list[str]:
  """The lvalues of the elements of an unaligned vector access, one by one."""
  buf, i = ctx.r[x.src[0]], ctx.opnd(x, x.src[1])
  return [f"{buf}[{i}+{j}]" if j else f"{buf}[{strip_parens(i)}]" for j in range(ctx.k.lanes[x])]

def _load(ctx:_CWriter, x:UOp, idx:UOp) -> str|None:
  # an unaligned vector load reads its lanes one by one (a float4 load from an address that is not 16-byte aligned faults)
  if idx.op is not Ops.SHRINK or _aligned(ctx, idx): return None
  return _stack(ctx, x.dtype, _elements(ctx, idx))

def _store(ctx:_CWriter, x:UOp, idx:UOp, val:UOp) -> str|None:
  if idx.op is not Ops.SHRINK or _aligned(ctx, idx): return None
  stores = " ".join(f"{e} = {_lane_of('tg_v', val.dtype, ctx.k.lanes[idx], j)};" for j, e in enumerate(_elements(ctx, idx)))
  text = f"{{ {ctx.vector(val.dtype, ctx.k.lanes[idx])} tg_v = {strip_parens(ctx.opnd(x, val))}; {stores} }}"
  return f"if ({strip_parens(ctx.opnd(x, x.src[2]))}) {text}" if len(x.src) == 3 else text

def _buffer(ctx:_CWriter, x:UOp) -> str|None:
  # local and register arrays 16-byte aligned, so vector accesses at aligned indices are aligned
  text = base_rewrite.rewrite(x, ctx)
  return None if text is None else f"__align__(16) {text}"

cuda_rewrite = PatternMatcher([
  (UPat(Ops.BUFFER, name="x"), _buffer),
  (UPat(Ops.WMMA, name="x"), _wmma),
  (UPat(Ops.INDEX, src=(UPat(name="vec"), UPat(name="i"))),
   lambda ctx, vec, i: None if mem_root(vec) is not None else _lane(ctx, vec, const_value(i))),
  (UPat(Ops.STACK, name="x"), lambda ctx, x: _stack(ctx, x.dtype, [strip_parens(ctx.opnd(x, s)) for s in x.src]) if x.src else None),
  (UPat(Ops.LOAD, src=(UPat(name="idx"),), name="x"), _load),
  (UPat(Ops.LOAD, src=(UPat(name="idx"), UPat(name="alt"), UPat(name="gate")), name="x"),
   lambda ctx, x, idx, alt, gate: None if (e := _load(ctx, x, idx)) is None else f"({ctx.opnd(x, gate)}?{e}:{ctx.opnd(x, alt)})"),
  (UPat(Ops.STORE, src=(UPat(name="idx"), UPat(name="val")), allow_any_len=True, name="x"), _store),
]) + base_rewrite

def _math(fn:str) -> Callable: return lambda x, dtype: f"{fn}{_fsuffix(dtype)}({x})"

class CUDARenderer(CStyleLanguage):
  """CUDA C++ for NVRTC. The target's arch (DEV=CUDA::sm_90, NULL:CUDA:sm_90) picks the compute capability; sm_80 by default."""
  device = "CUDA"
  has_local = True
  has_shared = True
  # CUDA's limits: blocks per grid dim, threads per block dim (and 1024 threads a block), 48 KiB of static shared memory a block
  global_max = (2**31 - 1, 65535, 65535)
  local_max = (1024, 1024, 64)
  shared_max = 49152
  kernel_typedef = 'extern "C" __global__ void'
  buffer_suffix = " __restrict__"
  smem_prefix = "__shared__ "
  barrier = "__syncthreads();"
  code_for_workitem = {"g": lambda d: f"blockIdx.{_LANE_NAMES[int(d)]}", "l": lambda d: f"threadIdx.{_LANE_NAMES[int(d)]}"}
  infinity, nan = "__int_as_float(0x7f800000)", "__int_as_float(0x7fffffff)"
  double_infinity, double_nan = "__longlong_as_double(0x7ff0000000000000ll)", "__longlong_as_double(0x7ff8000000000000ll)"
  type_map = {dtypes.bool: "bool", dtypes.half: "half", dtypes.bfloat16: "__nv_bfloat16", dtypes.fp8e4m3: "__nv_fp8_e4m3",
              dtypes.fp8e5m2: "__nv_fp8_e5m2"}
  emulated_helpers = {dtypes.half: _HALF_HELPERS, dtypes.bfloat16: _BF16_HELPERS, **_FP8_HELPERS}
  string_rewrite = cuda_rewrite
  code_for_op = {**CStyleLanguage.code_for_op, Ops.SQRT: _math("sqrt"), Ops.EXP2: _math("exp2"), Ops.LOG2: _math("log2"),
                 Ops.SIN: _math("sin"), Ops.TRUNC: _math("trunc"), Ops.POW: lambda a, b, dtype: f"pow{_fsuffix(dtype)}({a}, {b})",
                 Ops.CMOD: lambda a, b, dtype: f"fmod{_fsuffix(dtype)}({a}, {b})" if dtypes.is_float(dtype) else f"({a}%{b})"}

  @property
  def arch(self) -> str: return self.target.arch or "sm_80"
  @property
  def tensor_cores(self) -> list[TensorCore]: return cuda_tensor_cores(self.arch)  # type: ignore[override]
  def supported_dtypes(self): return super().supported_dtypes() | {dtypes.fp8e4m3, dtypes.fp8e5m2}

  def memory_type(self, dt:DType) -> str: return self.type_map[dt] if dt in _EMULATED else super().memory_type(dt)
  def vector_type(self, dt:DType, lanes:int) -> str:
    super().vector_type(dt, lanes)  # the element types C has vectors of
    return f"{_VEC_BASE[dt]}{lanes}" if _builtin_vector(dt, lanes) else f"tg_{self.value_type(dt).replace(' ', '_')}{lanes}"
  def render_vector_prefix(self, dt:DType, lanes:int) -> str:
    if _builtin_vector(dt, lanes): return ""
    return f"struct __align__({_vector_align(dt, lanes)}) {self.vector_type(dt, lanes)} {{ {self.value_type(dt)} v[{lanes}]; }};"

  def render_bitcast(self, ctx:_CWriter, u:UOp) -> str:
    src, dt = u.src[0], u.dtype
    x = strip_parens(ctx.opnd(u, src))
    if src.dtype in _EMULATED:
      ctx.note_dtype(src.dtype)
      x = f"{_EMULATED[src.dtype][1]}({x})"   # the float value as its half/bfloat16
    e = f"tg_bitcast<{self.memory_type(dt)}>({x})"
    if dt in _EMULATED:
      ctx.note_dtype(dt)
      e = f"{_EMULATED[dt][0]}({e})"
    return e

  def render(self, uops:Sequence[UOp], name:str|None=None) -> str:
    k = uops if isinstance(uops, LinearKernel) else self.check(uops, name)
    src = (w := _CWriter(self, k)).write()
    # the tensor core helpers the kernel calls, before it
    if mma := w.analyses.get("mma"): src = src.replace(self.kernel_typedef, "\n".join(map(_mma_helper, mma)) + "\n" + self.kernel_typedef, 1)
    # __launch_bounds__: the block's thread count, when it is a number (the compiler may then use more registers per thread)
    _, local = launch_size(k)
    threads = prod(local) if local is not None and all(isinstance(n, int) for n in local) else None
    if threads is not None: src = src.replace(self.kernel_typedef, f"{self.kernel_typedef} __launch_bounds__({threads})", 1)
    return src

  def render_kernel(self, function_name:str, body:list[str], params:list[str], prefix:list[str]) -> str:
    if any("tg_bitcast<" in line for line in body): prefix = [*prefix, _BITCAST_HELPER]
    return super().render_kernel(function_name, body, params, [p for p in prefix if p])
