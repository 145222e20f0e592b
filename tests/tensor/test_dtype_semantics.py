# dtype semantics of tinygrad 0.14: the promotion lattice (every pair of dtypes), Python scalars as weak operands, default float/int,
# accumulation dtypes, int division and modulo, bool arithmetic, and float -> int casts of out-of-range and NaN values (the same at every
# length and on every device). The expected values were computed once with tinygrad 0.14.0 and are recorded here as data.
import math
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Context
from tinygrad.dtype import strong_dtype

DEVICES = ["PYTHON", pytest.param("CPU", marks=pytest.mark.cpu)]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]

# a + b for Tensors of dtypes a (row) and b (columns in DTYPES order), as tinygrad 0.14.0 gives them
PAIRS = {
  'bool': 'bool int8 uint8 int16 uint16 int32 uint32 int64 uint64 float16 bfloat16 float32 float64',
  'int8': 'int8 int8 int16 int16 int32 int32 int64 int64 weakfloat float16 bfloat16 float32 float64',
  'uint8': 'uint8 int16 uint8 int16 uint16 int32 uint32 int64 uint64 float16 bfloat16 float32 float64',
  'int16': 'int16 int16 int16 int16 int32 int32 int64 int64 weakfloat float16 bfloat16 float32 float64',
  'uint16': 'uint16 int32 uint16 int32 uint16 int32 uint32 int64 uint64 float16 bfloat16 float32 float64',
  'int32': 'int32 int32 int32 int32 int32 int32 int64 int64 weakfloat float16 bfloat16 float32 float64',
  'uint32': 'uint32 int64 uint32 int64 uint32 int64 uint32 int64 uint64 float16 bfloat16 float32 float64',
  'int64': 'int64 int64 int64 int64 int64 int64 int64 int64 weakfloat float16 bfloat16 float32 float64',
  'uint64': 'uint64 weakfloat uint64 weakfloat uint64 weakfloat uint64 weakfloat uint64 float16 bfloat16 float32 float64',
  'float16': 'float16 float16 float16 float16 float16 float16 float16 float16 float16 float16 float32 float32 float64',
  'bfloat16': 'bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 float32 bfloat16 float32 float64',
  'float32': 'float32 float32 float32 float32 float32 float32 float32 float32 float32 float32 float32 float32 float64',
  'float64': 'float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64 float64',
}
# a + True, a + 2, a + 2.5, a / 2, a.sum(), a.mean() for a Tensor of dtype a, as tinygrad 0.14.0 gives them
SCALARS = {
  'bool': 'bool weakint weakfloat float32 int32 float32',
  'int8': 'int8 int8 weakfloat float32 int32 float32',
  'uint8': 'uint8 uint8 weakfloat float32 uint32 float32',
  'int16': 'int16 int16 weakfloat float32 int32 float32',
  'uint16': 'uint16 uint16 weakfloat float32 uint32 float32',
  'int32': 'int32 int32 weakfloat float32 int32 float32',
  'uint32': 'uint32 uint32 weakfloat float32 uint32 float32',
  'int64': 'int64 int64 weakfloat float32 int64 float32',
  'uint64': 'uint64 uint64 weakfloat float32 uint64 float32',
  'float16': 'float16 float16 float16 float16 float16 float16',
  'bfloat16': 'bfloat16 bfloat16 bfloat16 bfloat16 bfloat16 bfloat16',
  'float32': 'float32 float32 float32 float32 float32 float32',
  'float64': 'float64 float64 float64 float64 float64 float64',
}

def committed(name:str):
  """0.14 keeps a weak result dtype (weakint/weakfloat) until it is stored, then stores it as the default int/float; here the result
  of a Tensor op is committed at once: the dtype 0.14 stores."""
  return strong_dtype(getattr(dtypes, name))

@pytest.mark.parametrize("a", DTYPES)
def test_promotion_pairs(a):
  for b, want in zip(DTYPES, PAIRS[a].split()):
    got = (Tensor([1], dtype=a) + Tensor([1], dtype=b)).dtype
    assert got is committed(want), f"{a} + {b}: {got}, 0.14 stores {want}"

@pytest.mark.parametrize("a", DTYPES)
def test_scalar_operands_and_accumulation(a):
  t = Tensor([1], dtype=a)
  got = [t + True, t + 2, t + 2.5, t / 2, t.sum(), t.mean()]
  for what, g, want in zip(["+True", "+2", "+2.5", "/2", "sum", "mean"], got, SCALARS[a].split()):
    assert g.dtype is committed(want), f"{a} {what}: {g.dtype}, 0.14 {want}"

@pytest.mark.parametrize("device", DEVICES)
def test_weakfloat_pair_realizes(device):
  # int8 and uint64 meet at the weak float: stored as the default float, as 0.14 does
  t = Tensor([1, -3], dtype=dtypes.int8, device=device) + Tensor([2, 7], dtype=dtypes.uint64, device=device)
  assert t.dtype is dtypes.float32 and t.tolist() == [3.0, 4.0]

def test_default_float_int():
  assert dtypes.default_float is dtypes.float32 and dtypes.default_int is dtypes.int32
  with Context(DEFAULT_FLOAT="HALF"):
    assert dtypes.default_float is dtypes.float16
    for t in (Tensor.rand(2), Tensor.ones(2), Tensor([1, 2]) / 2, Tensor([1.5]), Tensor.arange(0.0, 2.0)): assert t.dtype is dtypes.float16
  assert Tensor([1.5]).dtype is dtypes.float32

# (dtype, op): (result dtype, values) of a = [7, -7, 7, -7, 0, 5] and b = [2, 2, -2, -2, 3, -5] (absolute values for uint8), from 0.14.0
A, B = [7, -7, 7, -7, 0, 5], [2, 2, -2, -2, 3, -5]
DIVMOD = {
  "floordiv": (lambda x, y: x // y, {"int8": [3, -4, -4, 3, 0, -1], "int32": [3, -4, -4, 3, 0, -1], "int64": [3, -4, -4, 3, 0, -1],
                                     "uint8": [3, 3, 3, 3, 0, 1], "float32": [3.0, -4.0, -4.0, 3.0, 0.0, -1.0]}),
  "mod": (lambda x, y: x % y, {"int8": [1, 1, -1, -1, 0, 0], "int32": [1, 1, -1, -1, 0, 0], "int64": [1, 1, -1, -1, 0, 0],
                               "uint8": [1, 1, 1, 1, 0, 0], "float32": [1.0, 1.0, -1.0, -1.0, 0.0, 0.0]}),
  "div": (lambda x, y: x / y, {"int8": [3.5, -3.5, -3.5, 3.5, 0.0, -1.0], "int32": [3.5, -3.5, -3.5, 3.5, 0.0, -1.0],
                               "int64": [3.5, -3.5, -3.5, 3.5, 0.0, -1.0], "uint8": [3.5, 3.5, 3.5, 3.5, 0.0, 1.0],
                               "float32": [3.5, -3.5, -3.5, 3.5, 0.0, -1.0]}),
  "floordiv3": (lambda x, y: x // 3, {"int8": [2, -3, 2, -3, 0, 1], "int32": [2, -3, 2, -3, 0, 1], "int64": [2, -3, 2, -3, 0, 1],
                                      "uint8": [2, 2, 2, 2, 0, 1], "float32": [2.0, -3.0, 2.0, -3.0, 0.0, 1.0]}),
  "mod_scalar": (lambda x, y: x % (3 if x.dtype is dtypes.uint8 else -3),
                 {"int8": [-2, -1, -2, -1, 0, -1], "int32": [-2, -1, -2, -1, 0, -1], "int64": [-2, -1, -2, -1, 0, -1],
                  "uint8": [1, 1, 1, 1, 0, 2], "float32": [-2.0, -1.0, -2.0, -1.0, 0.0, -1.0]}),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(DIVMOD))
def test_int_division_modulo(device, op):
  fn, table = DIVMOD[op]
  for dt, want in table.items():
    a, b = ([abs(v) for v in A], [abs(v) for v in B]) if dt == "uint8" else (A, B)
    r = fn(Tensor(a, dtype=dt, device=device), Tensor(b, dtype=dt, device=device))
    assert r.dtype is (dtypes.float32 if op == "div" else getattr(dtypes, dt)), f"{dt} {op}: {r.dtype}"
    assert r.tolist() == want, f"{dt} {op} on {device}"
  # floor semantics as numpy's (and Python's)
  np.testing.assert_equal((Tensor(A, dtype=dtypes.int32, device=device) // Tensor(B, dtype=dtypes.int32, device=device)).numpy(),
                          np.array(A) // np.array(B))

@pytest.mark.parametrize("device", DEVICES)
def test_bool_arithmetic(device):
  t, u = Tensor([True, True, False, False], device=device), Tensor([True, False, True, False], device=device)
  assert (t + u).dtype is dtypes.bool and (t + u).tolist() == [True, True, True, False]   # or
  assert (t * u).tolist() == [True, False, False, False]                                   # and
  assert (t ^ u).tolist() == [False, True, True, False] and (~t).tolist() == [False, False, True, True]
  assert (-t).tolist() == [False, False, True, True]
  assert t.sum().dtype is dtypes.int32 and t.sum().item() == 2 and t.mean().dtype is dtypes.float32 and t.mean().item() == 0.5
  assert t.max().dtype is dtypes.bool and t.max().item() is True
  assert (t + 1).tolist() == [2, 2, 1, 1] and (t * 1.5).tolist() == [1.5, 1.5, 0.0, 0.0]
  # 0.14 computes bool - bool; torch refuses it (there is no bool subtraction), as here
  with pytest.raises(RuntimeError): t - u

# float -> int casts of edge values: tinygrad 0.14.0's results on CPU (x86), which numpy's astype shares for int8/uint8/int32/int64
CAST_IN = [-1.0, 300.0, -129.0, 1e10, -1e10, math.nan, math.inf, -math.inf, 2.7, -2.7]
CAST_OUT = {
  dtypes.uint8: [255, 44, 127, 0, 0, 0, 0, 0, 2, 254],
  dtypes.int8: [-1, 44, 127, 0, 0, 0, 0, 0, 2, -2],
  dtypes.uint16: [65535, 300, 65407, 0, 0, 0, 0, 0, 2, 65534],
  dtypes.int16: [-1, 300, -129, 0, 0, 0, 0, 0, 2, -2],
  dtypes.int32: [-1, 300, -129] + [-2147483648] * 5 + [2, -2],
  dtypes.uint32: [4294967295, 300] + [4294967295] * 6 + [2, 4294967295],
  dtypes.int64: [-1, 300, -129, 10000000000, -10000000000] + [-9223372036854775808] * 3 + [2, -2],
  dtypes.uint64: [18446744073709551615, 300, 18446744073709551615, 10000000000] + [18446744073709551615] * 4 + [2, 18446744073709551615],
  dtypes.bool: [True] * 10,
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", list(CAST_OUT), ids=str)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=str)
def test_float_to_int_casts(device, dt, src):
  for n in (1, 4, 5, 17):   # scalar and vectorized C code
    for v, want in zip(CAST_IN, CAST_OUT[dt]):
      got = Tensor([v] * n, dtype=src, device=device).cast(dt).tolist()
      assert got == [want] * n, f"{v} -> {dt} ({n} elements on {device}): {got[0]}"

@pytest.mark.parametrize("device", DEVICES)
def test_half_and_edge_bounds(device):
  assert Tensor([3.7, -3.7, 65504.0], dtype=dtypes.float16, device=device).cast(dtypes.int32).tolist() == [3, -3, 65504]
  big = Tensor([2.0 ** 63, -2.0 ** 63, 2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32 - 1, 2.0 ** 32], dtype=dtypes.float64, device=device)
  assert big.cast(dtypes.int64).tolist()[:2] == [-2 ** 63, -2 ** 63]
  assert big.cast(dtypes.int32).tolist()[2:4] == [-2 ** 31, -2 ** 31]
  assert big.cast(dtypes.uint32).tolist()[4:] == [2 ** 32 - 1, 2 ** 32 - 1]
  # a guarded-looking WHERE of the user's is still cast by the rule
  c = Tensor([1.0, 2.0], device=device) > 1.5
  assert c.where(Tensor([1e10, 5.0], device=device), 0.0).cast(dtypes.int32).tolist() == [0, 5]
  assert c.where(Tensor([1e10, 5.0], device=device), 3e9).cast(dtypes.int32).tolist() == [-2 ** 31, 5]

@pytest.mark.cpu
def test_python_scalar_tensors_are_weak():
  # as in tinygrad 0.14: Tensor(3) is weakint and Tensor(3.0) weakfloat; they take the type of the tensor they meet, stay weak next to
  # each other, and are stored (numpy, item, clone) as the default int/float
  i, f = Tensor(3), Tensor(3.0)
  assert (i.dtype, f.dtype, Tensor(True).dtype, Tensor(3, dtype=dtypes.int8).dtype) == (dtypes.weakint, dtypes.weakfloat, dtypes.bool, dtypes.int8)
  assert (i + 1).dtype is dtypes.weakint and (i + 1.5).dtype is dtypes.weakfloat and (i * True).dtype is dtypes.weakint
  assert (i + f).item() == 6.0 and (i + f).dtype is dtypes.weakfloat
  assert (i + Tensor([1, 2], dtype=dtypes.int8)).dtype is dtypes.int8 and (f * Tensor([1], dtype=dtypes.half)).dtype is dtypes.half
  assert (i + Tensor([1, 2])).tolist() == [4, 5] and (Tensor([1.5]) * i).dtype is dtypes.float32
  assert i.numpy().dtype == np.int32 and f.numpy().dtype == np.float32 and i.item() == 3 and f.tolist() == 3.0
  assert i.realize().dtype is dtypes.weakint and i.contiguous().dtype is dtypes.weakint and i.clone().dtype is dtypes.int32
  # a weak tensor of some shape next to a Python value keeps its shape
  w = Tensor.full((2, 3), 2, buffer=False)
  assert w.dtype is dtypes.weakint and (w * 2).shape == (2, 3) and (w != 0).tolist() == [[True] * 3] * 2 and (w + 0.5).tolist() == [[2.5] * 3] * 2
  assert Tensor(3.0).nonzero().shape == (1, 0)
  # a buffer is never weak: full() stores the default dtype
  assert Tensor.full((2,), 3).dtype is dtypes.int32 and Tensor.full((2,), 3.0).dtype is dtypes.float32
  with pytest.raises(RuntimeError, match="concrete dtype"): i.element_size()
  assert Tensor(2**40).dtype is dtypes.int64   # past the default int: strong int64, not a weak int
  assert Tensor(2**40, dtype=dtypes.int64).item() == 2**40
