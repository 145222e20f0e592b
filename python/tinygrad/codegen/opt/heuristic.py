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
  register_tile  instead of upcast/upcast_outer, a big reduce kernel with two output loops (a 1024 matmul, a 64-channel conv) gets a
           register tile sized for AVX-512: 8 rows x 16 columns of a matmul (and, for a B too big for the caches, 32 columns with the
           column blocks outside the row blocks), 32 output channels x 8 columns of a conv (see register_tile).
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.helpers import NOOPT, prod
from tinygrad.renderer import Renderer
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opt, ranges_of, range_size, rtype, vector_loads, swap_loops

THREAD_MIN_WORK = 1 << 16     # elements of work (output elements times reduce trip count) before a kernel is threaded
THREAD_MAX = 32               # at most this many launches
UPCAST = 4
TILE_LANES = (16, 8)          # register_tile: lanes of the innermost output loop (16, else 8)
TILE_ROWS = 8                 # and rows of the loop sharing its loads
GATHER_ROWS = (32, 16)        # rows of a gathering kernel's tile (a conv's output channels per gathered input vector)
# multiply-adds (all ranges) before a kernel gets that tile, else the 4x4 upcast. The tile's code is ~8x longer (its lanes are scalars
# until clang vectorizes them): ~0.1 s more to lower and compile, which 2-3 runs pay back at this size (a 1024 matmul: ~50 ms with the
# 4x4 upcast, ~13 ms tiled); smaller kernels (every matmul of bench_models' MLP and GPT-2 block) keep their cold compile time
TILE_MIN_WORK = 1 << 29
TILE_PANEL_BYTES = 8 << 20    # B (reduce x j elements) bigger than this: 32 lanes and the j blocks outside the i blocks
UNROLL_MAX_LOADS = 32         # a reduce loop is unrolled when its trip count times the loads in its body is at most this

def hand_coded_optimizations(ast:UOp, threads:int, upcast:bool=True) -> UOp:
  """The heuristics above; `threads`: the most launches a THREAD range may have, `upcast`: whether the target has vector accesses."""
  # threading decides on the work before upcasting hides a factor of it. The scheduler's UNROLL lanes are not counted: THREAD_MIN_WORK
  # was tuned when they were not ranges
  if threads > 1 and (loops := ranges_of(ast, AxisType.LOOP)) and (n_out := range_size(loops[0])) is not None:
    sizes = [range_size(r) for r in ranges_of(ast, AxisType.LOOP, AxisType.REDUCE)]
    if all(s is not None for s in sizes) and prod(sizes) >= THREAD_MIN_WORK:  # type: ignore[arg-type]
      if (n := next((t for t in range(min(threads, n_out), 1, -1) if n_out % t == 0), 1)) > 1:
        ast = apply_opt(ast, Opt(OptOps.THREAD, ranges_of(ast).index(loops[0]), n))[0]
  # unroll small reduce loops, innermost first (its lanes are the ones the C compiler can pair up)
  for red in [u for u in ast.toposort() if u.op is Ops.REDUCE]:
    loads = max(1, sum(1 for u in red.src[0].toposort() if u.op is Ops.LOAD))
    loads *= prod(range_size(r) or 1 for r in red.src[1:] if rtype(r) is AxisType.UNROLL)  # the lanes' loads
    for r in reversed([r for r in red.src[1:] if rtype(r) is AxisType.REDUCE]):
      if (n := range_size(r)) is None or n * loads > UNROLL_MAX_LOADS: continue
      ast = apply_opt(ast, Opt(OptOps.UNROLL, ranges_of(ast).index(r), 0))[0]
      loads *= n
  # upcast the innermost output loop. A reduce whose loops were all unrolled is straight-line code: upcast like an elementwise kernel
  has_reduce = bool(ranges_of(ast, AxisType.REDUCE))
  if not upcast: return ast
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or len(ast.src[0].src) != 2 or ast.src[0].src[0].op is not Ops.INDEX: return ast
  if not (loops := ranges_of(ast, AxisType.LOOP)) or (n := range_size(inner_loop := loops[-1])) is None or n % UPCAST != 0: return ast
  if has_reduce and (tiled := register_tile(ast, loops)) is not None: return tiled
  up, outer, lane = apply_opt(ast, Opt(OptOps.UPCAST, ranges_of(ast).index(inner_loop), UPCAST))
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
  return apply_opt(up, Opt(OptOps.UPCAST, ranges_of(up).index(out), UPCAST))[0]

def _reduce_loads(ast:UOp) -> list[UOp]:
  return [u for red in ast.toposort() if red.op is Ops.REDUCE for u in red.src[0].toposort() if u.op is Ops.LOAD]

def register_tile(ast:UOp, loops:list[UOp]) -> UOp|None:
  """A big reduce kernel with two or more output loops gets a register tile over the innermost output loop j and the loop i whose
  lanes share what j's lanes load (the innermost LOOP that no j-dependent load in the reduce depends on: a matmul's rows, a conv's
  output channels). Two shapes (measured on AVX-512 with clang's SLP vectorizer, which turns the lanes into vector registers):
    matmul  the j-dependent load is a vector load (B's row): j upcast by 16 (one AVX-512 vector, two AVX2 ones), i by 8, so each B
            vector serves 8 rows and each A scalar 16 columns (128 accumulators). When B is too big to stay in the caches
            (K*N*itemsize > TILE_PANEL_BYTES) j gets 32 lanes (two vectors) and the j blocks move outside the i blocks: the K x 32
            panel of B is read from cache by every row block.
    gather  the j-dependent loads are gated (a padded conv's input): each lane loads its own scalar, so j gets 8 lanes and i as many
            as fit (GATHER_ROWS), each gathered input vector serving them all.
  None if the kernel doesn't qualify (then the 4x4 upcast)."""
  sizes = [range_size(r) for r in ranges_of(ast)]
  if len(loops) < 2 or any(s is None for s in sizes) or prod(sizes) < TILE_MIN_WORK: return None  # type: ignore[arg-type]
  j = loops[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if not j_loads or not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return None
  i = cands[-1]
  nj, ni = range_size(j) or 0, range_size(i) or 0
  if (vj := next((v for v in TILE_LANES if nj % v == 0), None)) is None: return None
  up, j_out, lane = apply_opt(ast, Opt(OptOps.UPCAST, ranges_of(ast).index(j), vj))
  if lane is not None and (loads := vector_loads(up, lane, in_reduce_only=True)):
    if ni % TILE_ROWS != 0: return None
    red = [r for r in ranges_of(up, AxisType.REDUCE, AxisType.UNROLL) if any(r in ld.src[0].src[1].toposort() for ld in loads)]
    panel = nj * prod(range_size(r) or 1 for r in red) * loads[0].dtype.itemsize
    up, i_out, _ = apply_opt(up, Opt(OptOps.UPCAST, ranges_of(up).index(i), TILE_ROWS))
    if panel > TILE_PANEL_BYTES and j_out is not None and (range_size(j_out) or 0) % 2 == 0:
      up, j_out, _ = apply_opt(up, Opt(OptOps.UPCAST, ranges_of(up).index(j_out), 2))
      if j_out is not None and i_out is not None: up = swap_loops(up, j_out, i_out)
    return up
  # only gathers of gated loads (an ungated load that isn't a vector load is strided: lanes would add memory streams), 8 lanes each
  if nj % 8 != 0 or any(len(ld.src) == 1 for ld in j_loads) or (rows := next((v for v in GATHER_ROWS if ni % v == 0), None)) is None:
    return None
  if vj != 8: up = apply_opt(ast, Opt(OptOps.UPCAST, ranges_of(ast).index(j), 8))[0]
  up, i_out, _ = apply_opt(up, Opt(OptOps.UPCAST, ranges_of(up).index(i), 16))
  return apply_opt(up, Opt(OptOps.UPCAST, ranges_of(up).index(i_out), rows // 16))[0] if rows > 16 and i_out is not None else up

def optimize_ast(ast:UOp, ren:Renderer|None=None) -> UOp:
  """The AST shaped for a renderer's declared capabilities: has_threads (and global_max[0], the thread count), supports_float4."""
  if NOOPT or ast.op is not Ops.SINK or ren is None: return ast
  return hand_coded_optimizations(ast, min(ren.global_max[0], THREAD_MAX) if ren.has_threads and ren.global_max else 1, ren.supports_float4)
