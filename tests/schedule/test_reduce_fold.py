# schedule/reduce_fold.py on hand-built kernel values: sums over REDUCE ranges that only count or select become closed forms, checked
# against the loop they replace by evaluating both at every value of the outer index.
import pytest
from tinygrad import dtypes
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.schedule.reduce_fold import fold_reduces

def _rng(n:int, axis:int, kind=AxisType.REDUCE) -> UOp: return UOp.range(n, axis, kind)
def _cast(x:UOp, dt) -> UOp: return UOp(Ops.CAST, dt, (x,), dt)
def _not(x:UOp) -> UOp: return UOp(Ops.CMPNE, dtypes.bool, (x, UOp.const(True)))

def _value(u:UOp, env:dict[UOp, int]) -> int:
  """u evaluated with the ranges in env set (a REDUCE ADD loops over its ranges), by plain Python."""
  if u in env: return env[u]
  if u.op is Ops.CONST: return u.arg
  if u.op is Ops.REDUCE:
    rngs, total = u.src[1:], 0
    def go(i:int, e:dict) -> None:
      nonlocal total
      if i == len(rngs):
        total += _value(u.src[0], e)
        return
      for v in range(rngs[i].src[0].arg): go(i + 1, {**e, rngs[i]: v})
    go(0, env)
    return total
  s = [_value(x, env) for x in u.src]
  ops = {Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
         Ops.AND: lambda a, b: a and b, Ops.MAX: max, Ops.FLOORDIV: lambda a, b: a // b, Ops.FLOORMOD: lambda a, b: a % b,
         Ops.XOR: lambda a, b: a ^ b, Ops.OR: lambda a, b: a or b, Ops.WHERE: lambda c, a, b: a if c else b, Ops.CAST: lambda a: int(a)}
  return ops[u.op](*s)

def _check(red:UOp, outer:UOp, folds:bool=True) -> None:
  got = fold_reduces(red)
  assert (Ops.REDUCE not in {x.op for x in got.toposort()}) is folds, got
  for i in range(outer.src[0].arg): assert _value(got, {outer: i}) == _value(red, {outer: i}), i

I = _rng(12, 0, AxisType.LOOP)

@pytest.mark.parametrize("cond", [
  lambda r: r < I,                                  # arange's mask
  lambda r: _not(r < I),                            # r >= i
  lambda r: (I + -3 < r) & (r < I + 4),             # a window, clipped at both ends
  lambda r: _not(I < r + 2),                        # i - 2 >= r
  lambda r: _cast(r, dtypes.int32) < _cast(I, dtypes.int32) + 1,   # compared as int32 values
], ids=["lt", "ge", "window", "le_shifted", "int32"])
def test_count_folds(cond):
  r = _rng(10, 1)
  _check(UOp(Ops.REDUCE, dtypes.int32, (_cast(cond(r), dtypes.int32), r), (Ops.ADD,)), I)
  _check(UOp(Ops.REDUCE, dtypes.int32, (cond(r).where(UOp.const(3, dtypes.int32), UOp.const(0, dtypes.int32)), r), (Ops.ADD,)), I)

def test_count_over_an_unrolled_reduce():
  # rangeify splits a reduce of 4k elements into k iterations of an UNROLL range of 4: k = r*4 + u
  r, u = _rng(3, 1), _rng(4, 2, AxisType.UNROLL)
  _check(UOp(Ops.REDUCE, dtypes.int32, (_cast(r * 4 + u < I, dtypes.int32), r, u), (Ops.ADD,)), I)

def test_select_folds():
  r = _rng(10, 1)
  e = I + -1   # position i-1: out of range for i = 0 and i = 11
  v = _cast(r * 7, dtypes.int32)
  red = UOp(Ops.REDUCE, dtypes.int32, (_not(UOp(Ops.CMPNE, dtypes.bool, (r, e))).where(v, UOp.const(0, dtypes.int32)), r), (Ops.ADD,))
  _check(red, I)

@pytest.mark.parametrize("cond", [lambda r: r * 2 < I, lambda r: r * r < I, lambda r: r < I + r * 0 + r], ids=["stride2", "square", "2r"])
def test_other_sums_keep_their_loop(cond):
  r = _rng(10, 1)
  _check(UOp(Ops.REDUCE, dtypes.int32, (_cast(cond(r), dtypes.int32), r), (Ops.ADD,)), I, folds=False)

def test_scaled_select_folds():
  # sum_k c * where(k == e, v, 0), c free of k (a gradient's sign and scale), is c times the select's closed form
  r = _rng(10, 1)
  sel = _not(UOp(Ops.CMPNE, dtypes.bool, (r, I + -1))).where(_cast(r * 7, dtypes.int32), UOp.const(0, dtypes.int32))
  for c in (UOp.const(-3, dtypes.int32), _cast(I, dtypes.int32) + 2):
    _check(UOp(Ops.REDUCE, dtypes.int32, (c * sel, r), (Ops.ADD,)), I)
    _check(UOp(Ops.REDUCE, dtypes.int32, (sel * c, r), (Ops.ADD,)), I)

def test_scaled_sum_that_does_not_fold_keeps_its_loop():
  r = _rng(10, 1)
  sel = _not(UOp(Ops.CMPNE, dtypes.bool, (r, I))).where(UOp.const(1, dtypes.int32), UOp.const(0, dtypes.int32))
  _check(UOp(Ops.REDUCE, dtypes.int32, (_cast(r, dtypes.int32) * sel, r), (Ops.ADD,)), I, folds=False)   # the factor depends on k
  _check(UOp(Ops.REDUCE, dtypes.int32, (UOp.const(2, dtypes.int32) * _cast(r * r < I, dtypes.int32), r), (Ops.ADD,)), I, folds=False)

def test_select_of_a_negated_sum_folds():
  # an arange counted down and negated, as an embedding's one-hot compare reaches the kernel: (r*-4 + u*-1)*-1 == e is k == e
  r, u = _rng(3, 1), _rng(4, 2, AxisType.UNROLL)
  k = (r * -4 + u * -1) * -1
  sel = _not(UOp(Ops.CMPNE, dtypes.bool, (k, I + -1))).where(_cast(r * 7 + u, dtypes.int32), UOp.const(0, dtypes.int32))
  _check(UOp(Ops.REDUCE, dtypes.int32, (sel, r, u), (Ops.ADD,)), I)
