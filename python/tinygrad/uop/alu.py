"""The ALU evaluator: every ALU op applied to Python values (`python_alu`), and `exec_alu`, which also wraps or rounds the result to a
dtype. Constant folding (uop/symbolic.py) and the PYTHON device (renderer/python.py) both call it, so they compute alike."""
from __future__ import annotations
import math
import operator
from typing import Callable
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import DType, Invalid, truncate, fma
from tinygrad.helpers import cdiv, cmod, floordiv, floormod

__all__ = ["python_alu", "exec_alu"]

# Each op computes what the C device computes: IEEE floats, the math functions as C99's Annex F defines them at their special values,
# ints exactly (the caller wraps them to the dtype, as the C device's -fwrapv does). An int division by zero is the caller's to refuse
# (C leaves it undefined).

def _exp2(x):
  try: return 2.0 ** x
  except OverflowError: return math.inf

def _log2(x): return math.log2(x) if x > 0 else -math.inf if x == 0 else math.nan
def _sqrt(x): return math.sqrt(x) if x >= 0 else math.nan  # sqrt(-0.0) is -0.0
def _sin(x): return math.sin(x) if math.isfinite(x) else math.nan
def _reciprocal(x): return _fdiv(1.0, x)
def _trunc(x):
  """Toward zero, keeping the sign of a zero result (trunc(-0.5) is -0.0)."""
  return x if isinstance(x, int) or not math.isfinite(x) else math.copysign(float(math.trunc(x)), x)

def _is_odd_int(y) -> bool: return math.isfinite(y) and float(y).is_integer() and int(y) % 2 == 1

def _pow(x, y):
  """C's pow: exact at the special values (pow(x, 0) and pow(1, y) are 1 even for NaN, pow(-0.0, -1) is -inf), NaN for a negative
  base and a non-integer exponent, an infinity signed like the result on overflow."""
  if isinstance(x, int) and isinstance(y, int) and y >= 0: return x ** y
  x, y = float(x), float(y)
  try: return math.pow(x, y)
  except ValueError:  # a zero base with a negative exponent, or a negative base with a non-integer exponent
    if x == 0: return math.copysign(math.inf, x) if _is_odd_int(y) else math.inf
    return math.nan
  except OverflowError: return -math.inf if x < 0 and _is_odd_int(y) else math.inf

def _max(a, b):
  """max that propagates NaN from either side (IEEE maximum, numpy's np.maximum); Python's max(1, nan) is 1. (isnan, not b != b:
  a ConstFloat compares by bits.)"""
  return b if a < b or (isinstance(b, float) and math.isnan(b)) else a

def _ne(a, b):
  """a != b, with NaN unequal to itself (a ConstFloat NaN equals NaN so it can key a cache: compare plain floats)."""
  return float(a) != float(b) if isinstance(a, float) and isinstance(b, float) else a != b
def _eq(a, b): return not _ne(a, b)

def _fdiv(a, b):
  """a / b as IEEE floats divide: x/0 is an infinity signed by both operands, 0/0 and NaN operands give NaN."""
  if b != 0 or math.isnan(b): return a / b if not math.isnan(b) else math.nan
  if a == 0 or math.isnan(a): return math.nan
  return math.copysign(math.inf, a) * math.copysign(1.0, b)

def _cdiv(a, b): return _fdiv(a, b) if isinstance(a, float) or isinstance(b, float) else cdiv(a, b)
def _cmod(a, b):
  """C's % for ints (the sign of the dividend), fmod for floats: NaN for an infinite dividend or a zero divisor, a finite dividend
  itself for an infinite divisor."""
  if not (isinstance(a, float) or isinstance(b, float)): return cmod(a, b)
  if math.isinf(a) or b == 0 or math.isnan(a) or math.isnan(b): return math.nan
  return math.fmod(a, b)

def _where(c, a, b): return a if c else b

python_alu: dict[Ops, Callable] = {
  Ops.LOG2: _log2, Ops.EXP2: _exp2, Ops.SQRT: _sqrt, Ops.RECIPROCAL: _reciprocal, Ops.SIN: _sin, Ops.POW: _pow, Ops.TRUNC: _trunc,
  Ops.NEG: operator.neg, Ops.ADD: operator.add, Ops.SUB: operator.sub, Ops.MUL: operator.mul, Ops.CMPNE: _ne, Ops.CMPLT: operator.lt,
  Ops.CMPEQ: _eq, Ops.XOR: operator.xor, Ops.OR: operator.or_, Ops.AND: operator.and_, Ops.SHR: operator.rshift,
  Ops.SHL: operator.lshift, Ops.MAX: _max, Ops.CMOD: _cmod, Ops.CDIV: _cdiv, Ops.FDIV: _fdiv, Ops.FLOORDIV: floordiv,
  Ops.FLOORMOD: floormod, Ops.MULACC: lambda x, y, z: (x*y)+z, Ops.WHERE: _where}

def exec_alu(op:Ops, dtype:DType, operands, truncate_output:bool=True):
  """op applied to Python values; the result is wrapped/rounded to dtype unless truncate_output is False."""
  if any(isinstance(x, tuple) for x in operands):
    count = max(len(x) for x in operands if isinstance(x, tuple))
    return tuple(exec_alu(op, dtype, [x[i] if isinstance(x, tuple) else x for x in operands]) for i in range(count))
  if op in GroupOp.Binary and Invalid in operands: return Invalid
  # MULACC folds as the devices that make it compute it: float32/float64 rounded once (Renderer.fused_mulacc)
  ret = fma(*operands, dtype) if op is Ops.MULACC else python_alu[op](*operands)
  if truncate_output and (fxn := truncate.get(dtype)) is not None: return fxn(ret)
  return ret
