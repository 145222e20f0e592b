# The PYTHON renderer: a linear kernel (the contract in tinygrad/renderer/__init__.py) becomes a Python function, one statement per
# UOp, with C's semantics spelled out (ints wrap, floats round to their dtype after every op, division by zero gives inf/nan).
# The PYTHON device execs it: the reference that needs no compiler. Accesses are bounds-checked and raise IndexError naming the buffer.
# GPU kernels (SPECIAL gidx/lidx, local BUFFERs, BARRIERs) take keyword arguments `_gid`, `_lid` (the thread's indices) and `_shared`
# (a dict the threads of one workgroup share, holding its local buffers); a BARRIER is a `yield`, so the runtime can run the threads
# of a workgroup in lock-step, each to its next barrier, and threads communicate through local memory as on a GPU.
from __future__ import annotations
import keyword
import math
import operator
import struct
from typing import Callable, Sequence
from tinygrad.dtype import DType, dtypes, truncate, Invalid, bitcast, float_to_fp16, float_to_bf16, to_storage_scalar, from_storage_scalar
from tinygrad.dtype import fma
from tinygrad.helpers import strip_parens, ContextVar
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp, python_alu
from tinygrad.renderer import Renderer, LinearKernel, KernelContractError, CORE_ID, const_value, is_literal, is_variable, mem_root, buffer_size
from tinygrad.renderer import literal_dtype, variable_names, operand_dtype, range_name, addrspace_of
from tinygrad.dtype import AddrSpace
from tinygrad.renderer.tc import TENSOR_CORES, cuda_tensor_cores, emulate_wmma

# ***** the runtime helpers the generated code calls *****

_F32 = memoryview(bytearray(4)).cast("f")
def _r32(x):
  _F32[0] = x  # a C float conversion: round to nearest even, overflow to inf
  return _F32[0]
def _f2i(x): return math.trunc(x) if math.isfinite(x) else 0  # out-of-range float -> int is undefined in C
_H, _E = struct.Struct("<H"), struct.Struct("<e")
def _h2f(bits): return _E.unpack(_H.pack(bits))[0]
def _f2h(x): return _H.unpack(_E.pack(float_to_fp16(x)))[0]
def _bf2f(bits): return from_storage_scalar(bits, dtypes.bfloat16)
def _f2bf(x): return to_storage_scalar(x, dtypes.bfloat16)
def _wmma(name:str, warp:list, lane:int) -> list[float]:
  """Lane's D elements of a tensor core instruction whose warp put its fragments in `warp` (one slot per lane, the last one the result,
  computed once by the first lane to ask)."""
  if warp[-1] is None:
    if (missing := [i for i, f in enumerate(warp[:-1]) if f is None]):
      raise RuntimeError(f"{name}: lanes {missing} of the warp did not reach the instruction with the others")
    warp[-1] = emulate_wmma(TENSOR_CORES[name], warp[:-1])
  return warp[-1][lane]
def _alu_name(op:Ops) -> str: return f"_{op.name.lower()}"
_INFIX = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.and_: "&", operator.or_: "|", operator.xor: "^",
          operator.lshift: "<<", operator.rshift: ">>", operator.lt: "<"}
def _render_alu(op:Ops) -> Callable[..., str]:
  if (fn := python_alu[op]) is operator.neg: return lambda x, dtype: f"(-{x})"
  if (sym := _INFIX.get(fn)) is not None: return lambda a, b, dtype: f"({a} {sym} {b})"
  return lambda *args, dtype: f"{_alu_name(op)}({', '.join(args)})"
def _oob(kernel:str, buf:str, i, n):
  raise IndexError(f"kernel {kernel}: index {i} is out of bounds for {buf} ({n} elements)")

# the ALU ops the generated code calls are uop/alu.py's evaluator, the one constant folding uses (see _render_alu)
HELPERS: dict[str, object] = {"_r32": _r32, "_rh": float_to_fp16, "_rbf": float_to_bf16, "_f2i": _f2i, "_h2f": _h2f, "_f2h": _f2h,
                              "_bf2f": _bf2f, "_f2bf": _f2bf, "_oob": _oob, "_bitcast": bitcast, "_inf": math.inf, "_nan": math.nan,
                              "dtypes": dtypes, "_wmma": _wmma, "_fma": fma, **{_alu_name(op): fn for op, fn in python_alu.items()}}

# ***** rendering *****

# memoryview formats of buffer elements (half and bfloat16 are kept as their bits: memoryview has no 'e' before Python 3.12)
_FMT = {dtypes.bool: "?", dtypes.int8: "b", dtypes.uint8: "B", dtypes.int16: "h", dtypes.uint16: "H", dtypes.int32: "i", dtypes.uint32: "I",
        dtypes.int64: "q", dtypes.uint64: "Q", dtypes.float32: "f", dtypes.float64: "d", dtypes.half: "H", dtypes.bfloat16: "H"}
_FROM_BITS = {dtypes.half: "_h2f", dtypes.bfloat16: "_bf2f"}
_TO_BITS = {dtypes.half: "_f2h", dtypes.bfloat16: "_f2bf"}
_ROUND = {dtypes.float32: "_r32", dtypes.half: "_rh", dtypes.bfloat16: "_rbf"}
# MULACC rounded once, bit for bit what the C renderer's fmaf/fma compute (their results are already in the dtype)
_FMA = frozenset({dtypes.float32, dtypes.float64})

def _is_float(dt:DType) -> bool: return dtypes.is_float(dt)

# PYTHON_LOCALS=1: the PYTHON device declares GPU dims and shared memory, so the optimizer makes LOCAL/GROUP kernels for it (its GPU
# heuristics, launch dims, local buffers and barriers) and tests can run them without a GPU. Off by default: looping over threads in
# Python gains nothing.
PYTHON_LOCALS = ContextVar("PYTHON_LOCALS", 0)

class PythonRenderer(Renderer):
  """Renders the same op set as the C renderer, as Python. It accepts GPU dims, local buffers and barriers (the runtime loops over the
  launch grid, the threads of a workgroup in lock-step between barriers); the optimizer makes them only under PYTHON_LOCALS=1, or when
  the target's arch names an NVIDIA GPU (DEV=PYTHON::sm_80, as in tinygrad 0.14): then it also has that GPU's tensor cores, emulated
  (a WMMA gathers the warp's fragments in local memory between two barriers: tinygrad/renderer/tc.py's emulate_wmma)."""
  device = "PYTHON"
  global_max = None
  fused_mulacc = True
  @property
  def tensor_cores(self) -> list:  # type: ignore[override]
    return cuda_tensor_cores(arch) if (arch := self.target.arch).startswith("sm_") else []
  @property
  def gpu(self) -> bool: return bool(PYTHON_LOCALS.value) or bool(self.tensor_cores)
  @property
  def has_local(self) -> bool: return self.gpu  # type: ignore[override]
  @property
  def has_shared(self) -> bool: return self.gpu  # type: ignore[override]
  @property
  def local_max(self) -> tuple[int, ...]|None: return (256, 256, 64) if self.gpu else None  # type: ignore[override]
  # every ALU op as uop/alu.py's evaluator computes it: a Python operator where that is the evaluator's function, else a call of it
  # (FLOORDIV/FLOORMOD are lowered to CDIV/CMOD before rendering, as for the C renderer)
  code_for_op: dict[Ops, Callable] = {**{op: _render_alu(op) for op in python_alu if op not in (Ops.FLOORDIV, Ops.FLOORMOD, Ops.MULACC)},
                                      Ops.MULACC: lambda a, b, c, dtype: f"_fma({a}, {b}, {c}, {dtype!r})"}

  def render_literal(self, v, dt:DType) -> str:
    if v is Invalid: raise KernelContractError("an Invalid constant reached the renderer: the codegen must turn it into a gate")
    if dt is dtypes.bool: return "True" if v else "False"
    if _is_float(dt):
      fv = float(dt.const(v))
      if math.isnan(fv): return "_nan"
      if math.isinf(fv): return "_inf" if fv > 0 else "(-_inf)"
      s = float.__repr__(fv)
    else: s = str(truncate[dt](int(v)) if dt in truncate else int(v))
    return f"({s})" if s.startswith("-") else s

  def render(self, uops:Sequence[UOp], name:str|None=None) -> str:
    k = uops if isinstance(uops, LinearKernel) else self.check(uops, name)
    return _PyWriter(self, k).write()

def wrap(e:str, dt:DType) -> str:
  """e brought into dt's range the way C stores it: ints wrap, floats round."""
  if dt in _ROUND: return f"{_ROUND[dt]}({strip_parens(e)})"
  if dtypes.is_int(dt) and dt in truncate:
    m = (1 << dt.bitsize) - 1
    if dtypes.is_unsigned(dt): return f"({e} & {m})"
    h = 1 << (dt.bitsize - 1)
    return f"((({e} + {h}) & {m}) - {h})"
  if dt is dtypes.bool: return f"bool({e})"
  return e

class _PyWriter:
  def __init__(self, ren:PythonRenderer, k:LinearKernel):
    self.ren, self.k = ren, k
    self.r: dict[UOp, str] = {}
    self.access: dict[UOp, tuple[str, str, str, int, UOp]] = {}  # memory INDEX/SHRINK -> (buffer, size name, index name, lanes, root)
    self.lines: list[str] = []
    self.depth = 1
    self.openers: list[int] = []
    self.counters: dict[str, int] = {}
    self.range_names: set[str] = set()  # Python loop variables outlive their loop: never reuse one

  def emit(self, line:str): self.lines.append("  " * self.depth + line)
  def fresh(self, prefix:str) -> str:
    n = self.counters.get(prefix, 0)
    self.counters[prefix] = n + 1
    return f"{prefix}{n}"
  def open_block(self, line:str):
    self.emit(line)
    self.openers.append(len(self.lines))
    self.depth += 1
  def close_block(self):
    if self.openers.pop() == len(self.lines): self.emit("pass")
    self.depth -= 1
  def opnd(self, consumer:UOp, s:UOp) -> str:
    if is_literal(s): return self.ren.render_literal(const_value(s), literal_dtype(consumer, s))
    if s not in self.r:
      raise KernelContractError(f"uop {self.k.position[consumer]} ({consumer.op}) uses {s.op} ({s.dtype}), which renders to no value")
    return self.r[s]
  def oob(self, buf:str, idx:str, size:str) -> str: return f"_oob({self.k.name!r}, {buf!r}, {idx}, {size})"

  def write(self) -> str:
    k = self.k
    params, pre = [], []
    for b in k.bufs:
      if b.dtype not in _FMT: raise KernelContractError(f"buffer PARAM slot {b.arg.slot}: dtype {b.dtype} is not supported by the PYTHON device")
      size = buffer_size(b)
      self.r[b] = f"data{b.arg.slot}" + (f"_{size}" if size is not None else "")
      params.append(f"buf{b.arg.slot}")
      pre.append(f"{self.r[b]} = buf{b.arg.slot}.cast({_FMT[b.dtype]!r}); size{b.arg.slot} = len({self.r[b]})")
    for v, nm in zip(k.vars, variable_names(k, frozenset(keyword.kwlist) | frozenset(HELPERS))):
      self.r[v] = nm
      params.append(nm)
    # a GPU kernel gets its thread's indices and its workgroup's local memory from the runtime
    if any(n != CORE_ID for n in k.specials) or any(u.op is Ops.BARRIER or (u.op is Ops.BUFFER and addrspace_of(u) is AddrSpace.LOCAL)
                                                   for u in k.uops):
      params += ["*", "_gid=(0, 0, 0)", "_lid=(0, 0, 0)", "_shared=None"]
      pre.append("if _shared is None: _shared = {}")
    for line in pre: self.emit(line)
    for u in k.uops: self.step(u)
    if not self.lines: self.emit("pass")
    return f"# kernel {k.name}\ndef kernel({', '.join(params)}):\n" + "\n".join(self.lines) + "\n"

  def step(self, u:UOp):
    k, op = self.k, u.op
    if op in (Ops.SINK, Ops.NOOP, Ops.GROUP) or is_literal(u) or (op is Ops.STACK and not u.src) or is_variable(u): return
    if op is Ops.PARAM or (op is Ops.SPECIAL and u.arg == CORE_ID): return  # arguments
    if op is Ops.SPECIAL:
      self.r[u] = u.arg
      return self.emit(f"{u.arg} = {'_gid' if u.arg[0] == 'g' else '_lid'}[{u.arg[-1]}]")
    if op is Ops.BARRIER: return self.emit("yield")  # the runtime resumes the workgroup's threads once all of them got here
    if op is Ops.AFTER:
      if u.src[0] in self.access: self.access[u] = self.access[u.src[0]]
      if u.src[0] in self.r: self.r[u] = self.r[u.src[0]]
      return
    if op is Ops.BUFFER:
      size = buffer_size(u)   # a literal > 0 (spec_linear)
      self.r[u] = self.fresh("acc" if addrspace_of(u) is AddrSpace.REG else "temp")
      init = f"[{self.ren.render_literal(0, u.dtype)}] * {size}"
      # local memory is one list per workgroup: the first of its threads to get here makes it
      self.emit(f"{self.r[u]} = _shared.setdefault({self.r[u]!r}, {init})" if addrspace_of(u) is AddrSpace.LOCAL else f"{self.r[u]} = {init}")
      return
    if op is Ops.RANGE:
      if u.dtype is dtypes.void: return self.open_block("while True:")
      self.r[u] = range_name(u, self.range_names)
      return self.open_block(f"for {self.r[u]} in range({self.opnd(u, u.src[0])}):")
    if op is Ops.END:
      if len(u.src) == 3: self.emit(f"if not {self.opnd(u, u.src[2])}: break")
      return self.close_block()
    if op is Ops.IF: return self.open_block(f"if {self.opnd(u, u.src[0])}:")
    if op is Ops.ENDIF: return self.close_block()
    if op in (Ops.INDEX, Ops.SHRINK) and (root := mem_root(u.src[0])) is not None:
      # the index is used several times (bounds check, access): a compound expression gets a name first
      if not ((idx := self.opnd(u, u.src[1])).isidentifier() or idx.isdigit()):
        self.emit(f"{(idx := self.fresh('bidx'))} = {self.opnd(u, u.src[1])}")
      size = f"size{root.arg.slot}" if root.op is Ops.PARAM else str(buffer_size(root))
      self.access[u] = (self.r[u.src[0]], size, idx, k.lanes[u], root)
      return
    if op is Ops.STORE: return self.store(u)
    if op is Ops.WMMA: return self.wmma(u)
    expr, prefix = self.value(u)
    self.r[u] = self.fresh(prefix)
    self.emit(f"{self.r[u]} = {expr}")

  def in_bounds(self, access:UOp, lanes:int) -> bool:
    """An access to a kernel-local BUFFER (whose size is known) that provably stays inside it needs no run-time check."""
    root = self.access[access][4]
    # (vmin/vmax bound what the rendered index computes: int math is wrapped below unless its range fits its dtype)
    return root.op is Ops.BUFFER and 0 <= access.src[1].vmin and access.src[1].vmax + lanes <= (buffer_size(root) or 0)

  def load(self, u:UOp) -> str:
    buf, size, idx, lanes, root = self.access[u.src[0]]
    conv = _FROM_BITS.get(u.dtype) if root.op is Ops.PARAM else None
    if self.in_bounds(u.src[0], lanes): e = f"{buf}[{idx}]" if lanes == 1 else f"{buf}[{idx}:{idx}+{lanes}]"
    elif lanes == 1:
      e = f"({buf}[{idx}] if 0 <= {idx} < {size} else {self.oob(buf, idx, size)})"
      if conv: e = f"{conv}{e}"
    else:
      e = f"(list({buf}[{idx}:{idx}+{lanes}]) if 0 <= {idx} and {idx}+{lanes} <= {size} else {self.oob(buf, idx, size)})"
    return f"({e} if {self.opnd(u, u.src[2])} else {self.opnd(u, u.src[1])})" if len(u.src) == 3 else e

  def store(self, u:UOp):
    buf, size, idx, lanes, root = self.access[u.src[0]]
    conv = _TO_BITS.get(root.dtype) if root.op is Ops.PARAM else None
    val = self.opnd(u, u.src[1])
    if len(u.src) == 3: self.open_block(f"if {self.opnd(u, u.src[2])}:")
    checked = self.in_bounds(u.src[0], lanes)
    if lanes == 1:
      if not checked: self.emit(f"if not 0 <= {idx} < {size}: {self.oob(buf, idx, size)}")
      self.emit(f"{buf}[{idx}] = {f'{conv}({val})' if conv else val}")
    else:
      if not checked: self.emit(f"if not (0 <= {idx} and {idx}+{lanes} <= {size}): {self.oob(buf, idx, size)}")
      for j in range(lanes): self.emit(f"{buf}[{idx}+{j}] = {val}[{j}]")
    if len(u.src) == 3: self.close_block()

  def wmma(self, u:UOp):
    """A tensor core instruction: every lane of the warp (lidx0) puts its fragments in the warp's slots in local memory, a barrier, each
    takes its D elements (the first computes them for all), a barrier (before the slots are reused)."""
    tc, k = u.arg, self.k
    lid0 = k.specials.get("lidx0")
    if lid0 is None or not isinstance(n := const_value(lid0.src[0]), int) or n % tc.threads:
      raise KernelContractError(f"uop {k.position[u]}: a WMMA needs lidx0 to be whole warps of {tc.threads} threads")
    frags, at = [], 0
    for cnt in tc.elements_per_thread:
      frags.append("(" + "".join(f"{self.opnd(u, s)}, " for s in u.src[at:at+cnt]) + ")")
      at += cnt
    warp, lane = self.fresh("warp"), f"_lid[0] % {tc.threads}"
    self.emit(f"{warp} = _shared.setdefault(({k.position[u]}, _lid[0] // {tc.threads}, _lid[1], _lid[2]), [None] * {tc.threads + 1})")
    self.emit(f"{warp}[{lane}], {warp}[-1] = ({', '.join(frags)}), None")
    self.emit("yield")
    self.r[u] = self.fresh("wmma")
    self.emit(f"{self.r[u]} = _wmma({tc.name!r}, {warp}, {lane})")
    self.emit("yield")

  def value(self, u:UOp) -> tuple[str, str]:
    op, dt = u.op, u.dtype
    if op is Ops.LOAD: return self.load(u), "val"
    if op is Ops.INDEX: return f"{self.r[u.src[0]]}[{const_value(u.src[1])}]", "alu"
    if op is Ops.STACK: return f"[{', '.join(self.opnd(u, s) for s in u.src)}]", "vec"
    if op is Ops.CAST: return self.cast(u), "cast"
    if op is Ops.BITCAST: return f"_bitcast({self.opnd(u, u.src[0])}, {u.src[0].dtype!r}, {dt!r})", "cast"
    if op in GroupOp.ALU:
      if (fxn := self.ren.code_for_op.get(op)) is None: raise KernelContractError(f"uop {self.k.position[u]}: PythonRenderer has no code for {op}")
      odt = operand_dtype(u)
      e = fxn(*[self.opnd(u, s) for s in u.src], dtype=odt)
      # comparisons and picks make no new values, nor does int math that provably stays in range (index arithmetic, mostly);
      # everything else is brought back into its dtype
      if op in GroupOp.Comparison or op in (Ops.WHERE, Ops.MAX) or (op is Ops.NEG and _is_float(dt)) or (op is Ops.MULACC and dt in _FMA):
        return e, "alu"
      # (a weak literal is rendered wrapped to dt, so its raw value must fit too)
      if op in (Ops.ADD, Ops.SUB, Ops.MUL) and dtypes.is_int(dt) and dt.min <= u.vmin and u.vmax <= dt.max and \
         all(s.dtype is not dtypes.weakint or dt.min <= s.arg <= dt.max for s in u.src if s.op is Ops.CONST): return e, "alu"
      return wrap(e, dt), "alu"
    raise KernelContractError(f"uop {self.k.position[u]}: PythonRenderer has no rendering for {op}")

  def cast(self, u:UOp) -> str:
    src, dt = u.src[0], u.dtype
    x = self.opnd(u, src)
    if dt is dtypes.bool: return f"bool({x})"
    if _is_float(dt): return wrap(f"float({x})", dt) if dt in _ROUND else f"float({x})"
    if _is_float(src.dtype): return wrap(f"_f2i({x})", dt)
    return wrap(f"int({x})", dt)
