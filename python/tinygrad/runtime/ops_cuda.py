# The CUDA device (DEV=CUDA, CUDA:1, ... one per GPU) through NVIDIA's Python bindings, cuda-python: `cuda.bindings.driver` for memory,
# streams, events, modules and launches, `cuda.bindings.nvrtc` to compile (runtime/support/compiler_cuda.py). cuda-python is optional
# (pip install 'tinygrad[cuda]'): this module imports without it, and opening the device says whether cuda-python or a GPU is missing.
# Each device works in its GPU's primary context on one stream of its own: kernels and copies run in order on it, synchronize() waits
# for it, and a timed launch (wait=True) is measured with two events around it. An all-reduce between CUDA devices of this process is one
# NCCL collective (runtime/support/nccl.py: ncclCommInitAll over them, ncclAllReduce on each device's stream) where libnccl loads (NCCL=0:
# the scheduler's copies and adds instead).
from __future__ import annotations
import ctypes
import functools
import importlib.util
import sys
from typing import Any
from tinygrad.device import Compiled, LRUAllocator, BufferSpec, Program, Buffer, Device
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import DEV, NCCL, to_mv, suppress_finalizing
from tinygrad.renderer.cuda import CUDARenderer
from tinygrad.runtime.support.compiler_cuda import CUDACompiler, CUDA_EXTRA

def driver() -> Any:
  """cuda.bindings.driver, or a RuntimeError saying that cuda-python is missing and how to install it."""
  try: from cuda.bindings import driver as cu
  except ImportError as e: raise RuntimeError(f"DEV=CUDA needs cuda-python, which is not installed: {CUDA_EXTRA}") from e
  return cu

def _error(cu, err) -> str:
  name, msg = cu.cuGetErrorName(err)[1], cu.cuGetErrorString(err)[1]
  return f"{name.decode() if name else err}: {msg.decode() if msg else 'unknown error'}"

def check(ret:tuple, what:str) -> Any:
  """The value(s) of a driver call: cuda-python returns (CUresult, *values); anything but CUDA_SUCCESS raises naming the call."""
  cu = driver()
  if ret[0] != cu.CUresult.CUDA_SUCCESS: raise RuntimeError(f"CUDA: {what} failed with {_error(cu, ret[0])}")
  return None if len(ret) == 1 else ret[1] if len(ret) == 2 else ret[1:]

@functools.cache
def device_count() -> int:
  """How many GPUs the driver sees (after cuInit). Raises RuntimeError saying what is missing: cuda-python, the NVIDIA driver, a GPU."""
  cu = driver()
  try: ret = cu.cuInit(0)
  except Exception as e:  # cuda-python can't load libcuda (its loader raises its own error classes)
    raise RuntimeError(f"DEV=CUDA: cuda-python is installed, but the NVIDIA driver (libcuda) could not be loaded: {e}") from e
  if ret[0] != cu.CUresult.CUDA_SUCCESS: raise RuntimeError(f"DEV=CUDA: no usable NVIDIA GPU (cuInit failed with {_error(cu, ret[0])})")
  if (n := check(cu.cuDeviceGetCount(), "cuDeviceGetCount")) == 0: raise RuntimeError("DEV=CUDA: the NVIDIA driver is loaded but sees no GPU")
  return n

def _driver_library_present() -> bool:
  """Whether the NVIDIA driver's library loads: a cheap test before importing cuda-python (its driver module is slow to import)."""
  for name in ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so"):
    try:
      ctypes.CDLL(name)
      return True
    except OSError: pass
  return False

def cuda_usable() -> bool:
  """Whether DEV=CUDA would open: cuda-python, the driver and at least one GPU (the default device prefers it to the CPU). Where
  cuda-python is not installed or there is no driver, it says so without importing cuda-python."""
  if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None or not _driver_library_present(): return False
  try: return device_count() > 0
  except RuntimeError: return False

class CUDABuffer:
  """`size` bytes at address `ptr`: device memory, or pinned host memory (host=True); a view keeps its base alive through `base`."""
  __slots__ = ("ptr", "size", "host", "base")
  def __init__(self, ptr:int, size:int, host:bool=False, base:CUDABuffer|None=None): self.ptr, self.size, self.host, self.base = ptr, size, host, base
  def __repr__(self): return f"<CUDABuffer {'host ' if self.host else ''}{self.size} bytes at 0x{self.ptr:x}>"

_HOST = BufferSpec(host=True)
STAGING, MAX_PENDING = 16 << 20, 8   # copies go through pinned buffers of 16 MiB, at most 8 of them in flight

class CUDAAllocator(LRUAllocator['CUDADevice']):
  """Device memory from cuMemAlloc (256-byte aligned: the renderer's vector accesses rely on it), pinned host memory (BufferSpec(host=
  True)) from cuMemHostAlloc; both kept in the LRU cache when freed. Copies go through pinned staging buffers on the device's stream."""
  def _alloc(self, size:int, options:BufferSpec) -> CUDABuffer:
    cu = self.dev.driver()
    if options.external_ptr is not None: return CUDABuffer(options.external_ptr, size)
    if options.host: return CUDABuffer(int(check(cu.cuMemHostAlloc(size, 0), "cuMemHostAlloc")), size, host=True)
    ptr = int(check(cu.cuMemAlloc(size), "cuMemAlloc"))
    if options.zero: check(cu.cuMemsetD8Async(cu.CUdeviceptr(ptr), 0, size, self.dev.stream), "cuMemsetD8Async")
    return CUDABuffer(ptr, size)
  def _free(self, opaque:CUDABuffer, options:BufferSpec):
    if options.external_ptr is not None: return
    cu = self.dev.driver()
    self.dev.synchronize()   # a kernel or copy in flight may still use it
    if opaque.host: check(cu.cuMemFreeHost(opaque.ptr), "cuMemFreeHost")
    else: check(cu.cuMemFree(cu.CUdeviceptr(opaque.ptr)), "cuMemFree")
  def _copyin(self, dest:CUDABuffer, src:memoryview):
    cu = self.dev.driver()
    for off in range(0, len(src), STAGING):
      n = min(STAGING, len(src) - off)
      if len(self.dev.pending) >= MAX_PENDING: self.dev.synchronize()   # bounds the pinned memory a big copy holds
      staging = self.alloc(STAGING, _HOST)   # one size: the LRU cache hands the same few staging buffers out again
      to_mv(staging.ptr, n)[:] = src[off:off+n]   # the caller may reuse src at once: the copy reads the staging buffer
      check(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(dest.ptr + off), staging.ptr, n, self.dev.stream), "cuMemcpyHtoDAsync")
      self.dev.pending.append(staging)   # cached again at synchronize(), when the copy is done
  def _copyout(self, dest:memoryview, src:CUDABuffer):
    cu = self.dev.driver()
    staging = self.alloc(STAGING, _HOST)
    try:
      for off in range(0, len(dest), STAGING):
        n = min(STAGING, len(dest) - off)
        check(cu.cuMemcpyDtoHAsync(staging.ptr, cu.CUdeviceptr(src.ptr + off), n, self.dev.stream), "cuMemcpyDtoHAsync")
        self.dev.synchronize()   # after the kernels queued before it on the stream
        dest[off:off+n] = to_mv(staging.ptr, n)
    finally: self.free(staging, STAGING, _HOST)
  def _transfer(self, dest:CUDABuffer, src:CUDABuffer, size:int, src_dev:CUDADevice, dest_dev:CUDADevice):
    """A copy between two buffers on GPUs (the same or another), without the host. On one GPU the stream orders it; between two, it
    waits for what the source GPU still writes into src, and is done before either GPU's later work can change the buffers."""
    cu = dest_dev.driver()
    if src_dev is dest_dev:
      check(cu.cuMemcpyDtoDAsync(cu.CUdeviceptr(dest.ptr), cu.CUdeviceptr(src.ptr), size, dest_dev.stream), "cuMemcpyDtoDAsync")
      return
    src_dev.synchronize()
    check(cu.cuMemcpyPeerAsync(cu.CUdeviceptr(dest.ptr), dest_dev.context, cu.CUdeviceptr(src.ptr), src_dev.context, size, dest_dev.stream),
          "cuMemcpyPeerAsync")
    dest_dev.synchronize()
  def _offset(self, buf:CUDABuffer, size:int, offset:int) -> CUDABuffer: return CUDABuffer(buf.ptr + offset, size, buf.host, buf)

_ARG_CTYPES: dict[DType, type] = {dtypes.int8: ctypes.c_int8, dtypes.uint8: ctypes.c_uint8, dtypes.int16: ctypes.c_int16,
                                  dtypes.uint16: ctypes.c_uint16, dtypes.int32: ctypes.c_int32, dtypes.uint32: ctypes.c_uint32,
                                  dtypes.int64: ctypes.c_int64, dtypes.uint64: ctypes.c_uint64}

class CUDAProgram(Program['CUDADevice']):
  """A kernel loaded from a cubin (or PTX, which the driver compiles) with cuModuleLoadData, launched with cuLaunchKernel."""
  def __init__(self, dev:CUDADevice, name:str, lib:bytes, spec=None):
    super().__init__(dev, name, lib, spec)
    cu = dev.driver()
    self.module = check(cu.cuModuleLoadData(lib), f"cuModuleLoadData of kernel {name}")
    self.fxn = check(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name!r})")
    if spec is not None and (bad := [dt for dt in spec.var_dtypes if dt not in _ARG_CTYPES]):
      raise TypeError(f"kernel {name}: variables of dtype {bad} can't be passed")
    self.var_ctypes = [_ARG_CTYPES[dt] for dt in spec.var_dtypes] if spec is not None else None
  def __call__(self, *bufs:CUDABuffer, global_size:tuple[int, ...]=(1, 1, 1), local_size:tuple[int, ...]|None=None, vals:tuple[int, ...]=(),
               wait:bool=False) -> float|None:
    self.check_args(bufs, vals)
    cu, dev = self.dev.driver(), self.dev
    # kernelParams: an array of pointers, each to one argument's value (a device pointer is 8 bytes; variables as the kernel declares them)
    args = [ctypes.c_uint64(b.ptr) for b in bufs] + [t(v) for t, v in zip(self.var_ctypes or [ctypes.c_int32] * len(vals), vals)]
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args]) if args else None
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size or ()) + (1, 1, 1))[:3]
    if wait: check(cu.cuEventRecord(dev.events[0], dev.stream), "cuEventRecord")
    check(cu.cuLaunchKernel(self.fxn, *gs, *ls, 0, dev.stream, ctypes.addressof(params) if params is not None else None, None),
          f"cuLaunchKernel of {self.name} (global {gs}, local {ls})")
    if not wait: return None
    check(cu.cuEventRecord(dev.events[1], dev.stream), "cuEventRecord")
    check(cu.cuEventSynchronize(dev.events[1]), "cuEventSynchronize")
    return check(cu.cuEventElapsedTime(dev.events[0], dev.events[1]), "cuEventElapsedTime") * 1e-3
  @suppress_finalizing
  def __del__(self):
    if (module := getattr(self, "module", None)) is not None: self.dev.driver().cuModuleUnload(module)

class CUDADevice(Compiled):
  """One GPU: CUDA (the first), CUDA:1, ... The renderer and NVRTC target the GPU's compute capability (sm_<major><minor>)."""
  def __init__(self, device:str="CUDA"):
    n = device_count()
    idx = int(device.split(":")[1]) if ":" in device and device.split(":")[1].isdigit() else 0
    if idx >= n: raise RuntimeError(f"{device}: there {'is 1 GPU' if n == 1 else f'are {n} GPUs'} here (CUDA{'' if n == 1 else f' to CUDA:{n-1}'})")
    self.cu = cu = driver()   # kept: the device's objects are released through the module that made them
    self.cu_device = check(cu.cuDeviceGet(idx), "cuDeviceGet")
    self.context = check(cu.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
    self.driver()
    attr = cu.CUdevice_attribute
    major = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.cu_device), "cuDeviceGetAttribute")
    minor = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.cu_device), "cuDeviceGetAttribute")
    self.stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value), "cuStreamCreate")
    self.events = [check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT.value), "cuEventCreate") for _ in range(2)]
    self.pending: list[CUDABuffer] = []   # pinned staging buffers of copies in flight, cached again at synchronize()
    arch = f"sm_{major}{minor}"
    super().__init__(device, CUDAAllocator(self), [(CUDARenderer, lambda: CUDACompiler(DEV.target("CUDA", arch=arch).arch))], CUDAProgram,
                     arch=arch)
  def driver(self) -> Any:
    """cuda.bindings.driver with this GPU's context current in the calling thread (contexts are per thread; setting it is cheap)."""
    check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
    return self.cu
  @classmethod
  def has_all_reduce(cls, devices:tuple[str, ...], dtype:DType) -> bool:
    from tinygrad.runtime.support import nccl
    return bool(NCCL) and nccl.available() and nccl.supports(dtype.name)
  def all_reduce(self, op:str, dsts:list[Buffer], srcs:list[Buffer]) -> None:
    """One ncclAllReduce per GPU in one NCCL group, each on its device's stream: after what each device queued before, before what it
    queues next (no host synchronization)."""
    from tinygrad.runtime.support import nccl
    devs = [Device[b.device] for b in dsts]
    comms = _communicators(tuple(d.device_id for d in devs))
    with nccl.group():
      for comm, dev, dst, src in zip(comms, devs, dsts, srcs):
        comm.all_reduce(src._buf.ptr, dst._buf.ptr, dst.size, dst.dtype.name, op, int(dev.stream))
  def synchronize(self) -> None:
    check(self.driver().cuStreamSynchronize(self.stream), "cuStreamSynchronize")
    pending, self.pending = self.pending, []
    for b in pending: self.allocator.free(b, b.size, _HOST)

@functools.cache
def _communicators(device_ids:tuple[int, ...]) -> list:
  """The NCCL communicators of one set of this process's GPUs, rank i on device_ids[i]: made once, kept for the process."""
  from tinygrad.runtime.support import nccl
  return nccl.Communicator.init_all(list(device_ids))
