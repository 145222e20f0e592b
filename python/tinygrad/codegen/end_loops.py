"""End loops: each STORE of the kernel's SINK -> END(...END(STORE, innermost LOOP range)..., outermost range). Consecutive stores in the
same loops (an upcast kernel that could not vectorize its store) share them, and the pieces of a split range (codegen/split_ranges.py)
are consecutive loops inside the loops they share: with one store, or all stores in the same loops, this is the GROUP in every loop."""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, AxisType
from tinygrad.dtype import dtypes

def loop_ranges(x:UOp) -> list[UOp]:
  """The LOOP ranges x depends on, outermost first (by axis id, a split's outer part first: tinygrad/codegen/opt/ range_key)."""
  return sorted([u for u in x.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP], key=lambda r: r.arg[:-1])

def kernel_stores(sink:UOp, ren=None) -> frozenset[UOp]:
  """The stores of a kernel's SINK (none when it holds anything else: a hand-written kernel closes its own loops)."""
  return frozenset(sink.src) if sink.op is Ops.SINK and sink.src and all(s.op is Ops.STORE for s in sink.src) else frozenset()

def _close_loops(ctx:frozenset[UOp], st:UOp) -> UOp|None:
  if st not in ctx: return None
  for r in reversed(loop_ranges(st)): st = UOp(Ops.END, dtypes.void, (st, r))
  return st

def _share_loops(xs:tuple[UOp, ...]) -> list[UOp]:
  """xs with consecutive ENDs of one range as one END of a GROUP of their bodies, at every depth."""
  out: list[UOp] = []
  for x in xs:
    if out and x.op is Ops.END and out[-1].op is Ops.END and out[-1].src[1] is x.src[1]:
      body = out[-1].src[0]
      out[-1] = out[-1].replace(src=(UOp(Ops.GROUP, dtypes.void, (*(body.src if body.op is Ops.GROUP else (body,)), x.src[0])), x.src[1]))
    else: out.append(x)
  return [x.replace(src=(inner[0] if len(inner := _share_loops(x.src[0].src)) == 1 else x.src[0].replace(src=tuple(inner)), x.src[1]))
          if x.op is Ops.END and x.src[0].op is Ops.GROUP else x for x in out]

def _share(ctx:frozenset[UOp], sink:UOp) -> UOp|None:
  if not ctx or len(srcs := _share_loops(sink.src)) == len(sink.src): return None
  return sink.replace(src=tuple(srcs))

# ctx: kernel_stores. Run as a walk (one visit per node): a store's replacement holds the store itself
pm_end_loops = PatternMatcher([
  (UPat(Ops.STORE, name="st"), _close_loops),
  (UPat(Ops.SINK, name="sink"), _share),
])

# a store that became several (the pieces of a split range, the lanes of an upcast) is a GROUP of them until the SINK takes them in order
def _flatten_stores(sink:UOp) -> UOp|None:
  if not any(s.op is Ops.GROUP for s in sink.src): return None
  return sink.replace(src=tuple(x for s in sink.src for x in (s.src if s.op is Ops.GROUP else (s,))))
pm_flatten_stores = PatternMatcher([(UPat(Ops.SINK, name="sink"), _flatten_stores)])
