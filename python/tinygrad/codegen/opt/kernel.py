"""Kernel AST optimizations as changes of typed ranges (NOOPT=1 turns them all off).

A kernel's loops are RANGE(end, arg=(axis_id, *split path, AxisType)) nodes. The scheduler makes LOOP ranges for the output and REDUCE
ranges for reductions (and an UNROLL range of 4 inside a long reduce). Every optimization is one `shift_to`: a range r of size N
becomes an outer and an inner range, r -> outer*(N/amount) + inner (top: the new range is the outer one, of size amount) or
r -> outer*amount + inner (the new range is the inner one). The ranges keep their order as the dims of the kernel (the inner part of
a split sorts right after its outer part), and the kernel name is read off them: "r_" (a reduce) or "E_", then the sizes in that
order (a split of the range with path p makes p+(0,) and p+(1,)). An optimization is data, Opt(op, axis, arg): `apply_opt` does
it (axis: the position among the ranges in that order) and records it in KernelInfo.opts; a search (BEAM) can enumerate Opts.
The renderer's capabilities decide what is tried: has_threads and global_max[0] (the launches), supports_float4 (upcasts).

Range kinds after optimizing:
  THREAD   the outermost output range split over the cores: the kernel is launched n times in parallel, each launch writes its own
           slice; codegen lowers it to SPECIAL(n, "core_id"), the launch index (tinygrad/renderer/__init__.py).
  LOOP     a loop over outputs; REDUCE a loop over reduced elements.
  UPCAST   output lanes computed by one loop iteration; UNROLL reduced lanes combined before the accumulator. codegen/expander.py
           turns both into their lanes: vector loads/stores where the lane addresses are consecutive, one accumulator per output lane.
"""
from __future__ import annotations
from collections import Counter
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from tinygrad.schedule import KernelInfo
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError

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

_OPT_SPLIT = {OptOps.THREAD: ((AxisType.LOOP,), AxisType.THREAD, True), OptOps.UPCAST: ((AxisType.LOOP,), AxisType.UPCAST, False),
              OptOps.UNROLL: ((AxisType.REDUCE,), AxisType.UNROLL, False)}

def apply_opt(ast:UOp, opt:Opt, ren=None) -> tuple[UOp, UOp|None, UOp|None]:
  """ast with opt applied (recorded in its KernelInfo, whose name is read off the new ranges), and the outer and inner ranges of the
  split. `ren` (the target Renderer, if known) decides which opts its device can run. KernelOptError if opt can't apply."""
  rngs = ranges_of(ast)
  if opt.op not in _OPT_SPLIT: raise KernelOptError(f"{opt}: {opt.op} is not supported yet")
  if opt.axis is None or not 0 <= opt.axis < len(rngs): raise KernelOptError(f"{opt}: the kernel has {len(rngs)} ranges")
  kinds, new_type, top = _OPT_SPLIT[opt.op]
  if rtype(rng := rngs[opt.axis]) not in kinds: raise KernelOptError(f"{opt}: range {rng.arg} is not one of {kinds}")
  amount = opt.arg or range_size(rng) or 0
  ret, outer, inner = shift_to(ast, rng, amount, new_type, top)
  return ret.replace(arg=KernelInfo(kernel_name(ret), (ast.arg.opts if isinstance(ast.arg, KernelInfo) else ()) + (opt,))), outer, inner

def swap_loops(ast:UOp, a:UOp, b:UOp) -> UOp:
  """ast with LOOP ranges a and b trading places in the loop nest (each takes the other's position key; sizes and kinds stay), recorded
  as Opt(SWAP, pos(a), pos(b)). The loop order is the order of the range keys, so this is how a kernel gets j-blocks outside i-blocks
  (a matmul's B panel reused from cache by every row block)."""
  rngs = ranges_of(ast)
  if a not in rngs or b not in rngs or a is b or rtype(a) is not AxisType.LOOP or rtype(b) is not AxisType.LOOP:
    raise KernelOptError(f"can't swap ranges {a.arg} and {b.arg}: two different LOOP ranges of the kernel are needed")
  ret = ast.substitute({a: a.replace(arg=(*range_key(b), rtype(a))), b: b.replace(arg=(*range_key(a), rtype(b)))}, name="swap loops")
  opt = Opt(OptOps.SWAP, rngs.index(a), rngs.index(b))
  return ret.replace(arg=KernelInfo(kernel_name(ret), (ast.arg.opts if isinstance(ast.arg, KernelInfo) else ()) + (opt,)))

def apply_opts(ast:UOp, opts, ren=None) -> UOp:
  """ast with each of opts applied in order (what a BEAM worker rebuilds a candidate from); KernelOptError if one can't apply."""
  for opt in opts: ast = apply_opt(ast, opt, ren)[0]
  return ast

# ***** what a lane of a split reads *****

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

