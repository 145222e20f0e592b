"""Grouped reduces (OptOps.GROUP/GROUPTOP, tinygrad/codegen/opt/kernel.py): a reduce split across the threads of a workgroup.

REDUCE(x, *ranges, g) with g a GROUP_REDUCE range (the part of the reduce each thread of the workgroup takes) becomes
  partial = REDUCE(x, *ranges)                       each thread reduces its own part
  STORE(INDEX(temp, tid), partial)                   into a local (workgroup-shared) BUFFER, one slot per thread
  BARRIER                                            every thread's partial is written
  REDUCE(LOAD(INDEX(temp.after(BARRIER), tid[g->g'])), g')  every thread combines the partials over a new REDUCE range g'
where tid is the thread's index in the workgroup (its LOCAL and GROUP_REDUCE ranges, in dim order); then every GROUP_REDUCE range is a
LOCAL range (a thread dim: SPECIAL lidx). Every thread computes the final value (the store of an output writes the same value from each).
The optimizer only groups reduces outside loops (a loop would write the buffer again while others still read it).
"""
from __future__ import annotations
from dataclasses import dataclass
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, AxisType, ParamArg
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import prod
from tinygrad.codegen.opt.kernel import ranges_of, range_key, range_size, rtype

@dataclass
class GroupContext:
  dims: list[UOp]        # the workgroup's thread dims (LOCAL and GROUP_REDUCE ranges), in dim order
  next_axis: int         # a fresh axis id for each new REDUCE range
  bufs: int = 0

def _flat(dims:list[UOp]) -> UOp:
  """The thread's index in the workgroup, dims row-major."""
  idx = UOp.const(0, dims[0].dtype)
  for d in dims: idx = idx * UOp.const(range_size(d) or 1, d.dtype) + d
  return idx

def _group(ctx:GroupContext, red:UOp) -> UOp|None:
  if not (groups := [r for r in red.src[1:] if rtype(r) is AxisType.GROUP_REDUCE]): return None
  rest = tuple(r for r in red.src[1:] if rtype(r) is not AxisType.GROUP_REDUCE)
  partial = red.replace(src=(red.src[0], *rest)) if rest else red.src[0]
  size = UOp.const(prod(range_size(d) or 1 for d in ctx.dims))
  temp = UOp(Ops.BUFFER, red.dtype, (size,), ParamArg(ctx.bufs, red.dtype, addrspace=AddrSpace.LOCAL))
  ctx.bufs += 1
  idx = _flat(ctx.dims)
  barrier = UOp(Ops.BARRIER, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, red.dtype, (temp, idx)), partial)),))
  news = {}
  for g in groups:
    news[g] = UOp(Ops.RANGE, g.dtype, g.src, (ctx.next_axis, AxisType.REDUCE))
    ctx.next_axis += 1
  val = UOp(Ops.LOAD, red.dtype, (UOp(Ops.INDEX, red.dtype, (temp.after(barrier), idx.substitute(news))),))
  return UOp(Ops.REDUCE, red.dtype, (val, *news.values()), red.arg)

# ctx: GroupContext (the workgroup's dims, made once for the kernel)
pm_group_reduce = PatternMatcher([(UPat(Ops.REDUCE, name="red"), _group)])
pm_group_to_local = PatternMatcher([(UPat(Ops.RANGE, name="r"), lambda r: r.replace(arg=(*range_key(r), AxisType.LOCAL))
                                     if rtype(r) is AxisType.GROUP_REDUCE else None)])

def group_context(sink:UOp, ren=None) -> GroupContext:
  rngs = ranges_of(sink)
  return GroupContext([r for r in rngs if rtype(r) in (AxisType.LOCAL, AxisType.GROUP_REDUCE)], max((r.arg[0] for r in rngs), default=-1) + 1)
