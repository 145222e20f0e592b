"""Fused multiply-add: a dot tile's float32/float64 accumulator updates acc + a*b (lanes of a dot product) -> MULACC(a, b, acc) where the
renderer computes MULACC fused (Renderer.fused_mulacc: the CPU's vfmadd, the PYTHON device's exact emulation): one instruction and one
rounding per lane, the same bits on both; and a vector accumulator's acc + v*s, a vector load times a broadcast scalar load (a conv's
channel tile). Other a*b+c stay unfused (see _fuse); half/bfloat16 (computed in float and rounded after every
op) keep their two roundings. A kernel with Opt(CHAIN): also acc + (a sum of products, the UNROLL lanes' tree) -> a chain of MULACCs over
the products in order.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, after_root
from tinygrad.dtype import dtypes, AddrSpace
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer

def _vector_load(u:UOp) -> int:
  """The width of a vector (SHRINK) load, else 0."""
  return u.src[0].src[2].arg if u.op is Ops.LOAD and u.src[0].op is Ops.SHRINK else 0

def _dot_product(a:UOp, b:UOp) -> bool:
  """a*b is a lane of a dot product's lanes (codegen/expander.py, dot): two vector loads of one width (a vector_alu renderer's vector
  reduce) or the same lane of two (elsewhere: one accumulator per lane). An outer-product register tile multiplies different lanes,
  or a lane by a scalar load; those stay unfused."""
  if a.op is Ops.INDEX and b.op is Ops.INDEX:
    return a.src[1].op is Ops.CONST and a.src[1].arg == b.src[1].arg and 0 < _vector_load(a.src[0]) == _vector_load(b.src[0])
  return 0 < _vector_load(a) == _vector_load(b)

def _broadcast_product(a:UOp, b:UOp, c:UOp) -> bool:
  """a*b is a vector load times a scalar load (broadcast to its lanes) into a vector accumulator c of the same width: a conv's channel
  tile, packed weights times one pixel (codegen/expander.py writes its lanes as one vector expression)."""
  return c.src[0].op is Ops.SHRINK and any(_vector_load(v) == c.src[0].src[2].arg and s.op is Ops.LOAD and not _vector_load(s)
                                           for v, s in ((a, b), (b, a)))

def _acc_load(u:UOp) -> bool:
  """u loads a register accumulator (pm_reduce's BUFFER(REG), through its AFTERs)."""
  if u.op is not Ops.LOAD or u.src[0].op not in (Ops.INDEX, Ops.SHRINK): return False
  b = after_root(u.src[0].src[0])
  return b.op is Ops.BUFFER and b.arg.addrspace is AddrSpace.REG

@dataclass(frozen=True)
class FuseContext:
  ren: Renderer|None
  chain: bool          # the kernel has Opt(CHAIN)

def fuse_context(sink:UOp, ren:Renderer|None) -> FuseContext:
  from tinygrad.codegen.opt import OptOps
  return FuseContext(ren, any(o.op is OptOps.CHAIN for o in getattr(sink.arg, "applied_opts", ())))

def _products(t:UOp) -> list[UOp]|None:
  """The MULs summed by an ADD tree, left to right, or None if a leaf is anything else (iterative: the tree of one update is small)."""
  out, stack = [], [t]
  while stack:
    u = stack.pop()
    if u.op is Ops.ADD: stack += [u.src[1], u.src[0]]
    elif u.op is Ops.MUL: out.append(u)
    else: return None
  return out

def _chain(ctx:FuseContext, x:UOp, t:UOp, c:UOp) -> UOp|None:
  # Opt(CHAIN): the sum's products accumulate one by one, fused: the chained 4 x 32 packed matmul tile beats the 8 x 16 tile and
  # itself unchained, whose tree spills (benches/README.md, Design measurements)
  if not ctx.chain or ctx.ren is None or not ctx.ren.fused_mulacc or not _acc_load(c) or (ms := _products(t)) is None: return None
  for m in ms: c = UOp(Ops.MULACC, x.dtype, (*m.src, c))
  return c

def _fuse(ctx:FuseContext, x:UOp, m:UOp, c:UOp) -> UOp|None:
  # Only a dot tile's accumulator updates, acc += a*b with a*b a lane of a dot product (on a vector_alu renderer one vector
  # multiply-add, elsewhere its lanes: the same updates, so the same bits), and a vector accumulator's update by a vector times a
  # broadcast scalar (a conv's channel tile, written as vectors by the expander), which run faster fused; fusing the register tiles
  # of a @ b and of the conv as scalar lanes (packed by clang's SLP vectorizer) made clang spill and run slower, elementwise a*b+c
  # gains nothing (adds run on separate pipes), and numpy rounds twice (benches/README.md, Design measurements)
  if ctx.ren is None or not ctx.ren.fused_mulacc or not _acc_load(c) or not (_dot_product(*m.src) or _broadcast_product(*m.src, c)):
    return None
  return UOp(Ops.MULACC, x.dtype, (*m.src, c))

pm_fuse_mulacc = PatternMatcher([
  (UPat(Ops.ADD, dtype=(dtypes.float32, dtypes.float64), src=[UPat(Ops.MUL, name="m"), UPat.var("c")], name="x"), _fuse),
  (UPat(Ops.ADD, dtype=(dtypes.float32, dtypes.float64), src=[UPat(Ops.ADD, name="t"), UPat.var("c")], name="x"), _chain),
])
