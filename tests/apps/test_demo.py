# The README's run command, `python -m tinygrad.apps.demo`, run as a user would: in a fresh process, checking what it prints.
import os
import re
import subprocess
import sys
import pytest
from tinygrad.helpers import ansistrip

def run_demo(tmp_path, **env) -> str:
  full_env = {**os.environ, "CACHEDB": str(tmp_path / "cache.db"), **env}
  full_env.pop("TRACK_MATCH_STATS", None)
  proc = subprocess.run([sys.executable, "-m", "tinygrad.apps.demo"], capture_output=True, text=True, env=full_env, timeout=300)
  assert proc.returncode == 0, f"demo failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
  return proc.stdout

@pytest.mark.cpu
def test_demo_runs_end_to_end(tmp_path):
  out = run_demo(tmp_path, DEBUG="0")
  # 1. training: accuracy per epoch, the promised accuracy reached, the reloaded model predicts the same
  accs = [float(a) for a in re.findall(r"epoch \d+: test accuracy ([0-9.]+)%", out)]
  assert len(accs) >= 3 and accs[-1] >= 97.0, out[-3000:]
  assert re.search(r"saved \d+ tensors \(\d+ bytes\) with safe_save; a fresh model loaded from the file predicts the same", out)
  # 2. the linear regression: fitted with Tensor ops on CPU, every check against numpy passed
  assert "linear regression on CPU with the Tensor API" in out
  for name in ("weights", "bias", "R^2", "softmax"):
    assert re.search(rf"{re.escape(name)}: max \|tinygrad - numpy\| = \S+  OK", out), f"no passed check for {name}:\n{out}"
  r2 = float(re.search(r"R\^2 = ([0-9.]+);", out).group(1))
  assert 0.999 < r2 <= 1.0
  kernels = int(re.search(r"; (\d+) kernels ran in", out).group(1))
  assert kernels > 10
  # the batched softmax fits in a few kernels (max, exp+sum, divide)
  assert int(re.search(r"(\d+) kernels; rows sum to 1", out).group(1)) <= 3
  # 3. the core: the rewrite and the per-rule statistics table printed at exit
  assert "after:  (gidx0*16+lidx0*4)" in out
  assert re.search(r"rewrote 60010 nodes into 40004 in", out)
  assert "pickle round-trip returns the same interned node" in out
  assert re.search(r"\d+ rules, \d+ matched once", out)
  assert "demo.py:" in out and "TOTAL" in out

@pytest.mark.cpu
def test_demo_debug2_prints_its_kernels(tmp_path):
  out = run_demo(tmp_path, DEBUG="2", CACHELEVEL="0")
  kernel_lines = [ln for ln in map(ansistrip, out.splitlines()) if ln.startswith("*** CPU")]
  assert len(kernel_lines) > 10, out[-3000:]
  assert any("GFLOPS" in ln and "GB/s" in ln for ln in kernel_lines)
  assert "R^2 = " in out and "softmax: max |tinygrad - numpy|" in out
