# dtype= of sum and prod (accumulate and return in that dtype, wrapping as it does), linspace's dtypes, arange's result dtype
# (int arguments give the default int, any float argument the default float); values against numpy.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

@pytest.mark.cpu
def test_sum_dtype():
  u8 = Tensor(np.array([200, 200, 7], np.uint8))
  assert u8.sum(dtype=dtypes.float32).dtype == dtypes.float32 and u8.sum(dtype=dtypes.float32).item() == 407.0
  assert u8.sum(dtype=dtypes.uint8).dtype == dtypes.uint8 and u8.sum(dtype=dtypes.uint8).item() == 407 % 256
  assert u8.sum().dtype == dtypes.uint32 and u8.sum().item() == 407
  assert Tensor([True, True, False]).sum().dtype == dtypes.int32
  np.testing.assert_array_equal(Tensor(np.ones((2, 3), np.float32)).sum(1, dtype=dtypes.int32).numpy(), [3, 3])

@pytest.mark.cpu
def test_prod_dtype():
  i8 = Tensor(np.array([100, 3], np.int8))
  assert i8.prod(dtype=dtypes.int32).dtype == dtypes.int32 and i8.prod(dtype=dtypes.int32).item() == 300
  assert i8.prod().dtype == dtypes.int8 and i8.prod().item() == np.array(300).astype(np.int8)
  # the cast comes before the product, as torch's
  assert Tensor([1.5, 2.0]).prod(dtype=dtypes.int32).item() == 2

@pytest.mark.cpu
@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int64, dtypes.float16, dtypes.float32, None])
def test_linspace_dtypes(dtype):
  t = Tensor.linspace(0, 10, 5, dtype=dtype)
  assert t.dtype == (dtype or dtypes.default_float)
  ref = np.linspace(0, 10, 5)
  np.testing.assert_array_equal(t.numpy(), ref.astype(np.int64) if dtype in (dtypes.int32, dtypes.int64) else ref)
  np.testing.assert_array_equal(Tensor.linspace(5, 10, 1, dtype=dtype).numpy(), [5])

@pytest.mark.cpu
@pytest.mark.parametrize("args,dtype", [((5,), dtypes.int32), ((5.0,), dtypes.float32), ((0, 5, 1.0), dtypes.float32), ((1, 5, 2), dtypes.int32),
                                        ((0.5, 3), dtypes.float32), ((3, -2, -1), dtypes.int32)])
def test_arange_result_dtype(args, dtype):
  t = Tensor.arange(*args)
  assert t.dtype == dtype
  np.testing.assert_array_equal(t.numpy(), np.arange(*args))
