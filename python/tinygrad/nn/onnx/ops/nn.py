"""Neural-network operators: convolutions, pooling, normalizations, dropout, recurrent layers, attention, losses, detection."""
from __future__ import annotations
import itertools
import numpy as np
import math
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx
from tinygrad.nn.onnx.ops.common import to_python, to_ints

# ***** padding: ONNX lists all begins then all ends; Tensor's pooling/conv take (begin, end) pairs from the LAST axis backwards *****

def _same_pads(in_shape, kernel, strides, dilations, auto_pad:str) -> list[int]:
  begins, ends = [], []
  for n, k, s, d in zip(in_shape, kernel, strides, dilations):
    total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
    small, big = total // 2, total - total // 2
    begins.append(small if auto_pad == "SAME_UPPER" else big)
    ends.append(big if auto_pad == "SAME_UPPER" else small)
  return begins + ends

def _pads(x:Tensor, kernel, strides, dilations, pads, auto_pad:str) -> list[int]:
  spatial = x.shape[2:]
  if auto_pad in ("SAME_UPPER", "SAME_LOWER"): return _same_pads(spatial, kernel, strides, dilations, auto_pad)
  if auto_pad == "VALID": return [0] * (2 * len(spatial))
  if auto_pad not in ("NOTSET", ""): raise NotImplementedError(f"auto_pad={auto_pad!r} is not supported")
  return list(pads) if pads is not None else [0] * (2 * len(spatial))

def _tiny_pads(pads:list[int]) -> list[int]:
  n = len(pads) // 2
  return [p for i in reversed(range(n)) for p in (pads[i], pads[i + n])]

def _defaults(x:Tensor, kernel, strides, dilations):
  n = x.ndim - 2
  return list(kernel), list(strides) if strides else [1] * n, list(dilations) if dilations else [1] * n

# ***** convolutions *****

@onnx_op("Conv", 1)
def Conv(x:Tensor, w:Tensor, b:Tensor|None=None, auto_pad:str="NOTSET", dilations:list[int]|None=None, group:int=1,
         kernel_shape:list[int]|None=None, pads:list[int]|None=None, strides:list[int]|None=None) -> Tensor:
  kernel, strides, dilations = _defaults(x, kernel_shape or w.shape[2:], strides, dilations)
  padding = _tiny_pads(_pads(x, kernel, strides, dilations, pads, auto_pad))
  return x.conv2d(w, b, groups=group, stride=strides, dilation=dilations, padding=padding)

@onnx_op("ConvTranspose", 1)
def ConvTranspose(x:Tensor, w:Tensor, b:Tensor|None=None, auto_pad:str="NOTSET", dilations:list[int]|None=None, group:int=1,
                  kernel_shape:list[int]|None=None, output_padding:list[int]|None=None, output_shape:list[int]|None=None,
                  pads:list[int]|None=None, strides:list[int]|None=None) -> Tensor:
  kernel, strides, dilations = _defaults(x, kernel_shape or w.shape[2:], strides, dilations)
  n = len(kernel)
  out_pad = list(output_padding) if output_padding else [0] * n
  if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
    target = list(output_shape)[-n:] if output_shape is not None else [s * st for s, st in zip(x.shape[2:], strides)]
    totals = [st * (i - 1) + op + (k - 1) * d + 1 - t for i, st, op, k, d, t in zip(x.shape[2:], strides, out_pad, kernel, dilations, target)]
    upper = auto_pad == "SAME_UPPER"
    begins = [t // 2 if upper else t - t // 2 for t in totals]
    pad_list = begins + [t - bg for t, bg in zip(totals, begins)]
  else: pad_list = list(pads) if pads is not None else [0] * (2 * n)
  # asymmetric pads: run with the smaller pad on both sides, then crop what remains off the end
  sym = [min(pad_list[i], pad_list[i + n]) for i in range(n)]
  out = x.conv_transpose2d(w, b, groups=group, stride=strides, dilation=dilations, padding=sym, output_padding=out_pad)
  extra = [(pad_list[i] - sym[i], pad_list[i + n] - sym[i]) for i in range(n)]
  if any(a or e for a, e in extra):
    out = out.shrink(((0, out.shape[0]), (0, out.shape[1])) + tuple((a, s - e) for (a, e), s in zip(extra, out.shape[2:])))
  return out

@onnx_op("Col2Im", 18)
def Col2Im(x:Tensor, image_shape:Tensor, block_shape:Tensor, dilations:list[int]|None=None, pads:list[int]|None=None,
           strides:list[int]|None=None) -> Tensor:
  # the adjoint of im2col: a grouped transposed convolution whose kernel puts column row k at block position k
  image, block = to_ints(image_shape), to_ints(block_shape)
  n = len(image)
  dilations, strides = list(dilations or [1] * n), list(strides or [1] * n)
  pad_list = list(pads) if pads is not None else [0] * (2 * n)
  k = math.prod(block)
  if len(block) != n or len(dilations) != n or len(strides) != n or len(pad_list) != 2 * n:
    raise ValueError(f"Col2Im: image_shape {image}, block_shape {block}, dilations {dilations}, strides {strides} and pads {pad_list} "
                     "must agree in rank")
  blocks = [(i + pad_list[d] + pad_list[d + n] - dl * (b - 1) - 1) // s + 1 for d, (i, b, dl, s) in enumerate(zip(image, block, dilations, strides))]
  batch, rows, cols = x.shape
  if rows % k or cols != math.prod(blocks):
    raise ValueError(f"Col2Im: input of shape {x.shape} does not fit block_shape {block} over image_shape {image} (expected "
                     f"C*{k} rows and {math.prod(blocks)} columns)")
  channels = rows // k
  kernel = Tensor.eye(k, dtype=x.dtype, device=x.device).reshape(1, k, 1, *block).expand(channels, k, 1, *block).reshape(channels * k, 1, *block)
  out = x.reshape(batch, rows, *blocks).conv_transpose2d(kernel, groups=channels, stride=strides, dilation=dilations)
  # the padded image is at least what the blocks cover: grow it to its full size, then cut the pads off
  grown = out.pad(((0, 0), (0, 0)) + tuple((0, i + pad_list[d] + pad_list[d + n] - o) for d, (i, o) in enumerate(zip(image, out.shape[2:]))))
  return grown.shrink(((0, batch), (0, channels)) + tuple((pad_list[d], pad_list[d] + i) for d, i in enumerate(image)))

def _bilinear_taps(coords:list[Tensor], dims:list[int], clamp:bool) -> list[tuple[Tensor, Tensor]]:
  """The 2**len(dims) corners around fractional positions (one coordinate Tensor per axis, outermost first) as (flat index into the
  row-major image, weight). clamp: positions are pulled onto the image and corners clipped to its edge (RoiAlign); otherwise a corner
  outside the image weighs 0 (zero padding, as DeformConv's sampling)."""
  per_axis = []
  for v, size in zip(coords, dims):
    if clamp: v = v.clip(0, size - 1)
    low = v.floor()
    frac = v - low
    taps = []
    for tap, w in ((low, 1 - frac), (low + 1, frac)):
      if not clamp: w = ((tap >= 0) & (tap <= size - 1)).where(w, 0)
      taps.append((tap.clip(0, size - 1).cast(dtypes.int64), w))
    per_axis.append(taps)
  corners = []
  for combo in itertools.product(*per_axis):
    index, weight = None, None
    for axis, (tap, w) in enumerate(combo):
      stride = math.prod(dims[axis + 1:])
      index = tap * stride if index is None else index + tap * stride
      weight = w if weight is None else weight * w
    corners.append((index, weight))
  return corners

@onnx_op("DeformConv", 19)
def DeformConv(x:Tensor, w:Tensor, offset:Tensor, b:Tensor|None=None, mask:Tensor|None=None, dilations:list[int]|None=None, group:int=1,
               kernel_shape:list[int]|None=None, offset_group:int=1, pads:list[int]|None=None, strides:list[int]|None=None) -> Tensor:
  kernel, strides, dilations = _defaults(x, kernel_shape or w.shape[2:], strides, dilations)
  n, channels, *in_dims = x.shape
  out_channels, out_dims, nd = w.shape[0], list(offset.shape[2:]), len(kernel)
  pad_list = list(pads) if pads is not None else [0] * (2 * nd)
  k, points = math.prod(kernel), math.prod(offset.shape[2:])
  if channels != w.shape[1] * group or out_channels % group or channels % offset_group or offset.shape[1] != offset_group * k * nd:
    raise ValueError(f"DeformConv: X {x.shape}, W {w.shape} and offset {offset.shape} do not fit group={group}, offset_group={offset_group}, "
                     f"kernel_shape={kernel}")
  expect = [(i + pad_list[d] + pad_list[d + nd] - dilations[d] * (kernel[d] - 1) - 1) // strides[d] + 1 for d, i in enumerate(in_dims)]
  if out_dims != expect or (mask is not None and mask.shape != (n, offset_group * k, *out_dims)):
    raise ValueError(f"DeformConv: offset {offset.shape} (and mask {mask.shape if mask is not None else None}) must cover the output "
                     f"{expect} of X {x.shape} with kernel_shape={kernel}, strides={strides}, dilations={dilations}, pads={pad_list}")
  # where each kernel tap of each output position reads before its offset, per axis: (k, points)
  base = []
  for d in range(nd):
    tap = Tensor.arange(kernel[d], device=x.device).reshape([-1 if i == d else 1 for i in range(nd)]).expand(kernel).reshape(k, 1)
    pos = Tensor.arange(out_dims[d], device=x.device).reshape([-1 if i == d else 1 for i in range(nd)]).expand(out_dims).reshape(1, points)
    base.append((pos * strides[d] - pad_list[d] + tap * dilations[d]).cast(dtypes.float32))
  shifts = offset.reshape(n, offset_group, k, nd, points).cast(dtypes.float32)
  coords = [base[d] + shifts[:, :, :, d] for d in range(nd)]                         # (n, offset_group, k, points)
  image = x.reshape(n, offset_group, channels // offset_group, -1)
  sampled = None
  for index, weight in _bilinear_taps(coords, in_dims, clamp=False):
    picked = image.gather(3, index.reshape(n, offset_group, 1, k * points).expand(*image.shape[:3], k * points))
    term = picked * weight.reshape(n, offset_group, 1, k * points).cast(x.dtype)
    sampled = term if sampled is None else sampled + term
  if mask is not None: sampled = sampled * mask.reshape(n, offset_group, 1, k * points)
  # a grouped matmul of the kernel taps against the sampled columns
  cols = sampled.reshape(n, group, channels // group * k, points)
  out = w.reshape(1, group, out_channels // group, -1) @ cols
  out = out.reshape(n, out_channels, *out_dims)
  return out + b.reshape(1, -1, *([1] * nd)) if b is not None else out

# ***** pooling *****

def _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad):
  kernel, strides, dilations = _defaults(x, kernel_shape, strides, dilations)
  return kernel, strides, dilations, _pads(x, kernel, strides, dilations, pads, auto_pad)

def _ceil_pads(x:Tensor, kernel, strides, dilations, pads:list[int]) -> list[int]:
  # ceil_mode: grow each end pad so the last partial window is kept, but never start a window entirely in the padding
  n = len(kernel)
  out = list(pads)
  for i, (size, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations)):
    eff = (k - 1) * d + 1
    total = size + pads[i] + pads[i + n]
    o = math.ceil((total - eff) / s) + 1
    if (o - 1) * s >= size + pads[i]: o -= 1
    out[i + n] += max((o - 1) * s + eff - total, 0)
  return out

@onnx_op("MaxPool", 1)
def MaxPool(x:Tensor, auto_pad:str="NOTSET", ceil_mode:int=0, dilations:list[int]|None=None, kernel_shape:list[int]|None=None,
            pads:list[int]|None=None, storage_order:int=0, strides:list[int]|None=None, *, _n_outputs:int=1):
  kernel, strides, dilations, pad_list = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
  if ceil_mode: pad_list = _ceil_pads(x, kernel, strides, dilations, pad_list)
  if _n_outputs < 2:
    return x.max_pool2d(tuple(kernel), stride=tuple(strides), dilation=tuple(dilations), padding=tuple(_tiny_pads(pad_list)))
  y, idx = x.max_pool2d(tuple(kernel), stride=tuple(strides), dilation=tuple(dilations), padding=tuple(_tiny_pads(pad_list)), return_indices=True)
  spatial = x.shape[2:]
  if storage_order:   # column-major positions within each (n, c) image
    coords, rem = [], idx
    for s in reversed(spatial):
      coords.append(rem % s)
      rem = rem // s
    coords = coords[::-1]
    idx, mult = 0, 1
    for c, s in zip(coords, spatial):
      idx = idx + c * mult
      mult *= s
  plane = math.prod(spatial)
  base = Tensor.arange(x.shape[0] * x.shape[1], device=x.device).reshape(x.shape[0], x.shape[1], *([1] * len(spatial))) * plane
  return y, (idx + base).cast(dtypes.int64)

@onnx_op("AveragePool", 1)
def AveragePool(x:Tensor, auto_pad:str="NOTSET", ceil_mode:int=0, count_include_pad:int=0, dilations:list[int]|None=None,
                kernel_shape:list[int]|None=None, pads:list[int]|None=None, strides:list[int]|None=None) -> Tensor:
  kernel, strides, dilations, pad_list = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
  if ceil_mode or any(d != 1 for d in dilations):
    # the windows' sums over explicitly padded input, divided by how many of a window's cells count: real cells, plus the explicit
    # padding with count_include_pad, never the cells ceil_mode adds past the padding
    grown = _ceil_pads(x, kernel, strides, dilations, pad_list) if ceil_mode else pad_list
    n = len(kernel)
    spatial_pad = [(pad_list[i], pad_list[i + n]) for i in range(n)]
    ceil_pad = [(0, grown[i + n] - pad_list[i + n]) for i in range(n)]
    sums = _window_sum(x.pad(((0, 0), (0, 0)) + tuple((a, b + c) for (a, b), (_, c) in zip(spatial_pad, ceil_pad))), kernel, strides, dilations)
    ones = Tensor.ones(1, 1, *x.shape[2:], dtype=x.dtype, device=x.device)
    cover = ones.pad(((0, 0), (0, 0)) + tuple(spatial_pad), value=1.0 if count_include_pad else 0.0).pad(((0, 0), (0, 0)) + tuple(ceil_pad))
    return sums / _window_sum(cover, kernel, strides, dilations)
  return x.avg_pool2d(tuple(kernel), stride=tuple(strides), dilation=tuple(dilations), padding=tuple(_tiny_pads(pad_list)),
                      count_include_pad=bool(count_include_pad))

def _window_sum(x:Tensor, kernel, strides, dilations) -> Tensor:
  # the sum of each window over the trailing len(kernel) axes of already padded input
  return x.avg_pool2d(tuple(kernel), stride=tuple(strides), dilation=tuple(dilations), padding=0) * math.prod(kernel)

@onnx_op("LpPool", 2)
def LpPool(x:Tensor, auto_pad:str="NOTSET", ceil_mode:int=0, dilations:list[int]|None=None, kernel_shape:list[int]|None=None, p:int=2,
           pads:list[int]|None=None, strides:list[int]|None=None) -> Tensor:
  kernel, strides, dilations, pad_list = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
  if ceil_mode: pad_list = _ceil_pads(x, kernel, strides, dilations, pad_list)
  powered = x.abs() ** p
  sums = powered.avg_pool2d(tuple(kernel), stride=tuple(strides), dilation=tuple(dilations), padding=tuple(_tiny_pads(pad_list)),
                            count_include_pad=True) * math.prod(kernel)
  return sums ** (1.0 / p)

onnx_op("GlobalAveragePool", 1)(lambda x: x.mean(axis=tuple(range(2, x.ndim)), keepdim=True))
onnx_op("GlobalMaxPool", 1)(lambda x: x.max(axis=tuple(range(2, x.ndim)), keepdim=True))
onnx_op("GlobalLpPool", 2)(lambda x, p=2: (x.abs() ** p).sum(axis=tuple(range(2, x.ndim)), keepdim=True) ** (1.0 / p))

@onnx_op("MaxUnpool", 9)
def MaxUnpool(x:Tensor, indices:Tensor, output_shape:Tensor|None=None, kernel_shape:list[int]|None=None, pads:list[int]|None=None,
              strides:list[int]|None=None) -> Tensor:
  kernel, strides, _ = _defaults(x, kernel_shape, strides, None)
  n = len(kernel)
  pad_list = list(pads) if pads else [0] * (2 * n)
  if output_shape is not None: out = [int(v) for v in to_python(output_shape)]
  else: out = list(x.shape[:2]) + [(i - 1) * s - pad_list[d] - pad_list[d + n] + k for d, (i, s, k) in enumerate(zip(x.shape[2:], strides, kernel))]
  total = math.prod(out)
  flat = Tensor.zeros(total, dtype=x.dtype, device=x.device)
  return flat.scatter(0, indices.flatten().cast(dtypes.int64), x.flatten()).reshape(out)

# ***** normalization *****

def _bshape(t:Tensor, ndim:int, axis:int=1) -> Tensor: return t.reshape([-1 if i == axis else 1 for i in range(ndim)])

@onnx_op("BatchNormalization", 6)
def BatchNormalization(x:Tensor, scale:Tensor, b:Tensor, input_mean:Tensor, input_var:Tensor, epsilon:float=1e-5, momentum:float=0.9,
                       training_mode:int=0, spatial:int=1, is_test:int=1, *, _n_outputs:int=1):
  if training_mode:
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean, var = x.mean(axis=axes), x.var(axis=axes, correction=0)
    y = (x - _bshape(mean, x.ndim)) * (_bshape(var, x.ndim) + epsilon).rsqrt() * _bshape(scale, x.ndim) + _bshape(b, x.ndim)
    return y, input_mean * momentum + mean * (1 - momentum), input_var * momentum + var * (1 - momentum)
  invstd = (input_var + epsilon).rsqrt()
  return x.batchnorm(scale, b, input_mean, invstd)

@onnx_op("InstanceNormalization", 6)
def InstanceNormalization(x:Tensor, scale:Tensor, b:Tensor, epsilon:float=1e-5) -> Tensor:
  axes = tuple(range(2, x.ndim))
  mean, var = x.mean(axis=axes, keepdim=True), x.var(axis=axes, keepdim=True, correction=0)
  return (x - mean) * (var + epsilon).rsqrt() * _bshape(scale, x.ndim) + _bshape(b, x.ndim)

def _stash(x:Tensor, stash_type:int) -> Tensor: return x.cast(dtypes.float32) if stash_type == 1 and x.dtype != dtypes.float64 else x

@onnx_op("LayerNormalization", 17)
def LayerNormalization(x:Tensor, scale:Tensor, b:Tensor|None=None, axis:int=-1, epsilon:float=1e-5, stash_type:int=1):
  axis = axis + x.ndim if axis < 0 else axis
  xs = _stash(x, stash_type)
  axes = tuple(range(axis, x.ndim))
  mean = xs.mean(axis=axes, keepdim=True)
  invstd = (xs.var(axis=axes, keepdim=True, correction=0) + epsilon).rsqrt()
  y = ((xs - mean) * invstd).cast(x.dtype) * scale
  return (y + b if b is not None else y), mean, invstd

@onnx_op("RMSNormalization", 23)
def RMSNormalization(x:Tensor, scale:Tensor, axis:int=-1, epsilon:float=1e-5, stash_type:int=1) -> Tensor:
  axis = axis + x.ndim if axis < 0 else axis
  xs = _stash(x, stash_type)
  rms = (xs.square().mean(axis=tuple(range(axis, x.ndim)), keepdim=True) + epsilon).rsqrt()
  return (xs * rms).cast(x.dtype) * scale

def _group_norm(x:Tensor, scale:Tensor, bias:Tensor, epsilon:float, num_groups:int, stash_type:int, per_group:bool) -> Tensor:
  n, c = x.shape[:2]
  xs = _stash(x, stash_type).reshape(n, num_groups, -1)
  mean, var = xs.mean(axis=-1, keepdim=True), xs.var(axis=-1, keepdim=True, correction=0)
  y = ((xs - mean) * (var + epsilon).rsqrt()).reshape(x.shape).cast(x.dtype)
  if per_group: scale, bias = scale.repeat_interleave(c // num_groups), bias.repeat_interleave(c // num_groups)
  return y * _bshape(scale, x.ndim) + _bshape(bias, x.ndim)

onnx_op("GroupNormalization", 18)(lambda x, scale, bias, epsilon=1e-5, num_groups=1:
                                  _group_norm(x, scale, bias, epsilon, num_groups, 0, scale.shape[0] != x.shape[1]))
onnx_op("GroupNormalization", 21)(lambda x, scale, bias, epsilon=1e-5, num_groups=1, stash_type=1:
                                  _group_norm(x, scale, bias, epsilon, num_groups, stash_type, False))

@onnx_op("LpNormalization", 1)
def LpNormalization(x:Tensor, axis:int=-1, p:int=2) -> Tensor:
  norm = x.abs().sum(axis, keepdim=True) if p == 1 else x.square().sum(axis, keepdim=True).sqrt()
  return x / (norm == 0).where(1, norm)

@onnx_op("MeanVarianceNormalization", 9)
def MeanVarianceNormalization(x:Tensor, axes:list[int]|None=None) -> Tensor:
  axes_t = tuple(axes) if axes is not None else (0, 2, 3)
  mean = x.mean(axis=axes_t, keepdim=True)
  return (x - mean) / ((x - mean).square().mean(axis=axes_t, keepdim=True).sqrt() + 1e-9)

@onnx_op("LRN", 1)
def LRN(x:Tensor, size:int, alpha:float=1e-4, beta:float=0.75, bias:float=1.0) -> Tensor:
  n, c = x.shape[:2]
  sq = x.square().reshape(n, 1, c, -1)
  padded = sq.pad(((0, 0), (0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2), (0, 0)))
  window = padded.avg_pool2d((size, 1), stride=1) * size
  return x / (bias + alpha / size * window.reshape(x.shape)) ** beta

# ***** dropout: identity at inference; the mask output is all true *****

def _dropout(x:Tensor, ratio:float, training:bool, seed:int|None, n_outputs:int):
  if not training or ratio == 0:
    return (x, Tensor.ones(*x.shape, dtype=dtypes.bool, device=x.device)) if n_outputs > 1 else x
  if seed is not None: Tensor.manual_seed(seed)
  mask = Tensor.rand(*x.shape, device=x.device) >= ratio
  y = mask.where(x / (1 - ratio), 0).cast(x.dtype)
  return (y, mask) if n_outputs > 1 else y

onnx_op("Dropout", 1)(lambda x, ratio=0.5, is_test=0, consumed_inputs=None, *, _n_outputs=1: _dropout(x, ratio, False, None, _n_outputs))
onnx_op("Dropout", 12)(lambda x, ratio=None, training_mode=None, seed=None, *, _n_outputs=1:
                       _dropout(x, float(to_python(ratio)) if ratio is not None else 0.5, bool(to_python(training_mode)) if training_mode is not None
                                else False, seed, _n_outputs))

# ***** losses *****

def _reduce_loss(loss:Tensor, weights:Tensor, reduction:str) -> Tensor:
  if reduction == "none": return loss
  if reduction == "sum": return loss.sum()
  if reduction == "mean": return loss.sum() / weights.sum()
  raise NotImplementedError(f"reduction={reduction!r} is not supported")

@onnx_op("NegativeLogLikelihoodLoss", 12)
def NegativeLogLikelihoodLoss(x:Tensor, target:Tensor, weight:Tensor|None=None, ignore_index:int|None=None, reduction:str="mean") -> Tensor:
  t = target.cast(dtypes.int64)
  valid = (t != ignore_index) if ignore_index is not None else Tensor.ones(*t.shape, dtype=dtypes.bool, device=t.device)
  safe = valid.where(t, 0)
  picked = x.gather(1, safe.unsqueeze(1)).squeeze(1)
  w = weight[safe] if weight is not None else Tensor.ones(*t.shape, dtype=x.dtype, device=x.device)
  w = valid.where(w, 0).cast(x.dtype)
  return _reduce_loss(-picked * w, w, reduction).cast(x.dtype)

@onnx_op("SoftmaxCrossEntropyLoss", 12)
def SoftmaxCrossEntropyLoss(scores:Tensor, labels:Tensor, weights:Tensor|None=None, ignore_index:int|None=None, reduction:str="mean",
                            *, _n_outputs:int=1):
  log_prob = scores.log_softmax(1)
  loss = NegativeLogLikelihoodLoss(log_prob, labels, weights, ignore_index, reduction)
  return (loss, log_prob) if _n_outputs > 1 else loss


# ***** attention *****

def _heads(x:Tensor, n:int|None) -> Tensor:
  # (batch, seq, hidden) -> (batch, heads, seq, head size)
  b, s, h = x.shape
  return x.reshape(b, s, n, h // n).transpose(1, 2)

def _neg_inf_bias(allowed:Tensor, dtype) -> Tensor: return allowed.where(0.0, -math.inf).cast(dtype)

@onnx_op("Attention", 23)
def Attention(q:Tensor, k:Tensor, v:Tensor, attn_mask:Tensor|None=None, past_key:Tensor|None=None, past_value:Tensor|None=None,
              nonpad_kv_seqlen:Tensor|None=None, is_causal:int=0, kv_num_heads:int|None=None, q_num_heads:int|None=None,
              qk_matmul_output_mode:int=0, scale:float|None=None, softcap:float=0.0, softmax_precision:int|None=None,
              left_window_size:int=-1, right_window_size:int=-1, *, _n_outputs:int=1):
  three_d = q.ndim == 3
  if three_d: q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
  root_scale = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
  present_key = past_key.cat(k, dim=2) if past_key is not None else k
  present_value = past_value.cat(v, dim=2) if past_value is not None else v
  q_len, kv_len = q.shape[2], present_key.shape[2]
  bias = Tensor.zeros(q_len, kv_len, dtype=q.dtype, device=q.device)
  if attn_mask is not None:
    if attn_mask.shape[-1] < kv_len:   # a short mask is padded: the keys past it are masked out
      fill = False if attn_mask.dtype == dtypes.bool else -math.inf
      attn_mask = attn_mask.pad(((0, 0),) * (attn_mask.ndim - 1) + ((0, kv_len - attn_mask.shape[-1]),), value=fill)
    bias = bias + (_neg_inf_bias(attn_mask, q.dtype) if attn_mask.dtype == dtypes.bool else attn_mask.cast(q.dtype))
  # where each query sits among the keys: after the past cache, or at nonpad_kv_seqlen - q_len per batch entry
  rows, cols = Tensor.arange(q_len, device=q.device).reshape(q_len, 1), Tensor.arange(kv_len, device=q.device).reshape(1, kv_len)
  if past_key is None and nonpad_kv_seqlen is not None: offset = (nonpad_kv_seqlen.cast(dtypes.int64) - q_len).reshape(-1, 1, 1, 1)
  else: offset = past_key.shape[2] if past_key is not None else 0
  position = rows + offset
  if is_causal: bias = bias + _neg_inf_bias(cols <= position, q.dtype)
  if left_window_size >= 0: bias = bias + _neg_inf_bias(position - cols <= left_window_size, q.dtype)
  if right_window_size >= 0: bias = bias + _neg_inf_bias(cols - position <= right_window_size, q.dtype)
  if nonpad_kv_seqlen is not None: bias = bias + _neg_inf_bias(cols.reshape(1, 1, 1, kv_len) < nonpad_kv_seqlen.reshape(-1, 1, 1, 1), q.dtype)
  kk, vv = present_key, present_value
  if q.shape[1] != kk.shape[1]: kk, vv = kk.repeat_interleave(q.shape[1] // kk.shape[1], 1), vv.repeat_interleave(q.shape[1] // vv.shape[1], 1)
  qk = (q * root_scale) @ (kk * root_scale).transpose(-1, -2)
  if softcap > 0: qk = (qk / softcap).tanh() * softcap
  with_bias = qk + bias
  qk_out = with_bias if qk_matmul_output_mode == 2 else qk
  logits = with_bias.cast(dtype_from_onnx(softmax_precision)) if softmax_precision is not None else with_bias
  # a row whose every key is masked attends nothing (zeros), rather than NaN
  top = logits.max(-1, keepdim=True)
  masked_row = top == -math.inf
  e = (logits - masked_row.where(0, top)).exp()
  total = e.sum(-1, keepdim=True)
  probs = (e / (total == 0).where(1, total))
  probs = (bias.max(-1, keepdim=True) == -math.inf).where(0, probs).cast(q.dtype)
  if qk_matmul_output_mode == 3: qk_out = probs
  out = probs @ vv
  if three_d: out = out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)
  return out, present_key, present_value, qk_out.cast(q.dtype)

@onnx_op("RotaryEmbedding", 23)
def RotaryEmbedding(x:Tensor, cos_cache:Tensor, sin_cache:Tensor, position_ids:Tensor|None=None, interleaved:int=0, num_heads:int=0,
                    rotary_embedding_dim:int=0) -> Tensor:
  three_d = x.ndim == 3
  orig_shape = x.shape
  if three_d: x = x.reshape(x.shape[0], x.shape[1], num_heads, -1)          # (batch, seq, heads, head size)
  else: x = x.transpose(1, 2)                                               # 4-D input is (batch, heads, seq, head size)
  head = x.shape[-1]
  rot = rotary_embedding_dim or head
  if position_ids is not None: cos, sin = cos_cache[position_ids.cast(dtypes.int64)], sin_cache[position_ids.cast(dtypes.int64)]
  else: cos, sin = cos_cache, sin_cache
  cos, sin = cos[..., :rot // 2].unsqueeze(2), sin[..., :rot // 2].unsqueeze(2)   # (batch, seq, 1, rot/2)
  part, rest = x[..., :rot], x[..., rot:]
  if interleaved: a, b = part[..., 0::2], part[..., 1::2]
  else: a, b = part[..., :rot // 2], part[..., rot // 2:]
  ra, rb = a * cos - b * sin, b * cos + a * sin
  rotated = Tensor.stack(ra, rb, dim=-1).flatten(-2) if interleaved else ra.cat(rb, dim=-1)
  out = rotated.cat(rest, dim=-1) if rest.shape[-1] else rotated
  return out.reshape(orig_shape) if three_d else out.transpose(1, 2)

@onnx_op("SwiGLU", 28)
def SwiGLU(a:Tensor, b:Tensor, alpha:float=1.0) -> Tensor:
  if a.shape != b.shape: raise ValueError(f"SwiGLU: inputs must have one shape (no broadcasting), got {a.shape} and {b.shape}")
  return a * (alpha * a).sigmoid() * b

# ***** recurrent layers: one step per time position, run forward (and backward for direction=reverse/bidirectional) *****

def _activation(name:str, alpha:float|None, beta:float|None):
  acts = {"Relu": lambda x: x.relu(), "Tanh": lambda x: x.tanh(), "Sigmoid": lambda x: x.sigmoid(),
          "Affine": lambda x: x * (1.0 if alpha is None else alpha) + (0.0 if beta is None else beta),
          "LeakyRelu": lambda x: x.leaky_relu(0.01 if alpha is None else alpha),
          "ThresholdedRelu": lambda x: (x > (1.0 if alpha is None else alpha)).where(x, 0),
          "ScaledTanh": lambda x: (1.0 if alpha is None else alpha) * ((1.0 if beta is None else beta) * x).tanh(),
          "HardSigmoid": lambda x: ((0.2 if alpha is None else alpha) * x + (0.5 if beta is None else beta)).clip(0, 1),
          "Elu": lambda x: x.elu(1.0 if alpha is None else alpha), "Softsign": lambda x: x.softsign(), "Softplus": lambda x: x.softplus()}
  if name not in acts: raise NotImplementedError(f"recurrent activation {name!r} is not supported")
  return acts[name]

def _activations(activations:list[str]|None, alphas:list[float]|None, betas:list[float]|None, defaults:list[str], n_dirs:int) -> list:
  names = activations or defaults * n_dirs
  alphas, betas = list(alphas or []), list(betas or [])
  return [_activation(n, alphas[i] if i < len(alphas) else None, betas[i] if i < len(betas) else None) for i, n in enumerate(names)]

def _reverse_valid(x:Tensor, seq_lens:Tensor|None) -> Tensor:
  # reverse each batch entry's first seq_lens[b] steps (time axis 0, batch axis 1), leaving the padding where it is
  if seq_lens is None: return x.flip(0)
  t = x.shape[0]
  pos, n = Tensor.arange(t, device=x.device).reshape(t, 1), seq_lens.cast(dtypes.int64).reshape(1, -1)
  src = (pos < n).where(n - 1 - pos, pos)
  return x.gather(0, src.reshape(t, -1, *([1] * (x.ndim - 2))).expand(x.shape))

def _recurrent(kind:str, x:Tensor, w:Tensor, r:Tensor, b:Tensor|None, seq_lens:Tensor|None, init_h:Tensor|None, init_c:Tensor|None,
               p:Tensor|None, activation_alpha, activation_beta, activations, clip:float|None, direction:str, hidden_size:int, layout:int,
               linear_before_reset:int=0, input_forget:int=0):
  if layout: x = x.transpose(0, 1)
  if init_h is not None and layout: init_h = init_h.transpose(0, 1)
  if init_c is not None and layout: init_c = init_c.transpose(0, 1)
  steps, batch = x.shape[:2]
  h_size = hidden_size
  n_dirs = 2 if direction == "bidirectional" else 1
  gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
  defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
  acts = _activations(activations, activation_alpha, activation_beta, defaults, n_dirs)
  per_dir = len(defaults)
  def clipped(v:Tensor) -> Tensor: return v.clip(-clip, clip) if clip is not None else v
  ys, hs, cs = [], [], []
  for d in range(n_dirs):
    f = acts[d * per_dir:(d + 1) * per_dir]
    wd, rd = w[d], r[d]
    bias = b[d] if b is not None else Tensor.zeros(2 * gates * h_size, dtype=x.dtype, device=x.device)
    wb, rb = bias[:gates * h_size], bias[gates * h_size:]
    h = init_h[d] if init_h is not None else Tensor.zeros(batch, h_size, dtype=x.dtype, device=x.device)
    c = init_c[d] if init_c is not None else Tensor.zeros(batch, h_size, dtype=x.dtype, device=x.device)
    reverse = direction == "reverse" or d == 1
    xs = _reverse_valid(x, seq_lens) if reverse else x
    # the input projections of every step at once
    xw = xs @ wd.T + wb
    outs = []
    for t in range(steps):
      xt = xw[t]
      if kind == "RNN": h_new = f[0](clipped(xt + h @ rd.T + rb))
      elif kind == "GRU":
        rz, rr, rh = rd[:h_size], rd[h_size:2 * h_size], rd[2 * h_size:]
        bz, br, bh = rb[:h_size], rb[h_size:2 * h_size], rb[2 * h_size:]
        z = f[0](clipped(xt[:, :h_size] + h @ rz.T + bz))
        rg = f[0](clipped(xt[:, h_size:2 * h_size] + h @ rr.T + br))
        if linear_before_reset: hh = f[1](clipped(xt[:, 2 * h_size:] + rg * (h @ rh.T + bh)))
        else: hh = f[1](clipped(xt[:, 2 * h_size:] + (rg * h) @ rh.T + bh))
        h_new = (1 - z) * hh + z * h
      else:
        g = xt + h @ rd.T + rb
        gi, go, gf, gc = (g[:, k * h_size:(k + 1) * h_size] for k in range(4))
        pi, po, pf = (p[d][k * h_size:(k + 1) * h_size] for k in range(3)) if p is not None else (0, 0, 0)
        i = f[0](clipped(gi + pi * c))
        fg = 1 - i if input_forget else f[0](clipped(gf + pf * c))
        c_new = fg * c + i * f[1](clipped(gc))
        o = f[0](clipped(go + po * c_new))
        h_new = o * f[2](c_new)
      if seq_lens is not None:
        valid = (seq_lens.cast(dtypes.int64) > t).reshape(batch, 1)
        h_new = valid.where(h_new, h)
        if kind == "LSTM": c = valid.where(c_new, c)
        outs.append(valid.where(h_new, 0))
      else:
        if kind == "LSTM": c = c_new
        outs.append(h_new)
      h = h_new
    y = Tensor.stack(*outs)
    ys.append(_reverse_valid(y, seq_lens) if reverse else y)
    hs.append(h)
    cs.append(c)
  y, y_h, y_c = Tensor.stack(*ys, dim=1), Tensor.stack(*hs), Tensor.stack(*cs)
  if layout: y, y_h, y_c = y.permute(2, 0, 1, 3), y_h.transpose(0, 1), y_c.transpose(0, 1)
  return (y, y_h, y_c) if kind == "LSTM" else (y, y_h)

@onnx_op("RNN", 7)
def RNN(x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None, activations=None, clip=None,
        direction="forward", hidden_size=None, layout=0):
  return _recurrent("RNN", x, w, r, b, sequence_lens, initial_h, None, None, activation_alpha, activation_beta, activations, clip, direction,
                    hidden_size, layout)

@onnx_op("GRU", 7)
def GRU(x, w, r, b=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None, activations=None, clip=None,
        direction="forward", hidden_size=None, layout=0, linear_before_reset=0):
  return _recurrent("GRU", x, w, r, b, sequence_lens, initial_h, None, None, activation_alpha, activation_beta, activations, clip, direction,
                    hidden_size, layout, linear_before_reset=linear_before_reset)

@onnx_op("LSTM", 7)
def LSTM(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, activation_alpha=None, activation_beta=None,
         activations=None, clip=None, direction="forward", hidden_size=None, input_forget=0, layout=0):
  return _recurrent("LSTM", x, w, r, b, sequence_lens, initial_h, initial_c, p, activation_alpha, activation_beta, activations, clip, direction,
                    hidden_size, layout, input_forget=input_forget)

# ***** sampling grids *****

@onnx_op("AffineGrid", 20)
def AffineGrid(theta:Tensor, size:Tensor, align_corners:int=0) -> Tensor:
  dims = [int(v) for v in to_python(size)][2:]
  def axis_coords(n:int) -> Tensor:
    i = Tensor.arange(n, device=theta.device).cast(theta.dtype)
    if align_corners: return i * (2 / (n - 1)) - 1 if n > 1 else i * 0
    return (2 * i + 1) / n - 1
  # base points (x, y[, z], 1) over the output grid, x varying fastest
  axes = [axis_coords(n) for n in dims]
  grids = []
  for k, coords in enumerate(axes):
    shape = [1] * len(dims)
    shape[k] = dims[k]
    grids.append(coords.reshape(shape).expand(dims))
  base = Tensor.stack(*grids[::-1], Tensor.ones(*dims, dtype=theta.dtype, device=theta.device), dim=-1)   # (*dims, d+1)
  flat = base.reshape(-1, len(dims) + 1)
  out = flat.unsqueeze(0) @ theta.transpose(1, 2)            # (N, points, d)
  return out.reshape(theta.shape[0], *dims, len(dims))

def _gs_cubic(t:Tensor) -> Tensor:
  a, t = -0.75, t.abs()
  return (t <= 1).where((a + 2) * t ** 3 - (a + 3) * t ** 2 + 1, (t < 2).where(a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a, 0))

def _gs_reflect(x:Tensor, lo:float, hi:float) -> Tensor:
  span = hi - lo
  def bounce(dx:Tensor, near:float, far:float, sign:float) -> Tensor:
    n = (dx / span).floor()
    r = dx - n * span
    return (n % 2 == 0).where(near + sign * r, far - sign * r)
  return (x < lo).where(bounce(lo - x, lo, hi, 1.0), (x > hi).where(bounce(x - hi, hi, lo, -1.0), x))

@onnx_op("GridSample", 16)
def GridSample(x:Tensor, grid:Tensor, align_corners:int=0, mode:str="linear", padding_mode:str="zeros") -> Tensor:
  mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
  if mode not in ("nearest", "linear", "cubic"): raise NotImplementedError(f"GridSample: mode={mode!r} is not supported")
  if padding_mode not in ("zeros", "border", "reflection"): raise NotImplementedError(f"GridSample: padding_mode={padding_mode!r}")
  n, c, *dims = x.shape
  d = len(dims)
  out_shape = grid.shape[1:-1]
  points = math.prod(out_shape)
  g = grid.reshape(n, points, d).cast(dtypes.float32)
  lo = [0.0 if align_corners else -0.5] * d
  hi = [float(s - 1) if align_corners else s - 0.5 for s in dims]
  coords = []
  for i, size in enumerate(dims):
    v = g[..., d - 1 - i]   # the grid lists coordinates innermost dimension first
    v = (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2
    if mode == "nearest": v = v.round()
    if padding_mode == "border": v = ((v < lo[i]) | (v > hi[i])).where(v.clip(0, size - 1), v)
    elif padding_mode == "reflection": v = _gs_reflect(v, lo[i], hi[i])
    coords.append(v)
  offsets = {"nearest": (0,), "linear": (0, 1), "cubic": (-1, 0, 1, 2)}[mode]
  flat_x = x.reshape(n, c, -1).cast(dtypes.float32)
  out = None
  for combo in itertools.product(offsets, repeat=d):
    weight, index, inside = None, None, None
    for i, (off, v, size) in enumerate(zip(combo, coords, dims)):
      base = v if mode == "nearest" else v.floor()
      tap = base + off
      w = Tensor.ones_like(v) if mode == "nearest" else (1 - (v - tap).abs()) if mode == "linear" else _gs_cubic(v - tap)
      if padding_mode == "zeros": ok = (tap >= 0) & (tap <= size - 1)
      else:
        if padding_mode == "reflection": tap = _gs_reflect(tap, lo[i], hi[i]).round()
        ok = None
      tap = tap.clip(0, size - 1).cast(dtypes.int64)
      stride = math.prod(dims[i + 1:])
      index = tap * stride if index is None else index + tap * stride
      weight = w if weight is None else weight * w
      if ok is not None: inside = ok if inside is None else inside & ok
    if inside is not None: weight = inside.where(weight, 0)
    picked = flat_x.gather(2, index.unsqueeze(1).expand(n, c, points))
    term = picked * weight.unsqueeze(1)
    out = term if out is None else out + term
  return out.reshape(n, c, *out_shape).cast(x.dtype)

# ***** detection *****

def _roi_align(x:Tensor, rois:Tensor, batch_indices:Tensor, mode:str, output_height:int, output_width:int, sampling_ratio:int,
               spatial_scale:float, half_pixel:bool) -> Tensor:
  if mode not in ("avg", "max"): raise NotImplementedError(f"RoiAlign: mode={mode!r} is not supported (avg, max)")
  n, channels, height, width = x.shape
  r = rois.shape[0]
  box = rois.cast(dtypes.float32) * spatial_scale - (0.5 if half_pixel else 0.0)
  start, size = [box[:, 1], box[:, 0]], [box[:, 3] - box[:, 1], box[:, 2] - box[:, 0]]    # (y, x), each (r,)
  if not half_pixel: size = [s.maximum(1.0) for s in size]
  pooled = [output_height, output_width]
  bins = [s / p for s, p in zip(size, pooled)]
  if sampling_ratio > 0: grids, most = [Tensor.full((r,), sampling_ratio, device=x.device) for _ in range(2)], [sampling_ratio] * 2
  else:
    # adaptive: ceil(bin size) samples per bin, which varies per roi; sample the largest count and mask the rest
    grids = [b.ceil() for b in bins]
    most = [max(int(g.max().item()), 1) if r else 1 for g in grids]
  coords, valid = [], None
  for axis in range(2):
    cell = Tensor.arange(pooled[axis], device=x.device).reshape(1, -1, 1).cast(dtypes.float32)
    sample = Tensor.arange(most[axis], device=x.device).reshape(1, 1, -1).cast(dtypes.float32)
    grid, bin_size = grids[axis].reshape(-1, 1, 1), bins[axis].reshape(-1, 1, 1)
    pos = start[axis].reshape(-1, 1, 1) + cell * bin_size + (sample + 0.5) * bin_size / grid.maximum(1)   # (r, pooled, samples)
    taken = (sample < grid).expand(pos.shape)
    shape = (r, pooled[0], most[0], 1, 1) if axis == 0 else (r, 1, 1, pooled[1], most[1])
    coords.append(pos.reshape(shape))
    valid = taken.reshape(shape) if valid is None else valid & taken.reshape(shape)
  inside = (coords[0] >= -1) & (coords[0] <= height) & (coords[1] >= -1) & (coords[1] <= width)
  full = (r, pooled[0], most[0], pooled[1], most[1])
  image = x[batch_indices.cast(dtypes.int64)].reshape(r, channels, -1)
  values = []
  for index, weight in _bilinear_taps([c.expand(full) for c in coords], [height, width], clamp=True):
    picked = image.gather(2, index.reshape(r, 1, -1).expand(r, channels, math.prod(full[1:])))
    values.append(picked * inside.expand(full).where(weight, 0).reshape(r, 1, -1).cast(x.dtype))
  valid = valid.expand(full).reshape(r, 1, *full[1:])
  if mode == "avg":
    total = valid.where(sum(values[1:], values[0]).reshape(r, channels, *full[1:]), 0).sum(axis=(3, 5))
    count = (grids[0] * grids[1]).maximum(1).reshape(-1, 1, 1, 1)
    return (total / count).cast(x.dtype)
  # max: each sample's largest weighted corner, then the largest over the bin's samples; a bin with no samples is 0
  best = Tensor.stack(*values).max(0).reshape(r, channels, *full[1:])
  best = valid.where(best, -math.inf).max(axis=(3, 5))
  return (best == -math.inf).where(0, best).cast(x.dtype)

@onnx_op("RoiAlign", 10)
def RoiAlign10(x:Tensor, rois:Tensor, batch_indices:Tensor, mode:str="avg", output_height:int=1, output_width:int=1, sampling_ratio:int=0,
               spatial_scale:float=1.0) -> Tensor:
  return _roi_align(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale, False)

@onnx_op("RoiAlign", 16)
def RoiAlign(x:Tensor, rois:Tensor, batch_indices:Tensor, coordinate_transformation_mode:str="half_pixel", mode:str="avg",
             output_height:int=1, output_width:int=1, sampling_ratio:int=0, spatial_scale:float=1.0) -> Tensor:
  if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
    raise NotImplementedError(f"RoiAlign: coordinate_transformation_mode={coordinate_transformation_mode!r} is not supported "
                              "(half_pixel, output_half_pixel)")
  return _roi_align(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale,
                    coordinate_transformation_mode == "half_pixel")

@onnx_op("NonMaxSuppression", 10)
def NonMaxSuppression(boxes:Tensor, scores:Tensor, max_output_boxes_per_class:Tensor|None=None, iou_threshold:Tensor|None=None,
                      score_threshold:Tensor|None=None, center_point_box:int=0) -> Tensor:
  # greedy selection with a data-dependent number of results: run on the host
  def scalar(t:Tensor|None, default):
    if t is None or t.numel() == 0: return default
    return t.flatten().tolist()[0]
  limit, iou_max, min_score = int(scalar(max_output_boxes_per_class, 0)), float(scalar(iou_threshold, 0.0)), scalar(score_threshold, None)
  b, s = boxes.numpy().astype(np.float64), scores.numpy().astype(np.float64)
  if center_point_box:
    xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    corners = np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
  else: corners = np.stack([np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                            np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3])], axis=-1)
  def overlaps(p, q) -> bool:
    inter = max(min(p[2], q[2]) - max(p[0], q[0]), 0) * max(min(p[3], q[3]) - max(p[1], q[1]), 0)
    area_p, area_q = (p[2] - p[0]) * (p[3] - p[1]), (q[2] - q[0]) * (q[3] - q[1])
    union = area_p + area_q - inter
    return inter > 0 and area_p > 0 and area_q > 0 and union > 0 and inter / union > iou_max
  selected = []
  for bi in range(s.shape[0]):
    for ci in range(s.shape[1]):
      order = [i for i in sorted(range(s.shape[2]), key=lambda i: -s[bi, ci, i]) if min_score is None or s[bi, ci, i] > min_score]
      kept: list[int] = []
      for i in order:
        if len(kept) >= limit: break
        if not any(overlaps(corners[bi, i], corners[bi, k]) for k in kept): kept.append(i)
      selected += [[bi, ci, k] for k in kept]
  return Tensor(np.array(selected, dtype=np.int64).reshape(-1, 3))
