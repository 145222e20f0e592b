#!/usr/bin/env python3
"""tinygrad's beautiful_mnist training step on CPU under TinyJit (issue 24): the first steps, compile included, and the steady step.

The model is that example's (conv 5x5 32, relu, conv 5x5 32, relu, BatchNorm, max-pool, conv 3x3 64, relu, conv 3x3 64, relu,
BatchNorm, max-pool, linear 576 -> 10; Adam), trained on random data of MNIST's shape (60,000 images 1x28x28, labels 0-9; nothing is
downloaded). A step draws `--batch` random rows (X_train[samples], the gather every MNIST example does), runs forward, sparse
cross-entropy, backward and the optimizer's update, and reads the loss. Public API only: it runs under tinygrad 0.14 too.

Metrics:
  first3_steps_s  a fresh process (CACHELEVEL=0): from building the model to the end of the third step (the JIT's capture: every
                  kernel scheduled, compiled and run), median over --procs processes
  step_s          median wall time of a jitted step after those three, in the same process (--steps of them)

  python benches/bench_mnist.py [--batch 512] [--steps 10] [--procs 1]
  python benches/compare.py --script bench_mnist.py --rounds 1        # ours and tinygrad 0.14 in one invocation
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402

CHILD = r"""
import sys, time, json
import numpy as np
from tinygrad import Tensor, TinyJit, nn
from tinygrad.helpers import Context
batch, steps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X_train = Tensor(rng.random((60000, 1, 28, 28), dtype=np.float32)).realize()
Y_train = Tensor(rng.integers(0, 10, 60000).astype(np.int32)).realize()
t0 = time.perf_counter()
Tensor.manual_seed(0)
class Model:
  def __init__(self):
    self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
                   nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x): return x.sequential(self.layers)
model = Model()
opt = nn.optim.Adam(nn.state.get_parameters(model))
@TinyJit
def train_step():
  with Context(TRAINING=1):
    opt.zero_grad()
    samples = Tensor.randint(batch, high=X_train.shape[0])
    loss = model(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]).backward()
    return loss.realize(*opt.schedule_step())
losses = [train_step().item() for _ in range(3)]
first3 = time.perf_counter() - t0
ts = []
for _ in range(steps):
  t = time.perf_counter()
  losses.append(train_step().item())
  ts.append(time.perf_counter() - t)
assert all(np.isfinite(losses)), losses
print(json.dumps({"first3_steps_s": first3, "step_s": ts, "losses": losses}))
"""

def run(args) -> dict:
  compile_bytecode()
  samples: dict[str, list[float]] = {"first3_steps_s": [], "step_s": []}
  for _ in range(args.procs):
    env = {**os.environ, "CACHELEVEL": "0", "DEBUG": "0"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(args.batch), str(args.steps)], capture_output=True, text=True, env=env,
                          timeout=args.timeout)
    if proc.returncode != 0: raise SystemExit(f"the training child failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    samples["first3_steps_s"].append(out["first3_steps_s"])
    samples["step_s"] += out["step_s"]
  return {**implementation_info(), "params": {"batch": args.batch, "steps": args.steps, "procs": args.procs},
          "metrics": {k: statistics.median(v) for k, v in samples.items()}, "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--batch", type=int, default=512, help="images per step (default 512, as beautiful_mnist)")
  p.add_argument("--steps", type=int, default=10, help="timed jitted steps after the first three (default 10)")
  p.add_argument("--procs", type=int, default=1, help="fresh processes (default 1)")
  p.add_argument("--timeout", type=float, default=1800, help="seconds a process may take (default 1800)")
  print(json.dumps(run(p.parse_args(argv))))

if __name__ == "__main__":
  main()
