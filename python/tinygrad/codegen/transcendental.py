"""EXP2 as plain float32 arithmetic (range reduction, a polynomial, a scale built from exponent bits) for renderers that list the dtype in
`Renderer.poly_exp2`: a libm call per element (glibc's exp2f, about 3 ns) is what bounded softmax on CPU, and the C compiler vectorizes
these ops with the rest of the loop. Exhaustively checked against the correctly rounded result: at most 1 ulp for every float32 input,
subnormal results included; +inf -> inf, -inf -> 0, NaN -> NaN, overflow -> inf, underflow -> 0. float64 keeps the renderer's call;
half and bfloat16 compute it in float32 and round once."""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops
from tinygrad.dtype import dtypes

# 2**f ~ 1 + f*(C[0] + f*(C[1] + ...)) on [-0.5, 0.5]: a minimax fit of the relative error (2**-28.9 in exact arithmetic), rounded to
# float32; evaluated by Horner in float32 with separate rounding of each op (the CPU compiler is told not to fuse: -ffp-contract=off)
EXP2_COEFFS = (0.6931471824645996, 0.24022647738456726, 0.055503323674201965, 0.00961843691766262, 0.0013398875016719103,
               0.00015353361959569156)
# 1.5 * 2**23: for |x| < 2**22, x + ROUNDER rounds x to an integer k (nearest, ties to even) held in the low mantissa bits
ROUNDER = 12582912.0
# past +-160 the result is inf or 0 anyway; the clamp keeps k's two halves normal exponents
EXP2_CLAMP = 160.0

def _f(op:Ops, a:UOp, b:UOp|float) -> UOp: return UOp(op, a.dtype, (a, b if isinstance(b, UOp) else UOp.const(b, a.dtype)))
def _where(c:UOp, a:UOp, b:UOp) -> UOp: return UOp(Ops.WHERE, a.dtype, (c, a, b))
def _lt(a:UOp, b:UOp) -> UOp: return UOp(Ops.CMPLT, dtypes.bool, (a, b))

def exp2_f32(x:UOp) -> UOp:
  """2**x for a float32 x: k = round(x), f = x - k in [-0.5, 0.5], 2**x = p(f) * 2**(k//2) * 2**(k - k//2), the two powers built as
  float32 bits (each a normal number, so only the last multiply rounds, also into the subnormals)."""
  lo, hi = UOp.const(-EXP2_CLAMP, x.dtype), UOp.const(EXP2_CLAMP, x.dtype)
  # a NaN passes both selects (its comparisons are false) and makes f and the result NaN
  xc = _where(_lt(x, lo), lo, x)
  xc = _where(_lt(hi, xc), hi, xc)
  t = _f(Ops.ADD, xc, ROUNDER)
  f = _f(Ops.SUB, xc, _f(Ops.SUB, t, ROUNDER))
  p = UOp.const(EXP2_COEFFS[-1], x.dtype)
  for c in reversed(EXP2_COEFFS[:-1]): p = _f(Ops.ADD, _f(Ops.MUL, p, f), c)
  p = _f(Ops.ADD, _f(Ops.MUL, p, f), 1.0)
  u32 = dtypes.uint32
  # t's bits are 0x4B400000 + k (|k| <= 160 never borrows from bit 22): kb = k + 256 > 0, so every int below is small and unsigned
  kb = _f(Ops.SUB, UOp(Ops.BITCAST, u32, (t,), u32), 0x4B400000 - 256)
  k1b = _f(Ops.SHR, kb, 1)                                              # k//2 + 128
  scale = lambda e: UOp(Ops.BITCAST, x.dtype, (_f(Ops.SHL, e, 23),), x.dtype)  # e = biased exponent (k//2 + 127, k - k//2 + 127)
  return _f(Ops.MUL, _f(Ops.MUL, p, scale(_f(Ops.SUB, k1b, 1))), scale(_f(Ops.SUB, _f(Ops.SUB, kb, k1b), 1)))

def _exp2(ctx, e:UOp, x:UOp) -> UOp|None:
  if ctx is None or e.dtype not in getattr(ctx, "poly_exp2", ()): return None
  if e.dtype is dtypes.float32: return exp2_f32(x)
  if e.dtype in (dtypes.half, dtypes.bfloat16):
    return UOp(Ops.CAST, e.dtype, (exp2_f32(UOp(Ops.CAST, dtypes.float32, (x,), dtypes.float32)),), e.dtype)
  return None

# ctx: the renderer
pm_transcendental = PatternMatcher([(UPat(Ops.EXP2, src=(UPat.var("x"),), name="e"), _exp2)])
