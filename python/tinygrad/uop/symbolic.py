"""The symbolic rules: PatternMatchers that simplify integer (index) and boolean expressions.

- `symbolic_simple`: local folding that never looks more than a level or two deep: identities (x+0, x*1, x//1, x^x, ...),
  constant folding, boolean identities, casts, simple `where` folding, Invalid (an index that points nowhere) propagation.
- `commutative`: a canonical operand order for commutative index ops (by `UOp.tuplize`), so equal sums are equal nodes.
- `symbolic`: everything above plus like terms (x*a + x*b -> x*(a+b)), reassociation of constants to the end of a chain,
  comparison folding from value ranges, where/max folding and division/modulo folding (divandmod.py).

UOp.simplify() runs `symbolic` to a fixed point. The rules only need the node they match and its sources' value ranges
(vmin/vmax, cached per node), so each rewrite is local and the Rust graph_rewrite drives the whole traversal.
"""
from __future__ import annotations
import math
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.base import UOp, PatternMatcher, const_value
from tinygrad.uop.upat import UPat
from tinygrad.uop.alu import exec_alu
from tinygrad.uop.divandmod import div_and_mod_symbolic
from tinygrad.dtype import dtypes, can_lossless_cast, Invalid, bitcast, truncate
from tinygrad.helpers import dedup, flatten, unwrap
# a module global is read faster than Ops.X (see uop/__init__.py): the hottest code uses these aliases
_ADD, _CAST, _CMOD, _CONST, _FLOORDIV, _FLOORMOD = Ops.ADD, Ops.CAST, Ops.CMOD, Ops.CONST, Ops.FLOORDIV, Ops.FLOORMOD
_INDEX, _MUL, _STACK = Ops.INDEX, Ops.MUL, Ops.STACK

__all__ = ["pm_fold_values",
           "symbolic_simple", "commutative", "symbolic", "pm_data_invalid", "invalid_pat", "invalid_gate", "const_folding_pat", "lt_folding",
           "canonicalize_simplex", "fold_add_divmod_recombine", "div_and_mod_symbolic"]

# ******** constant folding ********

_DIVMOD = (Ops.FLOORDIV, Ops.FLOORMOD, Ops.CDIV, Ops.CMOD)

def _divides_by_zero(a:UOp, vals:list) -> bool:
  # an int division by zero (undefined in C); a float one is IEEE's (inf or NaN)
  return a.op in _DIVMOD and not dtypes.is_float(a.dtype) and any(v == 0 for v in (vals[1] if isinstance(vals[1], tuple) else (vals[1],)))

def fold_const_alu(a:UOp) -> UOp|None:
  vals = [const_value(s) for s in a.src]
  if any(v is None for v in vals): return None
  if _divides_by_zero(a, vals):
    raise ZeroDivisionError(f"{'Mod' if a.op in (_FLOORMOD, _CMOD) else 'Division'} by zero in {a.render(simplify=False)}")
  # no truncation: a folded index constant keeps its mathematical value, emission decides the width
  return a.const_like(exec_alu(a.op, a.dtype, vals, False))

def fold_value_alu(a:UOp) -> UOp|None:
  """Constant folding of a kernel's values (the codegen's pass): the same evaluation, but the result is what the device computes
  (ints wrap, floats round to their dtype), and what the device leaves undefined (an int division by a zero constant, a shift out
  of range) is left to it instead of raising."""
  vals = [const_value(s) for s in a.src]
  if any(v is None for v in vals) or _divides_by_zero(a, vals): return None
  try: return a.const_like(exec_alu(a.op, a.dtype, vals))
  except (ArithmeticError, ValueError, TypeError): return None

def divide_by_const_zero(d:UOp) -> UOp|None:
  raise ZeroDivisionError(f"{'Mod' if d.op in (_FLOORMOD, _CMOD) else 'Division'} by zero in {d.render(simplify=False)}")

def fold_bitcast(root:UOp, c:UOp) -> UOp|None:
  if c.dtype.fmt is None or root.dtype.fmt is None or c.dtype.itemsize != root.dtype.itemsize: return None
  return root.const_like(bitcast(truncate[c.dtype](c.arg), c.dtype, root.dtype))

def simplify_pow(x:UOp, c:UOp) -> UOp|None:
  if c.arg < 0: return x.reciprocal().pow(-c.arg)
  if c.arg == 0: return x.const_like(1)
  if int(c.arg-0.5)+0.5 == c.arg: return x.pow(c.arg-0.5) * x.sqrt()
  if int(c.arg) == c.arg: return (y := x.pow(c.arg//2)) * y * (x if c.arg % 2 == 1 else 1)
  return None

# (CONST and STACK of CONSTs fold)
const_folding_pat = UPat((Ops.CONST, Ops.STACK))

# ******** (x%c)*m + (x//c)*(c*m) recombines into x*m ********

def _quotient_base(q:UOp, base:UOp, div:int) -> UOp|None:
  """The B with q == B//div and B == base (mod div), or None. Consts move freely under that congruence: the quotient may be
  merged ((x//c + a)//div -> (x + a*c)//(c*div) for div > 0) and shifted ((y + k*D)//D == y//D + k)."""
  (q, s), (num, a) = q.pop_const(), base.pop_const()
  if q.op is not _FLOORDIV or q.src[1].op is not _CONST: return None
  if div > 0 and num.op is _FLOORDIV and num.src[1].op is _CONST and q.src[1].arg == (c := num.src[1].arg)*div: num, a, D = num.src[0], a*c, c*div
  elif q.src[1].arg == div: D = div
  else: return None
  (x, xa), (p, pa) = num.pop_const(), q.src[0].pop_const()
  if p is not x or (t := xa + a - pa) % D: return None
  return base - k*div if (k := t//D - s) else base

def _is_mod_term(t:UOp) -> bool:
  return (t.op is _FLOORMOD or (t.op is _MUL and t.src[0].op is _FLOORMOD and t.src[1].op is _CONST)) and \
    (t if t.op is _FLOORMOD else t.src[0]).src[1].op is _CONST

def _has_mod_term(x:UOp) -> bool:
  """Whether a term of the sum x is a (scaled) mod by a CONST; cached on each ADD, so a longer sum only checks its new term."""
  if x.op is not _ADD: return _is_mod_term(x)
  if (r := x.__dict__.get("_has_mod_term")) is None: r = x.__dict__["_has_mod_term"] = _has_mod_term(x.src[0]) or _has_mod_term(x.src[1])
  return r

def fold_add_divmod_recombine(x:UOp) -> UOp|None:
  # a scaled mod (base%div)*mul recombines with a term q*(div*mul) that carries the quotient of some b == base (mod div):
  #   q == b//div     -> b*mul              (full recombine)
  #   q == (b//div)%d -> (b%(div*d))*mul    (partial, into a wider mod; needs d > 0)
  d = x.__dict__
  if (has := d.get("_has_mod_term")) is None:
    s0, s1 = x.src
    # (the left operand of a sum is usually a sum that was already checked)
    if (has := (s0.__dict__.get("_has_mod_term") if s0.op is _ADD else None)) is None: has = _has_mod_term(s0)
    has = d["_has_mod_term"] = has or _has_mod_term(s1)
  if not has: return None
  terms = x.split_uop(_ADD)
  for i, u in enumerate(terms):
    mod, mul = u.pop_const(_MUL)
    if mod.op is not _FLOORMOD or mod.src[1].op is not _CONST: continue
    base, div = mod.src[0], mod.src[1].arg
    for j, v in enumerate(terms):
      q, scale = v.pop_const(_MUL)
      if i == j or scale != div*mul: continue
      rest = [t for k, t in enumerate(terms) if k not in (i, j)]
      if (b := _quotient_base(q, base, div)) is not None: return (b*mul).usum(*rest)
      if q.op is _FLOORMOD and q.src[1].op is _CONST and (d := q.src[1].arg) > 0 and (b := _quotient_base(q.src[0], base, div)) is not None:
        return ((b % (div*d))*mul).usum(*rest)
  return None

# ******** Invalid: the value of an index that points nowhere ********
# Invalid poisons a value: ops move inside the gate so the Invalid reaches the LOAD/STORE and folds there. This runs before
# the other rules so that 0*(something that may be Invalid) does not become 0. An Invalid CONST always has dtype bool.

invalid_pat = UPat(Ops.CONST, dtypes.bool, arg=Invalid, name="i")
invalid_gate = UPat.var("cond").where(UPat.var("x"), invalid_pat)

def _where_lift_true(cond:UOp, i:UOp, x:UOp, a:UOp, c:UOp) -> UOp|None:
  return (a.logical_not() | cond).where(a.where(x, c), i) if not c.is_invalid else None
def _where_lift_false(cond:UOp, i:UOp, x:UOp, a:UOp, b:UOp) -> UOp|None:
  return (a | cond).where(a.where(b, x), i) if not b.is_invalid else None

pm_data_invalid = PatternMatcher([
  (invalid_pat.broadcast(), lambda i: i),
  (UPat(GroupOp.Unary | {Ops.CAST, Ops.BITCAST}, src=(invalid_pat,)), lambda i: i),
  (UPat(GroupOp.Unary | {Ops.CAST, Ops.BITCAST}, src=(invalid_gate,), name="op"), lambda cond, x, op, i: cond.where(op.replace(src=(x,)), i)),
  # binary ops move inside the gate, with Invalid in the false branch
  (UPat(GroupOp.Binary, src=(invalid_gate, UPat.var("y")), name="alu"), lambda cond, x, y, alu, i: cond.where(x.alu(alu.op, y), i)),
  (UPat(GroupOp.Binary, src=(UPat.var("y"), invalid_gate), name="alu"), lambda cond, x, y, alu, i: cond.where(y.alu(alu.op, x), i)),
  (UPat(GroupOp.Binary - GroupOp.Comparison, src=[invalid_pat, UPat()]), lambda i: i),
  # an Invalid condition poisons the where; a gated condition lifts its gate out
  (invalid_pat.where(UPat(), UPat()), lambda i: i),
  (invalid_gate.where(UPat.var("a"), UPat.var("b")), lambda cond, x, i, a, b: cond.where(x.where(a, b), i)),
  # where(cond, Invalid, val) -> where(!cond, val, Invalid)
  (UPat.var("cond").where(invalid_pat, UPat.var("val")), lambda cond, i, val: cond.logical_not().where(val, i) if not val.is_invalid else i),
  # a.where(cond.where(x, Invalid), c) -> (!a | cond).where(a.where(x, c), Invalid), and the mirror image
  (UPat.var("a").where(invalid_gate, UPat.var("c")), _where_lift_true),
  (UPat.var("a").where(UPat.var("b"), invalid_gate), _where_lift_false),
  # a LOAD/STORE through an Invalid index does nothing
  (UPat(Ops.STORE, src=(UPat(Ops.INDEX, src=(UPat(), invalid_pat), allow_any_len=True).or_casted(), UPat())), lambda i: UOp(Ops.NOOP)),
  (UPat(Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), invalid_pat), allow_any_len=True).or_casted(),), allow_any_len=True, name="x"),
   lambda x, i: x.src[1] if len(x.src) > 1 else x.const_like(0)),
])

# ******** symbolic_simple ********

def fold_const_where(gate:UOp, c0:UOp, c1:UOp, w:UOp) -> UOp:
  ret = c0 if gate.arg else c1
  # a where with a strong dtype folding to a weak const branch keeps the strong dtype
  if ret.op is _CONST and ret.dtype in dtypes.weaks and w.dtype not in dtypes.weaks: return UOp.const(ret.arg, w.dtype)
  return ret

def _mask_shift(x:UOp, mask:UOp, k:UOp) -> UOp|None:
  # (x & mask) >> k -> x >> k when mask keeps every bit at or above k
  return x >> k.arg if k.arg >= 0 and mask.arg | ((1 << k.arg) - 1) == -1 else None
def _mask_div(x:UOp, mask:UOp, c:UOp) -> UOp|None:
  # (x & mask) // c -> x // c for a power of two c when mask keeps every bit at or above log2(c)
  return x // c.arg if c.arg > 0 and c.arg & (c.arg-1) == 0 and mask.arg | (c.arg-1) == -1 else None
def _mul_zero(x:UOp) -> UOp:
  # x*0 -> 0, except that a NaN/inf constant stays NaN
  return x.const_like(math.nan if x.op is _CONST and isinstance(x.arg, float) and (math.isnan(x.arg) or math.isinf(x.arg)) else 0)
def _bool_cast_ne(x:UOp, c:UOp) -> UOp:
  # CAST(bool x) is 0 or 1
  return x if c.arg == 0 else x.logical_not() if c.arg == 1 else x.const_like(True)
def _pow_const_base(c:UOp, x:UOp) -> UOp|None: return c if c.arg == 1 else (x*math.log2(c.arg)).exp2() if c.arg > 0 else None

symbolic_simple = pm_data_invalid + PatternMatcher([
  # ** division by a constant zero is an error, not a value **
  (UPat(_DIVMOD, src=(UPat(), UPat.const(0)), name="d"), divide_by_const_zero),
  # ** self folding **
  (UPat((Ops.ADD, Ops.XOR, Ops.OR), src=[UPat.var("x"), UPat.const(0)]), lambda x: x),
  (UPat((Ops.SHL, Ops.SHR), src=(UPat.var("x"), UPat.const(0))), lambda x: x),
  (UPat.var("x") * 1, lambda x: x),
  (UPat.var("x") // UPat.var("x"), lambda x: x.const_like(1)),
  (UPat.var("x") // 1, lambda x: x),
  (UPat.var("x") // -1, lambda x: -x),
  ((UPat.var("x") ^ UPat.var("y")) ^ UPat.var("y"), lambda x, y: x),
  ((UPat.var() % UPat.var("y")).named("base") % UPat.var("y"), lambda base, y: base),
  # variations of (x%c) + (x//c)*c = x
  (UPat(Ops.ADD, dtype=dtypes.weakint, name="x"), fold_add_divmod_recombine),
  (UPat.var("x", dtype=dtypes.bool) & UPat.cvar("c"), lambda x, c: x if c.arg else c),
  (UPat.var("x", dtype=dtypes.bool) | UPat.cvar("c"), lambda x, c: c if c.arg else x),
  (UPat.var("x", dtype=dtypes.bool) != UPat.const(False, dtypes.bool), lambda x: x),
  (UPat(GroupOp.Idempotent, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
  (UPat.var("x", dtype=dtypes.bool).logical_not().logical_not(), lambda x: x),
  (UPat.var("x", dtype=dtypes.bool).where(UPat.const(True, dtypes.bool), UPat.const(False, dtypes.bool)), lambda x: x),
  (UPat.var("x", dtype=dtypes.bool).where(UPat.const(False, dtypes.bool), UPat.const(True, dtypes.bool)), lambda x: x.logical_not()),
  (UPat.var("x", dtype=dtypes.bool).cast(dtypes.ints+(dtypes.weakint,)) != UPat.cvar("c"), _bool_cast_ne),
  (UPat.var("x", dtype=dtypes.ints+(dtypes.bool, dtypes.weakint)).trunc(), lambda x: x),
  # ** zero folding **
  (UPat.var("x") < UPat.var("x"), lambda x: x.const_like(False, dtypes.bool)),
  (UPat.var("x") % UPat.var("x"), lambda x: x.const_like(0)),
  (UPat.var("x") ^ UPat.var("x"), lambda x: x.const_like(0)),
  (UPat.var("x") & 0, lambda x: x.const_like(0)),
  ((UPat.var("x") & UPat.cvar("mask")) >> UPat.cvar("k"), _mask_shift),
  ((UPat.var("x") & UPat.cvar("mask")) // UPat.cvar("c"), _mask_div),
  (UPat.var("x", dtype=dtypes.ints+(dtypes.bool, dtypes.weakint)) != UPat.var("x"), lambda x: x.const_like(False, dtypes.bool)),
  # ** constant folding **
  # a CAST to a concrete dtype of a CONST is a value conversion
  (UPat(Ops.CAST, dtypes.all, name="root", src=(UPat.cvar("c"),)), lambda root, c: root.const_like(c.arg)),
  (UPat(GroupOp.Unary, src=(const_folding_pat,), name="a"), fold_const_alu),
  (UPat(GroupOp.Binary - {Ops.THREEFRY}, src=(const_folding_pat,)*2, name="a"), fold_const_alu),
  (UPat(GroupOp.Ternary, src=(const_folding_pat,)*3, name="a"), fold_const_alu),
  # bool MUL is AND, ADD and MAX are OR (so no other rule treats them as arithmetic)
  (UPat.var("x", dtype=dtypes.bool) * UPat.var("y", dtype=dtypes.bool), lambda x, y: x & y),
  (UPat.var("x", dtype=dtypes.bool) + UPat.var("y", dtype=dtypes.bool), lambda x, y: x | y),
  (UPat.var("x", dtype=dtypes.bool).maximum(UPat.var("y", dtype=dtypes.bool)), lambda x, y: x | y),
  # ** float division (x * reciprocal(y)) **
  (UPat.cvar("x", arg=0) / 0, lambda x: x.const_like(math.nan)),
  ((UPat.var("x") * 0) / 0, lambda x: x.const_like(math.nan)),
  # these can be wrong when x or x2 is 0
  (UPat.var("x") / UPat.var("x"), lambda x: x.const_like(1)),
  ((UPat.var("x") * UPat.var("x2")) / UPat.var("x2"), lambda x, x2: x),
  (UPat.var("x") * 0, _mul_zero),
  # ** cast/bitcast **
  (UPat((Ops.CAST, Ops.BITCAST), name="root"), lambda root: root.src[0] if root.dtype is root.src[0].dtype else None),
  (UPat(Ops.BITCAST, name="root", src=(UPat.cvar("c"),)), fold_bitcast),
  # b.cast(a).cast(b) -> b when a holds every value of b
  (UPat.var("x").cast(name="a").cast(name="b"), lambda x, a, b: x if x.dtype is b.dtype and can_lossless_cast(b.dtype, a.dtype) else None),
  (UPat(Ops.BITCAST, name="b", src=(UPat.var("x").bitcast(),)), lambda x, b: x.bitcast(b.dtype)),
  (UPat.var("x").cast(dtypes.bool), lambda x: x != 0),
  # ** pow **
  (UPat.var("x").alu(Ops.POW, UPat.cvar("c")), simplify_pow),
  (UPat.cvar("c").alu(Ops.POW, UPat.var("x")), _pow_const_base),
  # unpack a uint64 packed from two uint32 (threefry)
  (((UPat.var(None, dtypes.uint64) << 32) | UPat.var("y", dtypes.uint32).cast(dtypes.uint64)).cast(dtypes.uint32), lambda y: y),
  (((UPat.var("x", dtypes.uint32).cast(dtypes.uint64) << 32) | UPat.var(None, dtypes.uint32).cast(dtypes.uint64)) >> 32,
   lambda x: x.cast(dtypes.uint64)),
  # ** simple where folding **
  (UPat.var().where(UPat.var("val"), UPat.var("val")), lambda val: val),
  (UPat.cvar("gate").where(UPat.var("c0"), UPat.var("c1")).named("w"), fold_const_where),
  # a.where(b.where(c, d), d) -> (a & b).where(c, d); a.where(c, b.where(c, d)) -> (a | b).where(c, d)
  (UPat.var("a").where(UPat.var("b").where(UPat.var("c"), UPat.var("d")), UPat.var("d")), lambda a, b, c, d: (a & b).where(c, d)),
  (UPat.var("a").where(UPat.var("c"), UPat.var("b").where(UPat.var("c"), UPat.var("d"))), lambda a, b, c, d: (a | b).where(c, d)),
])

# ******** commutative: canonical operand order of index ops ********

def flip_commutative(x:UOp) -> UOp|None:
  # the tuplize order; different ops decide it by op alone, without building the keys
  s0, s1 = x.src
  if (o0 := s0.op) is not (o1 := s1.op): return x.replace(src=(s1, s0)) if o1 < o0 else None
  a, b = s0.tuplize, s1.tuplize
  return x.replace(src=(s1, s0)) if b < a and not a < b else None

commutative = PatternMatcher([(UPat(GroupOp.Commutative, dtype=dtypes.weakint, name="x"), flip_commutative)])

# ******** symbolic ********

def lt_folding(x:UOp, c:int) -> UOp|None:
  # sum(p) + sum(np) < c with every np term a multiple of d | c and 0 <= sum(p) < d  ->  sum(np)/d < c/d
  p: list[UOp] = []
  np: list[UOp] = []
  for u in (x.split_uop(_ADD) if x.op is _ADD else (x,)): (p if u.const_factor() == 1 else np).append(u)
  if np and (d := math.gcd(*[u.const_factor() for u in np], c)) > 1 and 0 <= sum(u.vmin for u in p) and sum(u.vmax for u in p) < d:
    return unwrap(UOp.usum(*np).divides(d)) < (c//d)
  return None

def canonicalize_simplex(X:UOp) -> UOp|None:
  # a0*x0 + a1*x1 + ... > 0 is x0 + x1 + ... > 0 when every xi >= 0 and ai > 0 (ints). The sum without the factors, or None.
  changed, ret = False, []
  for u in X.split_uop(_ADD):
    # the const of a MUL is its last source
    if u.op is _MUL and u.src[1].op is _CONST and u.src[1].arg > 0:
      changed = True
      u = u.src[0]
    if not (u.op in GroupOp.Irreducible and u.vmin >= 0): return None
    ret.append(u)
  return UOp.usum(*ret) if changed else None

def fold_where_closure(cond:UOp, t:UOp, f:UOp) -> UOp|None:
  # inside cond.where(t, f), cond is True in t and False in f
  if cond not in t.bool_slice and cond not in f.bool_slice: return None
  # INDEX gates belong to the valid/store machinery
  if any(u.op_in_backward_slice_with_self(_INDEX) for u in (cond, t, f)): return None
  return cond.where(t.substitute({cond: cond.const_like(True)}), f.substitute({cond: cond.const_like(False)}))

def _where_alu(alu:UOp, c:UOp, t:UOp, tt:UOp, f:UOp, ff:UOp) -> UOp|None:
  # alu of two wheres on the same condition merges when a branch pair is constant
  return c.where(t.alu(alu.op, tt), f.alu(alu.op, ff)) if t.op is tt.op is _CONST or f.op is ff.op is _CONST else None
def _where_add(y:UOp, c:UOp, t:UOp, tt:UOp, f:UOp, ff:UOp) -> UOp|None:
  return y + c.where(t+tt, f+ff) if t.op is tt.op is _CONST or f.op is ff.op is _CONST else None

def _const_if_fixed(x:UOp) -> UOp|None: return x.const_like(x.vmin) if x.vmin == x.vmax else None
def _max_fold(x:UOp, y:UOp) -> UOp|None: return x if x.vmin >= y.vmax else y if x.vmax <= y.vmin else None

def _lt_mul_const(x:UOp, c0:UOp, c1:UOp) -> UOp|None:
  # c0*x < c1 -> sign(c0)*x < ceil(c1/|c0|)
  return (x if c0.arg > 0 else -x) < -(-c1.arg // abs(c0.arg)) if abs(c0.arg) > 1 else None
def _lt_div_const(x:UOp, d:UOp, c:UOp) -> UOp|None:
  # x//d < c -> x < c*d for d > 0, c*d < x for d < 0
  return (x < c.arg*d.arg) if d.arg > 0 else (x > c.arg*d.arg) if d.arg < 0 else None

def _two_stage(f:UOp, x:UOp, c1:UOp, c2:UOp) -> UOp: return x.alu(f.op, c1.alu(f.op, c2))

def _narrow_long(u:UOp, x:UOp, y:UOp) -> UOp|None:
  # do the math in int instead of long when no value needs more; weak consts stay weak
  if dtypes.long not in (x.dtype, y.dtype) or any(v.overflows(dtypes.int) for v in (u, x, y)): return None
  narrow = lambda v: UOp.const(v.arg) if v.op is _CONST else v.cast(dtypes.int)
  return narrow(x).alu(u.op, narrow(y)).cast(u.dtype)

_SIDE_EFFECT_OPS = {Ops.RANGE, Ops.STORE, Ops.CALL, Ops.FUNCTION, Ops.BARRIER, Ops.END, Ops.LINEAR, Ops.STAGE}
def _clean_after(x:UOp) -> UOp:
  # only RANGE/STORE/... order anything; AFTER on anything else waits on its sources instead
  return x.replace(src=(x.src[0],)+tuple(dedup(flatten([(y,) if y.op in _SIDE_EFFECT_OPS else y.src for y in x.src[1:]]))))

symbolic = symbolic_simple + commutative + PatternMatcher([
  # ** boolean algebra **
  (UPat.var("x", dtype=dtypes.bool) | UPat.var("x", dtype=dtypes.bool).logical_not(), lambda x: x.const_like(True)),
  # ** combine like terms **
  (UPat.var("x") * UPat.cvar("c0") + UPat.var("x") * UPat.cvar("c1"), lambda x, c0, c1: x*(c0+c1)),
  ((UPat.var("y") + UPat.var("x") * UPat.cvar("c0")) + UPat.var("x") * UPat.cvar("c1"), lambda x, y, c0, c1: y+x*(c0+c1)),
  (UPat.var("x") + UPat.var("x") * UPat.cvar("c"), lambda x, c: x*(c+1)),
  ((UPat.var("y") + UPat.var("x")) + UPat.var("x") * UPat.cvar("c"), lambda x, y, c: y+x*(c+1)),
  ((UPat.var("y") + UPat.var("x") * UPat.cvar("c")) + UPat.var("x"), lambda x, y, c: y+x*(c+1)),
  (UPat.var("x") + UPat.var("x"), lambda x: x*2),
  ((UPat.var("y") + UPat.var("x")) + UPat.var("x"), lambda y, x: y+x*2),
  ((UPat.var("x") / UPat.var("x2")) / UPat.var("x3"), lambda x, x2, x3: x/(x2*x3) if x2 is not x3 else None),
  (-1 * (UPat.var("x") + UPat.cvar("c")), lambda x, c: (-x)+(-c)),
  (UPat.cvar("y") * (UPat.var("x", dtype=dtypes.weakint) + UPat.cvar("c")), lambda x, y, c: (y*x)+(y*c)),
  # ** where folding **
  (UPat.var("cond", dtype=dtypes.bool).logical_not().where(UPat.var("t"), UPat.var("f")),
   lambda cond, t, f: cond.where(f, t) if not f.is_invalid else None),
  (UPat.var("cond", dtype=dtypes.bool).where(UPat.var("t"), UPat.var("f")), fold_where_closure),
  (UPat(GroupOp.Binary, name="alu", src=(UPat.var("c").where(UPat.var("t"), UPat.var("f")), UPat.var("c").where(UPat.var("tt"), UPat.var("ff")))),
   _where_alu),
  ((UPat.var("y") + UPat.var("c").where(UPat.var("t"), UPat.var("f"))) + UPat.var("c").where(UPat.var("tt"), UPat.var("ff")), _where_add),
  (UPat.var("c").where(UPat.var("t"), 0) + UPat.var("c").where(0, UPat.var("f")), lambda c, t, f: c.where(t, f)),
  # ** a node whose range is a single value is that value **
  (UPat({Ops.CMPLT, Ops.CMPNE, Ops.FLOORDIV, Ops.FLOORMOD, Ops.PARAM, Ops.AFTER, Ops.SPECIAL}, name="x"), _const_if_fixed),
  (UPat(Ops.RANGE, src=(UPat(Ops.CONST),), name="x"), _const_if_fixed),
  # ** max folding **
  # (not for floats: a<b ? b : a is a when b is NaN, max is NaN; the mirrored form below agrees with max on NaN)
  ((UPat.cvar("a") < UPat.var("b")).where(UPat.var("b"), UPat.cvar("c")),
   lambda a, b, c: UOp.maximum(a, b) if a.arg == c.arg and not dtypes.is_float(b.dtype) else None),
  ((UPat.var("a") < UPat.cvar("b")).where(UPat.cvar("c"), UPat.var("a")), lambda a, b, c: UOp.maximum(a, b) if b.arg == c.arg else None),
  (UPat.maximum(UPat.var("x"), UPat.var("y")), _max_fold),
  # ** two-stage ALU folding: (x op c1) op c2 -> x op (c1 op c2) **
  *((UPat.var("x").alu(op, UPat.cvar("c1")).alu(op, UPat.cvar("c2")).named("f"), _two_stage) for op in GroupOp.Associative),
  # (x//c1)//c2 -> x//(c1*c2) for c2 > 0
  ((UPat.var("x") // UPat.cvar("c1")) // UPat.cvar("c2"), lambda x, c1, c2: x//(c1*c2) if c2.vmin > 0 else None),
  # ** lt **
  # c0 + x < c1 -> x < c1 - c0
  ((UPat.cvar("c0") + UPat.var("x", dtype=dtypes.ints+(dtypes.weakint,))) < UPat.cvar("c1"), lambda x, c0, c1: x < (c1-c0)),
  ((UPat.cvar("c0")*UPat.var("x", dtype=dtypes.weakint)) < UPat.cvar("c1"), _lt_mul_const),
  ((UPat.var("x", dtype=dtypes.weakint)//UPat.cvar("d")) < UPat.cvar("c"), _lt_div_const),
  # ** move add/mul consts to the end of a chain **
  ((UPat.var("x") + UPat.cvar("c1")) + UPat.var("y"), lambda x, c1, y: (x+y)+c1 if y.op is not Ops.CONST else None),
  ((UPat.var("x") * UPat.cvar("c1")) * UPat.var("y"), lambda x, c1, y: (x*y)*c1 if y.op is not Ops.CONST else None),
  # ** lt folding from factors and ranges **
  (UPat.var("x", dtypes.weakint) < UPat.cvar("c"), lambda x, c: lt_folding(x, c.arg) if 0 < c.arg else None),
  (UPat.var("x", dtypes.weakint)*-1 < UPat.var("y")*-1, lambda x, y: y < x),
  # a simplex with positive coefficients > 0 (not x < 1 means x > 0)
  ((UPat.var("x", dtypes.weakint) < 1).ne(True), lambda x: (newx < 1).ne(True) if (newx := canonicalize_simplex(x)) is not None else None),
  # a range mod/div its own end
  (UPat(Ops.RANGE, src=UPat.var("end"), name="r") % UPat.var("end"), lambda r, end: r),
  (UPat(Ops.RANGE, src=UPat.var("end"), name="r") // UPat.var("end"), lambda r, end: r.const_like(0)),
  # ** casts **
  # two casts are one when the middle one does not narrow
  (UPat.var("x").cast(name="a").cast(name="b"), lambda x, a, b: x.cast(b.dtype) if can_lossless_cast(x.dtype, a.dtype) else None),
  (UPat.var("x", dtypes.ints+(dtypes.weakint,)).cast(dtypes.ints+(dtypes.weakint,), name="a").cast(name="b"),
   lambda x, a, b: x.cast(b.dtype) if a.dtype.min <= x.vmin and x.vmax <= a.dtype.max else None),
  # (two patterns so that weakint-only math, the common case, never reaches the callback)
  (UPat(GroupOp.Binary, src=(UPat.var("x", dtypes.long), UPat.var("y", (dtypes.long, dtypes.weakint))), name="u"), _narrow_long),
  (UPat(GroupOp.Binary, src=(UPat.var("x", dtypes.weakint), UPat.var("y", dtypes.long)), name="u"), _narrow_long),
  ((UPat.var("x", dtypes.weakint) + UPat.cvar("c")).cast(dtypes.sints, name="cast"), lambda x, c, cast: x.cast(cast.dtype)+cast.const_like(c.arg)),
  # ** AFTER/END **
  (UPat(Ops.AFTER, name="x"), _clean_after),
  (UPat((Ops.AFTER, Ops.END), src=(UPat.var("s"),)), lambda s: s),
]) + div_and_mod_symbolic

# constant folding of kernel values (the codegen's "constant folding" pass): CAST of a constant and any ALU of constants
pm_fold_values = PatternMatcher([
  (UPat(Ops.CAST, dtypes.all, name="root", src=(UPat.cvar("c"),)), lambda root, c: root.const_like(c.arg)),
  (UPat(GroupOp.Unary, src=(const_folding_pat,), name="a"), fold_value_alu),
  (UPat(GroupOp.Binary - {Ops.THREEFRY}, src=(const_folding_pat,)*2, name="a"), fold_value_alu),
  (UPat(GroupOp.Ternary, src=(const_folding_pat,)*3, name="a"), fold_value_alu),
])
