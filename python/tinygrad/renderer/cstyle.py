# C renderers: a linear kernel (see the contract in tinygrad/renderer/__init__.py) becomes one C function. The text of each op comes
# from a rule of `base_rewrite` (a PatternMatcher of string templates); CStyleLanguage holds the C-family spelling as class attributes
# that a dialect overrides (types, qualifiers, GPU dims, barrier, literals, code_for_op), and its `string_rewrite` puts a dialect's own
# rules in front of the base ones. ClangRenderer is the CPU flavour (compiled by the system C compiler into a shared object).
from __future__ import annotations
import math
import re
from typing import Any, Callable, Sequence
from tinygrad.helpers import strip_parens, cpu_count, NUM_CPU_THREADS
from tinygrad.dtype import DType, dtypes, truncate, Invalid, fp8_layout
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.renderer import Renderer, LinearKernel, KernelContractError, SIDE_EFFECTS, CORE_ID, const_value, is_literal, is_variable, mem_root
from tinygrad.renderer import buffer_size, literal_dtype, variable_names, operand_dtype, range_name, addrspace_of
from tinygrad.dtype import AddrSpace
from tinygrad.schedule.knobs import MAX_INLINE_DEPTH, PREFETCH_BYTES, PREFETCH_MIN_BYTES, PREFETCH_MAX_STRIDE

_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if inline int long register
restrict return short signed sizeof static struct switch typedef union unsigned void volatile while _Bool _Complex _Imaginary""".split())
# dtype -> its (to float, from float, round a float to it) helpers; the fp8 ones are only defined by renderers that support fp8 (CPU, CUDA)
_EMULATED = {dtypes.half: ("tg_h2f", "tg_f2h", "tg_rh"), dtypes.bfloat16: ("tg_bf2f", "tg_f2bf", "tg_rbf"),
             **{dt: (f"tg_{k}_2f", f"tg_f2{k}", f"tg_r{k}") for dt, k in ((dtypes.fp8e4m3, "e4m3"), (dtypes.fp8e5m2, "e5m2"),
                                                                        (dtypes.fp8e4m3fnuz, "e4m3fnuz"), (dtypes.fp8e5m2fnuz, "e5m2fnuz"))}}

# half and bfloat16 live in memory as their bits (unsigned short) and are computed as float, rounded to the dtype after every op:
# no compiler needs native half support. Round-to-nearest-even, inf/nan kept (quiet), half subnormals handled. Where the target converts
# half to float in hardware (x86 F16C, arm64), tg_h2f is that conversion (exact, like the bit-level one, and vectorized by the compiler:
# half weights are read at memory speed). The include guards let several kernels share one translation unit (the CPU compiler compiles
# a schedule's kernels together).
_HALF_HELPERS = r"""#ifndef TG_HALF_HELPERS
#define TG_HALF_HELPERS
#if defined(__F16C__) && defined(__clang__)
#define TG_HW_HALF __fp16
#elif defined(__F16C__) && defined(__FLT16_MAX__)
#define TG_HW_HALF _Float16
#elif defined(__aarch64__)
#define TG_HW_HALF __fp16
#endif
#ifdef TG_HW_HALF
static inline float tg_h2f(unsigned short h) { union { unsigned short u; TG_HW_HALF f; } o = {h}; return (float)o.f; }
#else
static inline float tg_h2f(unsigned short h) {
  union { unsigned int u; float f; } o;
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, em = h & 0x7fffu;
  if (em >= 0x7c00u) o.u = 0x7f800000u | ((em & 0x3ffu) << 13);
  else if (em < 0x400u) o.f = (float)em * 0x1p-24f;
  else o.u = (em << 13) + ((127u - 15u) << 23);
  o.u |= sign;
  return o.f;
}
#endif
static inline unsigned short tg_f2h(float f) {
  union { float f; unsigned int u; } in = {f}, magic = {.u = 126u << 23};
  unsigned int sign = in.u & 0x80000000u;
  unsigned short o;
  in.u ^= sign;
  if (in.u >= 0x47800000u) o = in.u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  else if (in.u < 0x38800000u) { in.f += magic.f; o = (unsigned short)(in.u - magic.u); }
  else { unsigned int odd = (in.u >> 13) & 1u; in.u += ((unsigned int)(15 - 127) << 23) + 0xfffu + odd; o = (unsigned short)(in.u >> 13); }
  return o | (unsigned short)(sign >> 16);
}
static inline float tg_rh(float f) { return tg_h2f(tg_f2h(f)); }
#endif"""
_BF16_HELPERS = r"""#ifndef TG_BF16_HELPERS
#define TG_BF16_HELPERS
static inline float tg_bf2f(unsigned short b) { union { unsigned int u; float f; } o = {(unsigned int)b << 16}; return o.f; }
static inline unsigned short tg_f2bf(float f) {
  union { float f; unsigned int u; } i = {f};
  if ((i.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((i.u >> 16) | 0x40u);
  i.u += 0x7fffu + ((i.u >> 16) & 1u);
  return (unsigned short)(i.u >> 16);
}
static inline float tg_rbf(float f) { return tg_bf2f(tg_f2bf(f)); }
#endif"""

def _fp8_helpers(dt:DType) -> str:
  """C conversions between float and an fp8 format's code (unsigned char), exact as dtype.float_to_fp8/fp8_to_float: round-half-even,
  subnormals kept, finite values beyond the range saturate to the largest finite code; infinity is e5m2's infinity and the other formats'
  NaN. Bit-level on the float32 layout, so no compiler or CPU support for fp8 is needed."""
  to_f, from_f, rnd = _EMULATED[dt]
  exp_bits, m, bias, max_code, scheme = fp8_layout(dt)
  sign_bit = "((unsigned int)(c & 0x80u) << 24)"
  if scheme == "fnuz":   # no infinity, no -0: the code 0x80 is the one NaN
    decode_nan, encode_nonfinite, zero = 'if (c == 0x80u) return __builtin_nanf("");', "return 0x80u;", "if (code == 0) return 0;"
  elif scheme == "fn":   # no infinity: S.1111.111 is NaN
    decode_nan, encode_nonfinite, zero = f"if ((c & 0x7fu) == 0x7fu) {{ o.u = 0x7fc00000u | {sign_bit}; return o.f; }}", "return sign | 0x7fu;", ""
  else:                  # IEEE-like: exponent all ones is infinity (mantissa 0) or NaN
    # a NaN's mantissa is kept through float, so a bitcast of a loaded code gives the code back: flipped in the float's low bits, where
    # a NaN made by arithmetic has zeros, so that one is the code with all mantissa bits set (dtype.float_to_fp8's NaN)
    top, mm = ((1 << exp_bits) - 1) << m, (1 << m) - 1
    decode_nan = (f"if ((c & 0x7fu) >= {top:#x}u) {{ o.u = ((c & 0x7fu) == {top:#x}u ? 0x7f800000u : 0x7fc00000u | (~c & {mm}u)) | {sign_bit}; "
                  "return o.f; }")
    encode_nonfinite = f"code = (a & {mm}u) ^ {mm}u; return sign | {top:#x}u | (a == 0x7f800000u ? 0u : code ? code : {mm}u);"
    zero = ""
  # below the smallest normal 2**(1-bias) the codes are multiples of 2**(1-bias-m): the float32 significand shifted right, rounded
  guard = f"TG_{to_f.removeprefix('tg_').removesuffix('_2f').upper()}_HELPERS"
  return f"""#ifndef {guard}
#define {guard}
static inline float {to_f}(unsigned char c) {{
  union {{ unsigned int u; float f; }} o;
  {decode_nan}
  unsigned int em = c & 0x7fu;
  if (em < {1 << m}u) o.f = (float)em * 0x1p{1 - bias - m}f;
  else o.u = (em << {23 - m}) + ({127 - bias}u << 23);
  o.u |= {sign_bit};
  return o.f;
}}
static inline unsigned char {from_f}(float f) {{
  union {{ float f; unsigned int u; }} in = {{f}};
  unsigned int sign = (in.u >> 24) & 0x80u, a = in.u & 0x7fffffffu, code;
  if (a >= 0x7f800000u) {{ {encode_nonfinite} }}
  if (a >= {128 - bias}u << 23) {{
    unsigned int r = a - ({127 - bias}u << 23);
    code = (r + {(1 << (22 - m)) - 1}u + ((r >> {23 - m}) & 1u)) >> {23 - m};
    if (code > {max_code:#x}u) code = {max_code:#x}u;
  }} else {{
    int shift = {151 - bias - m} - (int)(a >> 23);
    if (shift > 24) code = 0;
    else {{
      unsigned int mant = (a & 0x7fffffu) | 0x800000u, q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
      code = q + (rem > half || (rem == half && (q & 1u)));
    }}
  }}{chr(10) + "  " + zero if zero else ""}
  return (unsigned char)(sign | code);
}}
static inline float {rnd}(float f) {{ return {to_f}({from_f}(f)); }}
#endif"""

# a double narrowed to float rounding to odd (an inexact result gets its lowest bit set): rounding that float again to a dtype of at most
# 11 significand bits is then the correct rounding of the double (float's 24 bits >= 2*11+2); plain (float)d would round twice
_D2F_ODD_HELPER = r"""#ifndef TG_D2F_ODD
#define TG_D2F_ODD
static inline float tg_d2f_odd(double d) {
  union { float f; unsigned int u; } o = {(float)d};
  if ((double)o.f != d && d == d && !(o.u & 1u)) o.u += __builtin_fabs((double)o.f) > __builtin_fabs(d) ? 0xffffffffu : 1u;
  return o.f;
}
#endif"""

# libm's scalar exp2f, one call per element, bounded softmax: this one is plain float32 arithmetic the C compiler inlines and vectorizes with
# the loop around it. k = round(x) (x + 1.5*2**23 rounds to an integer in the low mantissa bits), f = x - k in [-0.5, 0.5], 2**f by a
# minimax polynomial (relative error 2**-28.9 in exact arithmetic), times 2**(k//2) and 2**(k-k//2) built from the bits (each a normal
# number: only the last multiply rounds, also into the subnormals). Checked exhaustively: <= 1 ulp from the correctly rounded result for
# every float32; NaN -> NaN (its comparisons are false), the clamp to +-160 gives inf and 0 beyond the range.
_EXP2_HELPER = r"""#ifndef TG_EXP2_HELPER
#define TG_EXP2_HELPER
static inline float tg_exp2f(float x) {
  x = x < -160.0f ? -160.0f : x;
  x = 160.0f < x ? 160.0f : x;
  float t = x + 12582912.0f, f = x - (t - 12582912.0f);
  float p = (((((0.00015353361959569156f*f + 0.0013398875016719103f)*f + 0.00961843691766262f)*f + 0.055503323674201965f)*f
             + 0.24022647738456726f)*f + 0.6931471824645996f)*f + 1.0f;
  union { float f; unsigned int u; } b = {t}, s1, s2;
  unsigned int kb = b.u - (0x4B400000u - 256u), k1b = kb >> 1;
  s1.u = (k1b - 1u) << 23;
  s2.u = (kb - k1b - 1u) << 23;
  return p * s1.f * s2.f;
}
#endif"""

_INLINE_OPS = frozenset(GroupOp.ALU - {Ops.WHERE}) | {Ops.CAST, Ops.BITCAST, Ops.STACK, Ops.INDEX}
# name prefixes of the values a kernel declares
_PREFIX = {Ops.LOAD: "val", Ops.STACK: "vec", Ops.CAST: "cast", Ops.BITCAST: "cast"}
# ops that are statements: their rule's string is emitted as lines (RANGE/IF open a block, END/ENDIF close one)
_STATEMENTS = frozenset({Ops.RANGE, Ops.END, Ops.IF, Ops.ENDIF, Ops.STORE, Ops.BUFFER, Ops.BARRIER})

def _fsuffix(dt:DType) -> str: return "" if dt is dtypes.float64 else "f"
# a NaN operand wins (numpy's maximum and max); `|` rather than `||` so it holds lane-wise on vectors too, in parentheses: clang
# warns about `a|b?x:y` (-Wbitwise-conditional-parentheses), and warnings for dozens of MAXes per kernel cost compile time
def _max(a:str, b:str, dtype:DType) -> str: return f"((({a}<{b})|({b}!={b}))?{b}:{a})" if dtypes.is_float(dtype) else f"({a}<{b}?{b}:{a})"

# ***** the rules: one per op (and form), each returning the C text of one UOp *****
# ctx is the _CWriter of one rendering: ctx[x] is the text of an earlier UOp as an operand of the one being rendered (literals are typed
# by their context), ctx.ren the renderer whose attributes spell the language. A subclass puts its own rules in front:
#   string_rewrite = PatternMatcher([...]) + base_rewrite

def _render_range(ctx:_CWriter, x:UOp) -> str:
  return f"for ({ctx.ren.value_type(x.dtype)} {ctx.r[x]} = 0; {ctx.r[x]} < {strip_parens(ctx.opnd(x, x.src[0]))}; {ctx.r[x]}++) {{"

def _render_access(ctx:_CWriter, x:UOp, buf:UOp, idx:UOp) -> str|None:
  """A memory INDEX/SHRINK: the lvalue of the element (or of the n-lane vector) that a LOAD reads and a STORE writes."""
  if mem_root(buf) is None: return None  # an INDEX of a vector value: a lane (below)
  lanes, i = ctx.k.lanes[x], strip_parens(ctx.opnd(x, idx))
  if lanes == 1: return f"{ctx.r[buf]}[{i}]"
  return f"*(({ctx.vector(x.dtype, lanes)}*)({ctx.r[buf]}+{i}))"

def _render_load(ctx:_CWriter, x:UOp, idx:UOp) -> str:
  e = ctx.r[idx]
  if ctx.k.lanes[x] == 1 and mem_root(idx.src[0]).op is Ops.PARAM and x.dtype in _EMULATED: e = f"{_EMULATED[x.dtype][0]}({e})"
  return e

def _render_store(ctx:_CWriter, x:UOp, idx:UOp, val:UOp) -> str:
  v, root = ctx.opnd(x, val), mem_root(idx.src[0])
  if ctx.k.lanes[idx] == 1 and root.op is Ops.PARAM and root.dtype in _EMULATED:
    # the value is rounded by the conversion to half/bfloat16 bits anyway: store the unrounded float of an inlined op
    if ctx.r.get(val) is not None and val in ctx.unrounded and not ctx.r[val].isidentifier(): v = ctx.unrounded[val]
    v = f"{_EMULATED[root.dtype][1]}({strip_parens(v)})"
  return f"{ctx.r[idx]} = {strip_parens(v)};"

def _render_lane(ctx:_CWriter, vec:UOp, i:UOp) -> str:
  v = ctx.r[vec]
  lane = f"{v}[{const_value(i)}]" if v.isidentifier() else f"({v})[{const_value(i)}]"
  # a lane of a loaded half/bfloat16 vector is the element's bits (packed_vector_loads)
  return f"{_EMULATED[vec.dtype][0]}({lane})" if vec.dtype in _EMULATED else lane

def _render_special(ctx:_CWriter, x:UOp) -> str:
  if (fxn := ctx.ren.code_for_workitem.get(x.arg[0])) is None:
    raise KernelContractError(f"{ctx.where(x)}: {type(ctx.ren).__name__} has no GPU dims (code_for_workitem) for SPECIAL {x.arg}")
  return fxn(x.arg[-1])

def _render_buffer(ctx:_CWriter, x:UOp) -> str:
  size = buffer_size(x)   # a literal > 0 (spec_linear)
  pre = f"{ctx.ren.smem_align}{ctx.ren.smem_prefix}" if addrspace_of(x) is AddrSpace.LOCAL else ""
  return f"{pre}{ctx.ren.value_type(x.dtype)} {ctx.r[x]}[{size}];"

def _render_alu(ctx:_CWriter, x:UOp) -> str:
  if (fxn := ctx.ren.code_for_op.get(x.op)) is None: raise KernelContractError(f"{ctx.where(x)}: {type(ctx.ren).__name__} has no code for {x.op}")
  srcs = [ctx.opnd(x, s) for s in x.src]
  # (a+b)+c reads as a+b+c; only on the left, where C's left-to-right order keeps the float rounding the same
  if x.src and x.src[0].op is x.op and x.op in (Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR): srcs[0] = strip_parens(srcs[0])
  return ctx.wrap(x, fxn(*srcs, dtype=operand_dtype(x)))

base_rewrite = PatternMatcher([
  # storage and GPU dims
  (UPat(Ops.BUFFER, name="x"), _render_buffer),
  (UPat(Ops.SPECIAL, name="x"), _render_special),
  (UPat(Ops.BARRIER), lambda ctx: ctx.ren.barrier),
  # blocks
  (UPat(Ops.RANGE, dtypes.void), lambda ctx: "for (;;) {"),
  (UPat(Ops.RANGE, name="x"), _render_range),
  (UPat(Ops.END, src=(UPat(), UPat(), UPat(name="c")), name="x"), lambda ctx, x, c: f"  if (!{ctx.opnd(x, c)}) break;\n}}"),
  (UPat((Ops.END, Ops.ENDIF)), lambda ctx: "}"),
  (UPat(Ops.IF, src=(UPat(name="c"),), allow_any_len=True, name="x"), lambda ctx, x, c: f"if ({strip_parens(ctx.opnd(x, c))}) {{"),
  # memory
  (UPat((Ops.INDEX, Ops.SHRINK), src=(UPat(name="buf"), UPat(name="idx")), allow_any_len=True, name="x"), _render_access),
  (UPat(Ops.LOAD, src=(UPat(name="idx"),), name="x"), _render_load),
  (UPat(Ops.LOAD, src=(UPat(name="idx"), UPat(name="alt"), UPat(name="gate")), name="x"),
   lambda ctx, x, idx, alt, gate: f"({ctx.opnd(x, gate)}?{_render_load(ctx, x, idx)}:{ctx.opnd(x, alt)})"),
  (UPat(Ops.STORE, src=(UPat(name="idx"), UPat(name="val")), name="x"), _render_store),
  (UPat(Ops.STORE, src=(UPat(name="idx"), UPat(name="val"), UPat(name="gate")), name="x"),
   lambda ctx, x, idx, val, gate: f"if ({strip_parens(ctx.opnd(x, gate))}) {_render_store(ctx, x, idx, val)}"),
  # values
  (UPat(Ops.INDEX, src=(UPat(name="vec"), UPat(name="i"))), _render_lane),
  (UPat(Ops.STACK, name="x"),
   lambda ctx, x: f"({ctx.vector(x.dtype, len(x.src))}){{{','.join(strip_parens(ctx.opnd(x, s)) for s in x.src)}}}"),
  (UPat(Ops.CAST, name="x"), lambda ctx, x: ctx.ren.render_cast(ctx, x)),
  (UPat(Ops.BITCAST, name="x"), lambda ctx, x: ctx.ren.render_bitcast(ctx, x)),
  (UPat(tuple(GroupOp.ALU), name="x"), _render_alu),
])

def thread_entry_name(name:str) -> str:
  """The symbol of the entry point the C renderers write after a threaded kernel (one with a SPECIAL core_id) called `name`."""
  return f"{name}__entry"

class CStyleLanguage(Renderer):
  """The C family. What a dialect changes is in the class attributes and `string_rewrite` (per-op rules, see base_rewrite); a CUDA or
  OpenCL renderer is a subclass that overrides a few of them."""
  kernel_typedef: str = "void"              # written before the kernel's name
  buffer_prefix: str = ""                   # before a buffer argument's type (OpenCL: "__global ")
  buffer_suffix: str = " restrict"          # after its `T*`
  var_prefix: str = "const "                # before a variable argument's type
  smem_align: str = ""                      # before a local BUFFER's declaration
  smem_prefix: str = ""                     # the local memory qualifier (CUDA: "__shared__ ", OpenCL: "__local ")
  barrier: str = ""                         # the workgroup barrier statement (CUDA: "__syncthreads();"); "" writes nothing
  code_for_workitem: dict[str, Callable[[str], str]] = {}  # "g"/"l" -> dim digit -> the workgroup/thread index expression
  infinity: str = "__builtin_inff()"
  nan: str = '__builtin_nanf("")'
  double_infinity: str = "__builtin_inf()"
  double_nan: str = '__builtin_nan("")'
  float_suffix: str = "f"                   # after a float (and half/bfloat16: computed as float) literal; doubles have none
  int_suffix: dict[DType, str] = {dtypes.int64: "l", dtypes.uint64: "ul", dtypes.uint32: "u"}
  type_map: dict[DType, str] = {dtypes.bool: "_Bool"}
  # the definitions of the conversion helpers (_EMULATED's names) of a dtype computed as float, written once before a kernel using it
  emulated_helpers: dict[DType, str] = {dtypes.half: _HALF_HELPERS, dtypes.bfloat16: _BF16_HELPERS}
  string_rewrite: PatternMatcher = base_rewrite
  # operands arrive rendered; dtype is the op's result dtype (the operand dtype for everything but comparisons)
  code_for_op: dict[Ops, Callable] = {
    Ops.NEG: lambda x, dtype: f"(-{x})", Ops.RECIPROCAL: lambda x, dtype: f"(1/{x})",
    Ops.SQRT: lambda x, dtype: f"__builtin_sqrt{_fsuffix(dtype)}({x})", Ops.EXP2: lambda x, dtype: f"__builtin_exp2{_fsuffix(dtype)}({x})",
    Ops.LOG2: lambda x, dtype: f"__builtin_log2{_fsuffix(dtype)}({x})", Ops.SIN: lambda x, dtype: f"__builtin_sin{_fsuffix(dtype)}({x})",
    Ops.TRUNC: lambda x, dtype: f"__builtin_trunc{_fsuffix(dtype)}({x})",
    Ops.ADD: lambda a, b, dtype: f"({a}+{b})", Ops.SUB: lambda a, b, dtype: f"({a}-{b})", Ops.MUL: lambda a, b, dtype: f"({a}*{b})",
    Ops.FDIV: lambda a, b, dtype: f"({a}/{b})", Ops.CDIV: lambda a, b, dtype: f"({a}/{b})",
    Ops.CMOD: lambda a, b, dtype: f"__builtin_fmod{_fsuffix(dtype)}({a}, {b})" if dtypes.is_float(dtype) else f"({a}%{b})",
    Ops.MAX: _max, Ops.POW: lambda a, b, dtype: f"__builtin_pow{_fsuffix(dtype)}({a}, {b})",
    Ops.AND: lambda a, b, dtype: f"({a}&{b})", Ops.OR: lambda a, b, dtype: f"({a}|{b})", Ops.XOR: lambda a, b, dtype: f"({a}^{b})",
    Ops.SHL: lambda a, b, dtype: f"({a}<<{b})", Ops.SHR: lambda a, b, dtype: f"({a}>>{b})",
    Ops.CMPLT: lambda a, b, dtype: f"({a}<{b})", Ops.CMPNE: lambda a, b, dtype: f"({a}!={b})", Ops.CMPEQ: lambda a, b, dtype: f"({a}=={b})",
    Ops.WHERE: lambda a, b, c, dtype: f"({a}?{b}:{c})",
    # half/bfloat16 round the product too: every op rounds to the dtype
    Ops.MULACC: lambda a, b, c, dtype: f"({_EMULATED[dtype][2]}({a}*{b})+{c})" if dtype in _EMULATED else f"(({a}*{b})+{c})"}


  def duplicated_operands(self, op:Ops) -> frozenset[int]:
    """Positions of the operands that op's template writes more than once (MAX is `(a<b||b!=b)?b:a`). An operand inlined there would be
    computed twice, and nested inlining would grow the source exponentially, so such operands always get a name."""
    if (cache := self.__dict__.get("_dup_operands")) is None: cache = self.__dict__["_dup_operands"] = {}
    if op not in cache:
      fxn = self.code_for_op[op]
      marks = [f"\x00{i}\x00" for i in range(fxn.__code__.co_argcount - 1)]
      text = fxn(*marks, dtype=dtypes.float32)
      cache[op] = frozenset(i for i, m in enumerate(marks) if text.count(m) > 1)
    return cache[op]

  # ** types **
  def value_type(self, dt:DType) -> str:
    """The C type a value of dt is computed in (half and bfloat16 compute as float)."""
    if dt in dtypes.weaks or dt is dtypes.void: raise KernelContractError(f"{dt} has no C type: weak dtypes must be committed before rendering")
    return "float" if dt in _EMULATED else self.type_map.get(dt, dt.name)
  def memory_type(self, dt:DType) -> str:
    """The C type of a buffer element (half and bfloat16 are stored as their 16 bits)."""
    return ("unsigned char" if dt.itemsize == 1 else "unsigned short") if dt in _EMULATED else self.value_type(dt)
  def vector_type(self, dt:DType, lanes:int) -> str:
    # a vector of half/bfloat16 is only ever loaded (packed_vector_loads): the vector of their bits
    if dt in _EMULATED and self.packed_vector_loads: return self.memory_type(dt).replace(" ", "_") + str(lanes)
    if dt in _EMULATED or dt is dtypes.bool: raise KernelContractError(f"vectors of {dt} are not supported by {type(self).__name__}")
    return self.value_type(dt).replace(" ", "_") + str(lanes)
  def render_vector_prefix(self, dt:DType, lanes:int) -> str:
    # element alignment: a vector access at any element offset is valid
    elem = self.memory_type(dt) if dt in _EMULATED else self.value_type(dt)
    return f"typedef {elem} {self.vector_type(dt, lanes)} __attribute__((vector_size({dt.itemsize*lanes}),aligned({dt.itemsize})));"

  def render_literal(self, v, dt:DType) -> str:
    if v is Invalid: raise KernelContractError("an Invalid constant reached the renderer: the codegen must turn it into a gate")
    if dt is dtypes.bool: return "1" if v else "0"
    if dtypes.is_float(dt):
      fv, double = float(dt.const(v)), dt is dtypes.float64
      if math.isnan(fv): return self.double_nan if double else self.nan
      if math.isinf(fv): return ("" if fv > 0 else "-") + (self.double_infinity if double else self.infinity)
      s = float.__repr__(fv) + ("" if double else self.float_suffix)
      return f"({s})" if fv < 0 or s.startswith("-") else s
    iv = truncate[dt](int(v)) if dt in truncate else int(v)
    if dt in (dtypes.int32, dtypes.int64) and iv == dt.min: return f"({iv+1}{self.int_suffix.get(dt, '')}-1)"
    s = str(iv) + self.int_suffix.get(dt, "")
    return f"({s})" if iv < 0 else s

  def render_cast(self, ctx:_CWriter, u:UOp) -> str:
    src, dt = u.src[0], u.dtype
    x = ctx.opnd(u, src)
    if dt is src.dtype: return x
    if (n := ctx.k.lanes[u]) > 1:
      # a vector cast (vector_alu): a loaded half/bfloat16 vector holds the elements' bits (packed_vector_loads), converted per lane
      v = x if x.isidentifier() else f"({x})"
      lane = (lambda i: f"{_EMULATED[src.dtype][0]}({v}[{i}])") if src.dtype in _EMULATED else (lambda i: f"({self.value_type(dt)}){v}[{i}]")
      return f"({ctx.vector(dt, n)}){{{','.join(lane(i) for i in range(n))}}}"
    if dt in _EMULATED:
      ctx.unrounded[u] = self.as_float(x, src.dtype)
      return f"{_EMULATED[dt][2]}({strip_parens(ctx.unrounded[u])})"
    return f"(({self.value_type(dt)}){x})"
  def as_float(self, x:str, dt:DType) -> str:
    """The float a value of dt is rounded from when cast to an emulated dtype."""
    return x if dt in _EMULATED or dt is dtypes.float32 else f"(float){x}"

  def render_bitcast(self, ctx:_CWriter, u:UOp) -> str:
    src, dt = u.src[0], u.dtype
    x = ctx.opnd(u, src)
    # an emulated dtype's bits are its stored unsigned char/short (memory_type)
    if src.dtype in _EMULATED:
      ctx.note_dtype(src.dtype)
      x = f"{_EMULATED[src.dtype][1]}({strip_parens(x)})"
      if dt in _EMULATED: return f"{_EMULATED[dt][0]}({x})"
      return x if self.value_type(dt) == self.memory_type(src.dtype) else f"(({self.value_type(dt)}){x})"
    if dt in _EMULATED: return f"{_EMULATED[dt][0]}(({self.memory_type(dt)}){x})"
    return f"((union {{ {self.value_type(src.dtype)} a; {self.value_type(dt)} b; }}){{.a = {strip_parens(x)}}}).b"

  # ** the kernel **
  def render_buffer_param(self, name:str, dt:DType, writable:bool) -> str:
    return f"{'' if writable else 'const '}{self.buffer_prefix}{self.memory_type(dt)}*{self.buffer_suffix} {name}"
  def render_var_param(self, name:str, dt:DType) -> str: return f"{self.var_prefix}{self.value_type(dt)} {name}"
  def render(self, uops:Sequence[UOp], name:str|None=None) -> str:
    k = uops if isinstance(uops, LinearKernel) else self.check(uops, name)
    return _CWriter(self, k).write()
  def render_kernel(self, function_name:str, body:list[str], params:list[str], prefix:list[str]) -> str:
    sig = f"{self.kernel_typedef} {function_name}({', '.join(params)}) {{"
    return "\n".join(prefix + [sig] + body + ["}"]) + "\n"
  def render_thread_entry(self, k:LinearKernel) -> str:
    """A threaded kernel's entry point (thread_entry_name): every argument but core_id from an array of 64-bit words in call order
    (core_id's word unused), so the CPU thread pool calls any threaded kernel the same way, whatever its buffers and variables."""
    core, nbufs = k.specials[CORE_ID], len(k.bufs)
    args = [f"(void*)args[{i}]" for i in range(nbufs)]   # void* converts to the parameter's pointer type
    args += ["core_id" if v is core else f"({self.value_type(v.dtype)})args[{nbufs + i}]" for i, v in enumerate(k.vars)]
    return f"void {thread_entry_name(k.name)}(const unsigned long long *args, int core_id) {{ {k.name}({', '.join(args)}); }}\n"

class _CWriter:
  """One rendering: walks the linear list once, asks the renderer's rules for each UOp's text, names values and inlines single-use
  pure expressions, and emits statements. The language lives in the rules and the renderer's attributes; this is only SSA to C."""
  def __init__(self, ren:CStyleLanguage, k:LinearKernel):
    self.ren, self.k = ren, k
    self.r: dict[UOp, str] = {}
    self.reads_mem: set[UOp] = set()                        # values whose (inlined) expression reads memory
    self.unrounded: dict[UOp, str] = {}                     # half/bfloat16 ALU results before their final rounding
    self.lines: list[str] = []
    self.depth = 1
    self.counters: dict[str, int] = {}
    self.vectors: dict[tuple[DType, int], None] = {}
    self.emulated: set[DType] = set()
    self.open_names: list[str] = []
    self.first_use: dict[UOp, int] = {}
    self.nesting: dict[UOp, int] = {}                       # how deep an inlined expression nests
    self.analyses: dict[str, Any] = {}                      # a dialect's rules keep what they computed about the whole kernel here
    for i, u in enumerate(k.uops):
      for s in u.src: self.first_use.setdefault(s, i)
    # side_effects[i]: how many statements with side effects (stores, block edges) come before position i
    self.side_effects = [0]
    for u in k.uops: self.side_effects.append(self.side_effects[-1] + (u.op in SIDE_EFFECTS))

  def emit(self, text:str):
    for line in text.split("\n"): self.lines.append("  " * self.depth + line)
  def fresh(self, prefix:str) -> str:
    n = self.counters.get(prefix, 0)
    self.counters[prefix] = n + 1
    return f"{prefix}{n}"
  def where(self, u:UOp) -> str: return f"uop {self.k.position[u]} ({u.op}, {u.dtype})"
  def vector(self, dt:DType, lanes:int) -> str:
    """The vector type of `lanes` dt (raises for element types without vectors), declared once before the kernel."""
    ret = self.ren.vector_type(dt, lanes)
    self.vectors[(dt, lanes)] = None
    return ret

  def opnd(self, consumer:UOp, s:UOp) -> str:
    """A src as it appears in consumer's expression: literals are typed by their context."""
    if is_literal(s): return self.ren.render_literal(const_value(s), literal_dtype(consumer, s))
    if s not in self.r: raise KernelContractError(f"{self.where(consumer)} uses {s.op} ({s.dtype}), which renders to no value")
    return self.r[s]
  def note_dtype(self, dt:DType):
    if dt in _EMULATED: self.emulated.add(dt)

  def write(self) -> str:
    k, ren = self.k, self.ren
    params = []
    for b in k.bufs:
      size = buffer_size(b)
      self.r[b] = f"data{b.arg.slot}" + (f"_{size}" if size is not None else "")
      self.note_dtype(b.dtype)
      params.append(ren.render_buffer_param(self.r[b], b.dtype, b in k.writable))
    for v, nm in zip(k.vars, variable_names(k, _C_KEYWORDS)):
      self.r[v] = nm
      params.append(ren.render_var_param(nm, v.dtype))
    for u in k.uops: self.step(u)
    # dict.fromkeys: a half vector's type is the one of its bits (packed_vector_loads), which a uint16 vector may declare too
    prefix = list(dict.fromkeys(ren.render_vector_prefix(dt, n) for dt, n in self.vectors))
    prefix += [ren.emulated_helpers[dt] for dt in _EMULATED if dt in self.emulated]
    src = ren.render_kernel(k.name, self.lines, params, prefix)
    return src + ren.render_thread_entry(k) if CORE_ID in k.specials else src

  def inline(self, u:UOp, reads_mem:bool) -> bool:
    """Whether a single-use expression is written where it's used. Loads of global memory always get a name (readability), and an
    expression that reads memory may not move across a store or a block edge."""
    if self.k.uses[u] != 1 or u not in self.first_use: return False
    consumer = self.k.uops[self.first_use[u]]
    if consumer.op in self.ren.code_for_op and any(consumer.src[i] is u for i in self.ren.duplicated_operands(consumer.op)): return False
    if u.op is Ops.LOAD:
      # a kernel-local buffer's element is written where it's used; a vector of one only from registers (an accumulator's update)
      if (root := mem_root(u.src[0].src[0])).op is not Ops.BUFFER or (self.k.lanes[u] != 1 and addrspace_of(root) is not AddrSpace.REG):
        return False
    elif u.op not in _INLINE_OPS: return False
    if not reads_mem: return True
    pos, use = self.k.position[u], self.first_use[u]
    return self.side_effects[use] == self.side_effects[pos + 1]

  def render_op(self, u:UOp) -> str:
    if (text := self.ren.string_rewrite.rewrite(u, self)) is None:
      raise KernelContractError(f"{self.where(u)}: {type(self.ren).__name__} has no rendering for {u.op}")
    return text

  def step(self, u:UOp):
    k, op = self.k, u.op
    # no code: kernel arguments (named in the signature), literals (written where used), ordering-only ops
    if op in (Ops.SINK, Ops.NOOP, Ops.GROUP, Ops.PARAM) or is_literal(u) or (op is Ops.STACK and not u.src) or is_variable(u): return
    if op is Ops.SPECIAL and u.arg == CORE_ID: return  # a kernel argument the runtime sets
    if op is Ops.AFTER:
      if (src := u.src[0]) in self.r: self.r[u] = self.r[src]
      if src in self.reads_mem: self.reads_mem.add(u)
      return
    if op in _STATEMENTS:
      if op is Ops.BUFFER: self.r[u] = self.fresh("acc" if addrspace_of(u) is AddrSpace.REG else "temp")
      elif op is Ops.RANGE:
        # a sibling loop may reuse a name, a nested one may not (it would shadow the outer variable)
        self.r[u] = nm = "" if u.dtype is dtypes.void else range_name(u, set(self.open_names))
        self.open_names.append(nm)
      elif op in (Ops.END, Ops.ENDIF):
        self.depth -= 1
        if op is Ops.END: self.open_names.pop()
      if text := self.render_op(u): self.emit(text)
      if op in (Ops.RANGE, Ops.IF): self.depth += 1
      return
    reads_mem = op is Ops.LOAD or any(s in self.reads_mem for s in u.src)
    if op in (Ops.INDEX, Ops.SHRINK) and mem_root(u.src[0]) is not None:
      # an access is written where it's used (as buf[i] or a vector lvalue)
      self.r[u] = self.render_op(u)
      if reads_mem: self.reads_mem.add(u)
      return
    expr = self.render_op(u)
    self.note_dtype(u.dtype)
    depth = 1 + max((self.nesting.get(s, 0) for s in u.src), default=0)
    if op is not Ops.SPECIAL and depth <= MAX_INLINE_DEPTH and self.inline(u, reads_mem):
      self.r[u] = expr
      self.nesting[u] = depth
      if reads_mem: self.reads_mem.add(u)
      return
    self.r[u] = u.arg if op is Ops.SPECIAL else self.fresh(_PREFIX.get(op, "alu"))
    lanes = k.lanes[u]
    self.emit(f"{self.vector(u.dtype, lanes) if lanes > 1 else self.ren.value_type(u.dtype)} {self.r[u]} = {strip_parens(expr)};")

  def wrap(self, u:UOp, e:str) -> str:
    """Rounds/wraps an ALU result to its dtype: C computes small ints as int and emulated floats as float."""
    dt = u.dtype
    # these only pick or compare existing values, so the result is already in range
    if u.op in GroupOp.Comparison or u.op in (Ops.WHERE, Ops.MAX): return e
    if dt in _EMULATED:
      if u.op in (Ops.TRUNC, Ops.NEG): return e
      self.unrounded[u] = e  # a store converts to half/bfloat16 bits, which rounds anyway
      return f"{_EMULATED[dt][2]}({strip_parens(e)})"
    if dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16): return f"(({self.ren.value_type(dt)}){e})"
    return e

# clang's partial unrolling of a loop the codegen already unrolled (the lanes of a tile, an unrolled reduce) or of a loop around another loop
# copies big bodies several times: in gpt2's matmul kernels a third of the compile time went to that, and run time did not change.
# Full unrolling of short loops (a 3x3 window, an 8-step reduce whose loads are then hoisted: a conv backward) and the unrolling
# of loops over transcendentals (vectorized across iterations) are left to clang.
_UNROLL_KEEP_TRIP, _UNROLL_BIG_BODY = 8, 24
_VECTORIZED_MATH = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT})

def _no_unroll_loops(k:LinearKernel) -> set[UOp]:
  """The RANGEs whose loop gets `unroll(disable)`: those around a long loop (one of more than _UNROLL_KEEP_TRIP steps or a symbolic count,
  or around such a loop: clang won't unroll it away), and the long loops whose body has at least _UNROLL_BIG_BODY ops and no
  transcendental."""
  ret: set[UOp] = set()
  stack: list[list] = []   # [RANGE, ops in the body, holds a long loop, holds a transcendental]
  for u in k.uops:
    if u.op is Ops.RANGE: stack.append([u, 0, False, False])
    elif u.op is Ops.END and stack and stack[-1][0] is u.src[1]:
      r, n, around_long, math = stack.pop()
      long = not (isinstance(trip := const_value(r.src[0]), int) and trip <= _UNROLL_KEEP_TRIP)
      if around_long or (long and n >= _UNROLL_BIG_BODY and not math): ret.add(r)
      if stack and (long or around_long): stack[-1][2] = True
    elif stack and (u.op in GroupOp.ALU or u.op is Ops.LOAD):
      stack[-1][1] += 1
      if u.op in _VECTORIZED_MATH: stack[-1][3] = True
  return ret

def _render_vector_fma(ctx:_CWriter, x:UOp) -> str|None:
  """A vector MULACC (vector_alu) as a call of its helper (_fma_helper); scalars render with code_for_op."""
  if (n := ctx.k.lanes[x]) == 1 or x.dtype in _EMULATED: return None
  vt = ctx.vector(x.dtype, n)
  # the helper takes vectors: a scalar operand (broadcast) is written out as one
  args = [strip_parens(ctx.opnd(x, s)) if ctx.k.lanes.get(s, 1) > 1 else f"({vt}){{{','.join([strip_parens(ctx.opnd(x, s))] * n)}}}" for s in x.src]
  return f"tg_fma_{vt}({', '.join(args)})"

_FMA_CALL = re.compile(r"\btg_fma_((float|double)(\d+))\(")

# x86 vector FMA builtins (what immintrin.h's _mm*_fmadd_p* call; clang and gcc): (the macro that enables them, the call's
# template) by vector bytes and element type. They are llvm.fma / fma patterns: always fused, which an a*b+c contracted under a pragma
# is not (clang only contracts a product with one use, and CSE can merge equal products of several multiply-adds).
_X86_FMA = {(16, "float"): ("__FMA__", "__builtin_ia32_vfmaddps({})"), (32, "float"): ("__FMA__", "__builtin_ia32_vfmaddps256({})"),
            (64, "float"): ("__AVX512F__", "__builtin_ia32_vfmaddps512_mask({}, (unsigned short)-1, 4)"),
            (16, "double"): ("__FMA__", "__builtin_ia32_vfmaddpd({})"), (32, "double"): ("__FMA__", "__builtin_ia32_vfmaddpd256({})"),
            (64, "double"): ("__AVX512F__", "__builtin_ia32_vfmaddpd512_mask({}, (unsigned char)-1, 4)")}

def _fma_helper(vt:str, scalar:str, lanes:int) -> str:
  """A vector fused multiply-add: on x86 with FMA (-march=native defines __FMA__) the vfmadd builtin of its width; else clang's
  __builtin_elementwise_fma where it has one (not clang 14); else fmaf/fma per lane, exact everywhere (but in a kernel clang 14's SLP
  vectorizer regroups those lanes across a tile's accumulators into shuffles: far slower on the dot tile). Guarded: the kernels of a
  unit share one translation unit."""
  fn = "__builtin_fmaf" if scalar == "float" else "__builtin_fma"
  per_lane = ", ".join(f"{fn}(a[{i}], b[{i}], c[{i}])" for i in range(lanes))
  sig = f"static inline {vt} tg_fma_{vt}({vt} a, {vt} b, {vt} c)"
  # newer clang (17+) has a portable vector fma; __has_builtin is itself checked first (older compilers lack it)
  body = (f"#if defined(__has_builtin)\n#if __has_builtin(__builtin_elementwise_fma)\n#define TG_ELEMENTWISE_FMA\n#endif\n#endif\n"
          f"#if defined(TG_ELEMENTWISE_FMA)\n{sig} {{ return __builtin_elementwise_fma(a, b, c); }}\n"
          f"#else\n{sig} {{ return ({vt}){{{per_lane}}}; }}\n#endif")
  if (x86 := _X86_FMA.get((lanes * (4 if scalar == "float" else 8), scalar))) is not None:
    body = f"#if defined({x86[0]})\n{sig} {{ return ({vt}){x86[1].format('a, b, c')}; }}\n#else\n{body}\n#endif"
  return f"#ifndef TG_FMA_{vt}\n#define TG_FMA_{vt}\n{body}\n#endif"

def _render_offset_access(ctx:_CWriter, x:UOp, buf:UOp, idx:UOp) -> str|None:
  """A scalar access at i + c (c a literal) as (buf+i)[c]: pointer arithmetic, not int. The kernels compile with -fwrapv, so for clang
  buf[i+1] is at sext(i+1), which it can't prove to be next to buf[i]: two byte loads stay two (a block's float16 scale read from
  its two bytes took eight instructions, not one 16-bit load) and every such access re-extends its index."""
  if (root := mem_root(buf)) is None or root.op is not Ops.PARAM or ctx.k.lanes[x] != 1 or idx.op is not Ops.ADD or not is_literal(idx.src[1]) \
     or ctx.r[idx].isidentifier(): return None
  base = ctx.opnd(idx, idx.src[0])
  return f"({ctx.r[buf]}+{base if base.isidentifier() else '(' + strip_parens(base) + ')'})[{strip_parens(ctx.opnd(idx, idx.src[1]))}]"

def _step(idx:UOp, r:UOp) -> int|None:
  """How far idx moves when loop r steps by one: its coefficient of r where idx is r times a constant plus terms without r, else None
  (r under a division, a product of two ranges, ...). Not codegen/opt/kernel.py's _strides: that evaluates an AST's index with its ranges
  at 0, where a linear kernel's index also holds launch dims (core_id) and a difference at one point can't tell a division from a
  multiple."""
  if idx is r: return 1
  if r not in idx.backward_slice: return 0
  if idx.op is Ops.CAST and dtypes.is_int(idx.dtype): return _step(idx.src[0], r)
  if idx.op is Ops.ADD: return None if None in (steps := [_step(s, r) for s in idx.src]) else sum(steps)  # type: ignore[arg-type]
  if idx.op in (Ops.MUL, Ops.SHL) and is_literal(idx.src[1]) and isinstance(c := const_value(idx.src[1]), int):
    return None if (s := _step(idx.src[0], r)) is None else s * c if idx.op is Ops.MUL else s << c
  return None

def _prefetched_loads(k:LinearKernel) -> set[UOp]:
  """The loads that prefetch their buffer PREFETCH_BYTES ahead: in each loop, the first load of each big kernel buffer
  (PREFETCH_MIN_BYTES) whose address moves forward by at most PREFETCH_MAX_STRIDE bytes a step (a walk: which loop is innermost at a load
  is a property of the linear order, not of the load)."""
  ret: set[UOp] = set()
  loops: list[tuple[UOp, set[UOp]]] = []   # the open loops, innermost last, each with the buffers it prefetches
  for u in k.uops:
    if u.op is Ops.RANGE and u.dtype is not dtypes.void: loops.append((u, set()))
    elif u.op is Ops.END and loops and loops[-1][0] is u.src[1]: loops.pop()
    elif u.op is Ops.LOAD and len(u.src) == 1 and loops and u.src[0].op in (Ops.INDEX, Ops.SHRINK) and \
         (buf := mem_root(u.src[0].src[0])) is not None:
      r, bufs = loops[-1]
      if buf.op is not Ops.PARAM or buf in bufs or (n := buffer_size(buf)) is None or n * buf.dtype.itemsize < PREFETCH_MIN_BYTES: continue
      if (s := _step(u.src[0].src[1], r)) is not None and 0 < s * buf.dtype.itemsize <= PREFETCH_MAX_STRIDE:
        ret.add(u)
        bufs.add(buf)
  return ret

def _render_clang_load(ctx:_CWriter, x:UOp, idx:UOp) -> str:
  """A load; one of _prefetched_loads first emits its prefetch statement (a global load always gets a declaration of its own, so the
  statement lands right before it, in the loop)."""
  if (prefetched := ctx.analyses.get("prefetch")) is None: prefetched = ctx.analyses["prefetch"] = _prefetched_loads(ctx.k)
  if x in prefetched:
    buf, i = idx.src[0], strip_parens(ctx.opnd(idx, idx.src[1]))
    ctx.emit(f"__builtin_prefetch((const char*)({ctx.r[mem_root(buf)]}+{i})+{PREFETCH_BYTES});")
  return _render_load(ctx, x, idx)

_VECTOR_BYTES = re.compile(r"vector_size\((\d+)\)")
# 512-bit vectors for the kernels that declare a 64-byte vector (16 float lanes: a dot product's lanes, a decoded weight's sum):
# -march=native prefers 256-bit ones on AVX-512 x86, splitting each such vector op in two (clang; without AVX-512 it splits anyway)
_WIDE_VECTORS = ("#ifndef TG_WIDE_VECTORS\n#if defined(__clang__) && defined(__AVX512F__)\n"
                 "#define TG_WIDE_VECTORS __attribute__((min_vector_width(512)))\n#else\n#define TG_WIDE_VECTORS\n#endif\n#endif")

def _render_clang_range(ctx:_CWriter, x:UOp) -> str:
  if (no_unroll := ctx.analyses.get("no_unroll")) is None: no_unroll = ctx.analyses["no_unroll"] = _no_unroll_loops(ctx.k)
  return ("#pragma clang loop unroll(disable)\n" if x in no_unroll else "") + _render_range(ctx, x)

class ClangRenderer(CStyleLanguage):
  """C for the CPU device: one function per kernel, compiled by clang or gcc (CC overrides) into a shared object."""
  device = "CPU"
  string_rewrite = PatternMatcher([(UPat(Ops.RANGE, name="x", dtype=dtypes.ints), _render_clang_range),
                                   (UPat(Ops.INDEX, src=(UPat(name="buf"), UPat(name="idx")), name="x"), _render_offset_access),
                                   (UPat(Ops.LOAD, src=(UPat(name="idx"),), name="x"), _render_clang_load),
                                   (UPat(Ops.MULACC, name="x"), _render_vector_fma)]) + base_rewrite
  has_local = False
  has_shared = False
  has_threads = True   # the CPU runtime runs a core_id kernel's launches on a thread pool
  vector_alu = True    # GCC/clang vector extensions: a float4 + float4 is one vector add, a float4 * float broadcasts the float
  packed_vector_loads = True  # a half weight's 16 lanes are one load of 32 bytes, converted lane by lane (F16C vectorizes it)
  # the kernels compile with -ffp-contract=off (nothing fuses behind the codegen's back): a MULACC is an explicit fmaf/fma, which
  # -fno-math-errno and -march=native make one vfmadd where the CPU has FMA (a correctly rounded libm call where it has none)
  fused_mulacc = True
  code_for_op = {**CStyleLanguage.code_for_op,
                 Ops.MULACC: lambda a, b, c, dtype: f"__builtin_fma{_fsuffix(dtype)}({strip_parens(a)}, {strip_parens(b)}, {strip_parens(c)})"
                 if dtype in (dtypes.float32, dtypes.float64) else CStyleLanguage.code_for_op[Ops.MULACC](a, b, c, dtype),
                 Ops.EXP2: lambda x, dtype: "__builtin_exp2(" + x + ")" if dtype is dtypes.float64 else f"tg_exp2f({strip_parens(x)})"}
  emulated_helpers = {**CStyleLanguage.emulated_helpers, **{dt: _fp8_helpers(dt) for dt in dtypes.fp8s}}
  def supported_dtypes(self) -> set[DType]: return super().supported_dtypes() | set(dtypes.fp8s)
  def as_float(self, x:str, dt:DType) -> str: return f"tg_d2f_odd({strip_parens(x)})" if dt is dtypes.float64 else super().as_float(x, dt)
  def render_kernel(self, function_name:str, body:list[str], params:list[str], prefix:list[str]) -> str:
    if any("tg_exp2f(" in line for line in body): prefix = [*prefix, _EXP2_HELPER]
    if any("tg_d2f_odd(" in line for line in body): prefix = [_D2F_ODD_HELPER, *prefix]
    fmas = {m.group(1): (m.group(2), int(m.group(3))) for line in body for m in _FMA_CALL.finditer(line)}
    prefix = [*prefix, *(_fma_helper(vt, scalar, n) for vt, (scalar, n) in sorted(fmas.items()))]
    # the attribute on a line of its own: the compiler finds a unit's kernels by their `void NAME(` lines (compiler_cpu.py)
    if any(int(m.group(1)) >= 64 for line in prefix for m in _VECTOR_BYTES.finditer(line)): prefix = [*prefix, _WIDE_VECTORS, "TG_WIDE_VECTORS"]
    return super().render_kernel(function_name, body, params, prefix)
  local_max = None
  @property
  def global_max(self) -> tuple[int, ...]:  # type: ignore[override]
    """(threads, 0, 0): launches of a threaded kernel that run at once."""
    return (min(NUM_CPU_THREADS.value, cpu_count()), 0, 0)
