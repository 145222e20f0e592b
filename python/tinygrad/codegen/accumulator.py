"""Accumulators: REDUCE(x, *ranges, arg=(op,)) -> a register accumulator slot i:
  acc = BUFFER(REG); STORE(INDEX(AFTER(acc, *loop ranges), i), identity)
  in the loop: STORE(INDEX(AFTER(acc, init, *reduce ranges), i), op(LOAD(that), x)), closed by END per range
  the value: LOAD(INDEX(AFTER(acc, END), i))
REDUCEs over the same ranges (an upcast reduce kernel's lanes) share the loop: their updates are one GROUP.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, ParamArg, identity_element
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.uop.spec import mem_root, addrspace_of, vector_width
from tinygrad.codegen.opt.kernel import open_ranges
from tinygrad.codegen.end_loops import loop_ranges

def iconst(v:int) -> UOp: return UOp.const(v)   # weakint: pm_lower_index gives it a width

def combine(op:Ops, a:UOp, b:UOp) -> UOp:
  if a.dtype is dtypes.bool: op = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND}.get(op, Ops.OR)
  return UOp(op, a.dtype, (a, b))

def _acc_slot(red:UOp, acc:UOp, i:int) -> UOp:
  """The accumulator element (or, for a vector reduce, the lanes) that `red` sums into."""
  if (n := vector_width(red.src[0])) == 1: return UOp(Ops.INDEX, red.dtype, (acc, iconst(i)))
  return UOp(Ops.SHRINK, red.dtype, (acc, iconst(i), UOp.const(n, dtypes.int)))

def _acc_init(red:UOp) -> UOp:
  init = UOp.const(identity_element(red.arg[0], red.dtype), red.dtype)
  return init if (n := vector_width(red.src[0])) == 1 else UOp(Ops.STACK, red.dtype, (init,) * n)

@dataclass
class ReduceContext:
  loop_ranges: list[UOp]                      # the kernel's LOOP ranges, outermost first
  groups: dict[tuple[UOp, ...], list[UOp]]    # REDUCEs by their ranges, in graph order: the REDUCEs over the same ranges share one loop
  store_loops: dict[UOp, list[UOp]]           # a REDUCE -> the LOOP ranges of its store (its accumulator starts again in each iteration)
  first_acc: dict[tuple[UOp, ...], int]       # the number of a group's first accumulator
  lowered: dict[UOp, UOp] = field(default_factory=dict)   # a REDUCE -> the load of its accumulator, once its group's loop is built

def reduce_context(sink:UOp, ren=None) -> ReduceContext:
  # which REDUCEs share a loop and which loops hold each one's store: what the REDUCE rule needs to know about the whole kernel
  groups: dict[tuple[UOp, ...], list[UOp]] = {}
  for u in (topo := sink.toposort()):
    if u.op is Ops.REDUCE: groups.setdefault(u.src[1:], []).append(u)
  loops = loop_ranges(sink) if groups else []
  store_loops: dict[UOp, list[UOp]] = {}
  for st in [u for u in topo if u.op is Ops.STORE] if groups else []:
    topo = set(st.toposort())
    store_loops.update({red: [r for r in loops if r in topo] for red in topo if red.op is Ops.REDUCE})
  first_acc, n = {}, 0
  for ranges, reds in groups.items():
    first_acc[ranges] = n
    n += len({red.dtype for red in reds})
  return ReduceContext(loops, groups, store_loops, first_acc)

def _lower_group(ctx:ReduceContext, ranges:tuple[UOp, ...]) -> None:
  """The loop of the REDUCEs over `ranges`: each its own accumulator slot, one accumulator per dtype, their updates in one loop body."""
  reds = ctx.groups[ranges]
  accs: dict = {}
  for red in reds: accs.setdefault(red.dtype, []).append(red)
  slots: dict[UOp, tuple[UOp, int]] = {}
  for n, (dt, rs) in enumerate(accs.items(), start=ctx.first_acc[ranges]):
    offs = [0]
    for red in rs: offs.append(offs[-1] + vector_width(red.src[0]))
    acc = UOp(Ops.BUFFER, dt, (iconst(offs[-1]),), ParamArg(n, dt, addrspace=AddrSpace.REG))
    for i, red in zip(offs, rs): slots[red] = (acc, i)
  # a reduce nested in another's loop (a staged sum: tinygrad/schedule/rangeify.py) starts again in each iteration of the outer one
  outer = [r for r in open_ranges(reds[0].src[0]) if r not in ranges and r not in ctx.loop_ranges]
  loops = ctx.store_loops.get(reds[0], ctx.loop_ranges)
  inits = {red: UOp(Ops.STORE, dtypes.void, (_acc_slot(red, acc.after(*loops, *outer), i), _acc_init(red))) for red, (acc, i) in slots.items()}
  bodies = []
  for red in reds:
    acc, i = slots[red]
    idx = _acc_slot(red, acc.after(inits[red], *ranges), i)
    bodies.append(UOp(Ops.STORE, dtypes.void, (idx, combine(red.arg[0], UOp(Ops.LOAD, red.dtype, (idx,)), red.src[0]))))
  body = bodies[0] if len(bodies) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(bodies))
  for r in reversed(ranges): body = UOp(Ops.END, dtypes.void, (body, r))
  for red in reds:
    acc, i = slots[red]
    ctx.lowered[red] = UOp(Ops.LOAD, red.dtype, (_acc_slot(red, acc.after(body), i),))

def _reduce_to_acc(ctx:ReduceContext, red:UOp) -> UOp|None:
  if red not in ctx.lowered and red.src[1:] in ctx.groups: _lower_group(ctx, red.src[1:])
  return ctx.lowered.get(red)

def _lane_of_acc(sh:UOp, j:UOp) -> UOp|None:
  if addrspace_of(mem_root(sh.src[0])) is not AddrSpace.REG: return None
  return UOp(Ops.LOAD, sh.dtype, (UOp(Ops.INDEX, sh.dtype, (sh.src[0], iconst(sh.src[1].arg + j.arg))),))

# bottom up: a REDUCE is met as the kernel has it (a nested REDUCE is lowered inside the loop body its outer one was built with). A lane of
# a vector accumulator after its loop (its lanes summed) is read as that element of the accumulator: acc0[4], not a named copy of the
# vector and v[0]
pm_reduce = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _reduce_to_acc),
  (UPat(Ops.INDEX, src=(UPat(Ops.LOAD, src=(UPat(Ops.SHRINK, src=(UPat(), UPat.cvar(), UPat()), name="sh"),)), UPat.cvar("j"))), _lane_of_acc),
])
