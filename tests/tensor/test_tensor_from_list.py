# Tensor(list) and Tensor(scalar): implicit casts and special values, against numpy (a C-style cast of the exact Python value).
import math
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.dtype import to_dtype, _to_np_dtype

pytestmark = pytest.mark.cpu

INT_DTYPES = [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64]

def c_cast(values, dt) -> np.ndarray:
  """What a C cast of each Python value (truncated toward zero) to dt stores: the value modulo 2**bits."""
  return np.array([int(v) % 2**dt.bitsize for v in values], dtype=np.uint64).astype(_to_np_dtype(dt))

@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
def test_ints_wrap_into_an_int_dtype(dt):
  # -1 into uint8 is 255, 2**33 into uint32 is 0, as in tinygrad 0.14 and torch (numpy refuses them)
  data = [-1, 0, 1, 2**7, -2**7 - 1, 2**8 + 3, 2**15, -2**16 - 5, 2**31, -2**31 - 1, 2**32 + 7, 2**33, -2**33, 2**63 - 1, -2**63]
  np.testing.assert_equal(Tensor(data, dtype=dt).numpy(), c_cast(data, dt))
  for v in (-1, 2**33 + 5, -2**63):
    assert Tensor(v, dtype=dt).item() == c_cast([v], dt)[0]
  assert Tensor([2**64 - 1], dtype=dt).tolist() == c_cast([2**64 - 1], dt).tolist()

def test_issue_examples():
  assert Tensor([-1], dtype=dtypes.uint8).tolist() == [255] and Tensor(-1, dtype=dtypes.uint8).item() == 255
  assert Tensor([2**33, 2**33 + 5], dtype=dtypes.uint32).tolist() == [0, 5]

@pytest.mark.parametrize("dt", INT_DTYPES + [dtypes.bool], ids=str)
def test_floats_truncate_then_wrap(dt):
  data = [0.0, 1.7, -1.7, 2.5, -3.5, 300.2, -129.0, 128.0, 1e10, -0.5]
  want = np.array([v != 0 for v in data]) if dt is dtypes.bool else c_cast(data, dt)
  np.testing.assert_equal(Tensor(data, dtype=dt).numpy(), want)
  assert Tensor(300.2, dtype=dt).item() == want[5]

@pytest.mark.parametrize("v,err", [(math.inf, OverflowError), (-math.inf, OverflowError), (math.nan, ValueError)])
def test_inf_nan_into_an_int_dtype_raise(v, err):
  with pytest.raises(err): Tensor([1.0, v], dtype=dtypes.int32)
  with pytest.raises(err): Tensor(v, dtype=dtypes.uint8)

@pytest.mark.parametrize("data,dtype", [(2**64, dtypes.uint64), (2**64, dtypes.int8), (-2**63 - 1, dtypes.int64), (2**70, None),
                                        (1e30, dtypes.int64)])
def test_values_outside_64_bits_raise(data, dtype):
  # tinygrad 0.14 wraps these too (2**64 into uint64 is 0 there): no integer dtype holds them, so it is an error here
  with pytest.raises(OverflowError, match="64-bit|fit no integer"): Tensor([data], dtype=dtype)

def test_inferred_int_dtype_widens():
  # without a dtype ints are the default int; past its range int64, past that uint64 (numpy's inference; 0.14 wraps into int32)
  for data, dt in [([1, 2], dtypes.int32), ([2**40, -1], dtypes.int64), ([0, 2**31 + 2], dtypes.int64), ([-2**31 - 1], dtypes.int64),
                   ([2**63], dtypes.uint64), ([[1], [2**40]], dtypes.int64)]:
    t = Tensor(data)
    assert t.dtype is dt and t.tolist() == data
  with pytest.raises(OverflowError, match="fit no integer dtype"): Tensor([-1, 2**63])

def test_mixed_bools_ints_floats():
  for data, dt in [([True, False], dtypes.bool), ([True, 2], dtypes.int32), ([True, 2, 3.5], dtypes.float32), ([1, 2.0], dtypes.float32),
                   ([[True], [1.5]], dtypes.float32), ((1, 2, (3)), dtypes.int32)]:
    t = Tensor(data)
    assert t.dtype is dt
    np.testing.assert_equal(t.numpy(), np.array(data, dtype=_to_np_dtype(dt)))
  np.testing.assert_equal(Tensor([True, False, True], dtype=dtypes.float16).numpy(), np.array([1, 0, 1], dtype=np.float16))
  np.testing.assert_equal(Tensor([0, 3, -2], dtype=dtypes.bool).numpy(), np.array([False, True, True]))
  np.testing.assert_equal(Tensor([2**40 + 1, 2**70], dtype=dtypes.float32).numpy(), np.array([2**40 + 1, 2**70], dtype=np.float32))

def test_special_float_values():
  data = [math.inf, -math.inf, math.nan, 0.0, -0.0, 65504.0, 65520.0, 70000.0, -1e10, 1e-8, 5e-324]
  for dt in (dtypes.float16, dtypes.float32, dtypes.float64):
    with np.errstate(over="ignore"): want = np.array(data).astype(_to_np_dtype(dt))
    got = Tensor(data, dtype=dt).numpy()
    np.testing.assert_equal(got, want)
    np.testing.assert_equal(np.signbit(got), np.signbit(want))   # -0.0 stays negative
  t = Tensor(data)
  assert t.dtype is dtypes.float32 and math.isnan(t.tolist()[2]) and t.tolist()[:2] == [math.inf, -math.inf]
  assert Tensor(1e10, dtype=dtypes.half).item() == math.inf and math.isnan(Tensor(math.nan).item())
  np.testing.assert_equal(Tensor([1.5, -1.0, 1e39], dtype=dtypes.bfloat16).tolist(), [1.5, -1.0, math.inf])

@pytest.mark.parametrize("data,shape", [([], (0,)), ([[]], (1, 0)), ([[], []], (2, 0)), ([[[]]], (1, 1, 0)), ((), (0,)), ([(), ()], (2, 0))])
def test_nested_empty_lists(data, shape):
  t = Tensor(data)
  assert t.shape == shape and t.dtype is dtypes.float32 and t.tolist() == np.zeros(shape).tolist()
  np.testing.assert_equal(t.numpy(), np.zeros(shape, dtype=np.float32))
  ti = Tensor(data, dtype=dtypes.int8)
  assert ti.shape == shape and ti.numpy().dtype == np.int8

def test_none_is_zero():
  # tinygrad 0.14's Tensor(None): the constant 0.0
  assert Tensor(None).item() == 0.0 and Tensor(None).shape == ()

def test_numpy_input_wraps_like_a_cast():
  np.testing.assert_equal(Tensor(np.array([-1, 256, 2**33]), dtype=dtypes.uint8).numpy(), np.array([255, 0, 0], dtype=np.uint8))

def test_ragged_and_unknown_items_raise():
  with pytest.raises(ValueError, match="inhomogeneous"): Tensor([[1, 2], [3]])
  with pytest.raises(RuntimeError, match="Could not infer dtype"): Tensor([1, "a"])

@pytest.mark.parametrize("make", [lambda: Tensor([1], dtype="float33"), lambda: Tensor([1]).cast("float33"), lambda: Tensor.zeros(2, dtype="float33"),
                                  lambda: Tensor([1.0]).sum(dtype="float33"), lambda: Tensor([1]).bitcast("float33"), lambda: to_dtype("float33"),
                                  lambda: to_dtype(""), lambda: Tensor([3], dtype=(dtypes.int,)), lambda: Tensor([1.0, 2.0]).prod(dtype="")])
def test_unknown_dtype_names_raise_attribute_error(make):
  # the exception tinygrad 0.14 raises (it looks the name up on dtypes)
  with pytest.raises(AttributeError, match="float33|dtype"): make()

def test_weak_dtype_has_no_storage():
  for dt in (dtypes.weakint, dtypes.weakfloat):
    with pytest.raises(RuntimeError, match="weak dtype"): Tensor([1], dtype=dt)

def test_from_py():
  assert dtypes.from_py([]) is dtypes.float32 and dtypes.from_py([[]]) is dtypes.float32 and dtypes.from_py([True, 1]) is dtypes.int32
  for bad in ("abc", None, 1j, [1, "a"], np.float32(1)):
    with pytest.raises(RuntimeError, match="Could not infer dtype"): dtypes.from_py(bad)
