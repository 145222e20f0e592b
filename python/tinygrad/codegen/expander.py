"""Expansion: UNROLL and UPCAST ranges become their lanes, so no such range is left for the loops.

  UNROLL  REDUCE(x, *ranges, u) -> REDUCE(op(x[u=0], x[u=1], ...), *ranges), the lanes combined as a tree (more ILP); with no range
          left the REDUCE is just that value.
  UPCAST  (innermost first) every STORE that depends on the range u becomes one store per lane, STORE(idx[u=j], val[u=j]); where the
          lane addresses are consecutive the stores are one SHRINK store of a STACK of the lanes. Ungated loads whose lane addresses
          are consecutive become one SHRINK (vector) load, lane j read as INDEX(vector, j). A REDUCE in a stored value becomes one
          REDUCE per lane (codegen runs REDUCEs over the same ranges in one loop: one accumulator per lane).
Last, every memory index is simplified by uop/symbolic.py: the substitutions leave terms like (r*64)+(0*4)+1.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from tinygrad.renderer import mem_root
from tinygrad.codegen import _combine
from tinygrad.codegen.opt.kernel import ranges_of, range_size, vector_loads, _vector_ok, _consecutive

def _tree(op:Ops, xs:list[UOp]) -> UOp:
  while len(xs) > 1: xs = [_combine(op, xs[i], xs[i+1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def _lane(x:UOp, u:UOp, j:int) -> UOp: return x.substitute({u: UOp.const(j, u.dtype)}, name="expand")

def _expand_unroll(sink:UOp, u:UOp) -> UOp:
  repl: dict[UOp, UOp] = {}
  for red in [r for r in sink.toposort() if r.op is Ops.REDUCE and u in r.src[1:]]:
    x = _tree(red.arg[0], [_lane(red.src[0], u, j) for j in range(range_size(u) or 0)])
    rest = tuple(r for r in red.src[1:] if r is not u)
    repl[red] = red.replace(src=(x, *rest)) if rest else x
  return sink.substitute(repl, name="expand unroll")

def _expand_upcast(sink:UOp, u:UOp) -> UOp:
  n = range_size(u) or 0
  # every vectorizable load's lanes from one substitution per lane (not one per load and lane: compile time)
  loads = vector_loads(sink, u)
  lane_loads = [_lane(UOp(Ops.SINK, dtypes.void, tuple(loads)), u, j).src for j in range(n)] if loads else []
  repl: list[dict[UOp, UOp]] = [{} for _ in range(n)]
  for i, ld in enumerate(loads):
    idx0 = lane_loads[0][i].src[0].src[1]
    vec = UOp(Ops.LOAD, ld.dtype, (UOp(Ops.SHRINK, ld.dtype, (ld.src[0].src[0], idx0, UOp.const(n, dtypes.int))),))
    for j in range(n): repl[j][lane_loads[j][i]] = UOp(Ops.INDEX, ld.dtype, (vec, UOp.const(j, dtypes.int)))
  stores: list[UOp] = []
  for st in sink.src:
    if u not in st.toposort():
      stores.append(st)
      continue
    lanes = [_lane(st, u, j) for j in range(n)]
    lanes = [s.substitute(r, name="vector loads") if r else s for s, r in zip(lanes, repl)]
    buf = st.src[0].src[0]
    if st.src[0].op is Ops.INDEX and len(st.src) == 2 and _vector_ok(buf.dtype) and n in (2, 4, 8, 16) and _consecutive([st.src[0].src[1]], u)[0]:
      shrink = UOp(Ops.SHRINK, buf.dtype, (buf, lanes[0].src[0].src[1], UOp.const(n, dtypes.int)))
      stores.append(UOp(Ops.STORE, dtypes.void, (shrink, UOp(Ops.STACK, buf.dtype, tuple(s.src[1] for s in lanes)))))
    else: stores.extend(lanes)
  return sink.replace(src=tuple(stores))

def _expand(sink:UOp) -> UOp|None:
  if not (rngs := ranges_of(sink, AxisType.UNROLL, AxisType.UPCAST)): return None
  for u in reversed(rngs):
    if u.arg[-1] is AxisType.UNROLL: sink = _expand_unroll(sink, u)
  for u in reversed(rngs):
    if u.arg[-1] is AxisType.UPCAST: sink = _expand_upcast(sink, u)
  # the lanes' indices, summed up again: one graph_rewrite over all of them
  idxs = list(dict.fromkeys(x.src[1] for x in sink.toposort() if x.op in (Ops.INDEX, Ops.SHRINK) and mem_root(x.src[0]) is not None))
  simple = graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(idxs)), symbolic, name="simplify indices").src
  return sink.substitute({a: b for a, b in zip(idxs, simple) if a is not b}, name="simplified indices")

pm_expand = PatternMatcher([(UPat(Ops.SINK, name="sink"), _expand)])
