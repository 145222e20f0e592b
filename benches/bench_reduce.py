#!/usr/bin/env python3
"""Reduce kernel benchmarks (issue 4): wall time of realize() for float32 matmuls and row/column sums on realized inputs.

  DEV=CPU python benches/bench_reduce.py            # 25 timed runs per case (after 2 warm-up runs)
  DEV=CPU python benches/bench_reduce.py 9          # fewer runs

Prints the median and the minimum per case (the minimum is the less noisy one on a shared machine), then one JSON line for
compare.py --script bench_reduce.py: matmul_{256,512}_s (median seconds) and sum_axis{1,0}_bytes_per_s (bytes read / median).
Public API only, so it runs under tinygrad 0.14 as well.
"""
import json
import statistics
import sys
import time
import numpy as np
from tinygrad import Tensor, Device

def timed(f, runs:int) -> list[float]:
  f(); f()
  ts = []
  for _ in range(runs):
    t0 = time.perf_counter()
    f()
    Device[Device.DEFAULT].synchronize()
    ts.append(time.perf_counter() - t0)
  return ts

def main(runs:int) -> None:
  rng = np.random.default_rng(0)
  samples: dict[str, list[float]] = {}
  for n in (256, 512):
    a, b = (Tensor(rng.standard_normal((n, n), dtype=np.float32)).realize() for _ in range(2))
    ts = samples[f"matmul_{n}_s"] = timed(lambda: (a @ b).realize(), runs)
    med = statistics.median(ts)
    print(f"matmul {n}x{n}           median {med*1e3:8.3f} ms  min {min(ts)*1e3:8.3f} ms  ({2*n**3/med/1e9:6.2f} GFLOPS at the median)")
  x = Tensor(rng.standard_normal((4096, 4096), dtype=np.float32)).realize()
  for axis in (1, 0):
    ts = timed(lambda: x.sum(axis=axis).realize(), runs)
    samples[f"sum_axis{axis}_bytes_per_s"] = [x.nbytes() / t for t in ts]
    med = statistics.median(ts)
    print(f"sum(axis={axis}) 4096x4096  median {med*1e3:8.3f} ms  min {min(ts)*1e3:8.3f} ms  ({x.nbytes()/med/1e9:6.2f} GB/s at the median)")
  from bench_tensor import implementation_info   # this directory is on sys.path when run as a script
  print(json.dumps({**implementation_info(), "repeats": runs, "metrics": {k: statistics.median(v) for k, v in samples.items()},
                    "samples": samples}))

if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 25)
