"""Elementwise arithmetic, comparisons, logic, bitwise, unary math, activations, casts, reductions, matrix products."""
from __future__ import annotations
import functools
import math
import numpy as np
from tinygrad.dtype import DType, dtypes, fp8_max, float_to_fp8
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx
from tinygrad.nn.onnx.ops.common import to_ints, to_python

# ***** binary arithmetic (multidirectional broadcasting; ONNX gives both inputs one dtype, so there is no promotion) *****

def _same(out:Tensor, like:Tensor) -> Tensor: return out if out.dtype == like.dtype else out.cast(like.dtype)

onnx_op("Add", 7)(lambda a, b: _same(a + b, a))
onnx_op("Sub", 7)(lambda a, b: _same(a - b, a))
onnx_op("Mul", 7)(lambda a, b: _same(a * b, a))

@onnx_op("Div", 7)
def Div(a:Tensor, b:Tensor) -> Tensor:
  # integer division truncates toward zero, as C does
  return a.div(b, rounding_mode="trunc") if dtypes.is_int(a.dtype) else _same(a / b, a)

@onnx_op("Mod", 10)
def Mod(a:Tensor, b:Tensor, fmod:int=0) -> Tensor:
  if not dtypes.is_float(a.dtype): return a.fmod(b) if fmod else a.mod(b)
  # C fmod: a - trunc(a/b)*b, except that a finite a over an infinite b is a itself (the formula gives NaN)
  r = (b.isinf() & ~a.isinf()).where(a, a.fmod(b))
  if fmod: return _same(r, a)
  # numpy's mod: the sign of the divisor, a zero result signed like b
  r = ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
  return _same((r == 0).where(Tensor.zeros_like(r).copysign(b), r), a)

@onnx_op("Pow", 7)
def Pow(x:Tensor, y:Tensor) -> Tensor:
  if dtypes.is_int(x.dtype): return (x.cast(dtypes.float64) ** y.cast(dtypes.float64)).round().cast(x.dtype)
  return _same(x ** (y if dtypes.is_float(y.dtype) else y.cast(x.dtype)), x)

@onnx_op("BitShift", 11)
def BitShift(x:Tensor, y:Tensor, direction:str="") -> Tensor:
  if direction not in ("LEFT", "RIGHT"): raise ValueError(f"BitShift: direction must be LEFT or RIGHT, got {direction!r}")
  # a shift by the width or more, or by a negative amount, shifts every bit out (C leaves it undefined)
  bits = x.dtype.itemsize * 8
  valid = (y >= 0) & (y < bits)
  amount = valid.where(y, 0).cast(y.dtype)
  if direction == "LEFT": return _same(valid.where(x.lshift(amount), 0), x)
  out_of_range = (x < 0).where(-1, 0) if not dtypes.is_unsigned(x.dtype) else Tensor.zeros_like(x)
  return _same(valid.where(x.rshift(amount), out_of_range), x)

onnx_op("BitwiseAnd", 18)(lambda a, b: a.bitwise_and(b))
onnx_op("BitwiseOr", 18)(lambda a, b: a.bitwise_or(b))
onnx_op("BitwiseXor", 18)(lambda a, b: a.bitwise_xor(b))
onnx_op("BitwiseNot", 18)(lambda x: x.bitwise_not())
onnx_op("And", 7)(lambda a, b: a.bitwise_and(b))
onnx_op("Or", 7)(lambda a, b: a.bitwise_or(b))
onnx_op("Xor", 7)(lambda a, b: a.bitwise_xor(b))
onnx_op("Not", 1)(lambda x: x.logical_not())

onnx_op("Equal", 7)(lambda a, b: a == b)
onnx_op("Less", 7)(lambda a, b: a < b)
onnx_op("LessOrEqual", 12)(lambda a, b: a <= b)
onnx_op("Greater", 7)(lambda a, b: a > b)
onnx_op("GreaterOrEqual", 12)(lambda a, b: a >= b)
onnx_op("Where", 9)(lambda c, x, y: c.where(x, y))

def _variadic(fn):
  return lambda *xs: functools.reduce(lambda a, b: _same(fn(a, b), a), xs)
onnx_op("Max", 8)(_variadic(Tensor.maximum))
onnx_op("Min", 8)(_variadic(Tensor.minimum))
onnx_op("Sum", 8)(_variadic(Tensor.add))
onnx_op("Mean", 8)(lambda *xs: _same(_variadic(Tensor.add)(*xs) / len(xs), xs[0]))

# ***** unary *****

for _name, _fn in {"Abs": Tensor.abs, "Neg": Tensor.neg, "Sqrt": Tensor.sqrt, "Exp": Tensor.exp, "Log": Tensor.log,
                   "Reciprocal": Tensor.reciprocal, "Floor": Tensor.floor, "Ceil": Tensor.ceil, "Sin": Tensor.sin, "Cos": Tensor.cos,
                   "Tan": Tensor.tan, "Asin": Tensor.asin, "Acos": Tensor.acos, "Atan": Tensor.atan, "Sinh": Tensor.sinh,
                   "Cosh": Tensor.cosh, "Tanh": Tensor.tanh, "Asinh": Tensor.asinh, "Acosh": Tensor.acosh, "Atanh": Tensor.atanh,
                   "Erf": Tensor.erf, "Sigmoid": Tensor.sigmoid, "Relu": Tensor.relu, "Softsign": Tensor.softsign,
                   "Softplus": Tensor.softplus, "Mish": Tensor.mish, "HardSwish": Tensor.hardswish, "Round": Tensor.round}.items():
  onnx_op(_name, 6)(functools.partial(lambda f, x: _same(f(x), x), _fn))
onnx_op("Sign", 9)(lambda x: _same(x.sign(), x))
onnx_op("IsNaN", 9)(lambda x: x.isnan())

@onnx_op("IsInf", 10)
def IsInf(x:Tensor, detect_negative:int=1, detect_positive:int=1) -> Tensor: return x.isinf(bool(detect_positive), bool(detect_negative))

# ***** activations with attributes *****

onnx_op("Elu", 6)(lambda x, alpha=1.0: x.elu(alpha))
onnx_op("Celu", 12)(lambda x, alpha=1.0: x.celu(alpha))
onnx_op("Selu", 6)(lambda x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875: gamma * (x > 0).where(x, alpha * (x.exp() - 1)))
onnx_op("LeakyRelu", 6)(lambda x, alpha=0.01: x.leaky_relu(alpha))
onnx_op("ThresholdedRelu", 10)(lambda x, alpha=1.0: (x > alpha).where(x, 0))
onnx_op("HardSigmoid", 6)(lambda x, alpha=0.2, beta=0.5: (alpha * x + beta).clip(0, 1))
onnx_op("PRelu", 9)(lambda x, slope: _same((x < 0).where(x * slope, x), x))
onnx_op("Shrink", 9)(lambda x, bias=0.0, lambd=0.5: _same((x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)), x))
onnx_op("Swish", 24)(lambda x, alpha=1.0: x * (alpha * x).sigmoid())

@onnx_op("Gelu", 20)
def Gelu(x:Tensor, approximate:str="none") -> Tensor:
  if approximate == "tanh": return x.gelu(approximate="tanh")
  return 0.5 * x * (1 + (x / math.sqrt(2)).erf())

@onnx_op("Clip", 6)
def Clip_6(x:Tensor, min:float=-3.4028234663852886e38, max:float=3.4028234663852886e38) -> Tensor:  # noqa: A002
  return x.clip(min, max)

@onnx_op("Clip", 11)
def Clip(x:Tensor, min:Tensor|None=None, max:Tensor|None=None) -> Tensor:  # noqa: A002
  if min is not None: x = x.maximum(min.cast(x.dtype))
  if max is not None: x = x.minimum(max.cast(x.dtype))
  return x

# ***** casts *****

def _cast(x:Tensor|np.ndarray, dtype, saturate:int=1) -> Tensor|np.ndarray:
  if dtype is None:   # to STRING: numpy's text of each value, on the host
    arr = x.numpy() if isinstance(x, Tensor) else x
    return np.vectorize(lambda v: str(v) if not isinstance(v, (float, np.floating)) else np.format_float_positional(v, trim="-")
                        if math.isfinite(v) else {math.inf: "INF", -math.inf: "-INF"}.get(float(v), "NaN"), otypes=[object])(arr)
  if isinstance(x, np.ndarray): return Tensor(x.astype(np.float64 if dtypes.is_float(dtype) else np.int64)).cast(dtype)
  if dtypes.is_float(x.dtype) and dtypes.is_int(dtype) and dtype != dtypes.bool: return x.trunc().cast(dtype)
  if dtype in dtypes.fp8s: return cast_fp8(x, dtype, saturate)
  return x.cast(dtype)

def cast_fp8(x:Tensor, dtype:DType, saturate:int) -> Tensor:
  """ONNX's float8 conversion (Cast, QuantizeLinear; round-half-even): saturate=1 clips to the largest finite value, infinities too
  (tinygrad's cast keeps e5m2's infinity and makes it NaN in the other formats); saturate=0 lets values that round beyond it overflow,
  to +-inf in e5m2 and NaN in the formats without an infinity."""
  mx, v = fp8_max(dtype), x if x.dtype is dtypes.float64 else x.cast(dtypes.float32)   # float32 holds every value near the bounds
  if saturate: return v.clip(-mx, mx).cast(dtype)
  # halfway from the largest finite value to the next step up: beyond it (at it, when the largest code is odd) rounding overflows
  halfway = mx + 2.0 ** (math.frexp(mx)[1] - 2 - dtypes.finfo(dtype)[1])
  overflow = v.abs() >= halfway if float_to_fp8(mx, dtype) & 1 else v.abs() > halfway
  fill = (v < 0).where(-math.inf, math.inf) if dtype is dtypes.fp8e5m2 else math.nan
  return overflow.where(fill, v).cast(dtype)

@onnx_op("Cast", 6)
def Cast(x:Tensor, to:int, saturate:int=1, round_mode:str="up") -> Tensor:
  if round_mode != "up": raise NotImplementedError(f"Cast: round_mode={round_mode!r} is not supported")
  return _cast(x, dtype_from_onnx(to), saturate)

@onnx_op("CastLike", 15)
def CastLike(x:Tensor, target:Tensor, saturate:int=1, round_mode:str="up") -> Tensor:
  if round_mode != "up": raise NotImplementedError(f"CastLike: round_mode={round_mode!r} is not supported")
  return _cast(x, target.dtype if isinstance(target, Tensor) else None, saturate)

@onnx_op("BitCast", 26)
def BitCast(x:Tensor, to:int) -> Tensor:
  dtype = dtype_from_onnx(to)
  if dtype is None or dtype.itemsize != x.dtype.itemsize: raise NotImplementedError(f"BitCast: {x.dtype.name} to element type {to}")
  return x.bitcast(dtype)

# ***** reductions *****

def _axes(x:Tensor, axes:list[int]|None, noop_with_empty_axes:int) -> tuple[int, ...]|None:
  if not axes: return () if noop_with_empty_axes else tuple(range(x.ndim))
  return tuple(a + x.ndim if a < 0 else a for a in axes)

def _reduce(name:str, fn, opset_axes_input:int):
  def attr_axes(x:Tensor, axes:list[int]|None=None, keepdims:int=1, noop_with_empty_axes:int=0) -> Tensor:
    ax = _axes(x, axes, noop_with_empty_axes)
    return x if ax == () else fn(x, ax, bool(keepdims))
  def input_axes(x:Tensor, axes:Tensor|None=None, keepdims:int=1, noop_with_empty_axes:int=0) -> Tensor:
    return attr_axes(x, to_ints(axes), keepdims, noop_with_empty_axes)
  onnx_op(name, 1)(attr_axes)
  onnx_op(name, opset_axes_input)(input_axes)

def _sum(x, ax, k): return _same(x.sum(ax, keepdim=k), x)
_reduce("ReduceSum", _sum, 13)
_reduce("ReduceMean", lambda x, ax, k: _same(x.mean(ax, keepdim=k), x), 18)
_reduce("ReduceProd", lambda x, ax, k: _same(x.prod(ax, keepdim=k), x), 18)
_reduce("ReduceMax", lambda x, ax, k: x.max(ax, keepdim=k) if x.numel() else _empty_reduce(x, ax, k, x.dtype.min), 18)
_reduce("ReduceMin", lambda x, ax, k: x.min(ax, keepdim=k) if x.numel() else _empty_reduce(x, ax, k, x.dtype.max), 18)
_reduce("ReduceL1", lambda x, ax, k: _sum(x.abs(), ax, k), 18)
_reduce("ReduceL2", lambda x, ax, k: _same(x.cast(dtypes.float32).square().sum(ax, keepdim=k).sqrt(), x), 18)
_reduce("ReduceSumSquare", lambda x, ax, k: _sum(x.square(), ax, k), 18)
_reduce("ReduceLogSum", lambda x, ax, k: _sum(x, ax, k).log(), 18)
_reduce("ReduceLogSumExp", lambda x, ax, k: _same(x.cast(dtypes.float64).logsumexp(ax, keepdim=k), x) if x.numel() else
        _sum(x, ax, k).log(), 18)

def _empty_reduce(x:Tensor, axes:tuple[int, ...], keepdim:bool, identity) -> Tensor:
  # max/min over nothing is the identity of the reduction (-inf for max, +inf for min, the int range's end for ints)
  shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape) if keepdim or i not in axes)
  return Tensor.full(shape, identity, dtype=x.dtype, device=x.device)

def _arg(x:Tensor, axis:int, keepdims:int, select_last_index:int, fn) -> Tensor:
  if select_last_index:
    n = x.shape[axis]
    return (n - 1 - fn(x.flip(axis), axis=axis, keepdim=bool(keepdims))).cast(dtypes.int64)
  return fn(x, axis=axis, keepdim=bool(keepdims)).cast(dtypes.int64)

onnx_op("ArgMax", 1)(lambda x, axis=0, keepdims=1, select_last_index=0: _arg(x, axis, keepdims, select_last_index, Tensor.argmax))
onnx_op("ArgMin", 1)(lambda x, axis=0, keepdims=1, select_last_index=0: _arg(x, axis, keepdims, select_last_index, Tensor.argmin))

@onnx_op("CumSum", 11)
def CumSum(x:Tensor, axis:Tensor, exclusive:int=0, reverse:int=0) -> Tensor:
  return _cumulative(x, int(to_python(axis)), exclusive, reverse, Tensor.cumsum, 0)

@onnx_op("CumProd", 26)
def CumProd(x:Tensor, axis:Tensor, exclusive:int=0, reverse:int=0) -> Tensor:
  return _cumulative(x, int(to_python(axis)), exclusive, reverse, Tensor.cumprod, 1)

def _cumulative(x:Tensor, axis:int, exclusive:int, reverse:int, fn, identity) -> Tensor:
  axis = axis + x.ndim if axis < 0 else axis
  if reverse: x = x.flip(axis)
  if exclusive:
    pad = [(0, 0)] * x.ndim
    pad[axis] = (1, 0)
    x = x.pad(tuple(pad), value=identity).shrink(tuple((0, s) for s in x.shape))
  out = _same(fn(x, axis), x)
  return out.flip(axis) if reverse else out

@onnx_op("TopK", 10)
def TopK(x:Tensor, k:Tensor, axis:int=-1, largest:int=1, sorted:int=1) -> tuple[Tensor, Tensor]:  # noqa: A002
  values, indices = x.topk(int(to_ints(k)[0]), dim=axis, largest=bool(largest), sorted_=True)
  return values, indices.cast(dtypes.int64)

# ***** softmax family: before opset 13 the input is flattened to 2-D at `axis` and the op runs over the second dimension *****

def _coerce_2d(fn):
  def op(x:Tensor, axis:int=1) -> Tensor:
    axis = axis + x.ndim if axis < 0 else axis
    return fn(x.reshape(math.prod(x.shape[:axis]), -1), 1).reshape(x.shape)
  return op

def _hardmax(x:Tensor, axis:int) -> Tensor:
  axis = axis + x.ndim if axis < 0 else axis
  positions = Tensor.arange(x.shape[axis], device=x.device).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
  return (positions == x.argmax(axis, keepdim=True)).cast(x.dtype)

for _name, _fn in {"Softmax": Tensor.softmax, "LogSoftmax": Tensor.log_softmax, "Hardmax": _hardmax}.items():
  onnx_op(_name, 1)(_coerce_2d(_fn))
  onnx_op(_name, 13)(functools.partial(lambda f, x, axis=-1: f(x, axis), _fn))

# ***** matrix products *****

onnx_op("MatMul", 1)(lambda a, b: _same(a @ b, a))

@onnx_op("Gemm", 7)
def Gemm(a:Tensor, b:Tensor, c:Tensor|None=None, alpha:float=1.0, beta:float=1.0, transA:int=0, transB:int=0) -> Tensor:
  out = (a.T if transA else a) @ (b.T if transB else b)
  if alpha != 1.0: out = out * alpha
  if c is not None: out = out + (c * beta if beta != 1.0 else c)
  return _same(out, a)

@onnx_op("Einsum", 12)
def Einsum(*inputs:Tensor, equation:str) -> Tensor: return _same(Tensor.einsum(equation.replace(" ", ""), *inputs), inputs[0])

@onnx_op("Det", 11)
def Det(x:Tensor) -> Tensor:
  # Laplace expansion along the first row: exact and branch-free, fine for the small matrices ONNX models take determinants of
  n = x.shape[-1]
  if n > 6: raise NotImplementedError(f"Det: matrices of size {n} (over 6) are not supported")
  def det(cols:tuple[int, ...], row:int) -> Tensor:
    if len(cols) == 1: return x[..., row, cols[0]]
    return functools.reduce(Tensor.add, [(-1) ** i * x[..., row, c] * det(cols[:i] + cols[i+1:], row + 1) for i, c in enumerate(cols)])
  return det(tuple(range(n)), 0)

