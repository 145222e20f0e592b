"""Tensors on a DISK device (a file, tinygrad/runtime/ops_disk.py): views of the file's bytes. An op on a DISK tensor that keeps a
contiguous byte range (reshape, shrink and basic slicing, bitcast, also with another itemsize along the last axis) is a view of the file
at an offset, made when the op is; other movement ops stay lazy and are an error when read or written ("non-contiguous view");
everything else (arithmetic, casts, reductions) is an error at once. .to(device) copies the bytes, assign writes them into the file."""
from __future__ import annotations
import pathlib
from typing import TYPE_CHECKING
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod, strides_for_shape
from tinygrad.uop.ops import UOp, Ops, GroupOp
from tinygrad.schedule.buffers import new_buffer, new_buffer_view, buffer_of, buffer_view, has_buffer, realized_view
if TYPE_CHECKING:
  from tinygrad.tensor.core import Tensor

class DiskOpError(NotImplementedError, AssertionError):
  """An op a DISK tensor can't do. It is a NotImplementedError and an AssertionError: what tinygrad 0.14 raises for these."""

def is_disk(device) -> bool: return type(device) is str and device.startswith("DISK")

def from_path(path:pathlib.Path, dtype:DType|None) -> UOp:
  """A BUFFER of the whole file at path, on its DISK device (nothing is read)."""
  path = path.resolve()
  if path.is_dir(): raise IsADirectoryError(f"Tensor(Path): {path} is a directory, not a file")
  if not path.is_file(): raise FileNotFoundError(f"Tensor(Path): no file at {path}")
  dt, size = dtype or dtypes.uint8, path.stat().st_size
  if size % dt.itemsize: raise ValueError(f"file {path} has {size} bytes, not a whole number of {dt} ({dt.itemsize} bytes each)")
  return _allocated(new_buffer(f"DISK:{path}", size // dt.itemsize, dt))

def _allocated(buf:UOp) -> UOp:
  # a DISK buffer's allocation opens nothing (the file is opened when it is read or written): its bytes are there already
  buffer_of(buf).ensure_allocated()
  return buf

def _file_view(buf:UOp, size:int, dtype:DType, offset:int) -> UOp: return _allocated(new_buffer_view(buf, size, dtype, offset))

def _base(u:UOp, device:str, tensor_class:type[Tensor]) -> tuple[list[UOp], UOp]:
  """(the movement and bitcast ops from u down, the BUFFER under them); a copy or write into the file not run yet is run first (as a
  tensor_class, the Tensor class)."""
  chain: list[UOp] = []
  while True:
    if (v := realized_view(u)) is not None: u = v
    if u.op in GroupOp.Movement or u.op is Ops.BITCAST:
      chain.append(u)
      u = u.src[0]
    elif has_buffer(u): return chain, u
    elif u.op in (Ops.COPY, Ops.AFTER): tensor_class(u, device=device).realize()
    else:
      raise DiskOpError(f"{device}: a DISK tensor is a file: it has views of its bytes (reshape, slices, bitcast) and copies (.to(device)), "
                        f"not {u.op.name}; copy it to a device first (.to('CPU'))")

def _view(chain:list[UOp], buf:UOp, device:str) -> tuple[tuple[int, ...], tuple[int, ...], int]|None:
  """(shape, byte strides, byte offset into buf) of the chain over buf, or None where it is no strided view of it (a PAD reading
  outside it, a reshape of a non-contiguous view)."""
  shape: tuple[int, ...] = (buffer_of(buf).size,)
  strides, offset, isz = (buf.dtype.itemsize,), 0, buf.dtype.itemsize
  for u in reversed(chain):
    if any(isinstance(s, UOp) for s in u.shape): raise DiskOpError(f"{device}: a DISK tensor can't have a symbolic shape {u.shape}")
    if u.op is Ops.RESHAPE:
      if not _is_contiguous(shape, strides, isz): return None
      shape, strides = tuple(u.arg), _contiguous(tuple(u.arg), isz)
    elif u.op is Ops.SHRINK:
      offset += sum(b * st for (b, _), st in zip(u.arg, strides))
      shape = tuple(e - b for b, e in u.arg)
    elif u.op is Ops.PERMUTE: shape, strides = tuple(shape[i] for i in u.arg), tuple(strides[i] for i in u.arg)
    elif u.op is Ops.EXPAND: strides, shape = tuple(st if s == n else 0 for s, n, st in zip(shape, u.arg, strides)), tuple(u.arg)
    elif u.op is Ops.FLIP:
      offset += sum((s - 1) * st for s, st, f in zip(shape, strides, u.arg) if f)
      strides = tuple(-st if f else st for st, f in zip(strides, u.arg))
    elif u.op is Ops.PAD:
      if any(p != (0, 0) for p in u.arg): return None
    elif u.op is Ops.BITCAST: shape, strides, isz = _bitcast(shape, strides, isz, u.dtype, device)
    else: raise DiskOpError(f"{device}: {u.op.name} on a DISK tensor")
  return shape, strides, offset

def _contiguous(shape:tuple[int, ...], isz:int) -> tuple[int, ...]: return tuple(st * isz for st in strides_for_shape(shape))

def _is_contiguous(shape:tuple[int, ...], strides:tuple[int, ...], isz:int) -> bool:
  return prod(shape) == 0 or all(s == 1 or st == c for s, st, c in zip(shape, strides, _contiguous(shape, isz)))

def _bitcast(shape:tuple[int, ...], strides:tuple[int, ...], isz:int, dt:DType, device:str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
  if dt.itemsize == isz: return shape, strides, isz
  if not shape or (shape[-1] != 1 and strides[-1] != isz) or (shape[-1] * isz) % dt.itemsize:
    raise RuntimeError(f"{device}: unsupported size in bitcast: the last axis of shape {shape} ({isz}-byte elements) isn't a contiguous "
                       f"whole number of {dt} ({dt.itemsize} bytes)")
  return shape[:-1] + (shape[-1] * isz // dt.itemsize,), strides[:-1] + (dt.itemsize,), dt.itemsize

def fold(u:UOp, device:str, tensor_class:type[Tensor]) -> UOp:
  """u (an op on a DISK tensor) as a view of the file's bytes where it is a contiguous range of them; a lazy movement op otherwise."""
  if has_buffer(u) or (u.op is Ops.RESHAPE and has_buffer(u.src[0])): return u
  if u.op is Ops.CONTIGUOUS: return contiguous_view(u.src[0], device, tensor_class)
  chain, buf = _base(u, device, tensor_class)
  if (view := _view(chain, buf, device)) is None or not _is_contiguous(view[0], view[1], u.dtype.itemsize): return u
  shape, _, offset = view
  return buffer_view(_file_view(buf, prod(shape), u.dtype, offset), shape)

def contiguous_view(u:UOp, device:str, tensor_class:type[Tensor]) -> UOp:
  """u as a view of the file's bytes; RuntimeError where it isn't a contiguous range of them (what can't be copied or written)."""
  if (ret := fold(u, device, tensor_class)) is u and not (has_buffer(u) or (u.op is Ops.RESHAPE and has_buffer(u.src[0]))):
    raise RuntimeError(f"non-contiguous view is not supported for {device} buffer: a DISK tensor of shape {u.shape} that isn't one "
                       "contiguous range of the file's bytes can't be read or written; copy the whole range to a device first")
  return ret

def bitcast(t:Tensor, dt:DType) -> Tensor:
  """t (on DISK) seen as dt; with another itemsize the last axis is rescaled, and t must be a contiguous range of the file."""
  if dt.itemsize == t.dtype.itemsize: return t._new(UOp(Ops.BITCAST, dt, (t.uop,), dt))
  view = contiguous_view(t.uop, t.device, type(t))
  shape = _bitcast(t.shape, _contiguous(t.shape, t.dtype.itemsize), t.dtype.itemsize, dt, t.device)[0]
  return t._new(buffer_view(_file_view(_buffer_uop(view), prod(shape), dt, 0), shape))

def _buffer_uop(view:UOp) -> UOp: return view.src[0] if view.op is Ops.RESHAPE else view

def assign(t:Tensor, x) -> Tensor:
  """Writes x (a Tensor on any device, or Python values) into the file bytes t views, now."""
  if not isinstance(x, type(t)): x = type(t)(x, device="CPU", dtype=t.dtype)
  if x.dtype in dtypes.weaks: x = x.cast(t.dtype)
  if x.dtype != t.dtype: raise RuntimeError(f"assign dtype mismatch: {t.dtype} (target) != {x.dtype} (value)")
  view = contiguous_view(t.uop, t.device, type(t))
  dest = buffer_of(_buffer_uop(view))
  if x.shape != t.shape: x = x._expand_to(t.shape)
  if is_disk(x.device): x = x.to("CPU")
  if dest.size: dest.copy_from(x.contiguous()._buffer())
  t.uop = view
  return t

def setitem(t:Tensor, indices, v) -> None:
  if any(isinstance(i, (type(t), list, tuple)) for i in (indices if isinstance(indices, tuple) else (indices,))):
    raise RuntimeError("advanced setitem is not supported for DISK tensors")
  assign(t[indices], v)
