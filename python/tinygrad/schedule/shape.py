"""Shapes of tensor-graph UOps, computed from the graph (UOps carry no shape of their own).

Tensor-level conventions (what tensor.py builds and the scheduler reads):
  BUFFER   src: (CONST size,)  arg: ParamArg(uid, dtype, device=...)   a flat device buffer, shape (size,)
  CONST    src: ()             arg: value                               shape ()
  RESHAPE/EXPAND arg: new shape; PERMUTE arg: order; PAD arg: ((before, after), ...); SHRINK arg: ((start, end), ...);
  FLIP arg: tuple of bools (one per dim)
  REDUCE   src: (x,)           arg: (op, axes)                          keeps the reduced dims as size 1
  ALU / CAST / CONTIGUOUS      shape of src[0] (the Tensor layer broadcasts first)
  COPY     src: (x,)           arg: (src device, dst device)            x moved to another device, shape of x
"""
from __future__ import annotations
import weakref
from tinygrad.uop.ops import UOp, Ops, GroupOp

_shapes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

def _compute(u:UOp) -> tuple[int, ...]:
  op = u.op
  if op is Ops.BUFFER: return (u.src[0].arg,)
  if op is Ops.CONST: return ()
  if op in (Ops.RESHAPE, Ops.EXPAND): return tuple(u.arg)
  if op is Ops.PERMUTE:
    s = shape_of(u.src[0])
    return tuple(s[i] for i in u.arg)
  if op is Ops.PAD: return tuple(s + b + a for s, (b, a) in zip(shape_of(u.src[0]), u.arg))
  if op is Ops.SHRINK: return tuple(e - b for b, e in u.arg)
  if op is Ops.FLIP: return shape_of(u.src[0])
  if op is Ops.REDUCE:
    axes = u.arg[1]
    return tuple(1 if i in axes else s for i, s in enumerate(shape_of(u.src[0])))
  if op in GroupOp.ALU or op in (Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.COPY):
    return shape_of(u.src[-1] if op is Ops.WHERE else u.src[0])
  raise RuntimeError(f"no shape for {op}")

def shape_of(u:UOp) -> tuple[int, ...]:
  """The shape of a tensor-graph UOp (cached while the UOp is alive)."""
  if (ret := _shapes.get(u)) is None:
    # the unknown part of the graph children first, without recursion (graphs can be deep): _compute then only looks one level down
    for n in u.toposort(gate=lambda n: n not in _shapes): _shapes[n] = _compute(n)
    ret = _shapes[u]
  return ret
