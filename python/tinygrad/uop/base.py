"""UOp as everything below the symbolic engine needs it: the core's hooks and the Python methods that need no rule table.

UOp, UPat, PatternMatcher and graph_rewrite are implemented in Rust (`tinygrad._core`): interning, toposort, matching and the rewrite
loop never run Python code except for the callbacks of rules that matched. This module registers the Python objects the core needs
(Ops, DType, hooks), attaches to UOp the Python-level methods that run no rule table (constants, Variables, value ranges, the
tensor-level primitives of tinygrad/mixin), and handles TRACK_MATCH_STATS reporting.

Above it: uop/upat.py (UPat's sugar), the rule tables written with it (uop/symbolic.py, uop/shape.py, uop/call.py, uop/render.py), and
uop/ops.py, which attaches the methods that run those tables (simplify, render, shape, calls). Code above the uop layer imports from
uop/ops.py.
"""
from __future__ import annotations
import collections
import dataclasses
import functools
import importlib
import marshal
import math
import operator
import os
import types
import weakref
from enum import Enum, auto
from typing import Any, Callable
from tinygrad import _core
from tinygrad._core import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import DType, dtypes, ConstType, PyConst, Invalid, InvalidType, AddrSpace, least_upper_dtype, least_upper_float, truncate
from tinygrad.helpers import TRACK_MATCH_STATS, to_function_name, cdiv
from tinygrad.uop.sint import sint
from tinygrad.uop.track import (track_event, track_rewrites_log, match_stats_table, write_rewrite_log, set_track_match_stats,  # noqa: F401
  REWRITE_LOG_FORMAT)
from tinygrad.mixin.mathtraits import OperatorMixin, MathTrait, UOpMathTrait
from tinygrad.mixin.movement import MovementMixin
from tinygrad.mixin.reduce import ReduceMixin

class BottomUpGate(Exception):
  """Raised by a bottom-up rule: keep the node as it is and do not descend into its sources."""

# ***** hooks called by the core *****

# ops whose dtype is always void, and ops that pass their first source's dtype through
_VOID_OPS = frozenset({Ops.STORE, Ops.LINEAR, Ops.SINK, Ops.PROGRAM, Ops.SOURCE, Ops.END, Ops.BARRIER, Ops.GROUP, Ops.IF, Ops.ENDIF,
                       Ops.TUPLE, Ops.FUNCTION, Ops.CUSTOM_FUNCTION, Ops.REWRITE_ERROR, Ops.PYLITERAL})
_FIRST_SRC_OPS = frozenset({Ops.LOAD, Ops.UNSHARD, Ops.REDUCE, Ops.AFTER, Ops.RANGE, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.COPY,
                            Ops.STAGE, Ops.DETACH, Ops.MSTACK, Ops.MSELECT, Ops.ALLREDUCE, Ops.SPECIAL, Ops.INDEX})
_FLOAT_UNARY_OPS = frozenset({Ops.SIN, Ops.LOG2, Ops.EXP2, Ops.SQRT, Ops.RECIPROCAL})
_BROADCASTABLE = frozenset(GroupOp.Broadcastable)

def promo_dtype(src:tuple[UOp, ...]) -> DType:
  """The dtype several operands promote to (the first one when they all agree, the common case)."""
  d0 = src[0].dtype
  for s in src:
    if s.dtype is not d0: return least_upper_dtype(*(x.dtype for x in src))
  return d0

def dtype_from_uop(op:Ops, src:tuple[UOp, ...], arg:Any) -> DType|None:
  """The dtype a UOp gets when it is constructed with dtype=None (tinygrad 0.14's production rules)."""
  if op in GroupOp.Comparison: return dtypes.bool
  if op is Ops.SHL or op is Ops.SHR:
    if not all(dtypes.is_int(x.dtype) or _is_invalid_const(x) for x in src):
      raise RuntimeError(f"shift operands must be int, got {[x.dtype for x in src]}")
    return src[0].dtype
  if op is Ops.WHERE:
    if len(src) == 3 and src[0].dtype is not dtypes.bool: raise RuntimeError(f"where cond must be bool, got {src[0].dtype}")
    return promo_dtype(src[1:]) if len(src) > 1 else None
  if op in _BROADCASTABLE: return promo_dtype(src) if src else None
  if op is Ops.CONST:
    # the value picks the dtype; bool before int (True is an int), Invalid is bool, the bottom of the promotion lattice
    if isinstance(arg, (bool, InvalidType)): return dtypes.bool
    if isinstance(arg, int): return dtypes.weakint
    if isinstance(arg, float): return dtypes.weakfloat
    raise TypeError(f"no dtype for CONST with arg {arg!r}")
  if op in _FLOAT_UNARY_OPS: return dtypes.bool if _is_invalid_const(src[0]) else least_upper_float(src[0].dtype)
  if op in GroupOp.Unary: return src[0].dtype if src else None
  if op in _VOID_OPS: return dtypes.void
  if op in _FIRST_SRC_OPS: return src[0].dtype if src else None
  if op is Ops.CAST or op is Ops.BITCAST:
    if not isinstance(arg, DType): raise TypeError(f"{op} arg must be a DType, got {arg!r}")
    return arg
  if op is Ops.BUFFER or op is Ops.PARAM: return getattr(arg, "dtype", None)
  if op is Ops.STACK: return promo_dtype(src) if src else dtypes.void
  if op is Ops.CALL: return dtypes.void if src and src[0].dtype is dtypes.void else None
  if op is Ops.WMMA: return src[2].dtype if len(src) > 2 else None
  if op is Ops.GETADDR: return dtypes.uint64
  if op is Ops.BINARY: return dtypes.uint8
  if op is Ops.GETTUPLE:
    tup = src[0].src[0] if src[0].op is Ops.FUNCTION else src[0]
    return tup.src[arg].dtype
  if op in GroupOp.Movement: return src[0].dtype if src else None
  return None

def _is_invalid_const(u:UOp) -> bool: return u.op is Ops.CONST and u.arg is Invalid

all_metadata: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
def _record_metadata(u:UOp, metadata:Any) -> None: all_metadata[u] = metadata

def _uop_unflatten(nodes:list) -> UOp:
  """Rebuilds a UOp graph pickled in flattened form (see UOp.__reduce__)."""
  return _core.unflatten(nodes)

# ***** TRACK_MATCH_STATS (recording: uop/track.py) *****

class TrackedPatternMatcher:
  """tinygrad 0.14's TrackedPatternMatcher: a PatternMatcher (it matches exactly as one, and is one) whose rules are in the match statistics
  whenever tracking is on, even if it was built while it was off (a PatternMatcher built then is left out of them). The recording is the
  one every PatternMatcher has: TRACK_MATCH_STATS >= 1 counts each rule's attempts, matches and time (match_stats_table), >= 2 adds each
  graph_rewrite call and each match (the rule's file:line, the node and its replacement) to track_rewrites_log, which
  write_rewrite_log saves for tinygrad.viz.cli."""
  def __new__(cls, patterns, compiled:bool=True) -> PatternMatcher:  # type: ignore[misc]
    level = _core.track_level()
    _core.set_track_level(max(level, 1))   # rules register their counters when the matcher is built at a level >= 1
    try: return PatternMatcher(patterns, compiled)
    finally: _core.set_track_level(level)

_core.register(Ops, DType, dtypes.void, BottomUpGate, dtype_from_uop, _record_metadata, _uop_unflatten, track_event)
set_track_match_stats(int(TRACK_MATCH_STATS.value))

# ***** methods attached to the Rust classes *****

def _attach(cls:type, mixin:type) -> None:
  """Copies a mixin's attributes onto a Rust class (subclassing would force every node the core creates through Python)."""
  for name, value in mixin.__dict__.items():
    if name in {"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__"}: continue
    setattr(cls, name, value)
    if hasattr(value, "__set_name__"): value.__set_name__(cls, name)

# levels of src printed nested in one another; a deeper subtree is printed by reference and defined after the root's
# text, so a repr is linear in the graph (indenting every level of a deep chain would make it quadratic)
REPR_MAX_DEPTH = 64

def pretty_print(root:UOp) -> str:
  """tinygrad-style multi-line repr; a subtree used more than once is printed once as `xN:=` and referenced as `xN`.
  Subtrees more than REPR_MAX_DEPTH levels deep are referenced too, and defined after the root as `xN:=...`."""
  # number shared nodes in the order a pre-order walk over the edges first reaches them
  refs: dict[UOp, list[int]] = {}
  walk = [iter(root.src)]
  while walk:
    if (s:=next(walk[-1], None)) is None:
      walk.pop()
      continue
    (e:=refs.setdefault(s, [len(refs), 0]))[1] += 1
    if e[1] == 1: walk.append(iter(s.src))
  out: list[str] = []
  printed: set[UOp] = set()
  tops: list[UOp] = [root]
  for top in tops:  # grows while it is walked: the deep subtrees cut off below
    if top is not root: out.append("\n")
    work: list = [(top, 0)]
    while work:
      if isinstance(item:=work.pop(), str):
        out.append(item)
        continue
      x, d = item
      idx, cnt = refs.get(x, (0, 0))
      if x is not top and (x in printed or (d >= 2*REPR_MAX_DEPTH and x.src)):
        if x not in printed: printed.add(x); tops.append(x)
        out.append(f"{' '*d}x{idx}")
        continue
      printed.add(x)
      name = f"x{idx}:=" if cnt > 1 or (x is top and top is not root) else ""
      out.append(f"{' '*d}{name}{type(x).__name__}({x.op}, {x.dtype}, arg={x.argstr()}{x.tagstr()}, src=(")
      work.append("))")
      for s in reversed(x.src): work.extend([",", (s, d+2), "\n"])
  return "".join(out)

class _UOpMethods:
  def __repr__(self:UOp) -> str: return pretty_print(self)
  def argstr(self:UOp) -> str: return f'({", ".join(map(str, self.arg))})' if self.op is Ops.REDUCE else repr(self.arg)
  def tagstr(self:UOp) -> str: return f", tag={self.tag}" if self.tag is not None else ""
  def rtag(self:UOp, tag:Any=True) -> UOp: return self.replace(tag=tag)
  def sink(self:UOp, *srcs:UOp|None, **kwargs) -> UOp: return UOp(Ops.SINK, dtypes.void, (self,)+tuple(x for x in srcs if x is not None), **kwargs)
  def f(self:UOp, op:Ops, **kwargs) -> UOp: return UOp(op, dtype=kwargs.pop("dtype", self.dtype), src=(self,), **kwargs)
  @property
  def val(self:UOp) -> Any:
    if self.op is not Ops.CONST: raise ValueError(f"val is only for CONST, got {self.op}")
    return self.arg
  @functools.cached_property
  def backward_slice(self:UOp) -> dict[UOp, None]:
    res = self.toposort()
    res.pop(self)
    return res
  @property
  def backward_slice_with_self(self:UOp) -> dict[UOp, None]: return {self: None, **self.backward_slice}
  def op_in_backward_slice_with_self(self:UOp, *ops:Ops) -> bool: return self.op in ops or any(x.op in ops for x in self.backward_slice)
  def substitute(self:UOp, dvars:dict[UOp, UOp], name:str|None=None, extra_pm:PatternMatcher|None=None, walk:bool=False) -> UOp:
    return graph_rewrite(self, _substitute+extra_pm if extra_pm is not None else _substitute, dvars, bottom_up=True, walk=walk, name=name)
  def get_consumer_map(self:UOp) -> dict[UOp, dict[UOp, None]]:
    ret: dict[UOp, dict[UOp, None]] = {}
    for u in self.toposort():
      ret[u] = {}
      for s in u.src: ret[s][u] = None
    return ret
_attach(UOp, _UOpMethods)


# ***** pickling of rule callbacks *****

def _rebuild_function(module:str, code:bytes, name:str, defaults:tuple|None) -> Callable:
  return types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name, defaults)

def _reduce_function(fxn:Callable) -> Any:
  """Module-level functions pickle by reference; lambdas (which have no importable name) by their code and module."""
  if isinstance(fxn, types.FunctionType) and fxn.__name__ == "<lambda>" and fxn.__closure__ is None:
    return _PickledFunction(fxn.__module__, marshal.dumps(fxn.__code__), fxn.__name__, fxn.__defaults__)
  return fxn

class _PickledFunction:
  """Unpickles as the function itself."""
  def __init__(self, *args): self.args = args
  def __reduce__(self): return _rebuild_function, self.args

def _pm_reduce(self:PatternMatcher): return PatternMatcher, ([(p, _reduce_function(f)) for p, f in self.patterns],)
PatternMatcher.__reduce__ = _pm_reduce

# ***** module-level matchers *****

_substitute = PatternMatcher([(UPat(tuple(Ops), name="x"), lambda ctx, x: ctx.get(x, None))])

def print_uop_graph(u:UOp) -> None: print(pretty_print(u))

if os.environ.get("TINYGRAD_CORE_SELFCHECK"): assert UOp(Ops.NOOP) is UOp(Ops.NOOP)

# ***** symbolic: constants, Variables, value ranges (the simplification rules: uop/symbolic.py, run by uop/ops.py) *****
# a module global is read faster than Ops.X (see uop/__init__.py): the hottest code uses these aliases
_ADD, _AFTER, _AND, _BUFFER, _CAST, _CDIV = Ops.ADD, Ops.AFTER, Ops.AND, Ops.BUFFER, Ops.CAST, Ops.CDIV
_CMOD, _CMPEQ, _CMPLT, _CMPNE, _CONST, _FLOORDIV = Ops.CMOD, Ops.CMPEQ, Ops.CMPLT, Ops.CMPNE, Ops.CONST, Ops.FLOORDIV
_FLOORMOD, _INDEX, _LOAD, _MAX, _MUL, _OR = Ops.FLOORMOD, Ops.INDEX, Ops.LOAD, Ops.MAX, Ops.MUL, Ops.OR
_PARAM, _RANGE, _SHL, _SHR, _SPECIAL, _STACK = Ops.PARAM, Ops.RANGE, Ops.SHL, Ops.SHR, Ops.SPECIAL, Ops.STACK
_STORE, _SUB, _WHERE, _XOR = Ops.STORE, Ops.SUB, Ops.WHERE, Ops.XOR

class AxisType(Enum):
  def __repr__(self): return str(self)
  DEVICE = auto(); GLOBAL = auto(); WARP = auto(); LOCAL = auto(); WEAK = auto(); GROUP_REDUCE = auto(); REDUCE = auto(); UPCAST = auto()
  UNROLL = auto(); THREAD = auto(); PLACEHOLDER = auto(); LOOP = auto()

@dataclasses.dataclass(frozen=True, order=True)
class ParamArg:
  """The arg of BUFFER/PARAM. A Variable is a 0-d BUFFER in the ALU addrspace whose ParamArg carries its name and value range."""
  slot: int
  dtype: DType
  vmin_vmax: tuple[PyConst, PyConst]|None = None
  multiple_of: int|None = None
  name: str|None = None
  addrspace: AddrSpace|None = AddrSpace.GLOBAL
  axis: int|None = None
  device: str|tuple[str, ...]|None = None
  volatile: bool = False
  def __post_init__(self):
    # the fields as a plain tuple: UOp.tuplize sorts by it (the same order as the dataclass comparison, without Python calls)
    object.__setattr__(self, "_key", tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
  def __repr__(self):
    defaults = (("vmin_vmax", None), ("multiple_of", None), ("name", None), ("addrspace", AddrSpace.GLOBAL), ("axis", None), ("device", None),
                ("volatile", False))
    extra = [f"{k}={v!r}" for k, d in defaults if (v := getattr(self, k)) != d]
    return f"ParamArg({', '.join([repr(self.slot), repr(self.dtype)] + extra)})"

@dataclasses.dataclass(frozen=True)
class KernelInfo:
  """The arg of a kernel AST's SINK (tinygrad 0.14's fields). `opts_to_apply`: None lets the codegen choose the optimizations (heuristics
  or BEAM); a tuple (empty too) applies exactly those Opts (tinygrad/codegen/opt/) instead. `applied_opts` records those applied, in order.
  `axis_types`, `dont_use_locals`, `estimates` and `beam` are carried for code written against 0.14 and not read by this codegen."""
  name: str = "test"
  axis_types: tuple[AxisType, ...] = ()
  dont_use_locals: bool = False
  applied_opts: tuple = ()
  opts_to_apply: tuple|None = None
  estimates: Any = None
  beam: int = 0
  @property
  def function_name(self) -> str: return to_function_name(self.name)
  def __repr__(self):
    extra = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)[1:] if getattr(self, f.name) != f.default]
    return f"KernelInfo({', '.join([repr(self.name)] + extra)})"

Variable = UOp
ConstLike = ConstType|UOp|tuple[ConstType, ...]

# the names a SPECIAL (a launch dimension the runtime sets) may have: GPU block/thread indices and the CPU thread index
CORE_ID = "core_id"
GPU_DIMS = ("gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2")
SPECIAL_NAMES = frozenset(GPU_DIMS) | {CORE_ID}

def const_value(u:UOp) -> Any:
  """The value of a literal: a CONST, or a CAST of a CONST (tinygrad 0.14's typed literal); a tuple of them for a STACK of literals.
  None for anything else."""
  if u.op is _CONST: return u.arg
  if u.op is _CAST and len(u.src) == 1 and u.src[0].op is _CONST: return u.dtype.const(u.src[0].arg)
  if u.op is _STACK and u.src and all(is_literal(s) for s in u.src): return tuple(const_value(s) for s in u.src)
  return None

def after_root(u:UOp) -> UOp:
  """The node under a chain of AFTERs (AFTER(x, *deps) is x once deps have run); u itself when it is no AFTER."""
  while u.op is _AFTER: u = u.src[0]
  return u

def is_literal(u:UOp) -> bool: return u.op is _CONST or (u.op is _CAST and len(u.src) == 1 and u.src[0].op is _CONST)

def range_str(u:UOp) -> str: return '_'.join(str(x) if x >= 0 else "m"+str(-x) for x in u.arg[0:-1])

def identity_element(op:Ops, dt:DType) -> PyConst:
  """The value x for which `x op y == y`: what a reduce by op starts from (and the result of reducing nothing)."""
  if op is _ADD: return dt.const(0)
  if op is _MUL: return dt.const(1)
  if op is _MAX: return dt.const(dt.min)
  raise ValueError(f"no identity for reduce op {op}")

# ** value ranges **

_BINARY = frozenset(GroupOp.Binary)
_FLOAT_SET = frozenset(dtypes.floats + (dtypes.weakfloat,))

def _min_max(u:UOp) -> tuple[Any, Any]:
  """(vmin, vmax) of u from the ranges of its sources (which are already computed). Sound for ints: every value u can take is inside."""
  op, dt = u.op, u.dtype
  if op is _CONST and u.arg is not Invalid: return u.arg, u.arg
  if op in _BINARY and dt not in _FLOAT_SET:
    s0, s1 = u.src
    a0, a1, b0, b1 = s0.vmin, s0.vmax, s1.vmin, s1.vmax
    if op is _ADD: return a0+b0, a1+b1
    if op is _MUL:
      if b0 == b1 and a0 <= a1: return (a0*b0, a1*b0) if b0 >= 0 else (a1*b0, a0*b0)  # scaling by a constant, the common case
      return min(v := (a0*b0, a0*b1, a1*b0, a1*b1)), max(v)
    if op is _FLOORDIV and type(a0) is int and type(a1) is int and type(b0) is int and type(b1) is int:
      if a0 > a1: return 0, 0  # an empty numerator range, e.g. a RANGE with end 0
      if b0 == b1 > 0: return a0//b0, a1//b0
      if b0*b1 > 0: return min(v := (a0//b0, a0//b1, a1//b0, a1//b1)), max(v)
    elif op is _FLOORMOD and type(a0) is int and type(a1) is int and type(b0) is int and type(b1) is int:
      if a0 > a1: return 0, 0
      if b0 == b1 > 0: return (a0 % b0, a1 % b0) if a0//b0 == a1//b0 else (0, b0-1)
      if b0 == b1 < 0: return (a0 % b0, a1 % b0) if a0//b0 == a1//b0 else (b0+1, 0)
      if b0 > 0: return 0, b1-1
      if b1 < 0: return b0+1, 0
    elif op is _CMPLT: return a1 < b0, a0 < b1
    elif op is _CMPNE: return (a1 < b0) or (b1 < a0), not (a0 == a1 == b0 == b1)
    elif op is _CMPEQ: return a0 == a1 == b0 == b1, not ((a1 < b0) or (b1 < a0))
    elif op is _MAX: return max(a0, b0), max(a1, b1)
    elif op is _SUB: return a0-b1, a1-b0
    elif op is _AND:
      if dt is dtypes.bool: return a0 and b0, a1 and b1
      if dtypes.is_int(dt) and b0 == b1 >= 0: return 0, (b1 if a0 < 0 else min(a1, b1))
    elif op is _OR:
      if dt is dtypes.bool: return a0 or b0, a1 or b1
    elif op is _XOR:
      if b0 == b1 == -1 and type(a0) is int and type(a1) is int: return ~a1, ~a0
    elif op is _SHL or op is _SHR:
      if b0 == b1 and type(a0) is int and type(a1) is int and type(b0) is int and b0 >= 0:
        return (a0 << b0, a1 << b0) if op is _SHL else (a0 >> b0, a1 >> b0)
    elif op is _CDIV and type(a0) is int and type(a1) is int and type(b0) is int and type(b1) is int:
      if b0*b1 > 0: return min(v := (cdiv(a0, b0), cdiv(a0, b1), cdiv(a1, b0), cdiv(a1, b1))), max(v)
    elif op is _CMOD:
      if b0 == b1 > 0: return (0 if a0 > 0 else a0 if 0 >= a0 > -b0 else -(b1-1), 0 if a1 < 0 else a1 if 0 <= a1 < b0 else b0-1)
      if b0 > 0: return (0, b1-1) if a0 >= 0 else (-(b1-1), 0) if a1 <= 0 else (-(b1-1), b1-1)
      if b1 < 0: return (0, -b0-1) if a0 >= 0 else (-(-b0-1), 0) if a1 <= 0 else (-(-b0-1), -b0-1)
  # float WHERE is left alone: explicit NaNs (transcendentals) make its range meaningless
  if op is _WHERE and dtypes.is_int(dt): return min(u.src[1].vmin, u.src[2].vmin), max(u.src[1].vmax, u.src[2].vmax)
  if (op is _BUFFER or op is _PARAM) and isinstance(u.arg, ParamArg) and u.arg.vmin_vmax is not None: return u.arg.vmin_vmax
  if (op is _RANGE or op is _SPECIAL) and dt is not dtypes.void: return 0, u.src[0].vmax - 1
  if op is _AFTER or op is _INDEX: return u.src[0].vmin, u.src[0].vmax
  if op is _STACK and u.src: return min(x.vmin for x in u.src), max(x.vmax for x in u.src)
  if op is _CAST:
    # conversion is monotone: truncation toward zero into an int, rounding to the value grid into a float
    lo, hi = u.src[0].vmin, u.src[0].vmax
    rnd = truncate.get(dt) if dtypes.is_float(dt) else math.trunc if dtypes.is_int(dt) else None
    if rnd is not None and all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi)): lo, hi = rnd(lo), rnd(hi)
    if dtypes.is_unsigned(dt) and 0 <= lo and hi <= dt.max: return lo, hi
    if dt in _CLAMPED_CAST_DTYPES: return max(dt.min, lo), min(hi, dt.max)
  return dt.min, dt.max

_CLAMPED_CAST_DTYPES = frozenset(dtypes.floats + dtypes.sints + (dtypes.weakint,))
# ops whose range never depends on the ranges of their sources
_NO_SRC_BOUNDS = frozenset({Ops.CONST, Ops.BUFFER, Ops.PARAM})

def _fill_children_first(root:UOp, key:str, compute:Callable[[UOp], None], no_src:frozenset=frozenset()) -> None:
  """Runs compute(n) for root and every node below it whose __dict__ lacks key, sources first, without recursion (graphs can
  be deep). Nodes whose op is in no_src are computed without looking at their sources."""
  stack = [root]
  while stack:
    n = stack[-1]
    if key in n.__dict__:
      stack.pop()
      continue
    missing = [s for s in n.src if key not in s.__dict__] if n.op not in no_src else None
    if missing:
      stack.extend(missing)
      continue
    stack.pop()
    compute(n)

def _store_bounds(u:UOp) -> None: u.__dict__["vmin"], u.__dict__["vmax"] = _min_max(u)

def _store_tuplize(n:UOp) -> None:
  # a ParamArg compares as its field tuple; spelling it out keeps the comparison in C
  arg = n.arg
  if type(arg) is ParamArg: arg = arg._key
  n.__dict__["tuplize"] = (n.op.value, arg, n.dtype) + tuple(s.__dict__["tuplize"] for s in n.src)

class _Bound:
  """vmin/vmax: computed on first access, then stored in the node's __dict__, which a non-data descriptor lets win from then on."""
  def __init__(self, key:str): self.key = key
  def __get__(self, u, owner=None):
    if u is None: return self
    d = u.__dict__
    if u.op not in _NO_SRC_BOUNDS:
      for s in u.src:
        if "vmin" not in (sd := s.__dict__):
          # fresh leaves are the common case (rules build new constants); anything else is filled in children first
          if (sop := s.op) is _CONST and (v := s.arg) is not Invalid: sd["vmin"] = sd["vmax"] = v
          elif sop in _NO_SRC_BOUNDS: sd["vmin"], sd["vmax"] = _min_max(s)
          else:
            _fill_children_first(u, "vmin", _store_bounds, _NO_SRC_BOUNDS)
            return d[self.key]
    d["vmin"], d["vmax"] = _min_max(u)
    return d[self.key]

class _Tuplize:
  """UOp.tuplize, a structural sort key (commutative operands are put in ascending order): (op, arg, dtype, *src keys).
  Computed children first without recursion and stored in each node's __dict__."""
  def __get__(self, u, owner=None):
    if u is None: return self
    # the common case: every source has its key already
    keys = []
    for s in u.src:
      if (k := s.__dict__.get("tuplize")) is None: break
      keys.append(k)
    else:
      arg = u.arg
      if type(arg) is ParamArg: arg = arg._key
      ret = u.__dict__["tuplize"] = (u.op.value, arg, u.dtype, *keys)
      return ret
    _fill_children_first(u, "tuplize", _store_tuplize)
    return u.__dict__["tuplize"]

# ** the UOp methods **

def _is_var(x:UOp) -> bool:
  return x.op is _BUFFER and isinstance(x.arg, ParamArg) and x.arg.vmin_vmax is not None and x.arg.addrspace is AddrSpace.ALU and \
    len(x.src) == 1 and x.src[0].op is _STACK and len(x.src[0].src) == 0

class _UOpSymbolic:
  vmin = _Bound("vmin")
  vmax = _Bound("vmax")
  @property
  def _min_max(self:UOp) -> tuple[Any, Any]: return self.vmin, self.vmax

  # ** constants **
  @staticmethod
  def const(b:ConstLike, dtype:DType|None=None) -> UOp:
    """A CONST of value b. dtype=None gives the weak dtype of the Python value (weakint, weakfloat) or bool."""
    # the common case first: a Python int as an int constant needs no conversion
    if type(b) is int and (dtype is None or dtype in _INT_DTYPE_SET): return UOp(_CONST, dtype or _WEAKINT, (), b)
    if isinstance(b, DType): b, dtype = dtype, b  # UOp.const(dtype, value) spelling
    if dtype is None or b is Invalid: dtype = dtypes.from_py(b)
    if isinstance(b, UOp): return b.cast(dtype)
    if isinstance(b, tuple): return UOp(_STACK, dtype, tuple(UOp.const(c, dtype) for c in b))
    return UOp(_CONST, dtype, (), dtype.const(b))
  def const_like(self:UOp, b:ConstLike, dtype:DType|None=None) -> UOp: return UOp.const(b, dtype or self.dtype)
  def ufix(self:UOp, x) -> UOp: return x if isinstance(x, UOp) else UOp.const(x)
  @property
  def is_invalid(self:UOp) -> bool: return self.op is _CONST and self.arg is Invalid
  @staticmethod
  def invalid() -> UOp: return UOp.const(Invalid)
  def valid(self:UOp, cond:UOp) -> UOp: return cond.where(self, self.const_like(Invalid))
  def get_idx(self:UOp) -> UOp: return self.src[1] if self.op is _WHERE and self.src[2].is_invalid else self
  def get_valid(self:UOp) -> UOp: return self.src[0] if self.op is _WHERE and self.src[2].is_invalid else UOp.const(not self.is_invalid)
  @staticmethod
  def range(end:sint, axis_id, axis_type=AxisType.WEAK, *arg, dtype:DType=dtypes.weakint, src=(), **kwargs) -> UOp:
    return UOp(_RANGE, dtype, (UOp.const(end, dtype),)+tuple(src), (axis_id, axis_type)+arg, **kwargs)
  @staticmethod
  def special(end:sint, name:str, dtype:DType=dtypes.weakint) -> UOp: return UOp(_SPECIAL, dtype, (UOp.const(end, dtype),), name)
  def after(self:UOp, *src:UOp, **kwargs) -> UOp:
    if not src: return self
    # a tensor-level write through a reshaped storage (tinygrad's cache.uop.after(cache[...].uop.store(v))): the write is to the storage
    # itself, seen reshaped, as Tensor.assign builds it (an AFTER's storage is flat: uop/spec.py)
    if self.op is _RESHAPE and self.src[0].op in (_BUFFER, _AFTER) and len(src) == 1 and src[0].op is _STORE and not kwargs and \
       src[0].shape is not None:
      return self.src[0].after(*src).reshape(self.shape)
    return UOp(_AFTER, kwargs.pop("dtype", self.dtype), (self,)+src, **kwargs)
  def store(self:UOp, src, gate:UOp|None=None, **kwargs) -> UOp:
    srcs = (self, src if isinstance(src, UOp) else self.const_like(src)) + ((gate,) if gate is not None else ())
    return UOp(_STORE, dtypes.void, srcs, **kwargs)
  def index(self:UOp, *srcs, **kwargs) -> UOp:
    new = tuple(UOp.const(x) if isinstance(x, int) else x for x in srcs if x is not None)
    return UOp(_INDEX, kwargs.pop("dtype", None), (self,)+new, **kwargs)
  def load(self:UOp, *src:UOp, **kwargs) -> UOp: return UOp(_LOAD, kwargs.pop("dtype", None), (self,)+src, **kwargs)

  # ** Variables **
  @staticmethod
  def variable(name:str, min_val:PyConst, max_val:PyConst, dtype:DType=dtypes.weakint, multiple_of:int=1, param:bool=False) -> UOp:
    """A symbolic integer `name` in [min_val, max_val]: a 0-d BUFFER in the ALU addrspace (a PARAM inside kernels when param=True)."""
    if not isinstance(name, str): raise TypeError(f"Variable name must be a str, got {name!r}")
    for v in (min_val, max_val):
      if not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        raise TypeError(f"Variable {name!r} bounds must be numbers, got {v!r}")
    if min_val > max_val: raise ValueError(f"Variable {name!r} has min {min_val} > max {max_val}")
    arg = ParamArg(-1, dtype, name=name, vmin_vmax=(min_val, max_val), multiple_of=multiple_of, addrspace=AddrSpace.ALU)
    return UOp(_PARAM if param else _BUFFER, dtype, (UOp(_STACK, dtypes.void, ()),), arg)
  @property
  def is_variable(self:UOp) -> bool: return _is_var(self)
  @property
  def is_bound_var(self:UOp) -> bool:
    """bind() gives AFTER(var, STORE(var, CONST))."""
    return self.op is _AFTER and len(self.src) == 2 and _is_var(self.src[0]) and self.src[1].op is _STORE and \
      self.src[1].src[0] is self.src[0] and self.src[1].src[1].op is _CONST
  @property
  def expr(self:UOp) -> str:
    if self.op not in (_PARAM, _BUFFER) or not isinstance(self.arg, ParamArg) or self.arg.name is None:
      raise TypeError(f"expr is only for Variables, got {self.op}")
    return self.arg.name
  def bind(self:UOp, val:int|UOp) -> UOp:
    if not _is_var(self): raise TypeError(f"bind needs a Variable, got {self.op}")
    uval = self.const_like(val) if isinstance(val, int) else val
    if not (self.vmin <= uval.vmin and uval.vmax <= self.vmax): raise ValueError(f"bind {val} not in range [{self.vmin}, {self.vmax}] of {self.expr}")
    if uval.divides(self.arg.multiple_of) is None: raise ValueError(f"bind {val} not divisible by {self.arg.multiple_of}")
    live_binds.add(ret := self.after(self.store(uval)))
    return ret
  def unbind(self:UOp) -> tuple[UOp, int]:
    if not self.is_bound_var: raise TypeError(f"can't unbind {self.op}: only a bound Variable (from bind) unbinds")
    return self.src[0], self.src[1].src[1].arg
  def unbind_all(self:UOp) -> tuple[UOp, dict[UOp, int]]:
    ret: dict[UOp, int] = {}
    return graph_rewrite(self, pm_unbind, ctx=ret), ret
  def variables(self:UOp) -> list[UOp]:
    """The Variables in this expression, sorted by name."""
    found = {x for x in self.toposort() if _is_var(x) or (x.op is _PARAM and isinstance(x.arg, ParamArg) and x.arg.addrspace is AddrSpace.ALU)}
    return sorted(found, key=lambda v: v.arg.name or "")

  # ** structure helpers used by the rules **
  def split_uop(self:UOp, sep:Ops) -> list[UOp]:
    """The operands of a chain of `sep` ops (e.g. the terms of a sum), left to right."""
    if self.op is not sep: return [self]
    out: list[UOp] = []
    stack = [self]
    while stack:
      if (u := stack.pop()).op is sep: stack.extend(u.src[::-1])
      else: out.append(u)
    return out
  def pop_const(self:UOp, op:Ops=_ADD) -> tuple[UOp, PyConst]:
    """(x, c) for x op c with a CONST c, else (self, identity of op)."""
    if self.op is op and self.src[1].op is _CONST: return self.src[0], self.src[1].arg
    dt = self.dtype
    if dt is dtypes.weakint and (op is _ADD or op is _MUL): return self, (0 if op is _ADD else 1)  # the common case, without a dict
    return self, identity_element(op, dt)
  def const_factor(self:UOp) -> int:
    """A known int that divides self (not always the largest)."""
    op = self.op
    if op is _CONST: return self.arg
    if op is _ADD: return math.gcd(self.src[0].const_factor(), self.src[1].const_factor())
    if op is _MUL: return self.src[0].arg if self.src[0].op is _CONST else self.src[1].arg if self.src[1].op is _CONST else 1
    if op is _STACK: return math.gcd(*[x.const_factor() for x in self.src])
    if (op is _PARAM or op is _BUFFER) and isinstance(self.arg, ParamArg) and self.arg.multiple_of is not None: return self.arg.multiple_of
    return 1
  def divides(self:UOp, v:int) -> UOp|None:
    """self / v when v provably divides self, else None."""
    if v == 1: return self
    op = self.op
    if op is _CONST: return self.const_like(self.arg//v) if self.arg % v == 0 else None
    if op is _ADD:
      return d0+d1 if (d0 := self.src[0].divides(v)) is not None and (d1 := self.src[1].divides(v)) is not None else None
    if op is _MUL:
      if (d0 := self.src[0].divides(v)) is not None: return d0 * self.src[1]
      if (d1 := self.src[1].divides(v)) is not None: return self.src[0] * d1
      return None
    if op is _STACK:
      srcs = tuple(s.divides(v) for s in self.src)
      return None if any(s is None for s in srcs) else UOp(_STACK, self.dtype, srcs)  # type: ignore[arg-type]
    if (op is _PARAM or op is _BUFFER) and isinstance(self.arg, ParamArg) and self.arg.multiple_of is not None:
      return self // v if self.arg.multiple_of % v == 0 else None
    return None
  @staticmethod
  def gcd(*uops:UOp) -> UOp:
    """A common divisor of uops: the gcd of their const factors times the symbolic factors every one of them has."""
    terms, factors = zip(*[(u.divides(f := u.const_factor()), f) for u in uops])
    count = functools.reduce(operator.and_, [collections.Counter(term.split_uop(_MUL)) for term in terms])
    return math.prod([*count.elements(), terms[0].const_like(math.gcd(*factors))])
  def divide_exact(self:UOp, v:UOp) -> UOp|None:
    """self / v when v provably divides self, else None."""
    if self is v: return self.const_like(1)
    if v.op is _CONST: return self.divides(v.arg)
    if self.op is _ADD: return None if (s0 := self.src[0].divide_exact(v)) is None or (s1 := self.src[1].divide_exact(v)) is None else s0+s1
    if self.op is _MUL:
      (fac, const), (div_fac, div_const) = self.pop_const(_MUL), v.pop_const(_MUL)
      new_count = collections.Counter(fac.split_uop(_MUL))
      new_count.subtract(div_fac.split_uop(_MUL))
      if const % div_const == 0 and all(c >= 0 for c in new_count.values()):
        return math.prod(new_count.elements(), start=self.const_like(const//div_const))
    return None
  def overflows(self:UOp, dtype:DType) -> bool: return self.vmin < dtype.min or dtype.max < self.vmax
  tuplize = _Tuplize()
  @property
  def bool_slice(self:UOp) -> frozenset[UOp]:
    """The bool-typed nodes in this graph (self included)."""
    return self._bool_slice | {self} if self.dtype is dtypes.bool else self._bool_slice
  @functools.cached_property
  def _bool_slice(self:UOp) -> frozenset[UOp]: return frozenset().union(*[s.bool_slice for s in self.src])

# the bound Variables alive now: while there are none, no graph holds one (the scheduler skips looking for them)
live_binds: weakref.WeakSet[UOp] = weakref.WeakSet()
_INT_DTYPES = dtypes.ints + (dtypes.weakint,)
_INT_DTYPE_SET = frozenset(_INT_DTYPES)
_WEAKINT = dtypes.weakint

_attach(UOp, _UOpSymbolic)

def _do_unbind(ctx:dict[UOp, int], x:UOp) -> UOp|None:
  if not x.is_bound_var: return None
  v, i = x.unbind()
  ctx[v] = i
  return v
pm_unbind = PatternMatcher([(UPat(Ops.AFTER, name="x"), _do_unbind)])

# ***** the tensor graph: shapes, and the movement/reduce primitives of tinygrad/mixin *****

class _UOpTensorLevel:
  def _mop(self:UOp, op:Ops, arg:Any) -> UOp: return UOp(op, self.dtype, (self,), arg)
  def _rop(self:UOp, op:Ops, axes:tuple[int, ...]) -> UOp: return UOp(_REDUCE, self.dtype, (self,), (op, axes))
  def full_like(self:UOp, fill_value:ConstType, dtype:DType|None=None) -> UOp:
    """fill_value with self's shape: a CONST, reshaped to ones and expanded (as Tensor.full_like(..., buffer=False) builds it)."""
    dt = dtype or self.dtype
    ret = UOp(_CONST, dt, (), dt.const(fill_value))
    if not (shape := self.shape): return ret
    ret = UOp(_RESHAPE, dt, (ret,), (1,) * len(shape))
    return ret if all(s == 1 for s in shape) else UOp(_EXPAND, dt, (ret,), shape)
  _full = full_like   # the mixins' primitive for a constant of self's shape
  @property
  def base(self:UOp) -> UOp:
    """What a view is a view of (tinygrad 0.14's UOp.base): the node under its chain of movement ops and DETACHes."""
    u = self
    while u.op in _VIEW_OPS: u = u.src[0]
    return u
  def has_buffer_identity(self:UOp, after_ok:bool=False) -> bool:
    """A BUFFER or PARAM as a whole (tinygrad 0.14): seen through RESHAPE/UNSHARD/MSELECT, and through AFTER with after_ok, never
    through a view that picks some of its elements."""
    u = self
    while u.op in _SAME_BUFFER_OPS or (after_ok and u.op is _AFTER): u = u.src[0]
    return u.op is _BUFFER or u.op is _PARAM
_REDUCE, _RESHAPE, _EXPAND = Ops.REDUCE, Ops.RESHAPE, Ops.EXPAND
_VIEW_OPS = frozenset(GroupOp.Movement | {Ops.DETACH})
_SAME_BUFFER_OPS = frozenset({Ops.RESHAPE, Ops.UNSHARD, Ops.MSELECT})

def _device_of(u:UOp) -> str|tuple[str, ...]|None:
  # tensor-level conventions (tinygrad/uop/shape.py): a BUFFER's or PARAM's ParamArg names its device, a COPY's arg is (src, dst); any
  # other node is on the device of its first source that has one (a graph of CONSTs alone is on none)
  op = u.op
  if op is _BUFFER or op is _PARAM: return getattr(u.arg, "device", None)
  if op is Ops.COPY: return u.arg[1] if isinstance(u.arg, tuple) and len(u.arg) == 2 else None
  if op is Ops.MSTACK or op is Ops.ALLREDUCE: return tuple(s.__dict__["device"] for s in u.src)
  if op is Ops.MSELECT: return d[u.arg] if isinstance(d := u.src[0].__dict__["device"], tuple) else d
  return next((d for s in u.src if (d := s.__dict__["device"]) is not None), None)

def _store_device(u:UOp) -> None: u.__dict__["device"] = _device_of(u)

class _Device:
  """UOp.device (tinygrad 0.14's): computed on first access, sources first without recursion, and kept in the node's __dict__."""
  def __get__(self, u, owner=None):
    if u is None: return self
    _fill_children_first(u, "device", _store_device)
    return u.__dict__["device"]

# the operations (tinygrad/mixin); attached base class first so the subclass overrides win
UOp.device = _Device()
for _m in (OperatorMixin, MathTrait, MovementMixin, ReduceMixin, UOpMathTrait, _UOpTensorLevel): _attach(UOp, _m)
