#!/usr/bin/env python3
"""Tensor pipeline benchmarks (issue 4): memory-bound kernels on CPU and cold compile time, under ours or tinygrad 0.14.

Runs unchanged under both interpreters (public API only: Tensor, dtypes, Device) and prints one JSON object.

  python benches/bench_tensor.py                     # 16M float32, 21 repeats, 5 cold-compile processes per device
  python benches/bench_tensor.py --quick             # 1M float32, 3 repeats, 2 processes: a smoke run
  python benches/compare.py --script bench_tensor.py --rounds 3

Metrics (rates are bytes per second, counting every byte read and written once; durations in seconds):
  axpb_bytes_per_s          (a*b+c).realize() on realized float32 inputs: 4 x n x 4 bytes / wall time of realize+synchronize
  sum_bytes_per_s           a.sum().realize(): n x 4 bytes / wall time
  numpy_copy_bytes_per_s    np.copyto(dst, src) of n float32: 2 x n x 4 bytes / time (the machine's copy bandwidth)
  numpy_axpb_bytes_per_s    np.multiply(a, b, out=o); np.add(o, c, out=o): 4 x n x 4 bytes / time (the best numpy does)
  cold_compile_null_s       a fresh process, CACHELEVEL=0, DEV=NULL: build a 30-op graph, schedule, codegen, render, realize
  cold_compile_cpu_s        the same on DEV=CPU: also compiles every kernel with the C compiler and runs it
  cold_compile_clang_s      DEV=NULL:CLANG:<arch>,native on both sides: the NULL device with the C renderer, which renders and
                            compiles every kernel with clang but launches nothing
  cold_process_null_s       wall time of the whole DEV=NULL child process, interpreter start and `import tinygrad` included
  cold_chain200_clang_s     a fresh process, CACHELEVEL=0, NULL:CLANG: `x = x*1.0001 + 0.5` 200 times on 1024 floats, then
                            realize (one kernel 400 ops deep). tinygrad 0.14 renders it as one expression nested deeper than
                            clang accepts (it fails with "bracket nesting level exceeded"), so where the NULL:CLANG child fails
                            under tinygrad the metric is its DEV=NULL time instead (scheduling and rendering without clang):
                            a lower bound of what it would take, so the ratio is conservative for us
"""
from __future__ import annotations
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import numpy as np

# the child program for the cold-compile metrics: 30 tensor ops mixing elementwise, reduce and movement ops
COLD_CHILD = r"""
import json, time, sys
t_import = time.perf_counter()
from tinygrad import Tensor, Device
t0 = time.perf_counter()
x, y = Tensor.empty(64, 64), Tensor.empty(64, 64)
a = (x + y) * 2.0                                      # 2
b = a.permute(1, 0) - y                                # 4
c = (b * b + 1.0).sqrt()                               # 7
d = c.reshape(32, 128).exp2()                          # 9
e = d.sum(axis=1, keepdim=True)                        # 10
f = d / e                                              # 11
g = f.pad(((1, 1), (0, 0))).shrink(((0, 32), (0, 128)))  # 13
h = g.flip(1).maximum(0.5)                             # 15
i = h.reshape(32, 2, 64).max(axis=1)                   # 17
j = i.log2() * x[:32, :]                               # 20
k = j.expand(2, 32, 64) + 3.0                          # 22
l = k.sum(axis=0).reciprocal()                         # 24
m = (l < 0.25).where(l, -l)                            # 26
n = m.T.reshape(64, 32).mean(axis=0)                   # 29
out = n.contiguous()                                   # 30
out.realize()
Device[out.device].synchronize()
t1 = time.perf_counter()
print(json.dumps({"compile_s": t1 - t0, "import_s": t0 - t_import}))
"""

# the child program for the deep-chain metric: 200 elementwise steps (400 ops) fused into one kernel
CHAIN_CHILD = r"""
import json, time
t0 = time.perf_counter()
from tinygrad import Tensor, Device
x = Tensor.empty(1024)
for _ in range(200): x = x * 1.0001 + 0.5
x.realize()
Device[x.device].synchronize()
print(json.dumps({"compile_s": time.perf_counter() - t0}))
"""

def implementation_info() -> dict:
  import tinygrad
  from importlib.metadata import version, PackageNotFoundError
  try: dist_version = version("tinygrad")
  except PackageNotFoundError: dist_version = None
  return {
    "implementation": "ours" if hasattr(tinygrad, "_core") or "tinygrad._core" in sys.modules else "tinygrad",
    "tinygrad_version": getattr(tinygrad, "__version__", None) or dist_version,
    "tinygrad_path": getattr(tinygrad, "__file__", None),
    "python": platform.python_version(),
    "python_implementation": platform.python_implementation(),
    "machine": platform.machine(),
    "cpus": os.cpu_count(),
  }

def timed(fn, repeats:int, warmup:int=2) -> list[float]:
  for _ in range(warmup): fn()
  out = []
  for _ in range(repeats):
    st = time.perf_counter()
    fn()
    out.append(time.perf_counter() - st)
  return out

def bench_kernels(n:int, repeats:int) -> dict[str, list[float]]:
  from tinygrad import Tensor, Device, dtypes
  dev = Device.DEFAULT
  rng = np.random.default_rng(0)
  na, nb, nc = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
  # inputs are created, copied in and realized before any timer starts
  a, b, c = (Tensor(x, device=dev, dtype=dtypes.float32).realize() for x in (na, nb, nc))
  Device[dev].synchronize()

  def axpb():
    out = (a * b + c).realize()
    Device[dev].synchronize()
    return out
  def total():
    out = a.sum().realize()
    Device[dev].synchronize()
    return out

  # correctness, checked once (not timed)
  np.testing.assert_allclose(axpb().numpy(), na * nb + nc, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(total().numpy(), na.astype(np.float64).sum(), rtol=1e-3, atol=1e-1)

  samples = {
    "axpb_bytes_per_s": [4 * n * 4 / t for t in timed(axpb, repeats)],
    "sum_bytes_per_s": [n * 4 / t for t in timed(total, repeats)],
  }
  dst, out = np.empty_like(na), np.empty_like(na)
  samples["numpy_copy_bytes_per_s"] = [2 * n * 4 / t for t in timed(lambda: np.copyto(dst, na), repeats)]
  def np_axpb():
    np.multiply(na, nb, out=out)
    np.add(out, nc, out=out)
  samples["numpy_axpb_bytes_per_s"] = [4 * n * 4 / t for t in timed(np_axpb, repeats)]
  return samples

def compile_bytecode() -> None:
  """Writes the .pyc files of the measured tinygrad package, as `pip install` does: a source checkout run with
  PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module from source in every cold process."""
  import compileall
  import tinygrad
  compileall.compile_dir(os.path.dirname(tinygrad.__file__), quiet=1)

def bench_cold(device:str, procs:int, child:str=COLD_CHILD, fallback:str|None=None) -> tuple[list[float], list[float]]:
  env = {**os.environ, "CACHELEVEL": "0", "DEV": device, "DEBUG": "0"}
  compile_s, process_s = [], []
  for _ in range(procs):
    st = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - st
    if proc.returncode != 0 and fallback is not None:
      print(f"bench_tensor: the child failed on DEV={device}, measuring DEV={fallback} instead", file=sys.stderr)
      return bench_cold(fallback, procs, child)
    if proc.returncode != 0: raise SystemExit(f"bench_tensor: cold-compile child failed on DEV={device}:\n{proc.stderr[-3000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    compile_s.append(res["compile_s"])
    process_s.append(wall)
  return compile_s, process_s

def run(args) -> dict:
  samples = bench_kernels(args.n, args.repeats)
  compile_bytecode()
  samples["cold_compile_null_s"], samples["cold_process_null_s"] = bench_cold("NULL", args.procs)
  samples["cold_compile_cpu_s"], _ = bench_cold("CPU", args.procs)
  # render + compile with clang + no launch: the NULL device with the C renderer, on both sides
  clang_null = f"NULL:CLANG:{platform.machine()},native"
  samples["cold_compile_clang_s"], _ = bench_cold(clang_null, args.procs)
  # only the reference falls back (see the docstring): ours must compile the chain
  samples["cold_chain200_clang_s"], _ = bench_cold(clang_null, args.procs, CHAIN_CHILD,
                                                   fallback="NULL" if implementation_info()["implementation"] == "tinygrad" else None)
  metrics = {k: statistics.median(v) for k, v in samples.items()}
  derived = {
    "axpb_vs_numpy_copy": metrics["axpb_bytes_per_s"] / metrics["numpy_copy_bytes_per_s"],
    "axpb_vs_numpy_axpb": metrics["axpb_bytes_per_s"] / metrics["numpy_axpb_bytes_per_s"],
  }
  return {**implementation_info(), "repeats": args.repeats, "params": {"n": args.n, "procs": args.procs},
          "metrics": {**metrics, **derived}, "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--quick", action="store_true", help="1M elements, 3 repeats, 2 cold-compile processes")
  p.add_argument("--n", type=int, default=None, help="elements per tensor (default 16M = 16*2**20)")
  p.add_argument("--repeats", type=int, default=None, help="timed runs per kernel metric, after 2 warm-up runs (default 21)")
  p.add_argument("--procs", type=int, default=None, help="fresh processes per cold-compile metric (default 5)")
  p.add_argument("--indent", type=int, default=None, help="indent the JSON output")
  args = p.parse_args(argv)
  args.n = args.n or (2**20 if args.quick else 16 * 2**20)
  args.repeats = args.repeats or (3 if args.quick else 21)
  args.procs = args.procs or (2 if args.quick else 5)
  print(json.dumps(run(args), indent=args.indent))

if __name__ == "__main__":
  main()
