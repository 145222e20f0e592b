"""Elementwise ops that only Tensor has: unary math, activations and the binary and ternary ops beyond tinygrad/mixin/mathtraits.py.

Everything is built from the primitive ALU ops (EXP2, LOG2, SIN, SQRT, RECIPROCAL, ...) so gradients come from the UOp rules.
Where a textbook formula loses precision (cancellation near 0, overflow of an intermediate) the op switches to a second form
with `where`; the branch that is not taken is fed a harmless input, so neither it nor its gradient can produce a NaN.
Ints and bools compute in the default float (as sin/exp do); the results of 0.14's weak float leaks are plain float32 here.
"""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from tinygrad.dtype import dtypes
from tinygrad.tensor.common import TensorBase
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

_LN2 = math.log(2)

def _poly(x, coeffs:tuple[float, ...]):
  """coeffs[0] + coeffs[1]*x + ... by Horner's rule."""
  ret = x * coeffs[-1] + coeffs[-2]
  for c in reversed(coeffs[:-2]): ret = ret * x + c
  return ret

# odd Taylor series in x (as polynomials in x*x, times x): atan (|x| <= tan(pi/16) after two halvings), sinh and erf near 0
_ATAN = tuple((-1) ** n / (2 * n + 1) for n in range(12))
_SINH = tuple(1 / math.factorial(2 * n + 1) for n in range(7))
def _tangent_numbers(n:int) -> list[int]:
  """The first n tangent numbers 1, 2, 16, 272, ... (Knuth and Buckholtz's recurrence, exact in ints)."""
  t = [0, 1] + [0] * (n - 1)
  for k in range(2, n + 1): t[k] = (k - 1) * t[k - 1]
  for k in range(2, n + 1):
    for j in range(k, n + 1): t[j] = (j - k) * t[j - 1] + (j - k + 2) * t[j]
  return t[1:]
# tanh near 0 (|x| < 0.5, where each term is ~1/10 of the one before): 17 terms for float64, 8 for the others (<= 1.5 ulp in float32)
_TANH = tuple((-1) ** k * t / math.factorial(2 * k + 1) for k, t in enumerate(_tangent_numbers(17)))
_ERF = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(17))
# erfc(x) = exp(-x*x) * P(u) for 1 <= x <= 6, u = 4.8*t - 2.2 in [-1, 1], t = 1/(1+x/2): a degree-14 Chebyshev least-squares fit of
# exp(x*x)*erfc(x) (mpmath at 40 digits), written as monomials in u; with the Taylor series below 1, erf is within 1 ulp in float64
_ERFCX = (0.2214295402299318, 0.16189356804102528, 0.038560570425181136, 0.0055888162818280365, 0.00019713917778141623,
          -8.079220414939895e-05, -7.3405184100805375e-06, 1.9795613066316982e-06, 1.6350132319057115e-07, -7.005200351921082e-08,
          -5.929810558780744e-10, 2.622625405016403e-09, -2.632402449453874e-10, -7.299825734470143e-11, 1.8586743786122412e-11)

class ElementwiseMixin:
  def ufix(self, x) -> Tensor:
    """x as an operand next to self: a Tensor stays as it is, a Python value becomes a 0-d tensor on self's device (0.14 gives it a
    weak dtype; ours is the dtype that value would be stored in)."""
    if isinstance(x, TensorBase): return x
    return type(self)(x, device=self.device)
  def _log1p(self) -> Tensor:
    """log(1 + self), accurate for tiny self: log(w) * self / (w - 1) with w = 1 + self rounded (Goldberg's correction)."""
    w = 1 + self
    one, inf = w == 1, w == math.inf
    # where 1 + self rounds to 1 the result is self itself (w.log() there would add a second 1/w to the gradient)
    # the correction (~1) is constant to the gradient, which is then 1/w times it: inf at w = 0 as torch's 1/(1 + x), never 0 * inf
    return one.where(self, inf.where(w, w.log() * (self / (one | inf).where(1, w - 1)).detach()))
  def _expm1(self) -> Tensor:
    """exp(self) - 1, accurate for tiny self: (u - 1) * self / log(u) with u = exp(self) rounded (Kahan's correction)."""
    u = self.exp()
    # beyond |x| = 1/2, u - 1 loses nothing (and there log(u) of a denormal u would be off)
    plain = (u == 1) | (self.abs() > 0.5) | self.isnan()
    return plain.where((u == 1).where(self, u - 1), (u - 1) * self / plain.where(2, u).log())
  def _half_exp(self) -> Tensor:
    """exp(self) / 2 as e * (e / 2) with e = exp(self / 2): finite wherever the result is (exp(self) alone overflows first)."""
    e = (self * 0.5).exp()
    return e * (e * 0.5)
  def _big(self) -> float:
    """A magnitude above which x*x would overflow or 1 is lost next to x*x in this float dtype."""
    exp_bits, mant_bits = dtypes.finfo(self.dtype)
    return min(1e8, math.sqrt((2 - 2.0 ** -mant_bits) * 2.0 ** (2 ** (exp_bits - 1) - 1)) / 2)

  # ***** unary math *****
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def log10(self) -> Tensor: return self.log2() * math.log10(2)
  def tan(self) -> Tensor:
    """sin/cos in float64 (see cos) for the argument reduction, rounded once to the dtype."""
    x = self._to_float()
    w = x.cast(dtypes.float64)
    return (w.sin() / w._cos64(x.dtype is dtypes.float64)).cast(x.dtype)
  def sinh(self) -> Tensor:
    x = self._to_float()
    small = x.abs() < 0.5
    xs = small.where(x, 0)
    return small.where(xs * _poly(xs * xs, _SINH), x._half_exp() - (-x)._half_exp())
  def cosh(self) -> Tensor:
    x = self._to_float()
    return x._half_exp() + (-x)._half_exp()
  def tanh(self) -> Tensor:
    x = self._to_float()
    a = x.abs()
    small = a < 0.5
    xs = small.where(x, 0)
    t = (a * -2).exp()
    big = (1 - t) / (1 + t)
    # the series near 0, where 1 - t cancels: one exp for the whole op (sinh/cosh there took three, a third of a gelu matmul's compile)
    return small.where(xs * _poly(xs * xs, _TANH if x.dtype is dtypes.float64 else _TANH[:8]), (x < 0).where(-big, big))
  def atan(self) -> Tensor:
    x = self._to_float()
    a = x.abs()
    inv = a > 1
    r = inv.where(inv.where(a, 1).reciprocal(), a)
    # atan(r) = 2*atan(r / (1 + sqrt(1 + r*r))) twice: |h| <= tan(pi/16), where the series converges fast
    for _ in range(2): r = r / ((r * r + 1).sqrt() + 1)
    p = r * _poly(r * r, _ATAN) * 4
    ret = inv.where(math.pi / 2 - p, p)
    return (x < 0).where(-ret, ret)
  def asin(self) -> Tensor:
    x = self._to_float()
    return (x / ((1 - x) * (1 + x)).sqrt()).atan()
  def acos(self) -> Tensor:
    x = self._to_float()
    return ((1 - x) / (1 + x)).sqrt().atan() * 2
  def asinh(self) -> Tensor:
    x = self._to_float()
    a = (x < 0).where(-x, x)   # |x|, with the gradient 1 at 0 (abs's is 0 there, as torch's: asinh'(0) is 1)
    big = a > a._big()
    s = big.where(1, a)
    # log1p(a + a*a / (1 + sqrt(1 + a*a))) near 0, log(a) + log(2) where a*a would overflow
    ret = big.where(big.where(a, 1).log() + _LN2, (s + s * s / ((s * s + 1).sqrt() + 1))._log1p())
    return (x < 0).where(-ret, ret)
  def acosh(self) -> Tensor:
    x = self._to_float()
    # computed at |x|: torch's gradient 1/sqrt(x*x-1) holds for every |x| >= 1, x <= -1 included (where the value is NaN)
    neg = x < 0
    a = neg.where(-x, x)
    big = a > a._big()
    s = big.where(1, a)
    # sqrt(s-1)*sqrt(s+1): at s = 1 the gradient of sqrt((s-1)*(s+1)) would be inf * 0 (NaN), torch gives inf
    ret = big.where(big.where(a, 1).log() + _LN2, ((s - 1) + (s - 1).sqrt() * (s + 1).sqrt())._log1p())
    ret = neg.where(ret.detach() * 2 - ret, ret)   # the same value, the gradient's sign undone (d|x|/dx is -1 there)
    # NaN below 1 (rounding could make log1p's argument exactly -1 there), added so that the gradient still flows
    return (x < 1).where(ret + math.nan, ret)
  def atanh(self) -> Tensor:
    x = self._to_float()
    # log1p(x) and log1p(-x) have opposite signs: no cancellation, and 1 +- x is exact near +-1
    return (x._log1p() - (-x)._log1p()) * 0.5
  def erf(self) -> Tensor:
    x = self._to_float()
    a = x.abs()
    small = a < 1
    xs = small.where(x, 0)
    # beyond 6, erfc < 2e-17 underflows next to 1: the polynomial is kept inside its interval and exp(-x*x) makes it vanish
    u = (a.minimum(6) * 0.5 + 1).reciprocal() * 4.8 - 2.2
    big = 1 - (-(a * a)).exp() * _poly(u, _ERFCX)
    return small.where(xs * _poly(xs * xs, _ERF), (x < 0).where(-big, big))
  def round(self) -> Tensor:
    """Rounds half to even (as numpy and Python's round); ints and bools are returned as they are."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    frac = (self - t).abs()
    away = t + (self < 0).where(-1, 1)
    odd = (t * 0.5).trunc() * 2 != t
    return ((frac > 0.5) | ((frac == 0.5) & odd)).where(away, t)
  def sign(self) -> Tensor:
    """-1, 0 or 1 by the sign (NaN stays NaN); bools are their own sign."""
    if self.dtype is dtypes.bool: return self
    if dtypes.is_unsigned(self.dtype): return (self != 0).cast(self.dtype)
    return (self > 0).where(1, (self < 0).where(-1, self * 0))
  def isnan(self) -> Tensor: return self != self
  def isinf(self, detect_positive:bool=True, detect_negative:bool=True) -> Tensor:
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
  def isfinite(self) -> Tensor: return (self.isinf() | self.isnan()).logical_not()

  # ***** activations *****
  def sigmoid(self) -> Tensor:
    """1/(1+exp(-x)) for x >= 0, e/(1+e) with e = exp(x) below: exp never overflows, so the gradient is 0, not NaN, far out."""
    x = self._to_float()
    pos = x >= 0
    e = pos.where(-x, x).exp()
    r = (e + 1).reciprocal()
    return pos.where(r, e * r)
  def hardsigmoid(self, alpha:float=1 / 6, beta:float=0.5) -> Tensor: return (self._to_float() * alpha + beta).clamp(0, 1)
  def relu6(self) -> Tensor: return self.relu().clamp(max_=6)
  def hardswish(self) -> Tensor:
    x = self._to_float()
    return x * ((x + 3).relu6() * (1 / 6))
  def hardtanh(self, min_val=-1, max_val=1) -> Tensor: return self.clamp(min_val, max_val)
  def leaky_relu(self, neg_slope=0.01) -> Tensor:
    x = self._to_float()
    return (x < 0).where(x * neg_slope, x)
  def elu(self, alpha=1.0) -> Tensor:
    x = self._to_float()
    return (x > 0).where(x, (x > 0).where(0, x)._expm1() * alpha)
  def celu(self, alpha=1.0) -> Tensor:
    x = self._to_float()
    return (x > 0).where(x, ((x > 0).where(0, x) / alpha)._expm1() * alpha)
  def selu(self, alpha=1.67326, gamma=1.0507) -> Tensor: return self.elu(alpha) * gamma
  def gelu(self, approximate:str="tanh") -> Tensor:
    """approximate="tanh" (tinygrad's default) or "none" (the exact form with erf)."""
    x = self._to_float()
    if approximate == "tanh": return x * 0.5 * ((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)).tanh().add(1)
    if approximate == "none": return x * 0.5 * (x * (1 / math.sqrt(2))).erf().add(1)
    raise RuntimeError(f"gelu: approximate={approximate!r} is not supported, use 'tanh' or 'none'")
  def quick_gelu(self) -> Tensor:
    x = self._to_float()
    return x * (x * 1.702).sigmoid()
  def silu(self) -> Tensor:
    x = self._to_float()
    return x * x.sigmoid()
  def swish(self) -> Tensor: return self.silu()
  def softplus(self, beta=1.0) -> Tensor:
    """log(1 + exp(beta*x)) / beta, as max(z, 0) + log1p(exp(-|z|)) so it neither overflows nor loses small values."""
    z = self._to_float() * beta
    # both halves take the z >= 0 side at 0 (relu and abs would each pick their own), so the gradient there is 1/2
    pos = z >= 0
    return (pos.where(z, 0) + pos.where(-z, z).exp()._log1p()) * (1 / beta)
  def logsigmoid(self) -> Tensor: return -(-self._to_float()).softplus()
  def mish(self) -> Tensor:
    x = self._to_float()
    return x * x.softplus().tanh()
  def softsign(self) -> Tensor:
    x = self._to_float()
    return x / (x.abs() + 1)

  # ***** binary and ternary *****
  def copysign(self, other) -> Tensor:
    """|self| with the sign of other (the sign bit for floats, so -0.0 and -NaN count as negative); the broadcast dtype."""
    a, b = self._broadcasted(other)
    if a.dtype is dtypes.bool: return a
    mag = a.abs()
    if dtypes.is_float(b.dtype):
      ibits = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[b.dtype.itemsize]
      neg = b.bitcast(ibits) < 0
    else: neg = b < 0
    return neg.where(-mag, mag)
  def logaddexp(self, other) -> Tensor:
    """log(exp(self) + exp(other)) without overflow."""
    a, b = self._to_float()._broadcasted(other)
    a, b = a._to_float(), b._to_float()
    m = a.maximum(b)
    same = a == b  # also inf + inf, where a - b is NaN
    d = same.where(0, (a - b).abs())
    # equal inputs take half the gradient each, as torch's 1/(1 + exp(b - a))
    return same.where((a + b) * 0.5 + _LN2, m + (-d).exp()._log1p())
  def lerp(self, end:Tensor, weight) -> Tensor:
    """self + (end - self) * weight."""
    return self + (end - self) * weight
  def masked_fill(self, mask:Tensor, value) -> Tensor:
    """value where mask is True, else self."""
    if not isinstance(mask, TensorBase): raise TypeError(f"masked_fill needs a Tensor mask, got {type(mask).__name__}")
    return mask.where(value, self)
  def isclose(self, other, rtol:float=1e-05, atol:float=1e-08, equal_nan=False) -> Tensor:
    """|self - other| <= atol + rtol*|other| elementwise; equal infinities are close, NaNs only with equal_nan."""
    a, b = self._broadcasted(other)
    if a.dtype is dtypes.bool: return a == b
    # infinities are close only when equal (|inf - -inf| <= inf * rtol would say otherwise)
    ret = (a == b) | (((a - b).abs() <= b.abs() * rtol + atol) & b.isfinite())
    return ret | (a.isnan() & b.isnan()) if equal_nan else ret
  def allclose(self, other, rtol:float=1e-05, atol:float=1e-08, equal_nan=False) -> Tensor:
    """Whether every element is close (isclose), as a 0-d bool tensor."""
    return self.isclose(other, rtol, atol, equal_nan).min()

__all__ = ["ElementwiseMixin"]
