"""Fused multiply-add without math.fma (tinygrad/dtype.py: fma32, fma64, fma): a*b+c rounded once, as C's fmaf/fma compute it, checked
against an exact rational oracle (including constructed halfway cases, where rounding the float64 sum again would be wrong) and, where a
Python 3.13 is installed, against its math.fma. Also the codegen pass that makes MULACC (a dot tile's accumulator updates) and the
constant folding of MULACC."""
import ctypes
import glob
import json
import math
import struct
import subprocess
from fractions import Fraction
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad.dtype import dtypes, fma, fma32, fma64, AddrSpace
from tinygrad.uop.ops import UOp, Ops, exec_alu, graph_rewrite, ParamArg
from tinygrad.codegen import pm_fuse_mulacc, FuseContext
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.renderer.python import PythonRenderer
from tinygrad.renderer.cuda import CUDARenderer

F32_MAX = Fraction(struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0])

def f32(x:float) -> float: return ctypes.c_float(x).value   # a C float conversion (struct.pack raises where it overflows)

def round_f32(x:Fraction) -> float:
  """x correctly rounded (to nearest, ties to even) to float32, exactly: the oracle."""
  if x == 0: return 0.0
  e = max(math.floor(math.log2(abs(x))) - 23, -149)   # the ulp's exponent at x (subnormals: 2**-149)
  while abs(x) >= Fraction(2) ** (e + 24): e += 1     # log2 of a Fraction can be off by one near a power of two
  while e > -149 and abs(x) < Fraction(2) ** (e + 23): e -= 1
  r = round(x / Fraction(2) ** e) * Fraction(2) ** e   # round() of a Fraction: half to even
  if abs(r) > F32_MAX: return math.inf if x > 0 else -math.inf
  return float(r) if r != 0 else -0.0 if x < 0 else 0.0   # an underflow to zero keeps the sign

def oracle(a:float, b:float, c:float, rnd) -> float:
  exact = Fraction(a) * Fraction(b) + Fraction(c)
  if exact == 0: return a * b + c if c == 0 else 0.0   # IEEE: an exact zero sum is +0 unless both terms are -0
  return rnd(exact)

def round_f64(x:Fraction) -> float:
  try: return float(x)
  except OverflowError: return math.inf if x > 0 else -math.inf

def same(x:float, y:float) -> bool: return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))

floats32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
floats64 = st.floats(allow_nan=False, allow_infinity=False)

@settings(max_examples=2000, deadline=None)
@given(floats32, floats32, floats32)
def test_fma32_matches_oracle(a, b, c):
  assert same(fma32(a, b, c), oracle(a, b, c, round_f32))

@settings(max_examples=1000, deadline=None)
@given(floats64, floats64, floats64)
def test_fma64_matches_oracle(a, b, c):
  assert same(fma64(a, b, c), oracle(a, b, c, round_f64))

def halfway_case(mant:int, i:int, scale:int, below:bool) -> tuple[float, float, float]:
  """c a float32 in [1, 2)*2**scale, a*b = half an ulp of c minus i*i*2**-70 (relative; under float64's half ulp for i < 2**7.5),
  exactly: c + a*b (or c - a*b) is a float32
  halfway point plus or minus a tiny amount that float64 rounding loses."""
  c = (1 + mant * 2.0 ** -23) * 2.0 ** scale
  a, b = 1 + i * 2.0 ** -23, (1 - i * 2.0 ** -23) * 2.0 ** (scale - 24)
  return (a if below else -a), b, c

@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2 ** 23 - 1), st.integers(1, 181), st.integers(-100, 100), st.booleans(), st.booleans())
def test_fma32_halfway(mant, i, scale, below, neg):
  a, b, c = halfway_case(mant, i, scale, below)
  if neg: a, c = -a, -c
  assert all(f32(x) == x for x in (a, b, c))
  want = oracle(a, b, c, round_f32)
  assert fma32(a, b, c) == want
  # the tie is real: with c's mantissa odd, rounding the float64 sum (the tie itself) to even leaves c, the right answer
  if mant % 2: assert f32(a * b + c) != want == c

def test_fma32_halfway_known():
  # 1+2**-23 plus (just under) half its ulp: rounding the float64 sum ties to the even 1+2**-22; the exact sum is below the tie
  a, b, c = halfway_case(1, 1, 0, True)
  assert f32(a * b + c) == 1 + 2 ** -22 and fma32(a, b, c) == 1 + 2 ** -23
  # and just over the tie below it
  assert fma32(-a, b, c) == 1 + 2 ** -23 and f32(-a * b + c) == 1.0

@pytest.mark.parametrize("fn", [fma32, fma64])
def test_fma_non_finite(fn):
  inf, nan = math.inf, math.nan
  assert math.isnan(fn(inf, 0.0, 1.0)) and math.isnan(fn(inf, 1.0, -inf)) and math.isnan(fn(1.0, 2.0, nan)) and math.isnan(fn(nan, 0.0, 0.0))
  assert fn(inf, 2.0, 1.0) == inf and fn(-inf, 2.0, 1.0) == -inf and fn(1.0, 2.0, -inf) == -inf
  assert same(fn(-0.0, 1.0, -0.0), -0.0) and same(fn(0.0, 1.0, -0.0), 0.0) and same(fn(1.0, 1.0, -1.0), 0.0)

def test_fma_overflow():
  big = f32(3e38)
  assert fma32(big, 2.0, 0.0) == math.inf and fma32(big, 2.0, -big) == big   # the product overflows float32, the fused sum doesn't
  # the sum at float32's overflow tie (max + half an ulp: rounds to inf) but the exact sum just below it: the max
  fmax, half_ulp = float.fromhex("0x1.fffffep127"), 2.0 ** 103
  a, b, _ = halfway_case(1, 1, 127, True)   # a*b = half_ulp minus a tiny amount
  assert fma32(a, b, fmax) == fmax == oracle(a, b, fmax, round_f32) and f32(a * b + fmax) == math.inf and a * b < half_ulp
  assert fma32(-a, -b, -fmax) == -fmax and fma32(1.0, half_ulp, fmax) == math.inf
  assert fma64(1e308, 10.0, -1.7e308) == math.inf and fma64(-1e308, 10.0, 1.7e308) == -math.inf
  assert fma64(1e308, 10.0, -math.inf) == -math.inf

PY313 = sorted(glob.glob("/root/.pyenv/versions/3.13*/bin/python") + glob.glob("/usr/bin/python3.1[3-9]"))

@pytest.mark.skipif(not PY313, reason="no Python >= 3.13 (math.fma) installed")
def test_fma_against_math_fma():
  rng = __import__("random").Random(0)
  cases = [(f32(rng.uniform(-4, 4)), f32(rng.uniform(-4, 4)), f32(rng.uniform(-4, 4))) for _ in range(3000)]
  cases += [(rng.uniform(-1e3, 1e3), rng.uniform(-1e3, 1e3), rng.uniform(-1e3, 1e3)) for _ in range(3000)]
  cases += [halfway_case(m, i, s, bl) for m, i, s, bl in [(1, 1, 0, True), (3, 7, 5, False), (2 ** 23 - 1, 2, -30, True)]]
  out = subprocess.run([PY313[-1], "-c", "import math, json, sys; print(json.dumps([math.fma(*t) for t in json.load(sys.stdin)]))"],
                       input=json.dumps(cases).encode(), capture_output=True, check=True)
  for (a, b, c), want in zip(cases, json.loads(out.stdout)):
    assert fma64(a, b, c) == want
    # float32: math.fma's float64 result, rounded again, is the fused float32 result except at ties (the oracle decides those)
    if all(f32(x) == x for x in (a, b, c)): assert fma32(a, b, c) == oracle(a, b, c, round_f32)

def test_exec_alu_folds_fused():
  a, b, c = halfway_case(1, 1, 0, True)
  assert exec_alu(Ops.MULACC, dtypes.float32, [a, b, c]) == fma32(a, b, c) != f32(a * b + c)
  assert exec_alu(Ops.MULACC, dtypes.float64, [0.1, 10.0, -1.0]) == fma64(0.1, 10.0, -1.0) == 2 ** -54
  # half is computed as written (the emulated dtypes round after every op), then rounded to half
  assert exec_alu(Ops.MULACC, dtypes.half, [1.5, 2.0, 0.25]) == 3.25 and fma(3, 4, 5, dtypes.int32) == 17

I = lambda v: UOp.const(v, dtypes.int)

def _fused(dt, ren, a="vector", b="vector", c="acc") -> UOp:
  """acc + a*b as the codegen leaves a tile's accumulator update: operands loaded as vectors (a vector_alu renderer's dot tile), as
  lanes of vector loads (the same tile elsewhere), or as scalars; the addend an accumulator (BUFFER(REG)) or a buffer element."""
  def load(kind:str, slot:int) -> UOp:
    mem = UOp(Ops.BUFFER, dt, (I(16),), ParamArg(slot, dt, addrspace=AddrSpace.REG)) if kind.startswith("acc") else \
          UOp(Ops.PARAM, dt, (I(64),), ParamArg(slot, dt))
    if kind in ("vector", "acc"): return UOp(Ops.LOAD, dt, (UOp(Ops.SHRINK, dt, (mem, I(0), I(4))),))
    if kind.startswith("lane"): return UOp(Ops.INDEX, dt, (UOp(Ops.LOAD, dt, (UOp(Ops.SHRINK, dt, (mem, I(0), I(4))),)), I(int(kind[4:] or 1))))
    return UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, dt, (mem, I(1))),))  # "scalar", "acc scalar"
  x, y, acc = load(a, 1), load(b, 2), load(c, 0)
  return graph_rewrite(UOp(Ops.SINK, dtypes.void, (acc + x * y, x * y + acc)), pm_fuse_mulacc, ctx=FuseContext(ren, False))

@pytest.mark.parametrize("ren", [ClangRenderer(), PythonRenderer()])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("kinds", [("vector", "vector", "acc"), ("lane", "lane", "acc scalar")])
def test_pass_fuses_dot_tile_updates(ren, dt, kinds):
  sink = _fused(dt, ren, *kinds)
  assert [s.op for s in sink.src] == [Ops.MULACC, Ops.MULACC] and sink.src[0] is sink.src[1]
  assert sink.src[0].src[2].op is Ops.LOAD and sink.src[0].src[2].src[0].src[0].op is Ops.BUFFER   # the accumulator is the addend

@pytest.mark.parametrize("ren, dt, kinds", [
  (CUDARenderer(), dtypes.float32, ()), (None, dtypes.float32, ()),               # no fused MULACC
  (ClangRenderer(), dtypes.half, ()), (PythonRenderer(), dtypes.bfloat16, ()),    # emulated: rounded after every op
  (ClangRenderer(), dtypes.int32, ()),
  (ClangRenderer(), dtypes.float32, ("lane", "scalar", "acc scalar")),            # a register tile: a vector times a broadcast
  (PythonRenderer(), dtypes.float32, ("lane", "lane0", "acc scalar")),            # an outer product of two vectors' lanes
  (PythonRenderer(), dtypes.float32, ("lane", "lane", "vector")),                 # not an accumulator
  (PythonRenderer(), dtypes.float32, ("vector", "vector", "vector")),             # elementwise a*b+c
])
def test_pass_leaves(ren, dt, kinds):
  assert all(s.op is Ops.ADD for s in _fused(dt, ren, *kinds).src)
