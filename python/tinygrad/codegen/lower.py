"""Lowering a kernel AST whose Opts are the heuristics', the kernel's own (KernelInfo.opts_to_apply) or given: the pass table PASSES,
the renderer's passes after it, the linearizer and the SPEC checks of the lowered kernel and of the linear program.

BEAM search (opt/search.py) lowers each candidate with given Opts here; tinygrad.codegen, the entry point that runs a search where
BEAM=N asks for one, sits above both, so lowering never imports the search that uses it.
"""
from __future__ import annotations
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence, TYPE_CHECKING
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, KernelInfo
from tinygrad.uop.symbolic import pm_fold_values
from tinygrad.helpers import SPEC
from tinygrad.codegen.index_dtype import pm_lower_index
from tinygrad.codegen.split_ranges import pm_split_ranges, split_context, pm_fold_gates
from tinygrad.codegen.expander import pm_expand, expand_context
from tinygrad.codegen.group_reduce import pm_group_reduce, pm_group_to_local, group_context
from tinygrad.codegen.decomp import pm_render_forms, pm_decomp
from tinygrad.codegen.gpudims import pm_add_specials, launch_dims
from tinygrad.codegen.end_loops import pm_end_loops, kernel_stores
from tinygrad.codegen.accumulator import pm_reduce, reduce_context
from tinygrad.codegen.mulacc import pm_fuse_mulacc, fuse_context
from tinygrad.codegen.linearizer import linearize
from tinygrad.codegen.opt.tc import pm_wmma_acc
from tinygrad.codegen.safe_ratio import pm_safe_ratio
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, LinearKernel

# constant folding is the symbolic engine's (uop/symbolic.py), in its form for values: results wrapped/rounded as the device computes
pm_const_fold = pm_fold_values + pm_fold_gates

@dataclass
class LoweredKernel:
  ast: UOp
  sink: UOp                      # after the graph passes
  uops: list[UOp] = field(default_factory=list)
  linear: LinearKernel|None = None  # the uops as checked by SPEC (verify_linear), for the renderer; None under SPEC=0

  @property
  def program_input(self) -> list[UOp]|LinearKernel:
    """What Renderer.to_program takes: the checked kernel when there is one (not checked twice), else the uops."""
    return self.linear if self.linear is not None else self.uops

@dataclass(frozen=True)
class Pass:
  """One codegen pass: a graph_rewrite of the kernel with `matcher` under `name` (TRACK_MATCH_STATS and the rewrite log show it)."""
  name: str
  matcher: PatternMatcher
  ctx: Callable[[UOp, Any], Any]|None = None   # (sink, renderer) -> the pass's context, made as the pass starts
  bottom_up: bool = False                      # rules see a node before its sources
  walk: bool = False                           # one pass over the graph: a replacement is final (it may hold the node it replaces)
  chooses_opts: bool = False                   # the optimizer: left out when the Opts are given (lower_kernel's opts, a BEAM search's)

  def run(self, sink:UOp, ren:Renderer|None=None) -> UOp:
    return graph_rewrite(sink, self.matcher, ctx=None if self.ctx is None else self.ctx(sink, ren), name=self.name, bottom_up=self.bottom_up,
                         walk=self.walk)

def with_opts(ast:UOp, opts:Sequence, ren:Renderer|None) -> UOp:
  """ast with exactly these Opts applied; on a device with GPU dims its output loops left become launch dims, as optimize_ast does
  after the heuristics."""
  from tinygrad.codegen.opt.kernel import apply_opts, globalize
  ret = apply_opts(ast, opts, ren)
  return globalize(ret) if ren is not None and ren.has_local else ret

def _optimize(ctx:Renderer|None, ast:UOp) -> UOp:
  if isinstance(ast.arg, KernelInfo) and ast.arg.opts_to_apply is not None:
    # the kernel names its optimizations (tinygrad 0.14's KernelInfo.opts_to_apply; () for none): exactly those, no heuristic or search
    return with_opts(ast.replace(arg=replace(ast.arg, opts_to_apply=None)), ast.arg.opts_to_apply, ctx)
  from tinygrad.codegen.opt.heuristic import optimize_ast
  return optimize_ast(ast, ctx)

# ctx: the renderer. The optimizer chooses the Opts of the whole kernel at once (its SINK: the kernel's ranges all change together)
pm_optimize = PatternMatcher([(UPat(Ops.SINK, name="ast"), _optimize)])

def _the_renderer(sink:UOp, ren:Renderer|None) -> Renderer|None: return ren

PASSES: list[Pass] = [
  Pass("optimize", pm_optimize, _the_renderer, walk=True, chooses_opts=True),
  Pass("split ranges", pm_split_ranges, split_context, walk=True),
  Pass("expand upcast and unroll", pm_expand, expand_context, walk=True),
  Pass("group reduces", pm_group_reduce, group_context),
  Pass("group ranges to local", pm_group_to_local),
  Pass("safe ratios", pm_safe_ratio),
  Pass("render forms", pm_render_forms),
  Pass("decompositions", pm_decomp),
  Pass("constant folding", pm_const_fold),
  Pass("launch dims", pm_add_specials, launch_dims),
  Pass("end loops", pm_end_loops, kernel_stores, walk=True),
  Pass("reduce to accumulator", pm_reduce, reduce_context, bottom_up=True),
  Pass("tensor core accumulators", pm_wmma_acc),
  Pass("fuse multiply-add", pm_fuse_mulacc, fuse_context),
  Pass("lower index dtype", pm_lower_index),
]

def passes_after_optimize() -> list[Pass]: return [p for p in PASSES if not p.chooses_opts]

def _renderer_passes(ren:Renderer|None) -> list[Pass]:
  """The target's own rewrites after the codegen: its class's extra_matcher (the device's rules), then its pre_matcher (a user's rules,
  with the renderer as ctx), so a user rule sees the graph exactly as the linearizer will (tinygrad/renderer/__init__.py)."""
  if ren is None: return []
  return ([Pass("renderer", ren.extra_matcher)] if ren.extra_matcher is not None else []) + \
         ([Pass("renderer pre_matcher", ren.pre_matcher, _the_renderer)] if ren.pre_matcher is not None else [])

def rewrite_to_sink(ast:UOp, ren:Renderer|None=None, passes:list[Pass]|None=None) -> UOp:
  """The kernel AST after every codegen pass (PASSES unless given: its optimizer the heuristics'), ready to linearize. `ren` is the
  target: its capabilities steer the optimizer, and its extra_matcher then its pre_matcher (if any) run last."""
  sink = ast
  for p in (PASSES if passes is None else passes) + _renderer_passes(ren): sink = p.run(sink, ren)
  return _keep_params(ast, sink)

def _keep_params(ast:UOp, sink:UOp) -> UOp:
  """sink still taking every buffer argument of ast: folding can drop each load of one (the piece of a split cat that reads none of
  it), but the kernel's arguments are the schedule's buffers in slot order, so a buffer nothing reads stays an unused argument.
  Not a pass: it compares the kernel after all passes with the AST before them."""
  if sink.op is not Ops.SINK: return sink
  params = [u for u in ast.toposort() if u.op is Ops.PARAM]
  if not params or len(have := {u.arg for u in sink.toposort() if u.op is Ops.PARAM}) == len(params): return sink
  return sink.replace(src=sink.src + tuple(p for p in params if p.arg not in have))

def lower_kernel(ast:UOp, ren:Renderer|None=None, opts:Sequence|None=None) -> LoweredKernel:
  """Lowers a kernel AST for ren with exactly `opts` (a BEAM candidate), or (None) the Opts the optimize pass picks: the kernel's own
  opts_to_apply, else the heuristics for ren's capabilities (none without a renderer or under NOOPT=1). SPEC checks both results."""
  sink = rewrite_to_sink(ast, ren) if opts is None else rewrite_to_sink(with_opts(ast, opts, ren), ren, passes_after_optimize())
  if SPEC:  # SPEC hook: the lowered kernel (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_lowered
    type_verify(sink, spec_lowered, f"lowered kernel {sink.arg.name}")
  uops = linearize(sink)
  linear = None
  if SPEC:  # SPEC hook: the linear program (tinygrad/uop/spec.py)
    from tinygrad.renderer import verify_linear
    linear = verify_linear(uops, f"linear program of {sink.arg.name}")
  return LoweredKernel(ast, sink, uops, linear)
