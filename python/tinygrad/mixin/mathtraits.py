"""Python operators on UOps and UPats: arithmetic, comparisons, bitwise ops, min/max, where and casts.

`MathTrait` writes every operator in terms of four primitives: `alu(op, *src)`, `_broadcasted(y, reverse)` (turns a Python
constant into a node and unifies dtypes), `cast(dtype)` and `dtype`. `UOpMathTrait` implements them for UOp (with tinygrad
0.14's weak-dtype promotion), `UPatMathTrait` for UPat (a Python constant becomes a CONST pattern, nothing is promoted), so
`UPat.var("x") * 1` matches exactly the nodes `x * 1` builds. ops.py attaches both to the Rust classes.

No folding happens at construction: like tinygrad 0.14, `UOp.const(2) + 3` is an ADD node until `simplify()` runs.
Division comes in two flavours, kept as distinct ops: `//` and `%` are Python floor division and modulo (FLOORDIV, FLOORMOD;
`-7 // 2 == -4`, `-7 % 2 == 1`); `div(y, rounding_mode="trunc")` and `fmod(y)` are C truncation (CDIV, CMOD; -7 / 2 == -3 and
-7 % 2 == -1 in C).
"""
from __future__ import annotations
import functools
import operator
from tinygrad.uop import Ops, GroupOp
from tinygrad.helpers import argfix
from tinygrad.dtype import dtypes, DType, DTypeLike, Invalid, least_upper_dtype, weak_dtype, to_dtype

_COMPARISON = frozenset(GroupOp.Comparison)
_INT_SET = frozenset(dtypes.ints + (dtypes.weakint,))
_ADD, _MUL, _FLOORDIV, _FLOORMOD = Ops.ADD, Ops.MUL, Ops.FLOORDIV, Ops.FLOORMOD  # (Enum member lookups are slow on CPython 3.11)
_WEAKS = frozenset(dtypes.weaks)

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
  """The operator surface shared by UOp and UPat."""
  # required from the class: alu(op, *src), _broadcasted(y, reverse), ufix(x), cast(dtype) and dtype
  def _binop(self, op:Ops, x, reverse:bool):
    lhs, rhs = self._broadcasted(x, reverse)
    return lhs.alu(op, rhs)

  # ** arithmetic **
  def add(self, x, reverse:bool=False): return self._binop(Ops.ADD, x, reverse)
  def mul(self, x, reverse:bool=False): return self._binop(Ops.MUL, x, reverse)
  def sub(self, x, reverse:bool=False):
    # a - b is a + b*-1: there is no SUB in the symbolic world, so like terms combine through one rule set
    a, b = self._broadcasted(x, reverse)
    return a.alu(Ops.ADD, -b)
  def neg(self): return self.logical_not() if self.dtype is dtypes.bool else self * (-1)
  def div(self, x, reverse:bool=False, rounding_mode:str|None=None):
    """True division by default; rounding_mode="floor" is FLOORDIV and "trunc" is CDIV for ints."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype) and dtypes.is_int(b.dtype):
      if rounding_mode == "trunc": return a.alu(Ops.CDIV, b)
      if rounding_mode == "floor": return a.alu(Ops.FLOORDIV, b)
    if dtypes.is_int(a.dtype) or a.dtype is dtypes.bool: a = a.cast(dtypes.default_float)
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
    base, exponent = self._broadcasted(x, reverse)
    return base.alu(Ops.POW, exponent)
  def square(self): return self * self
  def usum(self, *uops):
    """self + uops[0] + ... (OR for bools), left-nested."""
    return functools.reduce(operator.or_ if self.dtype is dtypes.bool else operator.add, argfix(*uops), self)
  def uprod(self, *uops):
    """self * uops[0] * ... (AND for bools), left-nested."""
    return functools.reduce(operator.and_ if self.dtype is dtypes.bool else operator.mul, argfix(*uops), self)
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

  # ** unary math **
  def reciprocal(self): return self.alu(Ops.RECIPROCAL)
  def trunc(self): return self.alu(Ops.TRUNC)
  def sqrt(self): return self.alu(Ops.SQRT)
  def sin(self): return self.alu(Ops.SIN)
  def log2(self): return self.alu(Ops.LOG2)
  def exp2(self): return self.alu(Ops.EXP2)
  def floor(self): return (self < (b := self.trunc())).where(b - 1, b)
  def ceil(self): return (self > (b := self.trunc())).where(b + 1, b)

  # ** comparisons (== and hash stay identity: use eq/ne) **
  def ne(self, x): return self._binop(Ops.CMPNE, x, False)
  def eq(self, x): return self.ne(x).logical_not()
  def logical_not(self): return self.cast(dtypes.bool).ne(True)
  def __lt__(self, x): return self._binop(Ops.CMPLT, x, False)
  def __gt__(self, x): return self._binop(Ops.CMPLT, x, True)
  def __ge__(self, x): return (self < x).logical_not()
  def __le__(self, x): return (self > x).logical_not()
  def __ne__(self, x): return self.ne(x)  # type: ignore[override]

  # ** bitwise **
  def bitwise_and(self, x, reverse:bool=False): return self._binop(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse:bool=False): return self._binop(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse:bool=False): return self._binop(Ops.XOR, x, reverse)
  def bitwise_not(self):
    if self.dtype is dtypes.bool: return self.logical_not()
    return (self ^ self.dtype.max) if dtypes.is_unsigned(self.dtype) else (self ^ -1)
  def lshift(self, x, reverse:bool=False): return self._binop(Ops.SHL, x, reverse)
  def rshift(self, x, reverse:bool=False): return self._binop(Ops.SHR, x, reverse)

  # ** ternary **
  def where(self, x, y):
    # a Python constant in one branch adopts the other branch's dtype
    cls = type(self)
    ref = x if isinstance(x, cls) else y if isinstance(y, cls) else self
    x, y = ref.ufix(x)._broadcasted(y)
    return self.alu(Ops.WHERE, x, y)

  # ** Python operators beyond OperatorMixin's **
  def __floordiv__(self, x): return self.div(x, rounding_mode="floor")
  def __rfloordiv__(self, x): return self.div(x, True, rounding_mode="floor")
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)

class UOpMathTrait(MathTrait):
  """UOp primitives: Python constants become weak CONSTs and operands are promoted to their least upper dtype."""
  def ufix(self, x):
    if type(x) is type(self): return x
    return self.const(x)
  def alu(self, op:Ops, *src, dtype:DType|None=None, **kwargs):
    return type(self)(op, dtype, (self, *src), **kwargs)
  def _broadcasted(self, y, reverse:bool=False):
    cls = type(self)
    if type(y) is not cls: y = self.const(y)
    x, y = (y, self) if reverse else (self, y)
    if x.dtype is y.dtype: return x, y
    out = least_upper_dtype(x.dtype, y.dtype)
    return _promote(x, out), _promote(y, out)
  def _binop(self, op:Ops, x, reverse:bool):
    # the hot path of every rule callback: same dtypes need no promotion and the result dtype is known
    cls = type(self)
    if type(x) is not cls: x = self.const(x)
    a, b = (x, self) if reverse else (self, x)
    if a.dtype is b.dtype:
      return cls(op, dtypes.bool if op in _COMPARISON else a.dtype, (a, b))
    out = least_upper_dtype(a.dtype, b.dtype)
    return cls(op, None, (_promote(a, out), _promote(b, out)))
  # the operators rules use most, without the add()/mul()/div() indirection
  def __add__(self, x): return self._binop(_ADD, x, False)
  def __radd__(self, x): return self._binop(_ADD, x, True)
  def __mul__(self, x): return self._binop(_MUL, x, False)
  def __rmul__(self, x): return self._binop(_MUL, x, True)
  def __floordiv__(self, x):
    if type(x) is int and self.dtype in _INT_SET: return self._binop(_FLOORDIV, x, False)
    return self.div(x, rounding_mode="floor")
  def __mod__(self, x):
    if type(x) is int and self.dtype in _INT_SET: return self._binop(_FLOORMOD, x, False)
    return self.mod(x)
  def cast(self, dtype:DTypeLike):
    dt = to_dtype(dtype)
    return self if self.dtype is dt else type(self)(Ops.CAST, dt, (self,), dt)
  def bitcast(self, dtype:DTypeLike):
    dt = to_dtype(dtype)
    if self.dtype in _WEAKS or dt in _WEAKS: raise RuntimeError(f"bitcast requires concrete dtypes, got {self.dtype} -> {dt}")
    return self if self.dtype is dt else type(self)(Ops.BITCAST, dt, (self,), dt)

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
  def _broadcasted(self, y, reverse:bool=False):
    y = self.ufix(y)
    return (y, self) if reverse else (self, y)
  # patterns build FLOORDIV/FLOORMOD whatever the dtype they will meet
  def __floordiv__(self, x): return self._binop(Ops.FLOORDIV, x, False)
  def __rfloordiv__(self, x): return self._binop(Ops.FLOORDIV, x, True)
  def mod(self, x, reverse:bool=False): return self._binop(Ops.FLOORMOD, x, reverse)

__all__ = ["MathTrait", "UOpMathTrait", "UPatMathTrait"]
