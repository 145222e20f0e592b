"""Kernel AST optimizations as changes of typed ranges (NOOPT=1 turns them all off).

A kernel's loops are RANGE(end, arg=(axis_id, *split path, AxisType)) nodes. The scheduler makes LOOP ranges for the output and REDUCE
ranges for reductions (and an UNROLL range of 4 inside a long reduce). Every optimization is one `shift_to`: a range r of size N
becomes an outer and an inner range, r -> outer*(N/amount) + inner (top: the new range is the outer one, of size amount) or
r -> outer*amount + inner (the new range is the inner one). The ranges keep their order as the dims of the kernel (the inner part of
a split sorts right after its outer part), and the kernel name is read off them: "r_" (a reduce) or "E_", then the sizes in that
order (a split of the range with path p makes p+(0,) and p+(1,)). An optimization is data, Opt(op, axis, amount): `apply_opt` does
it (axis: the position among the ranges in that order) and records it in KernelInfo.opts; a search (BEAM) can enumerate Opts.
The renderer's capabilities decide what is tried: has_threads and global_max[0] (the launches), supports_float4 (upcasts).

Range kinds after optimizing:
  THREAD   the outermost output range split over the cores: the kernel is launched n times in parallel, each launch writes its own
           slice; codegen lowers it to SPECIAL(n, "core_id"), the launch index (tinygrad/renderer/__init__.py).
  LOOP     a loop over outputs; REDUCE a loop over reduced elements.
  UPCAST   output lanes computed by one loop iteration; UNROLL reduced lanes combined before the accumulator. codegen/expander.py
           turns both into their lanes: vector loads/stores where the lane addresses are consecutive, one accumulator per output lane.

The heuristics (`hand_coded_optimizations`), in order:
  thread   split the outermost output loop of a kernel with enough work over the machine's cores (E_16777216 -> E_2_8388608).
  unroll   a small reduce loop (trip count times the loads of its body at most UNROLL_MAX_LOADS) becomes an UNROLL range: straight-line
           code, its lanes combined as a tree (a REDUCE left with no range is just that value).
  upcast   the innermost output loop of size N, N % 4 == 0, gets an UPCAST range of 4: E_100 -> E_25_4. A reduce kernel keeps it only
           when a load inside its reduce becomes a vector load (a matmul's B row; not x.sum(axis=1), whose lanes read 4 rows).
  upcast_outer  then, in an upcast reduce kernel, the next output loop too when a load in the reduce does not depend on it (a matmul's
           B vector load serves 4 rows: 16 accumulators, r_64_16_4_16_4 -> r_16_4_16_4_16_4); with a single output loop
           (x.sum(axis=0)) that loop again: 16 consecutive outputs, each reduce step reads a 64-byte line of a row.
"""
from __future__ import annotations
from collections import Counter
from dataclasses import dataclass
from enum import Enum, auto
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from tinygrad.helpers import NOOPT, prod
from tinygrad.schedule import KernelInfo
from tinygrad.renderer import Renderer

THREAD_MIN_WORK = 1 << 16     # elements of work (output elements times reduce trip count) before a kernel is threaded
THREAD_MAX = 32               # at most this many launches
UPCAST = 4
UNROLL_MAX_LOADS = 32         # a reduce loop is unrolled when its trip count times the loads in its body is at most this

# ***** ranges *****

def rtype(r:UOp) -> AxisType: return r.arg[-1]
def range_key(r:UOp) -> tuple[int, ...]:
  """The position of a range among the kernel's dims: its arg without the AxisType, (axis_id, *split path). A split of the range
  with path p makes the parts p+(0,) (outer) and p+(1,) (inner), so they sort where the range was, outer first."""
  return r.arg[:-1]

def ranges_of(ast:UOp, *kinds:AxisType) -> list[UOp]:
  """The RANGEs of an AST (of the given kinds, all without any) in dim order."""
  return sorted([u for u in ast.toposort() if u.op is Ops.RANGE and (not kinds or rtype(u) in kinds)], key=range_key)

def range_size(r:UOp) -> int|None: return r.src[0].arg if r.src[0].op is Ops.CONST else None

def kernel_name(ast:UOp) -> str:
  """"r_" (a reduce kernel) or "E_", then the sizes of the ranges in dim order ("E_1" without any)."""
  rngs = ranges_of(ast)
  kind = "r" if any(rtype(r) in (AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP_REDUCE) for r in rngs) else "E"
  sizes = [str(s) if (s := range_size(r)) is not None else r.src[0].render() for r in rngs]
  return "_".join([kind] + (sizes or ["1"]))

def _fix_reduce(red:UOp) -> UOp|None:
  # a split range inside REDUCE's range list becomes its parts (a part of size 1 is a constant: gone)
  if all(s.op is Ops.RANGE for s in red.src[1:]): return None
  rngs = [x for s in red.src[1:] for x in sorted([u for u in s.toposort() if u.op is Ops.RANGE], key=range_key)]
  return red.replace(src=(red.src[0], *dict.fromkeys(rngs))) if rngs else red.src[0]

pm_reduce_ranges = PatternMatcher([(UPat(Ops.REDUCE, name="red"), _fix_reduce)])

def shift_to(ast:UOp, rng:UOp, amount:int, new_type:AxisType, top:bool=False) -> tuple[UOp, UOp|None, UOp|None]:
  """Splits RANGE rng (size N, N % amount == 0) into a range of `amount` of kind new_type and one of N/amount keeping rng's kind:
  the new one is the inner part (rng -> outer*amount + new), or the outer with top (rng -> new*(N/amount) + inner). A part of size 1
  is the constant 0. Returns (ast, the outer range, the inner range)."""
  if (n := range_size(rng)) is None or amount < 1 or n % amount != 0:
    raise ValueError(f"can't split range {rng.arg} of size {n if n is not None else rng.src[0]} by {amount}")
  # both parts get new args extending rng's path: no arg is a prefix of another, so comparing two args (the symbolic rules order
  # operands by arg) is decided by the ints before the AxisType
  head, old_type = rng.arg[:-1], rtype(rng)
  (o_size, o_type), (i_size, i_type) = ((amount, new_type), (n // amount, old_type)) if top else ((n // amount, old_type), (amount, new_type))
  dt = rng.dtype
  outer = UOp(Ops.RANGE, dt, (UOp.const(o_size, dt),), (*head, 0, o_type)) if o_size > 1 else None
  inner = UOp(Ops.RANGE, dt, (UOp.const(i_size, dt),), (*head, 1, i_type)) if i_size > 1 else None
  expr = (outer if outer is not None else UOp.const(0, dt)) * UOp.const(i_size, dt) + (inner if inner is not None else UOp.const(0, dt))
  ret = graph_rewrite(ast.substitute({rng: expr}, name="shift_to"), pm_reduce_ranges, name="reduce ranges")
  return ret, outer, inner

# ***** the optimizations as data *****

class OptOps(Enum):
  THREAD = auto(); UPCAST = auto(); UNROLL = auto()  # noqa: E702
  def __repr__(self): return str(self)

@dataclass(frozen=True)
class Opt:
  """One optimization: `op` on the range at position `axis` among the kernel's ranges (dim order) by `amount` (0: the whole range)."""
  op: OptOps
  axis: int
  amount: int

_OPT_SPLIT = {OptOps.THREAD: ((AxisType.LOOP,), AxisType.THREAD, True), OptOps.UPCAST: ((AxisType.LOOP,), AxisType.UPCAST, False),
              OptOps.UNROLL: ((AxisType.REDUCE,), AxisType.UNROLL, False)}

def apply_opt(ast:UOp, opt:Opt) -> tuple[UOp, UOp|None, UOp|None]:
  """ast with opt applied (recorded in its KernelInfo, whose name is read off the new ranges), and the outer and inner ranges of the
  split."""
  rngs = ranges_of(ast)
  if not 0 <= opt.axis < len(rngs): raise IndexError(f"{opt}: the kernel has {len(rngs)} ranges")
  kinds, new_type, top = _OPT_SPLIT[opt.op]
  if rtype(rng := rngs[opt.axis]) not in kinds: raise ValueError(f"{opt}: range {rng.arg} is not one of {kinds}")
  amount = opt.amount or range_size(rng) or 0
  ret, outer, inner = shift_to(ast, rng, amount, new_type, top)
  return ret.replace(arg=KernelInfo(kernel_name(ret), (ast.arg.opts if isinstance(ast.arg, KernelInfo) else ()) + (opt,))), outer, inner

# ***** heuristics *****

def _vector_ok(dt) -> bool:
  """Dtypes with 4-lane vector accesses in every renderer (the C renderer has no vectors of bool or of the emulated half types)."""
  return dt is not dtypes.bool and (dtypes.is_int(dt) or dt in (dtypes.float32, dtypes.float64))

def _addends(x:UOp) -> tuple[Counter, int]:
  """x (simplified) as its non-constant addends and the sum of its constant ones: the symbolic rules don't order sums canonically."""
  terms, const, stack = Counter(), 0, [x]
  while stack:
    if (u := stack.pop()).op is Ops.ADD: stack.extend(u.src)
    elif u.op is Ops.CONST: const += u.arg
    else: terms[u] += 1
  return terms, const

def _consecutive(idxs:list[UOp], lane:UOp) -> list[bool]:
  """For each index expression: whether its values at lane = 0, 1, ... are consecutive (one vector access)."""
  n, dt = range_size(lane) or 0, lane.dtype
  lanes = [i.substitute({lane: UOp.const(j, dt)}) for i in idxs for j in range(n)]
  got = [_addends(x) for x in graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(lanes)), symbolic, name="lane offsets").src] if lanes else []
  return [all(got[k*n + j][0] == got[k*n][0] and got[k*n + j][1] - got[k*n][1] == j for j in range(n)) for k in range(len(idxs))]

def vector_loads(ast:UOp, lane:UOp, in_reduce_only:bool=False) -> list[UOp]:
  """The loads (ungated, of a vector dtype) whose lanes over UPCAST range `lane` are consecutive: the expander makes each one load."""
  topo = ast.toposort()
  cands = [u for u in topo if u.op is Ops.LOAD and len(u.src) == 1 and u.src[0].op is Ops.INDEX and _vector_ok(u.dtype) and
           lane in u.src[0].src[1].toposort()]
  if in_reduce_only:
    inside = {x for red in topo if red.op is Ops.REDUCE for x in red.src[0].toposort()}
    cands = [u for u in cands if u in inside]
  return [ld for ld, ok in zip(cands, _consecutive([ld.src[0].src[1] for ld in cands], lane)) if ok]

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

def optimize_ast(ast:UOp, ren:Renderer|None=None) -> UOp:
  """The AST shaped for a renderer's declared capabilities: has_threads (and global_max[0], the thread count), supports_float4."""
  if NOOPT or ast.op is not Ops.SINK or ren is None: return ast
  return hand_coded_optimizations(ast, min(ren.global_max[0], THREAD_MAX) if ren.has_threads and ren.global_max else 1, ren.supports_float4)
