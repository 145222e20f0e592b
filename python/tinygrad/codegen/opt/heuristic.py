"""Hand-coded kernel optimizations: the Opts a kernel gets without a search.

The heuristics (`hand_coded_optimizations`), in order:
  thread   split the outermost output loop of a kernel with enough work over the machine's cores (E_16777216 -> E_2_8388608).
  unroll   a small reduce loop (trip count times the loads of its body at most UNROLL_MAX_LOADS) becomes an UNROLL range: straight-line
           code, its lanes combined as a tree (a REDUCE left with no range is just that value).
  upcast   the innermost output loop of size N, N % 4 == 0, gets an UPCAST range of 4: E_100 -> E_25_4. A reduce kernel keeps it only
           when a load inside its reduce becomes a vector load (a matmul's B row; not x.sum(axis=1), whose lanes read 4 rows).
  upcast_outer  then, in an upcast reduce kernel, the next output loop too when a load in the reduce does not depend on it (a matmul's
           B vector load serves 4 rows: 16 accumulators, r_64_16_4_16_4 -> r_16_4_16_4_16_4); with a single output loop
           (x.sum(axis=0)) that loop again: 16 consecutive outputs, each reduce step reads a 64-byte line of a row.

For a renderer with GPU dims (has_local), `hand_coded_gpu` instead: GROUPTOP for a long reduce with few outputs, else unroll/upcast as
above in small, then LOCAL splits of the output ranges; optimize_ast picks by the renderer's capabilities.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.helpers import NOOPT, prod
from tinygrad.renderer import Renderer
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.schedule import KernelInfo
from tinygrad.codegen.opt.kernel import apply_opt, ranges_of, range_size, rtype, vector_loads, opt_axis, globalize, GPU_GLOBAL_DIMS

THREAD_MIN_WORK = 1 << 16     # elements of work (output elements times reduce trip count) before a kernel is threaded
THREAD_MAX = 32               # at most this many launches
UPCAST = 4
UNROLL_MAX_LOADS = 32         # a reduce loop is unrolled when its trip count times the loads in its body is at most this

def hand_coded_optimizations(ast:UOp, threads:int, upcast:bool=True) -> UOp:
  """The heuristics above; `threads`: the most launches a THREAD range may have, `upcast`: whether the target has vector accesses."""
  # threading decides on the work before upcasting hides a factor of it. The scheduler's UNROLL lanes are not counted: THREAD_MIN_WORK
  # was tuned when they were not ranges
  if threads > 1 and (loops := ranges_of(ast, AxisType.LOOP)) and (n_out := range_size(loops[0])) is not None:
    sizes = [range_size(r) for r in ranges_of(ast, AxisType.LOOP, AxisType.REDUCE)]
    if all(s is not None for s in sizes) and prod(sizes) >= THREAD_MIN_WORK:  # type: ignore[arg-type]
      if (n := next((t for t in range(min(threads, n_out), 1, -1) if n_out % t == 0), 1)) > 1:
        ast = apply_opt(ast, Opt(OptOps.THREAD, opt_axis(ast, OptOps.THREAD, loops[0]), n))[0]
  # unroll small reduce loops, innermost first (its lanes are the ones the C compiler can pair up)
  for red in [u for u in ast.toposort() if u.op is Ops.REDUCE]:
    loads = max(1, sum(1 for u in red.src[0].toposort() if u.op is Ops.LOAD))
    loads *= prod(range_size(r) or 1 for r in red.src[1:] if rtype(r) is AxisType.UNROLL)  # the lanes' loads
    for r in reversed([r for r in red.src[1:] if rtype(r) is AxisType.REDUCE]):
      if (n := range_size(r)) is None or n * loads > UNROLL_MAX_LOADS: continue
      ast = apply_opt(ast, Opt(OptOps.UNROLL, opt_axis(ast, OptOps.UNROLL, r), 0))[0]
      loads *= n
  # upcast the innermost output loop. A reduce whose loops were all unrolled is straight-line code: upcast like an elementwise kernel
  has_reduce = bool(ranges_of(ast, AxisType.REDUCE))
  if not upcast: return ast
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or len(ast.src[0].src) != 2 or ast.src[0].src[0].op is not Ops.INDEX: return ast
  if not (loops := ranges_of(ast, AxisType.LOOP)) or (n := range_size(inner_loop := loops[-1])) is None or n % UPCAST != 0: return ast
  up, outer, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, inner_loop), UPCAST))
  assert lane is not None
  # in a reduce kernel the lanes pay off when they share vector loads in the loop (a matmul's B row); lanes that each read their own
  # row only add memory streams (x.sum(axis=1) got slower)
  if has_reduce and not vector_loads(up, lane, in_reduce_only=True): return ast
  if not has_reduce: return up
  # upcast_outer: the next output loop (x.sum(axis=0) with one output loop: that loop again)
  loops = [r for r in ranges_of(up, AxisType.LOOP) if r is not outer]
  if len(ranges_of(ast, AxisType.LOOP)) == 1: out = outer
  else:
    if not loops: return up
    out = loops[-1]
    # only with a load in the reduce to share between the lanes
    topo = up.toposort()
    if all(out in u.toposort() for red in topo if red.op is Ops.REDUCE for u in red.src[0].toposort() if u.op is Ops.LOAD): return up
  if out is None or (n := range_size(out)) is None or n % UPCAST != 0: return up
  return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, out), UPCAST))[0]

# ***** the GPU flavour: renderers with has_local (GPU dims, workgroups) *****

GPU_GROUP_MAX_OUTPUTS = 2048  # a reduce kernel with at most this many outputs splits its reduce over a workgroup (GROUPTOP): too few
GPU_GROUP_MIN_REDUCE = 256    # outputs to fill the device otherwise; only for reduces of at least this many elements
GPU_GROUP = 16                # at most this many threads share one reduce (the largest count that divides it)
GPU_LOCAL_MAX = 128           # threads per workgroup the LOCAL splits aim for
GPU_LOCALS = (32, 16, 8, 4, 3, 2)

def _try(ast:UOp, op:OptOps, rng:UOp, arg:int, ren:Renderer) -> UOp|None:
  try: return apply_opt(ast, Opt(op, opt_axis(ast, op, rng), arg), ren)[0]
  except KernelOptError: return None

def hand_coded_gpu(ast:UOp, ren:Renderer) -> UOp:
  """The heuristics for a renderer with GPU dims, in order: a reduce with few outputs is split over a workgroup (GROUPTOP); otherwise a
  small reduce is unrolled and the innermost output range upcast by 4 (vector stores); then the output ranges, innermost first, get
  LOCAL splits (a workgroup of up to GPU_LOCAL_MAX threads). Every Opt goes through apply_opt with the renderer, so none is invalid."""
  if any(range_size(r) is None for r in ranges_of(ast)): return ast  # symbolic sizes: left as they are
  n_out = prod(range_size(r) or 1 for r in ranges_of(ast, AxisType.LOOP))
  reds = ranges_of(ast, AxisType.REDUCE)
  n_red = prod(range_size(r) or 1 for r in ranges_of(ast, AxisType.REDUCE, AxisType.UNROLL))
  if reds and n_out <= GPU_GROUP_MAX_OUTPUTS and n_red >= GPU_GROUP_MIN_REDUCE:
    for r in reds:
      amt = next((d for d in range(GPU_GROUP, 1, -1) if (range_size(r) or 0) % d == 0), None)
      if amt is not None and (ret := _try(ast, OptOps.GROUPTOP, r, amt, ren)) is not None: return ret
  # unroll a small reduce loop (the innermost); then upcast the innermost output range where enough threads are left
  if reds and (range_size(reds[-1]) or 0) <= 8 and (ret := _try(ast, OptOps.UNROLL, reds[-1], 0, ren)) is not None: ast = ret
  if ren.supports_float4 and (loops := ranges_of(ast, AxisType.LOOP)) and n_out >= 4096 and (range_size(loops[-1]) or 0) % UPCAST == 0:
    if (ret := _try(ast, OptOps.UPCAST, loops[-1], UPCAST, ren)) is not None: ast = ret
  # LOCAL: a workgroup over the output ranges that become launch dims (globalize: the innermost 3), innermost first
  threads = 1
  for r in reversed(ranges_of(ast, AxisType.LOOP)[-GPU_GLOBAL_DIMS:]):
    for amt in GPU_LOCALS:
      if (range_size(r) or 0) % amt == 0 and threads * amt <= GPU_LOCAL_MAX and (ret := _try(ast, OptOps.LOCAL, r, amt, ren)) is not None:
        ast, threads = ret, threads * amt
        break
  return ast

def optimize_ast(ast:UOp, ren:Renderer|None=None) -> UOp:
  """The AST shaped for a renderer's declared capabilities: has_local (GPU dims: hand_coded_gpu, then the output loops become launch
  dims), has_threads (and global_max[0], the thread count), supports_float4. An AST that has opts applied already (a BEAM result, or
  apply_opts) keeps them."""
  if ast.op is not Ops.SINK or ren is None: return ast
  if not NOOPT and not (isinstance(ast.arg, KernelInfo) and ast.arg.opts):
    if ren.has_local: ast = hand_coded_gpu(ast, ren)
    else: ast = hand_coded_optimizations(ast, min(ren.global_max[0], THREAD_MAX) if ren.has_threads and ren.global_max else 1, ren.supports_float4)
  return globalize(ast) if ren.has_local else ast
