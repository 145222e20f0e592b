"""Small checks and conversions shared by the Tensor files."""
from __future__ import annotations
from tinygrad.device import Device, canonicalize_device
from tinygrad.uop.ops import UOp
from tinygrad.mixin.movement import shape_str

def canon_device(device:str|tuple|list|None) -> str|tuple[str, ...]:
  """The canonical name of a device, or a tuple of them (several devices: a sharded tensor); None is Device.DEFAULT."""
  return canonicalize_device(device) if device is not None else Device.DEFAULT

def broadcast_shape(*shapes:tuple[int, ...]) -> tuple[int, ...]:
  """The shape numpy broadcasting gives shapes (RuntimeError naming them when they don't broadcast)."""
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  ret = []
  for dims in zip(*padded):
    # sizes compare by identity first: a symbolic size (a bound Variable expression) broadcasts only with itself or 1
    non1 = list(dict.fromkeys(d for d in dims if isinstance(d, UOp) or d != 1))
    if len(non1) > 1 and any(isinstance(d, UOp) for d in non1):
      # tinygrad 0.14's error for symbolic shapes that differ
      raise IndexError(f"shape mismatch: objects cannot be broadcast to a single shape: {' and '.join(shape_str(tuple(s)) for s in shapes)}")
    if len(non1) > 1:
      raise RuntimeError(f"shapes {' and '.join(shape_str(tuple(s)) for s in shapes)} can't be broadcast together")
    ret.append(non1[0] if non1 else 1)
  return tuple(ret)

class TensorBase:
  """The first base of Tensor (core.py). The mixins that hold Tensor's operations are bases of the class too, defined before it, so they
  never name it: they build tensors with cls(...) or type(self)(...) and recognize one with isinstance(x, TensorBase)."""
  __slots__ = ()

def check_tensors(what:str, ts) -> tuple:
  """ts as a tuple, TypeError naming `what` when one isn't a Tensor."""
  if bad := [type(t).__name__ for t in ts if not isinstance(t, TensorBase)]: raise TypeError(f"{what} takes Tensors, got {', '.join(bad)}")
  return tuple(ts)

def leaf(t, requires_grad:bool|None):
  """t with requires_grad set as a creation function's torch-style argument asks (None leaves the default)."""
  return t if requires_grad is None else t.requires_grad_(requires_grad)
