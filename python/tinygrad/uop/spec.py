"""The written spec of the UOps at each stage of the pipeline, checked with SPEC >= 1 (the default, as in tinygrad 0.14).

Each stage is a module-level PatternMatcher whose rules return True (the UOp is valid), False (it breaks the rule) or None (the
rule does not decide; the next one is tried). A UOp that no rule accepts is invalid; a rule that can say what is wrong raises SpecError
saying it. `type_verify` walks a graph (or a list) and raises a RuntimeError naming the stage and the offending UOp: its position, op,
dtype, arg and srcs, and what is wrong (or the rule it broke).

  spec_tensor   the tensor graph that tinygrad.tensor builds and the scheduler reads (conventions: tinygrad/uop/shape.py):
                BUFFER, CONST, movement ops, REDUCE(x, arg=(op, axes)), CONTIGUOUS, COPY, DETACH, CONTIGUOUS_BACKWARD, ALU/CAST/BITCAST,
                AFTER(storage, STORE(view, value)) (Tensor.assign), with shapes that agree; no SUB/NEG/FDIV/CMPEQ (one spelling per
                op, see tinygrad/mixin/mathtraits.py). Calls (FUNCTION/CALL) are resolved before (tinygrad/schedule/call.py).
  spec_kernel   a kernel AST from the scheduler: SINK(STORE(INDEX(PARAM, idx), value)...) with LOAD/ALU/CAST/CONST, RANGE and
                REDUCE(x, *reduce RANGEs, arg=(op,)). No movement ops, no BUFFER: every access is index arithmetic on a PARAM.
                (A copy between devices is scheduled as the AST COPY(arg=KernelInfo), with no srcs.)
  spec_lowered  the kernel after the codegen's graph passes, before linearizing: REDUCE became a register accumulator
                (BUFFER(REG), AFTER, STORE/LOAD), every loop is closed by an END, THREAD/GLOBAL/LOCAL ranges became SPECIALs;
                local BUFFERs and BARRIERs may appear. An upcast kernel (codegen/opt/) adds SHRINK
                vector loads/stores, STACK, INDEX of a lane and a GROUP of stores.
  spec_shared   the value rules every stage shares (below); tinygrad 0.14's name.
  spec_linear   (spec_program, 0.14's name) the linear program: each UOp of the linear-UOp contract (tinygrad/renderer/__init__.py)
                with its srcs (ops, count, vector widths) and dtypes. The renderer's check_linear runs it on every kernel it renders
                (SPEC or not), inside its walk over the list that checks what no rule on one UOp can see (order and scopes).

Value rules shared by all stages: every operand of an ALU has the dtype of its result, except comparisons (bool result, equal
operands), WHERE (bool condition) and shifts (any int count). A weak CONST (a Python number, weakint/weakfloat) fits any
operand it can be converted to without changing kind.
"""
from __future__ import annotations
from typing import Any, Sequence
from tinygrad.uop.ops import PatternMatcher, UPat, UOp, Ops, GroupOp, ParamArg, AxisType, is_literal, after_root, const_value, SPECIAL_NAMES
from tinygrad.uop.ops import resolve, sym_le
from tinygrad.dtype import DType, dtypes, AddrSpace
from tinygrad.helpers import prod

__all__ = ["spec_shared", "spec_tensor", "spec_kernel", "spec_lowered", "spec_linear", "spec_program", "type_verify", "SpecError", "why_invalid",
           "vector_width", "mem_root", "is_variable", "is_buffer_param", "addrspace_of"]

# ***** helpers *****

class SpecError(ValueError):
  """Raised by a rule that can say what is wrong with a UOp (which src, which count); type_verify and the renderer's check_linear put
  the message after their description of the UOp."""

def need(ok:bool, what:str, *args) -> bool:
  """True, or a SpecError saying `what` (formatted with args only on failure: the linear program's rules run for every UOp of every
  kernel the renderer checks)."""
  if not ok: raise SpecError(what.format(*args) if args else what)
  return True

def fits(x:UOp, dt:DType) -> bool:
  """x can be an operand of dtype dt: the same dtype, or a weak CONST of a compatible kind."""
  if x.dtype is dt: return True
  if x.op is not Ops.CONST or dt is dtypes.void: return False
  if x.dtype is dtypes.weakint: return dtypes.is_int(dt) or dtypes.is_float(dt)
  if x.dtype is dtypes.weakfloat: return dtypes.is_float(dt)
  return False

def operand_dtype(srcs:Sequence[UOp]) -> DType|None:
  """The dtype operands agree on (a weak CONST adopts the strong one), or None when they disagree."""
  strong = {s.dtype for s in srcs if s.dtype not in dtypes.weaks}
  if len(strong) > 1: return None
  dt = strong.pop() if strong else srcs[0].dtype
  return dt if all(fits(s, dt) for s in srcs) else None

def is_int(dt:DType) -> bool: return dtypes.is_int(dt) and dt is not dtypes.bool

def const_ok(x:UOp) -> bool:
  """A CONST's arg is a Python value of its dtype's kind."""
  v, dt = x.arg, x.dtype
  if dt is dtypes.void: return False
  if dt is dtypes.bool: return isinstance(v, bool)
  if dtypes.is_float(dt): return isinstance(v, (int, float)) and not isinstance(v, bool)
  return isinstance(v, int) and not isinstance(v, bool)

def size_const(x:UOp) -> bool:
  """The element count of a BUFFER/PARAM: an int CONST >= 0."""
  return x.op is Ops.CONST and is_int(x.dtype) and isinstance(x.arg, int) and not isinstance(x.arg, bool) and x.arg >= 0

def param_arg_ok(x:UOp, addrspaces:tuple[AddrSpace, ...]) -> bool:
  a = x.arg
  return isinstance(a, ParamArg) and type(a.slot) is int and a.slot >= 0 and a.dtype is x.dtype and a.addrspace in addrspaces

def range_ok(x:UOp, axis_types:tuple[AxisType, ...]|None=None) -> bool:
  """RANGE: an int loop variable counting to src[0] (same dtype); arg is (axis_id, ..., AxisType)."""
  a = x.arg
  return is_int(x.dtype) and len(x.src) >= 1 and fits(x.src[0], x.dtype) and isinstance(a, tuple) and len(a) >= 2 and \
    all(type(i) is int for i in a[:-1]) and isinstance(a[-1], AxisType) and (axis_types is None or a[-1] in axis_types)

def cast_ok(x:UOp) -> bool:
  """CAST/BITCAST: one non-void src, arg the target dtype (or None); a BITCAST keeps the itemsize."""
  if len(x.src) != 1 or x.src[0].dtype is dtypes.void or x.dtype is dtypes.void or x.arg not in (None, x.dtype): return False
  return x.op is Ops.CAST or x.dtype.itemsize == x.src[0].dtype.itemsize or (x.src[0].op is Ops.CONST and x.src[0].dtype in dtypes.weaks)

_FLOAT_ONLY = (Ops.SIN, Ops.LOG2, Ops.EXP2, Ops.SQRT, Ops.RECIPROCAL, Ops.FDIV)
_INT_ONLY = (Ops.CDIV, Ops.FLOORDIV, Ops.FLOORMOD, Ops.SHL, Ops.SHR)
_BITWISE = (Ops.AND, Ops.OR, Ops.XOR)

def alu_ok(x:UOp) -> bool:
  """The dtype rules of an ALU op and its srcs (the number of srcs comes from its group)."""
  op, dt, src = x.op, x.dtype, x.src
  n = 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3
  if len(src) != n or dt is dtypes.void or any(s.dtype is dtypes.void for s in src): return False
  if op in GroupOp.Comparison: return dt is dtypes.bool and operand_dtype(src) is not None
  if op is Ops.WHERE: return src[0].dtype is dtypes.bool and fits(src[1], dt) and fits(src[2], dt)
  if op in _FLOAT_ONLY and not dtypes.is_float(dt): return False
  if op in _INT_ONLY and not is_int(dt): return False
  if op in _BITWISE and not (is_int(dt) or dt is dtypes.bool): return False
  if op in (Ops.SHL, Ops.SHR): return fits(src[0], dt) and (is_int(src[1].dtype) or src[1].dtype is dtypes.weakint)
  return all(fits(s, dt) for s in src)

# the value rules every stage shares (spec_shared: tinygrad 0.14's name for them)
_values: list = [
  # the empty STACK under a Variable (UOp.variable): no value of its own
  (UPat(Ops.STACK, dtypes.void, src=()), lambda: True),
  (UPat(Ops.CONST, src=(), name="x"), const_ok),
  (UPat(tuple(GroupOp.ALU), name="x"), alu_ok),
  (UPat((Ops.CAST, Ops.BITCAST), name="x"), cast_ok),
]

spec_shared = PatternMatcher(_values)

# ***** the tensor graph *****

def _sint_ok(i:Any, lo:int) -> bool:
  """A size: an int >= lo, or an int expression of Variables (symbolic shapes) that is never below lo."""
  if type(i) is int: return i >= lo
  return isinstance(i, UOp) and (is_int(i.dtype) or i.dtype is dtypes.weakint) and i.vmin >= lo
def _all_ints(t:Any, lo:int=0) -> bool: return isinstance(t, tuple) and all(_sint_ok(i, lo) for i in t)
def _same(a, b) -> bool: return a is b or not resolve(a != b, False) if isinstance(a, UOp) or isinstance(b, UOp) else a == b

def _movement_ok(x:UOp) -> bool:
  """A movement op on one src of the same dtype, with an arg that fits the src's shape."""
  if len(x.src) != 1 or x.dtype is not x.src[0].dtype: return False
  s, a = x.src[0].shape, x.arg
  if x.op is Ops.RESHAPE: return _all_ints(a) and _same(prod(a), prod(s))
  if x.op is Ops.EXPAND: return _all_ints(a) and len(a) == len(s) and all(_same(o, n) or _same(o, 1) for o, n in zip(s, a))
  if x.op is Ops.PERMUTE: return _all_ints(a) and sorted(a) == list(range(len(s)))
  if x.op is Ops.FLIP: return isinstance(a, tuple) and len(a) == len(s) and all(isinstance(f, bool) for f in a)
  if not (isinstance(a, tuple) and len(a) == len(s) and all(isinstance(p, tuple) and len(p) == 2 and _all_ints(p) for p in a)): return False
  if x.op is Ops.PAD: return True
  return all(sym_le(b, e) and sym_le(e, n) for (b, e), n in zip(a, s))  # SHRINK

def _tensor_alu_ok(x:UOp) -> bool:
  """ALU ops in the tensor graph also need srcs of one shape: the Tensor layer broadcasts before it builds them."""
  if not alu_ok(x): return False
  shapes = {s.shape for s in x.src}
  return len(shapes) == 1

def _reduce_arg_ok(x:UOp) -> bool:
  a = x.arg
  if not (isinstance(a, tuple) and len(a) == 2 and a[0] in GroupOp.Reduce and _all_ints(a[1])): return False
  ndim = len(x.src[0].shape)
  return len(a[1]) > 0 and list(a[1]) == sorted(set(a[1])) and a[1][-1] < ndim

spec_tensor = PatternMatcher([
  # a SINK only groups the targets of one realize
  (UPat(Ops.SINK, dtypes.void), lambda: True),
  # a Variable (symbolic shapes; the scheduler sees it unbound): a 0-d int value
  (UPat(Ops.BUFFER, src=(UPat(Ops.STACK, src=()),), name="x"), lambda x: x.is_variable),
  # a realized or input buffer: BUFFER(CONST size) with a device
  (UPat(Ops.BUFFER, src=(UPat(name="n"),), name="x"),
   lambda x, n: size_const(n) and param_arg_ok(x, (AddrSpace.GLOBAL,)) and isinstance(x.arg.device, (str, tuple))),
  (UPat(tuple(GroupOp.Movement), name="x"), _movement_ok),
  (UPat(Ops.REDUCE, src=(UPat(name="s"),), name="x"), lambda x, s: s.dtype is x.dtype and x.dtype is not dtypes.void and _reduce_arg_ok(x)),
  (UPat(Ops.CONTIGUOUS, src=(UPat(name="s"),), name="x"), lambda x, s: s.dtype is x.dtype and x.arg is None),
  # autograd's markers: DETACH stops gradients, CONTIGUOUS_BACKWARD makes them contiguous; the scheduler reads both as the identity
  (UPat((Ops.DETACH, Ops.CONTIGUOUS_BACKWARD), src=(UPat(name="s"),), name="x"), lambda x, s: s.dtype is x.dtype and x.arg is None),
  # COPY(x, arg=(src device, dst device)) moves x to another device (Tensor.to)
  (UPat(Ops.COPY, src=(UPat(name="s"),), name="x"),
   lambda x, s: s.dtype is x.dtype and isinstance(x.arg, tuple) and len(x.arg) == 2 and all(isinstance(d, str) for d in x.arg)),
  # Tensor.assign: AFTER(storage, STORE(view, value)) is the storage (a device BUFFER or an earlier AFTER) once value is written through
  # view, a movement chain over that storage of value's shape and dtype
  (UPat(Ops.STORE, dtypes.void, src=(UPat(name="v"), UPat(name="x"))),
   lambda v, x: v.dtype is x.dtype and v.shape is not None and v.shape == x.shape),
  (UPat(Ops.AFTER, src=(UPat((Ops.BUFFER, Ops.AFTER), name="s"), UPat(Ops.STORE)), name="x"), lambda x, s: x.dtype is s.dtype),
  # one spelling per op (tinygrad/mixin/mathtraits.py): a - b is ADD(a, MUL(b, -1)), a / b is MUL(a, RECIPROCAL(b)), a == b is a negated
  # CMPNE, so rules over the tensor graph (autograd) never meet these; the codegen prints them again
  (UPat((Ops.SUB, Ops.NEG, Ops.FDIV, Ops.CMPEQ)), lambda: False),
  (UPat(tuple(GroupOp.ALU), name="x"), _tensor_alu_ok),
  *_values,
])

# ***** the kernel AST from the scheduler *****

def _index_ok(x:UOp, allowed:tuple[Ops, ...]) -> bool:
  """INDEX(buf, idx): element idx (an int) of a buffer, with the buffer's dtype."""
  if len(x.src) != 2: return False
  buf, idx = x.src
  return after_root(buf).op in allowed and x.dtype is buf.dtype and (is_int(idx.dtype) or (idx.op is Ops.CONST and idx.dtype is dtypes.weakint))

def _param_ok(x:UOp) -> bool:
  """A kernel argument: a buffer PARAM(CONST size) or an int variable PARAM in the ALU addrspace."""
  need(isinstance(x.arg, ParamArg), "a PARAM needs a ParamArg(slot, dtype) arg, got {!r}", x.arg)
  if x.arg.addrspace is AddrSpace.ALU:
    return is_int(x.dtype) and x.arg.dtype is x.dtype and all(s.op is Ops.STACK and not s.src for s in x.src)
  return param_arg_ok(x, (AddrSpace.GLOBAL,)) and len(x.src) <= 1 and all(size_const(s) for s in x.src)

def _gate_ok(g:UOp) -> bool: return g.dtype is dtypes.bool

_memory: list = [
  (UPat(Ops.PARAM, name="x"), _param_ok),
  # LOAD(index) or LOAD(index, alt, gate): `gate ? *index : alt`
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"),), name="x"), lambda x, i: x.dtype is i.dtype),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, name="i"), UPat(name="alt"), UPat(name="g")), name="x"),
   lambda x, i, alt, g: x.dtype is i.dtype and fits(alt, x.dtype) and _gate_ok(g)),
  # STORE(index, value) or STORE(index, value, gate)
  (UPat(Ops.STORE, dtypes.void, src=(UPat(Ops.INDEX, name="i"), UPat(name="v")), name="x"), lambda x, i, v: fits(v, i.dtype)),
  (UPat(Ops.STORE, dtypes.void, src=(UPat(Ops.INDEX, name="i"), UPat(name="v"), UPat(name="g")), name="x"),
   lambda x, i, v, g: fits(v, i.dtype) and _gate_ok(g)),
]

def _kernel_sink_ok(x:UOp) -> bool: return len(x.src) >= 1 and all(s.op is Ops.STORE for s in x.src) and hasattr(x.arg, "name")

def _reduce_ok(x:UOp) -> bool:
  """REDUCE(x, *ranges, arg=(op,)): reduces x over the REDUCE ranges, in x's dtype."""
  return len(x.src) >= 2 and x.src[0].dtype is x.dtype and x.dtype is not dtypes.void and isinstance(x.arg, tuple) and len(x.arg) == 1 and \
    x.arg[0] in GroupOp.Reduce and all(r.op is Ops.RANGE and range_ok(r, (AxisType.REDUCE, AxisType.UNROLL)) for r in x.src[1:])

spec_kernel = PatternMatcher([
  (UPat(Ops.SINK, dtypes.void, name="x"), _kernel_sink_ok),
  # a copy between devices is a schedule item but no kernel: its AST is COPY(arg=KernelInfo) alone
  (UPat(Ops.COPY, src=(), name="x"), lambda x: hasattr(x.arg, "name")),
  (UPat(Ops.INDEX, name="x"), lambda x: _index_ok(x, (Ops.PARAM,))),
  (UPat(Ops.RANGE, name="x"), range_ok),
  (UPat(Ops.REDUCE, name="x"), _reduce_ok),
  *_memory, *_values,
])

# ***** the lowered kernel (before linearizing) *****

def _end_ok(x:UOp) -> bool:
  """END(body, RANGE) closes a loop (END(body, RANGE, cond:bool) loops while cond holds)."""
  return x.dtype is dtypes.void and len(x.src) in (2, 3) and x.src[0].op in (Ops.STORE, Ops.END, Ops.GROUP) and x.src[1].op is Ops.RANGE and \
    (len(x.src) == 2 or x.src[2].dtype is dtypes.bool)

def _local_buffer_ok(x:UOp) -> bool:
  """A kernel-local array (an accumulator): BUFFER(CONST size) in register or local memory."""
  return len(x.src) == 1 and size_const(x.src[0]) and param_arg_ok(x, (AddrSpace.REG, AddrSpace.LOCAL))

def _after_ok(x:UOp) -> bool:
  """AFTER(buf, *deps): the buffer, once deps ran (stores, loops and the ranges it is used in)."""
  return len(x.src) >= 1 and after_root(x.src[0]).op in (Ops.PARAM, Ops.BUFFER) and x.dtype is x.src[0].dtype

def _special_ok(x:UOp) -> bool:
  """SPECIAL(end, arg=name): a launch dimension (gidx/lidx) or the CPU thread index (core_id), an int below its int end."""
  return is_int(x.dtype) and len(x.src) == 1 and fits(x.src[0], x.dtype) and x.arg in SPECIAL_NAMES

_spec_lowered_scalar = PatternMatcher([
  (UPat(Ops.SPECIAL, name="x"), _special_ok),
  (UPat(Ops.BARRIER, dtypes.void), lambda: True),
  # (a PARAM in the SINK: a buffer argument nothing reads any more, kept so the kernel takes the schedule's buffers: codegen)
  (UPat(Ops.SINK, dtypes.void, name="x"),
   lambda x: len(x.src) >= 1 and all(s.op in (Ops.STORE, Ops.END, Ops.GROUP, Ops.PARAM) for s in x.src) and hasattr(x.arg, "name")),
  (UPat(Ops.INDEX, name="x"), lambda x: _index_ok(x, (Ops.PARAM, Ops.BUFFER))),
  (UPat(Ops.RANGE, name="x"), range_ok),
  (UPat(Ops.END, name="x"), _end_ok),
  (UPat(Ops.BUFFER, name="x"), _local_buffer_ok),
  (UPat(Ops.AFTER, name="x"), _after_ok),
  (UPat(Ops.STACK, dtypes.void, src=()), lambda: True),  # the marker of a variable PARAM (core_id of a threaded kernel)
  *_memory, *_values,
])

# ***** the linear program *****
# The linear-UOp contract of tinygrad/renderer/__init__.py: these rules check each UOp's srcs (their ops, count, vector widths) and
# dtypes; the renderer's check_linear walks the list for what no rule on one UOp can see: order and scopes, and the kernel's arguments.

def addrspace_of(u:UOp) -> AddrSpace|None:
  """Where a PARAM/BUFFER lives (its arg's addrspace); None for other UOps."""
  return getattr(u.arg, "addrspace", None)

def is_variable(u:UOp) -> bool:
  """An int argument of the kernel: a PARAM (or unbound Variable BUFFER) in the ALU addrspace."""
  return u.op in (Ops.PARAM, Ops.BUFFER) and addrspace_of(u) is AddrSpace.ALU

def is_buffer_param(u:UOp) -> bool: return u.op is Ops.PARAM and addrspace_of(u) is not AddrSpace.ALU

def mem_root(u:UOp) -> UOp|None:
  """The PARAM/BUFFER that memory UOp u (PARAM, BUFFER or AFTER of one) refers to; None when u is a value."""
  u = after_root(u)
  if u.op is Ops.BUFFER and addrspace_of(u) in (AddrSpace.REG, AddrSpace.LOCAL): return u
  return u if is_buffer_param(u) else None

VECTOR_WIDTHS = (2, 4, 8, 16)
# the ops that may take vectors of one width, and scalars with them (broadcast to every lane), on vector_alu renderers
VECTOR_ALU = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MULACC, Ops.CAST)   # CAST: a half vector to float lane by lane
# what a launch size may be computed from: the host evaluates it before the launch
LAUNCH_OPS = frozenset({Ops.CONST, Ops.CAST, Ops.ADD, Ops.SUB, Ops.MUL, Ops.CDIV, Ops.CMOD, Ops.MAX, Ops.SHL, Ops.SHR, Ops.AND, Ops.STACK})

def vector_width(u:UOp, known:dict[UOp, int]|None=None) -> int:
  """The lanes of value u (1: a scalar). A DType is a scalar, so the width is where the vector is made (a SHRINK of n elements, a
  STACK of n lanes, a WMMA's D elements) and carries through LOAD, AFTER and REDUCE (their src[0]: a vector reduce before the
  accumulators are made, codegen/accumulator.py) and the VECTOR_ALU ops (their widest src: a scalar operand is broadcast); an INDEX of a
  vector is one lane. `known` holds the widths found so far (check_linear's, of the UOps
  before u), so each UOp is looked at once."""
  known = {} if known is None else known
  # an explicit stack, not recursion: a vector accumulator's chain of ADDs is as long as its loop is unrolled
  stack = [u]
  while stack:
    x = stack[-1]
    if x in known:
      stack.pop()
      continue
    deps: tuple[UOp, ...] = ()
    if x.op is Ops.SHRINK: w = n if len(x.src) == 3 and isinstance(n := const_value(x.src[2]), int) else 1
    elif x.op is Ops.STACK: w = len(x.src)
    elif x.op is Ops.WMMA: w = x.arg.elements_per_thread[2]
    elif x.src and x.op in (Ops.LOAD, Ops.AFTER, Ops.REDUCE): deps = x.src[:1]
    elif x.src and x.op in VECTOR_ALU: deps = x.src
    else: w = 1
    if deps:
      if missing := [d for d in deps if d not in known]:
        stack.extend(missing)
        continue
      w = max(known[d] for d in deps)
    known[x] = w
    stack.pop()
  return known[u]

def _scalars(srcs:tuple[UOp, ...], known:dict[UOp, int]|None) -> bool:
  for s in srcs:
    if vector_width(s, known) != 1: return False
  return True

def _invalid_src(x:UOp) -> bool:
  """Why a dtype rule failed when one of x's srcs is the Invalid literal (a masked index the codegen left): a SpecError; else False."""
  return need(not any(s.is_invalid for s in x.src), "an Invalid constant reached the renderer: the codegen must turn it into a gate") and False

def _lane_ok(x:UOp) -> bool:
  """INDEX(vector, CONST i): lane i of a vector value, of its dtype."""
  return x.src[1].op is Ops.CONST and is_int(x.src[1].dtype) and x.dtype is x.src[0].dtype

def _linear_index_ok(ctx:dict[UOp, int]|None, x:UOp) -> bool:
  """INDEX(buf, idx) of memory, or INDEX(vector, CONST i): lane i of a vector value."""
  need(len(x.src) == 2, "INDEX takes (buf, idx), got {} srcs", len(x.src))
  if mem_root(x.src[0]) is None:
    lane, n = const_value(x.src[1]), vector_width(x.src[0], ctx)
    need(n > 1 and isinstance(lane, int), "INDEX of a value must pick a lane of a vector with a CONST; memory INDEX needs a PARAM/BUFFER "
         "(or AFTER of one)")
    need(0 <= lane < n, "lane {} out of range for a {}-lane vector", lane, n)
    return _lane_ok(x)
  need(dtypes.is_int(x.src[1].dtype) or _invalid_src(x), "index must be an int, got {}", x.src[1].dtype)
  return _index_ok(x, (Ops.PARAM, Ops.BUFFER)) or _invalid_src(x)

def _shrink_ok(x:UOp) -> bool:
  """SHRINK(buf, idx, CONST n): n consecutive elements of a buffer (a vector access of n = 2, 4, 8 or 16 lanes)."""
  need(len(x.src) == 3, "SHRINK takes (buf, idx, CONST n), got {} srcs", len(x.src))
  need(mem_root(x.src[0]) is not None, "SHRINK needs a PARAM/BUFFER (or AFTER of one)")
  need(isinstance(n := const_value(x.src[2]), int) and n in VECTOR_WIDTHS, "SHRINK width must be a CONST in {}", VECTOR_WIDTHS)
  need(dtypes.is_int(x.src[1].dtype), "index must be an int, got {}", x.src[1].dtype)
  return x.dtype is x.src[0].dtype and is_literal(x.src[2])

def _memory_access(x:UOp) -> bool:
  """src[0] of a LOAD/STORE: an INDEX/SHRINK of a buffer (not a lane of a vector value)."""
  return x.src[0].op in (Ops.INDEX, Ops.SHRINK) and len(x.src[0].src) >= 1 and mem_root(x.src[0].src[0]) is not None

def _linear_load_ok(x:UOp) -> bool:
  need(len(x.src) in (1, 3) and _memory_access(x), "LOAD takes (INDEX/SHRINK of a buffer,) or (index, alt, gate)")
  if len(x.src) == 3: need(x.src[2].dtype is dtypes.bool, "LOAD gate must be bool, got {}", x.src[2].dtype)
  return (x.dtype is x.src[0].dtype and (len(x.src) == 1 or fits(x.src[1], x.dtype))) or _invalid_src(x)

def _linear_store_ok(ctx:dict[UOp, int]|None, x:UOp) -> bool:
  need(len(x.src) in (2, 3) and _memory_access(x), "STORE takes (INDEX/SHRINK of a buffer, value) or (index, value, gate)")
  need((v := vector_width(x.src[1], ctx)) == (a := vector_width(x.src[0], ctx)), "STORE of a {}-lane value to a {}-lane access", v, a)
  if len(x.src) == 3: need(x.src[2].dtype is dtypes.bool, "STORE gate must be bool, got {}", x.src[2].dtype)
  return (x.dtype is dtypes.void and fits(x.src[1], x.src[0].dtype)) or _invalid_src(x)

def _stack_ok(x:UOp) -> bool:
  """STACK(x0..xn-1): an n-lane vector of its dtype (an empty void STACK marks a Variable)."""
  if not x.src: return x.dtype is dtypes.void
  return x.dtype is not dtypes.void and all(fits(s, x.dtype) for s in x.src)

def _linear_stack_ok(ctx:dict[UOp, int]|None, x:UOp) -> bool:
  need(len(x.src) in VECTOR_WIDTHS or (not x.src and x.dtype is dtypes.void), "STACK must have {} srcs, got {}", VECTOR_WIDTHS, len(x.src))
  need(_scalars(x.src, ctx), "STACK of vectors is not supported")
  return _stack_ok(x)

def _linear_const_ok(x:UOp) -> bool:
  """A literal: a weak CONST takes the dtype of what it feeds."""
  if x.dtype is dtypes.weakint: return isinstance(x.arg, int) and not isinstance(x.arg, bool)
  if x.dtype is dtypes.weakfloat: return isinstance(x.arg, (int, float)) and not isinstance(x.arg, bool)
  return const_ok(x)

_void = lambda x: x.dtype is dtypes.void  # noqa: E731

def _wmma_ok(ctx:dict[UOp, int]|None, x:UOp) -> bool:
  """WMMA(A..., B..., C... elements, arg=TensorCore): a tensor core's multiply-accumulate (codegen/opt/tc.py)."""
  tc, nc = x.arg, x.arg.elements_per_thread[2]
  need(len(x.src) == sum(tc.elements_per_thread) and _scalars(x.src, ctx), "WMMA takes {} scalars (the A, B, C elements), got {}",
       sum(tc.elements_per_thread), len(x.src))
  need(x.dtype is tc.dtype_out, "WMMA of {} has dtype {}", tc, x.dtype)
  return all(s.dtype is tc.dtype_in for s in x.src[:-nc]) and all(fits(s, tc.dtype_out) for s in x.src[-nc:])

def _linear_range_ok(x:UOp) -> bool:
  """RANGE(end, *order deps) counting to end, or RANGE(void) an endless loop left by END(body, range, cond)."""
  need(len(x.src) >= 1, "RANGE needs its end as src[0]")
  return x.dtype is dtypes.void or range_ok(x)

def _linear_special_ok(x:UOp) -> bool:
  need(len(x.src) == 1 and dtypes.is_int(x.src[0].dtype) and is_int(x.dtype), "SPECIAL takes (end:int,)")
  need(x.arg in SPECIAL_NAMES, "SPECIAL name must be one of {}", sorted(SPECIAL_NAMES))
  need(all(s.op in LAUNCH_OPS or is_variable(s) for s in x.src[0].toposort()),
       "a launch size (SPECIAL end) may only use CONSTs, variable PARAMs and integer arithmetic")
  return _special_ok(x)

def _linear_alu_ok(ctx:dict[UOp, int]|None, x:UOp) -> bool:
  """An ALU op (or CAST/BITCAST) of scalars, or a VECTOR_ALU op of vectors of one width (and scalars); its src count named in the message."""
  op, n = x.op, len(x.src)
  need(_scalars(x.src, ctx) or (op in VECTOR_ALU and len({vector_width(s, ctx) for s in x.src} - {1}) == 1),
       "vector ALU is not supported: devectorize first (STACK lanes, INDEX(vec, i))")
  if op is Ops.WHERE: need(n == 3 and x.src[0].dtype is dtypes.bool, "WHERE takes (cond:bool, a, b)")
  elif op is Ops.MULACC: need(n == 3, "MULACC takes (a, b, c)")
  elif op in GroupOp.Unary or op in (Ops.CAST, Ops.BITCAST): need(n == 1, "{} takes one src", op)
  elif op in GroupOp.Binary: need(n == 2, "{} takes two srcs", op)
  if op is Ops.BITCAST and not is_literal(x):
    need(x.dtype.itemsize == x.src[0].dtype.itemsize, "BITCAST between different sizes: {} -> {}", x.src[0].dtype, x.dtype)
  return (cast_ok(x) if op in (Ops.CAST, Ops.BITCAST) else alu_ok(x)) or _invalid_src(x) or _wrong_kind(x)

def _wrong_kind(x:UOp) -> bool:
  """Why an ALU's dtype rule failed when the op is for ints only or floats only: a SpecError; else False (the rule's place says it)."""
  need(x.op not in _INT_ONLY or is_int(x.dtype), "{} is an int op, not for {}{}", x.op, x.dtype, " (FDIV divides floats)" if x.op is Ops.CDIV else "")
  need(x.op not in _FLOAT_ONLY or dtypes.is_float(x.dtype), "{} is a float op, not for {}", x.op, x.dtype)
  return False

# the ints wider than 64 bits dtype.py keeps for exact intermediate math: no renderer has them
_WIDE_INTS = tuple(dt for dt in vars(dtypes).values() if isinstance(dt, DType) and dt.bitsize > 64 and dt not in dtypes.weaks)

def _refuse(what:str): return lambda x: need(False, what, x.op, x.dtype)

# an upcast kernel (tinygrad/codegen/opt/) also has vector accesses: SHRINK loads/stores, STACK of lanes, INDEX of a lane, and a
# GROUP of the stores of one iteration (and of the loops of a split range's pieces: codegen/split_ranges.py). These rules come first:
# the lowered INDEX/LOAD/STORE rules reject the vector forms.
spec_lowered = PatternMatcher([
  (UPat(Ops.SHRINK, name="x"), _shrink_ok),
  (UPat(Ops.STACK, name="x"), _stack_ok),
  # (VECTOR_ALU: lane-wise code kept as vectors on a vector_alu renderer, codegen/expander.py)
  (UPat(Ops.INDEX, src=(UPat((Ops.LOAD, Ops.STACK, Ops.WMMA) + VECTOR_ALU), UPat(Ops.CONST)), name="x"), _lane_ok),
  (UPat(Ops.WMMA, name="x"), _wmma_ok),
  (UPat(Ops.LOAD, src=(UPat(Ops.SHRINK),), allow_any_len=True, name="x"), _linear_load_ok),
  (UPat(Ops.STORE, src=(UPat(Ops.SHRINK),), allow_any_len=True, name="x"), _linear_store_ok),
  (UPat(Ops.GROUP, dtypes.void, name="x"), lambda x: len(x.src) >= 1 and all(s.op in (Ops.STORE, Ops.END) for s in x.src)),
]) + _spec_lowered_scalar

spec_linear = PatternMatcher([
  (UPat(Ops.CONST, src=(), name="x"), _linear_const_ok),
  (UPat(dtype=dtypes.weaks, name="x"),
   _refuse("weak dtypes must be committed before rendering (tinygrad/codegen/index_dtype.py lowers index math to int32/int64)")),
  (UPat(dtype=_WIDE_INTS, name="x"), _refuse("dtype {1} is not supported by the renderers")),
  (UPat((Ops.FLOORDIV, Ops.FLOORMOD), name="x"),
   _refuse("no renderer has floor division; the codegen lowers {0} to CDIV/CMOD (tinygrad/codegen/index_dtype.py)")),
  (UPat(Ops.SINK, dtypes.void), lambda: True),
  (UPat(Ops.PARAM, name="x"), _param_ok),
  (UPat(Ops.BUFFER, name="x"), lambda x: need(len(x.src) == 1 and size_const(x.src[0]) and x.src[0].arg > 0, "a BUFFER needs a literal size > 0")
   and _local_buffer_ok(x)),
  (UPat(Ops.SPECIAL, name="x"), _linear_special_ok),
  (UPat(Ops.RANGE, name="x"), _linear_range_ok),
  (UPat(Ops.END, name="x"), lambda x: need(len(x.src) in (2, 3) and x.src[1].op is Ops.RANGE, "END takes (body, RANGE) or (body, RANGE, cond)")
   and x.dtype is dtypes.void and (len(x.src) == 2 or x.src[2].dtype is dtypes.bool)),
  (UPat(Ops.IF, name="x"), lambda x: need(len(x.src) >= 1 and x.src[0].dtype is dtypes.bool, "IF takes (cond:bool, ...)") and _void(x)),
  (UPat(Ops.ENDIF, name="x"), lambda x: need(len(x.src) == 1 and x.src[0].op is Ops.IF, "ENDIF takes (IF,)") and _void(x)),
  (UPat((Ops.NOOP, Ops.GROUP, Ops.BARRIER), name="x"), _void),
  (UPat(Ops.AFTER, name="x"), _after_ok),
  (UPat(Ops.INDEX, name="x"), _linear_index_ok),
  (UPat(Ops.SHRINK, name="x"), _shrink_ok),
  (UPat(Ops.LOAD, name="x"), _linear_load_ok),
  (UPat(Ops.STORE, name="x"), _linear_store_ok),
  (UPat(Ops.STACK, name="x"), _linear_stack_ok),
  (UPat(Ops.WMMA, name="x"), _wmma_ok),
  (UPat((*GroupOp.ALU, Ops.CAST, Ops.BITCAST), name="x"), _linear_alu_ok),
  (UPat(name="x"), _refuse("{0} is not part of the linear-UOp contract")),
])

# tinygrad 0.14's name for the spec of the linearized program
spec_program = spec_linear

# ***** verification *****

def _describe(i:int, u:UOp) -> str:
  srcs = ", ".join(f"{s.op} {s.dtype}" + ("" if s.arg is None else f" {s.arg!r}") for s in u.src)
  return f"UOp {i}: {u.op} {u.dtype} arg={u.arg!r} with {len(u.src)} src{'s' if len(u.src) != 1 else ''} ({srcs})"

def _broken_rule(spec:PatternMatcher, u:UOp, ctx:Any=None) -> str:
  """Which rule of spec rejected u (only called on a failure)."""
  for pat, fxn in spec.patterns:
    where = f"{pat.location[0].split('/')[-1]}:{pat.location[1]}"
    try: ret = PatternMatcher([(pat, fxn)]).rewrite(u, ctx)
    except SpecError as e: return str(e)
    except Exception as e: return f"the rule at {where} raised {type(e).__name__}: {e}"
    if ret is False: return f"it breaks the rule at {where}"
    if ret is True: break
  return "it matches no rule"

def why_invalid(spec:PatternMatcher, u:UOp, ctx:Any=None) -> str|None:
  """None when spec accepts u, else why not: what the rule that refused it says (SpecError), or where that rule is."""
  try:
    if spec.rewrite(u, ctx) is True: return None
  except SpecError as e: return str(e)
  except Exception: pass
  return _broken_rule(spec, u, ctx)

def type_verify(uops_or_sink:UOp|Sequence[UOp], spec:PatternMatcher, stage:str="graph") -> None:
  """Checks every UOp of a graph (children first) or of a list against spec. Raises RuntimeError naming the stage and the first
  UOp that no rule accepts: its position (in the list, or in the toposort of the graph), op, dtype, arg and srcs, and why. (tinygrad
  0.14's type_verify(ast, spec) without a stage: the message says "graph".)"""
  lst = list(uops_or_sink.toposort()) if isinstance(uops_or_sink, UOp) else list(uops_or_sink)
  widths: dict[UOp, int] = {}   # the vector widths the linear program's rules find, shared along the list
  for i, u in enumerate(lst):
    if (why := why_invalid(spec, u, widths)) is not None: raise RuntimeError(f"SPEC: the {stage} is invalid at {_describe(i, u)}: {why}")
