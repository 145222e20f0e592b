# The CPU compiler: C source -> a shared object, built by the system C compiler (clang if on PATH, else gcc; CC overrides).
from __future__ import annotations
import functools
import hashlib
import os
import re
import platform
import shlex
import shutil
import subprocess
import tempfile
from typing import Sequence
from tinygrad.device import Compiler, CompileError, CompilerNotFoundError, numbered_source
from tinygrad.helpers import cpu_objdump, cpu_count, map_on_threads
from tinygrad.renderer.cstyle import thread_entry_name

class CompileTimeoutError(CompileError):
  """The C compiler ran past ClangCompiler.timeout_s."""

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
  """GNU ld on Linux: linking a shared object with it directly is a fraction of the cost of the compiler driver's link; None elsewhere."""
  return shutil.which("ld") if platform.system() == "Linux" else None

_KERNEL_NAME = re.compile(r"^void\s+(\w+)\s*\(", re.M)   # the renderer's kernel definition: `void NAME(` at the start of a line

def unit_symbol(name:str, src:str) -> str:
  """The symbol of kernel `name` (source src) in a unit that already holds another kernel of that name (kernels of one shape share
  their name: a backward pass has several). The runtime looks it up first, then the name itself."""
  return f"{name}__{hashlib.sha256(src.encode()).hexdigest()[:16]}"

def _renamed(src:str, name:str, symbol:str) -> str:
  """The kernel `name` of src defined as `symbol` instead, with its thread entry point (which calls it) renamed to match."""
  names = {name: symbol, thread_entry_name(name): thread_entry_name(symbol)}
  return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], src)

class ClangCompiler(Compiler):
  """Compiles a kernel's C into a shared object (returned as bytes). Ints wrap (-fwrapv) and the compiler fuses nothing into FMAs
  (-ffp-contract=off: the only ones are the renderer's explicit MULACCs), so results match the PYTHON device; -fno-math-errno lets
  sqrt and fmaf be instructions.

  Starting the C compiler (and the linker) costs more than compiling a small kernel, so compile_many puts the kernels of a schedule into
  one translation unit (split over the cores when there are several, or over `jobs` processes), compiled by one process and linked into
  one shared object; a schedule's first kernels come in a batch of their own while the rest are lowered (device.ProgramLoader). Each
  kernel of a unit gets that unit's library (the same bytes object): it holds the kernel's function under its name (or unit_symbol when
  the unit has another kernel of that name), so every kernel is still cached and looked up on its own, and the CPU runtime loads a
  library once however many of its kernels it runs. A source that has no `void NAME(` line is compiled alone.
  """
  compiles_in_background = True
  flags = ["-fPIC", "-O2", "-fwrapv", "-ffp-contract=off", "-fno-math-errno", "-fno-ident", *_arch_flags()]
  def __init__(self, cachekey:str="compile_cpu"):
    super().__init__(cachekey)
    self._argv: list[str]|None = None
  @property
  def argv(self) -> list[str]:
    if self._argv is None: self._argv = find_c_compiler()
    return self._argv
  def cache_id(self) -> str: return " ".join(self.argv + self.flags)
  timeout_s = 300.0   # one compiler or linker run; past it the run is killed and CompileError names what it was compiling
  def _run(self, cmd:list[str], src:str|None=None) -> None:
    try: proc = subprocess.run(cmd, input=None if src is None else src.encode(), capture_output=True, timeout=self.timeout_s)
    except (FileNotFoundError, PermissionError) as e: raise CompilerNotFoundError(f"{cmd[0]!r} can't be run: {e}") from e
    except subprocess.TimeoutExpired:
      what = "linking a kernel library" if src is None else \
        f"kernel {', '.join(_KERNEL_NAME.findall(src)) or '(unnamed)'} ({len(src):,} bytes of C in {src.count(chr(10)) + 1:,} lines)"
      raise CompileTimeoutError(f"{os.path.basename(cmd[0])} ran past its {self.timeout_s:g} s limit {what}") from None
    if proc.returncode != 0:
      msg = (proc.stderr or proc.stdout).decode(errors="replace").strip()
      raise CompileError(f"{os.path.basename(cmd[0])} failed to compile the kernel (exit code {proc.returncode}):\n{msg}" +
                         (f"\n--- kernel source ---\n{numbered_source(src)}" if src is not None else ""))
  def compile(self, src:str) -> bytes:
    """C source (one kernel, or a unit of several) -> a shared object: compiled by the compiler, linked by `ld` where there is one (else
    by the compiler driver)."""
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as tmp:
      out = os.path.join(tmp, "kernel.so")
      if (ld := _linker()) is None: self._run(self.argv + ["-shared"] + self.flags + ["-x", "c", "-", "-o", out, "-lm"], src)
      else:
        self._run(self.argv + ["-c"] + self.flags + ["-x", "c", "-", "-o", obj := os.path.join(tmp, "kernel.o")], src)
        self._run([ld, "-shared", obj, "-o", out, "-lm"])
      with open(out, "rb") as f: return f.read()
  def compile_many(self, srcs:Sequence[str], jobs:int|None=None) -> list[bytes]:
    names = [m.group(1) if (m := _KERNEL_NAME.search(src)) else None for src in srcs]
    batched = [i for i, name in enumerate(names) if name is not None]
    if len(batched) < 2: return [self.compile(src) for src in srcs]
    # units: one per core, balanced by source length (biggest kernels first, each to the lightest unit). Kernels of the same name may
    # share a unit (_compile_unit renames all but the first): keeping them apart started a compiler per duplicate (a CNN's backward
    # has seven kernels of one name)
    units: list[list[int]] = [[] for _ in range(max(1, min(len(batched), jobs or cpu_count())))]
    for i in sorted(batched, key=lambda i: -len(srcs[i])): min(units, key=lambda u: sum(len(srcs[j]) for j in u)).append(i)
    units = [u for u in units if u]
    libs: dict[int, bytes] = {i: self.compile(src) for i, src in enumerate(srcs) if names[i] is None}
    for unit, res in zip(units, map_on_threads(lambda unit: self._compile_unit([srcs[i] for i in unit]), units, "tinygrad-cc")):
      libs.update(zip(unit, res))
    return [libs[i] for i in range(len(srcs))]
  def _compile_unit(self, srcs:list[str]) -> list[bytes]:
    """Kernels -> one shared object, given to each of them: a kernel whose name an earlier one of the unit has is defined under
    unit_symbol(name, src) instead (the same source twice is compiled once). A unit that fails to compile is compiled kernel by kernel
    instead, so an error shows the source of the kernel at fault."""
    names: set[str] = set()
    unit: dict[str, str] = {}   # source -> the source as compiled in the unit
    for src in srcs:
      if src in unit: continue
      m = _KERNEL_NAME.search(src)
      if m is not None and m.group(1) in names: unit[src] = _renamed(src, m.group(1), unit_symbol(m.group(1), src))
      else: unit[src] = src
      if m is not None: names.add(m.group(1))
    try: lib = self.compile("\n".join(unit.values()))
    except CompileTimeoutError: raise   # compiling them one by one would take as long again
    except CompileError: return [self.compile(src) for src in srcs]   # on its own, a kernel that fails raises its own error
    return [lib] * len(srcs)
  def disassemble(self, lib:bytes): cpu_objdump(lib)
