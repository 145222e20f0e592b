#!/usr/bin/env python3
"""Peak device memory of training steps on CPU (issue 13 item 5, the memory planner), the same code under ours and tinygrad 0.14.

The models and steps of bench_train.py (an MLP 784-512-512-10 at batch 128 with AdamW and with SGD, the demo's CNN at batch 64 with
AdamW). Buffer.allocate is wrapped to record the highest GlobalCounters.mem_used after each allocation (0.14 has no peak counter;
ours also keeps GlobalCounters.max_mem_used). Counted from before the model is made; the steps are warm (after 3 steps). Metrics:
  <model>_peak_bytes   the peak during a step (weights, optimizer state and everything the step allocates)
  <model>_held_bytes   what stays allocated between steps (weights, optimizer state)
Both are deterministic: one round is enough.

  python benches/bench_memory.py; compare.py --script bench_memory.py runs it on both sides.
"""
from __future__ import annotations
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info  # noqa: E402
from bench_train import MODELS  # noqa: E402

def main() -> None:
  ns: dict = {}
  exec(compile(MODELS, "<models>", "exec"), ns)
  from tinygrad.device import Buffer
  from tinygrad.helpers import GlobalCounters
  peak = [0]
  allocate = Buffer.allocate
  def recording(self, *args, **kwargs):
    ret = allocate(self, *args, **kwargs)
    peak[0] = max(peak[0], GlobalCounters.mem_used)
    return ret
  Buffer.allocate = recording
  metrics = {}
  for name, opt in (("mlp", "AdamW"), ("mlp", "SGD"), ("cnn", "AdamW")):
    gc.collect()
    start = GlobalCounters.mem_used
    step = ns["make"](name, opt)
    for _ in range(3): step()
    peak[0] = held = GlobalCounters.mem_used
    step()
    metrics[f"{name}_{opt.lower()}_peak_bytes"] = peak[0] - start
    metrics[f"{name}_{opt.lower()}_held_bytes"] = held - start
    del step
  print(json.dumps({**implementation_info(), "metrics": metrics}))

if __name__ == "__main__":
  main()
