"""The training domain (ai.onnx.preview.training): Adam, Adagrad, Momentum, Gradient."""
from __future__ import annotations
