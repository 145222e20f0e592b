#!/usr/bin/env python3
"""TinyJit on CPU (issue 13): what a replayed call costs beyond its kernels, and jitted training steps.

Public API only (it runs under tinygrad 0.14 too). Metrics:
  replay_per_kernel_us  a TinyJit of 100 tiny elementwise kernels (16 floats, each (x + 1).contiguous(), so both sides run 100
                        kernels; replay_kernels checks it): median wall time of a replayed call / 100. It includes the kernels' own
                        run time (a 16-float add: well under a microsecond), so it is an upper bound of the per-kernel overhead
  <model>_jit_step_s    the MLP (784-512-512-10, batch 128) and CNN training steps of bench_train.py (AdamW) under TinyJit: median wall
                        time of a replayed step, reading the loss (.item()) as a training loop does

  python benches/bench_jit.py [--calls 200] [--steps 20]; compare.py --script bench_jit.py runs it on both sides.
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402
from bench_train import MODELS  # noqa: E402

KERNELS = 100

def bench_replay(calls:int) -> tuple[list[float], int]:
  from tinygrad import Tensor, TinyJit, GlobalCounters
  @TinyJit
  def chain(x:Tensor) -> Tensor:
    for _ in range(KERNELS): x = (x + 1).contiguous()
    return x
  xs = [Tensor.ones(16).contiguous().realize() for _ in range(4)]
  for i in range(3): chain(xs[i % 4]).realize()
  k0 = GlobalCounters.kernel_count
  chain(xs[3]).realize()
  kernels = GlobalCounters.kernel_count - k0
  ts = []
  for i in range(calls):
    x = xs[i % 4]
    t = time.perf_counter()
    chain(x)
    ts.append((time.perf_counter() - t) / KERNELS * 1e6)
  out = chain(xs[0]).numpy()
  assert out[0] == 1 + KERNELS, f"the jitted chain computed {out[0]}, not {1 + KERNELS}"
  return ts, kernels

def bench_train(name:str, steps:int) -> list[float]:
  import numpy as np
  from tinygrad import Tensor, TinyJit, nn
  from tinygrad.helpers import Context
  ns: dict = {}
  exec(compile(MODELS, "<models>", "exec"), ns)
  shape, cls = ns["SHAPES"][name]
  Tensor.manual_seed(0)
  model = cls()
  opt = nn.optim.AdamW(nn.state.get_parameters(model), lr=1e-3)
  @TinyJit
  def step(x:Tensor, y:Tensor) -> Tensor:
    with Context(TRAINING=1):
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      return loss
  rng = np.random.default_rng(0)
  batches = [(Tensor(rng.standard_normal(shape, dtype=np.float32)), Tensor(rng.integers(0, 10, shape[0]).astype(np.int32))) for _ in range(4)]
  for x, y in batches: x.realize(), y.realize()
  for i in range(4): step(*batches[i % 4]).item()
  ts = []
  for i in range(steps):
    t = time.perf_counter()
    step(*batches[i % 4]).item()
    ts.append(time.perf_counter() - t)
  return ts

def run(args) -> dict:
  compile_bytecode()
  samples: dict[str, list[float]] = {}
  samples["replay_per_kernel_us"], kernels = bench_replay(args.calls)
  for name in ("mlp", "cnn"): samples[f"{name}_jit_step_s"] = bench_train(name, args.steps)
  metrics = {k: statistics.median(v) for k, v in samples.items()}
  return {**implementation_info(), "params": {"calls": args.calls, "steps": args.steps}, "replay_kernels": kernels, "metrics": metrics,
          "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--calls", type=int, default=200, help="timed replays of the 100-kernel chain (default 200)")
  p.add_argument("--steps", type=int, default=20, help="timed jitted training steps per model after 4 warm-up steps (default 20)")
  print(json.dumps(run(p.parse_args(argv))))

if __name__ == "__main__":
  main()
