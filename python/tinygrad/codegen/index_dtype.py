"""Index dtype lowering: the last pass before linearize that touches index arithmetic.

Kernels build their indices, loop counters, sizes and variables in dtypes.weakint (a mathematical integer, vmin/vmax unbounded).
No renderer has such a type, so this pass gives every weakint UOp a machine width, node by node, from the symbolic bounds:
  - int32 where the node's value range and its sources' ranges fit in int32 (the common case: C renders exactly `int`),
  - int64 otherwise (a loop over 2**33 elements, an offset past 2**31 into a uint8 buffer),
  - an int32 operand of an int64 op gets a widening CAST; a weakint CONST becomes a literal of the dtype it meets.
Floor division/modulo have no renderer op: FLOORDIV/FLOORMOD of a non-negative dividend by a positive divisor are CDIV/CMOD (C
truncation is floor there), one whose dividend may be negative is shifted into the non-negative range first (index math, where
the bounds say by how much) or corrected exactly (other ints). Division of a non-negative int by a power of two is a shift or a
mask (signed `/` and `%` need fix-up instructions the C compiler can only drop when it proves the sign).
Rewrites run children first (graph_rewrite's default order), so a node's sources are already lowered when its rule sees it.
"""
from __future__ import annotations
import dataclasses
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, GroupOp
from tinygrad.dtype import DType, dtypes

_WEAKINT, _I32, _I64 = dtypes.weakint, dtypes.int32, dtypes.int64
_MIN32, _MAX32 = _I32.min, _I32.max

def _fits32(lo, hi) -> bool: return _MIN32 <= lo and hi <= _MAX32
def _const_dtype(v:int) -> DType: return _I32 if _fits32(v, v) else _I64
def _is_wconst(s:UOp) -> bool: return s.op is Ops.CONST and s.dtype is _WEAKINT

def _to(s:UOp, dt:DType) -> UOp:
  """s as an operand of dtype dt: a weak literal is re-made in dt, any other int of another width is cast."""
  if s.dtype is dt: return s
  if _is_wconst(s): return UOp.const(dt.const(s.arg), dt)
  return UOp(Ops.CAST, dt, (s,), dt)

def _int_positions(u:UOp) -> range:
  """The srcs of a weakint UOp that are part of its integer value (a RANGE's order deps and a WHERE's condition are not)."""
  if u.op in (Ops.RANGE, Ops.SPECIAL, Ops.CAST): return range(min(1, len(u.src)))
  if u.op is Ops.WHERE: return range(1, 3)
  if u.op in (Ops.PARAM, Ops.BUFFER): return range(0)
  return range(len(u.src))

def _width(u:UOp, srcs) -> DType:
  """int32 when u's range and every int source's range fit in it, else int64."""
  if not _fits32(u.vmin, u.vmax): return _I64
  for s in srcs:
    if s.dtype is _I64 or s.dtype is dtypes.uint64 or s.dtype is dtypes.uint32 or not _fits32(s.vmin, s.vmax): return _I64
  return _I32

def _lower_weak(u:UOp) -> UOp|None:
  # a weak literal takes the dtype of the op it meets (below); everything else waits for its sources (children first)
  if u.op is Ops.CONST: return None
  pos = _int_positions(u)
  if any(u.src[i].dtype is _WEAKINT and not _is_wconst(u.src[i]) for i in pos): return None
  dt = _width(u, [u.src[i] for i in pos])
  if u.op in (Ops.PARAM, Ops.BUFFER):   # a Variable: the kernel argument gets the width of its declared range
    return u.replace(dtype=dt, arg=dataclasses.replace(u.arg, dtype=dt)) if hasattr(u.arg, "vmin_vmax") else None
  if u.op is Ops.CAST:                  # an int value entering index math: nothing to do at the width it already has
    return u.src[0] if u.src[0].dtype is dt else _to(u.src[0], dt)
  return u.replace(dtype=dt, src=tuple(_to(s, dt) if i in pos else s for i, s in enumerate(u.src)))

def _operand_dtype(u:UOp, i:int, s:UOp) -> DType|None:
  """The dtype src i of a non-weak UOp must have, for a weak literal or a lowered index operand; None: leave it."""
  op = u.op
  if op in (Ops.INDEX, Ops.SHRINK, Ops.PARAM, Ops.BUFFER, Ops.CAST, Ops.BITCAST, Ops.RANGE, Ops.SPECIAL):
    return _const_dtype(s.arg) if _is_wconst(s) else None   # an offset, a size, a lane: its own width
  if op in GroupOp.Comparison:
    strong = [x.dtype for x in u.src if x.dtype is not _WEAKINT]
    # index operands (lowered, or literals) compare at the widest width one of them needs
    if all(d in (_I32, _I64) for d in strong):
      return _I64 if _I64 in strong or any(_const_dtype(x.arg) is _I64 for x in u.src if _is_wconst(x)) else _I32
    return strong[0]
  if op is Ops.STORE: return u.src[0].dtype if i == 1 else None
  if op is Ops.LOAD: return u.dtype if i == 1 else None
  if op is Ops.WHERE: return u.dtype if i > 0 else None
  if op in GroupOp.ALU or op is Ops.STACK: return u.dtype
  return None

def _commit_operands(u:UOp) -> UOp|None:
  """Weak literals and lowered index operands of an op that already has a machine dtype (a comparison, an INDEX, a STORE...)."""
  if u.dtype is _WEAKINT: return None
  # the common case (every node of the kernel passes here): no weak literal, no int64 operand
  for s in u.src:
    if s.dtype is _WEAKINT or s.dtype is _I64: break
  else: return None
  new = list(u.src)
  for i, s in enumerate(u.src):
    if not (_is_wconst(s) or s.dtype in (_I32, _I64)) or (dt := _operand_dtype(u, i, s)) is None or dt is s.dtype: continue
    # only index widths are reconciled here: a well-typed value never meets another int width
    if not _is_wconst(s) and not (dt in (_I32, _I64) and s.dtype in (_I32, _I64)): continue
    if dtypes.is_float(dt) or dt is dtypes.bool: new[i] = UOp.const(dt.const(s.arg), dt)
    else: new[i] = _to(s, dt)
  return None if new == list(u.src) else u.replace(src=tuple(new))

# ***** floor division *****

def _pow2(c:UOp) -> int|None:
  """log2 of a CONST that is a positive power of two."""
  v = c.arg if c.op is Ops.CONST and type(c.arg) is int else 0
  return v.bit_length() - 1 if v > 0 and v & (v - 1) == 0 else None

def _floordiv(x:UOp, a:UOp, b:UOp) -> UOp|None:
  if dtypes.is_float(x.dtype): return None
  if b.vmin > 0 and a.vmin >= 0: return UOp(Ops.CDIV, x.dtype, (a, b))
  if x.dtype is _WEAKINT and b.op is Ops.CONST and b.arg > 0:
    k = -(a.vmin // b.arg)   # a + k*b >= 0, built in weakint (a may be lowered already): the lowering widens where it needs to
    return UOp(Ops.ADD, x.dtype, (UOp(Ops.CDIV, x.dtype, (_wadd(a, k * b.arg), b)), UOp.const(-k, x.dtype)))
  # exact for any signs: truncation rounds toward zero, floor one lower when the remainder is non-zero with the divisor's other sign
  q, r = UOp(Ops.CDIV, x.dtype, (a, b)), UOp(Ops.CMOD, x.dtype, (a, b))
  return UOp(Ops.WHERE, x.dtype, (_fix(r, b), q + (-1), q))

def _floormod(x:UOp, a:UOp, b:UOp) -> UOp|None:
  if dtypes.is_float(x.dtype): return None
  if b.vmin > 0 and a.vmin >= 0: return UOp(Ops.CMOD, x.dtype, (a, b))
  if x.dtype is _WEAKINT and b.op is Ops.CONST and b.arg > 0:
    return UOp(Ops.CMOD, x.dtype, (_wadd(a, -(a.vmin // b.arg) * b.arg), b))
  r = UOp(Ops.CMOD, x.dtype, (a, b))
  return UOp(Ops.WHERE, x.dtype, (_fix(r, b), r + b, r))

def _wadd(a:UOp, c:int) -> UOp: return UOp(Ops.ADD, _WEAKINT, (a, UOp.const(c, _WEAKINT)))

def _fix(r:UOp, b:UOp) -> UOp:
  """The remainder is non-zero and its sign differs from the divisor's."""
  zero = UOp.const(0, r.dtype)
  return UOp(Ops.AND, dtypes.bool, (r.ne(zero), UOp(Ops.CMPNE, dtypes.bool, (r < zero, b < zero))))

def _shift_div(x:UOp, a:UOp, b:UOp) -> UOp|None:
  if dtypes.is_float(x.dtype) or a.vmin < 0 or (k := _pow2(b)) is None: return None
  return a if k == 0 else UOp(Ops.SHR, x.dtype, (a, UOp.const(k, b.dtype)))

def _mask_mod(x:UOp, a:UOp, b:UOp) -> UOp|None:
  if dtypes.is_float(x.dtype) or a.vmin < 0 or _pow2(b) is None: return None
  return UOp(Ops.AND, x.dtype, (a, UOp.const(b.arg - 1, b.dtype)))

pm_floor_divmod = PatternMatcher([
  (UPat(Ops.FLOORDIV, src=(UPat.var("a"), UPat.var("b")), name="x"), _floordiv),
  (UPat(Ops.FLOORMOD, src=(UPat.var("a"), UPat.var("b")), name="x"), _floormod),
  (UPat(Ops.CDIV, src=(UPat.var("a"), UPat(Ops.CONST, name="b")), name="x"), _shift_div),
  (UPat(Ops.CMOD, src=(UPat.var("a"), UPat(Ops.CONST, name="b")), name="x"), _mask_mod),
])

pm_index_dtype = PatternMatcher([
  (UPat(GroupOp.All, dtype=dtypes.weakint, name="u"), _lower_weak),
  (UPat(GroupOp.All, name="u"), _commit_operands),
])

pm_lower_index = pm_floor_divmod + pm_index_dtype
