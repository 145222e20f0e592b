"""The movement operations (reshape, expand, permute, pad, shrink, flip and what is built from them), written once for Tensor and UOp.

Primitives each class provides: `shape`, `_mop(op, arg)` (the movement node, arg already checked) and `_full(value, dtype)` (a
constant of self's shape: CONST, reshaped to ones and expanded, Tensor.full_like(value, dtype, buffer=False)). A movement that
changes nothing returns self, so Tensor and UOp build exactly the same nodes; bad arguments raise the errors torch would
(RuntimeError/ValueError/IndexError naming the shapes).
"""
from __future__ import annotations
import math
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod, argfix
from tinygrad._core import UOp
from tinygrad.uop.sint import resolve, ssimplify, srender, sym_le

def _sym(s) -> bool: return isinstance(s, UOp)
def size_ok(s) -> bool:
  """s is a valid size: an int >= 0, or an int expression of Variables that is never negative."""
  return (isinstance(s, int) and not isinstance(s, bool) and s >= 0) or (_sym(s) and dtypes.is_int(s.dtype) and s.vmin >= 0)
def _differ(a, b) -> bool:
  """a and b (ints or symbolic) are provably different sizes."""
  return a is not b and (resolve(a != b, False) if _sym(a) or _sym(b) else a != b)
def _same(a, b) -> bool:
  """a and b (ints or symbolic) are provably the same size."""
  return a is b or (a == b if not _sym(a) and not _sym(b) else ssimplify(a - b) == 0)
def same_sizes(a:tuple, b:tuple) -> bool:
  """a and b hold the same sizes other than 1s, in order (a reshape that only adds or drops 1s): checked without simplifying."""
  x, y = [s for s in a if _sym(s) or s != 1], [s for s in b if _sym(s) or s != 1]
  return len(x) == len(y) and all(i is j or (not _sym(i) and not _sym(j) and i == j) for i, j in zip(x, y))
def shape_str(shape) -> str: return f"({', '.join(srender(s) for s in shape)}{',' if len(shape) == 1 else ''})"

class MovementMixin:
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return prod(self.shape)
  # the largest shape a symbolic shape can take (each size at its Variables' upper bound)
  @property
  def max_shape(self) -> tuple[int, ...]: return tuple(int(s.vmax) if _sym(s) else s for s in self.shape)
  def max_numel(self) -> int: return int(n.vmax) if _sym(n := self.numel()) else n
  def element_size(self) -> int:
    if self.dtype in dtypes.weaks: raise RuntimeError(f"element_size needs a concrete dtype, got {self.dtype}")
    return self.dtype.itemsize
  def nbytes(self) -> int:
    """The bytes of the elements (a ValueError for a symbolic shape, whose size is not one number)."""
    return int(self.numel()) * self.element_size()
  def _norm_axis(self, a:int, extra:int=0) -> int:
    """Axis a (negative counts from the end) of self, or of self with `extra` more dims."""
    if not isinstance(a, int) or isinstance(a, bool): raise TypeError(f"a dimension must be an int, got {a!r} ({type(a).__name__})")
    n = self.ndim + extra
    if not -max(n, 1) <= a < max(n, 1): raise IndexError(f"dimension {a} is out of range for a tensor of shape {self.shape} "
                                                          f"(expected to be in [{-max(n, 1)}, {max(n, 1) - 1}])")
    return a + n if a < 0 else a

  def reshape(self, shape, *args):
    """self with a new shape of as many elements: -1 infers one size, None keeps the size of that dim (as in tinygrad)."""
    shape = tuple(self.shape[i] if s is None and i < self.ndim else s for i, s in enumerate(argfix(shape, *args)))
    if shape.count(-1) > 1: raise RuntimeError(f"only one dimension can be inferred, got {shape}")
    if -1 in shape:
      rest = prod(s for s in shape if _sym(s) or s != -1)
      if _sym(rest) or _sym(self.numel()):
        # a symbolic size divides only when the division is exact
        num, den = (x.simplify() if _sym(x) else UOp.const(x) for x in (self.numel(), rest))
        if (inferred := num.divide_exact(den)) is None:
          raise RuntimeError(f"shape {shape_str(shape)} can't be inferred for input of shape {shape_str(self.shape)}")
        inferred = ssimplify(inferred)
      elif rest == 0 or self.numel() % rest: raise ValueError(f"size mismatch, can't reshape {self.shape} -> {shape}")
      else: inferred = self.numel() // rest
      shape = tuple(inferred if not _sym(s) and s == -1 else s for s in shape)
    # ValueError with 0.14's wording for every size that cannot hold self's elements
    if not all(size_ok(s) for s in shape):
      raise ValueError(f"size mismatch, can't reshape {shape_str(self.shape)} -> invalid shape {shape_str(shape)}")
    shape = tuple(ssimplify(s) if _sym(s) else s for s in shape)
    if not same_sizes(shape, self.shape) and (_sym(n := ssimplify(prod(shape))) or _sym(self.numel())) and not _same(n, self.numel()):
      # a symbolic size must be the same for every value of its Variables
      raise ValueError(f"shape {shape_str(shape)} is invalid for input of shape {shape_str(self.shape)}: the sizes {srender(n)} and "
                       f"{srender(ssimplify(self.numel()))} are not the same for every value of the Variables")
    if not same_sizes(shape, self.shape) and _differ(ssimplify(prod(shape)), ssimplify(self.numel())):
      raise ValueError(f"size mismatch, can't reshape {shape_str(self.shape)} ({srender(self.numel())} elements) -> "
                       f"{shape_str(shape)}")
    return self if shape == self.shape else self._mop(Ops.RESHAPE, shape)
  def permute(self, order, *args):
    order = tuple(self._norm_axis(a) for a in argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): raise RuntimeError(f"permute order {order} is not a permutation of the dims of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._mop(Ops.PERMUTE, order)
  def expand(self, shape, *args):
    """self broadcast to shape (-1 keeps a dim; new dims are added in front)."""
    shape = tuple(argfix(shape, *args))
    if len(shape) < self.ndim: raise RuntimeError(f"can't expand {self.shape} to {shape}: fewer dims")
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) > self.ndim else self
    new = tuple(o if not _sym(s) and s == -1 else s for s, o in zip(shape, x.shape))
    if not all(size_ok(s) for s in new): raise ValueError(f"invalid expand shape {shape_str(shape)}")
    new = tuple(ssimplify(s) if _sym(s) else s for s in new)
    if not all(_same(o, 1) or _same(o, s) for s, o in zip(new, x.shape)):
      raise RuntimeError(f"can't expand {shape_str(self.shape)} to {shape_str(shape)}")
    return x if new == x.shape else x._mop(Ops.EXPAND, new)
  def _expand_to(self, shape:tuple[int, ...]):
    if self.shape == shape: return self
    return self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)
  def pad(self, padding, mode:str="constant", value:float=0.0):
    """Pads: torch style (left, right) pairs from the last dim, or one (before, after) pair (or None) per dim. mode "constant" fills
    with `value` (a WHERE over a padded mask when nonzero); "reflect", "replicate" and "circular" copy edges of the input. Negative
    amounts cut (a SHRINK)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise NotImplementedError(f"pad mode {mode!r} is not supported (constant, reflect, replicate, circular)")
    if all(isinstance(p, (int, UOp)) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise ValueError(f"invalid padding {padding} for shape {self.shape}")
      pairs = [(0, 0)] * self.ndim
      for i in range(len(padding) // 2): pairs[self.ndim - 1 - i] = (padding[2*i], padding[2*i+1])
    else:
      if len(padding) != self.ndim: raise ValueError(f"padding {padding} needs one entry per dim of {self.shape}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if any(_sym(b) or _sym(a) for b, a in pairs):
      # symbolic amounts pad (a Variable's range must keep them >= 0; cutting takes a shrink)
      pairs = [tuple(ssimplify(p) for p in pair) for pair in pairs]
      if not all(size_ok(p) for pair in pairs for p in pair): raise ValueError(f"symbolic padding {pairs} must be >= 0 for shape {self.shape}")
      x, pos = self, tuple(pairs)
    else:
      grow = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
      def cut(x): return x.shrink(tuple((-min(b, 0), s + a if a < 0 else s) for s, (b, a) in zip(x.shape, pairs)))
      # reflect and replicate read the edges of the whole input, as torch does: pad first, then cut (circular wraps what is left)
      if mode in ("reflect", "replicate"): return cut(self._pad_edges(grow, mode) if any(p != (0, 0) for p in grow) else self)
      x, pos = cut(self), grow
    if all(p == (0, 0) for p in pos): return x
    if mode != "constant": return x._pad_edges(pos, mode)
    ret = x._mop(Ops.PAD, pos)
    # a -0.0 fill is kept (cat pads with it: -0.0 is the exact identity of +, so -0.0 elements survive the sum)
    if value == 0 and not (isinstance(value, float) and math.copysign(1.0, value) < 0): return ret
    return x._full(True, dtypes.bool)._mop(Ops.PAD, pos).where(ret, value)
  def _pad_edges(self, pos, mode:str):
    """Non-constant padding, one dim at a time: the pieces before and after are shrinks (flipped for reflect) of the input,
    joined by zero padding and adds."""
    x = self
    for d, (b, a) in enumerate(pos):
      if b == 0 and a == 0: continue
      n = x.shape[d]
      if mode == "reflect" and (b >= n or a >= n): raise ValueError(f"reflect padding {(b, a)} must be less than the size {n} of dim {d}")
      if mode == "circular" and (b > n or a > n): raise ValueError(f"circular padding {(b, a)} can wrap around at most once (size {n} of dim {d})")
      if mode == "replicate" and n == 0: raise ValueError(f"can't replicate-pad the empty dim {d} of {x.shape}")
      def cut(lo, hi): return x.shrink(tuple((lo, hi) if i == d else None for i in range(x.ndim)))
      if mode == "reflect": before, after = cut(1, b + 1).flip(d), cut(n - a - 1, n - 1).flip(d)
      elif mode == "circular": before, after = cut(n - b, n), cut(0, a)
      else:
        before = cut(0, 1).expand(tuple(b if i == d else s for i, s in enumerate(x.shape)))
        after = cut(n - 1, n).expand(tuple(a if i == d else s for i, s in enumerate(x.shape)))
      parts, off, total = [before, x, after], 0, b + n + a
      out = None
      for p in parts:
        if p.shape[d] == 0: continue
        q = p._mop(Ops.PAD, tuple((off, total - off - p.shape[d]) if i == d else (0, 0) for i in range(x.ndim)))
        out = q if out is None else out + q
        off += p.shape[d]
      x = out
    return x
  def shrink(self, arg):
    """The slice [start, end) of each dim (None keeps a dim)."""
    if len(arg) != self.ndim: raise ValueError(f"shrink {arg} needs one entry per dim of {self.shape}")
    arg = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
    if any(not sym_le(0, b) or not sym_le(b, e) or not sym_le(e, s) for (b, e), s in zip(arg, self.shape)):
      raise ValueError(f"invalid shrink {arg} for shape {shape_str(self.shape)}")
    if all(a == (0, s) for a, s in zip(arg, self.shape)): return self
    return self._mop(Ops.SHRINK, arg)
  def flip(self, axis, *args):
    given = [self._norm_axis(a) for a in argfix(axis, *args)]
    if len(set(given)) != len(given): raise RuntimeError(f"flip dims {argfix(axis, *args)} name a dim more than once (shape {self.shape})")
    axes = set(given)
    flips = tuple(i in axes and (_sym(s) or s > 1) for i, s in enumerate(self.shape))
    return self if not any(flips) else self._mop(Ops.FLIP, flips)

  def transpose(self, dim0:int=1, dim1:int=0):
    order = list(range(self.ndim))
    d0, d1 = self._norm_axis(dim0), self._norm_axis(dim1)
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  @property
  def T(self): return self.transpose() if self.ndim >= 2 else self
  def flatten(self, start_dim:int=0, end_dim:int=-1):
    if self.ndim == 0: return self.reshape(1)
    s, e = self._norm_axis(start_dim), self._norm_axis(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e+1]),) + self.shape[e+1:])
  def squeeze(self, dim:int|tuple[int, ...]|None=None):
    """Drops size-1 dims: all of them, or those of `dim` (an int or a tuple; a dim of another size is kept, as in torch)."""
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = {self._norm_axis(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))
  def unsqueeze(self, dim:int):
    d = self._norm_axis(dim, extra=1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

__all__ = ["MovementMixin"]
