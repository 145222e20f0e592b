#!/usr/bin/env python3
"""GPU kernel speed against torch in the same process (issue 15 item 6), and the MLP training step's cold compile on the device.

  DEV=CUDA BEAM=2 python benches/bench_gpu.py                   # full sizes: bf16 matmul 8192^3, fp32 a*b+c on 256M floats, softmax 8192^2
  DEV=CPU python benches/bench_gpu.py --small                   # sizes divided (seconds on a CPU); torch optional
  DEV=CUDA python benches/compare.py --script bench_gpu.py -- --cold-compile   # cold compile: ours and tinygrad 0.14 side by side

Each case checks ours against torch (numpy without torch) first, then times warm-up runs and --repeats pairs (ours, then torch),
each synchronized on its device; ratios are per pair (torch time / ours: higher is better) and their median reported.
Metrics: CASE_flops_per_s or CASE_bytes_per_s (ours), torch_CASE_..., CASE_vs_torch; with --cold-compile, mlp_first_step_s: a fresh
process (CACHELEVEL=0) from after `import tinygrad` to the first finished MLP training step (bench_train.py's child) on DEV.
The BEAM setting comes from the environment as usual. Public API only: runs under tinygrad 0.14 too.
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import sys
import time
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402
from bench_train import first_steps  # noqa: E402
from tinygrad import Tensor, Device, dtypes  # noqa: E402

def _torch():
  try: import torch
  except ImportError: return None
  return torch if torch.cuda.is_available() else None

def _sync(): Device[Device.DEFAULT].synchronize()

def cases(small:bool, torch) -> dict[str, tuple]:
  """name -> (make, work, unit): make() -> (ours fn, torch fn or None, check(result)); work in flops or bytes moved."""
  n_mm, n_ew, n_sm = (256, 1 << 20, 512) if small else (8192, 1 << 28, 8192)
  rng = np.random.default_rng(0)
  def tt(x): return torch.from_numpy(x).cuda()
  def matmul():
    an, bn = (rng.standard_normal((n_mm, n_mm), dtype=np.float32) for _ in range(2))
    a, b = Tensor(an).cast(dtypes.bfloat16).realize(), Tensor(bn).cast(dtypes.bfloat16).realize()
    ref = a.float().numpy() @ b.float().numpy()   # the bf16-rounded inputs, multiplied in float32
    ours = lambda: (a @ b).realize()   # noqa: E731
    tf = None
    if torch is not None:
      ta, tb = tt(an).bfloat16(), tt(bn).bfloat16()
      tf = lambda: ta @ tb   # noqa: E731
    return ours, tf, lambda r: np.testing.assert_allclose(r.float().numpy(), ref, rtol=2e-2, atol=2e-2 * np.sqrt(n_mm))
  def muladd():
    xs = [rng.standard_normal(n_ew, dtype=np.float32) for _ in range(3)]
    a, b, c = (Tensor(x).realize() for x in xs)
    tf = None
    if torch is not None:
      ta, tb, tc = (tt(x) for x in xs)
      tf = lambda: ta * tb + tc   # noqa: E731
    return lambda: (a * b + c).realize(), tf, lambda r: np.testing.assert_allclose(r.numpy(), xs[0] * xs[1] + xs[2], rtol=1e-6, atol=1e-6)
  def softmax():
    xn = rng.standard_normal((n_sm, n_sm), dtype=np.float32)
    x = Tensor(xn).realize()
    e = np.exp(xn - xn.max(axis=-1, keepdims=True))
    ref = e / e.sum(axis=-1, keepdims=True)
    tf = None
    if torch is not None:
      tx = tt(xn)
      tf = lambda: tx.softmax(-1)   # noqa: E731
    return lambda: x.softmax(-1).realize(), tf, lambda r: np.testing.assert_allclose(r.numpy(), ref, rtol=1e-4, atol=1e-7)
  return {"matmul_bf16": (matmul, 2 * n_mm ** 3, "flops"), "muladd_fp32": (muladd, 4 * 4 * n_ew, "bytes"),
          "softmax": (softmax, 2 * 4 * n_sm * n_sm, "bytes")}

def run_case(make, torch, warmup:int, repeats:int) -> tuple[list[float], list[float]]:
  ours, tf, check = make()
  check(ours())
  if tf is not None:   # torch's own result against the same reference
    check(Tensor(tf().float().cpu().numpy()))
  for _ in range(warmup):
    ours()
    if tf is not None: tf()
  _sync()
  if tf is not None: torch.cuda.synchronize()
  to, tt = [], []
  for _ in range(repeats):
    t0 = time.perf_counter()
    ours()
    _sync()
    to.append(time.perf_counter() - t0)
    if tf is None: continue
    t0 = time.perf_counter()
    tf()
    torch.cuda.synchronize()
    tt.append(time.perf_counter() - t0)
  return to, tt

def main(argv=None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--small", action="store_true", help="small sizes (seconds on a CPU): matmul 256^3, 1M floats, softmax 512^2")
  p.add_argument("--repeats", type=int, default=None, help="timed pairs per case (default 10, 3 with --small)")
  p.add_argument("--warmup", type=int, default=None, help="untimed runs per side before timing (default 3, 1 with --small)")
  p.add_argument("--only", default="", help="comma-separated cases (default all: matmul_bf16,muladd_fp32,softmax)")
  p.add_argument("--cold-compile", action="store_true", help="only the MLP training step's cold compile time (mlp_first_step_s)")
  p.add_argument("--procs", type=int, default=3, help="fresh processes for --cold-compile (default 3)")
  args = p.parse_args(argv)
  repeats = args.repeats or (3 if args.small else 10)
  warmup = args.warmup if args.warmup is not None else (1 if args.small else 3)
  metrics: dict[str, float] = {}
  samples: dict[str, list[float]] = {}
  if args.cold_compile:
    compile_bytecode()
    samples["mlp_first_step_s"] = first_steps("mlp", args.procs, DEV=Device.DEFAULT)
  else:
    torch = _torch()
    allc = cases(args.small, torch)
    names = [n for n in args.only.split(",") if n] or list(allc)
    if bad := [n for n in names if n not in allc]: raise SystemExit(f"bench_gpu.py: unknown case(s) {bad}, known: {list(allc)}")
    for name in names:
      make, work, unit = allc[name]
      to, tt = run_case(make, torch, warmup, repeats)
      samples[f"{name}_{unit}_per_s"] = [work / t for t in to]
      if tt:
        samples[f"torch_{name}_{unit}_per_s"] = [work / t for t in tt]
        samples[f"{name}_vs_torch"] = [b / a for a, b in zip(to, tt)]
      med = {k: statistics.median(v) for k, v in samples.items()}
      line = f"{name:12s} ours {med[f'{name}_{unit}_per_s']/1e9:9.2f} G{unit[0].upper()}/s"
      if tt: line += f"  torch {med[f'torch_{name}_{unit}_per_s']/1e9:9.2f}  ratio {med[f'{name}_vs_torch']:.2f}x"
      print(line if tt else line + "  (no torch on a GPU: numpy checked only)", file=sys.stderr)
  metrics = {k: statistics.median(v) for k, v in samples.items()}
  ret = {**implementation_info(), "device": Device.DEFAULT, "beam": os.environ.get("BEAM", "0"),
         "params": {"small": args.small, "repeats": repeats, "warmup": warmup}, "metrics": metrics, "samples": samples}
  print(json.dumps(ret))
  return ret

if __name__ == "__main__":
  main()
