"""tinygrad.nn.onnx: run ONNX models with tinygrad (tinygrad 0.14's OnnxRunner). Models are read and checked with the `onnx` package
(the optional extra [onnx]); every operator is written with Tensor operations (tinygrad/nn/onnx/ops)."""
from tinygrad.nn.onnx.registry import Domain, OpSetId, onnx_ops, onnx_op, MAX_OPSET
from tinygrad.nn.onnx.runner import OnnxRunner, OnnxValue, OnnxNode

__all__ = ["OnnxRunner", "OnnxValue", "OnnxNode", "Domain", "OpSetId", "onnx_ops", "onnx_op", "MAX_OPSET"]
