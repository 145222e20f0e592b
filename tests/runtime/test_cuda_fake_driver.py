# The CUDA runtime (tinygrad/runtime/ops_cuda.py) without a GPU: its driver calls go to a fake `cuda.bindings.driver` whose "device
# memory" is host memory. Every call the runtime makes is checked against the signature of the real cuda-python function of that name
# (so a wrong name or argument count fails here, not first on a GPU), and the fake checks what the real driver would: frees of
# unknown pointers, copies within their allocations, the kernel arguments' pointer array. Skips without cuda-python.
import ctypes
import inspect
import numpy as np
import pytest
from tinygrad.device import Device, Buffer, BufferSpec
from tinygrad.dtype import dtypes

real = pytest.importorskip("cuda.bindings.driver")
from tinygrad.runtime import ops_cuda  # noqa: E402

OK = real.CUresult.CUDA_SUCCESS

class FakeDriver:
  """The part of cuda.bindings.driver the runtime uses, on host memory. `launches` records (name, grid, block, decoded args)."""
  CUresult, CUdevice_attribute, CUstream_flags, CUevent_flags = real.CUresult, real.CUdevice_attribute, real.CUstream_flags, real.CUevent_flags
  def __init__(self, gpus:int=2):
    self.gpus, self.allocs, self.launches, self.calls = gpus, {}, [], []
    self.arg_layout: dict[str, list] = {}   # kernel name -> ctypes type of each argument, as the kernel image would say
  def __getattribute__(self, name):
    attr = object.__getattribute__(self, name)
    if name.startswith("cu") and name[2].isupper() and callable(attr):
      sig = inspect.signature(getattr(real, name))
      def checked(*args):
        sig.bind(*args)   # raises TypeError for a wrong argument count, as the real binding would
        object.__getattribute__(self, "calls").append(name)
        return attr(*args)
      return checked
    return attr
  @staticmethod
  def CUdeviceptr(p): return int(p)
  def _span(self, p:int, n:int):
    assert any(base <= p and p + n <= base + len(buf) for base, buf in self.allocs.items()), f"{n} bytes at 0x{p:x} are not allocated"
  def _alloc(self, n:int) -> int:
    buf = (ctypes.c_char * n)()
    self.allocs[ctypes.addressof(buf)] = buf
    return ctypes.addressof(buf)
  def _free(self, p:int):
    assert p in self.allocs, f"free of 0x{p:x}, which is not an allocation"
    del self.allocs[p]
  def cuInit(self, flags): return (OK,)
  def cuDeviceGetCount(self): return (OK, self.gpus)
  def cuDeviceGet(self, i): return (OK, i)
  def cuDevicePrimaryCtxRetain(self, dev): return (OK, f"ctx{dev}")
  def cuCtxSetCurrent(self, ctx): return (OK,)
  def cuDeviceGetAttribute(self, attr, dev):
    return (OK, 8 if attr is real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR else 6)
  def cuStreamCreate(self, flags): return (OK, object())
  def cuStreamSynchronize(self, stream): return (OK,)
  def cuEventCreate(self, flags): return (OK, object())
  def cuEventRecord(self, ev, stream): return (OK,)
  def cuEventSynchronize(self, ev): return (OK,)
  def cuEventElapsedTime(self, a, b): return (OK, 0.25)
  def cuMemAlloc(self, n): return (OK, self._alloc(n))
  def cuMemHostAlloc(self, n, flags): return (OK, self._alloc(n))
  def cuMemFree(self, p):
    self._free(int(p))
    return (OK,)
  def cuMemFreeHost(self, p): return self.cuMemFree(p)
  def cuMemsetD8Async(self, p, v, n, stream):
    self._span(int(p), n)
    ctypes.memset(int(p), v, n)
    return (OK,)
  def _copy(self, dst, src, n):
    self._span(int(dst), n)
    self._span(int(src), n)
    ctypes.memmove(int(dst), int(src), n)
    return (OK,)
  def cuMemcpyHtoDAsync(self, dst, src, n, stream): return self._copy(dst, src, n)
  def cuMemcpyDtoHAsync(self, dst, src, n, stream): return self._copy(dst, src, n)
  def cuMemcpyDtoDAsync(self, dst, src, n, stream): return self._copy(dst, src, n)
  def cuMemcpyPeerAsync(self, dst, dctx, src, sctx, n, stream): return self._copy(dst, src, n)
  def cuModuleLoadData(self, image): return (OK, bytes(image))
  def cuModuleGetFunction(self, mod, name): return (OK, name.decode())
  def cuModuleUnload(self, mod): return (OK,)
  def cuLaunchKernel(self, f, gx, gy, gz, lx, ly, lz, smem, stream, params, extra):
    if (types := self.arg_layout.get(f)) is None:   # a kernel NVRTC compiled: only its launch is recorded
      self.launches.append((f, (gx, gy, gz), (lx, ly, lz), None))
      return (OK,)
    ptrs = (ctypes.c_void_p * len(types)).from_address(params) if types else []
    args = [t.from_address(p).value for t, p in zip(types, ptrs)]
    self.launches.append((f, (gx, gy, gz), (lx, ly, lz), args))
    return (OK,)
  def cuGetErrorName(self, err): return (OK, err.name.encode())
  def cuGetErrorString(self, err): return (OK, b"fake error")

@pytest.fixture
def fake(monkeypatch):
  drv = FakeDriver()
  monkeypatch.setattr(ops_cuda, "driver", lambda: drv)
  monkeypatch.setattr(ops_cuda, "_driver_library_present", lambda: True)
  ops_cuda.device_count.cache_clear()
  opened = {name: ops_cuda.CUDADevice(name) for name in ("CUDA", "CUDA:1")}
  for name, dev in opened.items(): monkeypatch.setitem(Device._opened, name, dev)
  yield drv
  ops_cuda.device_count.cache_clear()

def test_device_reads_the_compute_capability(fake):
  dev = Device["CUDA"]
  assert dev.arch == "sm_86" and dev.renderer.arch == "sm_86" and type(dev.renderer).__name__ == "CUDARenderer"
  assert ops_cuda.cuda_usable()
  with pytest.raises(RuntimeError, match=r"there are 2 GPUs here \(CUDA to CUDA:1\)"): ops_cuda.CUDADevice("CUDA:2")

def test_copies_round_trip_through_pinned_staging(fake):
  x = np.arange(1000, dtype=np.float32)
  buf = Buffer("CUDA", 1000, dtypes.float32).copyin(memoryview(x))
  assert "cuMemHostAlloc" in fake.calls and "cuMemcpyHtoDAsync" in fake.calls
  np.testing.assert_array_equal(buf.numpy(), x)
  # a view reads from its offset; a copy to the other GPU and back to the first goes device to device
  np.testing.assert_array_equal(buf.view(10, dtypes.float32, 40).numpy(), x[10:20])
  other = Buffer("CUDA:1", 1000, dtypes.float32).copy_from(buf)
  assert "cuMemcpyPeerAsync" in fake.calls
  np.testing.assert_array_equal(Buffer("CUDA", 1000, dtypes.float32).copy_from(other).numpy(), x)
  same = Buffer("CUDA", 1000, dtypes.float32).copy_from(buf)
  assert "cuMemcpyDtoDAsync" in fake.calls
  np.testing.assert_array_equal(same.numpy(), x)

def test_big_copies_go_in_chunks_through_a_few_staging_buffers(fake, monkeypatch):
  monkeypatch.setattr(ops_cuda, "STAGING", 1000)
  x = np.arange(10_000, dtype=np.uint8) * 7
  buf = Buffer("CUDA", 10_000, dtypes.uint8).copyin(memoryview(x))
  assert fake.calls.count("cuMemcpyHtoDAsync") == 10 and fake.calls.count("cuMemHostAlloc") <= ops_cuda.MAX_PENDING
  np.testing.assert_array_equal(buf.numpy(), x)
  assert fake.calls.count("cuMemcpyDtoHAsync") == 10

def test_freed_memory_is_cached_then_released(fake):
  dev = Device["CUDA"]
  a = dev.allocator.alloc(256)
  dev.allocator.free(a, 256)
  assert dev.allocator.alloc(256) is a   # the LRU cache hands it out again
  dev.allocator.free(a, 256)
  dev.allocator.free_cache()
  assert a.ptr not in fake.allocs and "cuMemFree" in fake.calls
  z = dev.allocator.alloc(64, BufferSpec(zero=True))
  assert bytes((ctypes.c_char * 64).from_address(z.ptr)) == bytes(64)

def test_launch_passes_pointers_and_variables(fake):
  from tinygrad.renderer import ProgramSpec
  dev = Device["CUDA"]
  bufs = [dev.allocator.alloc(64) for _ in range(2)]
  fake.arg_layout["k"] = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64]
  from tinygrad.uop import Ops
  from tinygrad.uop.ops import UOp, ParamArg
  from tinygrad.dtype import AddrSpace
  vars_ = tuple(UOp(Ops.PARAM, dt, (), ParamArg(i, dt, name=n, addrspace=AddrSpace.ALU)) for i, (n, dt) in enumerate([("n", dtypes.int32),
                                                                                                                      ("m", dtypes.int64)]))
  spec = ProgramSpec("k", "", "CUDA", (), (0, 1), (dtypes.float, dtypes.float), (0,), (1,), vars_)
  prg = ops_cuda.CUDAProgram(dev, "k", b"\x7fELF fake cubin", spec)
  t = prg(*bufs, global_size=(4, 2, 1), local_size=(32, 1, 1), vals=(7, 2**40), wait=True)
  assert t == pytest.approx(0.25e-3)
  assert fake.launches[-1] == ("k", (4, 2, 1), (32, 1, 1), [bufs[0].ptr, bufs[1].ptr, 7, 2**40])
  with pytest.raises(TypeError, match="takes 2 buffer"): prg(bufs[0], vals=(1, 2))

def test_driver_errors_name_the_call(fake, monkeypatch):
  dev = Device["CUDA"]
  monkeypatch.setattr(fake, "cuMemAlloc", lambda n: (real.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))
  with pytest.raises(MemoryError, match="allocation of .* failed on CUDA") as e: dev.allocator.alloc(1 << 20)
  assert "cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY" in str(e.value.__cause__)

def test_tensor_program_compiles_loads_and_launches(fake):
  from tinygrad.runtime.support.compiler_cuda import nvrtc_version
  try: nvrtc_version()
  except Exception: pytest.skip("no NVRTC (pip install '.[cuda]')")
  from tinygrad import Tensor
  x = Tensor(np.arange(4096, dtype=np.float32), device="CUDA")
  (x * 2).realize()
  name, grid, block, _ = fake.launches[-1]
  assert "cuModuleLoadData" in fake.calls and name.startswith("E_")
  assert grid[0] * block[0] * 4 == 4096   # the elementwise kernel's launch covers the 4096 outputs (4 a thread)
