"""The Tensor API: the class is in core.py, its operations in one file per kind (see core.py's docstring)."""
from tinygrad.tensor.core import Tensor

__all__ = ["Tensor"]
