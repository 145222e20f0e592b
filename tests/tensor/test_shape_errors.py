# The errors stack, indexing and reshape raise for bad arguments: torch's exception types (reshape: 0.14's ValueError), each
# message naming the shapes involved; a valid call next to each shows the check is not over-eager.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

@pytest.mark.cpu
def test_stack_errors():
  with pytest.raises(RuntimeError, match=r"one shape, got \[\(2,\), \(3,\)\]"): Tensor.stack(Tensor([1, 2]), Tensor([1, 2, 3]))
  with pytest.raises(IndexError, match=r"dimension 3 is out of range"): Tensor.stack(Tensor([1, 2]), Tensor([1, 2]), dim=3)
  np.testing.assert_array_equal(Tensor.stack(Tensor([1, 2]), Tensor([3, 4]), dim=-1).numpy(), [[1, 3], [2, 4]])

@pytest.mark.cpu
def test_indexing_errors():
  t = Tensor([1, 2, 3])
  with pytest.raises(IndexError, match=r"dtypes.float is not supported"): t[Tensor([1.0])]
  with pytest.raises(IndexError, match=r"too many indices"): t[0, 0]
  with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 0 with size 3"): t[5]
  with pytest.raises(IndexError, match=r"single ellipsis"): t[..., ...]
  np.testing.assert_array_equal(t[Tensor([2, 0, -1])].numpy(), [3, 1, 3])

@pytest.mark.parametrize("shape", [(4,), (-2, 3), (0, 6), (-1, 4), (7, -1)])
def test_reshape_size_mismatch_is_value_error(shape):
  with pytest.raises(ValueError, match=r"size mismatch, can't reshape \(6,\)"): Tensor.ones(6).reshape(shape)

def test_reshape_two_inferred_dims():
  with pytest.raises(RuntimeError, match=r"only one dimension can be inferred"): Tensor.ones(6).reshape(-1, -1)
  assert Tensor.ones(6).reshape(-1, 3).shape == (2, 3)

def test_stack_of_a_sequence_and_more_tensors_is_a_value_error():
  a = Tensor.ones(2, 3)
  with pytest.raises(ValueError, match="one sequence of tensors"): Tensor.stack((a, a), a)
  assert Tensor.stack((a, a)).shape == Tensor.stack(a, a).shape == (2, 2, 3)

def test_index_tensors_that_do_not_broadcast_are_an_index_error():
  with pytest.raises(IndexError, match=r"\(2,\), \(3,\)"): Tensor.ones(4, 4)[Tensor([0, 1]), Tensor([0, 1, 2])]

@pytest.mark.cpu
def test_linspace_bool_and_arange_past_its_dtype():
  with pytest.raises(ValueError, match="bool"): Tensor.linspace(0, 1, 5, dtype=dtypes.bool)
  with pytest.raises(OverflowError, match="not representable"): Tensor.arange(0, 300, dtype=dtypes.uint8)
  with pytest.raises(OverflowError): Tensor.arange(-1, 5, dtype=dtypes.uint32)
  assert Tensor.arange(0, 256, dtype=dtypes.uint8).numpy()[-1] == 255
