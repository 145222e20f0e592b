"""Indexing: __getitem__ / __setitem__ (ints, slices with any step, None, ..., lists and integer Tensors), assign and the in-place
operators, gather/scatter, masked_select, nonzero, one_hot. Index arithmetic is arange + comparisons + where + sum (one-hot
selection), so the gradient rules over those primitives cover it."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinygrad.dtype import dtypes, to_np_dtype
from tinygrad.device import Device
from tinygrad.helpers import prod, flatten
from tinygrad.uop.ops import UOp, Ops, ssimplify, srender, smax
from tinygrad.tensor.common import TensorBase, broadcast_shape
from tinygrad.schedule.buffers import has_buffer, realized_view, buffer_of
from tinygrad.tensor.autograd import _tensors
from tinygrad.tensor.disk import is_disk, assign as disk_assign, setitem as disk_setitem
from tinygrad.tensor.multi import assign_shards

if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

def _dim_at(x, d:int, arg, fill=None):
  """arg for dim d of x, `fill` for the others (a per-dim tuple for shrink/pad)."""
  return tuple(arg if i == d else fill for i in range(x.ndim))

_VIEW_OPS = (Ops.RESHAPE, Ops.SHRINK, Ops.PAD, Ops.FLIP, Ops.PERMUTE)

# the ops a tensor can view its storage through (an EXPAND view can be read, not written)
_STORAGE_VIEW_OPS = (*_VIEW_OPS, Ops.EXPAND, Ops.DETACH)

def _storage_view(u:UOp) -> tuple[list[tuple[Ops, object]], UOp]|None:
  """The storage u is a view of (a device BUFFER, or the AFTER of an earlier assign to one) and the ops of the view, outermost first;
  None when u is computed. Realized nodes count as their buffer."""
  chain: list[tuple[Ops, object]] = []
  while True:
    if (v := realized_view(u)) is not None: u = v
    if u.op is Ops.AFTER or has_buffer(u): return chain, u
    if u.op not in _STORAGE_VIEW_OPS: return None
    chain.append((u.op, u.arg))
    u = u.src[0]

# the most elements an index is read on the host for its bounds check (a numpy pass over them; larger indices are not checked)
HOST_INDEX_CHECK_MAX = 1 << 24

def _host_index_values(u:UOp):
  """u's values as a numpy array where they can be read on the host without running a kernel or waiting on a device, else None:
  views, copies and int casts of a constant or of a realized buffer in host memory (a Tensor from a list or numpy on CPU). A GPU
  buffer would need a device-to-host copy (a sync) and a computed index a kernel the user did not ask for: those are not read."""
  import numpy as np
  chain: list[tuple[Ops, object]] = []   # the ops from u down to the values, outermost first
  while True:
    if (v := realized_view(u)) is not None: u = v
    if u.shape is None or any(not isinstance(s, int) for s in u.shape) or prod(u.shape) > HOST_INDEX_CHECK_MAX: return None
    if prod(u.shape) == 0: return np.zeros(u.shape, np.int64)   # no values: none out of range (an empty buffer has no bytes to read)
    if u.op in (Ops.COPY, Ops.DETACH, Ops.CONTIGUOUS): u = u.src[0]
    elif u.op in _VIEW_OPS or u.op is Ops.EXPAND:
      if any(isinstance(a, UOp) for a in flatten(a if isinstance(a, tuple) else (a,) for a in u.arg)): return None   # a symbolic view
      chain.append((u.op, u.arg))
      u = u.src[0]
    elif u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.is_int(u.src[0].dtype):
      chain.append((u.op, u.dtype))
      u = u.src[0]
    # Tensor.full's buffer: the AFTER of one store of a value into the whole buffer
    elif u.op is Ops.AFTER and len(u.src) == 2 and u.src[1].op is Ops.STORE and \
        ((dst := u.src[1].src[0]) is u.src[0] or (dst.op is Ops.RESHAPE and dst.src[0] is u.src[0])):
      chain.append((Ops.RESHAPE, u.shape))
      u = u.src[1].src[1]
    elif u.op is Ops.CONST and isinstance(u.arg, int):
      vals = np.array(u.arg)
      break
    elif has_buffer(u) and dtypes.is_int(u.dtype) and (buf := buffer_of(u)).base.is_allocated() and \
        Device[buf.device].allocator.host_memory and hasattr(Device[buf.device].allocator, "_as_buffer"):
      vals = np.frombuffer(buf.as_buffer(allow_zero_copy=True), dtype=to_np_dtype(u.dtype))
      break
    else: return None
  for op, arg in reversed(chain):
    if op is Ops.RESHAPE: vals = vals.reshape(arg)
    elif op is Ops.EXPAND: vals = np.broadcast_to(vals, arg)
    elif op is Ops.PERMUTE: vals = vals.transpose(arg)
    elif op is Ops.SHRINK: vals = vals[tuple(slice(b, e) for b, e in arg)]
    elif op is Ops.PAD: vals = np.pad(vals, arg)
    elif op is Ops.FLIP: vals = np.flip(vals, [i for i, f in enumerate(arg) if f])
    elif op is Ops.CAST: vals = vals.astype(to_np_dtype(arg))
  return vals

def _view_of(chain:list[tuple[Ops, object]], base:UOp) -> UOp:
  for op, arg in reversed(chain): base = UOp(op, base.dtype, (base,), arg)
  return base

class SymIndex:
  """A symbolic int index (a bound Variable expression): like an int, it selects one position and drops the dim."""
  __slots__ = ("pos",)
  def __init__(self, pos:UOp): self.pos = pos

def _symbolic_int(i) -> bool: return isinstance(i, UOp) and i.dtype in (dtypes.weakint,) + dtypes.ints

def _bound_value(n:UOp) -> int:
  """The value a size of bound Variables has now."""
  u, vals = n.unbind_all()
  return u.sym_infer(vals)

def _from_end(b, n):
  """A slice bound: a negative one (an int, or a symbolic one that is always negative) counts from the end of the dim, n + b, and
  stops at 0 as Python's slices do; others are taken as they are."""
  if b is None or (b.vmax >= 0 if isinstance(b, UOp) else b >= 0): return b
  b = ssimplify(n + b)
  return b if not isinstance(b, UOp) or b.vmin >= 0 else ssimplify(smax(b, 0))

def _symbolic_slice(i:slice, n, dim:int) -> tuple:
  """(start, 1, count) of a slice with symbolic bounds or over a symbolic dim: steps of 1 only, bounds past the end taken as they are
  (they can't be checked against n here; a bound Variable's range is its promise)."""
  if i.step not in (None, 1): raise IndexError(f"a symbolic slice {i} of dim {dim} (size {srender(n)}) takes only step 1")
  for b in (i.start, i.stop):
    if b is not None and not _symbolic_int(b) and not isinstance(b, int):
      raise IndexError(f"a symbolic slice {i} of dim {dim} (size {srender(n)}) needs int or symbolic bounds, got {b!r}")
    if _symbolic_int(b) and b.vmin < 0 <= b.vmax:
      raise IndexError(f"a symbolic slice {i} of dim {dim} (size {srender(n)}) needs bounds that are never negative or always negative, "
                       f"got {srender(b)} in [{b.vmin}, {b.vmax}]")
  start = 0 if i.start is None else _from_end(i.start, n)
  stop = n if i.stop is None else _from_end(i.stop, n)
  if not isinstance(cnt := stop - start, UOp): return (start, 1, max(cnt, 0))
  return (start, 1, ssimplify(cnt if cnt.vmin >= 0 else smax(cnt, 0)))

def _broadcasts_to(src:tuple[int, ...], dst:tuple[int, ...]) -> bool:
  return len(src) <= len(dst) and all(s in (1, d) for s, d in zip(src[::-1], dst[::-1]))

class IndexingMixin:
  # ***** parsing an index *****
  def _parse_index(self, indices) -> list:
    """The index as one entry per dim of the result's making: None, an int (in range), a slice as (start, step, count) with
    step != 0, or an integer Tensor; the ellipsis expanded."""
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    for k, i in enumerate(idx):
      if isinstance(i, (list, tuple)) or type(i).__name__ == "ndarray":
        idx[k] = i = type(self)(i, device=self.device, dtype=dtypes.int32 if len(i) == 0 else None)
      if isinstance(i, TensorBase):
        if not dtypes.is_int(i.dtype): raise IndexError(f"index dtype {i.dtype} is not supported: only integer tensors can index")
        self._same_device(i)
      elif isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, (int, slice)) or _symbolic_int(i)):
        raise IndexError(f"index of type {type(i).__name__} is not supported (ints, slices, None, ..., lists, integer Tensors)")
    if sum(i is Ellipsis for i in idx) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (shape {self.shape})")
    if any(i is Ellipsis for i in idx):
      e = next(k for k, i in enumerate(idx) if i is Ellipsis)
      idx = idx[:e] + [slice(None)] * (self.ndim - n_real) + idx[e+1:]
    else: idx += [slice(None)] * (self.ndim - n_real)
    out, dim = [], 0
    for i in idx:
      if i is None or isinstance(i, TensorBase): out.append(i)
      elif isinstance(i, UOp): out.append(SymIndex(i))
      elif isinstance(i, int):
        n = self.shape[dim]
        # a symbolic size is checked with its Variables' values now (a negative index counts from its end)
        if not -(v := _bound_value(n) if isinstance(n, UOp) else n) <= i < v:
          raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {srender(n)}{f' (= {v})' if v is not n else ''}")
        out.append(i if i >= 0 else SymIndex(_from_end(i, n)) if isinstance(n, UOp) else i + n)
      elif any(isinstance(x, UOp) for x in (i.start, i.stop, self.shape[dim])): out.append(_symbolic_slice(i, self.shape[dim], dim))
      else:
        start, stop, step = i.indices(self.shape[dim])
        out.append((start, step, len(range(start, stop, step))))
      if i is not None: dim += 1
    return out

  def _basic_index(self, idx:list) -> Tensor:
    """Applies the ints and slices of a parsed index (a Tensor entry keeps its dim whole): int dims stay as size 1 and None adds
    no dim yet, so the result has one dim per real entry."""
    x, dim = self, 0
    for i in idx:
      if i is None: continue
      n = x.shape[dim]
      if isinstance(i, (int, SymIndex)):
        p = i if isinstance(i, int) else i.pos
        x = x.shrink(_dim_at(x, dim, (p, p + 1)))
      elif isinstance(i, tuple):
        start, step, cnt = i
        if step < 0: x, start, step = x.flip(dim), n - 1 - start, -step
        if cnt == 0: x = x.shrink(_dim_at(x, dim, (0, 0)))
        else:
          end = ssimplify(start + (cnt - 1) * step + 1)
          x = x.shrink(_dim_at(x, dim, (start, end)))
          if step > 1:  # every step-th element: pad to cnt*step, split the dim into (cnt, step), keep column 0
            x = x.pad(_dim_at(x, dim, (0, cnt * step - (end - start))))
            x = x.reshape(x.shape[:dim] + (cnt, step) + x.shape[dim+1:])
            x = x.shrink(_dim_at(x, dim + 1, (0, 1)))
            x = x.reshape(x.shape[:dim+1] + x.shape[dim+2:])
      dim += 1
    return x

  def _unindex(self, idx:list, v:Tensor) -> Tensor:
    """The inverse of _basic_index for v (shaped as the basic result, one dim per real entry): v placed into self's shape, zero
    elsewhere."""
    dim = 0
    for i in idx:
      if i is None: continue
      n = self.shape[dim]
      if isinstance(i, int): v = v.pad(_dim_at(v, dim, (i, n - i - 1)))
      elif isinstance(i, SymIndex): v = v.pad(_dim_at(v, dim, (i.pos, ssimplify(n - i.pos - 1))))
      elif isinstance(i, tuple):
        start, step, cnt = i
        flip = step < 0
        if flip: start, step = n - 1 - start, -step
        if cnt == 0: v = v.pad(_dim_at(v, dim, (0, n)))
        else:
          end = start + (cnt - 1) * step + 1
          if step > 1:
            v = v.reshape(v.shape[:dim+1] + (1,) + v.shape[dim+1:])
            v = v.pad(_dim_at(v, dim + 1, (0, step - 1), (0, 0)))
            v = v.reshape(v.shape[:dim] + (cnt * step,) + v.shape[dim+2:])
            v = v.shrink(_dim_at(v, dim, (0, end - start)))
          v = v.pad(_dim_at(v, dim, (start, n - end)))
        if flip: v = v.flip(dim)
      dim += 1
    return v

  # ***** __getitem__ *****
  def _advanced(self, idx:list) -> tuple[Tensor, list[int], tuple, Tensor|None, tuple[int, ...]|None]:
    """The pieces of an index with integer tensors: x (the basic view, with None dims added and int dims dropped), the positions of
    x's dims the tensors index, their broadcast shape B, the one-hot mask (shaped B + x's dims, size 1 where not indexed; None
    without tensor indices), and the permutation that moves the B dims from the front to where numpy puts them (None: stay)."""
    x = self._basic_index(idx)
    # positions in the result: real entries in order, None dims inserted, int dims dropped
    shape, adv, d = [], [], 0
    for i in idx:
      if i is None: shape.append(1)
      else:
        if not isinstance(i, (int, SymIndex)):
          if isinstance(i, TensorBase): adv.append((len(shape), i, x.shape[d]))
          shape.append(x.shape[d])
        d += 1
    x = x.reshape(tuple(shape))
    if not adv: return x, [], (), None, None
    # one-hot selection: each index dim compared against an arange, all masks and-ed
    bshape = adv[0][1].shape
    try:
      for _, t, _ in adv[1:]: bshape = broadcast_shape(bshape, t.shape)
    except RuntimeError as e:   # IndexError, as numpy, torch and tinygrad 0.14 raise for index tensors that don't broadcast
      raise IndexError(f"shape mismatch: the index tensors of shapes {[t.shape for _, t, _ in adv]} can't be broadcast together") from e
    nb = len(bshape)
    mask = None
    for pos, t, n in adv:
      if isinstance(n, int) and (vals := _host_index_values(t.uop)) is not None and (bad := vals[(vals < -n) | (vals >= n)]).size:
        raise IndexError(f"index {bad.flat[0]} is out of bounds for dimension {pos} with size {n}")
      t = t._expand_to(bshape)
      t = (t < 0).where(t + n, t)
      ar = type(self).arange(n, device=self.device).reshape((1,) * (nb + pos) + (n,) + (1,) * (len(shape) - pos - 1))
      m = t.reshape(bshape + (1,) * len(shape)).eq(ar)
      mask = m if mask is None else mask & m
    positions = [pos for pos, _, _ in adv]
    order = None
    if positions == list(range(positions[0], positions[0] + len(positions))) and positions[0] > 0:
      rest, p0 = len(shape) - len(positions), positions[0]
      order = tuple(range(nb, nb + p0)) + tuple(range(nb)) + tuple(range(nb + p0, nb + rest))
    return x, positions, bshape, mask, order

  def __getitem__(self, indices) -> Tensor:
    """numpy-style indexing. Integer tensors (and lists) index by one-hot selection; they broadcast together, and their dims go where
    the first one was when they index adjacent dims, else in front (numpy's rule; ints count as basic indices, as in tinygrad)."""
    x, positions, bshape, mask, order = self._advanced(self._parse_index(indices))
    if mask is None: return x
    nb = len(bshape)
    xe = x.reshape((1,) * nb + x.shape)
    ret = mask.where(xe, xe._full(0)).sum(tuple(nb + p for p in positions)).cast(self.dtype)
    return ret if order is None else ret.permute(order)

  def _scattered(self, idx:list, v:Tensor) -> Tensor:
    """The new value of the basic view self._basic_index(idx) after writing v (shaped as self[idx]) at its tensor-indexed places: each
    element takes the value of the last index entry that selects it. The work is B times the view's size (B: the number of index
    entries), never the view's size times v's."""
    x, positions, bshape, mask, order = self._advanced(idx)
    assert mask is not None
    nb, nd = len(bshape), x.ndim
    if order is not None: v = v.permute(tuple(sorted(range(len(order)), key=order.__getitem__)))
    # v's dims in x's layout: B, then x's dims with size 1 where the tensors index
    v = v.reshape(bshape + tuple(1 if i in positions else s for i, s in enumerate(x.shape)))
    bax = tuple(range(nb))
    rank = type(self).arange(1, prod(bshape) + 1, device=self.device).reshape(bshape + (1,) * nd)
    last = mask.where(rank, 0).max(bax, keepdim=True)
    pick = mask & rank.eq(last)
    new = pick.where(v, v._full(0)).sum(bax).cast(self.dtype)
    return mask.max(bax).where(new, x).reshape(self._basic_index(idx).shape)

  # ***** writing *****
  def assign(self, x) -> Tensor:
    """Writes x (broadcast to self's shape, same dtype) into self, lazily: the write runs in the next realize that needs self (or
    a tensor built on it), before which every read of the old value in that realize runs. A realized tensor's buffer is
    overwritten in place, also through a view made of reshape/shrink/pad/flip/permute (only the viewed elements are written;
    then every tensor viewing the buffer sees the write, as in torch; a tensor assigned as a whole changes alone, as in tinygrad,
    and its other views see the new data once it is realized). A lazy tensor takes x's value. Not differentiable."""
    return self._assign(x, share=None)

  def _assign(self, x, share:bool|None) -> Tensor:
    # share: whether the other tensors viewing the storage take the write (None: when self is a view of part of it, or in another
    # shape; a tensor that is its whole storage, as realize leaves it, is the common case of optimizers and costs no walk)
    if is_disk(self.device): return disk_assign(self, x)
    if not isinstance(x, TensorBase): x = type(self)(x, device=self.device, dtype=self.dtype)
    self._same_device(x)
    if x.dtype != self.dtype: raise RuntimeError(f"assign dtype mismatch: {self.dtype} (target) != {x.dtype} (value)")
    if not _broadcasts_to(x.shape, self.shape): raise RuntimeError(f"can't assign shape {x.shape} to shape {self.shape}")
    x = x._expand_to(self.shape)
    if self.numel() == 0 or x.uop is self.uop: return self
    if isinstance(self.device, tuple): return assign_shards(self, x)
    if (found := _storage_view(self.uop)) is None:
      self.uop = x.uop
      return self
    chain, storage = found
    if any(op is Ops.EXPAND for op, _ in chain):
      raise RuntimeError(f"can't assign to an expanded view (shape {self.shape}): several of its elements are one element of the buffer; "
                         "assign to a contiguous() copy instead")
    view = _view_of(chain, storage)
    if view is x.uop: return self   # the view's own value (t[i] += 1 stores back the view that += already wrote)
    after = UOp(Ops.AFTER, storage.dtype, (storage, UOp(Ops.STORE, dtypes.void, (view, x.uop))))
    if share is None: share = len(chain) > 1 or any(op is not Ops.RESHAPE for op, _ in chain)
    if not share:
      self.uop = _view_of(chain, after)
      return self
    for ref in list(_tensors):
      if (t := ref()) is None: continue
      # most live tensors are other realized buffers (a plain view is never marked realized): skip them without the full walk
      if (b := t.uop.src[0] if t.uop.op is Ops.RESHAPE else t.uop).op is Ops.BUFFER and b is not storage: continue
      if (f := _storage_view(t.uop)) is not None and f[1] is storage: t.uop = _view_of(f[0], after)
    return self

  def __setitem__(self, indices, v) -> None:
    """self[indices] = v (a Tensor or Python value, broadcast to the indexed shape and cast to self's dtype), through assign: a
    realized tensor's buffer is written in place (with basic indices, only the indexed elements), a lazy tensor takes the result."""
    if is_disk(self.device): return disk_setitem(self, indices, v)
    idx = self._parse_index(indices)
    target = self[indices].shape
    if not isinstance(v, TensorBase): v = type(self)(v, device=self.device, dtype=self.dtype)
    v = v.cast(self.dtype)
    while v.ndim > len(target) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
    if not _broadcasts_to(v.shape, target): raise RuntimeError(f"can't assign shape {v.shape} to the indexed shape {target}")
    v = v._expand_to(target)
    if any(isinstance(i, TensorBase) for i in idx): vb = self._scattered(idx, v)
    else: vb = v.reshape(tuple(1 if isinstance(i, int) else s for i, s in zip([i for i in idx if i is not None], self._basic_index(idx).shape)))
    if _storage_view(self.uop) is not None:
      self._basic_index(idx)._assign(vb, share=True)
      return
    mask = self._unindex(idx, vb._full(True, dtypes.bool))
    self.uop = mask.where(self._unindex(idx, vb), self).uop

  def __iadd__(self, x): return self.assign(self + x)
  def __isub__(self, x): return self.assign(self - x)
  def __imul__(self, x): return self.assign(self * x)
  def __itruediv__(self, x): return self.assign(self / x)
  def __ifloordiv__(self, x): return self.assign(self // x)
  def __ipow__(self, x): return self.assign(self ** x)
  def __imatmul__(self, x): return self.assign(self @ x)
  def __iand__(self, x): return self.assign(self & x)
  def __ior__(self, x): return self.assign(self | x)
  def __ixor__(self, x): return self.assign(self ^ x)
  def __ilshift__(self, x): return self.assign(self << x)
  def __irshift__(self, x): return self.assign(self >> x)

  # ***** gather / scatter *****
  def _check_index(self, name:str, dim:int, index:Tensor) -> int:
    if not isinstance(index, TensorBase) or not dtypes.is_int(index.dtype):
      raise RuntimeError(f"{name} needs an integer index tensor, got {getattr(index, 'dtype', type(index).__name__)}")
    d = self._norm_axis(dim)
    if index.ndim != self.ndim: raise RuntimeError(f"{name}: index {index.shape} needs as many dims as self {self.shape}")
    if any(a > b for i, (a, b) in enumerate(zip(index.shape, self.shape)) if i != d):
      raise RuntimeError(f"{name}: index {index.shape} is larger than self {self.shape} outside dim {d}")
    # an index past the dim would select (or write) nothing: an error where its values are known without a kernel or a device sync
    if isinstance(n := self.shape[d], int) and (vals := _host_index_values(index.uop)) is not None and (bad := vals[(vals < 0) | (vals >= n)]).size:
      raise RuntimeError(f"{name}: index {bad.flat[0]} is out of bounds for dimension {d} with size {n}")
    return d

  def _onehot_along(self, d:int, index:Tensor, n:int) -> Tensor:
    """(index.unsqueeze(-1) == arange(n)), shape index.shape + (n,)."""
    return index.unsqueeze(-1).eq(type(self).arange(n, device=self.device))

  def gather(self, dim:int, index:Tensor) -> Tensor:
    """out[..., j, ...] = self[..., index[..., j, ...], ...] along dim (index has self's ndim; it may be smaller outside dim)."""
    d = self._check_index("gather", dim, index)
    n = self.shape[d]
    x = self.shrink(tuple(None if i == d else (0, s) for i, s in enumerate(index.shape)))
    x = x.unsqueeze(-1).transpose(d, -1)
    mask = self._onehot_along(d, index, n)
    return mask.where(x, x._full(0)).sum(-1).cast(self.dtype)

  def _scatter_parts(self, name:str, dim:int, index:Tensor, src):
    """For each element of self: the mask of index entries writing it and their src values, both shaped out + (m,) where m is
    index's size along dim (the writers are moved to the last axis)."""
    d = self._check_index(name, dim, index)
    if not isinstance(src, TensorBase): src = type(self).full(index.shape, src, device=self.device, dtype=self.dtype, buffer=False)
    elif src.dtype != self.dtype: raise RuntimeError(f"{name}: self.dtype={self.dtype} must equal src.dtype={src.dtype}")
    if src.ndim != index.ndim or any(a > b for a, b in zip(index.shape, src.shape)):
      raise RuntimeError(f"{name}: src {src.shape} must have index's ndim and be at least as large as index {index.shape}")
    src = src.shrink(tuple((0, s) for s in index.shape)).cast(self.dtype)
    mask = self._onehot_along(d, index, self.shape[d])            # index.shape + (n,)
    mask, src = mask.transpose(d, -1), src.unsqueeze(-1).transpose(d, -1)   # n at d, the writers last
    pads = tuple((0, 0) if i == d else (0, s - index.shape[i]) for i, s in enumerate(self.shape)) + ((0, 0),)
    return d, mask.pad(pads), src.pad(pads)

  def scatter(self, dim:int, index:Tensor, src, reduce:str|None=None) -> Tensor:
    """self with src written at index along dim; reduce "add"/"multiply" combines instead of overwriting. Of duplicate writers
    without reduce, the last one wins."""
    if reduce not in (None, "add", "multiply"): raise TypeError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    _, mask, src = self._scatter_parts("scatter", dim, index, src)
    if reduce == "add": return self + mask.where(src, src._full(0)).sum(-1).cast(self.dtype)
    if reduce == "multiply": return self * mask.where(src, src._full(1)).prod(-1)
    order = type(self).arange(1, mask.shape[-1] + 1, device=self.device)
    last = mask.where(order, 0).max(-1, keepdim=True)
    pick = mask & order.eq(last)
    return mask.max(-1).where(pick.where(src, src._full(0)).sum(-1).cast(self.dtype), self)

  def scatter_reduce(self, dim:int, index:Tensor, src:Tensor, reduce:str, include_self:bool=True) -> Tensor:
    """Combines the src values written to each element (and self's own, if include_self) with sum, prod, mean, amax or amin."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise RuntimeError(f"scatter_reduce reduce={reduce!r} must be one of 'sum', 'prod', 'mean', 'amax', 'amin'")
    _, mask, src = self._scatter_parts("scatter_reduce", dim, index, src)
    hit = mask.max(-1)
    if reduce in ("sum", "mean"):
      s = mask.where(src, src._full(0)).sum(-1).cast(self.dtype)
      if reduce == "sum": return self + s if include_self else hit.where(s, self)
      cnt = mask.sum(-1) + (1 if include_self else 0)
      tot = self + s if include_self else s
      mean = (tot.div(cnt) if dtypes.is_float(self.dtype) else tot.div(cnt, rounding_mode="floor")).cast(self.dtype)
      return hit.where(mean, self)
    if reduce == "prod":
      p = mask.where(src, src._full(1)).prod(-1)
      return self * p if include_self else hit.where(p, self)
    lo, hi = (False, True) if self.dtype is dtypes.bool else (self.dtype.min, self.dtype.max)
    m = mask.where(src, lo).max(-1) if reduce == "amax" else mask.where(src, hi).min(-1)
    if include_self: m = m.maximum(self) if reduce == "amax" else m.minimum(self)
    return hit.where(m, self)

  # ***** data-dependent shapes (the count is read back from the device unless `size` is given) *****
  def _positions(self, flat_mask:Tensor, size:int|None) -> tuple[Tensor, int]:
    """For a 1-D bool mask: the output slot of each true element (as an int tensor) and the output size."""
    n = flat_mask.shape[0]
    if size is None: size = int(flat_mask.sum().item())
    before = type(self).arange(n, device=self.device).unsqueeze(1) > type(self).arange(n, device=self.device)  # before[i, j]: j < i
    slot = (before & flat_mask.unsqueeze(0)).sum(1)
    return slot, size

  def _select_flat(self, values:Tensor, flat_mask:Tensor, slot:Tensor, size:int, fill_value) -> Tensor:
    hit = flat_mask.unsqueeze(0) & slot.unsqueeze(0).eq(type(self).arange(size, device=self.device).unsqueeze(1))   # (size, n)
    got = hit.where(values.unsqueeze(0), values._full(0).unsqueeze(0)).sum(1).cast(values.dtype)
    return hit.max(1).where(got, type(self)(fill_value, device=self.device, dtype=values.dtype)) if size else got

  def masked_select(self, mask, size:int|None=None, fill_value=0) -> Tensor:
    """The elements where mask (broadcast to self) is true, as 1-D; with `size`, exactly that many (padded with fill_value)."""
    if not isinstance(mask, TensorBase) or mask.dtype is not dtypes.bool: raise RuntimeError(f"masked_select needs a bool mask tensor, got {mask!r}")
    if not _broadcasts_to(mask.shape, self.shape): raise RuntimeError(f"mask {mask.shape} doesn't broadcast to {self.shape}")
    fm = mask._expand_to(self.shape).flatten()
    slot, size = self._positions(fm, size)
    return self._select_flat(self.flatten(), fm, slot, size, fill_value)

  def nonzero(self, size:int|None=None, fill_value=0) -> Tensor:
    """The indices of the nonzero elements, shape (count, ndim); with `size`, exactly that many rows (padded with fill_value)."""
    if self.ndim == 0:
      rows = self.reshape(1).nonzero(size, fill_value)
      return rows.shrink(((0, rows.shape[0]), (0, 0)))
    fm = self.ne(0).flatten() if self.dtype is not dtypes.bool else self.flatten()
    slot, size = self._positions(fm, size)
    coords = [type(self).arange(s, device=self.device).reshape(tuple(s if j == i else 1 for j in range(self.ndim)))._expand_to(self.shape).flatten()
              for i, s in enumerate(self.shape)]
    return type(self).stack(*[self._select_flat(c, fm, slot, size, fill_value) for c in coords], dim=1)

  def one_hot(self, num_classes:int) -> Tensor:
    """A last dim of num_classes with 1 at each value (an integer tensor)."""
    if not dtypes.is_int(self.dtype): raise RuntimeError(f"one_hot needs an integer tensor, got {self.dtype}")
    if not isinstance(num_classes, int) or num_classes < 0: raise ValueError(f"num_classes must be a non-negative int, got {num_classes}")
    return self.unsqueeze(-1).eq(type(self).arange(num_classes, device=self.device)).where(1, 0)

__all__ = ["IndexingMixin"]
