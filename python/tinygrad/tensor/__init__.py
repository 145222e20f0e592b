"""The Tensor API: the class is in core.py, its operations in one file per kind (see core.py's docstring)."""
from tinygrad.tensor.core import Tensor
from tinygrad.device import Device
from tinygrad.dtype import to_np_dtype as _to_np_dtype  # noqa: F401  (0.14's tests import it from here)

def is_numpy_ndarray(x) -> bool:
  """Whether x is a numpy array (0.14's name: tests and loaders use it to tell arrays from lists)."""
  return type(x).__name__ == "ndarray" and type(x).__module__ == "numpy"

__all__ = ["Tensor", "Device", "is_numpy_ndarray"]
