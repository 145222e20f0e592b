#!/usr/bin/env python3
"""ONNX model speed on CPU (issue 28 item 4): a ResNet-18-shaped CNN at batch 1 and 32 and a BERT-base-shaped encoder at sequence 128,
random weights, built with onnx.helper (tests/helpers/onnx_models.py) into --cache (default /tmp/bench_onnx) once, run by
  ours         this repository's OnnxRunner under TinyJit (default settings)
  ours_beam2   the same with BEAM=2 (kernel search; its first call includes the search)
  onnxruntime  InferenceSession, CPUExecutionProvider, intra-op threads = the cores ours uses
  tinygrad     tinygrad 0.14's OnnxRunner under TinyJit, in its own venv (--tinygrad-python), run from outside this checkout
each in its own process on the same file. Per side and model: load_s (file to runner/session), first_call_s (the first run, with its
compiles), median_s over --runs steady-state runs after --warm untimed ones (the TinyJit sides capture in those), and the speedups
of ours vs each other side. --small uses quick smoke shapes.

  python benches/bench_onnx.py [--models resnet18_b1,resnet18_b32,bert_base_s128] [--sides ours,ours_beam2,onnxruntime,tinygrad]
Prints one JSON object as the last line."""
from __future__ import annotations
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
SIDES = ("ours", "ours_beam2", "onnxruntime", "tinygrad")
# model name -> (builder, its arguments, batch, sequence)
MODELS = {
  "resnet18_b1": ("resnet", dict(widths=(64, 128, 256, 512), blocks=2, size=224, classes=1000), 1, None),
  "resnet18_b32": ("resnet", dict(widths=(64, 128, 256, 512), blocks=2, size=224, classes=1000), 32, None),
  "bert_base_s128": ("bert", dict(layers=12, dim=768, heads=12, ffn=3072, vocab=30522, max_seq=512), 1, 128),
}
SMALL = {
  "resnet18_b1": ("resnet", dict(widths=(16, 32), blocks=1, size=64, classes=10), 1, None),
  "resnet18_b32": ("resnet", dict(widths=(16, 32), blocks=1, size=64, classes=10), 32, None),
  "bert_base_s128": ("bert", dict(layers=2, dim=128, heads=4, ffn=512, vocab=1000, max_seq=128), 1, 128),
}

def model_file(cache:pathlib.Path, builder:str, kwargs:dict) -> pathlib.Path:
  """The .onnx of builder(**kwargs), written once (a .part file renamed when complete)."""
  tag = "_".join(f"{k}{'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in sorted(kwargs.items()))
  path = cache / f"{builder}_{tag}.onnx"
  if not path.exists():
    sys.path.insert(0, str(REPO))
    import onnx
    from tests.helpers import onnx_models
    cache.mkdir(parents=True, exist_ok=True)
    onnx.save(getattr(onnx_models, builder)(**kwargs), str(path) + ".part")
    os.replace(str(path) + ".part", path)
  return path

def make_inputs(builder:str, batch:int, seq:int|None, size:int|None) -> dict:
  import numpy as np
  rng = np.random.default_rng(0)
  if builder == "resnet": return {"image": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}
  return {"input_ids": rng.integers(0, 1000, (batch, seq)).astype(np.int64), "attention_mask": np.ones((batch, seq), np.int64)}

def run_tinygrad_side(path:str, inputs:dict, warm:int, runs:int) -> dict:
  from tinygrad import Tensor, TinyJit
  from tinygrad.nn.onnx import OnnxRunner
  t0 = time.perf_counter()
  runner = OnnxRunner(path)
  load_s = time.perf_counter() - t0
  jit = TinyJit(lambda **kw: [v.realize() for v in runner(kw).values()])
  def once() -> float:
    feed = {k: Tensor(v).realize() for k, v in inputs.items()}
    t = time.perf_counter()
    for out in jit(**feed): out.numpy()
    return time.perf_counter() - t
  first = once()
  for _ in range(warm): once()
  times = [once() for _ in range(runs)]
  return {"load_s": load_s, "first_call_s": first, "median_s": statistics.median(times), "min_s": min(times)}

def run_onnxruntime(path:str, inputs:dict, warm:int, runs:int, threads:int) -> dict:
  import onnxruntime as ort
  opts = ort.SessionOptions()
  opts.intra_op_num_threads = threads
  t0 = time.perf_counter()
  session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
  load_s = time.perf_counter() - t0
  def once() -> float:
    t = time.perf_counter()
    session.run(None, inputs)
    return time.perf_counter() - t
  first = once()
  for _ in range(warm): once()
  times = [once() for _ in range(runs)]
  return {"load_s": load_s, "first_call_s": first, "median_s": statistics.median(times), "min_s": min(times)}

def worker(args) -> None:
  spec = json.loads(args.worker)
  inputs = make_inputs(spec["builder"], spec["batch"], spec["seq"], spec["size"])
  if spec["side"] == "onnxruntime": res = run_onnxruntime(spec["path"], inputs, args.warm, args.runs, args.threads)
  else: res = run_tinygrad_side(spec["path"], inputs, args.warm, args.runs)
  print(json.dumps(res))

def side_command(side:str, args, spec:dict) -> tuple[list[str], dict]:
  env = dict(os.environ)
  env.pop("BEAM", None)
  python = sys.executable
  if side in ("ours", "ours_beam2"): env["PYTHONPATH"] = str(REPO / "python")
  else: env.pop("PYTHONPATH", None)
  if side == "ours_beam2": env["BEAM"] = "2"
  if side == "tinygrad": python, env["DEV"] = args.tinygrad_python, "CPU"
  cmd = [python, str(pathlib.Path(__file__).resolve()), "--worker", json.dumps({**spec, "side": side}),
         "--warm", str(args.warm), "--runs", str(args.runs), "--threads", str(args.threads)]
  return cmd, env

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--models", default=",".join(MODELS))
  ap.add_argument("--sides", default=",".join(SIDES))
  ap.add_argument("--small", action="store_true", help="quick smoke shapes")
  ap.add_argument("--cache", default="/tmp/bench_onnx")
  ap.add_argument("--warm", type=int, default=2)
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--threads", type=int, default=os.cpu_count())
  ap.add_argument("--timeout", type=float, default=3600, help="seconds one side may take on one model")
  ap.add_argument("--tinygrad-python", default="/work/tg014/bin/python")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args)
  table = SMALL if args.small else MODELS
  results: dict = {}
  for name in args.models.split(","):
    builder, kwargs, batch, seq = table[name]
    spec = {"path": str(model_file(pathlib.Path(args.cache), builder, kwargs)), "builder": builder, "batch": batch, "seq": seq,
            "size": kwargs.get("size")}
    for side in args.sides.split(","):
      cmd, env = side_command(side, args, spec)
      try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=tempfile.gettempdir())
        got = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
      except subprocess.TimeoutExpired: got = {"error": f"over {args.timeout} s"}
      results.setdefault(name, {})[side] = got
      print(f"{name} {side}: {got}", file=sys.stderr, flush=True)
    ours = results[name].get("ours", {}).get("median_s")
    for side, r in results[name].items():
      if ours and side != "ours" and "median_s" in r: r["ours_speedup"] = round(r["median_s"] / ours, 3)
  print(json.dumps({"params": {"threads": args.threads, "warm": args.warm, "runs": args.runs, "small": args.small}, "results": results}))

if __name__ == "__main__": main()
