"""Elementwise ops that only Tensor has: unary math, activations and the binary and ternary ops beyond tinygrad/mixin/mathtraits.py."""
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class ElementwiseMixin:
  pass

__all__ = ["ElementwiseMixin"]
