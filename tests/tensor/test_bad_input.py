# Bad input raises a clear error (the exception class numpy/torch/tinygrad raise) instead of giving a silently wrong shape or value.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import host_memory

@pytest.mark.parametrize("scalar,dt", [(np.float32(3.5), dtypes.float32), (np.int8(-3), dtypes.int8), (np.array(2.5), dtypes.float64),
                                       (np.bool_(True), dtypes.bool)])
def test_numpy_scalars_are_0d(scalar, dt):
  t = Tensor(scalar)
  assert t.shape == () and t.dtype is dt and t.item() == scalar.item()

# an int no 64-bit integer holds is an error (tinygrad 0.14 silently wraps it: Tensor(2**64, dtype=dtypes.uint64) is 0 there)
@pytest.mark.parametrize("data,dtype", [(2**70, None), (-(2**63) - 1, None), (2**64, dtypes.int64), (2**64, dtypes.uint64),
                                        (-(2**63) - 1, dtypes.uint8)])
def test_int_outside_64_bits_overflows(data, dtype):
  with pytest.raises(OverflowError, match=str(data)): Tensor(data, dtype=dtype)
  with pytest.raises(OverflowError, match=str(data)): Tensor([1, data], dtype=dtype)

@pytest.mark.cpu
def test_ints_that_fit():
  assert Tensor(2**40 + 5, dtype=dtypes.int64).item() == 2**40 + 5 and Tensor(-(2**31)).item() == -(2**31)
  # without a dtype, an int past the default int is int64 (uint64 past that), as numpy infers; 0.14 stores int32 garbage
  assert (t := Tensor(2**40 + 5)).dtype is dtypes.int64 and t.item() == 2**40 + 5
  assert (t := Tensor(-(2**31) - 1)).dtype is dtypes.int64 and t.item() == -(2**31) - 1
  assert (t := Tensor(2**64 - 1)).dtype is dtypes.uint64 and t.item() == 2**64 - 1
  assert Tensor(2**64 - 1, dtype=dtypes.uint64).item() == 2**64 - 1 and Tensor(2**70, dtype=dtypes.float32).item() == np.float32(2**70)
  assert (Tensor([1], dtype=dtypes.int8) + 100).tolist() == [101]

@pytest.mark.parametrize("make", [lambda: Tensor.full((-1,), 3), lambda: Tensor.zeros(-3), lambda: Tensor.ones(2, -1), lambda: Tensor.empty(-2),
                                  lambda: Tensor.zeros(2.5), lambda: Tensor.full((True,), 1), lambda: Tensor.rand(-1), lambda: Tensor.randn(3, -3)])
def test_bad_sizes_raise(make):
  with pytest.raises(ValueError, match="needs a shape of non-negative ints"): make()

@pytest.mark.cpu
def test_good_sizes():
  assert Tensor.full((2, 0), 3).shape == (2, 0) and Tensor.zeros(()).shape == () and Tensor.full(3, 1).tolist() == [1, 1, 1]

def test_bool_of_a_tensor_raises():
  # tinygrad's exception and message: truthiness of a tensor is not defined (not even for one element)
  for t in (Tensor([0]), Tensor([1]), Tensor(1), Tensor([1, 2])):
    with pytest.raises(TypeError, match="__bool__ on Tensor is not defined"): bool(t)
  with pytest.raises(TypeError, match="__bool__ on Tensor is not defined"): _ = Tensor([1]) in [Tensor([2])]
  t = Tensor([1])
  assert t in [t]   # identity still finds the same tensor, without comparing

@pytest.mark.cpu
def test_randint_range_must_fit():
  with pytest.raises(OverflowError, match=r"randint range \[0, 1099511627776\) doesn't fit in dtypes.int"): Tensor.randint(3, high=2**40)
  big = Tensor.randint(1000, high=2**40, dtype=dtypes.int64).numpy()
  assert big.dtype == np.int64 and 0 <= big.min() and big.max() < 2**40 and big.max() > 2**39   # really spread over the range
  small = Tensor.randint(4000, low=-100, high=100, dtype=dtypes.int8).numpy()
  assert small.min() == -100 and small.max() == 99   # the whole range, no wrap-around through the int8 cast
  assert set(Tensor.randint(50, low=5, high=6).tolist()) == {5}

@pytest.mark.parametrize("steps", [2.5, 2.0, "3", None, True])
def test_linspace_steps_must_be_an_int(steps):
  with pytest.raises(TypeError, match="linspace needs an int number of steps"): Tensor.linspace(0, 1, steps)

@pytest.mark.cpu
@pytest.mark.parametrize("make", [lambda: Tensor.rand(2**40), lambda: Tensor.arange(2**40).realize(),
                                  lambda: Tensor.empty(2**40).realize(),
                                  lambda: Tensor.zeros(2**38, 4).contiguous().realize(), lambda: Tensor.randn(2**40)])
def test_impossible_sizes_raise_memory_error_before_allocating(make):
  if not host_memory() or host_memory() >= 2**42: pytest.skip("needs a machine with less than 4 TiB of memory")
  with pytest.raises(MemoryError, match="more than this machine's memory"): make()

@pytest.mark.parametrize("index", ["a", 1.0, True, (0, 1.5), Tensor([0.0])])
def test_unsupported_index_types_say_so(index):
  with pytest.raises(IndexError, match="not supported"): Tensor([[1, 2, 3]] * 2)[index]

@pytest.mark.cpu
def test_numpy_array_index_works():
  assert Tensor([[1, 2, 3]] * 2)[np.array([1, 0]), np.array([2])].tolist() == [3, 3]

@pytest.mark.cpu
def test_basic_indexing_still_works():
  t = Tensor(np.arange(12).reshape(3, 4))
  assert t[..., 1].tolist() == [1, 5, 9] and t[1, ...].tolist() == [4, 5, 6, 7] and t[None, 2, ::2].tolist() == [[8, 10]]
