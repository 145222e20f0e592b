"""Shapes and movement: reshape, transpose, concat/split, slice/pad, gather/scatter, shape-making ops, resize."""
from __future__ import annotations
import math
from typing import Any
import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx, array_to_value
from tinygrad.nn.onnx.ops.common import to_ints, to_python

def _axis(a:int, ndim:int) -> int: return a + ndim if a < 0 else a

# ***** values that make tensors *****

@onnx_op("Constant", 1)
def Constant(value:Tensor|None=None, value_float:float|None=None, value_floats:list[float]|None=None, value_int:int|None=None,
             value_ints:list[int]|None=None, value_string:str|None=None, value_strings:list[str]|None=None, sparse_value:Tensor|None=None):
  if value is not None: return value
  if sparse_value is not None: return sparse_value
  if value_float is not None: return Tensor(value_float, dtype=dtypes.float32)
  if value_floats is not None: return Tensor(list(value_floats), dtype=dtypes.float32)
  if value_int is not None: return Tensor(value_int, dtype=dtypes.int64)
  if value_ints is not None: return Tensor(list(value_ints), dtype=dtypes.int64)
  if value_string is not None: return np.array(value_string, dtype=object)
  if value_strings is not None: return np.array(value_strings, dtype=object)
  raise ValueError("Constant: no value attribute given")

@onnx_op("ConstantOfShape", 9)
def ConstantOfShape(shape:Tensor, value:Tensor|None=None) -> Tensor:
  dims = tuple(to_ints(shape))
  if value is None: return Tensor.zeros(dims, dtype=dtypes.float32, device=shape.device)
  return Tensor.full(dims, value.reshape(()).item() if value.numel() else 0, dtype=value.dtype, device=shape.device)

@onnx_op("Range", 11)
def Range(start:Tensor, limit:Tensor, delta:Tensor) -> Tensor:
  s, l, d = (v[0] if isinstance(v, list) else v for v in (to_python(start), to_python(limit), to_python(delta)))
  n = max(math.ceil((l - s) / d), 0)
  return (Tensor.arange(n, device=start.device) * d + s).cast(start.dtype) if n else Tensor.zeros((0,), dtype=start.dtype)

@onnx_op("EyeLike", 9)
def EyeLike(x:Tensor, dtype:int|None=None, k:int=0) -> Tensor:
  rows, cols = x.shape
  out = Tensor.arange(rows, device=x.device).reshape(rows, 1) + k == Tensor.arange(cols, device=x.device).reshape(1, cols)
  return out.cast(dtype_from_onnx(dtype) if dtype is not None else x.dtype)

@onnx_op("Shape", 1)
def Shape(data:Tensor, end:int|None=None, start:int=0) -> Tensor:
  return Tensor(list(data.shape[start:end]), dtype=dtypes.int64, device=data.device)

onnx_op("Size", 1)(lambda data: Tensor(data.numel() if isinstance(data, Tensor) else data.size, dtype=dtypes.int64))
onnx_op("Identity", 1)(lambda x: x)

# ***** reshaping *****

@onnx_op("Reshape", 5)
def Reshape(data:Tensor, shape:Tensor, allowzero:int=0) -> Tensor:
  dims = to_ints(shape)
  if not allowzero: dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
  return data.reshape(dims)

@onnx_op("Flatten", 1)
def Flatten(x:Tensor, axis:int=1) -> Tensor:
  axis = _axis(axis, x.ndim)
  return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))

@onnx_op("Squeeze", 1)
def Squeeze_1(data:Tensor, axes:list[int]|None=None) -> Tensor:
  axes = [_axis(a, data.ndim) for a in axes] if axes else [i for i, s in enumerate(data.shape) if s == 1]
  return data.reshape([s for i, s in enumerate(data.shape) if i not in axes])
onnx_op("Squeeze", 13)(lambda data, axes=None: Squeeze_1(data, to_ints(axes)))

@onnx_op("Unsqueeze", 1)
def Unsqueeze_1(data:Tensor, axes:list[int]) -> Tensor:
  n = data.ndim + len(axes)
  axes = sorted(_axis(a, n) for a in axes)
  shape = list(data.shape)
  for a in axes: shape.insert(a, 1)
  return data.reshape(shape)
onnx_op("Unsqueeze", 13)(lambda data, axes: Unsqueeze_1(data, to_ints(axes)))

@onnx_op("Transpose", 1)
def Transpose(data:Tensor, perm:list[int]|None=None) -> Tensor:
  return data.permute(perm if perm is not None else list(range(data.ndim))[::-1])

@onnx_op("Expand", 8)
def Expand(x:Tensor, shape:Tensor) -> Tensor:
  dims = to_ints(shape)
  # bidirectional broadcasting: a 1 in the new shape keeps the input's size
  n = max(len(dims), x.ndim)
  xs, ds = (1,) * (n - x.ndim) + x.shape, [1] * (n - len(dims)) + dims
  return x.reshape(xs).expand(tuple(max(a, b) if 1 in (a, b) else b for a, b in zip(xs, ds)))

@onnx_op("Tile", 6)
def Tile(x:Tensor, repeats:Tensor) -> Tensor: return x.repeat(to_ints(repeats))

@onnx_op("DepthToSpace", 11)
def DepthToSpace(x:Tensor, blocksize:int, mode:str="DCR") -> Tensor:
  b, c, h, w = x.shape
  if mode == "DCR": x = x.reshape(b, blocksize, blocksize, c // blocksize ** 2, h, w).permute(0, 3, 4, 1, 5, 2)
  else: x = x.reshape(b, c // blocksize ** 2, blocksize, blocksize, h, w).permute(0, 1, 4, 2, 5, 3)
  return x.reshape(b, c // blocksize ** 2, h * blocksize, w * blocksize)

@onnx_op("SpaceToDepth", 1)
def SpaceToDepth(x:Tensor, blocksize:int, mode:str="DCR") -> Tensor:
  b, c, h, w = x.shape
  x = x.reshape(b, c, h // blocksize, blocksize, w // blocksize, blocksize)
  x = x.permute(0, 3, 5, 1, 2, 4) if mode == "DCR" else x.permute(0, 1, 3, 5, 2, 4)
  return x.reshape(b, c * blocksize ** 2, h // blocksize, w // blocksize)

# ***** joining and splitting *****

@onnx_op("Concat", 4)
def Concat(*xs:Tensor, axis:int) -> Tensor:
  if isinstance(xs[0], np.ndarray): return np.concatenate(xs, axis=axis)
  non_empty = [x for x in xs if x.numel() > 0 or x.ndim and x.shape[_axis(axis, x.ndim)] != 0]
  return Tensor.cat(*(non_empty or xs[:1]), dim=axis)

def _split_sizes(length:int, split:list[int]|None, n:int) -> list[int]:
  if split is not None: return split
  # without `split`, equal parts; with num_outputs (opset 18) the last part may be smaller
  size = math.ceil(length / n)
  return [size] * (length // size) + ([length % size] if length % size else [])

@onnx_op("Split", 2)
def Split_2(x:Tensor, axis:int=0, split:list[int]|None=None, *, _n_outputs:int) -> tuple[Tensor, ...]:
  return tuple(x.split(_split_sizes(x.shape[_axis(axis, x.ndim)], split, _n_outputs), dim=axis))

@onnx_op("Split", 13)
def Split_13(x:Tensor, split:Tensor|None=None, axis:int=0, *, _n_outputs:int) -> tuple[Tensor, ...]:
  return Split_2(x, axis, to_ints(split), _n_outputs=_n_outputs)

@onnx_op("Split", 18)
def Split_18(x:Tensor, split:Tensor|None=None, axis:int=0, num_outputs:int|None=None, *, _n_outputs:int) -> tuple[Tensor, ...]:
  return Split_2(x, axis, to_ints(split), _n_outputs=num_outputs or _n_outputs)

# ***** slicing and padding *****

@onnx_op("Slice", 1)
def Slice_1(data:Tensor, axes:list[int]|None=None, ends:list[int]|None=None, starts:list[int]|None=None) -> Tensor:
  return _slice(data, starts or [], ends or [], axes, None)

@onnx_op("Slice", 10)
def Slice(data:Tensor, starts:Tensor, ends:Tensor, axes:Tensor|None=None, steps:Tensor|None=None) -> Tensor:
  return _slice(data, to_ints(starts), to_ints(ends), to_ints(axes), to_ints(steps))

def _slice(data:Tensor, starts:list[int], ends:list[int], axes:list[int]|None, steps:list[int]|None) -> Tensor:
  axes = [_axis(a, data.ndim) for a in axes] if axes is not None else list(range(len(starts)))
  index: list[Any] = [slice(None)] * data.ndim
  for i, a in enumerate(axes):
    step = steps[i] if steps else 1
    # clamp as ONNX does (python slicing clamps too, but huge int64 sentinels must become None for negative steps)
    n = data.shape[a]
    s, e = starts[i], ends[i]
    s = s + n if s < 0 else s
    e = e + n if e < 0 else e
    if step > 0: s, e = min(max(s, 0), n), min(max(e, 0), n)
    else: s, e = min(max(s, -1), n - 1), min(max(e, -1), n - 1)
    index[a] = slice(s, e if e >= 0 else None, step)
  return data[tuple(index)] if any(ix != slice(None) for ix in index) else data

@onnx_op("Pad", 2)
def Pad_2(data:Tensor, pads:list[int], mode:str="constant", value:float=0.0) -> Tensor:
  return _pad(data, pads, mode, value, None)

@onnx_op("Pad", 11)
def Pad(data:Tensor, pads:Tensor, constant_value:Tensor|None=None, axes:Tensor|None=None, mode:str="constant") -> Tensor:
  value = to_python(constant_value) if constant_value is not None else 0
  return _pad(data, to_ints(pads), mode, value[0] if isinstance(value, list) else value, to_ints(axes))

def _pad(data:Tensor, pads:list[int], mode:str, value:float, axes:list[int]|None) -> Tensor:
  axes = [_axis(a, data.ndim) for a in axes] if axes is not None else list(range(data.ndim))
  n = len(axes)
  per_axis = [(0, 0)] * data.ndim
  for i, a in enumerate(axes): per_axis[a] = (pads[i], pads[i + n])
  # negative pads crop
  crop = tuple((max(-b, 0), s - max(-e, 0)) for (b, e), s in zip(per_axis, data.shape))
  data = data.shrink(crop)
  per_axis = [(max(b, 0), max(e, 0)) for b, e in per_axis]
  mode = {"edge": "replicate"}.get(mode, mode)
  if mode not in ("constant", "reflect", "replicate", "wrap"): raise NotImplementedError(f"Pad: mode={mode!r} is not supported")
  if mode == "wrap": return _pad_wrap(data, per_axis)
  if mode == "constant": return data.pad(tuple(per_axis), value=value)
  return data.pad(tuple(per_axis), mode=mode)

def _pad_wrap(x:Tensor, per_axis:list[tuple[int, int]]) -> Tensor:
  for a, (b, e) in enumerate(per_axis):
    if b == 0 and e == 0: continue
    n = x.shape[a]
    reps = math.ceil(b / n) + 1 + math.ceil(e / n)
    tiled = x.repeat([reps if i == a else 1 for i in range(x.ndim)])
    start = math.ceil(b / n) * n - b
    x = tiled.shrink(tuple((start, start + n + b + e) if i == a else (0, s) for i, s in enumerate(tiled.shape)))
  return x

@onnx_op("CenterCropPad", 18)
def CenterCropPad(x:Tensor, shape:Tensor, axes:list[int]|None=None) -> Tensor:
  target = to_ints(shape)
  axes = [_axis(a, x.ndim) for a in axes] if axes is not None else list(range(x.ndim))
  for a, t in zip(axes, target):
    n = x.shape[a]
    if t < n:
      s = (n - t) // 2
      x = x.shrink(tuple((s, s + t) if i == a else (0, d) for i, d in enumerate(x.shape)))
    elif t > n:
      b = (t - n) // 2
      x = x.pad(tuple((b, t - n - b) if i == a else (0, 0) for i in range(x.ndim)))
  return x

@onnx_op("Trilu", 14)
def Trilu(x:Tensor, k:Tensor|None=None, upper:int=1) -> Tensor:
  diag = int(to_python(k)) if k is not None else 0
  return x.triu(diag) if upper else x.tril(diag)

@onnx_op("ReverseSequence", 10)
def ReverseSequence(x:Tensor, sequence_lens:Tensor, batch_axis:int=1, time_axis:int=0) -> Tensor:
  t = x.shape[time_axis]
  steps = Tensor.arange(t, device=x.device)
  lens = sequence_lens.cast(dtypes.int64)
  shape_t = [1] * x.ndim
  shape_t[time_axis] = t
  shape_b = [1] * x.ndim
  shape_b[batch_axis] = x.shape[batch_axis]
  pos, n = steps.reshape(shape_t), lens.reshape(shape_b)
  src = (pos < n).where(n - 1 - pos, pos).expand(x.shape)
  return x.gather(time_axis, src)

# ***** gathers and scatters *****

def _wrap_index(idx:Tensor, n:int) -> Tensor:
  idx = idx.cast(dtypes.int64)
  return (idx < 0).where(idx + n, idx)

@onnx_op("Gather", 1)
def Gather(x:Tensor, indices:Tensor, axis:int=0) -> Tensor:
  axis = _axis(axis, x.ndim)
  if isinstance(x, np.ndarray): return np.take(x, to_python(indices), axis=axis)
  idx = _wrap_index(indices, x.shape[axis])
  # x[..., idx, ...]: the index's dims replace the gathered axis
  flat = idx.flatten()
  moved = x.permute([axis] + [i for i in range(x.ndim) if i != axis])
  picked = moved[flat] if flat.numel() else moved.shrink(((0, 0),) + tuple((0, s) for s in moved.shape[1:]))
  picked = picked.reshape(idx.shape + moved.shape[1:])
  k = idx.ndim
  order = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, picked.ndim))
  return picked.permute(order)

@onnx_op("GatherElements", 11)
def GatherElements(x:Tensor, indices:Tensor, axis:int=0) -> Tensor:
  axis = _axis(axis, x.ndim)
  return x.gather(axis, _wrap_index(indices, x.shape[axis]))

@onnx_op("GatherND", 11)
def GatherND(x:Tensor, indices:Tensor, batch_dims:int=0) -> Tensor:
  k = indices.shape[-1]
  batch = x.shape[:batch_dims]
  nb = math.prod(batch)
  xb = x.reshape((nb,) + x.shape[batch_dims:])
  ib = indices.reshape((nb, -1, k)).cast(dtypes.int64)
  # a flat offset into each batch's first k dims
  dims = x.shape[batch_dims:batch_dims + k]
  strides = [math.prod(dims[i + 1:]) for i in range(k)]
  idx = sum(_wrap_index(ib[..., i], dims[i]) * strides[i] for i in range(k))
  rest = x.shape[batch_dims + k:]
  flat = xb.reshape((nb, math.prod(dims)) + rest)
  out = flat.gather(1, idx.reshape(idx.shape + (1,) * len(rest)).expand(idx.shape + rest)) if rest else flat.gather(1, idx)
  return out.reshape(batch + indices.shape[batch_dims:-1] + rest)

_SCATTER_REDUCE = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}

@onnx_op("ScatterElements", 11)
def ScatterElements(x:Tensor, indices:Tensor, updates:Tensor, axis:int=0, reduction:str="none") -> Tensor:
  axis = _axis(axis, x.ndim)
  idx = _wrap_index(indices, x.shape[axis])
  if (red := _SCATTER_REDUCE.get(reduction, "?")) == "?": raise NotImplementedError(f"ScatterElements: reduction={reduction!r} is not supported")
  if red is None: return x.scatter(axis, idx, updates)
  return x.scatter_reduce(axis, idx, updates, reduce=red, include_self=True)
onnx_op("Scatter", 9)(lambda x, indices, updates, axis=0: ScatterElements(x, indices, updates, axis))

@onnx_op("ScatterND", 11)
def ScatterND(x:Tensor, indices:Tensor, updates:Tensor, reduction:str="none") -> Tensor:
  k = indices.shape[-1]
  dims, rest = x.shape[:k], x.shape[k:]
  strides = [math.prod(dims[i + 1:]) for i in range(k)]
  ind = indices.reshape(-1, k).cast(dtypes.int64)
  flat_idx = sum(_wrap_index(ind[:, i], dims[i]) * strides[i] for i in range(k))
  flat = x.reshape((math.prod(dims),) + rest)
  upd = updates.reshape((-1,) + rest)
  src_idx = flat_idx.reshape((-1,) + (1,) * len(rest)).expand(upd.shape)
  if (red := _SCATTER_REDUCE.get(reduction, "?")) == "?": raise NotImplementedError(f"ScatterND: reduction={reduction!r} is not supported")
  out = flat.scatter(0, src_idx, upd) if red is None else flat.scatter_reduce(0, src_idx, upd, reduce=red, include_self=True)
  return out.reshape(x.shape)

@onnx_op("TensorScatter", 24)
def TensorScatter(past:Tensor, update:Tensor, write_indices:Tensor|None=None, axis:int=-2, mode:str="linear") -> Tensor:
  axis = _axis(axis, past.ndim)
  n, u = past.shape[axis], update.shape[axis]
  start = write_indices.cast(dtypes.int64) if write_indices is not None else Tensor.zeros(past.shape[0], dtype=dtypes.int64)
  pos = Tensor.arange(n, device=past.device).reshape([n if i == axis else 1 for i in range(past.ndim)])
  rel = pos - start.reshape([-1] + [1] * (past.ndim - 1))
  if mode == "circular": rel = rel.mod(n)
  elif mode != "linear": raise NotImplementedError(f"TensorScatter: mode={mode!r} is not supported")
  inside = (rel >= 0) & (rel < u)
  src = rel.clip(0, u - 1).expand(past.shape[:axis] + (n,) + past.shape[axis + 1:])
  picked = update.gather(axis, src.shrink(tuple((0, s) for s in past.shape[:axis]) + ((0, n),) + tuple((0, s) for s in update.shape[axis + 1:])))
  return inside.where(picked, past)

@onnx_op("OneHot", 9)
def OneHot(indices:Tensor, depth:Tensor, values:Tensor, axis:int=-1) -> Tensor:
  d = int(to_python(depth) if not isinstance(to_python(depth), list) else to_python(depth)[0])
  idx = indices.cast(dtypes.int64)
  idx = (idx < 0).where(idx + d, idx)
  axis = _axis(axis, indices.ndim + 1)
  pos = Tensor.arange(d, device=indices.device).reshape([d if i == axis else 1 for i in range(indices.ndim + 1)])
  hot = idx.unsqueeze(axis) == pos
  return hot.where(values[1], values[0])

@onnx_op("Compress", 9)
def Compress(x:Tensor, condition:Tensor, axis:int|None=None) -> Tensor:
  # the output's length is the number of true conditions: data-dependent, read on the host
  keep = [i for i, c in enumerate(to_python(condition)) if c]
  if axis is None: x, axis = x.flatten(), 0
  axis = _axis(axis, x.ndim)
  return Gather(x, Tensor(keep, dtype=dtypes.int64), axis)

@onnx_op("NonZero", 9)
def NonZero(x:Tensor) -> Tensor:
  # the output's shape depends on the data: computed on the host
  return Tensor(np.array(np.nonzero(x.numpy())), dtype=dtypes.int64).reshape(x.ndim, -1)

@onnx_op("Unique", 11)
def Unique(x:Tensor, axis:int|None=None, sorted:int=1) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # noqa: A002
  # data-dependent output shapes: computed on the host with numpy
  arr = x.numpy()
  values, first, inverse, counts = np.unique(arr, return_index=True, return_inverse=True, return_counts=True, axis=axis)
  if not sorted:
    order = np.argsort(first)
    values = np.take(values, order, axis=0 if axis is None else axis)
    remap = np.empty_like(order)
    remap[order] = np.arange(len(order))
    first, counts, inverse = first[order], counts[order], remap[inverse.reshape(-1)]
  return (array_to_value(values).cast(x.dtype), Tensor(first.astype(np.int64)), Tensor(inverse.reshape(-1).astype(np.int64)),
          Tensor(counts.astype(np.int64)))

# ***** Resize: each resized axis is a gather (nearest) or a product with an interpolation matrix (linear, cubic) computed from the
# shapes and attributes alone *****

def _source_coords(n_in:int, n_out:int, scale:float, mode:str, roi:tuple[float, float]|None) -> np.ndarray:
  i = np.arange(n_out, dtype=np.float64)
  if mode == "half_pixel": return (i + 0.5) / scale - 0.5
  if mode == "half_pixel_symmetric":
    adjustment = n_out / (scale * n_in)
    return n_in / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
  if mode == "pytorch_half_pixel": return (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
  # align_corners divides by the exact output width (scale x input size), which need not be an integer
  if mode == "align_corners": return i * (n_in - 1) / (n_in * scale - 1) if n_out > 1 else np.zeros(n_out)
  if mode == "asymmetric": return i / scale
  if mode == "tf_crop_and_resize":
    start, end = roi if roi is not None else (0.0, 1.0)
    if n_out > 1: return start * (n_in - 1) + i * (end - start) * (n_in - 1) / (n_out - 1)
    return np.full(n_out, 0.5 * (start + end) * (n_in - 1))
  raise NotImplementedError(f"Resize: coordinate_transformation_mode={mode!r} is not supported")

def _nearest_index(x:np.ndarray, mode:str) -> np.ndarray:
  if mode == "round_prefer_floor": idx = np.where(x - np.floor(x) == 0.5, np.floor(x), np.round(x))
  elif mode == "round_prefer_ceil": idx = np.where(x - np.floor(x) == 0.5, np.ceil(x), np.round(x))
  elif mode == "floor": idx = np.floor(x)
  elif mode == "ceil": idx = np.ceil(x)
  else: raise NotImplementedError(f"Resize: nearest_mode={mode!r} is not supported")
  return idx.astype(np.int64)

def _cubic(t:np.ndarray, a:float) -> np.ndarray:
  t = np.abs(t)
  return np.where(t <= 1, (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1, np.where(t < 2, a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a, 0.0))

def _interp_matrix(x:np.ndarray, n_in:int, scale:float, mode:str, a:float, exclude_outside:int, antialias:int) -> np.ndarray:
  m = np.zeros((len(x), n_in))
  if antialias and scale < 1:
    # the filter widens by 1/scale when shrinking, and is renormalized over the input's cells
    j = np.arange(n_in)
    t = (j[None, :] - x[:, None]) * scale
    w = np.maximum(0, 1 - np.abs(t)) if mode == "linear" else _cubic(t, a)
    return w / w.sum(axis=1, keepdims=True)
  base = np.floor(x).astype(np.int64)
  taps = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
  for row, (xi, b) in enumerate(zip(x, base)):
    ws = [(b + k, (1 - abs(xi - (b + k))) if mode == "linear" else float(_cubic(np.array(xi - (b + k)), a))) for k in taps]
    if exclude_outside:
      ws = [(j, w if 0 <= j < n_in else 0.0) for j, w in ws]
      total = sum(w for _, w in ws)
      ws = [(j, w / total) for j, w in ws]
    for j, w in ws: m[row, min(max(j, 0), n_in - 1)] += w
  return m

def _resize(x:Tensor, sizes:list[int]|None, scales:list[float]|None, roi:list[float]|None, axes:list[int]|None, mode:str, ctm:str,
            nearest_mode:str, a:float, exclude_outside:int, extrapolation_value:float, antialias:int, keep_aspect_ratio_policy:str) -> Tensor:
  axes = [a_ + x.ndim if a_ < 0 else a_ for a_ in axes] if axes is not None else list(range(x.ndim))
  in_sizes = [x.shape[d] for d in axes]
  if sizes is not None:
    if keep_aspect_ratio_policy == "stretch": scale_list = [o / i for o, i in zip(sizes, in_sizes)]
    else:
      pick = min if keep_aspect_ratio_policy == "not_larger" else max
      s = pick(o / i for o, i in zip(sizes, in_sizes))
      scale_list, sizes = [s] * len(axes), [int(math.floor(s * i + 0.5)) for i in in_sizes]
    out_sizes = list(sizes)
  elif scales is not None:
    scale_list = list(scales)
    out_sizes = [int(math.floor(i * s)) for i, s in zip(in_sizes, scale_list)]
  else: raise ValueError("Resize: one of scales and sizes must be given")
  rois = None
  if roi is not None and len(roi):
    n = len(roi) // 2
    rois = [(roi[k], roi[k + n]) for k in range(n)]
    if n == x.ndim and len(axes) != x.ndim: rois = [rois[d] for d in axes]
  for k, d in enumerate(axes):
    n_in, n_out, s = in_sizes[k], out_sizes[k], scale_list[k]
    if n_in == n_out and s == 1 and ctm != "tf_crop_and_resize": continue
    src = _source_coords(n_in, n_out, s, ctm, rois[k] if rois else None)
    outside = (src < 0) | (src > n_in - 1) if ctm == "tf_crop_and_resize" else np.zeros(n_out, dtype=bool)
    if mode == "nearest":
      idx = np.clip(_nearest_index(src, nearest_mode), 0, n_in - 1)
      moved = x.transpose(d, 0) if d else x
      picked = moved[Tensor(idx, device=x.device)]
      x = picked.transpose(d, 0) if d else picked
    elif mode in ("linear", "cubic"):
      m = _interp_matrix(src, n_in, s, mode, a, exclude_outside, antialias)
      moved = x.transpose(d, -1).cast(dtypes.float32 if not dtypes.is_float(x.dtype) else x.dtype)
      out = moved @ Tensor(m.T.astype(np.float32), device=x.device).cast(moved.dtype)
      x = out.transpose(d, -1).cast(x.dtype) if dtypes.is_float(x.dtype) else out.round().transpose(d, -1).cast(x.dtype)
    else: raise NotImplementedError(f"Resize: mode={mode!r} is not supported")
    if outside.any():
      keep = Tensor(~outside, device=x.device).reshape([-1 if i == d else 1 for i in range(x.ndim)])
      x = keep.where(x, extrapolation_value).cast(x.dtype)
  return x

def Resize(x:Tensor, roi:Tensor|None=None, scales:Tensor|None=None, sizes:Tensor|None=None, antialias:int=0, axes:list[int]|None=None,
           coordinate_transformation_mode:str="half_pixel", cubic_coeff_a:float=-0.75, exclude_outside:int=0, extrapolation_value:float=0.0,
           keep_aspect_ratio_policy:str="stretch", mode:str="nearest", nearest_mode:str="round_prefer_floor") -> Tensor:
  scale_list = to_python(scales) if scales is not None and scales.numel() else None
  size_list = to_ints(sizes) if sizes is not None and sizes.numel() else None
  roi_list = to_python(roi) if roi is not None and roi.numel() else None
  return _resize(x, size_list, scale_list, roi_list, axes, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
                 extrapolation_value, antialias, keep_aspect_ratio_policy)

@onnx_op("Resize", 10)
def Resize_10(x:Tensor, scales:Tensor, mode:str="nearest") -> Tensor:
  return _resize(x, None, to_python(scales), None, None, mode, "asymmetric", "floor", -0.75, 0, 0.0, 0, "stretch")

onnx_op("Resize", 11)(Resize)
onnx_op("Upsample", 9)(Resize_10)
@onnx_op("Upsample", 7)
def Upsample_7(x:Tensor, mode:str="nearest", scales:list[float]|None=None) -> Tensor:
  return _resize(x, None, list(scales or []), None, None, mode, "asymmetric", "floor", -0.75, 0, 0.0, 0, "stretch")
