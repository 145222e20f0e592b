"""UOp, UPat, PatternMatcher and graph_rewrite.

The four are implemented in Rust (`tinygrad._core`): interning, toposort, matching and the rewrite loop never run Python
code except for the callbacks of rules that matched. This module registers the Python objects the core needs (Ops,
DType, hooks), attaches the Python-level methods to the Rust classes, and handles TRACK_MATCH_STATS reporting.
"""
from __future__ import annotations
import atexit
import functools
import importlib
import linecache
import marshal
import os
import pickle
import sys
import types
import weakref
from typing import Any, Callable
from tinygrad import _core
from tinygrad._core import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import DType, dtypes, ConstType
from tinygrad.helpers import TRACK_MATCH_STATS, temp

__all__ = ["UOp", "UPat", "PatternMatcher", "graph_rewrite", "BottomUpGate", "Ops", "GroupOp", "print_uop_graph", "track_rewrites_log"]

class BottomUpGate(Exception):
  """Raised by a bottom-up rule: keep the node as it is and do not descend into its sources."""

# ***** hooks called by the core *****

def dtype_from_uop(op:Ops, src:tuple[UOp, ...], arg:Any) -> DType|None:
  """The dtype a UOp gets when it is constructed with dtype=None."""
  if op is Ops.CONST: return dtypes.from_py(arg) if isinstance(arg, (bool, int, float)) else None
  if op in GroupOp.Comparison: return dtypes.bool
  if op is Ops.WHERE and len(src) == 3: return src[1].dtype
  if (op in GroupOp.ALU or op in GroupOp.Movement) and src: return src[-1].dtype
  return None

all_metadata: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
def _record_metadata(u:UOp, metadata:Any) -> None: all_metadata[u] = metadata

def _uop_unflatten(nodes:list) -> UOp:
  """Rebuilds a UOp graph pickled in flattened form (see UOp.__reduce__)."""
  return _core.unflatten(nodes)

# ***** TRACK_MATCH_STATS *****

# one record per graph_rewrite call while TRACK_MATCH_STATS >= 2
track_rewrites_log: list[dict] = []
_active_rewrites: list[dict] = []

def _printable(location:tuple[str, int]) -> str:
  try: return linecache.getline(location[0], location[1]).strip()
  except Exception: return "<unknown>"

def _track_event(event:str, *args) -> None:
  if event == "begin":
    sink, name, bottom_up, walk = args
    frm = sys._getframe(1)
    rec = {"name": name or "graph_rewrite", "location": (frm.f_code.co_filename, frm.f_lineno), "sink": sink,
           "bottom_up": bottom_up, "walk": walk, "depth": len(_active_rewrites), "matches": [], "result": None}
    track_rewrites_log.append(rec)
    _active_rewrites.append(rec)
  elif event == "end":
    if _active_rewrites: _active_rewrites.pop()["result"] = args[0]
  elif event == "match":
    before, after, upat, seconds = args
    if _active_rewrites: _active_rewrites[-1]["matches"].append((before, after, upat.location, seconds))
    if TRACK_MATCH_STATS.value >= 3:
      print(f"{seconds*1e6:7.2f} us -- {upat.location[0].split('/')[-1]}:{upat.location[1]}", _printable(upat.location))

def match_stats_table() -> list[str]:
  """The per-rule statistics as printed at exit: slowest rule first, then the total."""
  rows = sorted(_core.match_stats(), key=lambda r: r[4], reverse=True)
  lines, tot = [], [0, 0, 0.0, 0.0]
  for upat, matches, attempts, match_s, total_s in rows:
    tot = [tot[0]+matches, tot[1]+attempts, tot[2]+match_s, tot[3]+total_s]
    if attempts == 0: continue
    loc = f"{upat.location[0].split('/')[-1]}:{upat.location[1]}"
    lines.append(f"{matches:6d} / {attempts:7d} -- {match_s*1000:9.2f} / {total_s*1000:9.2f} ms -- {loc:20s} {_printable(upat.location)}")
  lines.append(f"{tot[0]:6d} / {tot[1]:7d} -- {tot[2]*1000:9.2f} / {tot[3]*1000:9.2f} ms -- TOTAL")
  lines.append(f"{len(rows)} rules, {sum(r[1] > 0 for r in rows)} matched once")
  return lines

def _at_exit() -> None:
  if TRACK_MATCH_STATS.value >= 2:
    fn = temp("rewrites.pkl", append_user=True)
    with open(fn, "wb") as f: pickle.dump(track_rewrites_log, f)
    print(f"rewrote {len(track_rewrites_log)} graphs and matched {sum(len(r['matches']) for r in track_rewrites_log)} times, saved to {fn}")
    print(f"view with: python -m tinygrad.viz.cli {fn}")
  for line in match_stats_table(): print(line)

_exit_report_registered = False
def set_track_match_stats(level:int) -> None:
  """Sets TRACK_MATCH_STATS at run time (it is read from the environment at import). Rules of PatternMatchers built
  afterwards are tracked, and with level >= 1 the table prints at exit."""
  global _exit_report_registered
  TRACK_MATCH_STATS.value = level
  _core.set_track_level(int(level))
  if level and not _exit_report_registered:
    atexit.register(_at_exit)
    _exit_report_registered = True

_core.register(Ops, DType, dtypes.void, BottomUpGate, dtype_from_uop, _record_metadata, _uop_unflatten, _track_event)
set_track_match_stats(int(TRACK_MATCH_STATS.value))

# ***** methods attached to the Rust classes *****

def _attach(cls:type, mixin:type) -> None:
  """Copies a mixin's attributes onto a Rust class (subclassing would force every node the core creates through Python)."""
  for name, value in mixin.__dict__.items():
    if name in {"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__"}: continue
    setattr(cls, name, value)
    if hasattr(value, "__set_name__"): value.__set_name__(cls, name)

def pretty_print(root:UOp) -> str:
  """tinygrad-style multi-line repr; a subtree used more than once is printed once as `xN:=` and referenced as `xN`."""
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
  work: list = [(root, 0)]
  while work:
    if isinstance(item:=work.pop(), str):
      out.append(item)
      continue
    x, d = item
    idx, cnt = refs.get(x, (0, 0))
    if x in printed:
      out.append(f"{' '*d}x{idx}")
      continue
    printed.add(x)
    out.append(f"{' '*d}{f'x{idx}:=' if cnt > 1 else ''}{type(x).__name__}({x.op}, {x.dtype}, arg={x.argstr()}{x.tagstr()}, src=(")
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

class _UPatMethods:
  @property
  def dtype(self:UPat) -> DType: return self.match_dtype[0] if self.match_dtype is not None else dtypes.void
  @staticmethod
  def any(*src:UPat) -> UPat: return UPat(src=src, is_any=True)
  @staticmethod
  @functools.cache
  def var(name:str|None=None, dtype:DType|tuple[DType, ...]|None=None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  @functools.cache
  def cvar(name:str|None=None, dtype:DType|tuple[DType, ...]|None=None, arg:Any=None) -> UPat: return UPat(Ops.CONST, dtype, name=name, arg=arg)
  @staticmethod
  def const(b:ConstType, dtype:DType|tuple[DType, ...]|None=None) -> UPat: return UPat(Ops.CONST, dtype=dtype, arg=b)
  def named(self:UPat, name:str) -> UPat:
    return UPat(self.op, self.match_dtype, self._in_src, self.arg, name, self.allow_any_len, self.custom_early_reject,
                is_any=self.is_any, tag=self.match_tag)
  def or_casted(self:UPat, name:str|None=None) -> UPat:
    return UPat.any(self if name is None else self.named(name), UPat(Ops.CAST, name=name, src=(self,)))
  def or_after(self:UPat, name:str|None=None) -> UPat:
    me = self if name is None else self.named(name)
    return UPat.any(me, UPat(Ops.AFTER, name=name, src=(self,), allow_any_len=True))
  def f(self:UPat, op:Ops, **kwargs) -> UPat: return UPat(op, src=(self,), **kwargs)
  def sink(*srcs:UPat|None, **kwargs) -> UPat: return UPat(Ops.SINK, src=tuple(x for x in srcs if x is not None), **kwargs)
  def index(self:UPat, *srcs:UPat|None, **kwargs) -> UPat: return UPat(Ops.INDEX, src=(self,)+tuple(x for x in srcs if x is not None), **kwargs)
  def cast(self:UPat, dtype:DType|None=None, **kwargs) -> UPat:
    if dtype is not None and self.match_dtype == (dtype,): return self
    return UPat(Ops.CAST, dtype, (self,), **kwargs)
  def bitcast(self:UPat, dtype:DType|None=None) -> UPat: return UPat(Ops.BITCAST, dtype, (self,))
  def load(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.LOAD, src=(self,)+src, **kwargs)
  def store(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.STORE, src=(self,)+src, **kwargs)
  def after(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.AFTER, self.match_dtype, (self,)+src, **kwargs)
  def end(self:UPat, *src:UPat, **kwargs) -> UPat: return UPat(Ops.END, src=(self,)+src, **kwargs)
  def broadcast(self:UPat, **kwargs) -> UPat: return UPat(Ops.STACK, self.match_dtype, src=self, **kwargs)
  def reduce(self:UPat, *src:UPat, **kwargs) -> UPat:
    if isinstance(arg:=kwargs.pop("arg", None), Ops): arg = (arg, 0)
    return UPat(Ops.REDUCE, self.match_dtype, src=(self,)+src, arg=arg, **kwargs)
  def alu(self:UPat, op:Ops, *src:UPat) -> UPat:
    asrc = (self,)+src
    return UPat(op, dtypes.bool if op in GroupOp.Comparison else asrc[-1].match_dtype, list(asrc) if op in GroupOp.Commutative else asrc)
_attach(UPat, _UPatMethods)

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
