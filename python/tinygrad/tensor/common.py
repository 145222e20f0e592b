"""Small checks and conversions shared by the Tensor files."""
from __future__ import annotations
from tinygrad.device import Device

def canon_device(device:str|None) -> str: return Device.canonicalize(device) if device is not None else Device.DEFAULT

def broadcast_shape(*shapes:tuple[int, ...]) -> tuple[int, ...]:
  """The shape numpy broadcasting gives shapes (RuntimeError naming them when they don't broadcast)."""
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  ret = []
  for dims in zip(*padded):
    non1 = {d for d in dims if d != 1}
    if len(non1) > 1: raise RuntimeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    ret.append(non1.pop() if non1 else 1)
  return tuple(ret)

def check_tensors(what:str, ts) -> tuple:
  """ts as a tuple, TypeError naming `what` when one isn't a Tensor."""
  from tinygrad.tensor.core import Tensor
  if bad := [type(t).__name__ for t in ts if not isinstance(t, Tensor)]: raise TypeError(f"{what} takes Tensors, got {', '.join(bad)}")
  return tuple(ts)
