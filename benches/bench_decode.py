#!/usr/bin/env python3
"""A decode loop with a symbolic KV length on CPU (issue 13 item 6): single-head attention over a KV cache that grows by one row a step.

Each step writes the new key and value rows into the caches at position `pos` (a bound Variable) and attends over the first pos+1 rows
(q @ k[:pos+1].T / sqrt(d), softmax, @ v[:pos+1]), reading the output with .numpy(). The Variable keeps the graph the same at every
step, so the kernels compile once and the schedule is reused (tinygrad's schedule cache; here also without a JIT). Public API only:
it runs unchanged under tinygrad 0.14. Metrics:
  decode_s        total wall time of --steps steps (after --warmup steps at other positions), no JIT
  decode_step_ms  the median step of those
  decode_jit_s    the same loop with the step under TinyJit (only where `from tinygrad import TinyJit` works)
The last step's output is checked against numpy.

  python benches/bench_decode.py [--steps 200] [--dim 64]; compare.py --script bench_decode.py runs it on both sides.
"""
from __future__ import annotations
import argparse
import json
import math
import os
import statistics
import sys
import time
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402

def _softmax(x:np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

def decode(steps:int, dim:int, warmup:int, jit:bool) -> tuple[float, list[float]]:
  from tinygrad import Tensor, Variable
  maxlen = warmup + steps
  rng = np.random.default_rng(0)
  wq, wk, wv = (rng.standard_normal((dim, dim)).astype(np.float32) / math.sqrt(dim) for _ in range(3))
  xs = rng.standard_normal((maxlen, dim)).astype(np.float32)
  Wq, Wk, Wv = (Tensor(w).realize() for w in (wq, wk, wv))
  ck, cv = (Tensor.zeros(maxlen, dim).contiguous().realize() for _ in range(2))
  pos_var = Variable("pos", 0, maxlen - 1)
  def step(x:Tensor, p) -> Tensor:
    Tensor.realize(ck[p:p+1].assign(x @ Wk), cv[p:p+1].assign(x @ Wv))
    return (((x @ Wq) @ ck[:p+1].T / math.sqrt(dim)).softmax(-1) @ cv[:p+1]).realize()
  if jit:
    from tinygrad import TinyJit
    step = TinyJit(step)
  times, out = [], None
  for pos in range(maxlen):
    t = time.perf_counter()
    out = step(Tensor(xs[pos:pos+1]), pos_var.bind(pos)).numpy()
    if pos >= warmup: times.append(time.perf_counter() - t)
  # the last step against numpy
  k, v = xs @ wk, xs @ wv
  want = _softmax((xs[-1:] @ wq) @ k.T / math.sqrt(dim)) @ v
  np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-4)
  return sum(times), times

def run(args) -> dict:
  compile_bytecode()
  total, times = decode(args.steps, args.dim, args.warmup, jit=False)
  metrics = {"decode_s": total, "decode_step_ms": statistics.median(times) * 1e3}
  samples = {"decode_step_ms": [t * 1e3 for t in times]}
  try:
    from tinygrad import TinyJit  # noqa: F401
    have_jit = True
  except ImportError: have_jit = False
  if have_jit:
    metrics["decode_jit_s"], jtimes = decode(args.steps, args.dim, args.warmup, jit=True)
    metrics["decode_jit_step_ms"] = statistics.median(jtimes) * 1e3
  return {**implementation_info(), "params": {"steps": args.steps, "dim": args.dim, "warmup": args.warmup}, "metrics": metrics, "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--steps", type=int, default=200, help="timed decode steps (default 200)")
  p.add_argument("--dim", type=int, default=64, help="head dimension (default 64)")
  p.add_argument("--warmup", type=int, default=3, help="steps before the timed ones (default 3)")
  print(json.dumps(run(p.parse_args(argv))))

if __name__ == "__main__":
  main()
