"""sint: a size or index that is an int or a UOp expression of Variables, and the helpers that take either (the UOp side simplifies,
the int side is plain Python)."""
from __future__ import annotations
import functools
from tinygrad._core import UOp
from tinygrad.dtype import dtypes
from tinygrad.helpers import argfix, partition

sint = int|UOp

def resolve(x:UOp|bool, default:bool=True) -> bool:
  """The value of a bool expression when simplification proves it, else `default`."""
  if isinstance(x, bool): return x
  if x.dtype is not dtypes.bool: raise TypeError(f"resolve needs a bool UOp, got {x.dtype}")
  return bool(sx.vmin) if (sx := x.simplify()).vmin == sx.vmax else default

def sym_le(a:sint, b:sint) -> bool:
  """a <= b may hold: False only when the value ranges prove a > b (a quick check of sizes that does not simplify)."""
  if type(a) is int and type(b) is int: return a <= b
  return (a.vmin if isinstance(a, UOp) else a) <= (b.vmax if isinstance(b, UOp) else b)

def _suop(lst, uop_fxn, python_fxn):
  uops, nums = partition(lst, lambda x: isinstance(x, UOp))
  return ssimplify(functools.reduce(uop_fxn, uops + ([python_fxn(nums)] if nums else [])))
def smax(*lst) -> sint: return _suop(argfix(*lst), UOp.maximum, max)
def smin(*lst) -> sint: return _suop(argfix(*lst), UOp.minimum, min)
def srender(x:sint) -> str: return x.render() if isinstance(x, UOp) else str(x)
def ssimplify(uop:sint): return uop.ssimplify() if isinstance(uop, UOp) else uop
def sym_infer(uop:UOp|int, var_vals:dict) -> int: return uop.sym_infer(var_vals) if isinstance(uop, UOp) else uop
