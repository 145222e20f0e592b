"""Cold compile of real model graphs, kernel counts of common blocks, and the first-call latency of a small op.

Every metric runs in fresh child processes (empty caches, CACHELEVEL=0), so it measures what a user's first run pays.

Cold compile, on DEV=NULL:CLANG:<arch>,native (every kernel rendered and compiled with clang, none launched), each model
written with plain Tensors:
  mlp_*      one training step of an MLP 784-512-512-10 at batch 128: forward, cross-entropy, backward, an SGD update by hand
  cnn_*      a small CNN at batch 8, 3x32x32: conv 3x3 (16), batchnorm with batch statistics, relu, conv 3x3 (32), relu,
             max-pool 2x2, linear to 10, cross-entropy; forward and backward
  gpt2_*     one GPT-2 block forward: seq 128, dim 768, 12 heads (layernorm, causal attention, MLP with gelu, residuals)
  each split into <model>_build_s (building the tensor graph, backward included), <model>_schedule_s (linear_with_vars:
  cutting it into kernels), <model>_codegen_s (run_linear: lowering, rendering and compiling every kernel), <model>_total_s
Kernel counts (the schedule's kernels, lower is better), on DEV=NULL: softmax_kernels, layernorm_kernels,
  matmul_bias_relu_kernels, attention_kernels, cnn_kernels (forward and backward), mlp_kernels, gpt2_kernels
First call: first_call_s, `(Tensor.rand(4,4)+1).numpy()` on the default device in a fresh process, after `import tinygrad`;
  first_call_process_s, the whole process including interpreter start and import.

Usage: python benches/bench_models.py [--procs N] [--only mlp,cnn,gpt2,counts,first]; compare.py runs it on both sides.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor import implementation_info, compile_bytecode  # noqa: E402

# builds the graph of one model (in `outs`: the tensors to realize), then schedules and compiles it, timing each phase
CHILD_HEAD = r"""
import json, time, sys
from tinygrad import Tensor, Device, dtypes
from tinygrad.engine.realize import run_linear
def param(*shape):
  t = Tensor.empty(*shape)
  t.requires_grad = True
  return t
t0 = time.perf_counter()
"""
CHILD_TAIL = r"""
t1 = time.perf_counter()
linear, var_vals = outs[0].linear_with_vars(*outs[1:])
t2 = time.perf_counter()
kernels = sum(1 for c in linear.src if c.src[0].op.name == "SINK")
if "--schedule-only" not in sys.argv:
  run_linear(linear, var_vals)
  Device[outs[0].device].synchronize()
t3 = time.perf_counter()
print(json.dumps({"build_s": t1 - t0, "schedule_s": t2 - t1, "codegen_s": t3 - t2, "total_s": t3 - t0, "kernels": kernels}))
"""

MODELS = {
  "mlp": r"""
x, y = Tensor.empty(128, 784), Tensor.empty(128, dtype=dtypes.int32)
w1, b1, w2, b2, w3, b3 = param(784, 512), param(512), param(512, 512), param(512), param(512, 10), param(10)
params = [w1, b1, w2, b2, w3, b3]
h = (x @ w1 + b1).relu()
h = (h @ w2 + b2).relu()
loss = (h @ w3 + b3).sparse_categorical_crossentropy(y)
loss.backward()
outs = [loss] + [p - 0.01 * p.grad for p in params]
""",
  "cnn": r"""
x, y = Tensor.empty(8, 3, 32, 32), Tensor.empty(8, dtype=dtypes.int32)
c1, c2, gamma, beta, wl, bl = param(16, 3, 3, 3), param(32, 16, 3, 3), param(16), param(16), param(32 * 16 * 16, 10), param(10)
h = x.conv2d(c1, padding=1)
mean, var = h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3), correction=0)
h = h.batchnorm(gamma, beta, mean, (var + 1e-5).rsqrt()).relu()
h = h.conv2d(c2, padding=1).relu().max_pool2d(2)
loss = (h.flatten(1) @ wl + bl).sparse_categorical_crossentropy(y)
loss.backward()
outs = [loss] + [p.grad for p in (c1, c2, gamma, beta, wl, bl)]
""",
  "gpt2": r"""
T, D, H = 128, 768, 12
x = Tensor.empty(1, T, D)
g1, bb1, g2, bb2 = Tensor.empty(D), Tensor.empty(D), Tensor.empty(D), Tensor.empty(D)
w_qkv, b_qkv, w_o, b_o = Tensor.empty(D, 3 * D), Tensor.empty(3 * D), Tensor.empty(D, D), Tensor.empty(D)
w_fc, b_fc, w_pr, b_pr = Tensor.empty(D, 4 * D), Tensor.empty(4 * D), Tensor.empty(4 * D, D), Tensor.empty(D)
h = x.layernorm() * g1 + bb1
q, k, v = (h @ w_qkv + b_qkv).split(D, dim=-1)
q, k, v = [t.reshape(1, T, H, D // H).transpose(1, 2) for t in (q, k, v)]
a = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(1, T, D)
x = x + a @ w_o + b_o
h = x.layernorm() * g2 + bb2
x = x + (h @ w_fc + b_fc).gelu() @ w_pr + b_pr
outs = [x]
""",
}

# small blocks whose kernel counts are compared (schedule only)
COUNTS = {
  "softmax": "outs = [Tensor.empty(64, 1000).softmax(-1)]",
  "layernorm": "outs = [Tensor.empty(64, 768).layernorm() * Tensor.empty(768) + Tensor.empty(768)]",
  "matmul_bias_relu": "outs = [(Tensor.empty(64, 256) @ Tensor.empty(256, 128) + Tensor.empty(128)).relu()]",
  "attention": "outs = [Tensor.empty(1, 12, 128, 64).scaled_dot_product_attention(Tensor.empty(1, 12, 128, 64), Tensor.empty(1, 12, 128, 64))]",
}

FIRST_CALL = r"""
import json, time
from tinygrad import Tensor
t0 = time.perf_counter()
(Tensor.rand(4, 4) + 1).numpy()
print(json.dumps({"first_call_s": time.perf_counter() - t0}))
"""

def run_child(src:str, device:str|None, args:tuple[str, ...]=()) -> tuple[dict, float]:
  env = {**os.environ, "CACHELEVEL": "0", "DEBUG": "0"}
  if device is not None: env["DEV"] = device
  st = time.perf_counter()
  proc = subprocess.run([sys.executable, "-c", src, *args], capture_output=True, text=True, env=env, timeout=600)
  wall = time.perf_counter() - st
  if proc.returncode != 0: raise SystemExit(f"bench_models: a child failed (DEV={device}):\n{proc.stderr[-3000:]}")
  # the result is the last JSON line (VIZ=1 and TRACK_MATCH_STATS print their files' paths after it, at exit)
  return json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1]), wall

def run(args) -> dict:
  compile_bytecode()
  only = set(args.only.split(",")) if args.only else {"mlp", "cnn", "gpt2", "counts", "first"}
  clang_null = f"NULL:CLANG:{platform.machine()},native"
  samples: dict[str, list[float]] = {}
  for name, body in MODELS.items():
    if name not in only: continue
    for _ in range(args.procs):
      res, _ = run_child(CHILD_HEAD + body + CHILD_TAIL, clang_null)
      for phase in ("build_s", "schedule_s", "codegen_s", "total_s"): samples.setdefault(f"{name}_{phase}", []).append(res[phase])
    samples[f"{name}_kernels"] = [res["kernels"]]
  if "counts" in only:
    for name, body in COUNTS.items():
      res, _ = run_child(CHILD_HEAD + body + CHILD_TAIL, "NULL", ("--schedule-only",))
      samples[f"{name}_kernels"] = [res["kernels"]]
  if "first" in only:
    for _ in range(args.procs):
      res, wall = run_child(FIRST_CALL, None)
      samples.setdefault("first_call_s", []).append(res["first_call_s"])
      samples.setdefault("first_call_process_s", []).append(wall)
  metrics = {k: statistics.median(v) for k, v in samples.items()}
  return {**implementation_info(), "params": {"procs": args.procs}, "metrics": metrics, "samples": samples}

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--procs", type=int, default=3, help="fresh processes per timed metric (default 3)")
  p.add_argument("--only", default=None, help="comma-separated subset of mlp,cnn,gpt2,counts,first")
  p.add_argument("--indent", type=int, default=None)
  args = p.parse_args(argv)
  print(json.dumps(run(args), indent=args.indent))

if __name__ == "__main__":
  main()
