"""Elementwise arithmetic, comparisons, logic, bitwise, unary math, activations, casts, reductions, matrix products."""
from __future__ import annotations
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op

@onnx_op("Add", 7)
def Add(a:Tensor, b:Tensor) -> Tensor: return a + b

@onnx_op("Relu", 6)
def Relu(x:Tensor) -> Tensor: return x.relu()
