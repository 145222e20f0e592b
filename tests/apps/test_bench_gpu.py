# benches/bench_gpu.py (issue 15 item 6) smoke-run with --small on the CPU device: every case checks ours against numpy before timing
# (torch is absent here, so only our numbers come back), and the JSON has the keys benches/compare.py reads.
import json
import os
import subprocess
import sys
import pytest
import tinygrad

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benches", "bench_gpu.py")
# the package this test imports (the source tree, or an installed copy whose compiled core the source tree lacks, as in CI)
ENV = {**os.environ, "DEV": "CPU", "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(tinygrad.__file__)))}

def _run(*args:str) -> dict:
  proc = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, env={**ENV, "BEAM": "0"}, timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])

@pytest.mark.cpu
def test_bench_gpu_small_json():
  out = _run("--small", "--repeats", "2")
  assert out["implementation"] == "ours" and out["device"] == "CPU" and out["params"]["small"] is True
  want = {"matmul_bf16_flops_per_s", "muladd_fp32_bytes_per_s", "softmax_bytes_per_s"}
  assert want <= set(out["metrics"]) and all(out["metrics"][k] > 0 for k in want)
  assert all(len(out["samples"][k]) == 2 for k in want)
  if "torch_softmax_bytes_per_s" not in out["metrics"]: assert not any(k.endswith("_vs_torch") for k in out["metrics"])

@pytest.mark.cpu
def test_bench_gpu_unknown_case():
  proc = subprocess.run([sys.executable, BENCH, "--small", "--only", "nope"], capture_output=True, text=True, env=ENV, timeout=60)
  assert proc.returncode != 0 and "unknown case" in proc.stderr
