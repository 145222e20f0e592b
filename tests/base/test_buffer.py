# Buffer bookkeeping on the PYTHON device (no compiler): lazy allocation, copies, views, refcounts, memory accounting,
# zero-copy views, the LRU allocator, numpy conversion and pickling.
import pickle
import numpy as np
import pytest
from tinygrad.device import Buffer, BufferSpec, LRUAllocator, Device
from tinygrad.dtype import dtypes
from tinygrad.helpers import GlobalCounters, Context

def test_lazy_allocation_and_roundtrip():
  b = Buffer("python", 4, dtypes.int32)
  assert b.device == "PYTHON" and b.nbytes == 16 and not b.is_allocated()
  b.copyin(np.arange(4, dtype=np.int32).data)
  assert b.is_allocated()
  np.testing.assert_array_equal(b.numpy(), [0, 1, 2, 3])
  out = bytearray(16)
  b.copyout(memoryview(out))
  assert np.frombuffer(out, np.int32).tolist() == [0, 1, 2, 3]

def test_bad_input():
  with pytest.raises(TypeError, match="dtype must be a DType"): Buffer("PYTHON", 4, "float")
  with pytest.raises(ValueError, match="size must be an int >= 0, got -1"): Buffer("PYTHON", -1, dtypes.float)
  with pytest.raises(ValueError, match="can't hold dtypes.weakint"): Buffer("PYTHON", 1, dtypes.weakint)
  b = Buffer("PYTHON", 4, dtypes.float)
  with pytest.raises(ValueError, match="copyin of 8 bytes into .* of 16 bytes"): b.copyin(bytes(8))
  with pytest.raises(RuntimeError, match="never allocated"): b.copyout(bytearray(16))
  b.ensure_allocated()
  with pytest.raises(ValueError, match="into 4 bytes"): b.copyout(bytearray(4))
  with pytest.raises(ValueError, match="writable"): b.copyout(memoryview(bytes(16)))
  with pytest.raises(ValueError, match="C-contiguous"): b.copyin(np.zeros(8, np.float32)[::2].data)
  with pytest.raises(TypeError, match="bytes-like"): b.copyin([1, 2, 3, 4])
  with pytest.raises(RuntimeError, match="already allocated"): b.allocate()

def test_views_share_memory():
  base = Buffer("PYTHON", 8, dtypes.int32).copyin(np.arange(8, dtype=np.int32).data)
  v = base.view(2, dtypes.int32, 8)
  assert v.base is base and v.offset == 8
  np.testing.assert_array_equal(v.numpy(), [2, 3])
  v.copyin(np.array([20, 30], np.int32).data)
  np.testing.assert_array_equal(base.numpy(), [0, 1, 20, 30, 4, 5, 6, 7])
  assert base.allocated_views == 1
  vv = v.view(1, dtypes.int32, 4)  # a view of a view is a view of the base
  assert vv.base is base and vv.offset == 12 and vv.numpy().tolist() == [30]
  with pytest.raises(ValueError, match="doesn't fit"): base.view(4, dtypes.int32, 20)
  with pytest.raises(ValueError, match="outside"): base.view(1, dtypes.int32, 32)

def test_refcount_and_memory_accounting():
  before = GlobalCounters.mem_used
  b = Buffer("PYTHON", 256, dtypes.float32, uop_refcount=1)
  assert b.uop_refcount == 1 and b.view(1, dtypes.float32, 0).ref(2).uop_refcount == 3
  b.allocate()
  assert GlobalCounters.mem_used == before + 1024 and GlobalCounters.mem_used_per_device["PYTHON"] >= 1024
  b.deallocate()
  assert GlobalCounters.mem_used == before and not b.is_allocated()
  with pytest.raises(RuntimeError, match="not allocated"): b.deallocate()
  del b  # deallocated already: nothing to free again
  c = Buffer("PYTHON", 64, dtypes.uint8).ensure_allocated()
  del c
  assert GlobalCounters.mem_used == before

def test_caller_owned_memory_is_not_freed():
  mem = memoryview(bytearray(8))
  b = Buffer("PYTHON", 2, dtypes.int32, opaque=mem)
  b.copyin(np.array([5, 6], np.int32).data)
  assert bytes(mem) == np.array([5, 6], np.int32).tobytes()
  b.deallocate()

def test_zero_copy():
  b = Buffer("PYTHON", 4, dtypes.float32).copyin(np.ones(4, np.float32).data)
  arr = b.numpy(zero_copy=True)
  b.copyin(np.full(4, 2, np.float32).data)
  assert arr.tolist() == [2, 2, 2, 2]  # the same memory
  assert b.numpy().tolist() == [2, 2, 2, 2] and b.as_buffer().obj is not b._buf.obj

def test_zero_size_and_initial_value():
  z = Buffer("PYTHON", 0, dtypes.float32).ensure_allocated()
  assert z.numpy().shape == (0,) and z.copyin(b"").nbytes == 0
  b = Buffer("PYTHON", 2, dtypes.int16, initial_value=np.array([7, -7], np.int16).tobytes())
  assert b.numpy().tolist() == [7, -7]

def test_numpy_conversions():
  bf = Buffer("PYTHON", 2, dtypes.bfloat16).copyin(np.array([0x3f80, 0xc000], np.uint16).data)
  assert bf.numpy().dtype == np.float32 and bf.numpy().tolist() == [1.0, -2.0]
  h = Buffer("PYTHON", 1, dtypes.half).copyin(np.array([1.5], np.float16).data)
  assert h.numpy().dtype == np.float16 and h.numpy().tolist() == [1.5]
  f8 = Buffer("PYTHON", 1, dtypes.fp8e4m3).copyin(bytes([0x38]))
  assert f8.numpy().tolist() == [1.0]

def test_pickle():
  b = Buffer("PYTHON", 3, dtypes.int32).copyin(np.array([1, 2, 3], np.int32).data)
  b2 = pickle.loads(pickle.dumps(b))
  assert b2 is not b and b2.numpy().tolist() == [1, 2, 3] and b2.device == "PYTHON"
  assert not pickle.loads(pickle.dumps(Buffer("PYTHON", 3, dtypes.int32))).is_allocated()

def test_max_buffer_size():
  with Context(MAX_BUFFER_SIZE=10):
    with pytest.raises(MemoryError, match="MAX_BUFFER_SIZE=10"): Buffer("PYTHON", 11, dtypes.uint8).allocate()
    Buffer("NULL", 11, dtypes.uint8).allocate()  # NULL allocates nothing

class _CountingAllocator(LRUAllocator):
  def __init__(self):
    super().__init__(Device["PYTHON"])
    self.allocs, self.frees = 0, 0
  def _alloc(self, size, options):
    self.allocs += 1
    return bytearray(size)
  def _free(self, opaque, options): self.frees += 1

def test_lru_allocator():
  a = _CountingAllocator()
  x = a.alloc(16)
  a.free(x, 16)
  assert a.alloc(16) is x and a.allocs == 1           # reused
  a.free(x, 16, BufferSpec(nolru=True))
  assert a.frees == 1 and a.alloc(16) is not x        # nolru really frees
  with Context(LRU=0):
    y = a.alloc(8)
    a.free(y, 8)
  assert a.frees == 2
  z = a.alloc(32)
  a.free(z, 32)
  a.free_cache()
  assert a.frees == 3 and not any(a.cache.values())

def test_cpu_buffers_are_aligned_host_memory():
  # allocating on CPU needs no compiler
  b = Buffer("CPU", 100, dtypes.float32).copyin(np.arange(100, dtype=np.float32).data)
  assert b._buf.addr % 64 == 0
  v = b.view(10, dtypes.float32, 40)
  assert v.numpy().tolist() == list(range(10, 20)) and v._buf.addr == b._buf.addr + 40

def test_cpu_zero_copy_memory_is_not_reused():
  b = Buffer("CPU", 16, dtypes.int32).copyin(np.arange(16, dtype=np.int32).data)
  arr, addr = b.numpy(zero_copy=True), b._buf.addr
  del b  # freed, but arr still sees the memory: it must not go back to the allocator's cache
  others = [Buffer("CPU", 16, dtypes.int32).copyin(np.full(16, -1, np.int32).data) for _ in range(3)]
  assert all(o._buf.addr != addr for o in others) and arr.tolist() == list(range(16))
  c = Buffer("CPU", 16, dtypes.int32).ensure_allocated()
  caddr = c._buf.addr
  del c  # not exported: the cache hands the same memory out again
  assert Buffer("CPU", 16, dtypes.int32).ensure_allocated()._buf.addr == caddr
