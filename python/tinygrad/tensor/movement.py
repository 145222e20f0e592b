"""Movement ops that only Tensor has: cat, stack, split, repeat, roll, unfold, diagonals, rearrange, ... (all built from the
movement primitives, comparisons of aranges and where). The movement ops shared with UOp are in tinygrad/mixin/movement.py."""
from __future__ import annotations
import math
import re
from typing import TYPE_CHECKING, Sequence
from tinygrad.helpers import argfix, prod
from tinygrad.dtype import dtypes, least_upper_dtype
from tinygrad.tensor.common import check_tensors
from tinygrad.uop.ops import UOp, srender
from tinygrad.mixin.movement import shape_str
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

class TensorMovementMixin:
  # ***** combining *****
  def cat(self, *args:Tensor, dim:int=0) -> Tensor:
    tensors = (self,) + check_tensors("cat", args)
    self._same_device(*args)
    d = self._norm_axis(dim)
    for t in tensors:
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise RuntimeError(f"cat needs the same shape except in dim {d}, got {[t.shape for t in tensors]}")
    dt = least_upper_dtype(*(t.dtype for t in tensors))
    total, off, ret = sum(t.shape[d] for t in tensors), 0, None
    # floats pad with -0.0, the exact identity of +: a -0.0 element stays -0.0 in the sum (0.0 + -0.0 would be +0.0)
    fill = -0.0 if dtypes.is_float(dt) and len(tensors) > 1 else 0
    for t in tensors:
      p = t.cast(dt).pad(tuple((off, total - off - t.shape[d]) if i == d else None for i in range(self.ndim)), value=fill)
      ret = p if ret is None else ret + p
      off += t.shape[d]
    return ret
  def stack(self, *args:Tensor, dim:int=0) -> Tensor:
    """Joins self and args along a new dim (Tensor.stack(a, b) and Tensor.stack([a, b]) work too)."""
    if isinstance(self, (list, tuple)) and args:
      raise ValueError(f"stack takes tensors or one sequence of tensors, got a sequence of {len(self)} and {len(args)} more tensor(s)")
    args = tuple(self) + args if isinstance(self, (list, tuple)) else (self,) + args
    if not args: raise ValueError("stack needs at least one tensor")
    d = check_tensors("stack", args)[0]._norm_axis(dim, extra=1)
    if any(t.shape != args[0].shape for t in args): raise RuntimeError(f"stack needs tensors of one shape, got {[t.shape for t in args]}")
    return args[0].unsqueeze(d).cat(*[t.unsqueeze(d) for t in args[1:]], dim=d)

  # ***** reshaping by name *****
  def view(self, shape, *args) -> Tensor:
    """reshape (as torch's view)."""
    return self.reshape(shape, *args)
  def shrink_to(self, shape, *args) -> Tensor:
    """The leading [0, s) of each dim (None keeps a dim)."""
    shape = tuple(argfix(shape, *args))
    if len(shape) != self.ndim: raise ValueError(f"shrink_to {shape} needs one size per dim of {self.shape}")
    return self.shrink(tuple(None if s is None else (0, s) for s in shape))
  def pad_to(self, shape, *args, value=0) -> Tensor:
    """Pads each dim at its end up to `shape` (None keeps a dim)."""
    shape = tuple(argfix(shape, *args))
    if len(shape) != self.ndim: raise ValueError(f"pad_to {shape} needs one size per dim of {self.shape}")
    if any(s is not None and s < o for s, o in zip(shape, self.shape)): raise ValueError(f"can't pad {self.shape} to the smaller {shape}")
    return self.pad(tuple(None if s is None else (0, s - o) for s, o in zip(shape, self.shape)), value=value)
  def unflatten(self, dim:int, sizes:tuple[int, ...]) -> Tensor:
    """Splits dim into `sizes` (one may be -1)."""
    d = self._norm_axis(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d+1:])
  def rearrange(self, formula:str, **sizes) -> Tensor:
    """einops-style rearrange: "b (h w) c -> b h w c" with sizes given by name (h=2); "..." stands for the remaining dims, "1"
    for a unit dim."""
    if formula.count("->") != 1: raise ValueError(f"rearrange formula {formula!r} needs exactly one '->'")
    lhs, rhs = (_parse_axes(side, formula) for side in formula.split("->"))
    names = [n for g in lhs for n in g]
    if sorted(n for n in names if n != "1") != sorted(n for g in rhs for n in g if n != "1"):
      raise ValueError(f"rearrange {formula!r}: the names on both sides must match")
    if len(lhs) - (has_ell := any("..." in g for g in lhs)) > self.ndim or (not has_ell and len(lhs) != self.ndim):
      raise ValueError(f"rearrange {formula!r} doesn't fit shape {self.shape}")
    if has_ell:
      n_ell = self.ndim - len(lhs) + 1
      ell = [f"...{i}" for i in range(n_ell)]
      lhs = [g2 for g in lhs for g2 in ([[e] for e in ell] if g == ["..."] else [g])]
      rhs = [g2 for g in rhs for g2 in ([[e] for e in ell] if g == ["..."] else [[e for n in g for e in (ell if n == "..." else [n])]])]
    known = dict(sizes)
    for g, s in zip(lhs, self.shape):
      if len(g) == 1 and g[0] != "1": known[g[0]] = s
      else:
        unknown = [n for n in g if n != "1" and n not in known]
        if len(unknown) > 1: raise ValueError(f"rearrange {formula!r}: can't infer the sizes of {unknown}")
        rest = prod(known[n] for n in g if n != "1" and n in known)
        if unknown: known[unknown[0]] = s // rest if rest else 0
        if prod(known.get(n, 1) for n in g) != s: raise ValueError(f"rearrange {formula!r}: group {g} doesn't match size {s}")
    flat = [n for g in lhs for n in g if n != "1"]
    x = self.reshape(tuple(known[n] for n in flat))
    x = x.permute(tuple(flat.index(n) for g in rhs for n in g if n != "1"))
    return x.reshape(tuple(prod(1 if n == "1" else known[n] for n in g) for g in rhs))

  # ***** splitting and repeating *****
  def split(self, sizes:int|Sequence[int], dim:int=0) -> tuple[Tensor, ...]:
    """Pieces of `sizes` along dim: an int gives equal pieces (the last one may be smaller), a list gives those sizes."""
    d = self._norm_axis(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n: raise ValueError(f"split sizes {list(sizes)} must sum to the size {n} of dim {d} of {self.shape}")
    offs = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(self.shrink(tuple((o, o + s) if i == d else None for i in range(self.ndim))) for o, s in zip(offs, sizes))
  def chunk(self, chunks:int, dim:int=0) -> list[Tensor]:
    """At most `chunks` pieces of equal size along dim (the last may be smaller), as torch."""
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunks must be a positive int, got {chunks}")
    n = self.shape[d := self._norm_axis(dim)]
    # the number and sizes of the pieces would depend on the Variables' values (0.14 raises AssertionError here too)
    if isinstance(n, UOp):
      raise AssertionError(f"can't chunk the symbolic dim {d} (size {srender(n)}) of {shape_str(self.shape)}: shrink it instead")
    return list(self.split(math.ceil(n / chunks) if n else 1, dim)) if n else [self] * chunks
  def repeat(self, repeats, *args) -> Tensor:
    """Tiles the tensor `repeats` times per dim (leading extra repeats add dims), as torch's repeat / numpy's tile."""
    reps = tuple(argfix(repeats, *args))
    if len(reps) < self.ndim: raise ValueError(f"repeat needs at least {self.ndim} repeats for shape {self.shape}, got {reps}")
    if any(r < 0 for r in reps): raise ValueError(f"repeats must be non-negative, got {reps}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(s for b in base for s in (1, b)))
    x = x.expand(tuple(s for r, b in zip(reps, base) for s in (r, b)))
    return x.reshape(tuple(r * b for r, b in zip(reps, base)))
  def repeat_interleave(self, repeats:int, dim:int|None=None) -> Tensor:
    """Each element `repeats` times in a row along dim (over the flattened tensor when dim is None)."""
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"repeats must be a non-negative int, got {repeats}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._norm_axis(dim))
    x = x.unsqueeze(d + 1)
    x = x.expand(x.shape[:d+1] + (repeats,) + x.shape[d+2:])
    return x.reshape(x.shape[:d] + (x.shape[d] * repeats,) + x.shape[d+2:])
  def roll(self, shifts:int|tuple[int, ...], dims:int|tuple[int, ...]|None=None) -> Tensor:
    """Shifts elements along dims, wrapping around (over the flattened tensor when dims is None)."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts, dims = (shifts,) if isinstance(shifts, int) else tuple(shifts), (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims): raise RuntimeError(f"roll needs as many shifts as dims, got {shifts} and {dims}")
    x = self
    for s, dim in zip(shifts, dims):
      d = x._norm_axis(dim)
      if (n := x.shape[d]) == 0 or s % n == 0: continue
      a, b = x.split([n - s % n, s % n], d)
      x = b.cat(a, dim=d)
    return x
  def unfold(self, dim:int, size:int, step:int) -> Tensor:
    """The windows of `size` every `step` along dim: that dim becomes the window count and a last dim of `size` is added."""
    d = self._norm_axis(dim)
    if size < 0 or size > self.shape[d]: raise RuntimeError(f"unfold size {size} must be in [0, {self.shape[d]}] for dim {d} of {self.shape}")
    if step <= 0: raise RuntimeError(f"unfold step must be positive, got {step}")
    cnt = (self.shape[d] - size) // step + 1
    sl = tuple(slice(None) for _ in range(d))
    wins = [self[sl + (slice(j, j + (cnt - 1) * step + 1, step),)] for j in range(size)]
    if not wins: return self.shrink(tuple((0, 0) if i == d else None for i in range(self.ndim))).reshape(
      self.shape[:d] + (cnt,) + self.shape[d+1:] + (0,))
    return type(self).stack(*wins, dim=-1)

  # ***** diagonals and triangles *****
  def diag(self) -> Tensor:
    """The square matrix with the 1-D self on its diagonal."""
    if self.ndim != 1: raise ValueError(f"diag needs a 1-D tensor, got shape {self.shape}")
    n = self.shape[0]
    eye = type(self).arange(n, device=self.device).unsqueeze(1).eq(type(self).arange(n, device=self.device))
    return eye.where(self.unsqueeze(0).expand(n, n), self._full(0).unsqueeze(0).expand(n, n))
  def diagonal(self, offset:int=0, dim1:int=0, dim2:int=1) -> Tensor:
    """The diagonal (offset above it when positive) of the dims dim1, dim2, as a last dim (as torch)."""
    d1, d2 = self._norm_axis(dim1), self._norm_axis(dim2)
    if d1 == d2: raise RuntimeError(f"diagonal dims must differ, got {dim1} and {dim2}")
    x = self.permute(tuple(i for i in range(self.ndim) if i not in (d1, d2)) + (d1, d2))
    n, m = x.shape[-2:]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    k = max(0, min(n - r0, m - c0))
    x = x.shrink(tuple((0, s) for s in x.shape[:-2]) + ((r0, r0 + k), (c0, c0 + k)))
    x = x.reshape(x.shape[:-2] + (k * k,)).pad(tuple((0, 0) for _ in x.shape[:-2]) + ((0, k),))
    return x.reshape(x.shape[:-1] + (k, k + 1)).shrink(tuple((0, s) for s in x.shape[:-1]) + ((0, k), (0, 1))).reshape(x.shape[:-1] + (k,))
  def _tri(self, diagonal:int, upper:bool) -> Tensor:
    if self.ndim < 2: raise RuntimeError(f"{'triu' if upper else 'tril'} needs at least 2 dims, got shape {self.shape}")
    n, m = self.shape[-2:]
    rows, cols = type(self).arange(n, device=self.device).unsqueeze(1), type(self).arange(m, device=self.device).unsqueeze(0)
    keep = (cols - rows >= diagonal) if upper else (cols - rows <= diagonal)
    return keep.where(self, self._full(0))
  def tril(self, diagonal:int=0) -> Tensor:
    """The lower triangle of the last two dims (on and below the `diagonal`-th diagonal); the rest zero."""
    return self._tri(diagonal, False)
  def triu(self, diagonal:int=0) -> Tensor:
    """The upper triangle of the last two dims (on and above the `diagonal`-th diagonal); the rest zero."""
    return self._tri(diagonal, True)

def _parse_axes(side:str, formula:str) -> list[list[str]]:
  """One rearrange side as groups of names: "a (b c) ..." -> [["a"], ["b", "c"], ["..."]]."""
  groups, cur = [], None
  for tok in re.findall(r"\.\.\.|\(|\)|[A-Za-z_][A-Za-z0-9_]*|1|\S", side):
    if tok == "(":
      if cur is not None: raise ValueError(f"rearrange {formula!r}: nested parentheses")
      cur = []
    elif tok == ")":
      if cur is None: raise ValueError(f"rearrange {formula!r}: unbalanced parentheses")
      groups.append(cur)
      cur = None
    elif not (tok in ("...", "1") or tok[0].isalpha() or tok[0] == "_"): raise ValueError(f"rearrange {formula!r}: bad token {tok!r}")
    elif cur is not None: cur.append(tok)
    else: groups.append([tok])
  if cur is not None: raise ValueError(f"rearrange {formula!r}: unbalanced parentheses")
  return groups

__all__ = ["TensorMovementMixin"]
