# One ALU evaluator: constant folding (uop/symbolic.py's pm_fold_values, the codegen's), the PYTHON device and the CPU device compute
# the same value for every ALU op and dtype, edge values included (NaN, +-inf, +-0, denormals, int extremes): bitwise for ints and
# bools, NaN-aware for floats. The transcendentals EXP2/LOG2/SIN/POW may differ by one unit in the last place in float32 and narrower
# (the C device runs its own float32 approximations, e.g. tg_exp2f), and must agree exactly at their special values. What C leaves
# undefined is not asked: an int division by zero (or of the minimum by -1) and a shift by the width or more.
import functools
import itertools
import math
import struct
import sys
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tests.helpers.linear_kernels import Linear
from tinygrad.device import Device, Buffer
from tinygrad.dtype import DType, dtypes, truncate, storage_fmt_for_dtype, to_storage_scalar, from_storage_scalar
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, graph_rewrite
from tinygrad.uop.symbolic import pm_fold_values

pytestmark = pytest.mark.cpu

N = 64   # values per kernel launch
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
INTS = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64]
NUMBERS = FLOATS + INTS
ALL = NUMBERS + [dtypes.bool]
UNARY = (Ops.NEG, Ops.RECIPROCAL, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.TRUNC)
TRANSCENDENTAL = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW)
COMPARISONS = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
OPS: dict[Ops, list[DType]] = {
  Ops.NEG: NUMBERS, Ops.RECIPROCAL: FLOATS, Ops.SQRT: FLOATS, Ops.EXP2: FLOATS, Ops.LOG2: FLOATS, Ops.SIN: FLOATS, Ops.TRUNC: FLOATS,
  Ops.ADD: ALL, Ops.SUB: NUMBERS, Ops.MUL: ALL, Ops.FDIV: FLOATS, Ops.CDIV: INTS, Ops.CMOD: NUMBERS, Ops.MAX: ALL, Ops.POW: FLOATS,
  Ops.AND: INTS + [dtypes.bool], Ops.OR: INTS + [dtypes.bool], Ops.XOR: INTS + [dtypes.bool], Ops.SHL: INTS, Ops.SHR: INTS,
  Ops.CMPLT: ALL, Ops.CMPNE: ALL, Ops.CMPEQ: ALL, Ops.WHERE: ALL, Ops.MULACC: NUMBERS}
CASES = [pytest.param(op, dt, id=f"{op.name}-{dt.name.replace(' ', '_')}") for op, dts in OPS.items() for dt in dts]

def result_dtype(op:Ops, dt:DType) -> DType: return dtypes.bool if op in COMPARISONS else dt
def operand_dtypes(op:Ops, dt:DType) -> tuple[DType, ...]:
  if op is Ops.WHERE: return (dtypes.bool, dt, dt)
  return (dt,) * (1 if op in UNARY else 3 if op is Ops.MULACC else 2)

_FLOAT_LIMITS = {dtypes.float16: (65504.0, 2.0**-14, 2.0**-24), dtypes.bfloat16: (float.fromhex("0x1.fep127"), 2.0**-126, 2.0**-133),
                 dtypes.float32: (float.fromhex("0x1.fffffep127"), 2.0**-126, 2.0**-149),
                 dtypes.float64: (sys.float_info.max, sys.float_info.min, 5e-324)}

def edges(dt:DType) -> list:
  if dt is dtypes.bool: return [False, True]
  if dtypes.is_float(dt):
    big, tiny, denorm = _FLOAT_LIMITS[dt]
    vs = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.0, 3.0, 10.0, 400.0, -400.0, math.pi, 1e-3, 0.3,
          big, -big, tiny, denorm, -denorm, 3 * denorm]
    return [truncate[dt](v) for v in vs]
  lo, hi = dt.min, dt.max
  return sorted({lo, lo + 1, hi - 1, hi, 0, 1, 2, 3, 5, 7, dt.bitsize - 1, dt.bitsize} | ({-1, -2, -7} if lo < 0 else set()))

def defined(op:Ops, dt:DType, vals:tuple) -> bool:
  """Whether C defines op on these operands (the project's ints wrap: -fwrapv)."""
  if op in (Ops.CDIV, Ops.CMOD) and dtypes.is_int(dt): return vals[1] != 0 and not (vals[0] == dt.min and vals[1] == -1)
  if op in (Ops.SHL, Ops.SHR): return 0 <= vals[1] < dt.bitsize
  return True

@functools.cache
def program(device:str, op:Ops, dt:DType):
  """A kernel computing out[i] = op(a[i], b[i], ...) for N elements, rendered and compiled for the device."""
  k, rdt = Linear(), result_dtype(op, dt)
  out = k.param(0, rdt, N)
  ins = [k.param(i + 1, d, N) for i, d in enumerate(operand_dtypes(op, dt))]
  r = k.range(N, 0)
  body = k.store(out, r, k.add(UOp(op, rdt, tuple(k.load(b, r) for b in ins))))
  return Device[device].renderer.to_program(k.sink(f"alu_{op.name.lower()}", k.end(body, r)))

def _pack(vals:list, dt:DType) -> bytes: return struct.pack(f"<{len(vals)}{storage_fmt_for_dtype(dt)}", *[to_storage_scalar(v, dt) for v in vals])
def _unpack(raw:bytes, dt:DType) -> list:
  return [from_storage_scalar(x, dt) for x in struct.unpack(f"<{len(raw) // dt.itemsize}{storage_fmt_for_dtype(dt)}", raw)]

def on_device(device:str, op:Ops, dt:DType, rows:list[tuple]) -> list:
  spec, rdt = program(device, op, dt), result_dtype(op, dt)
  rows = rows + [rows[0]] * (N - len(rows))
  bufs = [Buffer(device, N, rdt).ensure_allocated()]
  bufs += [Buffer(device, N, d).copyin(_pack(list(col), d)) for col, d in zip(zip(*rows), operand_dtypes(op, dt))]
  Device[device].run(spec, bufs, {})
  return _unpack(bytes(bufs[0].as_buffer()), rdt)

def folded(op:Ops, dt:DType, row:tuple):
  u = UOp(op, result_dtype(op, dt), tuple(UOp.const(v, d) for v, d in zip(row, operand_dtypes(op, dt))))
  ret = graph_rewrite(u, pm_fold_values)
  assert ret.op is Ops.CONST, f"{op}({row}) in {dt} was not folded: {ret.op}"
  return ret.arg

def _ordered(v:float, dt:DType) -> int:
  """v's position among dt's values (sign-magnitude bits mapped onto the integers: -0 and +0 are neighbours)."""
  bits = int.from_bytes(_pack([v], dt), "little")
  sign = 1 << (dt.bitsize - 1)
  return -(bits & (sign - 1)) - 1 if bits & sign else bits

def agree(op:Ops, dt:DType, x, y) -> bool:
  rdt = result_dtype(op, dt)
  if rdt is dtypes.bool: return bool(x) == bool(y)
  if dtypes.is_int(rdt): return int(x) == int(y)
  x, y = float(x), float(y)
  if math.isnan(x) or math.isnan(y): return math.isnan(x) and math.isnan(y)
  if op in TRANSCENDENTAL and dt is not dtypes.float64 and math.isfinite(x) and math.isfinite(y) and x != 0 and y != 0:
    return abs(_ordered(x, dt) - _ordered(y, dt)) <= 1
  return _ordered(x, dt) == _ordered(y, dt)

def check(op:Ops, dt:DType, rows:list[tuple]) -> None:
  rows = [r for r in rows if defined(op, dt, r)]
  for i in range(0, len(rows), N):
    chunk = rows[i:i + N]
    py, cpu = on_device("PYTHON", op, dt, chunk), on_device("CPU", op, dt, chunk)
    for row, p, c in zip(chunk, py, cpu):
      f = folded(op, dt, row)
      assert agree(op, dt, f, c) and agree(op, dt, p, c), f"{op.name}{row} in {dt}: folded {f!r}, PYTHON {p!r}, CPU {c!r}"

@pytest.mark.parametrize("op, dt", CASES)
def test_edge_values_agree(op:Ops, dt:DType):
  """Every combination of edge operands (a sample of them for the ternary ops)."""
  rows = list(itertools.product(*[edges(d) for d in operand_dtypes(op, dt)]))
  check(op, dt, rows if len(rows) <= 2048 else rows[::len(rows) // 2048 + 1])

def values(dt:DType) -> st.SearchStrategy:
  if dt is dtypes.bool: return st.booleans()
  if dtypes.is_int(dt): return st.one_of(st.sampled_from(edges(dt)), st.integers(dt.min, dt.max))
  width = 64 if dt is dtypes.float64 else 32 if dt in (dtypes.float32, dtypes.bfloat16) else 16
  return st.one_of(st.sampled_from(edges(dt)), st.floats(width=width).map(truncate[dt]))

@pytest.mark.parametrize("op, dt", CASES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_values_agree(op:Ops, dt:DType, data):
  rows = data.draw(st.lists(st.tuples(*[values(d) for d in operand_dtypes(op, dt)]), min_size=1, max_size=N))
  check(op, dt, rows)
