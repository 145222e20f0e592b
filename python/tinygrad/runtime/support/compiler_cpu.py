# The CPU compiler: C source -> a shared object, built by the system C compiler (clang if on PATH, else gcc; CC overrides).
from __future__ import annotations
import functools
import os
import re
import platform
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence
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

@functools.cache
def _linker() -> str|None:
  """GNU ld (or gold) on Linux, for cutting per-kernel shared objects out of a unit's object file; None elsewhere."""
  return shutil.which("ld") if platform.system() == "Linux" else None

_KERNEL_NAME = re.compile(r"^void\s+(\w+)\s*\(", re.M)   # the renderer's kernel definition: `void NAME(` at the start of a line

class ClangCompiler(Compiler):
  """Compiles a kernel's C into a shared object (returned as bytes). Ints wrap (-fwrapv) and nothing fuses into FMAs (-ffp-contract=off),
  so results match the PYTHON device; -fno-math-errno lets sqrt be an instruction.

  Starting the C compiler costs more than compiling a small kernel, so compile_many puts the kernels of a schedule into one translation
  unit (split over the cores when there are several) compiled by one process to one object file, with each function in its own section;
  `ld` then cuts one shared object per kernel out of it (--gc-sections keeps only what that kernel's function reaches), so every kernel
  is still cached and loaded on its own. Without a usable `ld` (or on a source that has no `void NAME(` line) a kernel is compiled and
  linked alone by the compiler driver."""
  flags = ["-fPIC", "-O2", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", "-fno-ident", *_arch_flags()]
  def __init__(self, cachekey:str="compile_cpu"):
    super().__init__(cachekey)
    self._argv: list[str]|None = None
  @property
  def argv(self) -> list[str]:
    if self._argv is None: self._argv = find_c_compiler()
    return self._argv
  def cache_id(self) -> str: return " ".join(self.argv + self.flags)
  def _run(self, cmd:list[str], src:str|None=None) -> None:
    try: proc = subprocess.run(cmd, input=None if src is None else src.encode(), capture_output=True, timeout=300)
    except (FileNotFoundError, PermissionError) as e: raise CompilerNotFoundError(f"{cmd[0]!r} can't be run: {e}") from e
    if proc.returncode != 0:
      msg = (proc.stderr or proc.stdout).decode(errors="replace").strip()
      raise CompileError(f"{os.path.basename(cmd[0])} failed to compile the kernel (exit code {proc.returncode}):\n{msg}" +
                         (f"\n--- kernel source ---\n{numbered_source(src)}" if src is not None else ""))
  def compile(self, src:str) -> bytes:
    """One kernel, compiled and linked by the compiler driver."""
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as tmp:
      self._run(self.argv + ["-shared"] + self.flags + ["-x", "c", "-", "-o", out := os.path.join(tmp, "kernel.so"), "-lm"], src)
      with open(out, "rb") as f: return f.read()
  def compile_many(self, srcs:Sequence[str]) -> list[bytes]:
    names = [m.group(1) if (m := _KERNEL_NAME.search(src)) else None for src in srcs]
    batched = [i for i, name in enumerate(names) if name is not None]
    if len(batched) < 2 or (ld := _linker()) is None: return [self.compile(src) for src in srcs]
    # units: spread over the cores, balanced by source length (biggest kernels first, each to the lightest unit), and never two
    # kernels of the same name in one unit (different kernels may share a name)
    units: list[list[int]] = [[] for _ in range(min(len(batched), os.cpu_count() or 1))]
    for i in sorted(batched, key=lambda i: -len(srcs[i])):
      free = [u for u in units if all(names[j] != names[i] for j in u)]
      if not free: units.append(free_unit := [])
      else: free_unit = min(free, key=lambda u: sum(len(srcs[j]) for j in u))
      free_unit.append(i)
    libs: dict[int, bytes] = {i: self.compile(src) for i, src in enumerate(srcs) if names[i] is None}
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as tmp, ThreadPoolExecutor(len(units)) as pool:
      jobs = [(n, [srcs[i] for i in u], [name for i in u if (name := names[i]) is not None]) for n, u in enumerate(units)]
      for unit, unit_libs in zip(units, pool.map(lambda job: self._compile_unit(ld, tmp, *job), jobs)): libs.update(zip(unit, unit_libs))
    return [libs[i] for i in range(len(srcs))]
  def _compile_unit(self, ld:str, tmp:str, n:int, srcs:list[str], names:list[str]) -> list[bytes]:
    """Kernels with distinct names -> one object file -> a shared object per kernel. A unit that fails to compile or link is compiled
    kernel by kernel instead, so an error shows the source of the kernel at fault."""
    obj = os.path.join(tmp, f"unit{n}.o")
    try:
      self._run(self.argv + ["-c", "-ffunction-sections", "-fdata-sections"] + self.flags + ["-x", "c", "-", "-o", obj], "\n".join(srcs))
      ret = []
      for name in names:
        with open(script := os.path.join(tmp, f"unit{n}_{name}.ver"), "w") as f: f.write(f"{{ global: {name}; local: *; }};\n")
        self._run([ld, "-shared", "--gc-sections", f"--version-script={script}", obj, "-o", so := os.path.join(tmp, f"unit{n}_{name}.so"), "-lm"])
        with open(so, "rb") as f: ret.append(f.read())
      return ret
    except CompileError: return [self.compile(src) for src in srcs]   # on its own, a kernel that fails raises its own error
  def disassemble(self, lib:bytes): cpu_objdump(lib)
