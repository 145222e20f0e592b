"""The ONNX operators, one module per family; importing a module registers its operators (tinygrad.nn.onnx.registry)."""
from tinygrad.nn.onnx.ops import math, shape, nn, quant, control, random, text, ml, training, signal, attention  # noqa: F401
