"""Kernel AST optimizations as changes of typed ranges (NOOPT=1 turns them all off).

A kernel's loops are RANGE(end, arg=(axis_id, *split path, AxisType)) nodes. The scheduler makes LOOP ranges for the output and REDUCE
ranges for reductions (and an UNROLL range of 4 inside a long reduce). Most optimizations are one `shift_to`: a range r of size N
becomes an outer and an inner range, r -> outer*(N/amount) + inner (top: the new range is the outer one, of size amount) or
r -> outer*amount + inner (the new range is the inner one). The ranges keep their order as the dims of the kernel (the inner part of
a split sorts right after its outer part), and the kernel name is read off them: "r_" (a reduce) or "E_", then the sizes in that
order (a split of the range with path p makes p+(0,) and p+(1,)). An optimization is data, Opt(op, axis, arg): `apply_opt` does
it and records it in KernelInfo.applied_opts; a search (BEAM) enumerates Opts and skips those that raise KernelOptError. `axis` counts the
ranges as tinygrad 0.14 does (opt_ranges: by kind, then in dim order; UNROLL counts the reduce ranges, GROUP/GROUPTOP the REDUCE ones).

The ops (the renderer's capabilities decide which its device can run: has_threads/global_max, has_local/local_max, has_shared/shared_max):
  THREAD   LOOP -> THREAD (outer): the kernel is launched n times in parallel on CPU cores, each writes its own slice; codegen lowers it
           to SPECIAL(n, "core_id"), the launch index (tinygrad/renderer/__init__.py).
  UPCAST   LOOP/GLOBAL/LOCAL -> UPCAST (inner): output lanes one iteration computes. UNROLL  REDUCE/GROUP_REDUCE -> UNROLL (inner):
           reduced lanes combined before the accumulator. codegen/expander.py turns both into their lanes: vector loads/stores where
           the lane addresses are consecutive, one accumulator per output lane.
  LOCAL    LOOP/GLOBAL -> LOCAL (inner): a thread dim of the workgroup (SPECIAL lidx). On a device with GPU dims the output LOOP ranges
           left become GLOBAL (launch dims gidx, `globalize`, innermost 3).
  GROUP    REDUCE -> GROUP_REDUCE (inner; GROUPTOP: outer): the reduce split over threads of the workgroup, partial results combined
           through local memory after a barrier (codegen/group_reduce.py).
  NOLOCALS no LOCAL/GROUP may follow. PADTO  a range counts to a multiple of arg, the extra positions masked (loads and stores gated,
           a reduce gets its identity). SWAP  two LOOP (or two GLOBAL) ranges exchange positions: the nesting of two loops on CPU,
           which launch dim is which on a GPU. TC  tensor cores (Renderer.tensor_cores): the reduce of a matmul becomes a warp's
           matrix instruction, a LOCAL warp range and UPCAST ranges for its output elements (codegen/opt/tc.py); the first opt.
  PACK     (not in tinygrad 0.14; devices without GPU dims) Opt(PACK, axis, arg): in each iteration of LOOP range `axis`, the panel a
           load reads (arg: which of pack_candidates) is first copied into a contiguous array (a REG BUFFER: the launch's stack), in
           the order of its address strides, and the reduce reads it from there: a matmul's B columns block, whose rows are a row of B
           apart in memory (a new page per reduce step, cache sets aliasing), becomes K consecutive short rows. The last opt of a kernel.
  CHAIN    (not in tinygrad 0.14; a renderer with fused_mulacc) Opt(CHAIN): changes no range; an accumulator update acc + (a sum of
           products: the UNROLL lanes' tree) becomes a chain of MULACCs, acc = fma(a_n, b_n, ... fma(a_0, b_0, acc)), one rounding per
           product (not the tree's order: other bits than without it, the same on every fused_mulacc device; codegen pm_fuse_mulacc).
"""
from __future__ import annotations
import functools
from collections import Counter
from dataclasses import replace
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType, ParamArg, KernelInfo
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import prod
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.ranges import rtype, range_key, ranges_of, range_size, opt_ranges, is_warp, range_desc, padto
from tinygrad.codegen.opt.tc import apply_tc
from tinygrad.codegen.decomp import pm_decomp
from tinygrad.schedule import kernel_name
from tinygrad.schedule.knobs import MAX_UPCAST, MAX_UNROLL, MAX_UPCAST_LANES, MAX_UNROLL_LANES, MAX_EXPANDED_OPS, PACK_MAX_BYTES

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

def axes_for(ast:UOp, op:OptOps) -> list[UOp]:
  """The ranges Opt(op, axis) picks from with axis: UNROLL the reduce ranges (REDUCE/GROUP_REDUCE) of a known size > 1, GROUP and
  GROUPTOP the REDUCE ranges, every other op all ranges (opt_ranges)."""
  rngs = opt_ranges(ast)
  if op is OptOps.UNROLL: return [r for r in rngs if rtype(r) in (AxisType.REDUCE, AxisType.GROUP_REDUCE) and (range_size(r) or 0) > 1]
  if op in (OptOps.GROUP, OptOps.GROUPTOP): return [r for r in rngs if rtype(r) is AxisType.REDUCE]
  return rngs

def opt_axis(ast:UOp, op:OptOps, rng:UOp) -> int:
  """The axis that names range rng in an Opt of op (axes_for)."""
  return axes_for(ast, op).index(rng)

# the caps on UPCAST and UNROLL lanes and on the expanded body: schedule/knobs.py
_LANE_KINDS = (AxisType.UPCAST, AxisType.UNROLL)
_NOT_STATEMENTS = {Ops.CONST, Ops.RANGE, Ops.PARAM, Ops.SINK, Ops.NOOP, Ops.GROUP}

@functools.cache
def _decomposed_ops(op:Ops) -> int:
  """The operations the codegen writes for one op of the AST: THREEFRY becomes its 20 rounds of uint32 ops (codegen/decomp.py), every
  other op is one."""
  if op is not Ops.THREEFRY: return 1
  x, key = UOp(Ops.NOOP, dtypes.uint64, arg=0), UOp(Ops.NOOP, dtypes.uint64, arg=1)
  return sum(1 for u in graph_rewrite(UOp(op, dtypes.uint64, (x, key)), pm_decomp).toposort() if u.op not in (Ops.CONST, Ops.NOOP))

def expanded_ops(ast:UOp) -> int:
  """How many operations the kernel's body has once its UPCAST and UNROLL ranges are expanded into lanes: each node counts once per
  combination of the lane ranges in its backward slice (an estimate of the rendered statements; constants and ranges are free, an op the
  codegen decomposes counts its decomposition)."""
  lanes: dict[UOp, frozenset[UOp]] = {}
  total = 0
  for u in ast.toposort():
    mine = frozenset().union(*(lanes[x] for x in u.src))
    if u.op is Ops.RANGE and rtype(u) in _LANE_KINDS: mine = mine | {u}
    if u.op not in _NOT_STATEMENTS: total += prod(range_size(r) or 1 for r in mine) * _decomposed_ops(u.op)
    # a reduce combines its own lanes: what uses its result is copied once per lane left open
    lanes[u] = mine - set(u.src[1:]) if u.op is Ops.REDUCE else mine
  return total

# the splits: op -> (the range kinds it applies to, the kind of the new range, whether the new range is the outer part)
_SPLITS = {OptOps.THREAD: ((AxisType.LOOP,), AxisType.THREAD, True),
           OptOps.UPCAST: ((AxisType.LOOP, AxisType.GLOBAL, AxisType.LOCAL), AxisType.UPCAST, False),
           OptOps.UNROLL: ((AxisType.REDUCE, AxisType.GROUP_REDUCE), AxisType.UNROLL, False),
           OptOps.LOCAL: ((AxisType.LOOP, AxisType.GLOBAL), AxisType.LOCAL, False),
           OptOps.GROUP: ((AxisType.REDUCE,), AxisType.GROUP_REDUCE, False),
           OptOps.GROUPTOP: ((AxisType.REDUCE,), AxisType.GROUP_REDUCE, True)}
_LOCAL_DIMS = (AxisType.LOCAL, AxisType.GROUP_REDUCE)   # the thread dims of a workgroup (each becomes a SPECIAL lidx)
GPU_GLOBAL_DIMS = 3

def apply_opt(ast:UOp, opt:Opt, ren=None) -> tuple[UOp, UOp|None, UOp|None]:
  """ast with opt applied (recorded in its KernelInfo, whose name is read off the new ranges), and the outer and inner ranges of the
  split (None for an op that splits nothing). `ren` (the target Renderer) decides what its device can run; without one, only the
  checks that hold on every device are made. KernelOptError, naming the opt and the reason, if opt can't apply."""
  def need(cond:bool, why:str):
    if not cond: raise KernelOptError(f"{opt}: {why}")
  opts = ast.arg.applied_opts if isinstance(ast.arg, KernelInfo) else ()
  outer = inner = None
  need(not any(o.op is OptOps.PACK for o in opts), "the kernel is packed (PACK): PACK is the last opt of a kernel")
  if opt.op is OptOps.TC:
    need(isinstance(opt.arg, tuple) and len(opt.arg) == 3, "TC takes arg=(tc_select, tc_opt, use_tensor_cores)")
    need(ren is not None and bool(ren.tensor_cores), f"{ren!r} has no tensor cores")
    need(not opts, "tensor core opts must come first")
    ret, outer, inner = apply_tc(ast, opt, ren, need)
  elif opt.op is OptOps.CHAIN:
    need(ren is None or ren.fused_mulacc, f"{ren!r} has no fused multiply-add (fused_mulacc=False)")
    need(not any(o.op is OptOps.CHAIN for o in opts), "CHAIN was applied already")
    need(bool(ranges_of(ast, AxisType.UNROLL)), "the kernel has no UNROLL lanes to chain")
    ret = ast
  elif opt.op is OptOps.NOLOCALS:
    need(not any(o.op is OptOps.NOLOCALS for o in opts), "NOLOCALS was applied already")
    need(not ranges_of(ast, *_LOCAL_DIMS), "the kernel has LOCAL/GROUP_REDUCE ranges already")
    ret = ast
  else:
    cands = axes_for(ast, opt.op)
    what = {OptOps.UNROLL: "reduce ranges of size > 1", OptOps.GROUP: "REDUCE ranges", OptOps.GROUPTOP: "REDUCE ranges"}.get(opt.op, "ranges")
    need(type(opt.axis) is int and 0 <= opt.axis < len(cands), f"axis {opt.axis} is out of range: the kernel has {len(cands)} {what} "
         f"({', '.join(range_desc(r) for r in cands) or 'none'})")
    rng = cands[opt.axis]  # type: ignore[index]
    if opt.op in _SPLITS: ret, outer, inner = _split(ast, opt, rng, ren, need, opts)
    elif opt.op is OptOps.PADTO: ret = padto(ast, opt, rng, need)
    elif opt.op is OptOps.SWAP: ret = _swap(ast, opt, rng, cands, need)
    elif opt.op is OptOps.PACK: ret = _pack(ast, opt, rng, ren, need)
    else: raise KernelOptError(f"{opt}: unknown op {opt.op}")
  _check_limits(ret, ren, need)
  # only the ops that add lanes are held to the code-size budget: a kernel the scheduler made longer than it keeps its other opts
  if opt.op in (OptOps.UPCAST, OptOps.UNROLL):
    need((n := expanded_ops(ret)) <= MAX_EXPANDED_OPS, f"the body expands to {n} operations, more than {MAX_EXPANDED_OPS}")
  info = ast.arg if isinstance(ast.arg, KernelInfo) else KernelInfo()
  # an automatic name (KernelInfo's default, or one listing the loop sizes) follows the new loops; a name a user gave is kept, as in 0.14
  name = kernel_name(ret) if info.name == KernelInfo.name or info.name.startswith(("r_", "E_")) else info.name
  return ret.replace(arg=replace(info, name=name, applied_opts=opts + (opt,))), outer, inner

def _split(ast:UOp, opt:Opt, rng:UOp, ren, need, opts:tuple) -> tuple[UOp, UOp|None, UOp|None]:
  kinds, new_type, top = _SPLITS[opt.op]
  need(not is_warp(rng), f"{range_desc(rng)} is a tensor core's warp: its threads are the instruction's")
  need(opt.op not in (OptOps.GROUP, OptOps.GROUPTOP) or not any(o.op is OptOps.TC for o in opts), "no GROUP with tensor cores: the "
       "instruction's accumulators are per thread")
  need(rtype(rng) in kinds, f"{range_desc(rng)}: {opt.op.name} applies to {'/'.join(k.name for k in kinds)} ranges")
  need((size := range_size(rng)) is not None, f"{range_desc(rng)}: a symbolic size can't be split")
  amount = size if opt.arg == 0 else opt.arg
  need(type(amount) is int and amount >= 2, f"the amount must be an int >= 2 (0: the whole range), got {opt.arg!r}")
  need(size % amount == 0, f"{amount} does not divide the size {size} of the {range_desc(rng)}")
  present = {rtype(r) for r in ranges_of(ast)}
  if opt.op in (OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP):
    need(ren is None or ren.has_local, f"{ren!r} has no local dims (has_local=False)")
    need(not any(o.op is OptOps.NOLOCALS for o in opts), "NOLOCALS was applied: the kernel may not use local dims")
    need(AxisType.THREAD not in present, "the kernel is threaded (THREAD): CPU threads and GPU dims don't mix")
  if opt.op in (OptOps.GROUP, OptOps.GROUPTOP):
    need(ren is None or ren.has_shared, f"{ren!r} has no shared memory (has_shared=False) for the partial results")
  if opt.op is OptOps.THREAD:
    need(ren is None or ren.has_threads, f"{ren!r} has no CPU threads (has_threads=False)")
    need(AxisType.THREAD not in present, "the kernel is threaded already")
    need(not present & {AxisType.GLOBAL, *_LOCAL_DIMS}, "the kernel has GPU dims (GLOBAL/LOCAL/GROUP_REDUCE): CPU threads and GPU dims don't mix")
    need(ren is None or not ren.global_max or amount <= ren.global_max[0], f"{amount} threads, the device has {ren.global_max[0] if ren else 0}")
  if opt.op is OptOps.UPCAST: need(amount <= MAX_UPCAST, f"an upcast of {amount} lanes, more than {MAX_UPCAST}")
  if opt.op is OptOps.UNROLL: need(amount <= MAX_UNROLL, f"an unroll of {amount} lanes, more than {MAX_UNROLL}")
  return shift_to(ast, rng, amount, new_type, top)

def _swap(ast:UOp, opt:Opt, rng:UOp, cands:list[UOp], need) -> UOp:
  """Exchanges the positions (axis ids) of two output ranges of one kind: on CPU the nesting of two loops, on a GPU which launch dim
  is which."""
  need(type(opt.arg) is int and 0 <= opt.arg < len(cands) and opt.arg != opt.axis, f"arg must be the axis of another range, got {opt.arg!r}")
  other = cands[opt.arg]  # type: ignore[index]
  need(rtype(rng) is rtype(other) and rtype(rng) in (AxisType.LOOP, AxisType.GLOBAL), f"SWAP exchanges two LOOP or two GLOBAL ranges, not a "
       f"{range_desc(rng)} and a {range_desc(other)}")
  # tagged first: with equal sizes a swapped range would be the other range itself (the substitution would go round in a cycle)
  a, b = rng.replace(arg=(*range_key(other), rtype(rng)), tag="swap"), other.replace(arg=(*range_key(rng), rtype(other)), tag="swap")
  ret = ast.substitute({rng: a, other: b}, name="swap")
  return ret.substitute({a: a.replace(tag=None), b: b.replace(tag=None)}, name="swap untag")

_PANEL_KINDS = (AxisType.REDUCE, AxisType.UNROLL, AxisType.UPCAST)

def pack_candidates(ast:UOp, rng:UOp) -> list[UOp]:
  """The loads Opt(PACK) in LOOP range rng can copy, in buffer slot order: ungated loads of a global buffer inside a reduce whose
  address moves with a reduce range and depends on no output loop nested inside rng, so one iteration of rng reads one panel."""
  inner = {r for r in ranges_of(ast, AxisType.LOOP) if range_key(r) > range_key(rng)}
  topo = ast.toposort()
  ret = []
  for ld in dict.fromkeys(x for red in topo if red.op is Ops.REDUCE for x in red.src[0].toposort()):
    if ld.op is not Ops.LOAD or len(ld.src) != 1 or ld.src[0].op is not Ops.INDEX or ld.src[0].src[0].op is not Ops.PARAM: continue
    rngs = {r for r in ld.src[0].src[1].toposort() if r.op is Ops.RANGE}
    if rngs & inner or not any(rtype(r) in (AxisType.REDUCE, AxisType.UNROLL) for r in rngs): continue
    if any(rtype(r) not in (*_PANEL_KINDS, AxisType.LOOP, AxisType.THREAD) for r in rngs): continue
    ret.append(ld)
  return sorted(ret, key=lambda ld: ld.src[0].src[0].arg.slot)

def _strides(idx:UOp, rngs:list[UOp], mid:bool=False) -> list[int|None]:
  """How far idx moves when each of rngs steps by one (the others and every other range at 0, or with `mid` at the middle of its
  range: clear of a padding's border, where a padded view's index may wrap): None where that isn't a constant."""
  zero = {r: UOp.const((range_size(r) or 0) // 2 if mid else 0, r.dtype) for r in idx.toposort() if r.op is Ops.RANGE}
  pts = [idx.substitute(zero)] + [idx.substitute({**zero, r: zero[r] + 1 if r in zero else UOp.const(1, r.dtype)}) for r in rngs]
  vals = [u.arg if u.op is Ops.CONST else None for u in graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(pts)), symbolic, name="strides").src]
  return [None if v is None or vals[0] is None else v - vals[0] for v in vals[1:]]

def _pack(ast:UOp, opt:Opt, rng:UOp, ren, need) -> UOp:
  """In each iteration of LOOP range rng: a loop nest over the panel's ranges (fresh REDUCE ranges, the largest address stride
  outermost) copies the load's elements into a BUFFER(REG) in that order, and the load reads the buffer (after the copy) instead."""
  need(ren is None or not ren.has_local, f"{ren!r} has GPU dims: PACK copies into a thread's own memory, for CPU threads")
  need(rtype(rng) is AxisType.LOOP, f"{range_desc(rng)}: PACK copies a panel in each iteration of a LOOP range")
  cands = pack_candidates(ast, rng)
  need(type(opt.arg) is int and 0 <= opt.arg < len(cands), f"arg {opt.arg!r} names none of the {len(cands)} loads that can be packed "
       f"in the {range_desc(rng)} (ungated loads in a reduce that no loop nested inside it moves)")
  ld = cands[opt.arg]  # type: ignore[index]
  idx = ld.src[0].src[1]
  panel = [r for r in ranges_of(idx) if rtype(r) in _PANEL_KINDS]
  need(all(range_size(r) is not None for r in panel), "a panel of symbolic size can't be packed")
  n = prod(range_size(r) or 1 for r in panel)
  need(n * ld.dtype.itemsize <= PACK_MAX_BYTES, f"a panel of {n * ld.dtype.itemsize} bytes, more than {PACK_MAX_BYTES}")
  strides = _strides(idx, panel)
  # the largest stride outermost, but the UPCAST lanes innermost: they are read together, as one vector (x @ w.T's panel of w, whose
  # lanes are rows of w, is transposed; a @ b's panel of B already has its lanes at stride 1)
  order = [r for _, r in sorted(zip(strides, panel), key=lambda x: (rtype(x[1]) is AxisType.UPCAST, -abs(x[0])))] \
    if None not in strides else panel  # type: ignore
  nxt = max(r.arg[0] for r in ranges_of(ast)) + 1
  copy = {r: UOp(Ops.RANGE, r.dtype, r.src, (nxt + i, AxisType.REDUCE)) for i, r in enumerate(order)}
  def flat(rs:list[UOp]) -> UOp:
    ret = UOp.const(0, rs[0].dtype)
    for r in rs: ret = ret * UOp.const(range_size(r) or 1, r.dtype) + r
    return ret
  slot = sum(1 for u in ast.toposort() if u.op is Ops.BUFFER)
  buf = UOp(Ops.BUFFER, ld.dtype, (UOp.const(n),), ParamArg(slot, ld.dtype, name="pack", addrspace=AddrSpace.REG))
  src = UOp(Ops.LOAD, ld.dtype, (UOp(Ops.INDEX, ld.dtype, (ld.src[0].src[0], idx.substitute(copy))),))
  body = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, ld.dtype, (buf, flat(list(copy.values())))), src))
  for r in reversed(list(copy.values())): body = UOp(Ops.END, dtypes.void, (body, r))
  return ast.substitute({ld: UOp(Ops.LOAD, ld.dtype, (UOp(Ops.INDEX, ld.dtype, (buf.after(body), flat(order))),))}, name="pack")

def kept_loops(ast:UOp) -> list[UOp]:
  """The output LOOP ranges that stay loops on a GPU: globalize launches the innermost GPU_GLOBAL_DIMS of them."""
  return (loops := ranges_of(ast, AxisType.LOOP))[:max(len(loops) - GPU_GLOBAL_DIMS, 0)]

def globalize(ast:UOp) -> UOp:
  """For a device with GPU dims: the innermost (up to 3) output LOOP ranges become GLOBAL ranges (launch dims gidx), the others stay
  loops in every thread."""
  # a threaded kernel (THREAD: core_id launches) can't have GPU dims too
  if not (loops := ranges_of(ast, AxisType.LOOP)[-GPU_GLOBAL_DIMS:]) or ranges_of(ast, AxisType.THREAD): return ast
  return ast.substitute({r: r.replace(arg=(*range_key(r), AxisType.GLOBAL)) for r in loops}, name="globalize")

def grouped_reduces(ast:UOp) -> list[UOp]: return [u for u in ast.toposort() if u.op is Ops.REDUCE and
                                                   any(rtype(r) is AxisType.GROUP_REDUCE for r in u.src[1:])]

def _check_limits(ast:UOp, ren, need):
  """What must hold of the whole kernel after any opt: the lanes, the workgroup's dims and size, its shared memory, and where the
  grouped reduces sit."""
  rngs = ranges_of(ast)
  lanes = prod(range_size(r) or 1 for r in rngs if rtype(r) is AxisType.UPCAST)
  need(lanes <= MAX_UPCAST_LANES, f"{lanes} UPCAST lanes in all, more than {MAX_UPCAST_LANES}")
  # unrolled lanes count per reduce: each reduce combines its own
  lanes = max([prod(range_size(r) or 1 for r in red.src[1:] if rtype(r) is AxisType.UNROLL) for red in ast.toposort() if red.op is Ops.REDUCE],
              default=1)
  need(lanes <= MAX_UNROLL_LANES, f"a reduce of {lanes} UNROLL lanes, more than {MAX_UNROLL_LANES}")
  local_dims = [r for r in rngs if rtype(r) in _LOCAL_DIMS]
  need(len(local_dims) <= 3, f"{len(local_dims)} local dims (LOCAL/GROUP_REDUCE ranges), a workgroup has 3")
  wg = prod(range_size(r) or 1 for r in local_dims)
  if ren is not None and ren.local_max:
    for r, mx in zip(local_dims, ren.local_max): need((range_size(r) or 1) <= mx, f"the local {range_desc(r)} is over the device's {mx}")
    need(wg <= max(ren.local_max), f"a workgroup of {wg} threads, more than the device's {max(ren.local_max)}")
  smem, loops = 0, set(kept_loops(ast))
  for red in grouped_reduces(ast):
    # one slot per thread of the workgroup for each lane of the reduce (every UPCAST lane is a reduce of its own)
    smem += wg * prod(range_size(r) or 1 for r in red.toposort() if r.op is Ops.RANGE and rtype(r) is AxisType.UPCAST) * red.dtype.itemsize
    # a loop around the grouped reduce would reuse its shared buffer while other threads still read it
    inside = [r for r in open_ranges(red) if rtype(r) in (AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP_REDUCE) or r in loops]
    need(not inside, f"a grouped reduce can't be inside a loop ({', '.join(range_desc(r) for r in inside)})")
  if ren is not None: need(smem <= ren.shared_max, f"{smem} bytes of shared memory, more than the device's {ren.shared_max}")

def open_ranges(x:UOp) -> list[UOp]:
  """The RANGEs x depends on that no REDUCE or END inside x (x included) closes."""
  topo = x.toposort()
  closed = {r for u in topo if u.op is Ops.REDUCE for r in u.src[1:]} | {u.src[1] for u in topo if u.op is Ops.END}
  return [u for u in topo if u.op is Ops.RANGE and u not in closed]

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

def vector_loads(ast:UOp, lane:UOp, in_reduce_only:bool=False, gated:bool=False, packed:bool=False) -> list[UOp]:
  """The loads (ungated, of a vector dtype) whose lanes over UPCAST range `lane` are consecutive: the expander makes each one load.
  `gated`: gated loads too (those whose gates codegen/split_ranges.py folds away in a piece of the kernel). `packed`: half/bfloat16
  loads too (a renderer that stores them as their bits and converts each lane: Renderer.packed_vector_loads)."""
  if range_size(lane) not in (2, 4, 8, 16): return []  # the vector widths of the renderer contract
  topo = ast.toposort()
  cands = [u for u in topo if u.op is Ops.LOAD and (len(u.src) == 1 or gated) and u.src[0].op is Ops.INDEX and
           (_vector_ok(u.dtype) or (packed and u.dtype in (dtypes.half, dtypes.bfloat16))) and
           lane in u.src[0].src[1].toposort()]
  if in_reduce_only:
    inside = {x for red in topo if red.op is Ops.REDUCE for x in red.src[0].toposort()}
    cands = [u for u in cands if u in inside]
  return [ld for ld, ok in zip(cands, _consecutive([ld.src[0].src[1] for ld in cands], lane)) if ok]

