#!/usr/bin/env python3
"""LLM decode and prefill speed (issue 26 item 9): a Llama-3-shaped model with random weights, one GGUF file per weight type, run by
ours, by tinygrad's own runner and by llama.cpp, each side in its own process on the same file, threads = cores.

The files are made once with the `gguf` package (tests/helpers/gguf_models.py write_model: gguf.quants.quantize where it supports the
type, random valid blocks for the k-quants) in --cache (default /tmp/bench_llm). The default shape is Llama 3.2 1B's (dim 2048, 16
blocks, hidden 8192, 32 heads, 8 kv heads, vocab 128256, tied embeddings, rope theta 500000); --small is a quick smoke shape. Per side
and file, metrics:
  decode_tok_per_s    --decode tokens after a 4-token prompt and WARM untimed steps, one per step
  weight_gb_per_s     the weight bytes one decode step reads (every tensor of the file but the embedding rows not looked up) x tok/s
  prefill_tok_per_s   a --prefill token prompt fed to an empty cache, timed to its first token
The machine's copy bandwidth (numpy copy of a 1 GiB buffer, bytes read + written per second) is the physical limit weight_gb_per_s
is compared against. --kernels prints, for ours, each decode-step kernel's time and GB/s (DEBUG=2 timings); --prefill-kernels each
kernel's time, share and GFLOPS over a whole warm --prefill prompt (all its chunks).

  python benches/bench_llm.py [--types Q8_0,Q4_K,F16] [--sides ours,tinygrad,llamacpp] [--small]
Sides: ours is this interpreter with this repository's package; tinygrad runs /work/tinygrad-src (--tinygrad-src) with the tinygrad
0.14 interpreter (--tinygrad-python); llamacpp runs llama-cpp-python from --llamacpp-python (built from source, an opt-in reference:
skipped with a message when it is missing). Prints one JSON object (metrics keyed side/type/metric) as the last line."""
from __future__ import annotations
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
LLAMA_1B = dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, hidden=8192, vocab=128256, rope_theta=500000.0)
SMALL = dict(dim=512, n_layers=4, n_heads=8, n_kv_heads=2, hidden=2048, vocab=32000, rope_theta=500000.0)
PROMPT = 4
WARM = 4   # untimed steps first: the prefill, and decode steps until the JIT has captured (it compiles nothing after)

# ***** the files *****

def model_file(cache:pathlib.Path, ggml_type:str, shape:dict) -> pathlib.Path:
  """The GGUF of `shape` in ggml_type, written once (a .part file renamed when complete)."""
  tag = "_".join(f"{k}{v:g}" if isinstance(v, float) else f"{k}{v}" for k, v in sorted(shape.items()))
  path = cache / f"llama_{tag}_{ggml_type}.gguf"
  if path.exists(): return path
  sys.path.insert(0, str(REPO))
  from tests.helpers.gguf_models import write_model, byte_vocab
  vocab = byte_vocab("llama")
  # the vocabulary grows to the model's size with reserved tokens (the ids the decode steps look up)
  n_extra = shape["vocab"] - len(vocab["tokenizer.ggml.tokens"])
  vocab["tokenizer.ggml.tokens"] = vocab["tokenizer.ggml.tokens"] + [f"<|reserved_{i}|>" for i in range(n_extra)]
  vocab["tokenizer.ggml.token_type"] = vocab["tokenizer.ggml.token_type"] + [3] * n_extra
  cache.mkdir(parents=True, exist_ok=True)
  part = path.with_suffix(".part")
  t = time.perf_counter()
  write_model(part, "llama", ggml_type, vocab=vocab, tied=True, context=8192, **{k: v for k, v in shape.items() if k != "vocab"})
  part.rename(path)
  print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t:.0f} s", file=sys.stderr)
  return path

def decode_bytes(path:pathlib.Path) -> int:
  """Bytes of weights one decode step reads: every tensor, the embedding once (tied: it is the output matrix)."""
  import gguf
  return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)

def copy_bandwidth() -> float:
  """Bytes read + written per second by numpy copying a 1 GiB buffer (best of 5): what memory-bound decode is bounded by."""
  import numpy as np
  src, dst = np.ones(1 << 28, np.float32), np.empty(1 << 28, np.float32)
  best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
  return 2 * src.nbytes / best

def _timed(fn) -> float:
  t = time.perf_counter()
  fn()
  return time.perf_counter() - t

# ***** one side in this process *****

def run_tinygrad(path:str, decode:int, prefill:int, kernels:bool, prefill_kernels:bool=False) -> dict:
  """Ours or tinygrad's runner (whichever `tinygrad` imports): Transformer.from_gguf + generate, the same API on both."""
  from tinygrad.llm.model import Transformer
  model, _ = Transformer.from_gguf(path, max_context=max(prefill, PROMPT + decode) + 8)
  gen = model.generate([1] * PROMPT)
  for _ in range(WARM): next(gen)   # prefill, and the decode steps the JIT compiles and captures in
  times = [_timed(lambda: next(gen)) for _ in range(decode)]
  out = {"decode_tok_per_s": len(times) / sum(times)}
  if kernels: out["kernels"] = _kernels(lambda: next(gen))
  gen.close()
  if prefill:
    gen = model.generate([2] * prefill)
    out["prefill_tok_per_s"] = prefill / _timed(lambda: next(gen))
    gen.close()
    # the same prompt again (its chunks' JITs are warm): a new first token makes generate feed it all, not reuse the cache
    if prefill_kernels: out["prefill_kernels"] = _kernels(lambda: next(model.generate([3] + [2] * (prefill - 1))))
  return out

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_KERNEL_LINE = re.compile(r"\*\*\* \S+\s+\d+\s+(\S+)\s+arg.*? tm\s+([\d.]+)(us|ms|s)/.*?\(\s*([\d.]+)\s+GFLOPS\s+\d+\|(\d+)\s+GB/s")

def _kernels(step) -> list[dict]:
  """step() (one decode step, or a prefill) under DEBUG=2: each kernel's name, launches, time, share of the kernels' time, GFLOPS (of
  the ops DEBUG=2 counts, the weight's decoding included) and GB/s (of the bytes its buffers hold), slowest first."""
  import io
  import contextlib
  from tinygrad.helpers import Context
  buf = io.StringIO()
  with Context(DEBUG=2), contextlib.redirect_stdout(buf): step()
  rows: dict[str, list[float]] = {}
  for m in _KERNEL_LINE.finditer(_ANSI.sub("", buf.getvalue())):
    s = float(m.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(3)]
    r = rows.setdefault(m.group(1), [0, 0.0, 0.0, 0.0])
    # rate x time: GFLOP, GB
    r[0], r[1], r[2], r[3] = r[0] + 1, r[1] + s, r[2] + float(m.group(4)) * s, r[3] + float(m.group(5)) * s
  total = sum(r[1] for r in rows.values()) or 1.0
  return sorted(({"kernel": k, "count": n, "ms": s * 1e3, "share": s / total, "gflops": gf / s if s else 0.0, "gb_per_s": gb / s if s else 0.0}
                 for k, (n, s, gf, gb) in rows.items()), key=lambda r: -r["ms"])

def run_llamacpp(path:str, decode:int, prefill:int) -> dict:
  from llama_cpp import Llama
  n = os.cpu_count() or 1
  llm = Llama(model_path=path, n_ctx=max(prefill, PROMPT + decode) + 8, n_threads=n, n_threads_batch=n, n_batch=512, verbose=False)
  llm.eval([1] * PROMPT)
  for _ in range(WARM - 1): llm.eval([3])
  times = [_timed(lambda: llm.eval([3])) for _ in range(decode)]
  out = {"decode_tok_per_s": len(times) / sum(times)}
  if prefill:
    llm.reset()
    out["prefill_tok_per_s"] = prefill / _timed(lambda: llm.eval([2] * prefill))
  return out

# ***** the driver *****

def side_command(side:str, args, path:pathlib.Path) -> tuple[list[str], dict, str]|str:
  """(argv, env, cwd) that runs one side on path in a fresh process, or why it can't run here."""
  me = [str(pathlib.Path(__file__).resolve()), "--side", side, "--file", str(path), "--decode", str(args.decode), "--prefill", str(args.prefill)]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  if side == "ours":
    opts = [*(["--kernels"] if args.kernels else []), *(["--prefill-kernels"] if args.prefill_kernels else [])]
    return [sys.executable, *me, *opts], {**os.environ}, str(REPO)
  if side == "tinygrad":
    if not pathlib.Path(args.tinygrad_python).exists() or not (pathlib.Path(args.tinygrad_src) / "tinygrad/llm/model.py").exists():
      return f"tinygrad's runner needs {args.tinygrad_python} and {args.tinygrad_src}/tinygrad/llm"
    return [args.tinygrad_python, *me], {**env, "PYTHONPATH": args.tinygrad_src, "DEV": env.get("DEV", "CPU")}, args.tinygrad_src
  if not pathlib.Path(args.llamacpp_python).exists():
    return f"llama.cpp: no {args.llamacpp_python} (build llama-cpp-python from source in that venv: benches/README.md)"
  return [args.llamacpp_python, *me], env, "/tmp"

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--types", default="Q8_0,Q4_K,F16", help="GGUF weight types, comma-separated")
  p.add_argument("--sides", default="ours,tinygrad,llamacpp")
  p.add_argument("--decode", type=int, default=32, help="decode steps (the first is not timed)")
  p.add_argument("--prefill", type=int, default=512, help="prompt length of the prefill measurement (0: none)")
  p.add_argument("--small", action="store_true", help="a small model (dim 512, 4 blocks, vocab 32000) for a quick run")
  p.add_argument("--kernels", action="store_true", help="ours: per-kernel time and GB/s of one decode step")
  p.add_argument("--prefill-kernels", action="store_true", help="ours: per-kernel time, share and GFLOPS of the --prefill prompt")
  p.add_argument("--cache", default="/tmp/bench_llm")
  p.add_argument("--timeout", type=float, default=3600)
  p.add_argument("--tinygrad-src", default="/work/tinygrad-src")
  p.add_argument("--tinygrad-python", default="/work/tg014/bin/python")
  p.add_argument("--llamacpp-python", default="/work/llamavenv/bin/python")
  p.add_argument("--side", help=argparse.SUPPRESS)
  p.add_argument("--file", help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args.side:
    out = run_llamacpp(args.file, args.decode, args.prefill) if args.side == "llamacpp" else \
      run_tinygrad(args.file, args.decode, args.prefill, args.kernels, args.prefill_kernels)
    print(json.dumps(out))
    return
  shape = SMALL if args.small else LLAMA_1B
  metrics: dict[str, float] = {"copy_gb_per_s": copy_bandwidth() / 1e9}
  extra: dict = {}
  print(f"copy bandwidth {metrics['copy_gb_per_s']:.1f} GB/s (read + write)", file=sys.stderr)
  for ggml_type in args.types.split(","):
    path = model_file(pathlib.Path(args.cache), ggml_type, shape)
    nbytes = decode_bytes(path)
    for side in args.sides.split(","):
      if isinstance(cmd := side_command(side, args, path), str):
        print(f"skipped {side}: {cmd}", file=sys.stderr)
        continue
      r = subprocess.run(cmd[0], env=cmd[1], cwd=cmd[2], capture_output=True, text=True, timeout=args.timeout)
      if r.returncode != 0:
        # a negative code is the signal that killed it (llama.cpp's AMX build faults in a VM without AMX state, with no output)
        print(f"{side} {ggml_type} failed (exit code {r.returncode}):\n{r.stderr[-3000:]}", file=sys.stderr)
        continue
      got = json.loads(r.stdout.strip().splitlines()[-1])
      for key in ("kernels", "prefill_kernels"):
        if key in got: extra[f"{side}/{ggml_type}/{key}"] = got.pop(key)
      got["weight_gb_per_s"] = got["decode_tok_per_s"] * nbytes / 1e9
      for k, v in got.items(): metrics[f"{side}/{ggml_type}/{k}"] = v
      print(f"{side:9s} {ggml_type:5s} " + "  ".join(f"{k} {v:.2f}" for k, v in got.items()), file=sys.stderr)
  print(json.dumps({"params": {"shape": shape, "decode": args.decode, "prefill": args.prefill, "threads": os.cpu_count()},
                    "metrics": metrics, **extra}))

if __name__ == "__main__":
  main()
