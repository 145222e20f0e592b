"""Conversions the operators share: ONNX passes shapes, axes and counts as int64 tensors, which an operator needs as Python values."""
from __future__ import annotations
import contextlib
from typing import Any, Iterator
from tinygrad.tensor import Tensor

# the values a running graph already knows on the host, by the id of the Tensor holding them (kept with the Tensor, so an id is never
# another Tensor's): OnnxRunner registers its small constants and shape computations here, so reading them needs no kernel, also
# inside a TinyJit capture (where reading a tensor's data is an error)
_known_stack: list[dict[int, tuple[Tensor, Any]]] = []

@contextlib.contextmanager
def known_host_values(known:dict[int, tuple[Tensor, Any]]) -> Iterator[None]:
  _known_stack.append(known)
  try: yield
  finally: _known_stack.pop()

def to_python(t:Any) -> Any:
  """A Tensor input's values as a Python scalar or (nested) list; other values unchanged."""
  if not isinstance(t, Tensor): return t
  for known in reversed(_known_stack):
    if (entry := known.get(id(t))) is not None and entry[0] is t: return entry[1]
  return t.tolist()

def to_ints(t:Any) -> list[int]|None:
  """A 1-D int64 input (shape, axes, pads, ...) as a list of ints; None stays None."""
  if t is None: return None
  v = to_python(t)
  return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]
