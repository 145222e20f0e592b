"""Renderers turn a LINEARIZED kernel (a list of UOps in execution order) into program source, and describe the result as a ProgramSpec.

The linear-UOp contract
=======================
This is what `Renderer.render` / `Renderer.to_program` accept (the C renderer and the PYTHON device alike). It follows the
kernel-level IR of tinygrad 0.14 (what its linearizer hands to ClangRenderer). `T` is a scalar DType; vector widths never
live in a DType (see SHRINK/STACK). Every src of a UOp must appear EARLIER in the list, and a value defined inside a
RANGE/IF block may only be used inside that block. `check_linear` enforces this and names the offending UOp: each UOp's srcs and
dtypes below are the rules of tinygrad/uop/spec.py's spec_linear, the order and scopes its own walk over the list.

Kernel arguments and storage
  SINK     void  src: anything (ignored)         arg: the kernel name: a str, or an object with `.name` (KernelInfo).
                                                 Optional; `render(uops, name=...)` overrides it. Names are made C-safe.
  PARAM    T     src: (size,) or ()              arg: ParamArg(slot, T) with addrspace GLOBAL: buffer argument `slot`,
                                                 `T* restrict data{slot}_{size}` in C. `size` (element count) is a CONST.
  PARAM    int   src: (STACK(),) or ()           arg: ParamArg(slot, T, name=, vmin_vmax=, addrspace=ALU): an integer
                                                 variable argument (`UOp.variable(..., param=True)`), `const int name`.
  BUFFER   T     src: (size CONST,)              arg: ParamArg(slot, T, addrspace=REG): a per-thread array (accumulators:
                                                 `float acc0[1];`); addrspace=LOCAL: an array shared by the threads of a
                                                 workgroup (`__shared__ float temp0[256];` in CUDA, a plain array in C).
  Call order: buffer PARAMs by slot, then variable PARAMs by slot (slot -1 last, by name), then SPECIAL core_id. A
  ProgramSpec records the buffers and `vars` (the variables and core_id, in call order).

Launch dimensions (SPECIAL: at the top level, before any block; each name at most once)
  SPECIAL  int   src: (end,)                     arg: "gidx0".."gidx2" (workgroup index in dim 0..2, 0 <= gidx_i < end),
                                                 "lidx0".."lidx2" (thread index inside the workgroup), or "core_id".
           `end` is a CONST or an int expression of CONSTs and variable PARAMs (no loads): the launch size, which may be
           symbolic. ProgramSpec.global_size[i] is the end of gidx_i, local_size[i] the end of lidx_i (None without lidx);
           `ProgramSpec.launch_dims(var_vals)` evaluates them. A renderer without GPU dims (code_for_workitem) rejects gidx/lidx.
           "core_id" is the CPU thread index: a kernel argument the runtime sets, the kernel runs `end` times (in parallel on
           CPU) with core_id = 0..end-1, ProgramSpec.global_size = (end, 1, 1). It can't be mixed with gidx/lidx, and each
           launch must touch its own part of the outputs. (The optimizer's THREAD range becomes this SPECIAL.)
  BARRIER  void  src: (anything)                 every thread of the workgroup reaches it before any goes on (local memory
                                                 written before it is visible after it). Rendered as `Renderer.barrier`.

Constants
  CONST    T     src: ()                         arg: the value. Rendered inline as a literal. A weak CONST (weakint,
                                                 weakfloat) takes the dtype of the op it feeds (an index: int, or int64 when
                                                 it needs 64 bits). No other UOp may have a weak dtype, and there is no
                                                 FLOORDIV/FLOORMOD: codegen/index_dtype.py lowers both.
  CAST     T     src: (CONST,)                   arg: T. tinygrad 0.14's spelling of a typed literal: also a literal.

Control flow (blocks nest: RANGE..END, IF..ENDIF)
  RANGE    int   src: (end, *order_deps)         arg: (axis_id, AxisType, ...). `for (int ridx{axis_id} = 0; ...; ++)`
                                                 (int32 or int64: `long` in C, as the end's dtype).
  RANGE    void  src: (anything,)                an endless loop `for (;;) {`, left by an END with a condition.
  END      void  src: (body, range)              closes `range`, which must be the innermost open block.
  END      void  src: (body, range, cond:bool)   same, but only loops again while `cond` holds (do-while).
  IF       void  src: (cond:bool, *order_deps)   `if (cond) {`        ENDIF  void  src: (if,)  closes it.
  AFTER    (x)   src: (x, *deps)                 x itself; the deps only order it. NOOP, GROUP: no code.

Memory
  INDEX    T     src: (buf, idx:int)             element idx of buf (a PARAM/BUFFER, possibly through AFTER); idx int32 or int64.
  SHRINK   T     src: (buf, idx:int, CONST n)    n consecutive elements from idx: an n-lane vector access (n = 2,4,8,16).
  LOAD     T     src: (index,)                   the element(s); a SHRINK load is an n-lane vector.
  LOAD     T     src: (index, alt, gate:bool)    `gate ? load : alt` (nothing is read when gate is false).
  STORE    void  src: (index, value)             store; a SHRINK store takes an n-lane vector value.
  STORE    void  src: (index, value, gate:bool)  store only when gate holds.

Values (all scalar unless noted)
  ALU      T     the ops in `Renderer.code_for_op` (the codegen decomposes the others): NEG RECIPROCAL SQRT EXP2 LOG2 SIN
                 TRUNC, ADD SUB MUL FDIV CDIV CMOD MAX POW AND OR XOR SHL SHR, CMPLT CMPNE CMPEQ (-> bool), WHERE
                 (cond, a, b), MULACC (a*b+c: one rounding for float32/float64 where Renderer.fused_mulacc).
                 ADD, SUB, MUL, FDIV, NEG and MULACC may take vectors of one width (vector_alu renderers), and scalars with
                 them: a scalar operand of a vector op is that value in every lane (C's vector extensions broadcast it).
  CAST     T     src: (x,) arg: T                value conversion (float->int truncates toward zero, x->bool is x != 0).
  BITCAST  T     src: (x,) arg: T                same bits, same itemsize.
  STACK    T     src: (x0, ..., xn-1)            an n-lane vector of scalars (n = 2,4,8,16), consumed by a SHRINK STORE.
  INDEX    T     src: (vector, CONST i)          lane i of a vector value.
  WMMA     T     src: (A..., B..., C... elements) arg: a TensorCore (tinygrad/renderer/tc.py), T its dtype_out: one warp-wide
                 D = A @ B + C; the thread's fragment elements in (scalars: elements[0] of A, [1] of B, [2] of C), its D elements
                 out (a vector of elements[2] lanes). lidx0 is the warp (its size a multiple of the TensorCore's threads) and every
                 thread of it reaches the WMMA together (codegen/opt/tc.py).

Semantics both backends implement (and the codegen can rely on)
  - ints wrap two's-complement at their width after every op; CDIV/CMOD truncate toward zero (C); SHR of a signed int is
    arithmetic. An int division by zero or a shift outside [0, bits) is undefined.
  - floats are IEEE: each op rounds to its dtype (x/0 is +-inf or nan). half and bfloat16 compute in float32 and round
    to the dtype after every op (C needs no native half support).
  - MAX(a, b) is `(a < b || b != b) ? b : a`: a NaN on either side is the result (numpy's maximum). CMOD of floats is fmod.
  - fp8 dtypes only reach a renderer whose supported_dtypes() has them (C: all four, CUDA: fp8e4m3 and fp8e5m2; computed as
    float and rounded to the dtype after every op, finite values beyond the range saturating; Renderer.check rejects them elsewhere).
"""
from __future__ import annotations
import functools
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence, TYPE_CHECKING
from tinygrad.helpers import Target, to_function_name, prod
from tinygrad.dtype import DType, dtypes
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import const_value, is_literal, after_root, CORE_ID, GPU_DIMS, SPECIAL_NAMES  # noqa: F401  (part of the contract's vocabulary)
from tinygrad.uop.spec import spec_linear, why_invalid, vector_width, mem_root, is_variable, is_buffer_param, addrspace_of  # noqa: F401  (the contract's rules)
from tinygrad.device import Compiler
if TYPE_CHECKING:
  from tinygrad.uop.ops import UOp

__all__ = ["Renderer", "ProgramSpec", "Estimates", "LinearKernel", "KernelContractError", "check_linear"]

sint = Any  # int | UOp: a size that may depend on symbolic variables

class KernelContractError(ValueError):
  """A linear kernel that breaks the contract above (bad order, bad srcs, an op or dtype the renderer has no form for)."""

# ***** the shared analysis of a linear kernel *****

def _desc(i:int, u:UOp) -> str: return f"uop {i} ({u.op}, {u.dtype}{'' if u.arg is None else f', arg={u.arg!r}'})"


def var_name(v:UOp) -> str|None:
  """The name of a kernel variable: a variable PARAM's, or "core_id" for the SPECIAL."""
  return v.arg if v.op is Ops.SPECIAL else v.arg.name
# ops that open/close a block or touch memory: an expression that reads memory may not move across them
SIDE_EFFECTS = {Ops.STORE, Ops.RANGE, Ops.END, Ops.IF, Ops.ENDIF, Ops.BARRIER}

@dataclass
class LinearKernel:
  """What a renderer needs to know about a checked linear kernel."""
  uops: list[UOp]
  name: str
  bufs: list[UOp]                    # buffer PARAMs in call order
  vars: list[UOp]                    # variable PARAMs in call order
  writable: set[UOp]                 # buffer PARAMs that are stored to
  lanes: dict[UOp, int]              # vector width of every value (1 for scalars)
  uses: Counter                      # how many later srcs refer to each UOp
  position: dict[UOp, int] = field(default_factory=dict)
  specials: dict[str, UOp] = field(default_factory=dict)  # SPECIAL name -> UOp (launch dimensions)

def value_srcs(u:UOp) -> tuple[UOp, ...]:
  """The srcs whose values the rendered code reads (the others only order u)."""
  if u.op in (Ops.AFTER, Ops.RANGE, Ops.IF): return u.src[:1]
  if u.op is Ops.END: return u.src[2:]
  if u.op in (Ops.SINK, Ops.GROUP, Ops.NOOP, Ops.BARRIER, Ops.ENDIF): return ()
  if u.op is Ops.SPECIAL: return ()  # its end is evaluated by the host, not by the kernel
  return u.src

def check_linear(uops:Sequence[UOp], supported_ops:set[Ops]|frozenset[Ops]|None=None, name:str|None=None,
                 renderer:str="this renderer") -> LinearKernel:
  """Checks a linear kernel against the contract and collects its arguments. Raises KernelContractError naming the UOp. Each UOp's
  srcs and dtypes are uop/spec.py's spec_linear (rules on one UOp); this walk checks what those rules can't see, because it is about
  the list and not the UOp: every src defined earlier, a value used only inside the block that defines it, blocks closed in order,
  launch dims at the top level and once each, one PARAM per buffer slot."""
  from tinygrad.uop.ops import UOp
  uops = list(uops)
  if not uops: raise KernelContractError("empty kernel: the linear list has no UOps")
  position: dict[UOp, int] = {}
  lanes: dict[UOp, int] = {}
  uses: Counter = Counter()
  # scope tracking: every non-literal UOp records the innermost open block; using it after that block closed is an error
  blocks: list[UOp] = []
  open_blocks: set[UOp] = set()
  scope_of: dict[UOp, UOp|None] = {}
  closed_at: dict[UOp, int] = {}
  kname, bufs, vars_, writable = "test", [], [], set()
  specials: dict[str, UOp] = {}
  for i, u in enumerate(uops):
    if not isinstance(u, UOp): raise KernelContractError(f"item {i} of the linear list is a {type(u).__name__}, not a UOp")
    if u in position: raise KernelContractError(f"{_desc(i, u)} appears twice (first at {position[u]})")
    for s in u.src:
      # an empty STACK (a Variable's marker) and literals need no definition; everything else must come first
      if s not in position and not (s.op is Ops.STACK and not s.src) and not is_literal(s) and s.op is not Ops.NOOP:
        raise KernelContractError(f"{_desc(i, u)} uses {s.op} ({s.dtype}) that is not earlier in the list")
      if (blk := scope_of.get(s)) is not None and blk not in open_blocks and s in value_srcs(u):
        raise KernelContractError(f"{_desc(i, u)} uses {s.op} from uop {position[s]}, defined inside the {blk.op} of uop {position[blk]}"
                                  f" which closed at uop {closed_at[blk]}")
      uses[s] += 1
    if (why := why_invalid(spec_linear, u, lanes)) is not None: raise KernelContractError(f"{_desc(i, u)}: {why}{_srcs_desc(u)}")
    if u.op in GroupOp.ALU and supported_ops is not None and u.op not in supported_ops:
      raise KernelContractError(f"{_desc(i, u)}: {renderer} has no code for {u.op}; the codegen must decompose it")
    lanes[u] = vector_width(u, lanes)
    position[u] = i
    if u.op is Ops.SINK:
      if u.arg is not None and (n := u.arg if isinstance(u.arg, str) else getattr(u.arg, "name", None)) is not None: kname = n
    elif is_variable(u): vars_.append(u)
    elif u.op is Ops.SPECIAL:
      if u.arg in specials: raise KernelContractError(f"{_desc(i, u)}: SPECIAL {u.arg} appears twice (first at uop {position[specials[u.arg]]})")
      if blocks: raise KernelContractError(f"{_desc(i, u)}: a launch dimension must be at the top level, not inside the {blocks[-1].op} "
                                           f"of uop {position[blocks[-1]]}")
      specials[u.arg] = u
    elif u.op is Ops.PARAM: bufs.append(u)
    elif u.op is Ops.STORE and (root := mem_root(u.src[0].src[0])) is not None and root.op is Ops.PARAM: writable.add(root)
    elif u.op in (Ops.RANGE, Ops.IF):
      blocks.append(u)
      open_blocks.add(u)
    elif u.op in (Ops.END, Ops.ENDIF):
      opener = u.src[1] if u.op is Ops.END else u.src[0]
      if not blocks or blocks[-1] is not opener:
        inner = f"the innermost open block is the {blocks[-1].op} of uop {position[blocks[-1]]}" if blocks else "no block is open"
        raise KernelContractError(f"{_desc(i, u)} closes the {opener.op} of uop {position.get(opener, '?')}, but {inner}")
      blocks.pop()
      open_blocks.discard(opener)
      closed_at[opener] = i
    # a RANGE's variable lives in its own block; an END/ENDIF belongs to the block around the one it closed
    scope_of[u] = u if u.op in (Ops.RANGE, Ops.IF) else blocks[-1] if blocks else None
  if blocks: raise KernelContractError(f"the {blocks[-1].op} of uop {position[blocks[-1]]} is never closed (no END/ENDIF)")
  slots = Counter(b.arg.slot for b in bufs)
  if dup := [s for s, c in slots.items() if c > 1]: raise KernelContractError(f"buffer PARAM slot(s) {dup} are used by more than one PARAM")
  bufs.sort(key=lambda b: b.arg.slot)
  vars_.sort(key=lambda v: (v.arg.slot == -1, v.arg.slot, v.arg.name or ""))
  if CORE_ID in specials:
    if gpu := sorted(n for n in specials if n != CORE_ID): raise KernelContractError(f"SPECIAL {CORE_ID} can't be mixed with GPU dims {gpu}")
    if any(v.arg.name == CORE_ID for v in vars_): raise KernelContractError(f"SPECIAL {CORE_ID} and a variable named {CORE_ID} in one kernel")
    vars_.append(specials[CORE_ID])
  return LinearKernel(uops, to_function_name(name if name is not None else kname), bufs, vars_, writable, lanes, uses, position, specials)

def _srcs_desc(u:UOp) -> str: return "; its srcs: " + ", ".join(f"{s.op} {s.dtype}" + ("" if s.arg is None else f" {s.arg!r}") for s in u.src) \
  if u.src else ""

# ***** evaluating int expressions (range ends, sizes) for estimates *****

def eval_int(u:UOp, var_vals:dict[str, int], strict:bool=False) -> int|None:
  """The value of an int expression over CONSTs and Variables; None when it depends on anything else (a load, a loop). A Variable
  without a value counts as its upper bound, or raises (strict: a launch size must be exact). Ops are evaluated by uop/alu.py's
  exec_alu, the one ALU evaluator, over the graph in order (no recursion)."""
  from tinygrad.uop.ops import exec_alu, python_alu
  vals: dict[UOp, Any] = {}
  for x in u.toposort():
    if (v := const_value(x)) is not None: vals[x] = v
    elif is_variable(x):
      if (name := x.arg.name) in var_vals: vals[x] = var_vals[name]
      elif strict: raise RuntimeError(f"the launch size {x.arg.name!r} needs a value, got values for {sorted(var_vals)}")
      else: vals[x] = x.arg.vmin_vmax[1] if x.arg.vmin_vmax is not None else None  # unknown value: its upper bound
    elif x.op in (Ops.CAST, Ops.AFTER) and x.src: vals[x] = vals.get(x.src[0])
    elif x.op in python_alu and x.src and all(vals.get(s) is not None for s in x.src):
      vals[x] = exec_alu(x.op, x.dtype, [vals[s] for s in x.src], truncate_output=False)
    else: vals[x] = None
  return vals[u]

# ***** estimates and the program description *****

@dataclass(frozen=True)
class Estimates:
  ops: int = 0    # ALU operations, not counting index arithmetic
  lds: int = 0    # bytes moved by loads and stores to buffers
  mem: int = 0    # bytes of buffers touched, each buffer counted at most once per direction
  def __add__(self, o:Estimates) -> Estimates: return Estimates(self.ops + o.ops, self.lds + o.lds, self.mem + o.mem)
  @staticmethod
  def from_uops(uops:Sequence[UOp], var_vals:dict[str, int]|None=None) -> Estimates:
    """Counts over a linear kernel, multiplying by loop trip counts (an unknown count, e.g. an endless loop, counts once)."""
    vv = var_vals or {}
    # index arithmetic is not work the kernel was asked to do
    indexing: set[UOp] = set()
    for u in uops:
      if u.op in (Ops.INDEX, Ops.SHRINK) and mem_root(u.src[0]) is not None:
        stack = list(u.src[1:])
        while stack:
          if (x := stack.pop()) not in indexing and x.op in GroupOp.ALU: indexing.add(x); stack.extend(x.src)
    ops = lds = 0
    mem: dict[tuple[UOp, Ops], int] = {}
    mults, stack_m = 1, []
    lanes: dict[UOp, int] = {}  # a vector ADD/MUL (vector_alu) does one op per lane
    for u in uops:
      if u.op is Ops.RANGE:
        stack_m.append(mults)
        if u.dtype is not dtypes.void and (trip := eval_int(u.src[0], vv)) is not None: mults *= max(trip, 0)
      elif u.op is Ops.END and stack_m: mults = stack_m.pop()
      elif u.op is Ops.SPECIAL and (n := eval_int(u.src[0], vv)) is not None: mults *= max(n, 0)  # every launch runs the kernel
      elif u.op in (Ops.LOAD, Ops.STORE) and (root := mem_root(u.src[0].src[0])) is not None and root.op is Ops.PARAM:
        width = (const_value(u.src[0].src[2]) if u.src[0].op is Ops.SHRINK else 1) * root.dtype.itemsize
        lds += width * mults
        size = eval_int(root.src[0], vv) if root.src else None
        acc = mem.get((root, u.op), 0) + width * mults
        mem[(root, u.op)] = min(acc, size * root.dtype.itemsize) if size is not None else acc
      elif u.op in GroupOp.ALU and u not in indexing: ops += mults * (2 if u.op is Ops.MULACC else 1) * vector_width(u, lanes)
      elif u.op is Ops.WMMA: ops += mults * 2 * prod(u.arg.dims) // u.arg.threads  # each thread's share of the warp's multiply-adds
    return Estimates(ops, lds, sum(mem.values()))

@dataclass(frozen=True)
class ProgramSpec:
  """A rendered kernel: its source and everything needed to launch it."""
  name: str                           # the C-safe function name
  src: str
  device: str
  uops: tuple[UOp, ...]
  globals: tuple[int, ...]            # buffer slots, in call order
  buf_dtypes: tuple[DType, ...]       # the element dtype of each buffer argument
  outs: tuple[int, ...]               # slots that are stored to
  ins: tuple[int, ...]                # slots that are only read
  vars: tuple[UOp, ...]               # variable PARAMs (and SPECIAL core_id), in call order
  global_size: tuple[sint, ...] = (1, 1, 1)   # launches (workgroups) per dim: an int, or an int UOp of the variables
  local_size: tuple[sint, ...]|None = None    # threads per workgroup (None: no lidx dims)
  applied_opts: tuple = ()                    # the optimizations (tinygrad/codegen/opt/'s Opt) the kernel was made with, in order

  @property
  def function_name(self) -> str: return to_function_name(self.name)
  @property
  def var_names(self) -> tuple[str, ...]: return tuple(var_name(v) or f"var{i}" for i, v in enumerate(self.vars))
  @property
  def core_id(self) -> int|None:
    """The position among the variables of the SPECIAL `core_id`, which the runtime sets itself: the kernel runs global_size[0]
    times, in parallel where the device can, with core_id = 0, 1, ... (tinygrad 0.14's CPU threading)."""
    return next((i for i, v in enumerate(self.vars) if v.op is Ops.SPECIAL and v.arg == CORE_ID), None)
  @property
  def var_dtypes(self) -> tuple[DType, ...]: return tuple(v.dtype for v in self.vars)
  def vals(self, var_vals:dict|None=None) -> tuple[int, ...]:
    """The variable arguments in call order, from {name or Variable: value}; raises naming the missing Variables."""
    vv = {(k.arg.name if hasattr(k, "arg") else k): v for k, v in (var_vals or {}).items()}
    if self.core_id is not None: vv[CORE_ID] = 0  # a placeholder: the runtime sets it per launch
    if missing := [n for n in self.var_names if n not in vv]:
      raise RuntimeError(f"kernel {self.name} needs values for the variable(s) {missing}, got {sorted(vv)}: they are unbound (give each "
                         f"a value with Variable.bind)")
    for v, n in zip(self.vars, self.var_names):
      if (b := getattr(v.arg, "vmin_vmax", None)) is not None and not b[0] <= vv[n] <= b[1]:
        raise ValueError(f"variable {n}={vv[n]} is outside its range [{b[0]}, {b[1]}] in kernel {self.name}")
    return tuple(int(vv[n]) for n in self.var_names)
  @functools.cached_property
  def estimates(self) -> Estimates:
    """Estimates with every Variable at its upper bound."""
    return Estimates.from_uops(self.uops)
  def estimate(self, var_vals:dict[str, int]|None=None) -> Estimates:
    return self.estimates if not var_vals else Estimates.from_uops(self.uops, var_vals)
  def launch_dims(self, var_vals:dict|None=None) -> tuple[tuple[int, ...], tuple[int, ...]|None]:
    """global_size and local_size with the symbolic sizes evaluated at var_vals ({name or Variable: value})."""
    vv = {(k.arg.name if hasattr(k, "arg") else k): v for k, v in (var_vals or {}).items()}
    def ev(s:sint) -> int:
      if isinstance(s, int): return s
      if (v := eval_int(s, vv, strict=True)) is None: raise RuntimeError(f"kernel {self.name}: launch size {s} can't be evaluated")
      return v
    return tuple(ev(s) for s in self.global_size), None if self.local_size is None else tuple(ev(s) for s in self.local_size)

# ***** the renderer base *****

class Renderer:
  """Turns a linear kernel into source code for one device. Subclasses set `code_for_op` (the ALU ops they render natively; the
  codegen decomposes the others), `compiler`, and implement `render`.

  The capabilities below are what the codegen (tinygrad/codegen/opt/) reads to shape a kernel for the device; no pass tests device
  names. They describe what the optimizer should target, which can be less than what the renderer accepts (the PYTHON renderer runs
  gidx/lidx kernels by looping over the grid, but the optimizer makes them for it only under PYTHON_LOCALS=1)."""
  device: str = ""
  suffix: str = ""
  supports_float4: bool = True                    # vector loads/stores (SHRINK of 2..16 lanes) are worth making
  has_local: bool = True                          # GPU dims: the optimizer may make GLOBAL/LOCAL ranges (SPECIAL gidx/lidx)
  has_threads: bool = False                       # CPU threads: the optimizer may make a THREAD range (SPECIAL core_id)
  has_shared: bool = True                         # local (workgroup-shared) BUFFERs and BARRIERs
  vector_alu: bool = False                        # ADD/SUB/MUL/FDIV/NEG/MULACC of vectors of one width and scalars (lane-wise code
                                                  # kept as vector expressions: codegen/expander.py)
  packed_vector_loads: bool = False               # vector loads of half/bfloat16 buffers as vectors of their bits, each lane converted to
                                                  # float where it is read (a sum's lanes: codegen/expander.py)
  fused_mulacc: bool = False                      # MULACC of float32/float64 renders as a fused multiply-add (a*b+c rounded once), so the
                                                  # codegen fuses a dot tile's acc + a*b into MULACC (codegen/mulacc.py, pm_fuse_mulacc)
  global_max: tuple[int, ...]|None = (0x8FFFFFFF,) * 3  # largest launch size per dim (with has_threads: [0] is the thread count)
  local_max: tuple[int, ...]|None = (0x8FFFFFFF,) * 3   # largest workgroup size per dim (the largest of them: threads per workgroup)
  shared_max: int = 32768                         # bytes of local memory per workgroup
  tensor_cores: list = []                         # matrix instructions the TC action may target (tinygrad/renderer/tc.py)
  # rewrites of the lowered kernel (after every codegen pass, before linearizing), in this order: extra_matcher, the renderer class's
  # own rules for its device; pre_matcher, a hook for users (a PatternMatcher or None, set on a subclass or on an instance such as
  # Device["CPU"].renderer) to add their own transformations without editing the package. Its callbacks may take `ctx`: the renderer.
  # The result must still be a lowered kernel (SPEC checks it). The engine caches programs per pre_matcher: setting another recompiles.
  extra_matcher: Any = None
  pre_matcher: Any = None
  code_for_op: dict[Ops, Callable] = {}
  compiler: Compiler

  def __init__(self, target:Target|None=None):
    self.target = target if target is not None else Target(self.device)
    if not hasattr(self, "compiler"): self.compiler = Compiler()
  def __reduce__(self): return self.__class__, (self.target,)
  def __repr__(self): return f"{type(self).__name__}({self.target!r})"
  def supported_dtypes(self) -> set[DType]: return {dt for dt in dtypes.all if dt not in dtypes.fp8s}
  def check(self, uops:Sequence[UOp]|LinearKernel, name:str|None=None) -> LinearKernel:
    """check_linear for this renderer. A LinearKernel (already checked against the contract: verify_linear's result) only gets the
    checks that depend on the renderer (its ALU ops) and the name, so a lowered kernel is not walked twice."""
    if not isinstance(uops, LinearKernel):
      k = check_linear(uops, frozenset(self.code_for_op), name, type(self).__name__)
      self._check_fp8(k)
      return k
    fp8 = False
    for i, u in enumerate(uops.uops):
      if u.op in GroupOp.ALU and u.op not in self.code_for_op:
        raise KernelContractError(f"{_desc(i, u)}: {type(self).__name__} has no code for {u.op}; the codegen must decompose it")
      fp8 = fp8 or u.dtype in dtypes.fp8s
    if fp8: self._check_fp8(uops)
    return uops if name is None else replace(uops, name=to_function_name(name))
  def _check_fp8(self, k:LinearKernel) -> None:
    """fp8 values only on a renderer that lists them in supported_dtypes()."""
    for i, u in enumerate(k.uops):
      if u.dtype in dtypes.fp8s and u.dtype not in self.supported_dtypes():
        raise KernelContractError(f"{_desc(i, u)}: dtype {u.dtype} is not supported by {type(self).__name__}")
  def render(self, uops:Sequence[UOp], name:str|None=None) -> str: raise NotImplementedError(f"{type(self).__name__} does not render source")
  def to_program(self, uops:Sequence[UOp]|LinearKernel, name:str|None=None) -> ProgramSpec:
    """Checks and renders a linear kernel (a list of UOps, or verify_linear's LinearKernel); `name` overrides the SINK's kernel name."""
    k = self.check(uops, name)
    src = self.render(k, name)
    outs = tuple(b.arg.slot for b in k.bufs if b in k.writable)
    global_size, local_size = launch_size(k)
    return ProgramSpec(k.name, src, self.target.device or self.device, tuple(k.uops), tuple(b.arg.slot for b in k.bufs),
                       tuple(b.dtype for b in k.bufs), outs, tuple(b.arg.slot for b in k.bufs if b not in k.writable), tuple(k.vars),
                       global_size, local_size, next((tuple(getattr(u.arg, "applied_opts", ())) for u in k.uops if u.op is Ops.SINK), ()))

def _size_of(end:UOp) -> sint: return v if isinstance(v := const_value(end), int) else end

def launch_size(k:LinearKernel) -> tuple[tuple[sint, ...], tuple[sint, ...]|None]:
  """(global_size, local_size) from the SPECIALs of a checked kernel."""
  if (core := k.specials.get(CORE_ID)) is not None: return (_size_of(core.src[0]), 1, 1), None
  gs = tuple(_size_of(k.specials[f"gidx{i}"].src[0]) if f"gidx{i}" in k.specials else 1 for i in range(3))
  ls = tuple(_size_of(k.specials[f"lidx{i}"].src[0]) if f"lidx{i}" in k.specials else 1 for i in range(3))
  return gs, ls if any(n.startswith("lidx") for n in k.specials) else None

# names the renderers make up; a Variable called like one of these (or a keyword) is renamed var<N>
_GENERATED_NAME = re.compile(r"^((data|ridx|alu|val|cast|vec|acc|temp|var|bidx|buf|size)\d|tg_|_)")

def variable_names(k:LinearKernel, keywords:frozenset[str]) -> list[str]:
  """Argument names for the kernel's Variables: their own names where they are safe identifiers, else var<N>."""
  ret: list[str] = []
  for i, v in enumerate(k.vars):
    nm = var_name(v)
    if not (isinstance(nm, str) and nm.isidentifier() and nm.isascii() and nm not in keywords and not _GENERATED_NAME.match(nm) and nm not in ret):
      nm = f"var{i}"
    ret.append(nm)
  return ret

def range_name(u:UOp, taken:set[str]) -> str:
  """ridx<axis ids> for a RANGE (ridx0, ridx1_2), made unique against the names in `taken` (which it joins)."""
  ids = [str(x) if x >= 0 else f"m{-x}" for x in (u.arg if isinstance(u.arg, tuple) else ()) if type(x) is int]
  nm = base = "ridx" + ("_".join(ids) if ids else str(len(taken)))
  n = 0
  while nm in taken: nm, n = f"{base}x{n}", n + 1
  taken.add(nm)
  return nm

def operand_dtype(u:UOp) -> DType:
  """The dtype an ALU computes in: its operands' (for a comparison) or its own, with weak literals committed."""
  dt = u.src[-1].dtype if u.op in GroupOp.Comparison else u.dtype
  if dt in dtypes.weaks:
    dt = next((s.dtype for s in u.src if s.dtype not in dtypes.weaks), dtypes.default_float if dtypes.is_float(dt) else dtypes.int)
  return dt

def buffer_size(u:UOp) -> int|None:
  """The element count of a PARAM/BUFFER when it is a literal."""
  return v if u.src and isinstance(v := const_value(u.src[0]), int) and not isinstance(v, bool) else None

def literal_dtype(consumer:UOp, s:UOp) -> DType:
  """The dtype a literal `s` takes where `consumer` uses it: a weak CONST (a Python number) adopts the dtype of what it meets."""
  if s.dtype not in dtypes.weaks: return s.dtype
  op, i = consumer.op, consumer.src.index(s)
  if op in (Ops.INDEX, Ops.SHRINK): ret = dtypes.int if dtypes.int.min <= s.arg <= dtypes.int.max else dtypes.int64
  elif op in GroupOp.Comparison: ret = next((x.dtype for x in consumer.src if x.dtype not in dtypes.weaks), s.dtype)
  elif op is Ops.STORE: ret = consumer.src[0].dtype if i == 1 else dtypes.bool
  else: ret = consumer.dtype  # ALU, WHERE, a LOAD's alt, a RANGE's end, STACK
  if ret in dtypes.weaks or ret is dtypes.void: ret = dtypes.default_int if s.dtype is dtypes.weakint else dtypes.default_float
  return ret

def verify_linear(uops:Sequence[UOp], stage:str="linear program") -> LinearKernel:
  """SPEC check of a linear program: this contract (check_linear: its walk and uop/spec.py's spec_linear). Raises RuntimeError naming
  the stage. Returns the checked kernel (Renderer.check then need not walk it again)."""
  try: return check_linear(uops)
  except KernelContractError as e: raise RuntimeError(f"SPEC: the {stage} is invalid: {e}") from e
