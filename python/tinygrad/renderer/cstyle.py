# C renderers: a linear kernel (see the contract in tinygrad/renderer/__init__.py) becomes one C function. CStyleLanguage holds the
# C-family logic; ClangRenderer is the CPU flavour (compiled by the system C compiler into a shared object).
from __future__ import annotations
import math
from typing import Callable, Sequence
from tinygrad.helpers import strip_parens
from tinygrad.dtype import DType, dtypes, truncate, Invalid
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp
from tinygrad.renderer import Renderer, LinearKernel, KernelContractError, SIDE_EFFECTS, const_value, is_literal, is_variable, mem_root
from tinygrad.renderer import buffer_size, literal_dtype, variable_names, operand_dtype, range_name, _addrspace
from tinygrad.dtype import AddrSpace

_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto if inline int long register
restrict return short signed sizeof static struct switch typedef union unsigned void volatile while _Bool _Complex _Imaginary""".split())
_EMULATED = {dtypes.half: ("tg_h2f", "tg_f2h", "tg_rh"), dtypes.bfloat16: ("tg_bf2f", "tg_f2bf", "tg_rbf")}

# half and bfloat16 live in memory as their bits (unsigned short) and are computed as float, rounded to the dtype after every op:
# no compiler needs native half support. Round-to-nearest-even, inf/nan kept (quiet), half subnormals handled. The include guards let
# several kernels share one translation unit (the CPU compiler compiles a schedule's kernels together).
_HALF_HELPERS = r"""#ifndef TG_HALF_HELPERS
#define TG_HALF_HELPERS
static inline float tg_h2f(unsigned short h) {
  union { unsigned int u; float f; } o;
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, em = h & 0x7fffu;
  if (em >= 0x7c00u) o.u = 0x7f800000u | ((em & 0x3ffu) << 13);
  else if (em < 0x400u) o.f = (float)em * 0x1p-24f;
  else o.u = (em << 13) + ((127u - 15u) << 23);
  o.u |= sign;
  return o.f;
}
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

_INLINE_OPS = frozenset(GroupOp.ALU - {Ops.WHERE}) | {Ops.CAST, Ops.BITCAST, Ops.STACK, Ops.INDEX}
# an expression nested deeper gets a name even when used once: a chain of thousands of single-use ops would otherwise be one
# expression nested past the C compiler's limits, and every prefix of it a string of its own (memory quadratic in the chain)
MAX_INLINE_DEPTH = 64

def _fsuffix(dt:DType) -> str: return "" if dt is dtypes.float64 else "f"

class CStyleLanguage(Renderer):
  kernel_typedef: str = "void"
  buffer_prefix: str = ""
  buffer_suffix: str = " restrict"
  var_prefix: str = "const "
  infinity: str = "__builtin_inff()"
  nan: str = '__builtin_nanf("")'
  type_map: dict[DType, str] = {dtypes.bool: "_Bool"}
  # operands arrive rendered; dtype is the op's result dtype (the operand dtype for everything but comparisons)
  code_for_op: dict[Ops, Callable] = {
    Ops.NEG: lambda x, dtype: f"(-{x})", Ops.RECIPROCAL: lambda x, dtype: f"(1/{x})",
    Ops.SQRT: lambda x, dtype: f"__builtin_sqrt{_fsuffix(dtype)}({x})", Ops.EXP2: lambda x, dtype: f"__builtin_exp2{_fsuffix(dtype)}({x})",
    Ops.LOG2: lambda x, dtype: f"__builtin_log2{_fsuffix(dtype)}({x})", Ops.SIN: lambda x, dtype: f"__builtin_sin{_fsuffix(dtype)}({x})",
    Ops.TRUNC: lambda x, dtype: f"__builtin_trunc{_fsuffix(dtype)}({x})",
    Ops.ADD: lambda a, b, dtype: f"({a}+{b})", Ops.SUB: lambda a, b, dtype: f"({a}-{b})", Ops.MUL: lambda a, b, dtype: f"({a}*{b})",
    Ops.FDIV: lambda a, b, dtype: f"({a}/{b})", Ops.CDIV: lambda a, b, dtype: f"({a}/{b})",
    Ops.CMOD: lambda a, b, dtype: f"__builtin_fmod{_fsuffix(dtype)}({a}, {b})" if dtypes.is_float(dtype) else f"({a}%{b})",
    Ops.MAX: lambda a, b, dtype: f"({a}<{b}?{b}:{a})", Ops.POW: lambda a, b, dtype: f"__builtin_pow{_fsuffix(dtype)}({a}, {b})",
    Ops.AND: lambda a, b, dtype: f"({a}&{b})", Ops.OR: lambda a, b, dtype: f"({a}|{b})", Ops.XOR: lambda a, b, dtype: f"({a}^{b})",
    Ops.SHL: lambda a, b, dtype: f"({a}<<{b})", Ops.SHR: lambda a, b, dtype: f"({a}>>{b})",
    Ops.CMPLT: lambda a, b, dtype: f"({a}<{b})", Ops.CMPNE: lambda a, b, dtype: f"({a}!={b})", Ops.CMPEQ: lambda a, b, dtype: f"({a}=={b})",
    Ops.WHERE: lambda a, b, c, dtype: f"({a}?{b}:{c})",
    # half/bfloat16 round the product too: every op rounds to the dtype
    Ops.MULACC: lambda a, b, c, dtype: f"({_EMULATED[dtype][2]}({a}*{b})+{c})" if dtype in _EMULATED else f"(({a}*{b})+{c})"}

  def duplicated_operands(self, op:Ops) -> frozenset[int]:
    """Positions of the operands that op's template writes more than once (MAX is `a<b?b:a`). An operand inlined there would be
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
    return "unsigned short" if dt in _EMULATED else self.value_type(dt)
  def vector_type(self, dt:DType, lanes:int) -> str:
    if dt in _EMULATED or dt is dtypes.bool: raise KernelContractError(f"vectors of {dt} are not supported by {type(self).__name__}")
    return self.value_type(dt).replace(" ", "_") + str(lanes)
  def render_vector_prefix(self, dt:DType, lanes:int) -> str:
    # element alignment: a vector access at any element offset is valid
    return f"typedef {self.value_type(dt)} {self.vector_type(dt, lanes)} __attribute__((vector_size({dt.itemsize*lanes}),aligned({dt.itemsize})));"

  def render_literal(self, v, dt:DType) -> str:
    if v is Invalid: raise KernelContractError("an Invalid constant reached the renderer: the codegen must turn it into a gate")
    if dt is dtypes.bool: return "1" if v else "0"
    if dtypes.is_float(dt):
      fv = float(dt.const(v))
      if math.isnan(fv): return self.nan if dt is not dtypes.float64 else '__builtin_nan("")'
      if math.isinf(fv): return ("" if fv > 0 else "-") + (self.infinity if dt is not dtypes.float64 else "__builtin_inf()")
      s = float.__repr__(fv) + _fsuffix(dt)
      return f"({s})" if fv < 0 or s.startswith("-") else s
    iv = truncate[dt](int(v)) if dt in truncate else int(v)
    if dt in (dtypes.int32, dtypes.int64) and iv == dt.min: return f"({iv+1}{'l' if dt is dtypes.int64 else ''}-1)"
    s = str(iv) + {dtypes.int64: "l", dtypes.uint64: "ul", dtypes.uint32: "u"}.get(dt, "")
    return f"({s})" if iv < 0 else s

  # ** the kernel **
  def render(self, uops:Sequence[UOp], name:str|None=None) -> str:
    k = uops if isinstance(uops, LinearKernel) else self.check(uops, name)
    return _CWriter(self, k).write()
  def render_kernel(self, function_name:str, body:list[str], params:list[str], prefix:list[str]) -> str:
    sig = f"{self.kernel_typedef} {function_name}({', '.join(params)}) {{"
    return "\n".join(prefix + [sig] + body + ["}"]) + "\n"

class _CWriter:
  """One rendering: walks the linear list once, naming values, inlining single-use pure expressions, emitting statements."""
  def __init__(self, ren:CStyleLanguage, k:LinearKernel):
    self.ren, self.k = ren, k
    self.r: dict[UOp, str] = {}
    self.access: dict[UOp, tuple[str, str, int, UOp]] = {}  # memory INDEX/SHRINK -> (buffer name, index expr, lanes, root)
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
    for i, u in enumerate(k.uops):
      for s in u.src: self.first_use.setdefault(s, i)
    # side_effects[i]: how many statements with side effects (stores, block edges) come before position i
    self.side_effects = [0]
    for u in k.uops: self.side_effects.append(self.side_effects[-1] + (u.op in SIDE_EFFECTS))

  def emit(self, line:str): self.lines.append("  " * self.depth + line)
  def fresh(self, prefix:str) -> str:
    n = self.counters.get(prefix, 0)
    self.counters[prefix] = n + 1
    return f"{prefix}{n}"
  def where(self, u:UOp) -> str: return f"uop {self.k.position[u]} ({u.op}, {u.dtype})"

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
      params.append(f"{'' if b in k.writable else 'const '}{ren.buffer_prefix}{ren.memory_type(b.dtype)}*{ren.buffer_suffix} {self.r[b]}")
    for v, nm in zip(k.vars, variable_names(k, _C_KEYWORDS)):
      self.r[v] = nm
      params.append(f"{ren.var_prefix}{ren.value_type(v.dtype)} {nm}")
    for u in k.uops: self.step(u)
    prefix = [ren.render_vector_prefix(dt, n) for dt, n in self.vectors]
    if dtypes.half in self.emulated: prefix.append(_HALF_HELPERS)
    if dtypes.bfloat16 in self.emulated: prefix.append(_BF16_HELPERS)
    return ren.render_kernel(k.name, self.lines, params, prefix)

  def inline(self, u:UOp, reads_mem:bool) -> bool:
    """Whether a single-use expression is written where it's used. Loads of global memory always get a name (readability), and an
    expression that reads memory may not move across a store or a block edge."""
    if self.k.uses[u] != 1 or u not in self.first_use: return False
    consumer = self.k.uops[self.first_use[u]]
    if consumer.op in self.ren.code_for_op and any(consumer.src[i] is u for i in self.ren.duplicated_operands(consumer.op)): return False
    if u.op is Ops.LOAD:
      if self.k.lanes[u] != 1 or self.access[u.src[0]][3].op is not Ops.BUFFER: return False
    elif u.op not in _INLINE_OPS: return False
    if not reads_mem: return True
    pos, use = self.k.position[u], self.first_use[u]
    return self.side_effects[use] == self.side_effects[pos + 1]

  def step(self, u:UOp):
    k, ren, op = self.k, self.ren, self.op_of(u)
    if op is None: return
    if u.op is Ops.AFTER:
      if (src := u.src[0]) in self.access: self.access[u] = self.access[src]
      if src in self.r: self.r[u] = self.r[src]
      if src in self.reads_mem: self.reads_mem.add(u)
      return
    if u.op is Ops.PARAM: return  # named in the signature
    if u.op is Ops.BUFFER:
      if (size := buffer_size(u)) is None or size <= 0: raise KernelContractError(f"{self.where(u)}: a BUFFER needs a literal size > 0")
      self.r[u] = self.fresh("acc" if _addrspace(u) is AddrSpace.REG else "temp")
      self.emit(f"{ren.value_type(u.dtype)} {self.r[u]}[{size}];")
      return
    if u.op is Ops.RANGE:
      if u.dtype is dtypes.void:
        self.emit("for (;;) {")
        self.open_names.append("")
      else:
        # a sibling loop may reuse a name, a nested one may not (it would shadow the outer variable)
        self.r[u] = nm = range_name(u, set(self.open_names))
        self.open_names.append(nm)
        self.emit(f"for ({ren.value_type(u.dtype)} {nm} = 0; {nm} < {strip_parens(self.opnd(u, u.src[0]))}; {nm}++) {{")
      self.depth += 1
      return
    if u.op is Ops.END:
      if len(u.src) == 3: self.emit(f"if (!{self.opnd(u, u.src[2])}) break;")
      self.depth -= 1
      self.open_names.pop()
      self.emit("}")
      return
    if u.op is Ops.IF:
      self.emit(f"if ({strip_parens(self.opnd(u, u.src[0]))}) {{")
      self.depth += 1
      return
    if u.op is Ops.ENDIF:
      self.depth -= 1
      self.emit("}")
      return
    if u.op in (Ops.INDEX, Ops.SHRINK) and (root := mem_root(u.src[0])) is not None:
      lanes = k.lanes[u]
      if lanes > 1:
        ren.vector_type(u.dtype, lanes)  # raises for element types without vectors
        self.vectors[(u.dtype, lanes)] = None
      self.access[u] = (self.r[u.src[0]], self.opnd(u, u.src[1]), lanes, root)
      if any(s in self.reads_mem for s in u.src[1:]): self.reads_mem.add(u)
      return
    if u.op is Ops.STORE: return self.emit(self.store(u))
    expr, reads_mem, prefix = self.value(u)
    self.note_dtype(u.dtype)
    if (depth := 1 + max((self.nesting.get(s, 0) for s in u.src), default=0)) <= MAX_INLINE_DEPTH and self.inline(u, reads_mem):
      self.r[u] = expr
      self.nesting[u] = depth
      if reads_mem: self.reads_mem.add(u)
      return
    self.r[u] = self.fresh(prefix)
    lanes = k.lanes[u]
    ctype = ren.vector_type(u.dtype, lanes) if lanes > 1 else ren.value_type(u.dtype)
    if lanes > 1: self.vectors[(u.dtype, lanes)] = None
    self.emit(f"{ctype} {self.r[u]} = {strip_parens(expr)};")

  def op_of(self, u:UOp) -> Ops|None:
    """The op to render, or None for UOps that produce no code here."""
    if u.op in (Ops.SINK, Ops.NOOP, Ops.GROUP, Ops.BARRIER) or is_literal(u) or (u.op is Ops.STACK and not u.src): return None
    if is_variable(u): return None
    return u.op

  def value(self, u:UOp) -> tuple[str, bool, str]:
    """(expression, whether it reads memory, name prefix) of a value UOp."""
    ren, op = self.ren, u.op
    reads = any(s in self.reads_mem for s in u.src)
    if op is Ops.LOAD:
      buf, idx, lanes, root = self.access[u.src[0]]
      if lanes > 1: e = f"*(({ren.vector_type(u.dtype, lanes)}*)({buf}+{strip_parens(idx)}))"
      else:
        e = f"{buf}[{strip_parens(idx)}]"
        if root.op is Ops.PARAM and u.dtype in _EMULATED: e = f"{_EMULATED[u.dtype][0]}({e})"
      if len(u.src) == 3: e = f"({self.opnd(u, u.src[2])}?{e}:{self.opnd(u, u.src[1])})"
      return e, True, "val"
    if op is Ops.INDEX:  # a lane of a vector
      vec = self.r[u.src[0]]
      return (f"{vec}[{const_value(u.src[1])}]" if vec.isidentifier() else f"({vec})[{const_value(u.src[1])}]"), reads, "alu"
    if op is Ops.STACK:
      self.vectors[(u.dtype, len(u.src))] = None
      return f"({ren.vector_type(u.dtype, len(u.src))}){{{','.join(strip_parens(self.opnd(u, s)) for s in u.src)}}}", reads, "vec"
    if op is Ops.CAST: return self.cast(u), reads, "cast"
    if op is Ops.BITCAST: return self.bitcast(u), reads, "cast"
    if op in GroupOp.ALU:
      if (fxn := ren.code_for_op.get(op)) is None: raise KernelContractError(f"{self.where(u)}: {type(ren).__name__} has no code for {op}")
      srcs = [self.opnd(u, s) for s in u.src]
      # (a+b)+c reads as a+b+c; only on the left, where C's left-to-right order keeps the float rounding the same
      if u.src and u.src[0].op is op and op in (Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR): srcs[0] = strip_parens(srcs[0])
      return self.wrap(u, fxn(*srcs, dtype=operand_dtype(u))), reads, "alu"
    raise KernelContractError(f"{self.where(u)}: {type(ren).__name__} has no rendering for {op}")

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

  def cast(self, u:UOp) -> str:
    src, dt = u.src[0], u.dtype
    x = self.opnd(u, src)
    if dt is src.dtype or (dt in _EMULATED and src.dtype is dt): return x
    if dt in _EMULATED:
      self.unrounded[u] = x if src.dtype in _EMULATED or src.dtype is dtypes.float32 else f"(float){x}"
      return f"{_EMULATED[dt][2]}({strip_parens(self.unrounded[u])})"
    return f"(({self.ren.value_type(dt)}){x})"

  def bitcast(self, u:UOp) -> str:
    src, dt, ren = u.src[0], u.dtype, self.ren
    x = self.opnd(u, src)
    if src.dtype in _EMULATED:
      self.note_dtype(src.dtype)
      x, sdt = f"{_EMULATED[src.dtype][1]}({strip_parens(x)})", dtypes.uint16
    else: sdt = src.dtype
    if dt in _EMULATED: return f"{_EMULATED[dt][0]}((unsigned short){x})"
    if sdt is dtypes.uint16 and src.dtype in _EMULATED: return x if dt is dtypes.uint16 else f"(({ren.value_type(dt)}){x})"
    return f"((union {{ {ren.value_type(sdt)} a; {ren.value_type(dt)} b; }}){{.a = {strip_parens(x)}}}).b"

  def store(self, u:UOp) -> str:
    buf, idx, lanes, root = self.access[u.src[0]]
    val = self.opnd(u, u.src[1])
    if lanes > 1: lhs = f"*(({self.ren.vector_type(u.src[0].dtype, lanes)}*)({buf}+{strip_parens(idx)}))"
    else:
      lhs = f"{buf}[{strip_parens(idx)}]"
      if root.op is Ops.PARAM and root.dtype in _EMULATED:
        if self.r.get(u.src[1]) is not None and u.src[1] in self.unrounded and not self.r[u.src[1]].isidentifier(): val = self.unrounded[u.src[1]]
        val = f"{_EMULATED[root.dtype][1]}({strip_parens(val)})"
    stmt = f"{lhs} = {strip_parens(val)};"
    return f"if ({strip_parens(self.opnd(u, u.src[2]))}) {stmt}" if len(u.src) == 3 else stmt

class ClangRenderer(CStyleLanguage):
  """C for the CPU device: one function per kernel, compiled by clang or gcc (CC overrides) into a shared object."""
  device = "CPU"
  has_local = False
  has_shared = False
  global_max = None
  local_max = None
  def __init__(self, target=None):
    super().__init__(target)
    from tinygrad.runtime.support.compiler_cpu import ClangCompiler
    self.compiler = ClangCompiler()
