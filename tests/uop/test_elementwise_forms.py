# The spellings of the NaN-aware ops (no device): float >= and <= are (b < a) | (a == b), int ones logical_not(a < b); relu is
# (x < 0).where(0, x); constant folding of MAX, CMPNE and CMPEQ follows IEEE for NaN.
import math
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, exec_alu

def _ops(u:UOp) -> list[Ops]: return [x.op for x in u.toposort()]
def _is_true(u:UOp) -> bool:
  while u.op in (Ops.EXPAND, Ops.RESHAPE): u = u.src[0]
  return u.op is Ops.CONST and u.arg is True

def test_float_ge_is_or_of_lt_and_eq():
  a, b = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
  for u, (lhs, rhs) in (((a >= b).uop, (a, b)), ((b <= a).uop, (a, b))):
    assert u.op is Ops.OR and u.dtype is dtypes.bool
    lt, eq = u.src
    assert lt.op is Ops.CMPLT and lt.src[0] is rhs.uop and lt.src[1] is lhs.uop
    assert eq.op is Ops.CMPNE and eq.src[0].op is Ops.CMPNE and _is_true(eq.src[1])
    assert Ops.CMPEQ not in _ops(u)

def test_int_ge_keeps_negated_lt():
  a, b = Tensor([1, 2]), Tensor([3, 4])
  u = (a >= b).uop
  assert u.op is Ops.CMPNE and u.src[0].op is Ops.CMPLT and _is_true(u.src[1])
  assert Ops.OR not in _ops(u)

def test_uop_ge_follows_the_dtype():
  x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)
  assert (x >= y).op is Ops.CMPNE
  f = UOp.const(1.5, dtypes.float32)
  assert (f >= UOp.const(2.5, dtypes.float32)).op is Ops.OR

def test_relu_spelling():
  # x where 0 < x, else (x where x is NaN, else 0): NaN propagates, and x = 0 takes the constant (its gradient is 0, as in torch)
  x = Tensor([1.0, -1.0, 0.0])
  u = x.relu().uop
  assert u.op is Ops.WHERE and u.src[0].op is Ops.CMPLT and u.src[0].src[1] is x.uop and u.src[1] is x.uop
  inner = u.src[2]
  assert inner.op is Ops.WHERE and inner.src[0].op is Ops.CMPNE and inner.src[0].src == (x.uop, x.uop) and inner.src[1] is x.uop

def test_ieee_folding():
  nan = float("nan")
  assert math.isnan(exec_alu(Ops.MAX, dtypes.float32, [1.0, nan])) and math.isnan(exec_alu(Ops.MAX, dtypes.float32, [nan, 1.0]))
  assert exec_alu(Ops.MAX, dtypes.int32, [3, 7]) == 7 and exec_alu(Ops.MAX, dtypes.float32, [-0.5, -1.5]) == -0.5
  c = UOp.const(nan, dtypes.float32)
  assert exec_alu(Ops.CMPNE, dtypes.bool, [c.arg, c.arg]) is True and exec_alu(Ops.CMPEQ, dtypes.bool, [c.arg, c.arg]) is False
  assert exec_alu(Ops.CMPNE, dtypes.bool, [2, 2]) is False
