# A forked child (os.fork, or multiprocessing's fork start method, as data loaders do) after the parent ran threaded CPU kernels: the
# child's copy of the kernel thread pool has no threads, so the pool must start them again in the child (and BEAM's worker processes
# stay the parent's). Each scenario runs in a fresh process with a time limit, so a hang fails the test instead of hanging it.
import os
import pathlib
import subprocess
import sys
import textwrap
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
