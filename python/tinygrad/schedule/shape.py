"""Kept for callers written before UOp.shape: the shape rules and the tensor-graph conventions are in tinygrad/uop/shape.py."""
from __future__ import annotations
from tinygrad.uop.ops import UOp

def shape_of(u:UOp) -> tuple[int, ...]:
  """The shape of a tensor-graph UOp: u.shape."""
  return u.shape
