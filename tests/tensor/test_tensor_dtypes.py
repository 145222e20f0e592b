# Every dtype through the Tensor pipeline, on CPU (compiled C) and PYTHON (interpreted linear UOps), against numpy.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.dtype import _to_np_dtype
from tinygrad.helpers import GlobalCounters

DEVICES = ["PYTHON", pytest.param("CPU", marks=pytest.mark.cpu)]
DTYPES = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
          dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.bool]

def np_of(dt): return np.float32 if dt is dtypes.bfloat16 else _to_np_dtype(dt)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_dtype_ops(device, dt):
  data = [[1, 2, 3], [4, 5, 0]]
  ref = np.array(data).astype(np_of(dt))
  a = Tensor(data, dtype=dt, device=device)
  assert a.dtype is dt and a.device == device
  np.testing.assert_equal(a.numpy(), ref)
  np.testing.assert_equal((a + a).numpy(), (ref + ref) if dt is not dtypes.bool else ref | ref)
  np.testing.assert_equal((a * a).numpy(), (ref * ref) if dt is not dtypes.bool else ref & ref)
  np.testing.assert_equal(a.max(0).numpy(), ref.max(0))
  np.testing.assert_equal(a.min(1).numpy(), ref.min(1))
  np.testing.assert_equal(a.T.contiguous().numpy(), ref.T)
  np.testing.assert_equal(a[:, ::-1].numpy(), ref[:, ::-1])
  np.testing.assert_equal(a.pad(((1, 0), (0, 1))).numpy(), np.pad(ref, ((1, 0), (0, 1))))
  np.testing.assert_equal((a < 2).numpy(), ref < 2)
  np.testing.assert_equal(a.cast(dtypes.float32).numpy(), ref.astype(np.float32))
  s = a.sum(1)
  assert s.dtype is {dtypes.bool: dtypes.int32, dtypes.int8: dtypes.int32, dtypes.int16: dtypes.int32, dtypes.uint8: dtypes.uint32,
                     dtypes.uint16: dtypes.uint32}.get(dt, dt)
  np.testing.assert_equal(s.numpy(), ref.astype(np.int64 if dt is dtypes.bool else ref.dtype).sum(1).astype(np_of(s.dtype)))

@pytest.mark.parametrize("device", DEVICES)
def test_pipeline_on_device(device):
  a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
  x = Tensor(a, device=device)
  m = x - x.max(1, keepdim=True)
  e = m.exp()
  np.testing.assert_allclose((e / e.sum(1, keepdim=True)).numpy(), np.exp(a - a.max(1, keepdims=True)) /
                             np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-4, atol=1e-5)
  assert Tensor.full((2, 2), 5, device=device).tolist() == [[5, 5], [5, 5]]

@pytest.mark.cpu
def test_shifted_sums_do_not_blow_up():
  x, r = Tensor(np.arange(40, dtype=np.float32)), np.arange(40, dtype=np.float32)
  for _ in range(20):
    x, r = x[1:] + x[:-1], r[1:] + r[:-1]
  GlobalCounters.reset()
  np.testing.assert_allclose(x.numpy(), r, rtol=1e-6)
  assert GlobalCounters.kernel_count < 20

@pytest.mark.cpu
def test_odd_shapes():
  for shape in [(1,), (1, 1), (1, 5), (5, 1), (0,), (3, 0, 2), ()]:
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    t = Tensor(a)
    np.testing.assert_equal((t * 2).numpy(), a * 2)
    np.testing.assert_equal(t.sum().numpy(), a.sum())
    if a.ndim: np.testing.assert_equal(t.max(-1).numpy(), a.max(-1) if a.shape[-1] else np.full(a.shape[:-1], -np.inf, np.float32))
