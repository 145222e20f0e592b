"""Reductions, scans and sorting beyond tinygrad/mixin/reduce.py: statistics, arg-reductions, softmax, cumulative ops, sort and topk."""
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor
else: Tensor = None  # the class, bound by tinygrad/tensor/core.py once it exists (this mixin is one of its bases)

class TensorReduceMixin:
  pass

__all__ = ["TensorReduceMixin"]
