"""Codegen: a kernel AST (from tinygrad.schedule) becomes a linear list of UOps for a renderer, then a ProgramSpec.

`full_rewrite_to_sink` runs the list PASSES: each a Pass, one graph_rewrite of the kernel with a PatternMatcher (and a context made from
the kernel as the pass starts, where the rules need to know something about the whole kernel) under the pass's name (so TRACK_MATCH_STATS
and the rewrite log show it). A rule matches the op it changes; the optimizer's is the SINK (it chooses for the whole kernel at once).
lower_ast adds the ordering (a walk: an order is a property of the whole graph) and the SPEC checks. One file per concept:
  optimize        tinygrad/codegen/opt/ shapes the AST for the renderer's capabilities (threading, unrolling, upcasting; on a device
                  with GPU dims workgroups: LOCAL/GROUP; NOOPT=1: off) by splitting its RANGEs into THREAD/LOOP/UPCAST/REDUCE/UNROLL/
                  LOCAL/GROUP_REDUCE ranges; with GPU dims the output LOOP ranges left become GLOBAL ones (launch dims); BEAM=N: the Opts
                  of a search (opt/search.py) instead of the heuristics
  split ranges    a STORE whose value compares a LOOP range with constants (cat, pad) -> one STORE per piece of the range, consecutive
                  loops in which those comparisons are constants (split_ranges.py)
  expand          UNROLL and UPCAST ranges -> their lanes (expander.py): vector loads/stores, per-lane REDUCEs
  group reduces   a REDUCE split over a workgroup (GROUP_REDUCE ranges) -> partials in a local BUFFER, a BARRIER, a final REDUCE
                  (group_reduce.py); then GROUP_REDUCE ranges become LOCAL ones
  safe ratios     x * (1/(1+x)) -> 1 - 1/(1+x) where x > 1, x/(1+x) elsewhere: no inf * 0 when x overflows (safe_ratio.py)
  render forms    the tensor graph's one spelling per op back to the ops renderers print: SUB, NEG, FDIV, CMPEQ, minimum (decomp.py)
  decompositions  THREEFRY -> Threefry-2x32 in uint32 ops; float -> int CAST with one meaning on every device (decomp.py)
  constant fold   ALU/CAST of constants -> the constant (so `full(1) + full(2)` stores 3), and the masks a constant comparison decides
                  (WHERE, gated LOAD, x + -0.0: split_ranges.py's pm_fold_gates)
  launch dims     THREAD/GLOBAL/LOCAL ranges -> SPECIAL launch dims (gpudims.py)
  end loops       each STORE -> END(...END(STORE, innermost LOOP range)..., outermost range) (end_loops.py)
  accumulators    REDUCE -> a register accumulator: its init, its update in the loop, its load after the loop (accumulator.py)
  tc accumulators a tensor core's accumulators updated by adding its result (opt/tc.py) -> its C operand instead
  multiply-add    a dot tile's accumulator updates acc + a*b -> MULACC(a, b, acc) where the renderer fuses it (mulacc.py)
  lower index     (index_dtype.py) every weakint UOp (index math, RANGE, SPECIAL, sizes, variables) -> int32, or int64 where its
                  bounds need it; FLOORDIV/FLOORMOD -> CDIV/CMOD (shifts/masks by powers of two), exact for negative dividends.
  (renderer)      the target renderer's extra_matcher (its device rules), then its pre_matcher (user rules): Renderer in
                  tinygrad/renderer/__init__.py
  linearize       (linearizer.py) orders the graph into blocks, loop-invariant code before its loop, few values live at once
"""
from __future__ import annotations
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TYPE_CHECKING
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, KernelInfo
from tinygrad.uop.symbolic import pm_fold_values
from tinygrad.dtype import dtypes
from tinygrad.helpers import SPEC, BEAM, NOOPT
from tinygrad.codegen.index_dtype import pm_lower_index
from tinygrad.codegen.split_ranges import pm_split_ranges, split_context, pm_fold_gates
from tinygrad.codegen.expander import pm_expand, expand_context
from tinygrad.codegen.group_reduce import pm_group_reduce, pm_group_to_local, group_context
from tinygrad.codegen.decomp import pm_render_forms, pm_decomp
from tinygrad.codegen.gpudims import pm_add_specials, launch_dims
from tinygrad.codegen.end_loops import pm_end_loops, kernel_stores
from tinygrad.codegen.accumulator import pm_reduce, reduce_context
from tinygrad.codegen.mulacc import pm_fuse_mulacc, FuseContext, fuse_context
from tinygrad.codegen.linearizer import linearize
from tinygrad.codegen.opt.tc import pm_wmma_acc
from tinygrad.codegen.safe_ratio import pm_safe_ratio
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, LinearKernel

__all__ = ["Pass", "PASSES", "full_rewrite_to_sink", "lower_ast", "get_program", "to_program", "LoweredKernel", "linearize", "pm_const_fold",
           "pm_render_forms", "pm_decomp", "pm_add_specials", "pm_end_loops", "pm_reduce", "pm_fuse_mulacc", "FuseContext"]

# constant folding is the symbolic engine's (uop/symbolic.py), in its form for values: results wrapped/rounded as the device computes
pm_const_fold = pm_fold_values + pm_fold_gates

# ***** the whole codegen *****

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
  chooses_opts: bool = False                   # the optimizer: left out when lower_ast is given the Opts

  def run(self, sink:UOp, ren:Renderer|None=None) -> UOp:
    return graph_rewrite(sink, self.matcher, ctx=None if self.ctx is None else self.ctx(sink, ren), name=self.name, bottom_up=self.bottom_up,
                         walk=self.walk)

def _optimize(ctx:Renderer|None, ast:UOp) -> UOp:
  if isinstance(ast.arg, KernelInfo) and ast.arg.opts_to_apply is not None:
    # the kernel names its optimizations (tinygrad 0.14's KernelInfo.opts_to_apply; () for none): exactly those, no heuristic or search
    from tinygrad.codegen.opt.kernel import apply_opts
    return _launch_dims(apply_opts(ast.replace(arg=replace(ast.arg, opts_to_apply=None)), ast.arg.opts_to_apply, ctx), ctx)
  if BEAM >= 1 and not NOOPT and ctx is not None:
    from tinygrad.codegen.opt.search import beam_search
    return _launch_dims(beam_search(ast, ctx, BEAM.value), ctx)
  from tinygrad.codegen.opt.heuristic import optimize_ast
  return optimize_ast(ast, ctx)

# ctx: the renderer. The optimizer chooses the Opts of the whole kernel at once (its SINK: the kernel's ranges all change together)
pm_optimize = PatternMatcher([(UPat(Ops.SINK, name="ast"), _optimize)])

def _launch_dims(ast:UOp, ren:Renderer|None) -> UOp:
  """An AST with its opts chosen (a search's, or given): on a device with GPU dims its output loops left become launch dims, as
  optimize_ast does after the heuristics."""
  from tinygrad.codegen.opt.kernel import globalize
  return globalize(ast) if ren is not None and ren.has_local else ast

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

def _renderer_passes(ren:Renderer|None) -> list[Pass]:
  """The target's own rewrites after the codegen: its class's extra_matcher (the device's rules), then its pre_matcher (a user's rules,
  with the renderer as ctx), so a user rule sees the graph exactly as the linearizer will (tinygrad/renderer/__init__.py)."""
  if ren is None: return []
  return ([Pass("renderer", ren.extra_matcher)] if ren.extra_matcher is not None else []) + \
         ([Pass("renderer pre_matcher", ren.pre_matcher, _the_renderer)] if ren.pre_matcher is not None else [])

def full_rewrite_to_sink(ast:UOp, ren:Renderer|None=None, passes:list[Pass]|None=None) -> UOp:
  """The kernel AST after every codegen pass (PASSES unless given), ready to linearize. `ren` is the target: its capabilities steer
  the optimizer, and its extra_matcher then its pre_matcher (if any) run last. Without one, the AST is not optimized."""
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

def _renderer(device:str|Renderer|None) -> Renderer|None:
  if device is None or not isinstance(device, str): return device
  from tinygrad.device import Device
  return Device[device].renderer

def lower_ast(ast:UOp, device:str|Renderer|None=None, opts:tuple|None=None) -> LoweredKernel:
  """Lowers a kernel AST; with a device (or its renderer), the optimizations of tinygrad/codegen/opt/ for the renderer's capabilities
  are applied first (not under NOOPT=1; BEAM=N searches for them). `opts`: apply exactly these Opts instead (a BEAM candidate)."""
  if opts is None: sink = full_rewrite_to_sink(ast, _renderer(device))
  else:
    from tinygrad.codegen.opt.kernel import apply_opts
    ren = _renderer(device)
    sink = full_rewrite_to_sink(_launch_dims(apply_opts(ast, opts, ren), ren), ren, [p for p in PASSES if not p.chooses_opts])
  if SPEC:  # SPEC hook: the lowered kernel (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_lowered
    type_verify(sink, spec_lowered, f"lowered kernel {sink.arg.name}")
  uops = linearize(sink)
  linear = None
  if SPEC:  # SPEC hook: the linear program (tinygrad/uop/spec.py)
    from tinygrad.renderer import verify_linear
    linear = verify_linear(uops, f"linear program of {sink.arg.name}")
  return LoweredKernel(ast, sink, uops, linear)

def get_program(ast:UOp, renderer):
  """ProgramSpec for a kernel AST on a renderer."""
  return to_program(ast, renderer).arg

def to_program(ast:UOp, renderer) -> UOp:
  """tinygrad 0.14's entry point for lowering one kernel: the AST (a SINK, KernelInfo in its arg: its opts_to_apply are honored) as a
  PROGRAM UOp for `renderer`: src (the lowered SINK, whose KernelInfo has applied_opts and estimates; a LINEAR of its linear uops; a SOURCE
  whose arg is the rendered code), arg the ProgramSpec (name, global/local size, buffers, estimates) the runtime launches. A PROGRAM is
  returned as it is. Nothing is compiled here: the device compiles a program when it loads it."""
  if ast.op is Ops.PROGRAM: return ast
  if ast.op is not Ops.SINK: raise RuntimeError(f"can't call to_program on {ast.op}: it takes a kernel AST (a SINK) or a PROGRAM")
  k = lower_ast(ast, renderer)
  spec = renderer.to_program(k.program_input)
  sink = k.sink.replace(arg=replace(k.sink.arg, estimates=spec.estimates)) if isinstance(k.sink.arg, KernelInfo) else k.sink
  return UOp(Ops.PROGRAM, dtypes.void, (sink, UOp(Ops.LINEAR, dtypes.void, tuple(k.uops)), UOp(Ops.SOURCE, dtypes.void, (), spec.src)), spec)
