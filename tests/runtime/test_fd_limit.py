# Large CPU buffers move into memfds when numpy() exports them (so it can share their pages), which costs file descriptors: under a
# low `ulimit -n`, many big tensors and their numpy() views must leave room for the program, for loading new kernels and for the compiler.
import os
import subprocess
import sys
import textwrap
import pytest
import tinygrad

CHILD = textwrap.dedent("""
  import gc, os, resource, sys
  LIMIT, WHEN = int(sys.argv[1]), sys.argv[2]
  if WHEN == "before": resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
  import numpy as np
  from tinygrad import Tensor, Device
  from tinygrad.runtime import ops_cpu
  if WHEN == "after": resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))   # lowered after tinygrad read it once
  def open_fds() -> int: return len(os.listdir("/proc/self/fd"))
  base = open_fds()
  n = (1 << 20) // 4   # 1 MiB of float32 each
  ts = [Tensor(np.full(n, i, np.float32)) for i in range(200)]   # copied in: no kernel per tensor
  views = [t.numpy() for t in ts]   # copy-on-write views where there is room, copies past that
  held = open_fds() - base
  assert ops_cpu._fds_held <= LIMIT // 4 and held <= LIMIT // 4 + 8, (held, ops_cpu._fds_held)
  assert all(v[0] == i and v[-1] == i for i, v in enumerate(views))
  # the program can still open files of its own...
  files = [open(os.devnull) for _ in range(LIMIT // 2)]
  # ...and compile, load and run kernels it never ran before
  a = np.linspace(0, 4, 37 * 11, dtype=np.float32).reshape(37, 11)
  np.testing.assert_allclose((Tensor(a).exp2() * 3 + 1).sum(axis=0).numpy(), (np.exp2(a) * 3 + 1).sum(axis=0), rtol=1e-5)
  np.testing.assert_allclose((ts[7] + ts[9]).numpy(), np.full(n, 16, np.float32))
  for f in files: f.close()
  # every descriptor comes back when the tensors and views are gone
  del ts, views
  gc.collect()
  Device["CPU"].allocator.free_cache()
  assert ops_cpu._fds_held == 0 and open_fds() <= base + 4, (ops_cpu._fds_held, open_fds(), base)
  print("CHILD_OK")
""")

@pytest.mark.cpu
@pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"), reason="needs memfd and /proc (Linux)")
@pytest.mark.parametrize("limit,when", [(256, "before"), (256, "after"), (1024, "after")])
def test_many_big_tensors_under_a_low_fd_limit(tmp_path, limit, when):
  env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(tinygrad.__file__)), "CACHEDB": str(tmp_path / "cache.db")}
  proc = subprocess.run([sys.executable, "-c", CHILD, str(limit), when], env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and "CHILD_OK" in proc.stdout, proc.stdout + proc.stderr
