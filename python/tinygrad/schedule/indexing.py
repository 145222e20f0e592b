"""Int index arithmetic for kernels, with the folding that keeps generated indices readable.

Movement ops become index expressions over the kernel's RANGEs. These helpers fold constants and use value bounds to drop a
`// n` or `% n` that cannot change the value (so a reshape that only merges or splits dims costs nothing). Everything is
dtypes.weakint (IDX) and only built from ops the renderers support (ADD MUL CDIV CMOD CMPLT AND). Inside the valid region of every PAD an
index is >= 0, so folding with floor semantics is exact there; outside it the value is unused (the load is gated).
"""
from __future__ import annotations
import functools
from tinygrad.uop.ops import UOp, Ops
from tinygrad.dtype import dtypes

# a mathematical integer: codegen/index_dtype.py gives each index UOp int32, or int64 where its bounds need it
IDX = dtypes.weakint

def iconst(v:int) -> UOp: return UOp.const(v, IDX)
def cval(u:UOp) -> int|None: return u.arg if u.op is Ops.CONST else None

@functools.lru_cache(maxsize=1 << 16)
def bounds(u:UOp) -> tuple[int, int]:
  """Inclusive [min, max] of an index expression."""
  if u.op is Ops.CONST: return (u.arg, u.arg)
  if u.op is Ops.RANGE: return (0, max(u.src[0].arg - 1, 0))
  if u.op in (Ops.ADD, Ops.MUL, Ops.CDIV, Ops.CMOD):
    (a0, a1), (b0, b1) = bounds(u.src[0]), bounds(u.src[1])
    if u.op is Ops.ADD: return (a0 + b0, a1 + b1)
    if u.op is Ops.MUL:
      c = (a0*b0, a0*b1, a1*b0, a1*b1)
      return (min(c), max(c))
    # C semantics (truncation toward zero). Indices are only negative where a PAD made them invalid (those loads are gated)
    if u.op is Ops.CDIV and b0 == b1 and b0 > 0: return (int(a0 / b0), int(a1 / b0))
    if u.op is Ops.CMOD and b0 == b1 and b0 > 0: return (0 if a0 >= 0 else -min(-a0, b0 - 1), min(a1, b0 - 1) if a1 >= 0 else 0)
  raise ValueError(f"no bounds for index op {u.op}")

def _terms(u:UOp) -> list[tuple[UOp|None, int]]:
  """u as a sum of (expression, coefficient); expression None is the constant term."""
  if u.op is Ops.CONST: return [(None, u.arg)]
  if u.op is Ops.ADD: return _terms(u.src[0]) + _terms(u.src[1])
  if u.op is Ops.MUL and (c := cval(u.src[1])) is not None: return [(x, k*c) for x, k in _terms(u.src[0])]
  return [(u, 1)]

def _divmod_parts(u:UOp) -> tuple[UOp, int, int]|None:
  """u = (x // q) % r  ->  (x, q, r); x % r gives q = 1."""
  if u.op is not Ops.CMOD or (r := cval(u.src[1])) is None: return None
  y = u.src[0]
  if y.op is Ops.CDIV and (q := cval(y.src[1])) is not None: return (y.src[0], q, r)
  return (y, 1, r)

def _recombine(merged:dict[UOp, int]) -> dict[UOp, int]:
  """(x // (q*r)) * (k*r) + ((x // q) % r) * k  ->  (x // q) * k, repeated: undoes the split of a merged loop."""
  changed = True
  while changed:
    changed = False
    for b, kb in list(merged.items()):
      if kb == 0 or (parts := _divmod_parts(b)) is None: continue
      x, q, r = parts
      a = UOp(Ops.CDIV, IDX, (x, iconst(q * r)))
      if merged.get(a, 0) == kb * r:
        del merged[a], merged[b]
        inner = x if q == 1 else UOp(Ops.CDIV, IDX, (x, iconst(q)))
        merged[inner] = merged.get(inner, 0) + kb
        changed = True
        break
  return merged

def _from_terms(terms:list[tuple[UOp|None, int]]) -> UOp:
  const, merged = 0, {}
  for x, k in terms:
    if x is None: const += k
    else: merged[x] = merged.get(x, 0) + k
  merged = _recombine(merged)
  ret: UOp|None = None
  for x, k in merged.items():
    if k == 0: continue
    t = x if k == 1 else UOp(Ops.MUL, IDX, (x, iconst(k)))
    ret = t if ret is None else UOp(Ops.ADD, IDX, (ret, t))
  if ret is None: return iconst(const)
  return ret if const == 0 else UOp(Ops.ADD, IDX, (ret, iconst(const)))

def iadd(*xs:UOp) -> UOp: return _from_terms([t for x in xs for t in _terms(x)])
def imul(a:UOp, c:int) -> UOp: return _from_terms([(x, k*c) for x, k in _terms(a)])

def idiv(a:UOp, n:int) -> UOp:
  """a // n for a >= 0."""
  if n == 1: return a
  lo, hi = bounds(a)
  if lo // n == hi // n: return iconst(lo // n)
  if a.op is Ops.CDIV and (m := cval(a.src[1])) is not None and m > 0: return idiv(a.src[0], m * n)
  terms = _terms(a)
  whole = [(x, k // n) for x, k in terms if k % n == 0]
  rest = [(x, k) for x, k in terms if k % n != 0]
  if all(k >= 0 for _, k in rest):
    r = _from_terms(rest)
    rlo, rhi = bounds(r)
    if 0 <= rlo and rhi < n: return _from_terms(whole)
    if whole and rlo >= 0: return iadd(_from_terms(whole), UOp(Ops.CDIV, IDX, (r, iconst(n))))
  return UOp(Ops.CDIV, IDX, (a, iconst(n)))

def imod(a:UOp, n:int) -> UOp:
  """a % n for a >= 0."""
  if n == 1: return iconst(0)
  lo, hi = bounds(a)
  if 0 <= lo and hi < n: return a
  rest = [(x, k) for x, k in _terms(a) if k % n != 0]
  if all(k >= 0 for _, k in rest):
    r = _from_terms(rest)
    rlo, rhi = bounds(r)
    if 0 <= rlo and rhi < n: return r
    a = r
  return UOp(Ops.CMOD, IDX, (a, iconst(n)))

def ilt(a:UOp, c:int) -> UOp|None:
  """a < c as a bool UOp; None when it always holds."""
  lo, hi = bounds(a)
  if hi < c: return None
  return UOp(Ops.CMPLT, dtypes.bool, (a, iconst(c)))

def ige(a:UOp, c:int) -> UOp|None:
  """a >= c as a bool UOp (c-1 < a); None when it always holds."""
  lo, hi = bounds(a)
  if lo >= c: return None
  return UOp(Ops.CMPLT, dtypes.bool, (iconst(c - 1), a))

def band(a:UOp|None, b:UOp|None) -> UOp|None:
  if a is None: return b
  if b is None: return a
  return UOp(Ops.AND, dtypes.bool, (a, b))
