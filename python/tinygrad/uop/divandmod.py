"""Folding of floor division and modulo of index expressions (FLOORDIV/FLOORMOD on weakint).

`fold_divmod_general(d)` tries, in order, and returns the first rewrite that applies (None if none does):
  1. the quotient is constant over the value ranges: x//y -> q, x%y -> x - q*y
  2. (constant divisor c > 0)
     - nested div: (x % (k*c)) // c -> (x//c) % k
     - nested mod in a sum: (a%(k*c) + b) % c -> (a + b) % c
     - congruence: replace each term's coefficient f by a remainder r == f (mod c) (f%c, or f%c-c when that is smaller or the
       choice matters); when the remainder sum fits in one period of c the quotient is exact: (4*a + b)//4 -> a when 0 <= b < 4
     - gcd: a common factor g of every coefficient and c comes out: (6*a + 4*b)//4 -> (3*a + 2*b)//2
     - nesting by a factor: x//c -> (x//f)//(c/f) for a coefficient f that divides c, when that folds x//f
  3. (any divisor) a common (symbolic) factor of numerator and divisor cancels: (a*b*2)//(b*4) -> a//2
  4. (non-negative operands) terms that are multiples of the divisor leave the division: (y*v + r)//y -> v + r//y

Everything is exact for Python floor semantics; conditions are checked on the value ranges (vmin/vmax) of the operands.
The result of each node is cached on the node, so the rewrite loop revisiting a node (or simplify of a shared
subexpression) does not redo the search.
"""
from __future__ import annotations
import itertools
import math
from typing import Callable
from tinygrad.uop import Ops
from tinygrad.uop.base import PatternMatcher, UOp, ParamArg
from tinygrad.uop.upat import UPat
from tinygrad.dtype import dtypes
from tinygrad.helpers import unwrap
# a module global is read faster than Ops.X (see uop/__init__.py): the hottest code uses these aliases
_ADD, _BUFFER, _CONST, _FLOORDIV, _FLOORMOD, _MUL = Ops.ADD, Ops.BUFFER, Ops.CONST, Ops.FLOORDIV, Ops.FLOORMOD, Ops.MUL
_PARAM, _STACK = Ops.PARAM, Ops.STACK

_NONE = object()  # the cached "no rewrite"

def _usum(uops:list[UOp]) -> UOp: return uops[0].usum(*uops[1:])

def _lincomb(pairs, k:int, like:UOp) -> UOp:
  """sum(v*f) + k built directly in the form the rules leave it in: no zero terms, v*1 is v, the constant last and only if nonzero.
  (Building `0 + f0*v0 + ... + k` through the operators simplifies to the same node, through many more rewrites.)"""
  dt, ret = like.dtype, None
  for v, f in pairs:
    if f == 0: continue
    t = v if f == 1 else UOp(_MUL, v.dtype, (v, UOp(_CONST, v.dtype, (), f)))
    ret = t if ret is None else UOp(_ADD, dt, (ret, t))
  if ret is None: return UOp(_CONST, dt, (), k)
  return ret if k == 0 else UOp(_ADD, dt, (ret, UOp(_CONST, dt, (), k)))

def fold_divmod_general(d:UOp) -> UOp|None:
  if (r := d.__dict__.get("_divmod_fold")) is not None: return None if r is _NONE else r
  r, ref = _fold_divmod(d)
  d.__dict__["_divmod_fold"] = _NONE if r is None else r
  if ref is not None: d.__dict__["_divmod_ref"] = ref
  return r

# Some results are built directly in their simplified shape (no `0 + ...`, no `x*1`). Where candidates are ranked by size
# (nesting by a factor), the ranking uses the size of the result spelled out with the operators, which is what tinygrad
# compares; a result built directly keeps a builder for that spelling.
def _spelled(d:UOp, r:UOp) -> UOp:
  """The operator-spelled form of r, the cached fold of d."""
  return ref() if (ref := d.__dict__.get("_divmod_ref")) is not None else r

def _can_divide(u:UOp, v:int) -> bool:
  """Whether u.divides(v) is not None, without building the quotient."""
  if v == 1: return True
  op = u.op
  if op is _CONST: return u.arg % v == 0
  if op is _MUL: return _can_divide(u.src[0], v) or _can_divide(u.src[1], v)
  if op is _ADD: return _can_divide(u.src[0], v) and _can_divide(u.src[1], v)
  if op is _STACK: return all(_can_divide(s, v) for s in u.src)
  if (op is _PARAM or op is _BUFFER) and isinstance(u.arg, ParamArg) and u.arg.multiple_of is not None: return u.arg.multiple_of % v == 0
  return False

def _const_factor(u:UOp) -> int:
  # UOp.const_factor with the common shapes first
  op = u.op
  if op is _MUL:
    s0, s1 = u.src
    return s0.arg if s0.op is _CONST else s1.arg if s1.op is _CONST else 1
  return u.const_factor() if op is _ADD or op is _CONST or op is _STACK or op is _PARAM or op is _BUFFER else 1

def _fold_divmod(d:UOp) -> tuple[UOp|None, Callable[[], UOp]|None]:
  """(the rewrite or None, a builder of its operator-spelled form when the rewrite is built in another shape)."""
  x, y = d.src
  is_mod = d.op is _FLOORMOD
  ylo, yhi = y.vmin, y.vmax
  if ylo == yhi == 0:
    raise ZeroDivisionError(f"{'Mod' if is_mod else 'Division'} by zero trying to rewrite {x.alu(d.op, y).render(simplify=False)}")
  xlo, xhi = x.vmin, x.vmax
  y_const = y.op is _CONST
  # 1. the quotient is the same for every value in range (by the interval analysis of x//y)
  if type(xlo) is int and type(xhi) is int and type(ylo) is int and type(yhi) is int:
    # an empty numerator range (a RANGE with end 0) has quotient 0
    if (q := 0 if xlo > xhi else xlo//ylo if ylo*yhi > 0 else None) is not None and (xlo > xhi or q == xhi//ylo == xlo//yhi == xhi//yhi):
      if not is_mod: return d.const_like(q), None
      if not y_const: return x - q*y, None
      return x if q == 0 else UOp(_ADD, x.dtype, (x, UOp(_CONST, x.dtype, (), -q*y.arg))), lambda: x - q*y
  xop = x.op
  # a PARAM known to be a multiple of c is irreducible under // c and zero under % c
  if xop is _PARAM and y_const and x.arg.multiple_of is not None and y.arg and x.arg.multiple_of % y.arg == 0:
    return (d.const_like(0) if is_mod else None), None

  if xop is _ADD and x.src[1].op is _CONST: x_peeled, const = x.src[0], x.src[1].arg
  else: x_peeled, const = x, 0
  uops_no_const = x_peeled.split_uop(_ADD) if x_peeled.op is _ADD else [x_peeled]
  factors = []
  for u in uops_no_const:
    if u.op is _MUL:
      s0, s1 = u.src
      factors.append(s0.arg if s0.op is _CONST else s1.arg if s1.op is _CONST else 1)
    else: factors.append(_const_factor(u))

  # 2. constant divisor
  if y_const and (c := y.arg) > 0:
    if not is_mod and xop is _FLOORMOD and (k := x.src[1].divides(c)) is not None and k.vmin > 0: return x.src[0] // y % k, None
    if is_mod:
      new_xs, changed = [], False
      for u in uops_no_const:
        if u.op is _FLOORMOD and (u.src[1].arg % c == 0 if u.src[1].op is _CONST else u.src[1].divides(c) is not None):
          u, changed = u.src[0], True
        new_xs.append(u)
      if changed: return (_usum(new_xs) + const) % y, None

    # the ranges of the terms divided by their factors, without building them: exact when both ends of a term's range are
    # multiples of its factor. The terms themselves are only built when a rewrite needs them.
    bounds = []
    for u, f in zip(uops_no_const, factors):
      lo, hi = u.vmin, u.vmax
      if f == 1: bounds.append((lo, hi))
      elif f and type(lo) is int and type(hi) is int and lo % f == 0 and hi % f == 0: bounds.append((lo//f, hi//f) if f > 0 else (hi//f, lo//f))
      else: break
    built: list[UOp|None] = [None]*len(factors)
    def terms() -> list[UOp]:
      for i, u in enumerate(uops_no_const):
        if built[i] is None: built[i] = u.divides(factors[i])
      return built  # type: ignore[return-value]
    if len(bounds) != len(factors): bounds = [(t.vmin, t.vmax) for t in terms()]
    cm = const % c

    # congruence: the remainder sum stays in one period of c (the range of a sum of scaled terms is the sum of their ranges).
    # A coefficient f is replaced by its remainder r == f (mod c) of smallest magnitude; both signs are tried for a lone term
    # and on a tie (f%c == c/2).
    rem_sets: list[tuple[int, ...]] = []
    for f in factors:
      r = f % c
      rem_sets.append((r, r-c) if r*2 == c or len(factors) == 1 else (r,) if r < c-r else (r-c,))
    for rems in (itertools.product(*rem_sets) if any(len(rs) == 2 for rs in rem_sets) else (tuple(rs[0] for rs in rem_sets),)):
      lo = hi = cm
      for r, (t0, t1) in zip(rems, bounds):  # type: ignore[misc]
        if r >= 0: lo, hi = lo + r*t0, hi + r*t1
        else: lo, hi = lo + r*t1, hi + r*t0
      if lo//c == hi//c:
        ts, k = terms(), lo//c
        if is_mod: return _lincomb(zip(ts, rems), cm - k*c, x), lambda rems=rems: sum(r*v for r, v in zip(rems, ts)) + cm - k*c
        qs = [(f-r)//c for f, r in zip(factors, rems)]
        return _lincomb(zip(ts, qs), const//c + k, x), lambda: sum(q*v for q, v in zip(qs, ts)) + const//c + k

    # gcd: a factor common to every coefficient and c
    if (g := math.gcd(*factors, c)) > 1:
      div = x_peeled.divides(g)
      assert div is not None, "every term has g as a factor"
      new_x = div.simplify() + (const//g) % (c//g)
      if new_x.vmin >= 0:
        if is_mod: return new_x % (c//g) * g + const % g, None
        return new_x // (c//g) + const//c, None

    # nesting by a factor f | c of one of the coefficients. The candidates are ranked by the size of their spelled-out form;
    # only a tie-break between several needs those forms built.
    facs: set[int] = set()
    for u, f in zip(uops_no_const, factors):
      if 1 < abs(f) < c and c % f == 0 and u.op is not _CONST: facs.add(abs(f))
    cands = []
    for fac in facs:
      xd = x//fac
      if (newxs := fold_divmod_general(xd)) is None: continue
      if not is_mod: cands.append((xd, newxs, fac, None))
      elif xlo >= 0 and newxs.vmin >= 0:
        b_parts = [f % fac * t for f, t in zip(factors, terms()) if f % fac]
        if const % fac: b_parts.append(x.const_like(const % fac))
        b = _usum(b_parts) if b_parts else x.const_like(0)
        if 0 <= b.vmin and b.vmax < fac: cands.append((xd, newxs, fac, b))
    def build(newxs:UOp, fac:int, b:UOp|None) -> UOp: return newxs // (c // fac) if b is None else (newxs % x.ufix(c//fac))*fac + b
    if len(cands) == 1:
      xd, newxs, fac, b = cands[0]
      return build(newxs, fac, b), lambda: build(_spelled(xd, newxs), fac, b)
    if cands:
      ranked = []
      for xd, newxs, fac, b in cands:
        r = build(sp := _spelled(xd, newxs), fac, b)
        # a quotient is ranked by the size of the inner fold, a remainder by the size of the whole candidate
        ranked.append((len((sp if b is None else r).backward_slice), r))
      return min(ranked, key=lambda t: t[0])[1], None

  # 3. a common factor of numerator and divisor cancels. With a CONST divisor only the const factors can be common
  # (its symbolic part is 1), so that gcd is computed without building it.
  all_uops = uops_no_const + [x.src[1]] if x is not x_peeled else uops_no_const
  if y_const and 0 not in factors:
    gcd = None if (g := math.gcd(*factors, const, y.arg)) == 1 else y.const_like(g)
  else:
    gcd = UOp.gcd(*all_uops, y).simplify()
    if gcd.op is _CONST and gcd.arg == 1: gcd = None
  if gcd is not None:
    num, den = x.divide_exact(gcd), y.divide_exact(gcd)
    assert num is not None and den is not None, "gcd divides both"
    ret = num.alu(d.op, den)
    return (ret*gcd if is_mod else ret), None

  # 4. with non-negative operands, the multiples of the divisor leave the division
  if ylo < 0 or xlo < 0: return None, None
  if y_const:
    # nothing leaves unless some term has a factor outside [0, c) or is divisible by c
    c = y.arg
    for f in factors:
      if not 0 <= f < c: break
    else:
      if x is x_peeled or 0 <= const < c:
        for u in all_uops:
          if _can_divide(u, c): break
        else: return None, None
  if not y_const: return _factor_remainder_generic(x, y, all_uops, is_mod)
  # (the const divisor case builds its sums directly; spelled() gives the operator spelling for size ranking)
  c, dt = y.arg, x.dtype
  quo: list[UOp] = []
  rem: list[UOp] = []
  moved = False  # whether any multiple of c leaves the division
  for u in all_uops:
    if _can_divide(u, c):
      moved = True
      if not is_mod: quo.append(unwrap(u.divides(c)))
    elif (cf := u.const_factor()) % c != cf:
      moved = True
      base = _quotient(u, cf)
      rem.append(_scaled(base, cf % c))
      if not is_mod: quo.append(_scaled(base, cf//c))
    else: rem.append(u)
  if not moved: return None, None
  new_x = _chain(rem, dt)
  if new_x.vmin < 0: return None, None
  def spelled() -> UOp:
    sq, sr = [], []
    for u in all_uops:
      if (qu := u.divide_exact(y)) is not None: sq.append(qu)
      elif (cf := u.const_factor()) % c != cf:
        sr.append((base := unwrap(u.divides(cf)))*(cf % c))
        sq.append(base*(cf//c) if not is_mod else u.const_like(0))
      else: sr.append(u)
    nx = sum(sr) + x.const_like(0)
    return nx % y if is_mod else nx//y + sum(sq)
  return (new_x % y if is_mod else UOp(_ADD, d.dtype, (new_x//y, _chain(quo, dt)))), spelled

def _factor_remainder_generic(x:UOp, y:UOp, all_uops:list[UOp], is_mod:bool) -> tuple[UOp|None, None]:
  quo, rem = [], []
  for u in all_uops:
    if (qu := u.divide_exact(y)) is not None: quo.append(qu)
    else: rem.append(u)
  if not quo: return None, None
  new_x = sum(rem) + x.const_like(0)
  if new_x.vmin < 0: return None, None
  return (new_x % y if is_mod else new_x//y + sum(quo)), None

def _quotient(u:UOp, f:int) -> UOp:
  """u.divides(f) in simplified shape for the common `v*f` (divides spells it `v*1`)."""
  if u.op is _MUL:
    s0, s1 = u.src
    if s0.op is _CONST and s0.arg == f: return s1
    if s1.op is _CONST and s1.arg == f and not _can_divide(s0, f): return s0
  return unwrap(u.divides(f))

def _scaled(u:UOp, k:int) -> UOp:
  return u if k == 1 else UOp(_MUL, u.dtype, (u, UOp(_CONST, u.dtype, (), k)))

def _chain(uops:list[UOp], dt) -> UOp:
  """uops[0] + uops[1] + ... left-nested, without zero constants (a sum of none is 0)."""
  ret = None
  for u in uops:
    if u.op is _CONST and u.arg == 0: continue
    ret = u if ret is None else UOp(_ADD, dt, (ret, u))
  return UOp(_CONST, dt, (), 0) if ret is None else ret

def _split_const_divmod(n:UOp, x:UOp, c:UOp, d:UOp) -> UOp|None:
  # (x+c)//d -> (x+c%d)//d + c//d and (x+c)%d -> (x+c%d)%d: the multiple of d leaves the const (any d != 0)
  if d.arg == 0 or c.arg % d.arg == c.arg: return None
  return (x + c.arg % d.arg)//d + c.arg//d.arg if n.op is _FLOORDIV else (x + c.arg % d.arg) % d

div_and_mod_symbolic = PatternMatcher([
  # (x//c + a)//d -> (x + a*c)//(c*d) for c > 0, d > 0
  ((UPat.var("x")//UPat.cvar("c") + UPat.cvar("a"))//UPat.cvar("d"), lambda x, c, a, d: (x+a*c)//(c*d) if d.vmin > 0 else None),
  (UPat((Ops.FLOORDIV, Ops.FLOORMOD), src=(UPat.var("x", dtypes.weakint)+UPat.cvar("c"), UPat.cvar("d")), name="n"), _split_const_divmod),
  (UPat((Ops.FLOORDIV, Ops.FLOORMOD), dtypes.weakint, name="d"), fold_divmod_general),
])
