# The PYTHON device: kernels render to Python (tinygrad/renderer/python.py) and run in this process; buffers are bytearrays.
# It needs no compiler and checks every memory access, so it is the reference the other devices are tested against.
from __future__ import annotations
import linecache
import time
from tinygrad.device import Compiled, Allocator, BufferSpec, Program
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
  def __call__(self, *bufs:memoryview, global_size=(1, 1, 1), local_size=None, vals:tuple[int, ...]=(), wait:bool=False) -> float|None:
    self.check_args(bufs, vals)
    st = time.perf_counter()
    if self.spec is None or (core := self.spec.core_id) is None: self.fxn(*bufs, *vals)
    else:
      for tid in range(global_size[0]): self.fxn(*bufs, *vals[:core], tid, *vals[core+1:])
    return time.perf_counter() - st if wait else None

class PythonDevice(Compiled):
  def __init__(self, device:str="PYTHON"): super().__init__(device, PythonAllocator(self), [PythonRenderer], PythonProgram)
