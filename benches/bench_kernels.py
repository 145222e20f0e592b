#!/usr/bin/env python3
"""CPU kernel speed against numpy in the same process (issue 12 item 5): float32 matmul, conv2d, softmax and sum.

  DEV=CPU python benches/bench_kernels.py                   # every case, 9 timed pairs each (after 2 warm-ups)
  python benches/bench_kernels.py --only matmul_1024,sum --repeats 15
  python benches/compare.py --script bench_kernels.py --rounds 1   # ours and tinygrad 0.14 side by side

Each case times one realize() of the tinygrad expression and one run of the numpy code, alternately (tinygrad first, then numpy,
then tinygrad, ...), synchronized; the ratio is taken per pair (numpy time / tinygrad time) and its median reported, so both sides
see the same machine load. numpy's BLAS threads spin for a while after a call and would take the cores from the next tinygrad run
(OpenBLAS's worker spins ~0.1 s after a matmul here: measured as process CPU time in 10 ms sleeps after one): `--gap` seconds (default
0.15, past that spin; it was 0.05, which timed our kernels against a spinning BLAS thread) of sleep separate the two sides.

  matmul_N        (N, N) @ (N, N), N = 1024 and 2048; numpy a @ b
  linear_1024     x @ w.T, both (1024, 1024): nn.Linear's forward (the dot-product tile); numpy x @ w.T
  conv2d          batch 8, 64 -> 64 channels, 56x56, 3x3, padding 1; numpy: the padded input's im2col (a copy) and one matmul
  softmax         softmax over the last axis of a (4096, 4096); numpy: e = exp(x - max), e / sum(e)
  sum             x.sum() of 16M floats; numpy x.sum()

Metrics (median): CASE_vs_numpy (numpy time / ours: higher is better, >= 1 means faster than numpy), CASE_flops_per_s or
CASE_bytes_per_s (ours) and numpy_CASE_... (numpy's, measured in the same pairs). Public API only: runs under tinygrad 0.14 too.
"""
from __future__ import annotations
import argparse
import json
import statistics
import time
import numpy as np
from tinygrad import Tensor, Device

def _sync(): Device[Device.DEFAULT].synchronize()

def conv_im2col(xp:np.ndarray, w:np.ndarray) -> np.ndarray:
  """NCHW conv2d of an already padded input by weights (cout, cin, kh, kw), stride 1, as im2col (one copy) + one matmul."""
  n, cin, hp, wp = xp.shape
  cout, _, kh, kw = w.shape
  oh, ow = hp - kh + 1, wp - kw + 1
  win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))        # n, cin, oh, ow, kh, kw (a view)
  cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, cin * kh * kw)       # the copy
  return (cols @ w.reshape(cout, -1).T).reshape(n, oh, ow, cout).transpose(0, 3, 1, 2)

def cases(rng:np.random.Generator) -> dict[str, tuple]:
  """name -> (make: () -> (tinygrad fn, numpy fn, check inputs), work, unit); work is flops ("flops") or bytes read ("bytes")."""
  def matmul(n:int, trans:bool=False):
    def make():
      an, bn = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
      a, b = Tensor(an).realize(), Tensor(bn).realize()
      if trans: ours, npf = (lambda: (a @ b.T).realize()), (lambda: an @ bn.T)
      else: ours, npf = (lambda: (a @ b).realize()), (lambda: an @ bn)
      return ours, npf, (lambda t: np.testing.assert_allclose(t.numpy(), npf(), rtol=1e-3, atol=1e-2))
    return make, 2 * n ** 3, "flops"
  def conv():
    def make():
      xn = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
      wn = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * np.float32(0.05)
      x, w = Tensor(xn).realize(), Tensor(wn).realize()
      def npf(): return conv_im2col(np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1))), wn)
      return (lambda: x.conv2d(w, padding=1).realize()), npf, (lambda t: np.testing.assert_allclose(t.numpy(), npf(), rtol=1e-3, atol=1e-3))
    return make, 2 * 8 * 64 * 56 * 56 * 64 * 9, "flops"
  def softmax():
    def make():
      xn = rng.standard_normal((4096, 4096), dtype=np.float32)
      x = Tensor(xn).realize()
      def npf():
        e = np.exp(xn - xn.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
      return (lambda: x.softmax(-1).realize()), npf, (lambda t: np.testing.assert_allclose(t.numpy(), npf(), rtol=1e-4, atol=1e-7))
    return make, 4096 * 4096 * 4, "bytes"
  def total():
    def make():
      xn = rng.standard_normal(1 << 24, dtype=np.float32)
      x = Tensor(xn).realize()
      return (lambda: x.sum().realize()), (lambda: xn.sum()), (lambda t: np.testing.assert_allclose(t.numpy(), xn.sum(dtype=np.float64), rtol=1e-4))
    return make, (1 << 24) * 4, "bytes"
  return {"matmul_1024": matmul(1024), "matmul_2048": matmul(2048), "linear_1024": matmul(1024, trans=True), "conv2d": conv(),
          "softmax": softmax(), "sum": total()}

def run_case(make, repeats:int, gap:float) -> tuple[list[float], list[float]]:
  ours, npf, check = make()
  check(ours())
  for _ in range(2): ours(); npf()
  _sync()
  to, tn = [], []
  for _ in range(repeats):
    time.sleep(gap)
    t0 = time.perf_counter()
    ours()
    _sync()
    to.append(time.perf_counter() - t0)
    time.sleep(gap)
    t0 = time.perf_counter()
    npf()
    tn.append(time.perf_counter() - t0)
  return to, tn

def main(argv=None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--repeats", type=int, default=9, help="timed pairs per case (default 9)")
  p.add_argument("--only", default="", help="comma-separated cases (default all: matmul_1024,matmul_2048,linear_1024,conv2d,softmax,sum)")
  p.add_argument("--gap", type=float, default=0.15, help="seconds of sleep before each timed run (default 0.15)")
  args = p.parse_args(argv)
  rng = np.random.default_rng(0)
  allc = cases(rng)
  names = [n for n in args.only.split(",") if n] or list(allc)
  if bad := [n for n in names if n not in allc]: raise SystemExit(f"bench_kernels.py: unknown case(s) {bad}, known: {list(allc)}")
  metrics: dict[str, float] = {}
  samples: dict[str, list[float]] = {}
  for name in names:
    make, work, unit = allc[name]
    to, tn = run_case(make, args.repeats, args.gap)
    samples[f"{name}_vs_numpy"] = [n / o for o, n in zip(to, tn)]
    samples[f"{name}_{unit}_per_s"] = [work / t for t in to]
    samples[f"numpy_{name}_{unit}_per_s"] = [work / t for t in tn]
    metrics.update({k: statistics.median(samples[k]) for k in (f"{name}_vs_numpy", f"{name}_{unit}_per_s", f"numpy_{name}_{unit}_per_s")})
    scale = 1e9
    print(f"{name:12s} ours {metrics[f'{name}_{unit}_per_s']/scale:8.2f} G{unit[0].upper()}/s  numpy "
          f"{metrics[f'numpy_{name}_{unit}_per_s']/scale:8.2f}  ratio {metrics[f'{name}_vs_numpy']:.2f}x  (median of {args.repeats} pairs)")
  from bench_tensor import implementation_info   # this directory is on sys.path when run as a script
  ret = {**implementation_info(), "repeats": args.repeats, "metrics": metrics, "samples": samples}
  print(json.dumps(ret))
  return ret

if __name__ == "__main__":
  main()
