# The CUDA compiler: CUDA C++ -> a cubin (or PTX) through NVRTC from cuda-python (`cuda.bindings.nvrtc`; the library comes from the
# nvidia-cuda-nvrtc wheel, found by cuda-pathfinder, or from a CUDA toolkit). cuda-python is an optional dependency (the `cuda` extra):
# this module imports without it and says what is missing when a compile is asked for.
from __future__ import annotations
import functools
import os
import pathlib
from typing import Any, Sequence
from tinygrad.device import Compiler, CompileError, CompilerNotFoundError, numbered_source
from tinygrad.helpers import cpu_count, map_on_threads

CUDA_EXTRA = "pip install 'tinygrad[cuda]' (cuda-python, nvidia-cuda-nvrtc-cu12, nvidia-cuda-runtime-cu12)"

def nvrtc() -> Any:
  """cuda.bindings.nvrtc, or CompilerNotFoundError saying how to install it."""
  try: from cuda.bindings import nvrtc as mod
  except ImportError as e:
    raise CompilerNotFoundError(f"CUDA kernels are compiled with NVRTC from cuda-python, which is not installed: {CUDA_EXTRA}") from e
  return mod

def check_nvrtc(ret:tuple, what:str) -> Any:
  """The result of an NVRTC call (a tuple (err, *values)), raising on an error."""
  mod = nvrtc()
  if (err := ret[0]) != mod.nvrtcResult.NVRTC_SUCCESS:
    raise CompileError(f"NVRTC: {what} failed: {mod.nvrtcGetErrorString(err)[1].decode(errors='replace')}")
  return ret[1] if len(ret) == 2 else ret[1:]

@functools.cache
def header_dirs() -> tuple[str, ...]:
  """Where cuda_fp16.h, cuda_bf16.h and vector_types.h are: the nvidia-cuda-runtime wheel (through cuda-pathfinder, which also
  looks at CUDA_HOME/CUDA_PATH), else a CUDA toolkit's include directory. NVRTC has no copy of the half/bfloat16 headers itself."""
  dirs: list[str] = []
  try:
    from cuda.pathfinder import find_nvidia_header_directory
    if (d := find_nvidia_header_directory("cudart")) is not None: dirs.append(d)
  except (ImportError, RuntimeError): pass
  for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
    if root and (p := pathlib.Path(root) / "include" / "cuda_fp16.h").is_file() and str(p.parent) not in dirs: dirs.append(str(p.parent))
  return tuple(dirs)

@functools.cache
def nvrtc_version() -> tuple[int, int]: return tuple(check_nvrtc(nvrtc().nvrtcVersion(), "nvrtcVersion"))

@functools.cache
def supported_archs() -> tuple[int, ...]:
  """The compute capabilities (80 for sm_80) this NVRTC compiles for."""
  return tuple(check_nvrtc(nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))

def parse_arch(arch:str) -> int:
  if not (arch.startswith("sm_") and arch[3:].rstrip("a").isdigit()):
    raise ValueError(f"a CUDA arch is sm_<major><minor> (sm_80, sm_90a), got {arch!r}")
  return int(arch[3:].rstrip("a"))

class CUDACompiler(Compiler):
  """Compiles a CUDA kernel for `arch` (sm_XY): a cubin when this NVRTC knows the arch (loads without a JIT, on any driver that runs
  the arch), else PTX for the newest arch it knows below it (the driver compiles that for the GPU). Cached on disk like the C
  compiler's output (CACHELEVEL=0: no disk cache), keyed by the arch and NVRTC's version besides the source."""
  def __init__(self, arch:str="sm_80"):
    self.cc = parse_arch(arch)
    self.arch, self.init_args = arch, (arch,)   # init_args: how a BEAM worker makes the same compiler
    super().__init__(f"compile_cuda_{arch}")
  @functools.cached_property
  def target(self) -> tuple[str, bool]:
    """(the -arch value, whether the result is a cubin)."""
    if self.cc in (archs := supported_archs()): return self.arch, True
    if not (older := [a for a in archs if a <= self.cc]):
      raise CompilerNotFoundError(f"NVRTC {'.'.join(map(str, nvrtc_version()))} can't compile for {self.arch} (it knows sm_{min(archs)} and newer)")
    return f"compute_{max(older)}", False
  def cache_id(self) -> str: return f"{type(self).__name__} {self.target[0]} nvrtc {nvrtc_version()}"
  def options(self) -> list[bytes]:
    return [f"--gpu-architecture={self.target[0]}".encode(), b"--std=c++17", b"-default-device", *(f"-I{d}".encode() for d in header_dirs())]
  def compile(self, src:str) -> bytes:
    mod = nvrtc()
    prog = check_nvrtc(mod.nvrtcCreateProgram(src.encode(), b"kernel.cu", 0, [], []), "nvrtcCreateProgram")
    try:
      opts = self.options()
      err = mod.nvrtcCompileProgram(prog, len(opts), opts)[0]
      if err != mod.nvrtcResult.NVRTC_SUCCESS:
        log = self._log(prog)
        hint = "" if header_dirs() or "could not open source file" not in log else \
          f"\n(no CUDA headers found: install nvidia-cuda-runtime-cu12 or set CUDA_HOME; {CUDA_EXTRA})"
        raise CompileError(f"NVRTC could not compile the kernel for {self.target[0]}:\n{log}{hint}\n{numbered_source(src)}")
      if self.target[1]:
        size = check_nvrtc(mod.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        out = b" " * size
        check_nvrtc((mod.nvrtcGetCUBIN(prog, out)[0], None), "nvrtcGetCUBIN")
        return out
      size = check_nvrtc(mod.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
      out = b" " * size
      check_nvrtc((mod.nvrtcGetPTX(prog, out)[0], None), "nvrtcGetPTX")
      return out if out.endswith(b"\0") else out + b"\0"   # cuModuleLoadData reads PTX up to its NUL
    finally: mod.nvrtcDestroyProgram(prog)
  def compile_many(self, srcs:Sequence[str], jobs:int|None=None) -> list[bytes]:
    """The kernels of a schedule compiled on threads (`jobs` of them, default one per core): NVRTC is thread-safe and cuda-python calls
    it without the GIL."""
    if len(srcs) <= 1: return [self.compile(src) for src in srcs]
    n = min(len(srcs), jobs or cpu_count())
    parts = map_on_threads(lambda part: [self.compile(src) for src in part], [srcs[i::n] for i in range(n)], "tinygrad-nvrtc")
    ret: list[bytes] = [b""] * len(srcs)
    for i, part in enumerate(parts): ret[i::n] = part
    return ret
  def _log(self, prog) -> str:
    mod = nvrtc()
    size = check_nvrtc(mod.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    out = b" " * size
    mod.nvrtcGetProgramLog(prog, out)
    return out.rstrip(b"\0 ").decode(errors="replace")
  def disassemble(self, lib:bytes):
    print(lib.rstrip(b"\0").decode(errors="replace") if not lib.startswith(b"\x7fELF") else f"<cubin for {self.arch}, {len(lib)} bytes>")
