"""UOp, UPat, PatternMatcher and graph_rewrite, assembled: the module the rest of tinygrad imports them from (as tinygrad 0.14's).

UOp is the core's class (tinygrad._core). uop/base.py gives it the methods that need no rule table, uop/upat.py gives UPat the sugar
the rule tables are written with; the tables are modules of their own, built on those two alone: uop/symbolic.py (simplification),
uop/shape.py (UOp.shape), uop/call.py (calls and hand-written kernels), uop/render.py (render, sym_infer). This module, above all of
them, attaches the methods that run those tables, so no module below imports this one.
"""
from __future__ import annotations
import functools
from typing import Any, Callable
from tinygrad import _core
from tinygrad.dtype import DType, dtypes, ConstType
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.sint import sint, resolve, sym_le, smax, smin, srender, ssimplify, sym_infer
from tinygrad.uop.alu import exec_alu, python_alu
from tinygrad.uop.upat import UPat
from tinygrad.uop.base import (UOp, PatternMatcher, graph_rewrite, BottomUpGate, TrackedPatternMatcher, KernelInfo, AxisType, ParamArg,
  Variable, ConstLike, CORE_ID, GPU_DIMS, SPECIAL_NAMES, REPR_MAX_DEPTH, REWRITE_LOG_FORMAT, all_metadata, live_binds, pm_unbind,
  track_rewrites_log, set_track_match_stats, match_stats_table, write_rewrite_log, print_uop_graph, pretty_print, promo_dtype,
  dtype_from_uop, const_value, is_literal, after_root, identity_element, range_str, _attach, _INT_DTYPES,
  _CONST, _CAST)
from tinygrad.uop.symbolic import symbolic
from tinygrad.uop.track import rewrite_group, tracked_keys, tracked_ctxs, TrackedGraphRewrite, active_rewrites  # noqa: F401
from tinygrad.uop.shape import _Shape
from tinygrad.uop.call import _UOpCalls, CallInfo
# names this module has had (code written against tinygrad 0.14 imports some of them from here), and the ones pickles name (a pickled
# UOp graph or rule callback is rebuilt by them)
from tinygrad.dtype import PyConst, Invalid, InvalidType, AddrSpace, least_upper_dtype, least_upper_float, truncate, fma  # noqa: F401
from tinygrad.helpers import TRACK_MATCH_STATS, to_function_name, cdiv, cmod, floordiv, floormod  # noqa: F401
from tinygrad.mixin.mathtraits import OperatorMixin, MathTrait, UOpMathTrait, UPatMathTrait  # noqa: F401
from tinygrad.mixin.movement import MovementMixin  # noqa: F401
from tinygrad.mixin.reduce import ReduceMixin  # noqa: F401
from tinygrad.uop.base import _uop_unflatten, _rebuild_function  # noqa: F401

__all__ = ["UOp", "UPat", "PatternMatcher", "TrackedPatternMatcher", "KernelInfo", "graph_rewrite", "BottomUpGate", "Ops", "GroupOp",
           "print_uop_graph", "track_rewrites_log",
           "AxisType", "ParamArg", "CallInfo", "Variable", "sint", "resolve", "sym_le",
           "smax", "smin", "ssimplify", "sym_infer", "srender", "exec_alu", "python_alu",
           # the rest of the uop layer's vocabulary (uop/base.py)
           "ConstLike", "CORE_ID", "GPU_DIMS", "SPECIAL_NAMES", "REPR_MAX_DEPTH", "REWRITE_LOG_FORMAT", "all_metadata", "live_binds", "pm_unbind",
           "set_track_match_stats", "match_stats_table", "write_rewrite_log", "pretty_print", "promo_dtype", "dtype_from_uop", "const_value",
           "is_literal", "after_root", "identity_element", "range_str"]

_FLOAT_DTYPES = dtypes.floats + (dtypes.weakfloat,)

class _UOpEvaluation:
  def simplify(self:UOp, tracked:bool=False) -> UOp:
    """The expression rewritten by the symbolic rules to a fixed point."""
    if self.op is _CONST: return self
    # per-rule statistics keep counting here, but a simplify is not logged as a graph_rewrite of its own unless asked for
    if not tracked and _core.track_level() >= 2:
      lvl = _core.track_level()
      _core.set_track_level(1)
      try: return graph_rewrite(self, symbolic, name="simplify")
      finally: _core.set_track_level(lvl)
    return graph_rewrite(self, symbolic, name="simplify")
  def ssimplify(self:UOp) -> UOp|ConstType:
    """simplify(), as a Python value when it is a constant."""
    if (ret := self.simplify()).op is _CAST and ret.src[0].op is _CONST: return ret.dtype.const(ret.src[0].arg)
    return ret.arg if ret.op is _CONST else ret
  def _eval(self:UOp, dts:tuple[DType, ...], expected_type:type, what:str):
    if self.dtype not in dts: raise TypeError(f"{what}() of a {self.dtype} expression: {self.render(simplify=False)}")
    s = self.simplify()
    if s.vmin != s.vmax: raise ValueError(f"{what}() of an expression that is not constant: {s.render(simplify=False)} is in [{s.vmin}, {s.vmax}]")
    if not isinstance(s.vmin, expected_type): raise TypeError(f"{what}() got {type(s.vmin).__name__} {s.vmin!r}")
    return s.vmin
  def __bool__(self:UOp) -> bool: return self._eval((dtypes.bool,), bool, "bool")
  def __int__(self:UOp) -> int: return self._eval(_INT_DTYPES, int, "int")
  def __index__(self:UOp) -> int: return self._eval(_INT_DTYPES, int, "int")
  def __float__(self:UOp) -> float: return float(self._eval(_FLOAT_DTYPES, float, "float"))
  # the renderers are imported on first use: `import tinygrad` does not need them
  @functools.cached_property
  def _sym_fxn(self:UOp) -> tuple[Callable, tuple[str, ...]]:
    from tinygrad.uop.render import compile_python
    return compile_python(self.simplify())
  def sym_infer(self:UOp, var_vals:dict) -> Any:
    """The value of the expression with its Variables set by var_vals ({name or Variable: value})."""
    fxn, names = self._sym_fxn
    vals = {(k.expr if isinstance(k, UOp) else k): v for k, v in var_vals.items()}
    if missing := [n for n in names if n not in vals]: raise KeyError(f"sym_infer: no value for {missing} in {self.render(simplify=False)}")
    return fxn(*[vals[n] for n in names])
  def render(self:UOp, simplify:bool=True, pm:PatternMatcher|None=None) -> str:
    """The expression as a string (simplified first unless simplify=False); an op the renderer has no form for raises."""
    from tinygrad.uop.render import renderer
    pm = renderer if pm is None else pm
    ctx: dict[UOp, str] = {}
    for u in (s := self.simplify() if simplify else self).toposort():
      if (r := pm.rewrite(u, ctx=ctx)) is None: raise NotImplementedError(f"render: {u.op} has no rendered form (in a {u.dtype} {s.op} expression)")
      ctx[u] = r
    return ctx[s]

_attach(UOp, _UOpEvaluation)
UOp.shape = _Shape()
# calls (FUNCTION/CALL/PARAM/TUPLE) and the sugar for hand-written kernels
_attach(UOp, _UOpCalls)
