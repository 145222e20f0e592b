"""safe_load of a large .safetensors file to realized CPU tensors, against the safetensors package's numpy loader in the same process.

The file (default 1 GiB: 16 float32 tensors of 64 MiB, plus a few small ones) is written once to a temporary directory by plain
Python, read once to warm the page cache, then each loader runs `--rounds` times, interleaved:
  safe_load_s              tinygrad.nn.state.safe_load(path), every tensor realized on CPU (0.14 returns DISK tensors: they are
                           copied with .to("CPU") and realized, which is what a CPU user of 0.14 does)
  safetensors_numpy_s      safetensors.numpy.load_file(path) (absent where the safetensors package is not installed)
  safe_load_vs_numpy       safetensors_numpy_s / safe_load_s: above 1 means safe_load is faster (the issue asks >= 0.8)
Prints one JSON object (metrics, samples) for benches/compare.py:
  python benches/bench_state.py [--size-mib 1024] [--rounds 3]
  python benches/compare.py --script bench_state.py --rounds 1
"""
from __future__ import annotations
import argparse
import gc
import json
import os
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info  # noqa: E402

def write_file(path:str, size_mib:int) -> int:
  import numpy as np
  n_big, big = 16, size_mib * (1 << 20) // 16 // 4
  shapes = {f"layer{i}.weight": (big // 1024, 1024) for i in range(n_big)}
  shapes.update({f"layer{i}.bias": (1024,) for i in range(n_big)})
  header, off = {}, 0
  for k, s in shapes.items():
    nb = 4 * int(np.prod(s))
    header[k] = {"dtype": "F32", "shape": list(s), "data_offsets": [off, off + nb]}
    off += nb
  j = json.dumps(header, separators=(",", ":")).encode()
  j += b" " * (-len(j) % 8)
  rng = np.random.default_rng(0)
  chunk = rng.standard_normal(big, dtype=np.float32)
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    for k, s in shapes.items():
      # the same random chunk for every big tensor: generating 1 GiB of randoms would dominate the setup
      f.write(chunk.tobytes() if len(s) == 2 else chunk[:1024].tobytes())
  return off

def load_ours(path:str):
  from tinygrad import Tensor
  from tinygrad.nn.state import safe_load
  sd = safe_load(path)
  Tensor.realize(*[v.to("CPU") for v in sd.values()])
  return sd

def load_numpy(path:str):
  from safetensors.numpy import load_file
  return load_file(path)

def timed(fn, path:str) -> float:
  gc.collect()
  st = time.perf_counter()
  ret = fn(path)
  et = time.perf_counter() - st
  del ret
  gc.collect()
  return et

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--size-mib", type=int, default=1024)
  ap.add_argument("--rounds", type=int, default=3)
  args = ap.parse_args()
  try:
    import safetensors.numpy  # noqa: F401
    have_np = True
  except ImportError: have_np = False
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "bench.safetensors")
    nbytes = write_file(path, args.size_mib)
    with open(path, "rb") as f:   # warm the page cache: both loaders then read from memory
      while f.read(1 << 24): pass
    load_ours(path)   # first call: imports, device start-up
    samples: dict[str, list[float]] = {"safe_load_s": []}
    if have_np: samples["safetensors_numpy_s"] = []
    for r in range(args.rounds):
      order = [("safe_load_s", load_ours), ("safetensors_numpy_s", load_numpy)][:2 if have_np else 1]
      for name, fn in (order if r % 2 == 0 else order[::-1]): samples[name].append(timed(fn, path))
  metrics = {k: statistics.median(v) for k, v in samples.items()}
  metrics["safe_load_gb_per_s"] = nbytes / metrics["safe_load_s"] / 1e9
  if have_np:
    samples["safe_load_vs_numpy"] = [n / o for n, o in zip(samples["safetensors_numpy_s"], samples["safe_load_s"])]
    metrics["safe_load_vs_numpy"] = statistics.median(samples["safe_load_vs_numpy"])
  print(json.dumps({"bench": "bench_state", "bytes": nbytes, **implementation_info(), "metrics": metrics, "samples": samples}))

if __name__ == "__main__":
  main()
