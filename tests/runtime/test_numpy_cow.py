# Tensor.numpy() of a large CPU tensor shares the buffer's pages copy-on-write: no copy, yet the array stays writable and independent.
# Buffers are private memory with transparent huge pages until numpy() first exports them, which moves them into a memfd at the same
# address.
import gc
import os
import numpy as np
import pytest
import tinygrad.runtime.ops_cpu as ops_cpu
from tinygrad import Tensor, TinyJit, Device, dtypes
from tinygrad.device import Buffer, BufferSpec

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

def _mapping(addr:int) -> tuple[str, dict[str, str]]:
  """The path (empty for anonymous memory) and the fields of the /proc/self/smaps entry holding addr."""
  found, path, fields = False, "", {}
  with open("/proc/self/smaps") as f:
    for line in f:
      head = line.split()
      if "-" in head[0] and not head[0].endswith(":"):   # a mapping's header: "start-end perms offset dev inode [path]"
        if found: break
        lo, hi = (int(x, 16) for x in head[0].split("-"))
        found, path = lo <= addr < hi, " ".join(head[5:])
      elif found: fields[head[0].rstrip(":")] = head[1]
  assert found, f"0x{addr:x} is not mapped"
  return path, fields

def _thp_madvise() -> bool:
  try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f: return "[never]" not in f.read()
  except OSError: return False

needs_smaps = pytest.mark.skipif(not os.path.exists("/proc/self/smaps") or not hasattr(os, "memfd_create"), reason="needs Linux /proc")
M = 16 << 20 >> 2   # 16 MiB of float32: several huge pages

@needs_smaps
@pytest.mark.skipif(not _thp_madvise(), reason="transparent huge pages are off on this machine")
def test_large_buffers_are_private_huge_page_memory():
  t = (Tensor.arange(M + 1024 * 5).float() + 1).realize()   # a size the allocator's cache doesn't hold (an exported buffer is a memfd's)
  root = _root(t)
  path, fields = _mapping(root.addr)
  # anonymous private memory that may get huge pages (the field is in smaps since Linux 5.0), not shmem
  assert path == "" and fields.get("THPeligible", "1") == "1", (path, fields)
  assert root.addr % ops_cpu.HUGE_PAGE == 0 and root.fd is None
  assert _mapping(_root(Tensor.arange(1000).realize()).addr)[0] == ""   # small buffers are private anonymous memory too

@needs_smaps
def test_first_numpy_moves_the_buffer_into_a_memfd_at_the_same_address():
  t = (Tensor.arange(M).float() * 3).realize()
  root, addr = _root(t), _root(t).addr
  a = t.numpy()
  assert root.fd is not None and root.addr == addr and _mapping(addr)[0].startswith("/memfd:tinygrad")
  assert _mapping(a.ctypes.data)[0].startswith("/memfd:tinygrad")   # the array maps the same memfd: its pages are shared, not copied
  b = t.numpy()
  assert len(root.cow) == 2 and a[7] == b[7] == 21 and a[-1] == 3 * (M - 1)
  t.assign(t + 1).realize()                                           # a kernel writes the buffer in place, at the same address
  assert _root(t) is root and t[7].item() == 22 and a[7] == b[7] == 21
  np.testing.assert_array_equal(a, np.arange(M, dtype=np.float32) * 3)

@needs_smaps
def test_jit_replays_write_an_exported_buffer_in_place():
  w = Tensor.zeros(M).contiguous().realize()
  @TinyJit
  def step(x:Tensor) -> Tensor:
    w.assign(w + x).realize()
    return (w * 1).realize()
  seen = []
  for i in range(5):
    step(Tensor.full((M,), float(i)).contiguous())
    seen.append(w.numpy())                                            # from the second call on, the buffer already lives in a memfd
  assert [float(s[M // 2]) for s in seen] == [0, 1, 3, 6, 10] and [float(s[-1]) for s in seen] == [0, 1, 3, 6, 10]

@needs_smaps
@pytest.mark.parametrize("old_pages", ["kept", "lost"])
def test_a_failed_move_copies_or_raises(monkeypatch, old_pages):
  class Libc:   # MAP_FIXED fails (as out of mappings); madvise tells whether the old pages are still mapped
    def mmap(self, *args): return None
    def madvise(self, *args): return 0 if old_pages == "kept" else -1
  t = (Tensor.arange(M + 1024 * (3 + (old_pages == "lost"))).float() + 2).realize()   # sizes the allocator's cache doesn't hold
  monkeypatch.setattr(ops_cpu, "_libc", Libc)
  held = ops_cpu._fds_held
  if old_pages == "kept":
    a = t.numpy()                                                      # a copy, and the buffer stays private memory
    assert _root(t).fd is None and _mapping(_root(t).addr)[0] == "" and a[3] == 5 and ops_cpu._fds_held == held
    a[3] = 0
    assert t[3].item() == 5
  else:
    with pytest.raises(MemoryError, match="unmapped"): t.numpy()
    assert ops_cpu._fds_held == held and _root(t).fd is None

def test_external_memory_is_copied():
  host = np.arange(M, dtype=np.float32)
  b = Buffer("CPU", M, dtypes.float32, options=BufferSpec(external_ptr=host.ctypes.data)).allocate()
  assert b.private_view() is None
  a = b.numpy(share=True)
  a[0] = 5
  assert host[0] == 0 and a[1] == 1

@pytest.mark.parametrize("why", ["memfd fails", "memfd limit"])
def test_without_memfd_numpy_copies(monkeypatch, why):
  def no_memfd(*args): raise OSError(24, "Too many open files")
  if why == "memfd fails": monkeypatch.setattr(ops_cpu.os, "memfd_create", no_memfd)
  else: monkeypatch.setattr(ops_cpu, "fd_budget", lambda: ops_cpu._fds_held)
  t = (Tensor.arange(N + 4096 * (why == "memfd limit") + 4096).float() + 3).realize()   # sizes the allocator's cache doesn't hold
  if Device[t.device].allocator.__class__ is not ops_cpu.CPUAllocator: pytest.skip("not the CPU allocator")
  a = t.numpy()
  assert _root(t).fd is None and not _root(t).cow   # the buffer stays where it was, and numpy() copied it
  a[0] = 0
  assert t[0].item() == 3 and a[1] == 4
