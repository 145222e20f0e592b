# The CPU device's C thread pool (runtime/support/cpu_threads.py): threaded kernels' chunks taken from a shared counter by the calling
# thread and the workers.
import ctypes
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
# another thread than `caller` (a worker) sleeps *slow_us first
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
"""

@pytest.fixture(scope="module")
def pool():
  dev = Device["CPU"]
  if (p := dev.native_pool(build=True)) is None: pytest.skip("no C thread pool here")
  return p

@pytest.fixture(scope="module")
def scale():
  return ctypes.cast(load_library(Device["CPU"].compiler.compile_cached(KERNELS)).scale, ctypes.c_void_p).value

def _run(pool, scale, size:int, n:int, slow_us:int=0) -> tuple[np.ndarray, np.ndarray]:
  x = np.random.default_rng(n).standard_normal(size).astype(np.float32)
  out, who = np.zeros(size, np.float32), np.zeros(n, np.uint64)
  caller, slow = np.array([threading.get_ident()], np.uint64), np.array([slow_us], np.int32)
  pool.runner(scale, 5, 2, n)(out.ctypes.data, x.ctypes.data, who.ctypes.data, caller.ctypes.data, slow.ctypes.data, size, n, 0)
  np.testing.assert_array_equal(out, x * np.float32(3) + np.arange(size, dtype=np.float32))
  return out, who

@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 64, 1000])
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

def test_threaded_kernel_with_a_variable(pool, monkeypatch):
  # a kernel of a static shape with a bound Variable in its math: an int32 argument before core_id, through the pool
  import tinygrad.renderer.cstyle as cstyle
  import tinygrad.engine.realize as realize
  from tinygrad import Variable
  from tinygrad.engine.realize import get_spec
  monkeypatch.setattr(realize, "_specs", {})
  monkeypatch.setattr(cstyle, "cpu_count", lambda: 2)
  x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
  t = Tensor(x).realize()
  with Context(NUM_CPU_THREADS=2):
    spec = get_spec((t * Variable("k", 1, 100).bind(3)).schedule()[0][0], "CPU")
    assert spec.core_id == 1 and spec.global_size == (2, 1, 1)
    before = sum(pool.chunks_run())
    for k in (1, 7, 100):
      np.testing.assert_array_equal((t * Variable("k", 1, 100).bind(k)).numpy(), x * np.float32(k))
  assert sum(pool.chunks_run()) - before == 3 * 2

def test_python_fallback_launcher_runs_launch_zero_on_the_caller(monkeypatch):
  # without the C pool a replayed threaded kernel (launcher) runs like a plain launch: core_id 0 on the calling thread, the rest on the
  # Python pool
  import tinygrad.renderer.cstyle as cstyle
  import tinygrad.engine.realize as realize
  from tinygrad.engine.realize import get_spec
  monkeypatch.setattr(realize, "_specs", {})
  monkeypatch.setattr(cstyle, "cpu_count", lambda: 2)
  monkeypatch.setattr(Device["CPU"], "native_pool", lambda build: None)
  x = np.random.default_rng(0).standard_normal(1 << 17).astype(np.float32)
  t = Tensor(x).realize()
  with Context(NUM_CPU_THREADS=2):
    items, _ = (t * 2).schedule()
    spec = get_spec(items[0], "CPU")
    prg = Device["CPU"].get_program(spec)
    ran: list[tuple[int, int]] = []
    real = prg.fxn
    def record(*args):
      ran.append((args[len(spec.globals) + spec.core_id], threading.get_ident()))
      real(*args)
    monkeypatch.setattr(prg, "fxn", record)
    argf, launch = prg.launcher(*spec.launch_dims())
    launch(*[argf(b.ensure_allocated()._buf) for b in items[0].bufs], *spec.vals())
  assert sorted(c for c, _ in ran) == [0, 1] and dict(ran)[0] == threading.get_ident() and dict(ran)[1] != threading.get_ident()
  np.testing.assert_array_equal(items[0].bufs[0].numpy(), x * 2)

# Workers kept off the launching thread's CPU (the module's comment: a worker woken onto the caller's CPU shares it for milliseconds)
needs_two_cpus = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or cpu_threads._sched_getcpu() is None
                                    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux's affinity calls and two CPUs")

def _on_a_steady_cpu(launch) -> int:
  # launches until the calling thread is on the same CPU before and after (the scheduler may move it meanwhile); returns that CPU
  getcpu = cpu_threads._sched_getcpu()
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

@needs_two_cpus
def test_python_pool_threads_kept_off_the_callers_cpu():
  from concurrent.futures import ThreadPoolExecutor
  placement = cpu_threads.ThreadPlacement()
  with ThreadPoolExecutor(2, initializer=placement.register) as ex:
    started = threading.Barrier(3)
    for _ in range(2): ex.submit(started.wait)   # both threads up (each registers as it starts)
    started.wait()
    assert len(placement.threads) == 2
    cpu = _on_a_steady_cpu(placement.place)
    for tid in placement.threads: assert os.sched_getaffinity(tid) == os.sched_getaffinity(0) - {cpu}
    # a launching thread allowed on one CPU only leaves the threads where they are (there is no other CPU to keep them on)
    before = {tid: os.sched_getaffinity(tid) for tid in placement.threads}
    def pinned_launcher():
      os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
      placement.cpu = -1
      placement.place()
    t = threading.Thread(target=pinned_launcher)
    t.start(); t.join()
    assert {tid: os.sched_getaffinity(tid) for tid in placement.threads} == before
