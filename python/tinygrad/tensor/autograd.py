"""Autograd: backward, gradient, detach and the parameters' gradients (the rules are in tinygrad/gradient.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class AutogradMixin:
  pass

__all__ = ["AutogradMixin"]
