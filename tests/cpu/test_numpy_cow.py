# Tensor.numpy() of a large CPU tensor shares the buffer's pages copy-on-write: no copy, yet the array stays writable and independent.
import gc
import numpy as np
import pytest
import tinygrad.runtime.ops_cpu as ops_cpu
from tinygrad import Tensor, Device, dtypes

pytestmark = pytest.mark.cpu
N = (1 << 20) // 4 * 3   # 3 MiB of float32: above COW_MIN_BYTES

def _root(t:Tensor) -> ops_cpu.CPUBuffer: return ops_cpu._root(t._buffer()._buf)

def test_numpy_shares_pages_and_stays_independent():
  t = (Tensor.arange(N).float() * 2).realize()
  a = t.numpy()
  assert _root(t).fd is not None and len(_root(t).cow) == 1   # a private mapping of the buffer's memfd, not a copy
  assert a.flags.writeable and a.shape == (N,) and a[5] == 10 and a[-1] == 2 * (N - 1)
  a[:10] = -1                                                  # the array's writes stay in the array
  assert t[:3].tolist() == [0, 2, 4] and t.numpy()[0] == 0
  b = t.numpy().reshape(-1)
  assert b[0] == 0 and a[0] == -1

def test_writes_to_the_buffer_never_reach_an_array():
  t = (Tensor.arange(N).float() + 1).realize()
  a = t.numpy()
  t._buffer().copyin(np.zeros(N, np.float32).data)             # a low-level write into the tensor's memory
  assert a[0] == 1 and a[-1] == N and t.numpy()[-1] == 0
  del t
  gc.collect()
  # the freed memory goes back to the allocator's cache and is overwritten by the next kernel of the same size
  u = (Tensor.arange(N).float() * 0 + 7).realize()
  assert u.numpy()[0] == 7 and a[0] == 1 and a[-1] == N
  np.testing.assert_array_equal(a, np.arange(N, dtype=np.float32) + 1)

def test_views_and_dtypes():
  t = (Tensor.arange(N, dtype=dtypes.int32) - 5).realize()
  np.testing.assert_array_equal(t[1001:].numpy(), np.arange(1001, N, dtype=np.int32) - 5)   # a view at an unaligned offset
  np.testing.assert_array_equal(t.reshape(3, -1).numpy()[2], np.arange(2 * N // 3, N, dtype=np.int32) - 5)
  h = Tensor.arange(N).cast(dtypes.bfloat16).realize()         # bfloat16 converts, so it copies
  assert h.numpy().dtype == np.float32 and h.numpy()[3] == 3
  small = Tensor([1, 2, 3])
  s = small.numpy()
  s[0] = 9
  assert small.tolist() == [1, 2, 3]

@pytest.mark.parametrize("why", ["memfd fails", "memfd limit"])
def test_without_memfd_numpy_copies(monkeypatch, why):
  def no_memfd(*args): raise OSError(24, "Too many open files")
  if why == "memfd fails": monkeypatch.setattr(ops_cpu.os, "memfd_create", no_memfd)
  else: monkeypatch.setattr(ops_cpu, "fd_budget", lambda: ops_cpu._fds_held)
  t = (Tensor.arange(N + 4096 * (why == "memfd limit") + 4096).float() + 3).realize()   # sizes the allocator's cache doesn't hold
  if Device[t.device].allocator.__class__ is not ops_cpu.CPUAllocator: pytest.skip("not the CPU allocator")
  assert _root(t).fd is None
  a = t.numpy()
  a[0] = 0
  assert t[0].item() == 3 and a[1] == 4
