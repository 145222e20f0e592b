# The CPU compiler: C source -> a shared object, built by the system C compiler (clang if on PATH, else gcc; CC overrides).
from __future__ import annotations
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from tinygrad.device import Compiler, CompileError, CompilerNotFoundError, numbered_source
from tinygrad.helpers import cpu_objdump

def _arch_flags() -> list[str]:
  machine = platform.machine().lower()
  if machine in ("x86_64", "amd64"): return ["-march=native"]
  if machine in ("arm64", "aarch64"): return ["-mcpu=native"]
  return []

def find_c_compiler() -> list[str]:
  """The compiler command: CC (which may carry arguments, e.g. "ccache clang") if set, else clang, else gcc from PATH."""
  if cc := os.environ.get("CC", "").strip():
    argv = shlex.split(cc)
    if (path := shutil.which(argv[0])) is None:
      raise CompilerNotFoundError(f"no C compiler: CC={cc!r} is not an executable on PATH; unset CC to use clang or gcc from PATH")
    return [path] + argv[1:]
  for name in ("clang", "gcc"):
    if (path := shutil.which(name)) is not None: return [path]
  raise CompilerNotFoundError("no C compiler for the CPU device: tried CC (unset), then clang and gcc on PATH; install clang or gcc, "
                              "or set CC to a C compiler (DEV=PYTHON runs without one)")

class ClangCompiler(Compiler):
  """Compiles a kernel's C into a shared object (returned as bytes). Ints wrap (-fwrapv) and nothing fuses into FMAs (-ffp-contract=off),
  so results match the PYTHON device; -fno-math-errno lets sqrt be an instruction."""
  flags = ["-shared", "-fPIC", "-O2", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", "-fno-ident", *_arch_flags()]
  def __init__(self, cachekey:str="compile_cpu"):
    super().__init__(cachekey)
    self._argv: list[str]|None = None
  @property
  def argv(self) -> list[str]:
    if self._argv is None: self._argv = find_c_compiler()
    return self._argv
  def cache_id(self) -> str: return " ".join(self.argv + self.flags)
  def compile(self, src:str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as tmp:
      out = os.path.join(tmp, "kernel.so")
      cmd = self.argv + self.flags + ["-x", "c", "-", "-o", out, "-lm"]
      try: proc = subprocess.run(cmd, input=src.encode(), capture_output=True, timeout=300)
      except (FileNotFoundError, PermissionError) as e: raise CompilerNotFoundError(f"C compiler {self.argv[0]!r} can't be run: {e}") from e
      if proc.returncode != 0 or not os.path.exists(out):
        msg = (proc.stderr or proc.stdout).decode(errors="replace").strip()
        raise CompileError(f"{os.path.basename(self.argv[0])} failed to compile the kernel (exit code {proc.returncode}):\n{msg}\n"
                           f"--- kernel source ---\n{numbered_source(src)}")
      with open(out, "rb") as f: return f.read()
  def disassemble(self, lib:bytes): cpu_objdump(lib)
