"""The elementwise operations (arithmetic, comparisons, bitwise ops, min/max, where, unary math), written once for Tensor, UOp and UPat.

`MathTrait` writes every operation in terms of a few primitives each class provides:
  alu(op, *src)                       the node of op over self and src (operands already agree on dtype and shape)
  _broadcasted(y, reverse, match_dtype)  self and y (a Python value or the same class) as two operands: one dtype (unless
                                      match_dtype=False) and, for Tensor, one shape
  cast(dtype), dtype                  and, for UPat's `where`, ufix(x)
`UOpMathTrait` implements them for UOp (a tensor-level constant also needs `_full`, see uop/base.py), `UPatMathTrait` for UPat (a
Python value becomes a CONST pattern, nothing is promoted, so `UPat.var("x") * 1` matches exactly the nodes `x * 1` builds in index
arithmetic); Tensor implements them in tensor.py by calling UOp's. uop/base.py attaches the UOp and UPat classes to the Rust classes.

One spelling per operation, so a rule over UOps (an autograd rule, a rewrite) sees one form whoever built the graph:
  a - b      ADD(a, MUL(b, -1)): there is no SUB; -x is MUL(x, -1) (logical_not for bools)
  a / b      MUL(a, RECIPROCAL(b)), ints and bools cast to float first; `//` and `%` on ints are FLOORDIV/FLOORMOD, div(...,
             rounding_mode="trunc") and fmod are CDIV/CMOD; there is no FDIV
  a == b     logical_not(CMPNE(a, b)), logical_not(x) is CMPNE(bool(x), True); there is no CMPEQ
  a >= b     (b < a) | (a == b) for floats (a NaN on either side gives False, as IEEE says); logical_not(a < b) for ints and bools
  + and *    on bools are OR and AND
  minimum    -max(-a, -b) for floats, the same order reversal by xor for ints and bools; MAX propagates NaN from either side
  relu       (x < 0).where(0, x), so NaN stays NaN (the symbolic rules read it as max(x, 0))
The codegen prints SUB, NEG, FDIV, CMPEQ and minimum's select again where these forms meet (tinygrad/codegen/decomp.py: pm_render_forms), so
the C is what the plain operators would give, bit for bit.

Python values: next to a weak-dtype or kernel-level UOp (one without a shape) a Python value is a weak CONST and operands promote to
their least upper dtype (tinygrad 0.14's rule for UOp arithmetic). Next to a tensor-level UOp (a strong dtype and a shape; an
expression of constants only counts, its shape is ()) it is a CONST of the dtype Tensor picks, strong_dtype(least_upper_dtype(
x.dtype, weak(value))), reshaped and expanded to x's shape, exactly as Tensor builds it. Two UOps are never broadcast to each
other's shape: that is Tensor's (Tensor._broadcasted).

No folding happens at construction: like tinygrad 0.14, `UOp.const(2) + 3` is an ADD node until `simplify()` runs.
"""
from __future__ import annotations
import functools
import math
import operator
from tinygrad.uop import Ops, GroupOp
from tinygrad.helpers import argfix
from tinygrad.dtype import dtypes, DType, DTypeLike, Invalid, least_upper_dtype, least_upper_float, strong_dtype, weak_dtype, to_dtype

_COMPARISON = frozenset(GroupOp.Comparison)
_INT_SET = frozenset(dtypes.ints + (dtypes.weakint,))
_ADD, _MUL, _FLOORDIV, _FLOORMOD = Ops.ADD, Ops.MUL, Ops.FLOORDIV, Ops.FLOORMOD  # (Enum member lookups are slow on CPython 3.11)
_WEAKS = frozenset(dtypes.weaks)
_BOOL = dtypes.bool
_BOOL_OPS = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND}  # + and * on bools
_NARROW_FLOATS = frozenset({dtypes.float16, dtypes.bfloat16, dtypes.float32})  # exact in float64, where cos reduces its argument

def weak_dtype_of(x) -> DType:
  """The weak dtype of a Python value used as an operand of a tensor-level node."""
  if isinstance(x, bool): return dtypes.bool
  if isinstance(x, int): return dtypes.weakint
  if isinstance(x, float): return dtypes.weakfloat
  raise TypeError(f"can't use {type(x).__name__} {x!r} in a Tensor operation")

def _known(dt:DType) -> bool: return dt is not dtypes.void  # a UPat without a dtype matches any: its checks are skipped

class OperatorMixin:
  """Python operators written in terms of named methods (add/sub/mul/div with a `reverse` flag, neg, bitwise_and/or/xor,
  bitwise_not, lshift/rshift): shared by UOp, UPat and Tensor."""
  def __neg__(self): return self.neg()
  def __invert__(self): return self.bitwise_not()
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __and__(self, x): return self.bitwise_and(x)
  def __rand__(self, x): return self.bitwise_and(x, True)
  def __or__(self, x): return self.bitwise_or(x)
  def __ror__(self, x): return self.bitwise_or(x, True)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rxor__(self, x): return self.bitwise_xor(x, True)
  def __lshift__(self, x): return self.lshift(x)
  def __rlshift__(self, x): return self.lshift(x, True)
  def __rshift__(self, x): return self.rshift(x)
  def __rrshift__(self, x): return self.rshift(x, True)

class MathTrait(OperatorMixin):
  """The elementwise operations shared by Tensor, UOp and UPat (the primitives they need are in the module docstring)."""
  def _binop(self, op:Ops, x, reverse:bool):
    a, b = self._broadcasted(x, reverse)
    if a.dtype is _BOOL and op in _BOOL_OPS: op = _BOOL_OPS[op]
    return a.alu(op, b)
  def _to_float(self):
    """self in the float dtype math on it computes in: ints and bools are cast to the default float (a weak int is left to the op,
    whose dtype rule makes it a weak float)."""
    dt = self.dtype
    return self.cast(least_upper_float(dt)) if (dtypes.is_int(dt) and dt not in _WEAKS) or dt is _BOOL else self
  def _check_dtype(self, what:str, ok) -> None:
    if _known(self.dtype) and not ok(self.dtype): raise RuntimeError(f"{what}, got {self.dtype}")

  # ** arithmetic **
  def add(self, x, reverse:bool=False): return self._binop(Ops.ADD, x, reverse)
  def mul(self, x, reverse:bool=False): return self._binop(Ops.MUL, x, reverse)
  def sub(self, x, reverse:bool=False):
    a, b = self._broadcasted(x, reverse)
    if a.dtype is _BOOL: raise RuntimeError("subtraction of bool tensors is not supported, use logical_xor")
    # alu, not +: the operands agree already (a second promotion would cast -b)
    return a.alu(Ops.ADD, -b)
  def neg(self): return self.logical_not() if self.dtype is _BOOL else self * (-1)
  def div(self, x, reverse:bool=False, rounding_mode:str|None=None):
    """True division by default; rounding_mode="floor" is FLOORDIV and "trunc" is CDIV for ints."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype) and dtypes.is_int(b.dtype):
      if rounding_mode == "trunc": return a.alu(Ops.CDIV, b)
      if rounding_mode == "floor": return a.alu(Ops.FLOORDIV, b)
    if dtypes.is_int(a.dtype) or a.dtype is _BOOL: a, b = a._to_float()._broadcasted(b)
    d = a.alu(Ops.MUL, b.reciprocal())
    if rounding_mode is None: return d
    if rounding_mode == "trunc": return d.trunc()
    if rounding_mode == "floor": return d.floor()
    raise RuntimeError(f"{rounding_mode=} is not supported")
  def mod(self, x, reverse:bool=False):
    """Python modulo (FLOORMOD): the result has the sign of the divisor."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype) and dtypes.is_int(b.dtype): return a.alu(Ops.FLOORMOD, b)
    return a - a.div(b, rounding_mode="floor") * b
  def fmod(self, x, reverse:bool=False):
    """C remainder (CMOD): the result has the sign of the dividend."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype) and dtypes.is_int(b.dtype): return a.alu(Ops.CMOD, b)
    return a - a.div(b, rounding_mode="trunc") * b
  def pow(self, x, reverse:bool=False):
    if type(x) is int and x < 0 and not reverse and _known(self.dtype) and dtypes.is_int(self.dtype):
      raise RuntimeError(f"integers to negative integer powers are not allowed ({self.dtype} ** {x}): cast the base to float")
    if type(x) is int and x >= 1 and not reverse and _known(self.dtype) and dtypes.is_int(self.dtype):
      # exact in the integer dtype (wrapping as a product does): square-and-multiply, where POW would round through a float
      ret, sq, e = None, self, x
      while True:
        if e & 1: ret = sq if ret is None else ret * sq
        if not (e := e >> 1): return ret
        sq = sq * sq
    base, exponent = self._broadcasted(x, reverse)
    return base.alu(Ops.POW, exponent)
  def square(self): return self * self
  def usum(self, *uops):
    """self + uops[0] + ... (OR for bools), left-nested."""
    return functools.reduce(operator.or_ if self.dtype is _BOOL else operator.add, argfix(*uops), self)
  def uprod(self, *uops):
    """self * uops[0] * ... (AND for bools), left-nested."""
    return functools.reduce(operator.and_ if self.dtype is _BOOL else operator.mul, argfix(*uops), self)
  def maximum(self, x): return self._binop(Ops.MAX, x, False)
  def minimum(self, x):
    t, y = self._broadcasted(x)
    dt = least_upper_dtype(t.dtype, y.dtype)
    if dtypes.is_float(dt): return -(-t).alu(Ops.MAX, -y)
    # ints: min(a, b) == ~max(~a, ~b) with ~ as xor by (min+max), which maps the dtype's range onto itself in reverse
    k = dt.const(dt.min + dt.max)
    return (t ^ k).alu(Ops.MAX, y ^ k) ^ k
  def clamp(self, min_=None, max_=None):
    if min_ is None and max_ is None: raise RuntimeError("at least one of 'min_' or 'max_' must not be None")
    ret = (self < min_).where(min_, self) if min_ is not None else self
    return (ret > max_).where(max_, ret) if max_ is not None else ret
  def clip(self, min_=None, max_=None): return self.clamp(min_, max_)
  # NaN stays NaN, as in numpy's maximum(x, 0); 0 takes the constant branch, so the gradient at 0 is 0 (as torch and tinygrad 0.14)
  def relu(self): return (self > 0).where(self, self.ne(self).where(self, 0))
  # 0 takes a constant branch: the gradient at 0 is 0, torch's sign(x) (and -0.0 becomes 0.0); NaN stays NaN
  def abs(self): return (self < 0).where(-self, self.ne(0).where(self, 0))

  # ** unary math (ints and bools compute in the default float) **
  def reciprocal(self): return self._to_float().alu(Ops.RECIPROCAL)
  def sqrt(self): return self._to_float().alu(Ops.SQRT)
  def sin(self): return self._to_float().alu(Ops.SIN)
  def log2(self): return self._to_float().alu(Ops.LOG2)
  def exp2(self): return self._to_float().alu(Ops.EXP2)
  def exp(self): return self._to_float().mul(1 / math.log(2)).exp2()
  def log(self): return self.log2().mul(math.log(2))
  def cos(self):
    """sin(pi/2 - x) would round pi/2 - x to the dtype first (cos(1e10) in float32 would be off by 0.4): computed in float64 and
    rounded once (see _cos64)."""
    x = self._to_float()
    if x.dtype in _NARROW_FLOATS: return x.cast(dtypes.float64)._cos64(False).cast(x.dtype)
    return x._cos64()  # float64, or a weak float / a pattern (whose dtype is not known yet)
  def _cos64(self, may_overflow:bool=True):
    """cos of a float64 x from SIN (whose libm/Python implementations reduce any argument exactly): sin(pi/2 - x) for |x| < 2,
    where pi/2 - x rounds by at most 2.2e-16; sin(2x) / (2 sin(x)) beyond, exact up to the rounding of the two sins (2x is exact,
    and sin(x) is not 0 for any float |x| >= 2); 1 - 2 sin(x/2)^2 where 2x would overflow. Each branch gets a harmless input when
    it is not taken, so neither it nor its gradient makes a NaN. (A float32 or half value in float64 never overflows 2x.)"""
    a = self.abs()
    near = a < 2
    if not may_overflow:
      xm = near.where(3.0, self)
      return near.where(self.sub(math.pi / 2, True).sin(), (xm * 2).sin() / (xm.sin() * 2))
    huge = a > 2.0 ** 1000
    xm = (near | huge).where(3.0, self)
    far = (xm * 2).sin() / (xm.sin() * 2)
    return near.where(self.sub(math.pi / 2, True).sin(), huge.where(1 - (self * 0.5).sin().square() * 2, far))
  def trunc(self): return self.alu(Ops.TRUNC)
  def floor(self): return (self < (b := self.trunc())).where(b - 1, b)
  def ceil(self): return (self > (b := self.trunc())).where(b + 1, b)

  # ** comparisons (UOp and UPat keep == and hash as identity: use eq/ne) **
  def ne(self, x): return self._binop(Ops.CMPNE, x, False)
  def eq(self, x): return self.ne(x).logical_not()
  def logical_not(self): return self.cast(_BOOL).ne(True)
  def __lt__(self, x): return self._binop(Ops.CMPLT, x, False)
  def __gt__(self, x): return self._binop(Ops.CMPLT, x, True)
  def __ge__(self, x): return self._cmp_ge(x, False)
  def __le__(self, x): return self._cmp_ge(x, True)
  def _cmp_ge(self, x, reverse:bool):
    """a >= b. For floats (b < a) | (a == b), so a NaN on either side gives False as IEEE says; not(a < b) would give True. For
    ints and bools, where the two agree, logical_not(a < b): the form index arithmetic and its rewrite rules know."""
    a, b = self._broadcasted(x, reverse)
    if _known(a.dtype) and dtypes.is_float(a.dtype): return (b < a) | a.eq(b)
    return (a < b).logical_not()
  def __ne__(self, x): return self.ne(x)  # type: ignore[override]

  # ** bitwise **
  def _bitwise(self, op:Ops, x, reverse:bool):
    a, b = self._broadcasted(x, reverse)
    a._check_dtype(f"{op} needs int or bool tensors", lambda dt: dtypes.is_int(dt) or dt is _BOOL)
    return a.alu(op, b)
  def bitwise_and(self, x, reverse:bool=False): return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse:bool=False): return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse:bool=False): return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self):
    if self.dtype is _BOOL: return self.logical_not()
    self._check_dtype("bitwise_not needs an int or bool tensor", dtypes.is_int)
    return (self ^ self.dtype.max) if dtypes.is_unsigned(self.dtype) else (self ^ -1)
  def _shift(self, op:Ops, x, reverse:bool):
    a, b = self._broadcasted(x, reverse)
    if _known(a.dtype) and not dtypes.is_int(a.dtype):
      raise RuntimeError(f"{'<<' if op is Ops.SHL else '>>'} needs int tensors, got {a.dtype} (shapes {a.shape})")
    return a.alu(op, b)
  def lshift(self, x, reverse:bool=False):
    """`self << x` on ints (bits shifted out are lost; the dtype wraps). A shift outside [0, bits) is undefined."""
    return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x, reverse:bool=False):
    """`self >> x` on ints: logical for unsigned dtypes, arithmetic (sign-filling) for signed ones."""
    return self._shift(Ops.SHR, x, reverse)

  # ** ternary **
  def where(self, x, y):
    """x where self is true, else y (self is cast to bool). Python values in both branches agree on a kind first (1 and 2.5 are
    floats); for Tensor the condition and both branches are broadcast to one shape."""
    cls = type(self)
    cond = self.cast(_BOOL)
    if isinstance(x, cls): x, y = x._broadcasted(y)
    elif isinstance(y, cls): y, x = y._broadcasted(x)
    else:
      if type(x) in (bool, int, float) and type(y) in (bool, int, float):
        k = least_upper_dtype(weak_dtype_of(x), weak_dtype_of(y))
        x, y = k.const(x), k.const(y)
      x, y = cond._broadcasted(x, match_dtype=False)[1]._broadcasted(y)
    cond, x = cond._broadcasted(x, match_dtype=False)
    cond, y = cond._broadcasted(y, match_dtype=False)
    return cond.alu(Ops.WHERE, x, y)

  # ** Python operators beyond OperatorMixin's **
  def __floordiv__(self, x): return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x): return self.div(x, True, rounding_mode="floor")
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)

class UOpMathTrait(MathTrait):
  """UOp primitives (see the module docstring for the rule on Python values)."""
  def ufix(self, x):
    if type(x) is type(self): return x
    return self.const(x)
  def alu(self, op:Ops, *src, dtype:DType|None=None, **kwargs):
    return type(self)(op, dtype, (self, *src), **kwargs)
  def _const_operand(self, v, match_dtype:bool=True):
    """The Python value v as the other operand of self."""
    if self.dtype not in _WEAKS and self.shape is not None and (self.shape or not _over_variable(self)):
      # tensor-level: the CONST Tensor would build, with self's shape
      return self._full(v, strong_dtype(least_upper_dtype(self.dtype, weak_dtype_of(v)) if match_dtype else weak_dtype_of(v)))
    return self.const(v)
  def _broadcasted(self, y, reverse:bool=False, match_dtype:bool=True):
    if type(y) is not type(self): y = self._const_operand(y, match_dtype)
    x, y = (y, self) if reverse else (self, y)
    if not match_dtype or x.dtype is y.dtype: return x, y
    out = least_upper_dtype(x.dtype, y.dtype)
    return _promote(x, out), _promote(y, out)
  def _binop(self, op:Ops, x, reverse:bool):
    # the hot path of every rule callback: index arithmetic (weak dtypes) needs no shape, operands of one dtype need no promotion
    cls = type(self)
    if type(x) is not cls:
      # a Tensor on the right (v * t, v a bound Variable): Python then asks the Tensor's reflected operator
      if _is_tensor(x): return NotImplemented
      if self.dtype not in _WEAKS: return MathTrait._binop(self, op, x, reverse)  # maybe tensor-level: see _const_operand
      x = self.const(x)
    a, b = (x, self) if reverse else (self, x)
    if (dt := a.dtype) is b.dtype:
      if dt is _BOOL and op in _BOOL_OPS: op = _BOOL_OPS[op]
      return cls(op, _BOOL if op in _COMPARISON else dt, (a, b))
    out = least_upper_dtype(dt, b.dtype)
    return cls(op, None, (_promote(a, out), _promote(b, out)))
  # fast paths of the same nodes for what rules build most: masks and index bit ops need no promotion or check when the operands
  # agree (or are weak), a WHERE of one bool condition and two branches of one dtype no broadcasting
  def _bitwise(self, op:Ops, x, reverse:bool):
    if (dt := self.dtype) in _WEAKS or (type(x) is type(self) and x.dtype is dt and (dt is _BOOL or dt in _INT_SET)):
      return self._binop(op, x, reverse)
    return MathTrait._bitwise(self, op, x, reverse)
  def _shift(self, op:Ops, x, reverse:bool):
    if (dt := self.dtype) in _WEAKS or (type(x) is type(self) and x.dtype is dt and dt in _INT_SET): return self._binop(op, x, reverse)
    return MathTrait._shift(self, op, x, reverse)
  def where(self, x, y):
    cls = type(self)
    if self.dtype is _BOOL and type(x) is cls and type(y) is cls and (dt := x.dtype) is y.dtype: return cls(Ops.WHERE, dt, (self, x, y))
    return MathTrait.where(self, x, y)
  # the operators rules use most, without the add()/mul()/div() indirection
  def __add__(self, x): return self._binop(_ADD, x, False)
  def __radd__(self, x): return self._binop(_ADD, x, True)
  def __mul__(self, x): return self._binop(_MUL, x, False)
  def __rmul__(self, x): return self._binop(_MUL, x, True)
  def __floordiv__(self, x):
    if type(x) is int and self.dtype in _INT_SET: return self._binop(_FLOORDIV, x, False)
    return NotImplemented if _is_tensor(x) else self.div(x, rounding_mode="floor")
  def __mod__(self, x):
    if type(x) is int and self.dtype in _INT_SET: return self._binop(_FLOORMOD, x, False)
    return NotImplemented if _is_tensor(x) else self.mod(x)
  # a Tensor operand (n - t, n a bound Variable of a symbolic shape): Python then asks the Tensor's reflected operator
  def __sub__(self, x): return NotImplemented if _is_tensor(x) else self.sub(x)
  def __rsub__(self, x): return NotImplemented if _is_tensor(x) else self.sub(x, True)
  def __truediv__(self, x): return NotImplemented if _is_tensor(x) else self.div(x)
  def __rtruediv__(self, x): return NotImplemented if _is_tensor(x) else self.div(x, True)
  def __lt__(self, x): return NotImplemented if _is_tensor(x) else self._binop(Ops.CMPLT, x, False)
  def __gt__(self, x): return NotImplemented if _is_tensor(x) else self._binop(Ops.CMPLT, x, True)
  def cast(self, dtype:DTypeLike):
    dt = to_dtype(dtype)
    return self if self.dtype is dt else type(self)(Ops.CAST, dt, (self,), dt)
  def bitcast(self, dtype:DTypeLike):
    dt = to_dtype(dtype)
    if self.dtype in _WEAKS or dt in _WEAKS: raise RuntimeError(f"bitcast requires concrete dtypes, got {self.dtype} -> {dt}")
    return self if self.dtype is dt else type(self)(Ops.BITCAST, dt, (self,), dt)

def _is_tensor(x) -> bool: return type(x) is not int and type(x) is not float and hasattr(x, "uop")

def _over_variable(u) -> bool:
  """u is index math on a Variable (a 0-d value, as in tinygrad 0.14): a chain of casts and ALU ops down to one. Python values next
  to it stay weak constants, as next to the Variable itself."""
  for _ in range(8):
    if u.op is Ops.BUFFER or u.op is Ops.AFTER: return u.is_variable or u.is_bound_var
    if not u.src or not (u.op is Ops.CAST or u.op in GroupOp.ALU): return False
    u = u.src[0]
  return False

def _promote(t, out:DType):
  """t at dtype `out`: a weak CONST stays weak (it may move from weakint to weakfloat), anything else is cast."""
  if t.op is Ops.CONST:
    if t.arg is Invalid: return t
    if t.dtype in _WEAKS:
      wd = weak_dtype(out)
      return t if wd is t.dtype else type(t)(Ops.CONST, wd, (), wd.const(t.arg))
  return t.cast(out)

class UPatMathTrait(MathTrait):
  """UPat primitives: a Python constant becomes a CONST pattern with that arg; operands are never cast."""
  def ufix(self, x): return x if isinstance(x, type(self)) else type(self).cvar(arg=x)
  def _broadcasted(self, y, reverse:bool=False, match_dtype:bool=True):
    y = self.ufix(y)
    return (y, self) if reverse else (self, y)
  # a pattern's condition is matched as it is (no cast), and its branches are not promoted
  def where(self, x, y):
    cls = type(self)
    ref = x if isinstance(x, cls) else y if isinstance(y, cls) else self
    x, y = ref.ufix(x)._broadcasted(y)
    return self.alu(Ops.WHERE, x, y)
  # patterns build FLOORDIV/FLOORMOD whatever the dtype they will meet
  def __floordiv__(self, x): return self._binop(Ops.FLOORDIV, x, False)
  def __rfloordiv__(self, x): return self._binop(Ops.FLOORDIV, x, True)
  def mod(self, x, reverse:bool=False): return self._binop(Ops.FLOORMOD, x, reverse)

__all__ = ["OperatorMixin", "MathTrait", "UOpMathTrait", "UPatMathTrait"]
