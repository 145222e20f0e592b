"""Closed forms for sums over a kernel's REDUCE ranges that only count or select (run on each kernel's value, schedule/rangeify.py).

The reduce ranges of one REDUCE are read as one flat position k in [0, N) (k = sum(r_i * stride_i), row-major over their sizes, as
rangeify builds them, an UNROLL range included). Where the summed value depends on k only through a comparison, the loop is
replaced by arithmetic:
- `sum_k cond(k)` / `sum_k where(cond(k), c, 0)`      -> c * count(cond), cond an and of linear bounds on k (lo <= k < hi)
- `sum_k where(k == e, v(k), 0)` (a one-hot select)   -> where(0 <= e < N, v(e), 0), the loads of v gated by the same bound
  (also `sum_k (k == e) * v(k)`, the mask multiplied in)
- `sum_k c * x(k)`, c free of k, where `sum_k x(k)` is one of the above -> c * (its closed form) (a gradient's sign or scale:
  cross-entropy's backward sums -onehot/n)
Tensor.arange is the first: its positions are a count of a mask (tensor/creation.py), so arange is an elementwise kernel; a one-hot
of an arange against indices (embedding, gather, cross-entropy's label pick) then becomes the second, a direct indexed load.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes

_WEAK = dtypes.weakint

def _flat(rngs:tuple[UOp, ...]) -> tuple[dict[UOp, int], int]:
  """{range: its stride in the flat position k}, N."""
  sizes = [r.src[0].arg for r in rngs]
  strides, acc = {}, 1
  for r, s in zip(reversed(rngs), reversed(sizes)):
    strides[r] = acc
    acc *= s
  return strides, acc

def _depends(x:UOp, rngs:tuple[UOp, ...]) -> bool:
  if x.op is Ops.CONST: return False
  sl = x.backward_slice   # cached on the node
  return any(r is x or r in sl for r in rngs)

def _index_value(x:UOp) -> UOp|None:
  """x as index math (weakint): a cast of index math to an int of 32 bits or more is the identity on the values a kernel's index
  takes, so it is seen through; other int values enter as a CAST."""
  if x.dtype is _WEAK: return x
  if x.op is Ops.CAST and x.src[0].dtype is _WEAK and dtypes.is_int(x.dtype) and x.dtype.itemsize >= 4: return x.src[0]
  if dtypes.is_int(x.dtype): return UOp(Ops.CAST, _WEAK, (x,), _WEAK)
  return None

def _scaled_terms(x:UOp, scale:int=1):
  """x's addends with their constant factors, (term, factor): a sum scaled by a constant is opened (the symbolic rules leave
  (r1*-4 + r2*-1)*-1, an arange counted down, as it is)."""
  if x.op is Ops.ADD:
    for s in x.src: yield from _scaled_terms(s, scale)
  elif x.op is Ops.MUL and x.src[1].op is Ops.CONST: yield from _scaled_terms(x.src[0], scale * x.src[1].arg)
  else: yield x, scale

def _linear(x:UOp, rngs:tuple[UOp, ...]) -> tuple[int, UOp]|None:
  """x (index math) as a*k + rest with a = +-1 and rest free of the ranges, or None."""
  strides, _ = _flat(rngs)
  coef = dict.fromkeys(rngs, 0)
  rest: list[UOp] = []
  for t, c in _scaled_terms(x):
    if t in coef: coef[t] += c
    elif _depends(t, rngs): return None
    else: rest.append(t if c == 1 else t * c)
  a = coef[rngs[-1]]
  if a not in (1, -1) or any(coef[r] != a * strides[r] for r in rngs): return None
  return a, sum(rest[1:], rest[0]) if rest else UOp.const(0)

def _diff(lhs:UOp, rhs:UOp, rngs:tuple[UOp, ...]) -> tuple[int, UOp]|None:
  """lhs - rhs as a*k + rest (both sides compared as index math), or None."""
  if (l := _index_value(lhs)) is None or (r := _index_value(rhs)) is None: return None
  return _linear(graph_rewrite(l + r * -1, symbolic, name="reduce fold: index"), rngs)

def _bounds(cond:UOp, rngs:tuple[UOp, ...]) -> tuple[list[UOp], list[UOp]]|None:
  """([lower bounds], [upper bounds]) with cond == all(lo <= k) and all(k < hi), or None when cond is not such an and."""
  los: list[UOp] = []
  his: list[UOp] = []
  for c in cond.split_uop(Ops.AND):
    neg = c.op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].arg is True
    lt = c.src[0] if neg else c
    if lt.op is not Ops.CMPLT or (d := _diff(lt.src[0], lt.src[1], rngs)) is None: return None
    a, rest = d
    # a*k + rest < 0, or (neg) >= 0
    if a == 1: (los if neg else his).append(rest * -1)
    else: (his if neg else los).append(rest + 1)
  return los, his

def _count(cond:UOp, rngs:tuple[UOp, ...]) -> UOp|None:
  """The number of k in [0, N) where cond holds (index math), or None."""
  if (b := _bounds(cond, rngs)) is None: return None
  n = _flat(rngs)[1]
  lo, hi = UOp.const(0), UOp.const(n)
  for x in b[0]: lo = lo.maximum(x)
  for x in b[1]: hi = hi.minimum(x)
  return graph_rewrite((hi + lo * -1).maximum(0), symbolic, name="reduce fold: count")

def _as(count:UOp, dt) -> UOp: return UOp(Ops.CAST, dt, (count,), dt)

def _count_cast(red:UOp, cond:UOp) -> UOp|None:
  return _as(c, red.dtype) if (c := _count(cond, red.src[1:])) is not None else None

def _count_where(red:UOp, cond:UOp, c:UOp, z:UOp) -> UOp|None:
  if z.arg != 0 or _depends(c, red.src[1:]) or (n := _count(cond, red.src[1:])) is None: return None
  return c * _as(n, red.dtype)

def _gate_load(ld:UOp, valid:UOp) -> UOp:
  if len(ld.src) == 1:
    return UOp(Ops.LOAD, ld.dtype, (ld.src[0], UOp.const(False if ld.dtype is dtypes.bool else ld.dtype.const(0), ld.dtype), valid))
  return UOp(Ops.LOAD, ld.dtype, (ld.src[0], ld.src[1], ld.src[2] & valid))

def _select(red:UOp, ne:UOp, v:UOp, z:UOp) -> UOp|None:
  """sum_k where(k == e, v(k), 0) -> v(e) where e is in [0, N)."""
  if z.arg != 0: return None
  rngs = red.src[1:]
  if (d := _diff(ne.src[0], ne.src[1], rngs)) is None: return None
  a, rest = d   # a*k + rest == 0
  k = graph_rewrite(rest * -1 if a == 1 else rest, symbolic, name="reduce fold: index")
  strides, n = _flat(rngs)
  sub = {r: (k if st == 1 else k // st) if r is rngs[0] else (k if st == 1 else k // st) % r.src[0].arg for r, st in strides.items()}
  valid = graph_rewrite((UOp.const(-1) < k) & (k < n), symbolic, name="reduce fold: index")
  old = {v: None, **v.backward_slice, k: None, **k.backward_slice}
  new = v.substitute(sub)
  # a load whose index changed reads at e: gate it, so an index out of range reads nothing
  gated = {u: _gate_load(u, valid) for u in new.toposort() if u.op is Ops.LOAD and u not in old}
  if gated: new = new.substitute(gated)
  return UOp(Ops.WHERE, red.dtype, (valid, new, z))

def _select_cast(red:UOp, ne:UOp, v:UOp, z:UOp) -> UOp|None:
  """sum_k cast(where(k == e, v(k), 0)) -> cast(v(e)): a selection summed in a wider dtype (a half tensor's sum is in float)."""
  return None if z.arg != 0 else _select(red, ne, v.cast(red.dtype), UOp.const(red.dtype.const(0), red.dtype))

_ZERO = UPat(Ops.CONST, name="z")
_EQ = UPat(Ops.CMPNE, src=(UPat(Ops.CMPNE, name="ne"), UPat(Ops.CONST, arg=True)))

def _scaled(red:UOp, c:UOp, x:UOp) -> UOp|None:
  """sum_k c * x(k) -> c * sum_k x(k) when c does not depend on k and the sum of x folds (otherwise the sum is left as it is)."""
  if _depends(c, red.src[1:]): return None
  inner = UOp(Ops.REDUCE, red.dtype, (x, *red.src[1:]), red.arg)
  return None if (folded := pm_reduce_fold.rewrite(inner)) is None else c * folded

pm_reduce_fold = PatternMatcher([
  # a bool condition spelled as a select of its two values
  (UPat(Ops.WHERE, dtypes.bool, src=(UPat.var("c"), UPat(Ops.CONST, arg=True), UPat(Ops.CONST, arg=False))), lambda c: c),
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.CAST, src=(UPat(dtype=dtypes.bool, name="cond"),)),), allow_any_len=True, name="red"),
   _count_cast),
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.WHERE, src=(_EQ, UPat.var("v"), _ZERO)),), allow_any_len=True, name="red"), _select),
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.CAST, src=(UPat(Ops.WHERE, src=(_EQ, UPat.var("v"), _ZERO)),)),), allow_any_len=True,
        name="red"), _select_cast),
  # the mask multiplied in (tinygrad's Embedding spelling): a NaN or inf away from the selected position no longer reaches the sum
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.MUL, src=[UPat(Ops.CAST, src=(_EQ,)), UPat.var("v")]),), allow_any_len=True, name="red"),
   lambda red, ne, v: _select(red, ne, v, UOp.const(red.dtype.const(0), red.dtype))),
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.WHERE, src=(UPat.var("cond"), UPat.var("c"), _ZERO)),), allow_any_len=True, name="red"),
   _count_where),
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.MUL, src=[UPat.var("c"), UPat.var("x")]),), allow_any_len=True, name="red"), _scaled),
])

def fold_reduces(value:UOp) -> UOp:
  """value with every sum that only counts or selects replaced by its closed form."""
  return graph_rewrite(value, pm_reduce_fold, name="schedule: fold reduces")

__all__ = ["pm_reduce_fold", "fold_reduces"]
