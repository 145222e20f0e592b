"""Decompositions: the ops the kernel graph spells one way, or that no renderer has, rewritten into the ops renderers print.

  pm_render_forms  the one spelling the tensor graph has for each op (tinygrad/mixin/mathtraits.py) back to the ops renderers print
                   directly: x*-1 -> NEG, a+NEG(b) -> SUB, a*RECIPROCAL(b) -> FDIV (before constant folding could turn 1/3 into
                   0.333..., so a/3 rounds once, as written), CMPNE(CMPNE(a, b), True) -> CMPEQ, minimum's max of negations -> a
                   WHERE over CMPLT. Value dtypes only: index arithmetic (weak ints) keeps its form for the symbolic rules.
  pm_decomp        THREEFRY(x, key) (uint64) -> Threefry-2x32 in uint32 ADD/XOR/SHL/SHR (no renderer has a THREEFRY op); float -> int
                   CAST -> a CAST of in-range values and a WHERE for the rest (one meaning on every device: _float_to_int)
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops
from tinygrad.dtype import dtypes

def _u(op:Ops, a:UOp, b:UOp|int) -> UOp: return UOp(op, a.dtype, (a, b if isinstance(b, UOp) else UOp.const(b, a.dtype)))
def _cast(x:UOp, dt) -> UOp: return UOp(Ops.CAST, dt, (x,), dt)

def _threefry2x32(x:UOp, key:UOp) -> UOp:
  """Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the 64-bit block and key each
  split into two uint32 words; the result packs the two output words back into a uint64 (word 0 low)."""
  u32, u64 = dtypes.uint32, dtypes.uint64
  x0, x1 = _cast(x, u32), _cast(_u(Ops.SHR, x, 32), u32)
  k0, k1 = _cast(key, u32), _cast(_u(Ops.SHR, key, 32), u32)
  ks = [k1, _u(Ops.XOR, _u(Ops.XOR, k0, k1), 0x1BD11BDA), k0]
  a, b = _u(Ops.ADD, x0, ks[2]), _u(Ops.ADD, x1, ks[0])
  for i in range(5):
    for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
      a = _u(Ops.ADD, a, b)
      b = _u(Ops.XOR, a, _u(Ops.ADD, _u(Ops.SHL, b, r), _u(Ops.SHR, b, 32 - r)))
    a, b = _u(Ops.ADD, a, ks[i % 3]), _u(Ops.ADD, _u(Ops.ADD, b, ks[(i + 1) % 3]), i + 1)
  return _u(Ops.OR, _u(Ops.SHL, _cast(b, u64), 32), _cast(a, u64))

def _neg(m:UOp) -> UOp|None:
  if m.dtype in dtypes.weaks or m.dtype is dtypes.bool: return None
  for x, c in (m.src, m.src[::-1]):
    if c.op is Ops.CONST and c.arg == -1: return UOp(Ops.NEG, m.dtype, (x,))
  return None

def _min(m:UOp, a:UOp, b:UOp) -> UOp:
  """b < a ? b : a, and for floats (b < a || b != b) ? b : a so a NaN on either side is the result, as MAX renders."""
  take_b = UOp(Ops.CMPLT, dtypes.bool, (b, a))
  if dtypes.is_float(m.dtype): take_b = UOp(Ops.OR, dtypes.bool, (take_b, UOp(Ops.CMPNE, dtypes.bool, (b, b))))
  return UOp(Ops.WHERE, m.dtype, (take_b, b, a))

pm_render_forms = PatternMatcher([
  (UPat(Ops.MUL, name="m"), _neg),
  (UPat(Ops.ADD, src=[UPat.var("a"), UPat(Ops.NEG, src=(UPat.var("b"),))], name="s"), lambda s, a, b: UOp(Ops.SUB, s.dtype, (a, b))),
  (UPat(Ops.MUL, src=[UPat.var("a"), UPat(Ops.RECIPROCAL, src=(UPat.var("b"),))], name="m"), lambda m, a, b: UOp(Ops.FDIV, m.dtype, (a, b))),
  (UPat(Ops.CMPNE, src=[UPat(Ops.CMPNE, src=(UPat.var("a"), UPat.var("b"))), UPat.const(True)]), lambda a, b: UOp(Ops.CMPEQ, dtypes.bool, (a, b))),
  # minimum: -max(-a, -b) (floats) and k^max(k^a, k^b) (ints, k the dtype's min+max) are b<a ? b : a (or b!=b for floats: NaN propagates), bit for bit
  (UPat(Ops.NEG, src=(UPat(Ops.MAX, src=[UPat(Ops.NEG, src=(UPat.var("a"),)), UPat(Ops.NEG, src=(UPat.var("b"),))]),), name="m"), _min),
  (UPat(Ops.XOR, src=[UPat(Ops.MAX, src=[UPat(Ops.XOR, src=[UPat.var("a"), UPat.cvar("k")]), UPat(Ops.XOR, src=[UPat.var("b"), UPat.cvar("k")])]),
                      UPat.cvar("k")], name="m"), lambda m, a, b, k: _min(m, a, b) if k.arg == m.dtype.min + m.dtype.max else None),
])

def _fits(x:UOp, dt) -> UOp:
  """x (float32 or float64) truncates to a value of the int dtype dt (32 or 64 bits): lo < x < hi, NaN fails. The bounds are powers of
  two or one off, exact in float64; for int64 the low bound is -2**63 itself (x >= -2**63: -2**63-1 rounds to it)."""
  lt = lambda a, b: UOp(Ops.CMPLT, dtypes.bool, (a, b))
  if dtypes.is_unsigned(dt): lo = lt(UOp.const(-1.0, x.dtype), x)
  elif dt.bitsize == 64: lo = UOp(Ops.CMPNE, dtypes.bool, (lt(x, UOp.const(float(dt.min), x.dtype)), UOp.const(True, dtypes.bool)))
  else: lo = lt(UOp.const(float(dt.min) - 1.0, x.dtype), x)
  return UOp(Ops.AND, dtypes.bool, (lo, lt(x, UOp.const(2.0 ** dt.bitsize if dtypes.is_unsigned(dt) else -float(dt.min), x.dtype))))

def _float_to_int(c:UOp, x:UOp) -> UOp|None:
  """float -> int CAST with one meaning on every device and at every vector width (C leaves out-of-range and NaN undefined, and clang's
  vectorized and scalar conversions disagree): the value truncated toward zero where it fits, else the x86 answer tinygrad 0.14 gives
  on CPU: the dtype's min for int32/int64, its max for uint32/uint64; 8- and 16-bit ints go through int32 and keep its low bits."""
  dt = c.dtype
  if not dtypes.is_float(x.dtype) or not dtypes.is_int(dt) or dt in dtypes.weaks: return None
  if dt.itemsize < 4: return _cast(_cast(x, dtypes.int32), dt)
  # already guarded (this rule's own output): WHERE(fits(v), v, 0)
  if x.op is Ops.WHERE and x.src[2].op is Ops.CONST and x.src[2].arg == 0 and x.src[0] is _fits(x.src[1], dt): return None
  if x.dtype.itemsize < 4: x = _cast(x, dtypes.float32)  # half can't hold the bounds (2**31 is inf in it); float32 holds x exactly
  fits = _fits(x, dt)
  safe = UOp(Ops.WHERE, x.dtype, (fits, x, UOp.const(0.0, x.dtype)))   # only in-range values reach the C conversion
  return UOp(Ops.WHERE, dt, (fits, c.replace(src=(safe,)), UOp.const(dt.max if dtypes.is_unsigned(dt) else dt.min, dt)))

pm_decomp = PatternMatcher([
  (UPat(Ops.THREEFRY, dtype=dtypes.uint64, src=(UPat.var("x"), UPat.var("key"))), _threefry2x32),
  (UPat(Ops.CAST, src=(UPat.var("x"),), name="c"), _float_to_int),
])

# constant folding is the symbolic engine's (uop/symbolic.py), in its form for values: results wrapped/rounded as the device computes
