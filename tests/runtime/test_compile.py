# The CPU compiler and its caches, the NULL device, and the errors for a missing compiler and for C that doesn't compile.
import numpy as np
import pytest
import tinygrad.helpers as helpers
import tinygrad.device as device
import tinygrad.runtime.support.compiler_cpu as compiler_cpu
from tests.helpers.linear_kernels import run, add_kernel
from tinygrad.device import Device, Buffer, CompileError, CompilerNotFoundError
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.runtime.support.compiler_cpu import ClangCompiler, unit_symbol

def _src(tag:str) -> str: return f"void f_{tag}(float* restrict a) {{ a[0] = 1.0f; }}\n"

@pytest.mark.cpu
def test_memory_and_disk_cache(tmp_path, monkeypatch):
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  c1 = ClangCompiler()
  lib = c1.compile_cached(_src("cache"))
  assert lib[:4] == b"\x7fELF" or lib[:4] in (b"\xcf\xfa\xed\xfe", b"MZ\x90\x00")
  assert c1.compile_cached(_src("cache")) is lib
  assert c1.stats == {"compiled": 1, "mem_hits": 1, "disk_hits": 0}
  c2 = ClangCompiler()  # a fresh process would start like this: empty memory, warm disk
  assert c2.compile_cached(_src("cache")) == lib and c2.stats == {"compiled": 0, "mem_hits": 0, "disk_hits": 1}
  helpers._db_connection.close()

@pytest.mark.cpu
def test_cachelevel_zero_skips_the_disk(tmp_path, monkeypatch):
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  with Context(CACHELEVEL=0):
    ClangCompiler().compile_cached(_src("nocache"))
    c = ClangCompiler()
    c.compile_cached(_src("nocache"))
    assert c.stats["compiled"] == 1 and c.stats["disk_hits"] == 0
  assert not (tmp_path / "cache.db").exists()

@pytest.mark.cpu
def test_cache_key_includes_the_compiler(monkeypatch):
  a = ClangCompiler()
  assert a.argv  # resolved now, before CC changes
  monkeypatch.setenv("CC", "gcc")
  b = ClangCompiler()
  if b.argv == a.argv: pytest.skip("gcc is the default compiler here")
  assert a.cache_key(_src("k")) != b.cache_key(_src("k"))

def test_missing_compiler(monkeypatch):
  monkeypatch.setenv("CC", "/nonexistent/cc")
  with pytest.raises(CompilerNotFoundError, match=r"CC='/nonexistent/cc' is not an executable"): ClangCompiler().compile_cached(_src("missing"))
  monkeypatch.delenv("CC")
  monkeypatch.setenv("PATH", "/nonexistent")
  with pytest.raises(CompilerNotFoundError, match=r"tried CC \(unset\), then clang and gcc on PATH"): ClangCompiler().compile(_src("missing"))

@pytest.mark.cpu
def test_compile_error_shows_source_and_message():
  src = "void broken(float* a) {\n  a[0] = 1.0f\n}\n"
  with pytest.raises(CompileError) as e: ClangCompiler().compile(src)
  msg = str(e.value)
  assert "failed to compile the kernel" in msg and "error" in msg.lower()  # the compiler's own message
  assert "--- kernel source ---" in msg and "   2    a[0] = 1.0f" in msg       # the numbered source

@pytest.mark.cpu
def test_cpu_programs_are_cached_per_source():
  dev = Device["CPU"]
  spec = dev.renderer.to_program(add_kernel(3))
  assert dev.get_program(spec) is dev.get_program(spec)

@pytest.mark.cpu
def test_program_checks_its_arguments():
  dev = Device["CPU"]
  spec = dev.renderer.to_program(add_kernel(5))
  bufs = [Buffer("CPU", 5, dtypes.float).ensure_allocated() for _ in range(2)]
  with pytest.raises(TypeError, match=r"kernel E_5 takes 3 buffer\(s\) and 0 variable\(s\) \[\], got 2 buffer\(s\)"):
    dev.get_program(spec)(*[b._buf for b in bufs])

def test_null_device_compiles_but_refuses_readback():
  dev = Device["NULL"]
  spec = dev.renderer.to_program(add_kernel(4))
  assert f"void {spec.function_name}(" in spec.src  # the real C is rendered
  bufs = [Buffer("NULL", 4, dtypes.float) for _ in range(3)]
  bufs[1].copyin(np.ones(4, np.float32).data)  # copying in is accepted (and dropped)
  assert dev.run(spec, bufs, wait=True) is not None
  assert dev.compiler.stats["compiled"] >= 1
  with pytest.raises(RuntimeError, match="NULL device holds no data"): bufs[0].numpy()
  with pytest.raises(RuntimeError, match="NULL device holds no data"): bufs[0].as_buffer(allow_zero_copy=True)

def test_python_device_runs_without_a_compiler(monkeypatch):
  monkeypatch.setenv("CC", "/nonexistent/cc")
  monkeypatch.setenv("PATH", "/nonexistent")
  out, = run("PYTHON", add_kernel(3), [np.ones(3, np.float32), np.ones(3, np.float32)], [dtypes.float])
  np.testing.assert_array_equal(out, [2, 2, 2])

def _kernel(name:str, value:float) -> str: return f"void {name}(float* restrict a) {{ a[0] = {value}f; }}\n"

def _call(lib:bytes, name:str) -> float:
  import ctypes
  from tinygrad.runtime.ops_cpu import load_library
  out = (ctypes.c_float * 1)()
  load_library(lib)[name](out)
  return out[0]

@pytest.mark.cpu
def test_compile_many_gives_each_kernel_a_library_with_its_function(monkeypatch):
  from tinygrad.runtime.ops_cpu import load_library
  monkeypatch.setattr(compiler_cpu, "cpu_count", lambda: 1)   # one unit
  # two kernels share a name (the second is renamed in the unit), the same source comes twice, and one source has no kernel line the
  # batcher recognizes (compiled alone)
  srcs = [_kernel("k_a", 1.0), _kernel("k_b", 2.0), _kernel("k_a", 3.0), _kernel("k_a", 3.0), "__attribute__((used)) " + _kernel("k_c", 5.0)]
  libs = ClangCompiler().compile_many(srcs)
  # k_a, k_b and the other k_a were compiled and linked together, by one compiler process: one library, loaded once for all
  assert libs[0] is libs[1] is libs[2] is libs[3] and libs[4] is not libs[0] and load_library(libs[0]) is load_library(libs[2])
  assert [_call(libs[0], "k_a"), _call(libs[1], "k_b"), _call(libs[2], unit_symbol("k_a", srcs[2])), _call(libs[4], "k_c")] == [1, 2, 3, 5]
  with pytest.raises(AttributeError): load_library(libs[4])["k_b"]   # the other library holds only its own kernel

@pytest.mark.cpu
def test_kernels_of_one_name_compiled_together_each_run_their_own_code(monkeypatch):
  from tinygrad import Tensor
  monkeypatch.setattr(compiler_cpu, "cpu_count", lambda: 1)   # one unit for the whole schedule
  dev = Device["CPU"]
  calls = []
  orig = dev.compiler.compile
  monkeypatch.setattr(dev.compiler, "compile", lambda src: calls.append(src) or orig(src))
  a = Tensor([1.0, 2.0, 3.0, 4.0]).realize()
  x, y, z = a + 1.4453125, a * 2.4453125, a - 3.4453125   # three kernels named E_4 (constants no other test uses: none cached)
  with Context(CACHELEVEL=0): Tensor.realize(x, y, z)
  # one compiler run for the three; the names are the subject: one keeps its name, the other two get unique ones in the unit
  assert len(calls) == 1 and calls[0].count("void E_4(") == 1 and calls[0].count("void E_4__") == 2
  np.testing.assert_allclose(x.numpy(), np.array([1, 2, 3, 4], np.float32) + 1.4453125)
  np.testing.assert_allclose(y.numpy(), np.array([1, 2, 3, 4], np.float32) * 2.4453125)
  np.testing.assert_allclose(z.numpy(), np.array([1, 2, 3, 4], np.float32) - 3.4453125)

@pytest.mark.cpu
def test_kernels_compiled_together_are_cached_one_by_one(tmp_path, monkeypatch):
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  srcs = [_kernel("k_cache_a", 1.0), _kernel("k_cache_b", 2.0), _kernel("k_cache_c", 3.0)]
  ClangCompiler().compile_cached_many(srcs)
  c = ClangCompiler()  # a fresh process asking for one of them finds it on disk, in a library that has its function
  assert _call(c.compile_cached(srcs[1]), "k_cache_b") == 2.0 and c.stats == {"compiled": 0, "mem_hits": 0, "disk_hits": 1}
  # an edited kernel misses the cache: compiled alone, the others still hit
  edited = _kernel("k_cache_c", 4.0)
  assert [_call(lib, n) for lib, n in zip(c.compile_cached_many([srcs[0], edited]), ["k_cache_a", "k_cache_c"])] == [1.0, 4.0]
  assert c.stats == {"compiled": 1, "mem_hits": 0, "disk_hits": 2}
  helpers._db_connection.close()

@pytest.mark.cpu
def test_compile_many_shares_helpers_and_reports_the_failing_kernel():
  from tinygrad import Tensor
  # two half kernels in one unit: both carry the half helpers, which must not clash
  a, b = Tensor([1.5, 2.5], dtype=dtypes.half), Tensor([3.0, 4.0], dtype=dtypes.half)
  x, y = a * b, a + b
  Tensor.realize(x, y)
  assert x.tolist() == [4.5, 10.0] and y.tolist() == [4.5, 6.5]
  with pytest.raises(CompileError) as e: ClangCompiler().compile_many([_kernel("k_ok", 1.0), "void k_bad(float* a) {\n  a[0] = 1.0f\n}\n"])
  assert "void k_bad" in str(e.value) and "k_ok" not in str(e.value)

def _three_kernels(c:float):
  from tinygrad import Tensor
  x = Tensor.arange(64).reshape(8, 8).float() + c   # a constant no other test uses: nothing comes from the memory cache
  p, q, r = (x * 3.1171875).sum(axis=0), x.exp2().max(axis=1), (x - 1.1171875).permute(1, 0).contiguous()
  with Context(CACHELEVEL=0): Tensor.realize(p, q, r)
  xn = np.arange(64).reshape(8, 8).astype(np.float32) + c
  np.testing.assert_allclose(p.numpy(), (xn * 3.1171875).sum(axis=0), rtol=1e-5)
  np.testing.assert_allclose(q.numpy(), np.exp2(xn).max(axis=1), rtol=1e-5)
  np.testing.assert_allclose(r.numpy(), (xn - 1.1171875).T, rtol=1e-6)

def _record_compile_many(monkeypatch) -> list[tuple[int, int|None, str]]:
  import threading
  calls = []
  orig = ClangCompiler.compile_many
  def record(self, srcs, jobs=None):
    calls.append((len(srcs), jobs, threading.current_thread().name))
    return orig(self, srcs, jobs)
  monkeypatch.setattr(ClangCompiler, "compile_many", record)
  return calls

@pytest.mark.cpu
def test_a_schedule_compiles_in_one_go(monkeypatch):
  from tinygrad.device import ProgramLoader
  calls = _record_compile_many(monkeypatch)
  monkeypatch.setattr(ProgramLoader, "OVERLAP_BYTES", 10**9)   # a small schedule: less C than is worth a compiler process of its own
  _three_kernels(0.1171875)
  assert [n for n, _, _ in calls] == [3]

@pytest.mark.cpu
def test_first_kernels_compile_while_the_rest_are_lowered(monkeypatch):
  import threading
  from tinygrad.device import ProgramLoader
  calls = _record_compile_many(monkeypatch)
  monkeypatch.setattr(ProgramLoader, "OVERLAP_BYTES", 1)   # every kernel is worth starting at once
  for mod in (device, compiler_cpu): monkeypatch.setattr(mod, "cpu_count", lambda: 2)
  _three_kernels(0.1181640625)
  # the first kernel went to a background compile with one process (the lowering had the other core); the rest were compiled by the
  # caller's thread, on every core, or by another background compile when the first had finished
  assert calls[0] == (1, 1, "tinygrad-load") and sum(n for n, _, _ in calls) == 3
  assert all(jobs == (1 if name == "tinygrad-load" else None) and name in ("tinygrad-load", threading.current_thread().name)
             for _, jobs, name in calls)

@pytest.mark.cpu
def test_a_background_compile_error_is_raised_by_the_schedule(monkeypatch):
  from tinygrad.device import ProgramLoader
  monkeypatch.setattr(ProgramLoader, "OVERLAP_BYTES", 1)
  for mod in (device, compiler_cpu): monkeypatch.setattr(mod, "cpu_count", lambda: 2)
  orig = ClangCompiler.compile_many
  def fail_in_background(self, srcs, jobs=None):
    if jobs == 1: raise CompileError("clang failed to compile the kernel (exit code 1): injected")
    return orig(self, srcs, jobs)
  monkeypatch.setattr(ClangCompiler, "compile_many", fail_in_background)
  with pytest.raises(CompileError, match="injected"): _three_kernels(0.119140625)

@pytest.mark.cpu
def test_null_clang_compiles_with_the_c_compiler():
  dev = Device["NULL"]
  with Context(DEV="NULL:CLANG"):
    spec = dev.renderer.to_program(add_kernel(6))
    prg = dev.get_program(spec)
    assert prg.lib[:4] == b"\x7fELF" or prg.lib[:4] in (b"\xcf\xfa\xed\xfe", b"MZ\x90\x00")   # a real binary, not the source
    bufs = [Buffer("NULL", 6, dtypes.float) for _ in range(3)]
    assert dev.run(spec, bufs, wait=True) is not None
  with pytest.raises(RuntimeError, match="NULL device holds no data"): bufs[0].numpy()

class _RunsCode:
  def __init__(self, path:str): self.path = path
  def __reduce__(self): return (__import__("os").system, (f"touch {self.path}",))

@pytest.mark.cpu
@pytest.mark.parametrize("kind", ["pickle", "bytes"])
def test_poisoned_compile_cache_row_is_recompiled(tmp_path, monkeypatch, kind):
  import pickle
  import sqlite3
  monkeypatch.setattr(helpers, "CACHEDB", db := str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  src = _src(f"poison_{kind}")
  good = ClangCompiler().compile_cached(src)
  # a hostile row: the compiled library replaced by a pickle that runs a command when loaded
  con = sqlite3.connect(db)
  con.execute(f"UPDATE 'compile_cpu_{helpers.VERSION}' SET kind=?, val=?", (kind, pickle.dumps(_RunsCode(str(marker := tmp_path / "pwned")))))
  con.commit()
  con.close()
  c = ClangCompiler()
  assert c.compile_cached(src) == good and c.stats == {"compiled": 1, "mem_hits": 0, "disk_hits": 0}
  assert not marker.exists()
  # the recompiled library replaced the bad row
  c2 = ClangCompiler()
  assert c2.compile_cached(src) == good and c2.stats["disk_hits"] == 1
  helpers._db_connection.close()

@pytest.mark.cpu
@pytest.mark.parametrize("where", ["compile", "compile_many"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_interrupted_compile_leaves_no_temp_dir(tmp_path, monkeypatch, where, exc):
  import tempfile
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  c = ClangCompiler()
  real_run, seen = c._run, []
  def interrupted(cmd, src=None):
    real_run(cmd, src)   # the compiler wrote its output into the working directory...
    seen.extend(p for p in tmp_path.iterdir() if p.name.startswith("tinygrad-cc-"))
    raise exc("interrupted")   # ...and then the user pressed ctrl-C (or something failed)
  monkeypatch.setattr(c, "_run", interrupted)
  with pytest.raises(exc):
    if where == "compile": c.compile(_src("interrupt"))
    else: c.compile_many([_src("interrupt_a"), _src("interrupt_b")])
  assert seen and all(p.parent == tmp_path for p in seen)
  assert not [p for p in tmp_path.iterdir() if p.name.startswith("tinygrad-cc-")]

@pytest.mark.cpu
def test_a_realize_of_loaded_kernels_reads_no_core_count(monkeypatch):
  # only a schedule with kernels to compile asks how many cores there are (the loader's decision to compile in the background)
  from tinygrad import Tensor
  t = Tensor(np.arange(1000, dtype=np.float32)).realize()
  assert (t * 3 + 1).sum().item() == 3 * 499500 + 1000
  def no_count(): raise AssertionError("the core count read by a realize that compiles nothing")
  for mod in (device, compiler_cpu): monkeypatch.setattr(mod, "cpu_count", no_count)
  assert (t * 3 + 1).sum().item() == 3 * 499500 + 1000

@pytest.mark.cpu
def test_compile_past_the_time_limit_names_the_kernel(monkeypatch):
  src = "void r_slow_kernel(float* restrict a) {\n  a[0] = 1.0f;\n}\n"
  cc = ClangCompiler()
  monkeypatch.setattr(cc, "timeout_s", 1e-4)   # no compiler starts that fast: the limit is hit
  with pytest.raises(CompileError, match=r"ran past its 0\.0001 s limit kernel r_slow_kernel \(\d+ bytes of C in 4 lines\)"):
    cc.compile(src)
  with pytest.raises(CompileError, match="r_slow_kernel"): cc.compile_many([src, _src("other")])
