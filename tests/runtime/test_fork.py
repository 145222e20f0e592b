# A forked child (os.fork, or multiprocessing's fork start method, as data loaders do) after the parent ran threaded CPU kernels: the
# child's copy of the kernel thread pool has no threads, so the pool must start them again in the child (and BEAM's worker processes
# stay the parent's). Each scenario runs in a fresh process with a time limit, so a hang fails the test instead of hanging it.
import os
import pathlib
import subprocess
import sys
import textwrap
import numpy as np
import pytest
import tinygrad

pytestmark = [pytest.mark.cpu, pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")]
PKG_DIR = str(pathlib.Path(tinygrad.__file__).resolve().parents[1])

PRELUDE = """
import os, sys
import numpy as np
from tinygrad import Tensor, Device
def work(seed):
  # a kernel big enough to be split over the CPU threads (NUM_CPU_THREADS=4 below), checked against numpy
  x = np.random.default_rng(seed).standard_normal(1 << 20).astype(np.float32)
  got, want = (Tensor(x) * 2 + 1).sum().item(), float((x.astype(np.float64) * 2 + 1).sum())
  assert abs(got - want) < 1e-4 * abs(want) + 1, (got, want)
  return seed
"""

def run(body:str, tmp_path, timeout:float=120) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHONPATH": PKG_DIR, "DEV": "CPU", "NUM_CPU_THREADS": "4", "CACHEDB": str(tmp_path / "cache.db")}
  try:
    ret = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired as e: pytest.fail(f"hung (killed after {timeout} s): {e.stdout!r} {e.stderr!r}")
  assert ret.returncode == 0, ret.stdout + ret.stderr
  return ret

def test_os_fork_child_runs_threaded_kernels_on_the_c_pool(tmp_path):
  # the pool is built at the parent's first threaded kernel; the child's copy has no worker threads until it starts them again
  run("""
    work(0)
    pool = Device["CPU"].native_pool()
    assert pool is not None and sum(pool.chunks_run()) > 0
    if (pid := os.fork()) == 0:
      try:
        before = sum(pool.chunks_run())
        work(1)
        assert sum(pool.chunks_run()) > before and pool.started >= 1
      except BaseException: os._exit(1)
      os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    work(2)   # the parent's pool still works
  """, tmp_path)

def test_multiprocessing_fork_pool_workers_run_threaded_kernels(tmp_path):
  run("""
    import multiprocessing as mp
    work(0)
    with mp.get_context("fork").Pool(2) as p: assert p.map(work, [1, 2, 3]) == [1, 2, 3]
  """, tmp_path)

def test_forked_child_leaves_the_parents_search_workers_alone(tmp_path):
  # a child that exits normally runs its exit handlers: they must not stop the parent's BEAM worker processes
  run("""
    import time
    from tinygrad.helpers import Context
    from tinygrad.codegen.opt import search
    with Context(PARALLEL=1):
      pool = search._get_pool()
      procs = [w.proc for w in pool.workers]
      assert procs and all(p.is_alive() for p in procs)
      if (pid := os.fork()) == 0: sys.exit(0)
      assert os.waitpid(pid, 0)[1] == 0
      time.sleep(0.5)
      assert all(p.is_alive() for p in procs) and search._pool is pool, "the child stopped the parent's search workers"
    search.close_pool()
  """, tmp_path)

def test_os_fork_with_queued_cpu_devices(tmp_path):
  # with CPU and CPU:1 in use each runs its kernels on a queue thread, which a forked child doesn't get: the child starts its own
  run("""
    Device["CPU:1"]
    assert Device["CPU"].queue is not None and Device["CPU:1"].queue is not None
    x = np.arange(1 << 16, dtype=np.float32)
    pending = (Tensor(x, device="CPU:1") * 3).realize()   # maybe still queued at the fork: it runs before
    pid = os.fork()
    if pid == 0:
      try:
        work(1)
        got = ((Tensor(x) + 1).to("CPU:1") * 2).numpy()
        os._exit(0 if np.array_equal(got, (x + 1) * 2) and np.array_equal(pending.numpy(), x * 3) else 1)
      except BaseException:
        os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0
    assert np.array_equal(pending.numpy(), x * 3)
  """, tmp_path)

def test_exit_with_kernels_still_queued(tmp_path):
  # the script ends while a queued kernel still runs: it finishes (its writes into a file's shared mapping land) before the interpreter
  # frees the memory queued kernels use
  out = tmp_path / "out.bin"
  out.write_bytes(bytes(4096))
  run(f"""
    import mmap
    from tinygrad.device import Buffer, BufferSpec
    from tinygrad.dtype import dtypes
    from tinygrad.helpers import mv_address
    SRC = r'''
    #include <time.h>
    void late_fill(float *out, int n) {{
      struct timespec ts = {{0, 300000000}};
      nanosleep(&ts, 0);
      for (int i = 0; i < n; i++) out[i] = (float)(i + 1);
    }}'''
    dev = Device["CPU:1"]
    Device["CPU"]
    prg = dev.runtime("late_fill", dev.compiler.compile_cached(SRC))
    f = open({str(out)!r}, "r+b")
    mm = mmap.mmap(f.fileno(), 4096)
    buf = Buffer("CPU:1", 1024, dtypes.float32, options=BufferSpec(external_ptr=mv_address(mm))).allocate()
    prg(buf._buf, vals=(1024,))
    assert dev.queue.completed < dev.queue.submitted
  """, tmp_path)
  np.testing.assert_array_equal(np.frombuffer(out.read_bytes(), np.float32), np.arange(1, 1025, dtype=np.float32))
