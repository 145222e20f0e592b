"""ONNX models on CPU: ours (OnnxRunner, default and BEAM=2), onnxruntime (CPU provider, same threads) and tinygrad 0.14's OnnxRunner
(its own venv), each side in its own process on the same .onnx file. A ResNet-18-shaped CNN (batch 1 and 32) and a BERT-base-shaped
encoder (sequence 128) are built with onnx.helper (random weights) into --cache. Prints JSON: first-call latency (load, compile, run)
and the median of --runs timed calls after it, per model and side, and ours' ratios.

  python benches/bench_onnx.py                                  # every model, sides ours,ort,tinygrad
  python benches/bench_onnx.py --models resnet18_b1 --sides ours,ort --runs 3
  python benches/bench_onnx.py --beam                           # adds ours at BEAM=2 (minutes of search per model)
"""
from __future__ import annotations
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
TG014 = pathlib.Path(os.environ.get("TG014_PYTHON", "/work/tg014/bin/python"))

def _resnet18(batch:int):
  from onnx import TensorProto, helper, numpy_helper
  rng, nodes, inits, n = np.random.default_rng(0), [], [], [0]
  def name(b):
    n[0] += 1
    return f"{b}{n[0]}"
  def w(*shape, scale=0.05):
    inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), nm := name("w")))
    return nm
  def op(t, *ins, **attrs):
    nodes.append(helper.make_node(t, list(ins), [out := name(t.lower())], **attrs))
    return out
  def conv_bn(x, cin, cout, k, s, relu=True):
    y = op("Conv", x, w(cout, cin, k, k), w(cout), pads=[k // 2] * 4, strides=[s, s])
    y = op("BatchNormalization", y, w(cout, scale=0.1), w(cout), w(cout), op("Abs", w(cout)), epsilon=1e-5)
    return op("Relu", y) if relu else y
  x = op("MaxPool", conv_bn("input", 3, 64, 7, 2), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
  cin = 64
  for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
    y = conv_bn(conv_bn(x, cin, cout, 3, stride), cout, cout, 3, 1, relu=False)
    short = conv_bn(x, cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else x
    x, cin = op("Relu", op("Add", y, short)), cout
  out = op("Gemm", op("Flatten", op("GlobalAveragePool", x)), w(1000, 512), w(1000), transB=1)
  graph = helper.make_graph(nodes, "resnet18", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
                            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, 1000])], inits)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"input": ("float32", [batch, 3, 224, 224])}

def _bert_base(seq:int, layers:int=12, dim:int=768, heads:int=12, vocab:int=30522):
  from onnx import TensorProto, helper, numpy_helper
  rng, nodes, inits, n = np.random.default_rng(1), [], [], [0]
  def name(b):
    n[0] += 1
    return f"{b}{n[0]}"
  def const(arr):
    inits.append(numpy_helper.from_array(np.asarray(arr), nm := name("c")))
    return nm
  def w(*shape, scale=0.02): return const((rng.standard_normal(shape) * scale).astype(np.float32))
  def op(t, *ins, **attrs):
    nodes.append(helper.make_node(t, list(ins), [out := name(t.lower())], **attrs))
    return out
  def ln(x): return op("LayerNormalization", x, const(np.ones(dim, np.float32)), const(np.zeros(dim, np.float32)), axis=-1)
  hd = dim // heads
  x = ln(op("Add", op("Gather", w(vocab, dim), "input_ids"), w(1, seq, dim)))
  heads_shape, back_shape = const(np.array([1, seq, heads, hd], np.int64)), const(np.array([1, seq, dim], np.int64))
  for _ in range(layers):
    q, k, v = (op("Transpose", op("Reshape", op("Add", op("MatMul", x, w(dim, dim)), w(dim)), heads_shape), perm=[0, 2, 1, 3]) for _ in range(3))
    att = op("Softmax", op("Div", op("MatMul", q, op("Transpose", k, perm=[0, 1, 3, 2])), const(np.float32(np.sqrt(hd)))), axis=-1)
    ctx = op("Reshape", op("Transpose", op("MatMul", att, v), perm=[0, 2, 1, 3]), back_shape)
    x = ln(op("Add", x, op("Add", op("MatMul", ctx, w(dim, dim)), w(dim))))
    h = op("Add", op("MatMul", x, w(dim, 4 * dim)), w(4 * dim))
    h = op("Mul", op("Mul", h, op("Add", op("Erf", op("Div", h, const(np.float32(np.sqrt(2))))), const(np.float32(1)))), const(np.float32(0.5)))
    x = ln(op("Add", x, op("Add", op("MatMul", h, w(4 * dim, dim)), w(dim))))
  graph = helper.make_graph(nodes, "bert", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])],
                            [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, dim])], inits)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"input_ids": ("int64", [1, seq])}

MODELS = {"resnet18_b1": lambda: _resnet18(1), "resnet18_b32": lambda: _resnet18(32), "bert_base_s128": lambda: _bert_base(128)}

def model_file(cache:pathlib.Path, name:str) -> tuple[pathlib.Path, dict]:
  path, spec_path = cache / f"{name}.onnx", cache / f"{name}.json"
  if not path.exists():
    import onnx
    cache.mkdir(parents=True, exist_ok=True)
    model, spec = MODELS[name]()
    onnx.save(model, str(path))
    spec_path.write_text(json.dumps(spec))
  return path, json.loads(spec_path.read_text())

# one side, in its own process: prints {"first_s": ..., "times_s": [...]}
CHILD = r"""
import json, sys, time, numpy as np
path, spec, runs, side = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
feeds = {k: (rng.integers(0, 1000, shape) if dt == "int64" else rng.standard_normal(shape)).astype(dt) for k, (dt, shape) in spec.items()}
times = []
if side == "ort":
  import onnxruntime as ort, os
  opts = ort.SessionOptions(); opts.intra_op_num_threads = os.cpu_count()
  st = time.perf_counter(); sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]); sess.run(None, feeds)
  first = time.perf_counter() - st
  for _ in range(runs):
    st = time.perf_counter(); sess.run(None, feeds); times.append(time.perf_counter() - st)
else:
  from tinygrad import Tensor, TinyJit
  from tinygrad.nn.onnx import OnnxRunner
  st = time.perf_counter()
  runner = OnnxRunner(path)
  run = TinyJit(lambda **kw: {k: v.realize() for k, v in runner(kw).items()})
  inputs = {k: Tensor(v).realize() for k, v in feeds.items()}
  [v.numpy() for v in run(**inputs).values()]
  first = time.perf_counter() - st
  for _ in range(runs):
    inputs = {k: Tensor(v).realize() for k, v in feeds.items()}
    st = time.perf_counter(); [v.numpy() for v in run(**inputs).values()]; times.append(time.perf_counter() - st)
print(json.dumps({"first_s": first, "times_s": times}))
"""

def run_side(side:str, path:pathlib.Path, spec:dict, runs:int, timeout:float) -> dict:
  env = {**os.environ}
  if side == "tinygrad":
    if not TG014.exists(): return {"error": f"tinygrad 0.14 venv not found at {TG014} (set TG014_PYTHON)"}
    python, cwd = str(TG014), "/tmp"
    env.pop("PYTHONPATH", None)
    env.setdefault("DEV", "CPU")
  else:
    python, cwd = sys.executable, str(ROOT)
    env["PYTHONPATH"] = str(ROOT / "python")
    if side == "ours_beam": env["BEAM"] = "2"
  try:
    out = subprocess.run([python, "-c", CHILD, str(path), json.dumps(spec), str(runs), side], capture_output=True, text=True, env=env, cwd=cwd,
                         timeout=timeout)
  except subprocess.TimeoutExpired: return {"error": f"timed out after {timeout:.0f} s"}
  if out.returncode != 0: return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:300]}
  res = json.loads(out.stdout.strip().splitlines()[-1])
  return {"first_s": round(res["first_s"], 3), "median_s": round(statistics.median(res["times_s"]), 4)}

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--models", default=",".join(MODELS))
  ap.add_argument("--sides", default="ours,ort,tinygrad")
  ap.add_argument("--beam", action="store_true", help="also ours with BEAM=2")
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--timeout", type=float, default=1800)
  ap.add_argument("--cache", type=pathlib.Path, default=pathlib.Path("/tmp/bench_onnx"))
  args = ap.parse_args()
  sides = args.sides.split(",") + (["ours_beam"] if args.beam else [])
  results = {}
  for name in args.models.split(","):
    path, spec = model_file(args.cache, name)
    row = {side: run_side(side, path, spec, args.runs, args.timeout) for side in sides}
    for mine in ("ours", "ours_beam"):
      for other in ("ort", "tinygrad"):
        if "median_s" in row.get(mine, {}) and "median_s" in row.get(other, {}):
          row[f"{mine}_speed_vs_{other}"] = round(row[other]["median_s"] / row[mine]["median_s"], 3)
    results[name] = row
    print(json.dumps({name: row}), file=sys.stderr)
  print(json.dumps({"cpu_count": os.cpu_count(), "load": os.getloadavg()[0], "results": results}))

if __name__ == "__main__":
  main()
