"""Range splitting (loop peeling): a STORE whose value compares one of its LOOP ranges against constants (the masks `cat` and `pad`
make: `r < 10`, `9 < r`) becomes one STORE per piece of that range, consecutive loops in which every such comparison is a constant.

  out[r] = (r < 10 ? a[r] : -0.0) + (9 < r ? b[r-10] : -0.0)     r in [0, 23)
    ->  out[r'] = a[r']          r' in [0, 10)
        out[r'+10] = b[r']       r' in [0, 13)

It runs after the optimizer (so a piece keeps the kernel's upcast: the lanes' comparisons fold after expansion, see pm_fold_gates) and
before the expander. A comparison e < c with e = k*r + rest (rest not depending on r, bounded by its vmin/vmax) is the same for every
value of rest when r is below one cut or at/above another; the cuts of all comparisons on r cut it into pieces. A piece of size 1
is the constant itself. Ranges inside the split one (LOOP ranges that sort after it) get a fresh copy per piece: each piece's loops
are its own (codegen's `end loops` nests the stores' loops). A range split over threads is left alone (its comparisons depend on the
launch: the mixed part is the whole range).

A kernel with a REDUCE (a padded conv: its input loads are gated by the border) is split only when it is big and upcast
(_worth_splitting): each piece gets its own copy of the reduce's ranges (codegen runs the REDUCEs over the same ranges in one loop,
with accumulators that start again in each iteration of their store's loops), so the interior piece's loads are ungated and its lanes
become vector loads (the tile of codegen/opt/heuristic.py peeled_tile). Every piece keeps the tile, the border's too: with their
lanes as loops (one scalar accumulator, a dependent add per multiply) a conv's first and last rows, 1/28 of its outputs at 56x56,
took half its time, and clang spent longer on those loops than on the tile's code.
"""
from __future__ import annotations
import itertools
import math
from dataclasses import dataclass, field
from typing import Iterator
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.uop.symbolic import symbolic, pm_fold_values
from tinygrad.dtype import dtypes
from tinygrad.codegen.end_loops import pm_flatten_stores
from tinygrad.schedule.knobs import MAX_STORES, SPLIT_REDUCE_MIN_WORK

_INTS = frozenset(dtypes.ints + (dtypes.weakint,))

def _drop_neg_zero(x:UOp, z:UOp) -> UOp|None: return x if dtypes.is_float(x.dtype) and z.arg == 0 and math.copysign(1.0, z.arg) < 0 else None
def _fold_gated_load(ld:UOp, g:UOp) -> UOp: return ld.replace(src=(ld.src[0],)) if g.arg else ld.src[1]

def _conjuncts(g:UOp) -> set[UOp]:
  out, stack = set(), [g]
  while stack:
    if (u := stack.pop()).op is Ops.AND and u.dtype is dtypes.bool: stack.extend(u.src)
    else: out.add(u)
  return out

def _where_of_gated_load(c:UOp, ld:UOp, f:UOp) -> UOp|None:
  """where(c, load gated by g, alt) is the load when c's conjuncts are among g's and the where's other side is the load's alt value
  (a padded view read through another pad: each pad's mask was applied again around a load that already reads alt outside it)."""
  return ld if f is ld.src[1] and _conjuncts(c) <= _conjuncts(ld.src[2]) else None

# a comparison folded to a constant takes its mask with it. x + -0.0 is x for every float x (the masked-out side of a cat's sum)
pm_fold_gates = PatternMatcher([
  (UPat(Ops.WHERE, src=(UPat.cvar("g", dtypes.bool), UPat.var("t"), UPat.var("f"))), lambda g, t, f: t if g.arg else f),
  (UPat(Ops.LOAD, src=(UPat(), UPat(), UPat.cvar("g", dtypes.bool)), name="ld"), _fold_gated_load),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat(Ops.LOAD, src=(UPat(), UPat(), UPat()), name="ld"), UPat.var("f"))), _where_of_gated_load),
  (UPat(Ops.AND, dtypes.bool, src=[UPat.var("x"), UPat.cvar("c")]), lambda x, c: x if c.arg else c),
  (UPat(Ops.OR, dtypes.bool, src=[UPat.var("x"), UPat.cvar("c")]), lambda x, c: c if c.arg else x),
  (UPat(Ops.ADD, src=[UPat.var("x"), UPat.cvar("z")]), _drop_neg_zero),
])
_pm_piece = pm_fold_values + pm_fold_gates

def _terms(x:UOp) -> tuple[list[UOp], int]:
  """x as its non-constant addends and the sum of its constant ones."""
  terms, const, stack = [], 0, [x]
  while stack:
    if (u := stack.pop()).op is Ops.ADD: stack.extend(u.src)
    elif u.op is Ops.CONST: const += u.arg
    else: terms.append(u)
  return terms, const

def _coeff(t:UOp, r:UOp) -> int|None:
  """k when term t is r or r*k (k a CONST), else None."""
  if t is r: return 1
  if t.op is Ops.MUL and r in t.src and (c := t.src[1] if t.src[0] is r else t.src[0]).op is Ops.CONST and isinstance(c.arg, int): return c.arg
  return None

def _cuts(cmp:UOp, r:UOp, n:int) -> set[int]|None:
  """The values of r in (0, n) at which the comparison cmp (e < c or c < e) may change for some value of the other terms of e; None
  when cmp is not affine in r."""
  a, b = cmp.src
  if b.op is Ops.CONST and isinstance(b.arg, int): e, c = a, b.arg                 # e < c
  elif a.op is Ops.CONST and isinstance(a.arg, int): e, c = b, a.arg + 1           # c < e: not (e < c+1)
  else: return None
  terms, lo = _terms(e)
  k, hi = 0, lo
  for t in terms:
    if (kt := _coeff(t, r)) is not None: k += kt
    elif r in t.toposort(): return None
    else: lo, hi = lo + t.vmin, hi + t.vmax
  if k == 0: return None
  # k > 0: all true below ceil((c-hi)/k), all false from ceil((c-lo)/k); k < 0: all false up to floor((lo-c)/|k|), all true past
  # floor((hi-c)/|k|)
  cuts = {-((hi - c) // k), -((lo - c) // k)} if k > 0 else {(lo - c) // -k + 1, (hi - c) // -k + 1}
  return {x for x in cuts if 0 < x < n}

def peels(gate:UOp) -> bool:
  """Whether every comparison in a gate is affine in an output LOOP range (with constant bounds), so split_ranges cuts that loop into
  pieces which decide it (a padded conv's border: the interior's loads are ungated). The optimizer's heuristic asks this before
  upcasting for vector loads the split will make."""
  cmps = [u for u in gate.toposort() if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)]
  return bool(cmps) and all(c.op is Ops.CMPLT and any(r.op is Ops.RANGE and r.arg[-1] is AxisType.LOOP and r.src[0].op is Ops.CONST and
                                                      _cuts(c, r, r.src[0].arg) is not None for r in c.toposort()) for c in cmps)

def _split_one(st:UOp, ids:Iterator[int]) -> list[UOp]|None:
  """st as the stores of the pieces of its outermost LOOP range with cuts, or None. `ids`: fresh numbers that extend the args of a
  piece's own ranges (unique in the kernel: two pieces never share a range, however they were split)."""
  topo = st.toposort()
  cmps = [u for u in topo if u.op is Ops.CMPLT and u.src[0].dtype in _INTS]
  if not cmps: return None
  # a loop to cut has a constant size; the loops inside it are copied per piece whatever their size (a symbolic one shared by two pieces
  # would be closed by both pieces' ENDs)
  all_loops = sorted([u for u in topo if u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP], key=lambda u: u.arg[:-1])
  loops = [u for u in all_loops if u.src[0].op is Ops.CONST]
  # a piece's reduces get their own loops too (codegen lowers the REDUCEs over the same ranges into one loop); a reduce split over a
  # workgroup (GROUP_REDUCE: launch dims) is left alone
  if any(u.op is Ops.RANGE and u.arg[-1] is AxisType.GROUP_REDUCE for u in topo): return None
  reduces = [u for u in topo if u.op is Ops.RANGE and u.arg[-1] is AxisType.REDUCE]
  for r in loops:
    n, cuts = r.src[0].arg, set()
    for cmp in cmps:
      if r in cmp.toposort() and (cs := _cuts(cmp, r, n)) is not None: cuts |= cs
    if not cuts: continue
    inner = [u for u in all_loops if u.arg[:-1] > r.arg[:-1]] + reduces
    # in two at the middle cut, each half split again: a half folds away the masks of the other's inputs, so a cat of k inputs costs
    # about log2(k) passes over the store instead of k
    bounds = [0, sorted(cuts)[len(cuts) // 2], n]
    pieces = []
    for start, end in zip(bounds, bounds[1:]):
      size, p = UOp.const(end - start, r.dtype), next(ids)
      rp = UOp.const(start, r.dtype) if end - start == 1 else UOp(Ops.RANGE, r.dtype, (size,), (*r.arg[:-1], p, AxisType.LOOP))
      repl = {r: rp if start == 0 or rp.op is Ops.CONST else rp + start}
      repl.update({u: u.replace(arg=(*u.arg[:-1], p, u.arg[-1])) for u in inner})
      pieces.append(_simplify(st.substitute(repl, name="split range")))
    return [x for x in pieces if x.op is Ops.STORE]
  return None

def _simplify(st:UOp) -> UOp:
  """The comparisons and indices of a piece simplified (folded where the piece decides them), then the masks they decided."""
  topo = st.toposort()
  roots = list(dict.fromkeys([u for u in topo if u.op in (Ops.CMPLT, Ops.CMPNE) and u.src[0].dtype in _INTS] +
                             [u.src[1] for u in topo if u.op is Ops.INDEX and u.src[1].dtype in _INTS]))
  simple = graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(roots)), symbolic, name="simplify piece").src
  st = st.substitute({a: b for a, b in zip(roots, simple) if a is not b}, name="simplified piece")
  return graph_rewrite(st, _pm_piece, name="fold piece masks")

@dataclass
class SplitContext:
  stores: frozenset[UOp]   # the kernel's stores that may be split (none when a split does not pay: no compares, or _worth_splitting)
  count: int               # the kernel's stores so far (at most MAX_STORES)
  ids: Iterator[int] = field(default_factory=itertools.count)   # fresh numbers for the pieces' ranges

def split_context(sink:UOp, ren=None) -> SplitContext:
  topo = sink.toposort()
  ops = {u.op for u in topo}
  if sink.op is not Ops.SINK or Ops.CMPLT not in ops or (Ops.REDUCE in ops and not _worth_splitting(topo)): return SplitContext(frozenset(), 0)
  return SplitContext(frozenset(sink.src), len(sink.src))

def _split_store(ctx:SplitContext, st:UOp) -> UOp|None:
  """A store of the kernel as the stores of its pieces (each split again, depth first, while the kernel stays within MAX_STORES)."""
  if st not in ctx.stores: return None
  done: list[UOp] = []
  todo = [st]
  while todo:
    x = todo.pop()
    pieces = _split_one(x, ctx.ids) if ctx.count + 1 <= MAX_STORES else None
    if pieces is None or ctx.count - 1 + len(pieces) > MAX_STORES: done.append(x)
    else:
      ctx.count += len(pieces) - 1
      todo.extend(reversed(pieces))
  return None if done == [st] else UOp(Ops.GROUP, dtypes.void, tuple(done))

# ctx: SplitContext. Run as a walk: a store's pieces are final (split as far as they go), a GROUP of them until the SINK takes them in order
pm_split_ranges = PatternMatcher([(UPat(Ops.STORE, name="st"), _split_store)]) + pm_flatten_stores

def split_ranges(sink:UOp, ren=None) -> UOp:
  """The codegen pass on its own: every STORE of sink split as above (at most MAX_STORES in all)."""
  return graph_rewrite(sink, pm_split_ranges, ctx=split_context(sink, ren), walk=True, name="split ranges")

def _worth_splitting(topo:list[UOp]) -> bool:
  """A reduce kernel (topo: its nodes) is split when it is big (each piece copies the kernel's code: more to lower and compile) and
  upcast (the lanes of the ungated pieces' loads become vector loads; without lanes a split only saves the compares)."""
  rngs = [u for u in topo if u.op is Ops.RANGE]
  # a packed panel (Opt PACK) would be copied once per piece, and its tile's loads along the border (an image's pixels, broadcast to the
  # panel's lanes) are scalars in every piece: nothing to gain
  if any(u.op is Ops.BUFFER and u.arg.name == "pack" for u in topo): return False
  return any(r.arg[-1] is AxisType.UPCAST for r in rngs) and all(r.src[0].op is Ops.CONST for r in rngs) and \
    math.prod(r.src[0].arg for r in rngs) >= SPLIT_REDUCE_MIN_WORK
