"""Quantization: QuantizeLinear/DequantizeLinear, DynamicQuantizeLinear, QLinearConv/QLinearMatMul, MatMulInteger/ConvInteger."""
from __future__ import annotations
from tinygrad.dtype import DType, dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx
from tinygrad.nn.onnx.ops.nn import Conv
from tinygrad.nn.onnx.ops.math import cast_fp8

def _per_axis(t:Tensor, x:Tensor, axis:int, block_size:int) -> Tensor:
  # a scale or zero point: scalar, one per slice of `axis`, or one per block of block_size along it
  if t.ndim == 0 or t.numel() == 1 and t.ndim <= 1: return t.reshape(())
  axis = axis + x.ndim if axis < 0 else axis
  if block_size: return t.repeat_interleave(block_size, dim=axis).shrink(tuple((0, s) for s in x.shape))
  return t.reshape([-1 if i == axis else 1 for i in range(x.ndim)])

def _saturate(x:Tensor, dtype:DType) -> Tensor:
  if dtypes.is_float(dtype): return x.cast(dtype)
  return x.clip(dtype.min, dtype.max).cast(dtype)

def _quantize(x:Tensor, scale:Tensor, zero_point:Tensor|None, axis:int, block_size:int, out_dtype:DType, saturate:int=1) -> Tensor:
  y = x.cast(dtypes.float32) / _per_axis(scale, x, axis, block_size).cast(dtypes.float32)
  if out_dtype in dtypes.fp8s: return cast_fp8(y, out_dtype, saturate)
  if dtypes.is_float(out_dtype): return y.cast(out_dtype)
  y = y.round()
  if zero_point is not None: y = y + _per_axis(zero_point, x, axis, block_size).cast(dtypes.float32)
  return _saturate(y, out_dtype)

@onnx_op("QuantizeLinear", 10)
def QuantizeLinear(x:Tensor, y_scale:Tensor, y_zero_point:Tensor|None=None, axis:int=1, block_size:int=0, output_dtype:int=0,
                   saturate:int=1, precision:int=0) -> Tensor:
  out = y_zero_point.dtype if y_zero_point is not None else dtype_from_onnx(output_dtype) if output_dtype else dtypes.uint8
  return _quantize(x, y_scale, y_zero_point, axis, block_size, out, saturate)

@onnx_op("DequantizeLinear", 10)
def DequantizeLinear(x:Tensor, x_scale:Tensor, x_zero_point:Tensor|None=None, axis:int=1, block_size:int=0, output_dtype:int=0) -> Tensor:
  v = x.cast(dtypes.float32)
  if x_zero_point is not None: v = v - _per_axis(x_zero_point, x, axis, block_size).cast(dtypes.float32)
  out = v * _per_axis(x_scale, x, axis, block_size).cast(dtypes.float32)
  return out.cast(dtype_from_onnx(output_dtype) if output_dtype else x_scale.dtype)

@onnx_op("DynamicQuantizeLinear", 11)
def DynamicQuantizeLinear(x:Tensor) -> tuple[Tensor, Tensor, Tensor]:
  lo, hi = x.min().minimum(0), x.max().maximum(0)
  scale = (hi - lo) / 255
  zero_point = (-lo / scale).round().clip(0, 255).cast(dtypes.uint8)
  return _quantize(x, scale, zero_point, 1, 0, dtypes.uint8), scale, zero_point

def _shifted(x:Tensor, zero_point:Tensor|None, axis:int) -> Tensor:
  v = x.cast(dtypes.int32)
  if zero_point is None: return v
  zp = zero_point.cast(dtypes.int32)
  return v - (zp.reshape([-1 if i == axis else 1 for i in range(x.ndim)]) if zp.numel() > 1 else zp.reshape(()))

@onnx_op("MatMulInteger", 10)
def MatMulInteger(a:Tensor, b:Tensor, a_zero_point:Tensor|None=None, b_zero_point:Tensor|None=None) -> Tensor:
  return _shifted(a, a_zero_point, a.ndim - 2) @ _shifted(b, b_zero_point, b.ndim - 1)

@onnx_op("ConvInteger", 10)
def ConvInteger(x:Tensor, w:Tensor, x_zero_point:Tensor|None=None, w_zero_point:Tensor|None=None, **conv_attrs) -> Tensor:
  return Conv(_shifted(x, x_zero_point, 1), _shifted(w, w_zero_point, 0), **conv_attrs).cast(dtypes.int32)

@onnx_op("QLinearMatMul", 10)
def QLinearMatMul(a:Tensor, a_scale:Tensor, a_zero_point:Tensor, b:Tensor, b_scale:Tensor, b_zero_point:Tensor, y_scale:Tensor,
                  y_zero_point:Tensor) -> Tensor:
  fa = DequantizeLinear(a, a_scale, a_zero_point, axis=a.ndim - 2).cast(dtypes.float32)
  fb = DequantizeLinear(b, b_scale, b_zero_point, axis=b.ndim - 1).cast(dtypes.float32)
  return _quantize(fa @ fb, y_scale, y_zero_point, 1, 0, y_zero_point.dtype)

@onnx_op("QLinearConv", 10)
def QLinearConv(x:Tensor, x_scale:Tensor, x_zero_point:Tensor, w:Tensor, w_scale:Tensor, w_zero_point:Tensor, y_scale:Tensor,
                y_zero_point:Tensor, b:Tensor|None=None, **conv_attrs) -> Tensor:
  fx = DequantizeLinear(x, x_scale, x_zero_point).cast(dtypes.float32)
  fw = DequantizeLinear(w, w_scale, w_zero_point, axis=0).cast(dtypes.float32)
  fb = b.cast(dtypes.float32) * x_scale.cast(dtypes.float32) * w_scale.cast(dtypes.float32) if b is not None else None
  return _quantize(Conv(fx, fw, fb, **conv_attrs), y_scale, y_zero_point, 1, 0, y_zero_point.dtype)
