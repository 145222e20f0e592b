"""Hand-coded kernel optimizations: the Opts a kernel gets without a search.

The heuristics (`hand_coded_optimizations`), in order:
  thread   split the outermost output loop of a known size of a kernel with enough work over the machine's cores (E_16777216 ->
           E_2_8388608; a loop of a symbolic size counts at its upper bound, and the loop inside it is split).
  unroll   a small reduce loop (trip count times the loads of its body at most UNROLL_MAX_LOADS) becomes an UNROLL range: straight-line
           code, its lanes combined as a tree (a REDUCE left with no range is just that value).
  upcast   the innermost output loop of size N, N % 4 == 0, gets an UPCAST range of 4: E_100 -> E_25_4. A reduce kernel keeps it only
           when a load inside its reduce becomes a vector load (a matmul's B row; not x.sum(axis=1), whose lanes read 4 rows), an
           elementwise kernel only when its body is short (UPCAST_MAX_BODY_OPS: not a threefry hash).
  decoded_rows_tile  where that upcast is refused (no vector load: x @ decode(w).T, a quantized weight), an outer output loop of a
           known size that the weight's decode doesn't move with (the rows of x) is upcast by DECODED_ROWS: one decode, that many rows.
  upcast_outer  then, in an upcast reduce kernel, the next output loop too when a load in the reduce does not depend on it (a matmul's
           B vector load serves 4 rows: 16 accumulators, r_64_16_4_16_4 -> r_16_4_16_4_16_4); with a single output loop
           (x.sum(axis=0)) that loop again: 16 consecutive outputs, each reduce step reads a 64-byte line of a row. A loop of at most
           OUTER_FULL_MAX that 4 doesn't divide is upcast fully.
  dot_tile  instead of upcast/upcast_outer, a reduce kernel whose loads that move with the innermost output loop are consecutive along
           the reduce's UNROLL lanes (x @ w.T, w of shape (out, in)) gets a 4 x 4 tile of dot products (see dot_tile).
  image_tile  instead of upcast/upcast_outer, a reduce kernel whose gated loads move with a short innermost output loop (a small
           image's conv) gets that loop upcast fully and the output channels by 8 (see image_tile).
  tap_tile  a reduce kernel whose innermost output loops are a conv's taps (3x3: not a multiple of 4, no upcast) gets them upcast
           fully, its innermost reduce loop unrolled and its output channels upcast by 4 (a conv's weight gradient; with input
           channels, those by 2 instead of the outer tap; see tap_tile).
  register_tile  instead of upcast/upcast_outer, a big reduce kernel with two output loops (a 1024 matmul) gets a register tile
           sized for AVX-512: 8 rows x 16 columns of a matmul, the column blocks outside the row blocks and each block's K x 16
           panel of B packed into contiguous memory (Opt PACK) (see register_tile).
           A big x @ w.T gets the same tile, w's K x 16 panel packed transposed (PACK puts the lanes innermost); smaller ones dot_tile.
  peeled_tile  before unrolling: a big padded conv (its input loads gated only by the border, which codegen/split_ranges.py peels
           off) gets 8 columns x 16 output channels (16 x 8; 4 x 16 for rows of 4k columns), its 3x3 window kept as loops: the
           interior piece's input loads are vectors; gather_tile: a smaller one, or one whose border can't be peeled (a strided conv),
           8 or 4 columns x 16 channels with gathered (gated scalar) input loads.

For a renderer with GPU dims (has_local), `hand_coded_gpu` instead: tensor cores first where the renderer has them and the kernel is
a matmul they fit (tensor_core_opts), else GROUPTOP for a long reduce with few outputs, else unroll/upcast as
above in small, then LOCAL splits of the output ranges; optimize_ast picks by the renderer's capabilities.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, Ops, AxisType, KernelInfo, GroupOp
from tinygrad.helpers import NOOPT, prod, USE_TC, TC_OPT, TC_SELECT
from tinygrad.renderer import Renderer
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.split_ranges import peels
from tinygrad.codegen.opt.kernel import apply_opt, ranges_of, range_size, rtype, vector_loads, opt_axis, globalize, GPU_GLOBAL_DIMS
from tinygrad.codegen.opt.kernel import range_key, pack_candidates, apply_opts, _consecutive, _strides, expanded_ops
from tinygrad.schedule.knobs import THREAD_MIN_WORK, THREAD_MAX, UPCAST, OUTER_FULL_MAX, TILE_LANES, TILE_ROWS, GATHER_MIN_WORK, PEEL_LANES
from tinygrad.schedule.knobs import PEEL_J_LANES, PEEL_MAX_ROWS, GATHER_J_LANES, TILE_MIN_WORK, TILE_PANEL_BYTES, DOT_TILE, MAX_IMAGE_ROW, IMAGE_ROWS
from tinygrad.schedule.knobs import TILE_DOT_MIN_WORK, TILE_BUDGET_ROWS
from tinygrad.schedule.knobs import MAX_UNPADDED_TAPS, MAX_TAPS, MAX_TAP_UNROLL, TAP_ROWS, TAP_IN_CHANNELS, UNROLL_MAX_LOADS, TILE_FAMILY_ROWS
from tinygrad.schedule.knobs import TILE_FAMILY_CHAINED, GPU_GROUP_MAX_OUTPUTS, GPU_GROUP_MIN_REDUCE, GPU_GROUP, GPU_LOCAL_MAX, GPU_LOCALS
from tinygrad.schedule.knobs import TC_UPCASTS, TC_LOCALS, UPCAST_MAX_BODY_OPS, DECODED_ROWS, CHANNEL_LANES, CHANNEL_J_LANES, CHANNEL_MIN_REDUCE
from tinygrad.schedule.knobs import CHANNEL_WINDOW_RATIO, REDUCE_UNROLL

def _within_budget(tile, ast:UOp, *args) -> UOp|None:
  """tile(ast, *args), or None where one of its opts is refused (apply_opt's limits: the code-size budget on a kernel with a long body)."""
  try: return tile(ast, *args)
  except KernelOptError: return None

def _thread(ast:UOp, threads:int, keep:UOp|None=None) -> UOp:
  """ast with its outermost output loop of a known size split over up to `threads` launches (a loop of a symbolic size, a prefill
  chunk's rows, is passed over). `keep`: a loop that must stay a loop (a packed panel's), split only if part of it is left."""
  if threads <= 1: return ast
  for out in ranges_of(ast, AxisType.LOOP):
    if (n_out := range_size(out)) is None: continue
    if (n := next((t for t in range(min(threads, n_out), 1, -1) if n_out % t == 0), 1)) > 1 and (out is not keep or n < n_out):
      return apply_opt(ast, Opt(OptOps.THREAD, opt_axis(ast, OptOps.THREAD, out), n))[0]
    if out is not keep: break
  return ast

def hand_coded_optimizations(ast:UOp, threads:int, upcast:bool=True, tile_rows:int=TILE_ROWS, tile_cols:int=0, chain:bool=False) -> UOp:
  """The heuristics above; `threads`: the most launches a THREAD range may have, `upcast`: whether the target has vector accesses,
  `tile_rows`, `tile_cols` (0: TILE_LANES) and `chain` (Opt CHAIN): a matmul's register tile (tile_family tries others)."""
  # threading decides on the work before upcasting hides a factor of it. THREAD_MIN_WORK was tuned when the scheduler's REDUCE_UNROLL
  # lanes of a sum were not ranges: the UNROLL lanes past those count (a decoded weight's 32-element blocks: a 512 x 2048 quantized
  # GEMV counted 32 times short ran on one core)
  lanes = prod(int(r.src[0].vmax) for r in ranges_of(ast, AxisType.UNROLL))
  work = prod(int(r.src[0].vmax) for r in ranges_of(ast, AxisType.LOOP, AxisType.REDUCE)) * max(1, lanes // REDUCE_UNROLL)
  threads = threads if work >= THREAD_MIN_WORK else 1
  # channel_tile upcasts the output channels before the threads split their blocks (a split first could leave fewer than its lanes)
  if upcast and (tiled := _within_budget(channel_tile, ast, threads)) is not None: return tiled
  ast = _thread(ast, threads)
  if upcast and any((tiled := _within_budget(tile, ast)) is not None for tile in (peeled_tile, gather_tile)): return tiled
  # unroll small reduce loops, innermost first (its lanes are the ones the C compiler can pair up)
  # (each reduce is looked up again in the current AST: an unroll replaces every node above it, and an outer reduce must see the UNROLL
  # lanes of the inner one it contains, or nested reduces each unroll fully and multiply)
  for i in range(sum(1 for u in ast.toposort() if u.op is Ops.REDUCE)):
    red = [u for u in ast.toposort() if u.op is Ops.REDUCE][i]
    loads = max(1, sum(1 for u in red.src[0].toposort() if u.op is Ops.LOAD))
    # the lanes' loads: its own UNROLL ranges and those of the reduces inside it (a staged sum's lanes: one accumulator each)
    lanes = {r for r in (*red.src[1:], *red.src[0].toposort()) if r.op is Ops.RANGE and rtype(r) is AxisType.UNROLL}
    loads *= prod(range_size(r) or 1 for r in lanes)
    for r in reversed([r for r in red.src[1:] if rtype(r) is AxisType.REDUCE]):
      if (n := range_size(r)) is None or n * loads > UNROLL_MAX_LOADS: continue
      try: ast = apply_opt(ast, Opt(OptOps.UNROLL, opt_axis(ast, OptOps.UNROLL, r), 0))[0]
      except KernelOptError: continue   # over the code-size budget (a long body)
      loads *= n
  # upcast the innermost output loop. A reduce whose loops were all unrolled is straight-line code: upcast like an elementwise kernel
  has_reduce = bool(ranges_of(ast, AxisType.REDUCE))
  if not upcast: return ast
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or len(ast.src[0].src) != 2 or ast.src[0].src[0].op is not Ops.INDEX: return ast
  # the tiles pick loops by their sizes: a loop of a symbolic size (a Variable's) has none, and such a kernel gets the plain upcast
  tiles = has_reduce and all(range_size(r) is not None for r in ranges_of(ast, AxisType.LOOP))
  if tiles and (loops := ranges_of(ast, AxisType.LOOP)) and (tiled := _within_budget(tap_tile, ast, loops)) is not None: return tiled
  if not (loops := ranges_of(ast, AxisType.LOOP)) or (n := range_size(inner_loop := loops[-1])) is None or n % UPCAST != 0: return ast
  if not any(u.op is Ops.REDUCE for u in ast.toposort()) and expanded_ops(ast) > UPCAST_MAX_BODY_OPS: return ast
  # a tile whose body passes the code-size budget (a long epilogue in every lane: a linear layer's gelu) gets fewer rows
  for rows in (tile_rows, *(r for r in TILE_BUDGET_ROWS if r < tile_rows)):
    if tiles and (tiled := _within_budget(register_tile, ast, loops, rows, tile_cols, chain)) is not None: return tiled
  if tiles and (tiled := _within_budget(dot_tile, ast, loops)) is not None: return tiled
  if tiles and (tiled := _within_budget(image_tile, ast, loops)) is not None: return tiled
  try: up, outer, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, inner_loop), UPCAST))
  except KernelOptError: return ast   # over the code-size budget
  assert lane is not None
  # in a reduce kernel the lanes pay off when they share vector loads in the loop (a matmul's B row); lanes that each read their own
  # row only add memory streams (x.sum(axis=1) got slower)
  # (a load the loop re-reads: one that doesn't move with the reduce is hoisted out of it, as softmax's row max)
  if has_reduce and not [ld for ld in vector_loads(up, lane, in_reduce_only=True) if _in_loop(ld)]:
    return tiled if (tiled := _within_budget(decoded_rows_tile, ast, loops)) is not None else ast
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
  if out is None or (n := range_size(out)) is None or n < 2 or (n % UPCAST != 0 and n > OUTER_FULL_MAX): return up
  # a short loop that 4 doesn't divide is upcast fully (a Linear's weight gradient with 10 outputs, 5 per thread: each vector of the
  # input loaded serves the 5 rows, instead of 5 passes over the input)
  try: return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, out), UPCAST if n % UPCAST == 0 else 0))[0]
  except KernelOptError: return up   # over the code-size budget

# ***** the GPU flavour: renderers with has_local (GPU dims, workgroups) *****

def _try(ast:UOp, op:OptOps, rng:UOp, arg:int, ren:Renderer) -> UOp|None:
  try: return apply_opt(ast, Opt(op, opt_axis(ast, op, rng), arg), ren)[0]
  except KernelOptError: return None

def hand_coded_gpu(ast:UOp, ren:Renderer) -> UOp:
  """The heuristics for a renderer with GPU dims, in order: a reduce with few outputs is split over a workgroup (GROUPTOP); otherwise a
  small reduce is unrolled and the innermost output range upcast by 4 (vector stores); then the output ranges, innermost first, get
  LOCAL splits (a workgroup of up to GPU_LOCAL_MAX threads). Every Opt goes through apply_opt with the renderer, so none is invalid."""
  if any(range_size(r) is None for r in ranges_of(ast)): return ast  # symbolic sizes: left as they are
  if (ret := tensor_core_opts(ast, ren)) is not None: return ret
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

def tensor_core_opts(ast:UOp, ren:Renderer) -> UOp|None:
  """As tinygrad 0.14, tensor cores first (TC=0: off; TC_SELECT, TC_OPT pick which and how, tinygrad/codegen/opt/tc.py): the first
  (N, M, K) choice the TC action takes, then the N and M blocks upcast and warps along N, where they divide. None: no TC applies (only
  a kernel with one REDUCE range is tried unless TC_OPT >= 1)."""
  if not ren.tensor_cores or USE_TC.value <= 0 or (len(ranges_of(ast, AxisType.REDUCE)) != 1 and TC_OPT.value < 1): return None
  for axis in range(3):
    try: ast, m_o, n_o = apply_opt(ast, Opt(OptOps.TC, axis, (TC_SELECT.value, TC_OPT.value, USE_TC.value)), ren)
    except KernelOptError: continue
    blocks = [n_o, m_o]
    for i, r in enumerate(blocks):
      for amt in TC_UPCASTS:
        if r is not None and (range_size(r) or 0) % amt == 0 and (ret := _try(ast, OptOps.UPCAST, r, amt, ren)) is not None:
          ast, blocks[i] = ret, next((x for x in ranges_of(ret) if x.arg == (*range_key(r), 0, rtype(r))), None)
          break
    if (r := blocks[0]) is not None:
      for amt in TC_LOCALS:
        if (range_size(r) or 0) % amt == 0 and (ret := _try(ast, OptOps.LOCAL, r, amt, ren)) is not None:
          ast = ret
          break
    return ast
  return None

def decoded_rows_tile(ast:UOp, loops:list[UOp]) -> UOp|None:
  """x @ decode(w).T with a known number of rows of x (a prefill chunk's GEMM over quantized weights): the rows' loop, an output loop
  that the decoded weight (ALU work on loaded values, inside the reduce) doesn't move with, upcast by DECODED_ROWS, so each weight
  element is decoded once for that many rows of x. None where there is no such loop."""
  reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
  for loop in reversed(loops[:-1]):
    if (n := range_size(loop)) is None or n % DECODED_ROWS != 0: continue
    decoded = [u for red in reds for u in red.src[0].toposort() if u.op in GroupOp.ALU and loop not in (topo := u.toposort()) and
               any(ld.op is Ops.LOAD for ld in topo)]
    if decoded: return apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, loop), DECODED_ROWS))[0]
  return None

def _in_loop(ld:UOp) -> bool:
  """Whether a load's address moves with a reduce loop (else it is read once, before the loop)."""
  return any(r.op is Ops.RANGE and rtype(r) in (AxisType.REDUCE, AxisType.UNROLL) for r in ld.src[0].src[1].toposort())

def _reduce_loads(ast:UOp) -> list[UOp]:
  return [u for red in ast.toposort() if red.op is Ops.REDUCE for u in red.src[0].toposort() if u.op is Ops.LOAD]

def register_tile(ast:UOp, loops:list[UOp], rows:int=TILE_ROWS, cols:int=0, chain:bool=False) -> UOp|None:
  """A big reduce kernel with two or more output loops gets a register tile over the innermost output loop j and the loop i whose
  lanes share what j's lanes load (the innermost LOOP that no j-dependent load in the reduce depends on: a matmul's rows, a conv's
  output channels), tuned on AVX-512 with clang's SLP vectorizer, which turns the lanes into vector registers: the j-dependent load
  is a vector load (B's row): j upcast by 16 (one AVX-512 vector, two AVX2 ones), i by 8, so each B vector serves 8 rows and each A
  scalar 16 columns (128 accumulators). Then the j blocks move outside the i blocks (SWAP) and each j block's K x 16 panel of B is
  packed (PACK: copied once per j block into a contiguous per-thread array): B's rows are N floats apart, so without it every reduce
  step reads a new page and, for N = 2048, the panel's lines alias in a few cache sets (benches/README.md, Design measurements).
  Where the panel is too big to pack (PACK_MAX_BYTES) and B too big to stay in the caches (K*N*itemsize > TILE_PANEL_BYTES), j gets
  32 lanes (two vectors) and the j blocks move outside the i blocks: the K x 32 panel of B is read from cache by every row block. (A
  kernel whose j-dependent loads are gated got peeled_tile or gather_tile before.) `cols` 32 (tile_family): j gets 2 x 16 lanes
  before i's (two vectors per reduce step), `chain`: Opt(CHAIN) before the PACK (see TILE_FAMILY_CHAINED).
  None if the kernel doesn't qualify (then the 4x4 upcast)."""
  sizes = [range_size(r) for r in ranges_of(ast)]
  if len(loops) < 2 or any(s is None for s in sizes) or prod(sizes) < TILE_MIN_WORK: return None  # type: ignore[arg-type]
  j = loops[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if not j_loads or not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return None
  i = cands[-1]
  nj, ni = range_size(j) or 0, range_size(i) or 0
  if (vj := next((v for v in TILE_LANES if nj % v == 0), None)) is None: return None
  up, j_out, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, j), vj))
  if lane is not None and (loads := vector_loads(up, lane, in_reduce_only=True)):
    if ni % rows != 0: return None
    red = [r for r in ranges_of(up, AxisType.REDUCE, AxisType.UNROLL) if any(r in ld.src[0].src[1].toposort() for ld in loads)]
    panel = nj * prod(range_size(r) or 1 for r in red) * loads[0].dtype.itemsize
    if cols == 2 * vj:
      if j_out is None or (range_size(j_out) or 0) % 2: return None
      up, j_out, _ = apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, j_out), 2))
    up, i_out, _ = apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, i), rows))
    if (packed := _packed_panels(up, j_out, i_out, loads[0], chain)) is not None: return packed
    if cols or chain: return None
    if panel > TILE_PANEL_BYTES and j_out is not None and (range_size(j_out) or 0) % 2 == 0:
      up, j_out, _ = apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, j_out), 2))
      if j_out is not None and i_out is not None:
        up = apply_opt(up, Opt(OptOps.SWAP, opt_axis(up, OptOps.SWAP, j_out), opt_axis(up, OptOps.SWAP, i_out)))[0]
    return up
  if lane is not None and prod(sizes) >= TILE_DOT_MIN_WORK and _dot_layout(ast, loops) and ni % rows == 0:  # type: ignore[arg-type]
    # x @ w.T: j's lanes are rows of w (no vector load), but its packed panel is transposed (PACK puts the lanes innermost)
    up, i_out, _ = apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, i), rows))
    j_ld = next(ld for ld in _reduce_loads(up) if lane in ld.src[0].toposort())
    return _packed_panels(up, j_out, i_out, j_ld, chain)
  return None

def _dot_layout(ast:UOp, loops:list[UOp]) -> bool:
  """Whether the reduce loads that move with the innermost output loop are consecutive along the reduce's last UNROLL range (x @ w.T)."""
  if not (unrolls := ranges_of(ast, AxisType.UNROLL)): return False
  j_loads = [ld for ld in _reduce_loads(ast) if loops[-1] in ld.src[0].toposort()]
  return bool(j_loads) and all(len(ld.src) == 1 for ld in j_loads) and all(_consecutive([ld.src[0].src[1] for ld in j_loads], unrolls[-1]))

def peeled_tile(ast:UOp) -> UOp|None:
  """A big reduce kernel whose loads along the innermost output loop j are gated only by comparisons codegen/split_ranges.py peels (a
  padded conv's input): the interior piece reads j's lanes as vectors, as a matmul reads B. j gets 16, 8 or 4 lanes (PEEL_J_LANES) and
  the loop i whose lanes share what j's lanes load (a conv's output channels) 8, 16 or 16: each input vector serves i's rows, each weight
  scalar j's lanes, 128 accumulators (64 with 4 lanes). The small reduce loops (a conv's 3x3 window) stay loops: unrolled, every piece
  of the split would copy the tile once per window position (a 9 times longer kernel to lower and compile, and no faster at 64
  channels of 56x56). None if the kernel doesn't qualify."""
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or ast.src[0].src[0].op is not Ops.INDEX or len(ast.src[0].src) != 2: return None
  sizes = [range_size(r) for r in ranges_of(ast)]
  if len(loops := ranges_of(ast, AxisType.LOOP)) < 2 or any(s is None for s in sizes) or prod(sizes) < TILE_DOT_MIN_WORK: return None  # type: ignore
  j = loops[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if not j_loads or any(len(ld.src) != 3 or not peels(ld.src[2]) for ld in j_loads): return None
  if not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return None
  i, nj = cands[-1], range_size(j) or 0
  # at least 3 blocks of j's lanes: the first and last blocks hold the border, the interior is the rest
  if (vj := next((v for v in PEEL_J_LANES if nj % v == 0 and nj // v >= 3), None)) is None: return None
  if (range_size(i) or 0) % (rows := min(PEEL_LANES // vj, PEEL_MAX_ROWS)) != 0: return None
  up, _, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, j), vj))
  if lane is None or len(vector_loads(up, lane, in_reduce_only=True, gated=True)) != len(j_loads): return None
  return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, i), rows))[0]

_SUMMED = (AxisType.REDUCE, AxisType.UNROLL)
def _ranges(x:UOp) -> list[UOp]: return [r for r in x.toposort() if r.op is Ops.RANGE]

def _window(idx:UOp, j:UOp, reds:list[UOp]) -> bool:
  """Whether idx moves with j as with one of the summed ranges reds, the two steps at most CHANNEL_WINDOW_RATIO apart (a conv's x and kx)."""
  sj, *srs = _strides(idx, [j, *reds], mid=True)
  return sj is not None and sj != 0 and any(sr is not None and sr != 0 and (max(abs(sj), abs(sr)) % min(abs(sj), abs(sr)) == 0) and
                                            max(abs(sj), abs(sr)) // min(abs(sj), abs(sr)) <= CHANNEL_WINDOW_RATIO for sr in srs)

def channel_tile(ast:UOp, threads:int=1) -> UOp|None:
  """A conv as a GEMM with the output channels as the vector: a reduce kernel of at least GATHER_MIN_WORK multiply-adds over at least
  CHANNEL_MIN_REDUCE elements per output, whose loads along the innermost output loop j (an image row's pixels, gated by the padding or
  strided) don't move with an outer loop i (the output channels) and whose load that moves with i (the weight) can be packed: i gets
  CHANNEL_LANES lanes (fewer where the body would pass the code-size budget: a second conv fused in, its lanes unrolled) and each i
  block's panel of weights is packed with its lanes innermost (Opt PACK), so each reduce step is one vector load of weights, one
  broadcast scalar of input per pixel lane of j (CHANNEL_J_LANES) and a vector multiply-add into that pixel's accumulator. Then
  `threads` split the outermost output loop (the batch, else the channel blocks). Scalar input loads need no peeling
  (codegen/split_ranges.py leaves a packed kernel whole). None if the kernel doesn't qualify (then peeled_tile, gather_tile)."""
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or ast.src[0].src[0].op is not Ops.INDEX or len(ast.src[0].src) != 2: return None
  sizes = [range_size(r) for r in ranges_of(ast)]
  if len(loops := ranges_of(ast, AxisType.LOOP)) < 2 or any(s is None for s in sizes) or prod(sizes) < GATHER_MIN_WORK: return None  # type: ignore
  j = loops[-1]
  # a short sum (a stem conv's 3 channels) keeps gather_tile, unless that would gather 2 lanes of a row longer than an image's (the
  # stem computed onto a max-pool's padded 114-wide grid)
  nj = range_size(j) or 0
  if prod(range_size(r) or 1 for r in ranges_of(ast, AxisType.REDUCE, AxisType.UNROLL)) < CHANNEL_MIN_REDUCE and \
     (nj % UPCAST == 0 or nj <= MAX_IMAGE_ROW): return None
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if not j_loads or not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return None
  # only a conv's sliding window: a load whose address moves with j as with a summed range, up to a small factor (the stride or the
  # dilation: x*2 + kx). A matmul's (x @ w's row of B, x @ w.T's row of w) are register_tile's and dot_tile's
  if not any(_window(ld.src[0].src[1], j, reds) for ld in j_loads if (reds := [r for r in _ranges(ld) if rtype(r) in _SUMMED])): return None
  i = cands[-1]
  if (vj := next((v for v in CHANNEL_J_LANES if (range_size(j) or 0) % v == 0), None)) is None: return None
  for vi in CHANNEL_LANES:
    if (range_size(i) or 0) % vi: continue
    try:
      up, i_out, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, i), vi))
      if i_out is None or lane is None: return None
      up, _, _ = apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, j), vj))
      break
    except KernelOptError: continue
  else: return None
  up = _thread(up, threads, keep=next(r for r in ranges_of(up, AxisType.LOOP) if range_key(r) == range_key(i_out)))
  # the channel blocks' loop, or its part the threads left a loop (None: all threaded, no loop to pack the panel in)
  key = range_key(i_out)
  if (i_out := next((r for r in ranges_of(up, AxisType.LOOP) if range_key(r)[:len(key)] == key), None)) is None: return None
  # the weight: the load that moves with i's lanes, not with j
  if (which := next((k for k, ld in enumerate(pack_candidates(up, i_out)) if lane in ld.src[0].toposort()), None)) is None: return None
  return apply_opt(up, Opt(OptOps.PACK, opt_axis(up, OptOps.PACK, i_out), which))[0]

def gather_tile(ast:UOp) -> UOp|None:
  """A reduce kernel of at least GATHER_MIN_WORK multiply-adds whose loads along the innermost output loop j are gated (a padded conv's
  input, where peeled_tile doesn't apply: an 8x8 image has no interior block, a strided conv's loads are no vectors) gets 8 lanes of j,
  else 4 or 2 where image_tile doesn't apply (each lane gathers its own scalar), and 16 of the loop i that those loads don't depend on
  (a conv's output channels): each gathered input vector serves 16 rows, each weight scalar j's lanes. The small reduce loops stay
  loops (the code stays small; a CNN training step's conv, 64x16x8x8 -> 32 channels, ran many times slower unrolled and scalar:
  benches/README.md, Design measurements). None if the kernel doesn't qualify."""
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or ast.src[0].src[0].op is not Ops.INDEX or len(ast.src[0].src) != 2: return None
  sizes = [range_size(r) for r in ranges_of(ast)]
  if len(loops := ranges_of(ast, AxisType.LOOP)) < 2 or any(s is None for s in sizes) or prod(sizes) < GATHER_MIN_WORK: return None  # type: ignore
  if not ranges_of(ast, AxisType.REDUCE): return None
  j = loops[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  # only gathers of gated loads (an ungated load that isn't a vector load is strided: lanes would add memory streams)
  if not j_loads or any(len(ld.src) != 3 for ld in j_loads): return None
  nj = range_size(j) or 0
  if (vj := next((v for v in GATHER_J_LANES if nj % v == 0 and (v == 8 or nj > MAX_IMAGE_ROW or nj % UPCAST)), None)) is None: return None
  if not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]) or (range_size(cands[-1]) or 0) % 16:
    return None
  up = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, j), vj))[0]
  return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, cands[-1]), 16))[0]

def _packed_panels(up:UOp, j_out:UOp|None, i_out:UOp|None, vload:UOp, chain:bool=False) -> UOp|None:
  """The matmul tile with its column blocks outside its row blocks (SWAP) and each K x 16 panel of B packed (PACK) once per column
  block, so every row block reads it as consecutive memory; None where that can't apply (a panel over PACK_MAX_BYTES)."""
  if j_out is None or i_out is None: return None
  try:
    up = apply_opt(up, Opt(OptOps.SWAP, opt_axis(up, OptOps.SWAP, j_out), opt_axis(up, OptOps.SWAP, i_out)))[0]
    jr = j_out.replace(arg=(*range_key(i_out), rtype(j_out)))   # the column blocks' range, where the row blocks' was
    if chain: up = apply_opt(up, Opt(OptOps.CHAIN))[0]
    cands = pack_candidates(up, jr)
    which = next(k for k, ld in enumerate(cands) if ld.src[0].src[0] is vload.src[0].src[0])
    return apply_opt(up, Opt(OptOps.PACK, opt_axis(up, OptOps.PACK, jr), which))[0]
  except (KernelOptError, StopIteration): return None

def _threads(ren:Renderer) -> int: return min(ren.global_max[0], THREAD_MAX) if ren.has_threads and ren.global_max else 1

def tile_family(ast:UOp, ren:Renderer) -> list[UOp]:
  """Where to start a search (codegen/opt/search.py) besides the heuristics' kernel: its packed register tile with other row counts, the
  chained 4 x 32 tile (TILE_FAMILY_CHAINED, on a renderer with fused_mulacc), and its tile without the SWAP and PACK (the search can't
  extend past a PACK, which is the last opt: from there the rounds try the other swaps, packs and thread counts). Few on purpose: every
  candidate of a big matmul is compiled and timed several times. [] on a device with GPU dims or for a
  kernel without a packed tile."""
  if ren.has_local or NOOPT: return []
  kernels = [hand_coded_optimizations(ast, _threads(ren), ren.supports_float4, rows) for rows in (TILE_ROWS, *TILE_FAMILY_ROWS)]
  if ren.fused_mulacc: kernels.append(hand_coded_optimizations(ast, _threads(ren), ren.supports_float4, *TILE_FAMILY_CHAINED, chain=True))
  kernels = [k for k in kernels if isinstance(k.arg, KernelInfo) and k.arg.applied_opts[-2:] and k.arg.applied_opts[-1].op is OptOps.PACK]
  if not kernels: return []
  try: plain = [apply_opts(ast, kernels[0].arg.applied_opts[:-2], ren)]
  except KernelOptError: plain = []
  return list(dict.fromkeys(kernels + plain))

def dot_tile(ast:UOp, loops:list[UOp]) -> UOp|None:
  """x @ w.T (w of shape (out, in)): the reduce loads that move with the innermost output loop j are consecutive along the reduce's
  UNROLL lanes, not along j, so upcasting j makes no vector load. A tile of DOT_TILE rows (the innermost output loop i whose loads
  don't move with j) x DOT_TILE columns of j instead: each reduce step loads 2 x DOT_TILE short vectors (the expander's vector loads
  along the UNROLL lanes, one vector accumulator each on a vector_alu renderer) for DOT_TILE**2 dot products. None if the kernel
  doesn't qualify."""
  unrolls = ranges_of(ast, AxisType.UNROLL)
  if len(loops) < 2 or not unrolls: return None
  j, u = loops[-1], unrolls[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if not j_loads or any(len(ld.src) != 1 for ld in j_loads) or not all(_consecutive([ld.src[0].src[1] for ld in j_loads], u)): return None
  if not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return None
  i = cands[-1]
  if (tj := next((t for t in DOT_TILE if (range_size(j) or 0) % t == 0), None)) is None: return None
  if (ti := next((t for t in DOT_TILE if (range_size(i) or 0) % t == 0), None)) is None: return None
  up = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, j), tj))[0]
  return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, i), ti))[0]

def image_tile(ast:UOp, loops:list[UOp]) -> UOp|None:
  """A small image's conv (8x8): the reduce's gated loads (the padded input) move with the innermost output loop j (the image's x),
  of at most MAX_IMAGE_ROW. j is upcast fully, so each lane's padding gate is a constant, and the output loop i that those loads don't
  move with (output channels) by IMAGE_ROWS: each input value loaded serves IMAGE_ROWS channels, each weight the whole row (a pooling's
  backward, whose loads all move with every output loop, gets the row alone: its gates fold). None if the kernel
  doesn't qualify."""
  j = loops[-1]
  j_loads = [ld for ld in _reduce_loads(ast) if j in ld.src[0].toposort()]
  if len(loops) < 2 or (nj := range_size(j) or 0) > MAX_IMAGE_ROW or not any(len(ld.src) > 1 for ld in j_loads): return None
  up = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, j), nj))[0]
  # with no loop to share the loads (a pooling's backward: every load moves with every output loop) the row alone: its gates fold
  if not (cands := [r for r in loops[:-1] if all(r not in ld.src[0].toposort() for ld in j_loads)]): return up
  if (ti := next((t for t in IMAGE_ROWS if (range_size(i := cands[-1]) or 0) % t == 0), None)) is None: return None
  return apply_opt(up, Opt(OptOps.UPCAST, opt_axis(up, OptOps.UPCAST, i), ti))[0]

def _unpadded_tap_tile(ast:UOp, loops:list[UOp], tap:UOp) -> UOp|None:
  """An unpadded conv's backward (no gated loads; tinygrad's MNIST convs, 5x5 on 24x24 and 3x3 on 8x8): the inner tap loop upcast
  fully, then
  - the input gradient before its taps are summed (one value per pixel and tap, a reduce over the output channels): the image row
    before the taps upcast by UPCAST: each weight serves the row's lanes, each gradient vector the tap's;
  - the weight gradient (a reduce over batch and image): the output channels upcast by UPCAST and the image's innermost reduce loop
    unrolled (by UPCAST, or fully when short: a 6x6 image): each input value serves the channels' lanes, each gradient value the
    tap's (benches/README.md, Design measurements).
  None where neither applies."""
  reds, unrolls = ranges_of(ast, AxisType.REDUCE), ranges_of(ast, AxisType.UNROLL)
  tap_loads = [ld for ld in _reduce_loads(ast) if tap in ld.src[0].toposort()]
  if not tap_loads or not (reds or unrolls): return None
  moves_with_tap = set(tap_loads[0].src[0].toposort())
  # the input gradient's products: the loop two before the inner tap (the image's x; the outer tap between) is one the weight, the
  # load that moves with the tap, doesn't move with
  if len(loops) >= 3 and (x := loops[loops.index(tap) - 2]) not in moves_with_tap and (range_size(x) or 0) % UPCAST == 0:
    ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, tap), 0))[0]
    return apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, x), UPCAST))[0]
  # the weight gradient: the input moves with the tap and with the image's innermost reduce loop (unrolled already where the unroll
  # pass took it, else here)
  inner = unrolls[-1] if unrolls else reds[-1]
  n_in = range_size(inner) or 0
  if not all(inner in ld.src[0].toposort() for ld in tap_loads) or not (unrolls or n_in % UPCAST == 0 or n_in <= MAX_TAP_UNROLL): return None
  if (out := next((r for r in loops if r is not tap and r not in moves_with_tap and (range_size(r) or 0) % UPCAST == 0), None)) is None:
    return None
  ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, tap), 0))[0]
  ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, out), UPCAST))[0]
  if unrolls: return ast
  return apply_opt(ast, Opt(OptOps.UNROLL, opt_axis(ast, OptOps.UNROLL, inner), UPCAST if n_in % UPCAST == 0 else 0))[0]

def tap_tile(ast:UOp, loops:list[UOp]) -> UOp|None:
  """A conv's weight gradient (innermost output loops: the kernel's taps, of at most MAX_TAPS each, which the reduce's gated loads of
  the padded input move with): the innermost one or two tap loops are upcast fully (a 3x3 window: 9 accumulators; with an input-channel
  loop, only the inner tap and the input channels by TAP_IN_CHANNELS), the innermost reduce loop (the image's x) unrolled when it is at
  most MAX_TAP_UNROLL and the unroll pass took none, and the output channels upcast by UPCAST: the lanes share each gradient value
  loaded and overlapping input values. Without gated loads (a conv's input gradient before its taps are summed: one value per pixel and
  tap), the taps and the image row before them (8 or 16, read as vector loads) are upcast fully: each gradient vector serves every tap,
  each weight the row. None if the kernel doesn't qualify."""
  gated = [ld for ld in _reduce_loads(ast) if len(ld.src) > 1]
  taps: list[UOp] = []
  for r in reversed(loops):
    if (range_size(r) or 0) > (MAX_TAPS if gated else MAX_UNPADDED_TAPS) or len(taps) == 2: break
    taps.append(r)
  if taps and not gated and len(loops) > len(taps) and (range_size(x := loops[-len(taps) - 1]) or 0) in TAP_ROWS:
    for r in taps: ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, r), 0))[0]
    up, _, lane = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, x), 0))
    return up if lane is not None and vector_loads(up, lane, in_reduce_only=True) else None
  if taps and not gated: return _unpadded_tap_tile(ast, loops, taps[0])
  if not taps or not all(any(r in ld.src[0].toposort() for ld in gated) for r in taps): return None
  # with an input-channel loop (not a tap, the gated loads move with it) that loop is upcast by TAP_IN_CHANNELS instead of the outer
  # tap loop: its lanes share the gradient's loads without the outer tap's lanes' border selects (a conv with one input channel keeps
  # both taps; benches/README.md, Design measurements)
  in_ch = next((r for r in reversed(loops) if r not in taps and (range_size(r) or 0) % TAP_IN_CHANNELS == 0
                and any(r in ld.src[0].toposort() for ld in gated)), None)
  for r in (taps[:1] if in_ch is not None else taps): ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, r), 0))[0]
  # one reduce loop unrolled: where the unroll pass took none (it takes the image's x when x's loads fit); a second one (the image's
  # y too) made the body 3x longer and the kernel slower
  if not ranges_of(ast, AxisType.UNROLL) and (reds := ranges_of(ast, AxisType.REDUCE)) and (range_size(reds[-1]) or 0) <= MAX_TAP_UNROLL:
    ast = apply_opt(ast, Opt(OptOps.UNROLL, opt_axis(ast, OptOps.UNROLL, reds[-1]), 0))[0]
  # the innermost output loop that no gated load moves with (the output channels) upcast by UPCAST: each input value loaded (a gated
  # scalar) serves that many channels (upcasting the input channels instead, whose lanes share the gradient's vector loads, was
  # slower)
  gated = [ld for ld in _reduce_loads(ast) if len(ld.src) > 1]
  for r in reversed(ranges_of(ast, AxisType.LOOP)):
    if (range_size(r) or 0) % UPCAST == 0 and not any(r in ld.src[0].toposort() for ld in gated):
      ast = apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, r), UPCAST))[0]
      break
  return ast if in_ch is None else apply_opt(ast, Opt(OptOps.UPCAST, opt_axis(ast, OptOps.UPCAST, in_ch), TAP_IN_CHANNELS))[0]

def optimize_ast(ast:UOp, ren:Renderer|None=None) -> UOp:
  """The AST shaped for a renderer's declared capabilities: has_local (GPU dims: hand_coded_gpu, then the output loops become launch
  dims), has_threads (and global_max[0], the thread count), supports_float4. An AST that has opts applied already (a BEAM result, or
  apply_opts) keeps them."""
  if ast.op is not Ops.SINK or ren is None: return ast
  if not NOOPT and not (isinstance(ast.arg, KernelInfo) and ast.arg.applied_opts):
    if ren.has_local: ast = hand_coded_gpu(ast, ren)
    else: ast = hand_coded_optimizations(ast, _threads(ren), ren.supports_float4)
  return globalize(ast) if ren.has_local else ast
