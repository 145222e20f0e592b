"""Buffers and realized state: the one owner of the BUFFER UOp -> device Buffer map and of which tensor-graph nodes are realized.

  new_buffer(device, size, dtype)  a fresh BUFFER UOp backed by an (unallocated) device Buffer
  new_buffer_view(buf, size, dtype, offset)  a BUFFER UOp for `size` elements of `dtype` at byte `offset` into buf's Buffer (its memory)
  buffer_of(buf)                   the device Buffer behind a BUFFER UOp (KeyError naming it when it has none)
  has_buffer(u)                    whether u is a BUFFER UOp with a device Buffer (a Variable's BUFFER has none)
  buffer_view(buf, shape)          the BUFFER seen with a shape (RESHAPE(BUFFER), or the BUFFER when the shape is its own)
  viewed_buffer(u)                 the BUFFER u is the buffer_view of (a realized tensor, symbolic shapes included), or None
  mark_realized(u, view)           u's value now lives in `view` (a buffer_view): graphs that still hold u read it from there
  realized_view(u)                 that view, or None
  as_buffer(u)                     the BUFFER u is a plain contiguous view of (through a realized mark), or None
  storage_buffer(u)                the BUFFER that a storage node (a BUFFER, or the AFTER of Tensor.assign, which writes into its
                                   storage) lives in, or None
  pending_write(u)                 the not yet realized AFTER that u is (through one RESHAPE), or None

Both maps are weak: an entry lives as long as its key UOp does, so dropping a graph frees its buffers.
"""
from __future__ import annotations
import itertools
import weakref
from tinygrad.uop.ops import UOp, Ops, ParamArg, after_root
from tinygrad.dtype import dtypes, DType
from tinygrad.device import Buffer
from tinygrad.helpers import prod

__all__ = ["new_buffer", "new_buffer_view", "buffer_of", "has_buffer", "buffer_view", "viewed_buffer", "mark_realized", "realized_view",
           "as_buffer", "storage_buffer", "pending_write", "next_buffer_id"]

_buffer_ids = itertools.count()
_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()
_realized: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

def next_buffer_id() -> int:
  """The id the next new_buffer would get (consumed: ids only need to be unique and increasing)."""
  return next(_buffer_ids)

def new_buffer(device:str, size:int, dtype:DType) -> UOp:
  u = UOp(Ops.BUFFER, dtype, (UOp.const(size, dtypes.int),), ParamArg(next(_buffer_ids), dtype, device=device))
  _buffers[u] = Buffer(device, size, dtype)
  return u

def new_buffer_view(buf:UOp, size:int, dtype:DType, offset:int) -> UOp:
  b = buffer_of(buf)
  u = UOp(Ops.BUFFER, dtype, (UOp.const(size, dtypes.int),), ParamArg(next(_buffer_ids), dtype, device=b.device))
  _buffers[u] = b.view(size, dtype, offset) if size else Buffer(b.device, 0, dtype)
  return u

def buffer_of(buf:UOp) -> Buffer:
  if (ret := _buffers.get(buf)) is None: raise KeyError(f"{buf.op} {buf.arg!r} has no device buffer")
  return ret

def has_buffer(u:UOp) -> bool: return u.op is Ops.BUFFER and u in _buffers

def buffer_view(buf:UOp, shape:tuple) -> UOp:
  """buf seen with shape. A symbolic shape (bound Variables) sees the first prod(shape) elements of the buffer, which holds the most
  the Variables allow."""
  if shape == buf.shape: return buf
  if any(isinstance(s, UOp) for s in shape):
    n = prod(shape)
    buf = UOp(Ops.SHRINK, buf.dtype, (buf,), ((0, n),))
    return buf if len(shape) == 1 and shape[0] is n else UOp(Ops.RESHAPE, buf.dtype, (buf,), tuple(shape))
  return UOp(Ops.RESHAPE, buf.dtype, (buf,), tuple(shape))

def viewed_buffer(u:UOp) -> UOp|None:
  """The BUFFER of which u is the buffer_view with u's shape (a realized tensor: nothing to compute), else None."""
  b = u
  while b.op in (Ops.RESHAPE, Ops.SHRINK): b = b.src[0]
  return b if b.op is Ops.BUFFER and b is not u and buffer_view(b, u.shape) is u else None

def mark_realized(u:UOp, view:UOp) -> None:
  if view is not u: _realized[u] = view

def realized_view(u:UOp) -> UOp|None: return _realized.get(u)

def as_buffer(u:UOp) -> UOp|None:
  if (v := _realized.get(u)) is not None: u = v
  if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER: u = u.src[0]
  return u if u.op is Ops.BUFFER else None

def storage_buffer(u:UOp) -> UOp|None:
  return u if (u := after_root(u)).op is Ops.BUFFER else None

def pending_write(u:UOp) -> UOp|None:
  if u.op is Ops.RESHAPE: u = u.src[0]
  return u if u.op is Ops.AFTER and u not in _realized else None
