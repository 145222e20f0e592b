# The CPU device's C thread pool (runtime/support/cpu_threads.py): threaded kernels' chunks taken from a shared counter by the calling
# thread and the workers.
import ctypes
import functools
import os
import time
import threading
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit
from tinygrad.device import Device
from tinygrad.helpers import Context
from tinygrad.runtime.ops_cpu import load_library
from tinygrad.runtime.support import cpu_threads

pytestmark = pytest.mark.cpu   # kernels compiled by the C compiler

# chunk core_id of n (an int variable) of out[i] = in[i] * 3 + i; each chunk records the thread that ran it, and a chunk that runs on
# another thread than `caller` (a worker) sleeps *slow_us first. The pool calls it through an entry point written as the C renderer
# writes them (renderer/cstyle.py render_thread_entry)
KERNELS = r"""
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
void scale(float *out, const float *in, uint64_t *who, const uint64_t *caller, const int *slow_us, int size, int n, int core_id) {
  uint64_t me = (uint64_t)pthread_self();
  if (me != caller[0] && *slow_us > 0) usleep(*slow_us);
  who[core_id] = me;
  int per = (size + n - 1) / n;
  for (int i = core_id * per; i < size && i < (core_id + 1) * per; i++) out[i] = in[i] * 3.0f + (float)i;
}
void scale__entry(const unsigned long long *a, int core_id) {
  scale((void*)a[0], (void*)a[1], (void*)a[2], (void*)a[3], (void*)a[4], (int)a[5], (int)a[6], core_id);
}
"""

@pytest.fixture(scope="module")
def pool():
  dev = Device["CPU"]
  if (p := dev.native_pool()) is None: pytest.skip("no C thread pool here")
  return p

@pytest.fixture(scope="module")
def scale():
  return ctypes.cast(load_library(Device["CPU"].compiler.compile_cached(KERNELS)).scale__entry, ctypes.c_void_p).value

def _run(pool, scale, size:int, n:int, slow_us:int=0) -> tuple[np.ndarray, np.ndarray]:
  x = np.random.default_rng(n).standard_normal(size).astype(np.float32)
  out, who = np.zeros(size, np.float32), np.zeros(n, np.uint64)
  caller, slow = np.array([threading.get_ident()], np.uint64), np.array([slow_us], np.int32)
  pool.runner(scale, 8, n)(out.ctypes.data, x.ctypes.data, who.ctypes.data, caller.ctypes.data, slow.ctypes.data, size, n, 0)
  np.testing.assert_array_equal(out, x * np.float32(3) + np.arange(size, dtype=np.float32))
  return out, who

# (past 65535 chunks a launch is run as several jobs: the ticket's chunk fields are 16 bits)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 64, 1000, 70_000])
def test_any_number_of_chunks(pool, scale, n):
  _, who = _run(pool, scale, 4099, n)
  assert (who != 0).all()   # every chunk ran exactly where its output says

def test_slow_workers_leave_the_chunks_to_the_caller(pool, scale):
  # a worker that takes a chunk sleeps 30 ms in it: meanwhile the calling thread runs the others, so it ran most of them
  _, who = _run(pool, scale, 1 << 12, 16, slow_us=30_000)
  mine = int((who == threading.get_ident()).sum())
  assert mine >= 16 - pool.started and (who != 0).all()

def test_jit_replay_runs_chunks_on_the_calling_thread(pool, monkeypatch):
  import tinygrad.codegen.opt.heuristic as opt
  import tinygrad.renderer.cstyle as cstyle
  import tinygrad.engine.realize as realize
  monkeypatch.setattr(realize, "_specs", {})
  monkeypatch.setattr(opt, "THREAD_MAX", 4)
  monkeypatch.setattr(cstyle, "cpu_count", lambda: 4)
  with Context(NUM_CPU_THREADS=4):
    @TinyJit
    def f(a:Tensor) -> Tensor: return (a * 2 + 1).contiguous()
    xs = [np.random.default_rng(i).standard_normal(1 << 18).astype(np.float32) for i in range(5)]
    for x in xs[:2]: f(Tensor(x)).realize()
    before = pool.chunks_run()
    for x in xs[2:]: np.testing.assert_array_equal(f(Tensor(x)).numpy(), x * 2 + 1)
    caller, workers = (a - b for a, b in zip(pool.chunks_run(), before))
  # one threaded kernel of 4 chunks per replay, the calling thread taking part (it starts on the first chunk as it publishes the job)
  assert caller + workers == 3 * 4 and caller >= 1

def test_stop_then_run_on_the_caller_alone(scale):
  # a pool of its own library state: compiled under another source text, so stopping it leaves the device's pool alone
  lib = load_library(Device["CPU"].compiler.compile_cached(cpu_threads.pool_source() + "\n/* test copy */\n"))
  p = cpu_threads.NativePool(lib, 2)
  assert p.started == 2
  p.stop()
  _, who = _run(p, scale, 1000, 5)
  assert (who == threading.get_ident()).all()

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_gets_workers(pool, scale):
  pid = os.fork()
  if pid == 0:
    try:
      _, who = _run(pool, scale, 1 << 12, 8)
      os._exit(0 if (who != 0).all() and pool.started >= 1 else 1)
    except BaseException:
      os._exit(2)
  assert os.waitpid(pid, 0)[1] == 0

def _threaded_spec(expr:Tensor, threads:int):
  from tinygrad.engine.realize import get_spec
  items, _ = expr.schedule()
  spec = get_spec(items[-1], "CPU")
  assert spec.core_id is not None and spec.global_size == (threads, 1, 1), spec.src
  return items[-1], spec

@pytest.fixture
def two_threads(monkeypatch):
  import tinygrad.renderer.cstyle as cstyle
  import tinygrad.engine.realize as realize
  monkeypatch.setattr(realize, "_specs", {})
  monkeypatch.setattr(cstyle, "cpu_count", lambda: 2)
  with Context(NUM_CPU_THREADS=2): yield

def test_threaded_kernel_with_a_variable(pool, two_threads):
  # a kernel of a static shape with a bound Variable in its math: an int32 argument before core_id, through the pool
  from tinygrad import Variable
  x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
  t = Tensor(x).realize()
  _, spec = _threaded_spec(t * Variable("k", 1, 100).bind(3), 2)
  assert spec.core_id == 1
  before = sum(pool.chunks_run())
  for k in (1, 7, 100):
    np.testing.assert_array_equal((t * Variable("k", 1, 100).bind(k)).numpy(), x * np.float32(k))
  assert sum(pool.chunks_run()) - before == 3 * 2

def test_kernel_of_many_buffers_runs_on_the_pool(pool, two_threads):
  # 24 inputs and the output: more buffers than any fixed table of call signatures would cover
  xs = [np.random.default_rng(i).standard_normal(1 << 16).astype(np.float32) for i in range(24)]
  ts = [Tensor(x).realize() for x in xs]
  total = ts[0]
  for t in ts[1:]: total = total + t
  _, spec = _threaded_spec(total, 2)
  assert len(spec.globals) == 25
  before = sum(pool.chunks_run())
  want = xs[0].copy()
  for x in xs[1:]: want = want + x
  np.testing.assert_array_equal(total.numpy(), want)
  assert sum(pool.chunks_run()) - before == 2

def test_kernel_with_an_int64_variable_runs_on_the_pool(pool, two_threads):
  # a Variable whose range passes int32's is an int64 argument (`long` in C) before core_id
  from tinygrad import Variable
  from tinygrad.dtype import dtypes
  x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
  t = Tensor(x).realize()
  k = Variable("k", -2**40, 2**40)
  _, spec = _threaded_spec(t * k.bind(3), 2)
  assert dtypes.int64 in spec.var_dtypes
  before = sum(pool.chunks_run())
  for v in (3, -7, 2**31 - 1):
    np.testing.assert_array_equal((t * k.bind(v)).numpy(), x * np.float32(v))
  assert sum(pool.chunks_run()) - before == 3 * 2

def test_threaded_kernels_of_one_name_compiled_together(pool, two_threads, monkeypatch):
  # kernels of one name share a compiler unit, where all but one are renamed (compiler_cpu.unit_symbol): each one's entry point is
  # renamed with it and calls its own kernel
  import tinygrad.runtime.support.compiler_cpu as compiler_cpu
  monkeypatch.setattr(compiler_cpu, "cpu_count", lambda: 1)   # one unit for the schedule
  x = np.random.default_rng(1).standard_normal(1 << 18).astype(np.float32)
  a = Tensor(x).realize()
  outs = (a + 1.3671875, a * 2.3671875, a - 3.3671875)   # constants no other test uses: compiled here
  names = {_threaded_spec(o, 2)[1].name for o in outs}
  assert len(names) == 1
  compiled: list[str] = []
  real = Device["CPU"].compiler.compile
  monkeypatch.setattr(Device["CPU"].compiler, "compile", lambda src: compiled.append(src) or real(src))
  before = sum(pool.chunks_run())
  with Context(CACHELEVEL=0): Tensor.realize(*outs)
  assert len(compiled) == 1   # one unit (a unit that fails to compile is compiled again kernel by kernel)
  for got, want in zip(outs, (x + np.float32(1.3671875), x * np.float32(2.3671875), x - np.float32(3.3671875))):
    np.testing.assert_array_equal(got.numpy(), want)
  assert sum(pool.chunks_run()) - before == 3 * 2

def test_without_a_pool_the_caller_runs_every_launch_in_order(two_threads, monkeypatch):
  # where the pool can't be built (its C doesn't compile or load), a threaded kernel's launches run one after another on the calling
  # thread, as a plain launch and as a replayed one (launcher)
  x = np.random.default_rng(0).standard_normal(1 << 17).astype(np.float32)
  t = Tensor(x).realize()
  item, spec = _threaded_spec(t * 2, 2)
  prg = Device["CPU"].get_program(spec)
  monkeypatch.setattr(Device["CPU"], "native_pool", lambda: None)
  ran: list[tuple[int, int]] = []
  real = prg.fxn
  def record(*args):
    ran.append((args[len(spec.globals) + spec.core_id], threading.get_ident()))
    real(*args)
  monkeypatch.setattr(prg, "fxn", record)
  monkeypatch.setattr(prg, "_runners", {})
  bufs = [b.ensure_allocated() for b in item.bufs]
  prg(*[b._buf for b in bufs], global_size=spec.global_size, vals=spec.vals())
  argf, launch = prg.launcher(*spec.launch_dims())
  launch(*[argf(b._buf) for b in bufs], *spec.vals())
  assert ran == [(0, threading.get_ident()), (1, threading.get_ident())] * 2
  np.testing.assert_array_equal(bufs[0].numpy(), x * 2)

@functools.cache
def _sched_getcpu():
  try: fn = ctypes.CDLL(None).sched_getcpu
  except (AttributeError, OSError): return None   # not glibc/musl
  fn.argtypes, fn.restype = [], ctypes.c_int
  return fn

# Workers kept off the launching thread's CPU (the module's comment: a worker woken onto the caller's CPU shares it for milliseconds)
needs_two_cpus = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or _sched_getcpu() is None
                                    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux's affinity calls and two CPUs")

def _on_a_steady_cpu(launch) -> int:
  # launches until the calling thread is on the same CPU before and after (the scheduler may move it meanwhile); returns that CPU
  getcpu = _sched_getcpu()
  for _ in range(200):
    cpu = getcpu()
    launch()
    if getcpu() == cpu: return cpu
  pytest.fail("the calling thread changed CPUs at every launch")

@needs_two_cpus
def test_c_pool_workers_kept_off_the_callers_cpu(scale):
  lib = load_library(Device["CPU"].compiler.compile_cached(cpu_threads.pool_source() + "\n/* placement test copy */\n"))
  p = cpu_threads.NativePool(lib, 2)
  try:
    cpu = _on_a_steady_cpu(lambda: _run(p, scale, 1 << 12, 4))
    # a worker records its id once it first runs, which may be after the caller took every chunk itself
    deadline = time.monotonic() + 10
    while not all(tids := p.thread_ids()) and time.monotonic() < deadline: time.sleep(0.01)
    assert len(tids) == 2 and all(tids)
    for tid in tids: assert os.sched_getaffinity(tid) == os.sched_getaffinity(0) - {cpu}
  finally: p.stop()

def test_a_pool_that_fails_to_build_is_not_tried_again(monkeypatch):
  # (the process's pool set aside: a fresh process whose compiler can't build the pool's C)
  from tinygrad.device import CompileError
  monkeypatch.setattr(cpu_threads, "_library", None)
  monkeypatch.setattr(cpu_threads, "_failed", False)
  tries: list[str] = []
  def load(src:str):
    tries.append(src)
    raise CompileError("no pthread.h")
  assert cpu_threads.pool_library(load) is None and cpu_threads.pool_library(load) is None and len(tries) == 1
