"""Overflow-safe ratios: x * (1/(1+x)) where x has overflowed to inf is inf * 0 = NaN, though the ratio is 1. exp(x)/(1+exp(x)) (a
hand-written sigmoid) and its gradient, e * (1/(1+e) - e/(1+e)/(1+e)), are NaN past x = 88 that way. This pass computes each such pair
as 1 - 1/(1+x) where x > 1 (its limit is exact) and as x/(1+x) elsewhere (one rounding, and the small values 1 - 1/(1+x) would lose).

The pair may sit anywhere in a chain of products, and a product over a sum whose terms hold 1/(1+x) is distributed over the sum so
that x meets them (a gradient's shape). Runs before the render forms, which turn a * (1/b) into a / b."""
from __future__ import annotations
import functools
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops
from tinygrad.dtype import dtypes

def _factors(u:UOp) -> list[UOp]:
  """The operands of a chain of MULs, left to right."""
  out, todo = [], [u]
  while todo:
    if (v := todo.pop()).op is Ops.MUL: todo += [v.src[1], v.src[0]]
    else: out.append(v)
  return out

def _ratio_base(r:UOp) -> UOp|None:
  """x where r is 1/(1+x) (or 1/(x+1)), else None."""
  if r.op is not Ops.RECIPROCAL or (s := r.src[0]).op is not Ops.ADD: return None
  for x, c in (s.src, s.src[::-1]):
    if c.op is Ops.CONST and c.arg == 1: return x
  return None

def _ratio(x:UOp, r:UOp) -> UOp:
  """x * r for r = 1/(1+x), without inf * 0."""
  one = x.const_like(1.0)
  one_minus_r = UOp(Ops.ADD, x.dtype, (one, UOp(Ops.MUL, x.dtype, (r, x.const_like(-1.0)))))
  return UOp(Ops.WHERE, x.dtype, (UOp(Ops.CMPLT, dtypes.bool, (one, x)), one_minus_r, UOp(Ops.FDIV, x.dtype, (x, r.src[0]))))

def _pair_in_chain(m:UOp) -> UOp|None:
  if not dtypes.is_float(m.dtype): return None
  fs = _factors(m)
  for i, r in enumerate(fs):
    if (x := _ratio_base(r)) is not None and x in fs:
      rest = [f for j, f in enumerate(fs) if j != i]
      rest.remove(x)
      return functools.reduce(lambda a, b: UOp(Ops.MUL, m.dtype, (a, b)), rest, _ratio(x, r))
  return None

def _distribute(m:UOp, x:UOp, s:UOp) -> UOp|None:
  if not dtypes.is_float(m.dtype) or not any(_ratio_base(f) is x for t in s.src for f in _factors(t)): return None
  return UOp(Ops.ADD, m.dtype, tuple(UOp(Ops.MUL, m.dtype, (x, t)) for t in s.src))

pm_safe_ratio = PatternMatcher([
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat(Ops.ADD, name="s")], name="m"), _distribute),
  (UPat(Ops.MUL, name="m"), _pair_in_chain),
])
