# The PYTHON device: kernels render to Python (tinygrad/renderer/python.py) and run in this process; buffers are bytearrays.
# It needs no compiler and checks every memory access, so it is the reference the other devices are tested against.
from __future__ import annotations
import inspect
import itertools
import linecache
import time
from tinygrad.device import Compiled, Allocator, BufferSpec, Program
# the stored bits of bfloat16/fp8 <-> Python floats; its home is dtype.py, and tinygrad 0.14's tests import it from here
from tinygrad.dtype import from_storage_scalar, to_storage_scalar  # noqa: F401
from tinygrad.renderer.python import PythonRenderer, HELPERS

class PythonAllocator(Allocator['PythonDevice']):
  host_memory = True
  def _alloc(self, size:int, options:BufferSpec) -> memoryview: return memoryview(bytearray(size))
  def _as_buffer(self, src:memoryview) -> memoryview: return src
  def _copyin(self, dest:memoryview, src:memoryview): dest[:len(src)] = src
  def _copyout(self, dest:memoryview, src:memoryview): dest[:] = src[:len(dest)]
  def _offset(self, buf:memoryview, size:int, offset:int) -> memoryview: return buf[offset:offset+size]

class PythonProgram(Program['PythonDevice']):
  def __init__(self, dev:PythonDevice, name:str, lib:bytes, spec=None):
    super().__init__(dev, name, lib, spec)
    src = lib.decode()
    # register the source so tracebacks through a kernel show its lines
    fn = f"<tinygrad kernel {name} {id(self):x}>"
    linecache.cache[fn] = (len(src), None, src.splitlines(True), fn)
    ns = dict(HELPERS)
    exec(compile(src, fn, "exec"), ns)  # noqa: S102 - the source is our own rendering of a kernel
    self.fxn = ns["kernel"]
    self.gpu = "_gid" in (self.fxn.__kwdefaults__ or {})        # takes thread indices and workgroup memory
    self.lockstep = inspect.isgeneratorfunction(self.fxn)       # has barriers
  def __call__(self, *bufs:memoryview, global_size=(1, 1, 1), local_size=None, vals:tuple[int, ...]=(), wait:bool=False) -> float|None:
    self.check_args(bufs, vals)
    st = time.perf_counter()
    if self.gpu: self.run_grid(bufs, vals, tuple(global_size), tuple(local_size or (1, 1, 1)))
    elif self.spec is not None and (core := self.spec.core_id) is not None:
      for tid in range(global_size[0]): self.fxn(*bufs, *vals[:core], tid, *vals[core+1:])
    else: self.fxn(*bufs, *vals)
    return time.perf_counter() - st if wait else None
  def run_grid(self, bufs, vals, global_size:tuple[int, ...], local_size:tuple[int, ...]):
    """Every workgroup of the grid in turn; its threads share one dict of local memory and run in lock-step between barriers."""
    def grid(size): return [tuple(reversed(i)) for i in itertools.product(*(range(n) for n in reversed(size)))]  # dim 0 fastest
    core = self.spec.core_id if self.spec is not None else None
    for gid in grid(global_size):
      shared: dict = {}
      v = vals if core is None else (*vals[:core], gid[0], *vals[core+1:])  # a core_id kernel's launches are its "workgroups"
      threads = [self.fxn(*bufs, *v, _gid=gid, _lid=lid, _shared=shared) for lid in grid(local_size)]
      if not self.lockstep: continue  # plain functions ran when called
      while threads: threads = [t for t in threads if next(t, StopIteration) is not StopIteration]

class PythonDevice(Compiled):
  def __init__(self, device:str="PYTHON"): super().__init__(device, PythonAllocator(self), [PythonRenderer], PythonProgram)
