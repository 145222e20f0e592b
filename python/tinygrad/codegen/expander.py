"""Expansion: UNROLL and UPCAST ranges become their lanes, so no such range is left for the loops.

  UNROLL  REDUCE(x, *ranges, u) -> REDUCE(op(x[u=0], x[u=1], ...), *ranges), the lanes combined as a tree (more ILP); with no range
          left the REDUCE is just that value. Lanes whose loads are consecutive read one vector load (as UPCAST's); where every
          load that moves with u is such a vector load, two or more (a dot product), the lanes keep an accumulator each,
          op(REDUCE(x[u=0], *ranges), REDUCE(x[u=1], *ranges), ...): lane-wise multiply-adds the C compiler vectorizes.
  UPCAST  (innermost first) every STORE that depends on the range u becomes one store per lane, STORE(idx[u=j], val[u=j]); where the
          lane addresses are consecutive the stores are one SHRINK store of a STACK of the lanes. Ungated loads whose lane addresses
          are consecutive become one SHRINK (vector) load, lane j read as INDEX(vector, j). A REDUCE in a stored value becomes one
          REDUCE per lane (codegen runs REDUCEs over the same ranges in one loop: one accumulator per lane).
Last, every memory index of a kernel with lanes, and every gate and WHERE condition of index math, is simplified by uop/symbolic.py:
the substitutions leave terms like (r*64)+(0*4)+1, and comparisons that a lane's range decides.
"""
from __future__ import annotations
from dataclasses import dataclass
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes
from tinygrad.renderer import mem_root
from tinygrad.codegen.accumulator import combine
from tinygrad.codegen.end_loops import pm_flatten_stores
from tinygrad.codegen.opt.kernel import ranges_of, range_key, range_size, vector_loads, _vector_ok, _consecutive

def _tree(op:Ops, xs:list[UOp]) -> UOp:
  while len(xs) > 1: xs = [combine(op, xs[i], xs[i+1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def _lane(x:UOp, u:UOp, j:int) -> UOp: return x.substitute({u: UOp.const(j, u.dtype)}, name="expand")

def _vector_lanes(x:UOp, u:UOp, loads:list[UOp]) -> tuple[list[dict[UOp, UOp]], dict[UOp, UOp]]:
  """For each lane j of range u: {the lane's load: lane j of one vector load}, for `loads` (in x), whose lane addresses are
  consecutive (vector_loads); and {each of `loads`: its vector load}."""
  n = range_size(u) or 0
  # every vectorizable load's lanes from one substitution per lane (not one per load and lane: compile time)
  lane_loads = [_lane(UOp(Ops.SINK, dtypes.void, tuple(loads)), u, j).src for j in range(n)] if loads else []
  repl: list[dict[UOp, UOp]] = [{} for _ in range(n)]
  vectors: dict[UOp, UOp] = {}
  for i, ld in enumerate(loads):
    idx0 = lane_loads[0][i].src[0].src[1]
    vectors[ld] = vec = UOp(Ops.LOAD, ld.dtype, (UOp(Ops.SHRINK, ld.dtype, (ld.src[0].src[0], idx0, UOp.const(n, dtypes.int))),))
    for j in range(n): repl[j][lane_loads[j][i]] = UOp(Ops.INDEX, ld.dtype, (vec, UOp.const(j, dtypes.int)))
  return repl, vectors

def _widened(x:UOp) -> UOp:
  """x without a float32 cast of a half/bfloat16 value (a vector of those converts lane by lane as one vector CAST)."""
  return x.src[0] if x.op is Ops.CAST and x.dtype is dtypes.float32 and x.src[0].dtype in (dtypes.half, dtypes.bfloat16) else x

def _expand_unroll(root:UOp, u:UOp, vector_alu:bool, packed:bool=False) -> UOp:
  """root with every REDUCE over the UNROLL range u in it as its lanes."""
  repl: dict[UOp, UOp] = {}
  n = range_size(u) or 0
  for red in [r for r in root.toposort() if r.op is Ops.REDUCE and u in r.src[1:]]:
    rest = tuple(r for r in red.src[1:] if r is not u)
    vec, _ = _vector_lanes(red.src[0], u, loads := vector_loads(red.src[0], u, packed=packed))
    lanes = [_lane(red.src[0], u, j) for j in range(n)]
    lanes = [x.substitute(v, name="vector loads") if v else x for x, v in zip(lanes, vec)]
    # lanes whose every load reads consecutive elements, two or more of them (vector loads: a dot product), keep one accumulator each,
    # combined after the loop: the C compiler turns the lane-wise multiply-adds into vector ones (a tree per step is scalar code: x @ w.T
    # ran at a third of the speed). A plain sum keeps the tree (and the op count tinygrad reports for it)
    moving = [ld for ld in red.src[0].toposort() if ld.op is Ops.LOAD and u in ld.src[0].toposort()]
    dot = rest and len(loads) >= 2 and len(loads) == len(moving)
    # a float32 dot product (MUL of two vector loads, or of a float cast of a half/bfloat16 one) on a renderer with vector ALU: one
    # vector accumulator instead, its lanes summed once after the loop (a 4x4 tile of 4-lane dot products is 16 float4 multiply-adds a
    # step, not 64 scalar ones for clang to pair up; a kernel of two half GEMVs, gate and up, got shuffles of lane pairs from them)
    if dot and vector_alu and red.arg[0] is Ops.ADD and red.dtype is dtypes.float32 and (x := red.src[0]).op is Ops.MUL and \
       all(_widened(s) in loads for s in x.src) and n in (2, 4, 8, 16):
      def as_vector(s:UOp) -> UOp: return vec[0][_lane(s, u, 0)].src[0] if s in loads else s.replace(src=(as_vector(s.src[0]),))
      vred = red.replace(src=(x.replace(src=tuple(as_vector(s) for s in x.src)), *rest))
      repl[red] = _tree(Ops.ADD, [UOp(Ops.INDEX, red.dtype, (vred, UOp.const(j, dtypes.int))) for j in range(n)])
    elif dot: repl[red] = _tree(red.arg[0], [red.replace(src=(x, *rest)) for x in lanes])
    else: repl[red] = red.replace(src=(_tree(red.arg[0], lanes), *rest)) if rest else _tree(red.arg[0], lanes)
  return root.substitute(repl, name="expand unroll")

# what a vector expression is made of: float sums and products, lane-wise, and sums over loops (one vector accumulator)
_LANE_WISE_DTYPES = (dtypes.float32, dtypes.float64)

def _vector_values(x:UOp) -> set[UOp]:
  """The nodes under x that are vectors from an earlier UPCAST's or UNROLL's expansion: its vector (SHRINK) loads, STACKs and what
  is computed from them lane-wise (an INDEX of a lane is a scalar again)."""
  vec: set[UOp] = set()
  for v in x.toposort():
    if (v.op is Ops.LOAD and v.src[0].op is Ops.SHRINK) or v.op is Ops.STACK or (v.op is not Ops.INDEX and any(s in vec for s in v.src)):
      vec.add(v)
  return vec

def _load_lane(v:UOp, vec:set[UOp]) -> bool: return v.op is Ops.INDEX and v.src[0] in vec and v.src[0].op is Ops.LOAD

def _lane_wise(x:UOp, u:UOp, vectors:dict[UOp, UOp], lanes:list[dict[UOp, UOp]]) -> UOp|None:
  """x, a value in which the UPCAST range u is free, as one vector expression over u's lanes: the loads in `vectors` as those vector
  loads, other float loads that move with u (strided, gated) as a STACK of their lanes (`lanes`: each lane's vector-load
  substitutions), what doesn't move with u as scalars (broadcast to every lane), float ADD/MUL lane-wise and ADD REDUCEs of such
  values as vector reduces. None where anything else moves with u (a transcendental, a comparison...): that value is written lane by
  lane. Each lane computes what it computed as a scalar, in the same order: the same bits."""
  moves, vec = {u}, _vector_values(x)
  for v in x.toposort():
    if v not in moves and any(s in moves for s in v.src): moves.add(v)
  done: dict[UOp, UOp] = {}
  stack = [x]
  while stack:   # children first, iteratively (a long sum is a deep graph)
    v = stack[-1]
    if v in done: stack.pop()
    elif v not in moves: done[stack.pop()] = v
    elif v in vectors: done[stack.pop()] = vectors[v]
    # a lane of an earlier expansion's vector load (a weight row read 4 at a time along a sum's UNROLL lanes) is a scalar: its lanes
    # along u are gathered as a gated load's are. A vector itself can't be a lane of another vector, and a product of two such lanes
    # is a dot product's (codegen/mulacc.py fuses its lanes one by one)
    elif v.op is Ops.INDEX and _load_lane(v, vec) and v.dtype in _LANE_WISE_DTYPES:
      done[stack.pop()] = UOp(Ops.STACK, v.dtype, tuple(_lane(v, u, j) for j in range(len(lanes))))
    elif v in vec or (v.op is Ops.MUL and all(_load_lane(s, vec) for s in v.src)): return None
    elif v.op is Ops.LOAD and v.dtype in _LANE_WISE_DTYPES:
      done[stack.pop()] = UOp(Ops.STACK, v.dtype, tuple(_lane(v, u, j).substitute(r, name="vector loads") if r else _lane(v, u, j)
                                                        for j, r in enumerate(lanes)))
    elif v.dtype not in _LANE_WISE_DTYPES or not (v.op in (Ops.ADD, Ops.MUL) or (v.op is Ops.REDUCE and v.arg[0] is Ops.ADD)): return None
    elif todo := [s for s in v.src if s not in done]: stack.extend(todo)
    else: done[stack.pop()] = v.replace(src=tuple(done[s] for s in v.src))
  return done[x]

def _as_vector(st:UOp, u:UOp, n:int, vectors:dict[UOp, UOp], lanes:list[dict[UOp, UOp]]) -> list[UOp]|None:
  """A store whose value is a register tile's (a sum of products: a row of inputs times a weight, vector loads along u, or a sum over
  a loop, whose accumulators become one vector) as one vector expression (_lane_wise): one vector store where the lanes' addresses
  are consecutive, else one store of each lane of the vector. None for any other store. The code of the lanes is written once: a tile
  of 8 x 8 outputs is 8 vector updates per step instead of 64 scalar ones (and their lane extractions)."""
  if n not in (2, 4, 8, 16) or len(st.src) != 2 or st.src[0].op is not Ops.INDEX: return None
  topo = st.src[1].toposort()
  if not (vectors or any(v.op is Ops.REDUCE for v in topo)): return None
  if (val := _lane_wise(st.src[1], u, vectors, lanes)) is None or val is st.src[1]: return None
  buf, idx = st.src[0].src
  if _vector_ok(buf.dtype) and _consecutive([idx], u)[0]:
    return [UOp(Ops.STORE, dtypes.void, (UOp(Ops.SHRINK, buf.dtype, (buf, _lane(idx, u, 0), UOp.const(n, dtypes.int))), val))]
  return [UOp(Ops.STORE, dtypes.void, (_lane(st.src[0], u, j), UOp(Ops.INDEX, val.dtype, (val, UOp.const(j, dtypes.int))))) for j in range(n)]

def _vector_sum_lanes(st:UOp, u:UOp, vectors:dict[UOp, UOp], lanes:list[dict[UOp, UOp]]) -> list[UOp]|None:
  """The lanes of a store whose value is not lane-wise only after its sums (a conv's bias, batchnorm and relu after its register tile):
  the sums that move with u as vector reduces (one vector accumulator each, as in _as_vector), each lane's rest on its lane of them.
  None where a sum that moves with u is not lane-wise either."""
  if len(st.src) != 2 or st.src[0].op is not Ops.INDEX or len(lanes) not in (2, 4, 8, 16): return None
  reds = [r for r in st.src[1].toposort() if r.op is Ops.REDUCE and u in r.toposort()]
  inner = {s for r in reds for s in r.src[0].toposort() if s.op is Ops.REDUCE}
  if not (reds := [r for r in reds if r not in inner]): return None
  vsums = [_lane_wise(r, u, vectors, lanes) for r in reds]
  if any(v is None or v is r for v, r in zip(vsums, reds)): return None
  out = []
  for j, vec_loads in enumerate(lanes):
    lane_st = _lane(st, u, j).substitute({_lane(r, u, j): UOp(Ops.INDEX, r.dtype, (v, UOp.const(j, dtypes.int))) for r, v in zip(reds, vsums)},
                                         name="vector sums")
    out.append(lane_st.substitute(vec_loads, name="vector loads") if vec_loads else lane_st)
  return out

def _expand_upcast(stores:list[UOp], u:UOp, vector_alu:bool) -> list[UOp]:
  """The stores, each that depends on the UPCAST range u as its lanes (on a vector_alu renderer as one vector expression where it can
  be: _as_vector)."""
  n, group = range_size(u) or 0, UOp(Ops.SINK, dtypes.void, tuple(stores))
  repl, vectors = _vector_lanes(group, u, vector_loads(group, u))
  out: list[UOp] = []
  for st in stores:
    if u not in st.toposort():
      out.append(st)
      continue
    if vector_alu and (vec := _as_vector(st, u, n, vectors, repl)) is not None:
      out.extend(vec)
      continue
    if not vector_alu or (lanes := _vector_sum_lanes(st, u, vectors, repl)) is None:
      lanes = [_lane(st, u, j) for j in range(n)]
      lanes = [s.substitute(r, name="vector loads") if r else s for s, r in zip(lanes, repl)]
    buf = st.src[0].src[0]
    if st.src[0].op is Ops.INDEX and len(st.src) == 2 and _vector_ok(buf.dtype) and n in (2, 4, 8, 16) and _consecutive([st.src[0].src[1]], u)[0]:
      shrink = UOp(Ops.SHRINK, buf.dtype, (buf, lanes[0].src[0].src[1], UOp.const(n, dtypes.int)))
      out.append(UOp(Ops.STORE, dtypes.void, (shrink, UOp(Ops.STACK, buf.dtype, tuple(s.src[1] for s in lanes)))))
    else: out.extend(lanes)
  return out

# index math only: symbolic's rules assume unbounded ints, which the kernel's int32/uint32 values (a hash, loaded ints) are not
def _index_math(x:UOp) -> bool: return all(v.dtype in (dtypes.weakint, dtypes.bool) and v.op is not Ops.LOAD for v in x.toposort())

def _gates(topo) -> list[UOp]:
  return [u.src[2] for u in topo if u.op is Ops.LOAD and len(u.src) == 3] + [u.src[0] for u in topo if u.op is Ops.WHERE]

def _simplify_indices(stores:list[UOp]) -> list[UOp]:
  """The stores with their memory indices and the gates of their loads summed up again (the substitutions leave terms like
  (r*64)+(0*4)+1, and a lane's gate or WHERE condition (0*8)+r < 27 that its range decides): one graph_rewrite over all of them."""
  group = UOp(Ops.SINK, dtypes.void, tuple(stores))
  topo = group.toposort()
  idxs = list(dict.fromkeys([u.src[1] for u in topo if u.op in (Ops.INDEX, Ops.SHRINK) and mem_root(u.src[0]) is not None] +
                            [g for g in _gates(topo) if _index_math(g)]))
  simple = graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(idxs)), symbolic, name="simplify indices").src
  return list(group.substitute({a: b for a, b in zip(idxs, simple) if a is not b}, name="simplified indices").src)

@dataclass(frozen=True)
class ExpandContext:
  vector_alu: bool   # the renderer has vector ALU (Renderer.vector_alu)
  lanes: bool        # the kernel has UNROLL or UPCAST ranges (else nothing changes, its indices included)
  packed: bool = False  # vector loads of half/bfloat16 in a sum's lanes (Renderer.packed_vector_loads)

def expand_context(sink:UOp, ren=None) -> ExpandContext:
  return ExpandContext(ren is not None and ren.vector_alu, bool(ranges_of(sink, AxisType.UNROLL, AxisType.UPCAST)),
                       ren is not None and ren.packed_vector_loads)

def _unroll(ctx:ExpandContext, red:UOp) -> UOp|None:
  if not ctx.lanes or not (unrolls := sorted([r for r in red.src[1:] if r.arg[-1] is AxisType.UNROLL], key=range_key)): return None
  x = red
  for u in reversed(unrolls): x = _expand_unroll(x, u, ctx.vector_alu, ctx.packed)
  return x

def _upcast_order(st:UOp, vector_alu:bool) -> list[UOp]:
  """The UPCAST ranges of a store in the order they are expanded: innermost first, except that on a vector_alu renderer the ranges
  along which a load in a sum is a vector load go before those without one. The first range expanded is the one whose lanes become a
  vector expression: a conv's channel tile (packed weights a vector along the channels, the input pixels gathered scalars) then keeps
  one vector accumulator per pixel, each updated by the weight vector times a broadcast pixel, instead of the pixels' gathered lanes
  times shuffled weights."""
  order = list(reversed(ranges_of(st, AxisType.UPCAST)))
  if not vector_alu or len(order) < 2: return order
  return sorted(order, key=lambda u: not vector_loads(st, u, in_reduce_only=True))

def _upcast(ctx:ExpandContext, st:UOp) -> UOp|None:
  if not ctx.lanes: return None
  stores = [st]
  for u in _upcast_order(st, ctx.vector_alu): stores = _expand_upcast(stores, u, ctx.vector_alu)
  stores = _simplify_indices(stores)
  return None if stores == [st] else stores[0] if len(stores) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(stores))

# ctx: ExpandContext. Run as a walk, children first: a REDUCE's UNROLL ranges (innermost first), then a STORE's UPCAST ranges (innermost
# first; its REDUCEs are expanded by then); a store that became its lanes is a GROUP of them until the SINK takes them in order
pm_expand = PatternMatcher([
  (UPat(Ops.REDUCE, name="red"), _unroll),
  (UPat(Ops.STORE, name="st"), _upcast),
]) + pm_flatten_stores
