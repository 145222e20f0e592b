# Every ALU op, cast and bitcast of the contract, per dtype, on CPU and PYTHON against numpy (with C semantics: truncating
# division, wrapping ints), and CPU against PYTHON bit for bit.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.linear_kernels import Linear, run
from tinygrad.dtype import DType, dtypes, float_to_bf16, _to_np_dtype, fma32, fma64
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.ops import UOp

INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64]
FLOAT_DTYPES = [dtypes.half, dtypes.bfloat16, dtypes.float32, dtypes.float64]
INT_OPS = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.CDIV, Ops.CMOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
           Ops.NEG, Ops.WHERE, Ops.MULACC]
# (CDIV is an int op: FDIV divides floats, and the renderers' check rejects a float CDIV: tests/renderer/test_linear_contract.py)
FLOAT_OPS = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.FDIV, Ops.CMOD, Ops.POW, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.NEG, Ops.RECIPROCAL,
             Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.TRUNC, Ops.WHERE, Ops.MULACC]
N = 64

def _npdt(dt:DType): return np.uint16 if dt is dtypes.bfloat16 else _to_np_dtype(dt)

def ops_kernel(ops:list[Ops], dt:DType, n:int=N) -> list[UOp]:
  """out_k[i] = op_k(a[i], b[i]) for each op (s[i] is the shift amount, c[i] MULACC's addend)."""
  k = Linear()
  outs = [k.param(i, dtypes.bool if op in GroupOp.Comparison else dt, n) for i, op in enumerate(ops)]
  a, b, s, cc = (k.param(len(ops) + j, dt, n) for j in range(4))
  r = k.range(n, 0)
  va, vb, vs, vc = k.load(a, r), k.load(b, r), k.load(s, r), k.load(cc, r)
  stores = []
  for out, op in zip(outs, ops):
    if op in GroupOp.Unary: v = UOp(op, dt, (va,))
    elif op is Ops.WHERE: v = UOp(op, dt, (k.add(va < vb), va, vb))
    elif op is Ops.MULACC: v = UOp(op, dt, (va, vb, vc))
    elif op in (Ops.SHL, Ops.SHR): v = UOp(op, dt, (va, vs))
    else: v = UOp(op, dtypes.bool if op in GroupOp.Comparison else dt, (va, vb))
    stores.append(k.store(out, r, k.add(v)))
  return k.sink(f"ops_{dt.name.replace(' ', '_')}", k.end(k.add(UOp(Ops.GROUP, dtypes.void, tuple(stores))), r))

def int_inputs(dt:DType, seed:int) -> list[np.ndarray]:
  rng, npdt = np.random.default_rng(seed), _to_np_dtype(dt)
  lo, hi = int(dt.min) + 1, int(dt.max)  # no INT_MIN: its abs and INT_MIN/-1 are undefined in C
  a = rng.integers(lo, hi, N, dtype=npdt, endpoint=True)
  b = rng.integers(lo, hi, N, dtype=npdt, endpoint=True)
  b[b == 0] = 1
  b[:8] = np.array([1, 2, 3, 7, 1, 2, 5, 9], dtype=npdt) * (1 if dtypes.is_unsigned(dt) else np.array([1, -1, 1, -1, -1, 1, 1, -1]).astype(npdt))
  s = rng.integers(0, dt.bitsize - 1, N, dtype=npdt, endpoint=True)
  return [a, b, s, rng.integers(lo, hi, N, dtype=npdt, endpoint=True)]

def np_int_op(op:Ops, a, b, s, c):
  with np.errstate(over="ignore"):
    if op is Ops.CDIV:
      q = np.abs(a.astype(object)) // np.abs(b.astype(object))
      return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return {Ops.ADD: lambda: a + b, Ops.SUB: lambda: a - b, Ops.MUL: lambda: a * b, Ops.MAX: lambda: np.where(a < b, b, a),
            Ops.CMOD: lambda: np.fmod(a, b), Ops.AND: lambda: a & b, Ops.OR: lambda: a | b, Ops.XOR: lambda: a ^ b,
            Ops.SHL: lambda: a << s, Ops.SHR: lambda: a >> s, Ops.CMPLT: lambda: a < b, Ops.CMPNE: lambda: a != b, Ops.CMPEQ: lambda: a == b,
            Ops.NEG: lambda: (np.zeros_like(a) - a), Ops.WHERE: lambda: np.where(a < b, a, b), Ops.MULACC: lambda: a * b + c}[op]()

@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_int_ops(device, dt):
  ins = int_inputs(dt, 3)
  outs = run(device, ops_kernel(INT_OPS, dt), ins, [dtypes.bool if op in GroupOp.Comparison else dt for op in INT_OPS])
  for op, got in zip(INT_OPS, outs): np.testing.assert_array_equal(got, np_int_op(op, *ins), err_msg=f"{op} {dt}")

def float_inputs(dt:DType, seed:int) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  a = (rng.standard_normal(N) * 3).astype(np.float32)
  a[:4] = [0.5, 2.0, -0.0, 1.0]
  b = (rng.standard_normal(N) * 3).astype(np.float32)
  b[np.abs(b) < 0.1] = 0.25
  vals = [a, b, np.zeros(N, np.float32), (rng.standard_normal(N)).astype(np.float32)]
  if dt is dtypes.bfloat16: return [(bf16(v).view(np.uint32) >> 16).astype(np.uint16) for v in vals]
  return [v.astype(_npdt(dt)) for v in vals]

def bf16(x:np.ndarray) -> np.ndarray: return np.array([float_to_bf16(float(v)) for v in x], np.float32)

def np_mulacc(a, b, c):
  """MULACC as CPU and PYTHON compute it: float32/float64 fused (one rounding, Renderer.fused_mulacc), half as written."""
  if (fn := {np.dtype(np.float32): fma32, np.dtype(np.float64): fma64}.get(a.dtype)) is None: return a * b + c
  return np.array([fn(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)], a.dtype)

def np_float_op(op:Ops, a, b, s, c):
  with np.errstate(all="ignore"):
    return {Ops.ADD: lambda: a + b, Ops.SUB: lambda: a - b, Ops.MUL: lambda: a * b, Ops.MAX: lambda: np.where(a < b, b, a),
            Ops.FDIV: lambda: a / b, Ops.CMOD: lambda: np.fmod(a, b), Ops.POW: lambda: np.power(np.abs(a), b),
            Ops.CMPLT: lambda: a < b, Ops.CMPNE: lambda: a != b, Ops.CMPEQ: lambda: a == b, Ops.NEG: lambda: -a, Ops.RECIPROCAL: lambda: 1 / a,
            Ops.SQRT: lambda: np.sqrt(a), Ops.EXP2: lambda: np.exp2(a), Ops.LOG2: lambda: np.log2(a), Ops.SIN: lambda: np.sin(a),
            Ops.TRUNC: lambda: np.trunc(a), Ops.WHERE: lambda: np.where(a < b, a, b), Ops.MULACC: lambda: np_mulacc(a, b, c)}[op]()

_APPROX = {Ops.POW, Ops.EXP2, Ops.LOG2, Ops.SIN}  # libm and Python may differ in the last bit

@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_float_ops(device, dt):
  ins = float_inputs(dt, 4)
  ops = [op for op in FLOAT_OPS if op is not Ops.POW]
  outs = run(device, ops_kernel(ops, dt), ins, [dtypes.bool if op in GroupOp.Comparison else dt for op in ops])
  # bfloat16 has no numpy type: check it against float32 math rounded to bfloat16's precision
  ref_ins = [(x.astype(np.uint32) << 16).view(np.float32) for x in ins] if dt is dtypes.bfloat16 else ins
  for op, got in zip(ops, outs):
    want = np_float_op(op, *ref_ins)
    if dt is dtypes.bfloat16 or op in _APPROX or (op is Ops.MULACC and dt is dtypes.half):
      tol = {dtypes.bfloat16: 1e-2, dtypes.half: 2e-3, dtypes.float32: 1e-6, dtypes.float64: 1e-12}[dt]
      np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True, err_msg=f"{op} {dt}")
    else: np.testing.assert_array_equal(got, want, err_msg=f"{op} {dt}")

@pytest.mark.cpu
@pytest.mark.parametrize("dt", INT_DTYPES + FLOAT_DTYPES, ids=str)
def test_cpu_matches_python(dt):
  ops = INT_OPS if dt in INT_DTYPES else FLOAT_OPS
  ins = int_inputs(dt, 5) if dt in INT_DTYPES else [np.abs(x) if dt is not dtypes.bfloat16 else x & 0x7fff for x in float_inputs(dt, 5)]
  out_dts = [dtypes.bool if op in GroupOp.Comparison else dt for op in ops]
  cpu, py = run("CPU", ops_kernel(ops, dt), ins, out_dts), run("PYTHON", ops_kernel(ops, dt), ins, out_dts)
  for op, x, y in zip(ops, cpu, py):
    if op in _APPROX: np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=2e-3 if dt.itemsize == 2 else 1e-6)
    else: np.testing.assert_array_equal(x, y, err_msg=f"{op} {dt}")

def bool_kernel() -> list[UOp]:
  k = Linear()
  ops = [Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE, Ops.CMPEQ, Ops.CMPLT, Ops.MAX]
  outs = [k.param(i, dtypes.bool, 4) for i in range(len(ops))]
  a, b = k.param(len(ops), dtypes.bool, 4), k.param(len(ops) + 1, dtypes.bool, 4)
  r = k.range(4, 0)
  va, vb = k.load(a, r), k.load(b, r)
  sts = [k.store(o, r, k.add(UOp(op, dtypes.bool, (va, vb)))) for o, op in zip(outs, ops)]
  return k.sink("bools", k.end(k.add(UOp(Ops.GROUP, dtypes.void, tuple(sts))), r))

@pytest.mark.parametrize("device", DEVICES)
def test_bool_ops(device):
  a, b = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
  got = run(device, bool_kernel(), [a, b], [dtypes.bool] * 7)
  for g, w in zip(got, [a & b, a | b, a ^ b, a != b, a == b, a < b, np.where(a < b, b, a)]): np.testing.assert_array_equal(g, w)

CAST_TO = [dtypes.bool, *INT_DTYPES, dtypes.half, dtypes.bfloat16, dtypes.float32, dtypes.float64]

def cast_kernel(src:DType, dsts:list[DType], bit:bool=False) -> list[UOp]:
  k = Linear()
  outs = [k.param(i, dt, 8) for i, dt in enumerate(dsts)]
  a = k.param(len(dsts), src, 8)
  r = k.range(8, 0)
  va = k.load(a, r)
  sts = [k.store(o, r, k.add(va.bitcast(dt) if bit else va.cast(dt))) for o, dt in zip(outs, dsts)]
  return k.sink(f"{'bitcast' if bit else 'cast'}_{src.name.replace(' ', '_')}", k.end(k.add(UOp(Ops.GROUP, dtypes.void, tuple(sts))), r))

@pytest.mark.parametrize("device", DEVICES)
def test_casts_from_float(device):
  a = np.array([0.0, 1.5, 2.7, 99.9, 0.25, 100.0, 3.0, 65.5], np.float32)  # in range for every dtype: casts stay defined in C
  got = run(device, cast_kernel(dtypes.float32, CAST_TO), [a], CAST_TO)
  for dt, g in zip(CAST_TO, got):
    want = bf16(a) if dt is dtypes.bfloat16 else a.astype(_to_np_dtype(dt))
    np.testing.assert_array_equal(g, want, err_msg=str(dt))

@pytest.mark.parametrize("src", [dtypes.bool, *INT_DTYPES, dtypes.half, dtypes.float64], ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_casts_to_float(device, src):
  a = np.array([0, 1, 2, 3, 100, 7, 1, 0], _to_np_dtype(src)) if src is not dtypes.half else np.array([0, 1.5, -2, 3, 1e4, 7, 1, 0], np.float16)
  dsts = [dtypes.float32, dtypes.float64, dtypes.half, dtypes.int32, dtypes.bool]
  for dt, g in zip(dsts, run(device, cast_kernel(src, dsts), [a], dsts)):
    np.testing.assert_array_equal(g, a.astype(_to_np_dtype(dt)), err_msg=f"{src} -> {dt}")

@pytest.mark.parametrize("device", DEVICES)
def test_bitcasts(device):
  f = np.array([1.0, -2.5, 0.0, -0.0, np.inf, 3e-41, 7.0, 1e30], np.float32)
  got = run(device, cast_kernel(dtypes.float32, [dtypes.int32, dtypes.uint32], bit=True), [f], [dtypes.int32, dtypes.uint32])
  np.testing.assert_array_equal(got[0], f.view(np.int32))
  np.testing.assert_array_equal(got[1], f.view(np.uint32))
  h = np.array([1.0, -2.5, 0.0, -0.0, np.inf, 6e-8, 7.0, 65504], np.float16)
  dts = [dtypes.uint16, dtypes.int16, dtypes.bfloat16]
  got = run(device, cast_kernel(dtypes.half, dts, bit=True), [h], dts)
  np.testing.assert_array_equal(got[0], h.view(np.uint16))
  np.testing.assert_array_equal(got[1], h.view(np.int16))
  np.testing.assert_array_equal(got[2], (h.view(np.uint16).astype(np.uint32) << 16).view(np.float32))
  i = np.array([1, -1, 0, 2**62, -2**63, 12345, 7, 2**52], np.int64)
  got = run(device, cast_kernel(dtypes.int64, [dtypes.float64, dtypes.uint64], bit=True), [i], [dtypes.float64, dtypes.uint64])
  np.testing.assert_array_equal(got[0], i.view(np.float64))
  np.testing.assert_array_equal(got[1], i.view(np.uint64))
  u = np.array([0x3c00, 0x7c00, 0x8001, 0x7e00, 0, 1, 0x3f80, 0xffff], np.uint16)
  got = run(device, cast_kernel(dtypes.uint16, [dtypes.half, dtypes.bfloat16], bit=True), [u], [dtypes.half, dtypes.bfloat16])
  np.testing.assert_array_equal(got[0], u.view(np.float16))
  np.testing.assert_array_equal(got[1], (u.astype(np.uint32) << 16).view(np.float32))

@pytest.mark.parametrize("device", DEVICES)
def test_special_float_values(device):
  """IEEE corner cases (x/0, sqrt(-1), log2(0), overflow to inf, half subnormals) come out the same everywhere."""
  a = np.array([1.0, -1.0, 0.0, 1000.0, 70000.0, 3e-6, np.nan, -np.inf], np.float32)
  b = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0], np.float32)
  ops = [Ops.FDIV, Ops.SQRT, Ops.LOG2, Ops.EXP2, Ops.RECIPROCAL, Ops.MAX, Ops.CMPNE]
  outs = run(device, ops_kernel(ops, dtypes.float32, 8), [a, b, b, b], [dtypes.bool if op in GroupOp.Comparison else dtypes.float32 for op in ops])
  for op, got in zip(ops, outs):
    np.testing.assert_array_equal(got, np_float_op(op, a, b, b, b), err_msg=str(op))
  half, = run(device, cast_kernel(dtypes.float32, [dtypes.half]), [a], [dtypes.half])
  with np.errstate(over="ignore"): np.testing.assert_array_equal(half, a.astype(np.float16))
