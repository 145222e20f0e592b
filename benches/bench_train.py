#!/usr/bin/env python3
"""Training steps on CPU (issue 11): the wall time of one step after warm-up, and the cold time to the first finished step.

Two models, written with tinygrad.nn and nn.optim only (public API: it runs under tinygrad 0.14 too):
  cnn   the README demo's CNN (conv 3x3 (16), BatchNorm, relu, conv 3x3 (32), relu, max-pool 2x2, linear) on 8x8 images, batch 64, AdamW
  mlp   an MLP 784-512-512-10 at batch 128, AdamW
A step is zero_grad, forward, sparse cross-entropy, backward, opt.step() and reading the loss (.item()): scheduling, cache lookups
and kernel runs all count (no JIT). Metrics:
  <model>_step_s        median wall time of a step after warm-up steps (in this process)
  <model>_first_step_s  a fresh process (CACHELEVEL=0): from after `import tinygrad` to the first finished step (graph, schedule,
                        compile, run), median over --procs processes

  python benches/bench_train.py [--steps 20] [--procs 3]; compare.py --script bench_train.py runs it on both sides.
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402

MODELS = r"""
import numpy as np
from tinygrad import Tensor, nn
from tinygrad.helpers import Context
class CNN:
  def __init__(self):
    self.c1, self.bn, self.c2, self.out = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm(16), nn.Conv2d(16, 32, 3, padding=1), nn.Linear(512, 10)
  def __call__(self, x): return self.out(self.c2(self.bn(self.c1(x)).relu()).relu().max_pool2d(2).flatten(1))
class MLP:
  def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)
  def __call__(self, x): return self.l3(self.l2(self.l1(x).relu()).relu())
SHAPES = {"cnn": ((64, 1, 8, 8), CNN), "mlp": ((128, 784), MLP)}
def make(name, opt="AdamW", batch=None):
  shape, cls = SHAPES[name]
  if batch is not None: shape = (batch,) + shape[1:]
  Tensor.manual_seed(0)
  model = cls()
  opt = getattr(nn.optim, opt)(nn.state.get_parameters(model), lr=1e-3)
  rng = np.random.default_rng(0)
  X, Y = rng.standard_normal(shape, dtype=np.float32), rng.integers(0, 10, shape[0]).astype(np.int32)
  def step():
    with Context(TRAINING=1):
      opt.zero_grad()
      loss = model(Tensor(X)).sparse_categorical_crossentropy(Tensor(Y))
      loss.backward()
      opt.step()
      return loss.item()
  step.params = opt.params   # the trained tensors (tests compare them)
  return step
"""

FIRST_STEP = MODELS + r"""
import sys, time, json
t0 = time.perf_counter()
make(sys.argv[1])()
print(json.dumps({"first_step_s": time.perf_counter() - t0}))
"""

def first_steps(name:str, procs:int, **env:str) -> list[float]:
  """The first training step's time of model `name` in `procs` fresh processes (no compile cache), with `env` added to theirs."""
  ret = []
  for _ in range(procs):
    child_env = {**os.environ, "CACHELEVEL": "0", "DEBUG": "0", **env}
    proc = subprocess.run([sys.executable, "-c", FIRST_STEP, name], capture_output=True, text=True, env=child_env, timeout=600)
    if proc.returncode != 0: raise SystemExit(f"the first-step child failed:\n{proc.stderr[-3000:]}")
    ret.append(json.loads(proc.stdout.strip().splitlines()[-1])["first_step_s"])
  return ret

def run(args) -> dict:
  compile_bytecode()
  samples: dict[str, list[float]] = {}
  ns: dict = {}
  exec(compile(MODELS, "<models>", "exec"), ns)
  for name in ("cnn", "mlp"):
    step = ns["make"](name)
    for _ in range(3): step()
    ts = []
    for _ in range(args.steps):
      t = time.perf_counter()
      step()
      ts.append(time.perf_counter() - t)
    samples[f"{name}_step_s"] = ts
    samples[f"{name}_first_step_s"] = first_steps(name, args.procs)
  return {**implementation_info(), "params": {"steps": args.steps, "procs": args.procs},
          "metrics": {k: statistics.median(v) for k, v in samples.items()}, "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--steps", type=int, default=20, help="timed steps per model after 3 warm-up steps (default 20)")
  p.add_argument("--procs", type=int, default=3, help="fresh processes for the first-step time (default 3)")
  print(json.dumps(run(p.parse_args(argv))))

if __name__ == "__main__":
  main()
