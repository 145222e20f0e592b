# The NULL device: renders C and "compiles" it (the base Compiler, so no C compiler runs), allocates placeholders and launches nothing.
# It measures everything above the hardware (scheduling, codegen, rendering). Reading data back raises (NULL_ALLOW_COPYOUT=1 allows it).
# DEV=NULL:CLANG renders with the CPU's C renderer and really compiles every kernel with the C compiler (still launching nothing);
# DEV=NULL:CUDA (NULL:CUDA:sm_90; sm_80 by default) renders CUDA and compiles every kernel with NVRTC, so no GPU is needed to check them.
# NULL_ALLREDUCE=1: NULL devices have a collective all-reduce (it runs nothing), so a sharded schedule is planned as for NCCL on CUDA.
from __future__ import annotations
from tinygrad.device import Compiled, Allocator, BufferSpec, Compiler, Program
from tinygrad.helpers import NULL_ALLOW_COPYOUT, NULL_ALLREDUCE, DEV
from tinygrad.renderer.cstyle import CStyleLanguage, ClangRenderer
from tinygrad.renderer.cuda import CUDARenderer

class NullRenderer(CStyleLanguage):
  device = "NULL"
  has_local = False
  def __init__(self, target=None):
    super().__init__(target)
    self.compiler = Compiler()

class NullBuffer:
  __slots__ = ("size",)
  def __init__(self, size:int): self.size = size
  def __repr__(self): return f"<NullBuffer {self.size} bytes>"

class NullAllocator(Allocator['NullDevice']):
  def _alloc(self, size:int, options:BufferSpec) -> NullBuffer: return NullBuffer(size)
  def _copyin(self, dest:NullBuffer, src:memoryview): pass
  def _copyout(self, dest:memoryview, src:NullBuffer):
    if not NULL_ALLOW_COPYOUT:
      raise RuntimeError("the NULL device holds no data: it runs nothing, so its buffers can't be read back (use DEV=CPU or DEV=PYTHON)")
  def _offset(self, buf:NullBuffer, size:int, offset:int) -> NullBuffer: return NullBuffer(size)

class NullProgram(Program['NullDevice']):
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals=(), wait=False) -> float|None:
    self.check_args(bufs, vals)
    return 1e-3 if wait else None

def _clang_compiler() -> Compiler:
  # imported on first use: the plain NULL device never starts the C toolchain's module (its import is a good part of a cold start)
  from tinygrad.runtime.support.compiler_cpu import ClangCompiler
  return ClangCompiler()

def _cuda_compiler() -> Compiler:
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler
  return CUDACompiler(DEV.target("NULL").arch or "sm_80")   # the arch the renderer was made for (Compiled.renderer reads the same Target)

class NullDevice(Compiled):
  def __init__(self, device:str="NULL"):
    super().__init__(device, NullAllocator(self), [NullRenderer, (ClangRenderer, _clang_compiler), (CUDARenderer, _cuda_compiler)], NullProgram)
  @classmethod
  def has_all_reduce(cls, devices:tuple[str, ...], dtype) -> bool: return bool(NULL_ALLREDUCE)
  def all_reduce(self, op:str, dsts:list, srcs:list) -> None:
    for b in dsts + srcs: b.ensure_allocated()
