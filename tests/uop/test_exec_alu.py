# The ALU evaluator (uop/alu.py's exec_alu, which constant folding and the PYTHON device share) at the special values C99's Annex F
# defines: the values the C device computes (tests/uop/test_alu_agreement.py compares all three).
import math
import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import exec_alu

def _same(got, want) -> bool:
  return (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1.0, got) == math.copysign(1.0, want))

@pytest.mark.parametrize("op, args, want", [
  (Ops.POW, (10.0, 400.0), math.inf), (Ops.POW, (-10.0, 401.0), -math.inf), (Ops.POW, (-10.0, 400.0), math.inf),
  (Ops.POW, (0.0, -1.0), math.inf), (Ops.POW, (-0.0, -1.0), -math.inf), (Ops.POW, (-0.0, -2.0), math.inf), (Ops.POW, (-0.0, -0.5), math.inf),
  (Ops.POW, (math.nan, 0.0), 1.0), (Ops.POW, (1.0, math.nan), 1.0), (Ops.POW, (-8.0, 1 / 3), math.nan), (Ops.POW, (-1.0, math.inf), 1.0),
  (Ops.POW, (0.5, -math.inf), math.inf), (Ops.POW, (-math.inf, -3.0), -0.0), (Ops.POW, (2.0, -2000.0), 0.0),
  (Ops.TRUNC, (-0.5,), -0.0), (Ops.TRUNC, (-0.0,), -0.0), (Ops.TRUNC, (2.5,), 2.0), (Ops.TRUNC, (-math.inf,), -math.inf),
  (Ops.CMOD, (-1.0, 1.0), -0.0), (Ops.CMOD, (1.0, 0.0), math.nan), (Ops.CMOD, (math.inf, 2.0), math.nan), (Ops.CMOD, (3.0, math.inf), 3.0),
  (Ops.CMOD, (-7.5, 2.0), -1.5), (Ops.SQRT, (-0.0,), -0.0), (Ops.RECIPROCAL, (-0.0,), -math.inf), (Ops.EXP2, (2000.0,), math.inf),
])
def test_float_special_values(op, args, want):
  got = exec_alu(op, dtypes.float64, list(args))
  assert _same(got, want), f"{op.name}{args}: {got!r}, C gives {want!r}"

def test_half_mulacc_rounds_the_product_first():
  # the devices compute a half MULACC as round(a*b) + c, rounded: 1.5 * 65504 overflows half before -65504 is added
  assert exec_alu(Ops.MULACC, dtypes.half, [1.5, 65504.0, -65504.0]) == math.inf

def test_int_ops_wrap_and_truncate_toward_zero():
  assert exec_alu(Ops.ADD, dtypes.int8, [127, 1]) == -128 and exec_alu(Ops.CDIV, dtypes.int32, [-7, 2]) == -3
  assert exec_alu(Ops.CMOD, dtypes.int32, [-7, 2]) == -1 and exec_alu(Ops.SHR, dtypes.int8, [-128, 7]) == -1
