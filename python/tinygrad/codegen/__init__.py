"""Codegen: a kernel AST (from tinygrad.schedule) becomes a linear list of UOps for a renderer, then a ProgramSpec.

`full_rewrite_to_sink` runs the list PASSES (lower.py, with the lowering itself; this module adds the choice of a BEAM search, which
lowers its candidates with lower.py): each a Pass, one graph_rewrite of the kernel with a PatternMatcher (and a context made from
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
from dataclasses import replace
from typing import Sequence, TYPE_CHECKING
from tinygrad.uop.ops import UOp, Ops, KernelInfo
from tinygrad.uop.track import tracking_group, attach_kernel
from tinygrad.dtype import dtypes
from tinygrad.helpers import BEAM, NOOPT
from tinygrad.codegen.lower import Pass, PASSES, LoweredKernel, pm_const_fold, rewrite_to_sink, with_opts, passes_after_optimize, lower_kernel
from tinygrad.codegen.decomp import pm_render_forms, pm_decomp
from tinygrad.codegen.gpudims import pm_add_specials
from tinygrad.codegen.end_loops import pm_end_loops
from tinygrad.codegen.accumulator import pm_reduce
from tinygrad.codegen.mulacc import pm_fuse_mulacc, FuseContext
from tinygrad.codegen.linearizer import linearize
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, ProgramSpec

__all__ = ["Pass", "PASSES", "full_rewrite_to_sink", "lower_ast", "get_program", "to_program", "LoweredKernel", "linearize", "pm_const_fold",
           "pm_render_forms", "pm_decomp", "pm_add_specials", "pm_end_loops", "pm_reduce", "pm_fuse_mulacc", "FuseContext"]

def _beam_opts(ast:UOp, ren:Renderer|None) -> tuple|None:
  """The Opts a BEAM search finds fastest for ast on ren (BEAM=N), or None where the optimize pass decides: no search asked for, no
  renderer, NOOPT=1, or a kernel that names its own opts_to_apply."""
  if BEAM < 1 or NOOPT or ren is None or ast.op is not Ops.SINK: return None
  if isinstance(ast.arg, KernelInfo) and ast.arg.opts_to_apply is not None: return None
  from tinygrad.codegen.opt.search import beam_search
  return tuple(beam_search(ast, ren, BEAM.value).arg.applied_opts)

def full_rewrite_to_sink(ast:UOp, ren:Renderer|None=None, passes:list[Pass]|None=None) -> UOp:
  """The kernel AST after every codegen pass (PASSES unless given), ready to linearize. `ren` is the target: its capabilities steer
  the optimizer (BEAM=N: a search's Opts instead of the heuristics'), and its extra_matcher then its pre_matcher (if any) run last.
  Without one, the AST is not optimized."""
  if passes is None and (opts := _beam_opts(ast, ren)) is not None: return rewrite_to_sink(with_opts(ast, opts, ren), ren, passes_after_optimize())
  return rewrite_to_sink(ast, ren, passes)

def _renderer(device:str|Renderer|None) -> Renderer|None:
  if device is None or not isinstance(device, str): return device
  from tinygrad.device import Device
  return Device[device].renderer

def lower_ast(ast:UOp, device:str|Renderer|None=None, opts:Sequence|None=None) -> LoweredKernel:
  """Lowers a kernel AST; with a device (or its renderer), the optimizations of tinygrad/codegen/opt/ for the renderer's capabilities
  are applied first (not under NOOPT=1; BEAM=N searches for them). `opts`: apply exactly these Opts instead (a BEAM candidate)."""
  ren = _renderer(device)
  return lower_kernel(ast, ren, opts if opts is not None else _beam_opts(ast, ren))

def render_kernel(ast:UOp, device:str|Renderer) -> tuple[LoweredKernel, ProgramSpec]:
  """Lowers one kernel AST (lower_ast) and renders it; under VIZ its rewrites are the kernel's group, named as DEBUG=2 names the kernel,
  with its source and linear UOps."""
  ren = _renderer(device)
  assert ren is not None
  with tracking_group("kernel", "kernel") as group:
    k = lower_ast(ast, ren)
    spec = ren.to_program(k.program_input)
  attach_kernel(group, spec.name, spec.src, k.uops)
  return k, spec

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
  k, spec = render_kernel(ast, renderer)
  sink = k.sink.replace(arg=replace(k.sink.arg, estimates=spec.estimates)) if isinstance(k.sink.arg, KernelInfo) else k.sink
  return UOp(Ops.PROGRAM, dtypes.void, (sink, UOp(Ops.LINEAR, dtypes.void, tuple(k.uops)), UOp(Ops.SOURCE, dtypes.void, (), spec.src)), spec)
