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
import threading
from typing import Iterable
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
  """GNU ld on Linux: linking a shared object with it directly is a fraction of the cost of the compiler driver's link; None elsewhere."""
  return shutil.which("ld") if platform.system() == "Linux" else None

STREAM_UNIT = 16384   # bytes of C a core takes at a time while the kernels are still being lowered (a compiler start costs ~30 ms)
_KERNEL_NAME = re.compile(r"^void\s+(\w+)\s*\(", re.M)   # the renderer's kernel definition: `void NAME(` at the start of a line

def unit_symbol(name:str, src:str) -> str:
  """The symbol of kernel `name` (source src) in a unit that already holds another kernel of that name (kernels of one shape share
  their name: a backward pass has several). The runtime looks it up first, then the name itself."""
  return f"{name}__{hashlib.sha256(src.encode()).hexdigest()[:16]}"

class ClangCompiler(Compiler):
  """Compiles a kernel's C into a shared object (returned as bytes). Ints wrap (-fwrapv) and nothing fuses into FMAs (-ffp-contract=off),
  so results match the PYTHON device; -fno-math-errno lets sqrt be an instruction.

  Starting the C compiler (and the linker) costs more than compiling a small kernel, so compile_many puts the kernels of a schedule into
  one translation unit (split over the cores when there are several), compiled by one process and linked into one shared object. Each
  kernel of a unit gets that unit's library (the same bytes object): it holds the kernel's function under its name (or unit_symbol when
  the unit has another kernel of that name), so every kernel is still cached and looked up on its own, and the CPU runtime loads a
  library once however many of its kernels it runs. A source that has no `void NAME(` line is compiled alone.
  """
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
    """C source (one kernel, or a unit of several) -> a shared object: compiled by the compiler, linked by `ld` where there is one (else
    by the compiler driver)."""
    with tempfile.TemporaryDirectory(prefix="tinygrad-cc-") as tmp:
      out = os.path.join(tmp, "kernel.so")
      if (ld := _linker()) is None: self._run(self.argv + ["-shared"] + self.flags + ["-x", "c", "-", "-o", out, "-lm"], src)
      else:
        self._run(self.argv + ["-c"] + self.flags + ["-x", "c", "-", "-o", obj := os.path.join(tmp, "kernel.o")], src)
        self._run([ld, "-shared", obj, "-o", out, "-lm"])
      with open(out, "rb") as f: return f.read()
  def compile_many(self, srcs:Iterable[str]) -> list[bytes]:
    """srcs may be a generator that lowers the kernels as it goes (run_schedule's): while it runs, the other cores compile what it
    has produced so far, a unit of at least STREAM_UNIT bytes at a time; what is left at its end is split over all the cores by source
    length. Kernels of the same name may share a unit (_compile_unit renames all but the first)."""
    todo: list[str] = []
    libs: dict[int, bytes] = {}
    pending: list[int] = []          # batchable sources no unit has taken yet
    final: list[list[int]] = []      # the units the end of the stream left, for whichever thread is free
    state = {"done": False, "pending_bytes": 0}
    busy: dict[int, int] = {}         # helper -> bytes of the unit it is compiling
    errors: list[BaseException] = []
    cond = threading.Condition()
    def run(unit:list[int]) -> None:
      res = self._compile_unit([todo[i] for i in unit])
      with cond: libs.update(zip(unit, res))
    def streamed_unit() -> bool:
      return not state["done"] and state["pending_bytes"] >= STREAM_UNIT
    def helper(n:int) -> None:
      try:
        while True:
          with cond:
            cond.wait_for(lambda: bool(final) or state["done"] or streamed_unit())
            if final: unit = final.pop()
            elif not state["done"]:
              unit = pending[:]
              pending.clear()
              state["pending_bytes"] = 0
              busy[n] = sum(len(todo[i]) for i in unit)
            else: return
          run(unit)
          with cond: busy.pop(n, None)
      except BaseException as e:   # re-raised in the caller's thread
        errors.append(e)
        with cond: state["done"] = True   # stop waiting for more: the caller raises once the stream ends
    # plain threads: concurrent.futures and the logging it imports would cost a cold process more than they save
    helpers = [threading.Thread(target=helper, args=(n,), name=f"tinygrad-cc-{n}", daemon=True) for n in range(1, os.cpu_count() or 1)]
    started = False
    def start() -> None:
      nonlocal started
      if not started:
        for t in helpers: t.start()
        started = True
    def finish(mine:list[int], others:list[list[int]]) -> None:
      """Compiles the caller's last unit while the helpers take the others, and waits for them."""
      with cond:
        final.extend(u for u in others if u)
        state["done"] = True
        cond.notify_all()
      if final: start()
      try:
        if mine: run(mine)
        while True:   # then the units no helper took yet
          with cond:
            if not final: break
            unit = final.pop()
          run(unit)
      finally:
        if started:
          for t in helpers: t.join()
    try:
      for src in srcs:
        todo.append(src)
        if _KERNEL_NAME.search(src) is None: continue   # compiled alone, at the end
        with cond:
          pending.append(len(todo) - 1)
          state["pending_bytes"] += len(src)
          if streamed_unit():
            start()
            cond.notify()
    except BaseException:
      with cond: pending.clear()
      finish([], [])
      raise
    # the rest: one unit per core, balanced by source length (biggest kernels first, each to the lightest unit), counting half of the
    # unit a helper is still compiling as its load (how much of it is done is unknown; the caller's unit is the first)
    with cond:
      nunits = len(helpers) + 1 if started or len(pending) > 1 else 1
      units: list[list[int]] = [[] for _ in range(nunits)]
      load = [0] + sorted((b // 2 for b in busy.values()), reverse=True)[:nunits - 1] + [0] * (nunits - 1 - len(busy))
      for i in sorted(pending, key=lambda i: -len(todo[i])):
        units[k := min(range(nunits), key=lambda k: load[k])].append(i)
        load[k] += len(todo[i])
      pending.clear()
    finish(units[0], units[1:])
    if errors: raise errors[0]
    for i, src in enumerate(todo):
      if i not in libs: libs[i] = self.compile(src)   # the sources with no `void NAME(` line
    return [libs[i] for i in range(len(todo))]
  def _compile_unit(self, srcs:list[str]) -> list[bytes]:
    """Kernels -> one shared object, given to each of them: a kernel whose name an earlier one of the unit has is defined under
    unit_symbol(name, src) instead (the same source twice is compiled once). A unit that fails to compile is compiled kernel by kernel
    instead, so an error shows the source of the kernel at fault."""
    names: set[str] = set()
    unit: dict[str, str] = {}   # source -> the source as compiled in the unit
    for src in srcs:
      if src in unit: continue
      m = _KERNEL_NAME.search(src)
      if m is not None and m.group(1) in names: unit[src] = src[:m.start(1)] + unit_symbol(m.group(1), src) + src[m.end(1):]
      else: unit[src] = src
      if m is not None: names.add(m.group(1))
    try: lib = self.compile("\n".join(unit.values()))
    except CompileError: return [self.compile(src) for src in srcs]   # on its own, a kernel that fails raises its own error
    return [lib] * len(srcs)
  def disassemble(self, lib:bytes): cpu_objdump(lib)
