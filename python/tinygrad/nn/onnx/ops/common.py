"""Conversions the operators share: ONNX passes shapes, axes and counts as int64 tensors, which an operator needs as Python values."""
from __future__ import annotations
from typing import Any
from tinygrad.tensor import Tensor

def to_python(t:Any) -> Any:
  """A Tensor input's values as a Python scalar or (nested) list; other values unchanged."""
  return t.tolist() if isinstance(t, Tensor) else t

def to_ints(t:Any) -> list[int]|None:
  """A 1-D int64 input (shape, axes, pads, ...) as a list of ints; None stays None."""
  if t is None: return None
  v = to_python(t)
  return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]
