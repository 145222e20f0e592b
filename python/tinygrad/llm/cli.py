"""`python -m tinygrad.llm`: chat with a GGUF language model in the terminal, answer one --prompt, --serve it (OpenAI-style API and a chat
page) or --benchmark its decode speed. --model is a local .gguf file or one of the names in `models`, downloaded once into the cache."""
from __future__ import annotations
import argparse
import pathlib
import sys
import time
from typing import Any, Iterator
from tinygrad import nn
from tinygrad.helpers import GlobalCounters, fetch
from tinygrad.llm.chat_template import chat_template, FallbackTemplate  # noqa: F401  (FallbackTemplate: tinygrad 0.14's home of it)
from tinygrad.llm.model import Transformer
from tinygrad.llm.serve import LLMServer
from tinygrad.llm.tokenizer import SimpleTokenizer

# tinygrad 0.14's list, less the models whose architecture (qwen35, deepseek2) or tensor types (IQ4_XS) are not supported here
models = {
  "llama3.2:1b": "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q6_K.gguf",
  "llama3.2:1b-q4": "https://huggingface.co/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
  "llama3.2:3b": "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-Q6_K.gguf",
  "llama3.2:3b-f16": "https://huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF/resolve/main/Llama-3.2-3B-Instruct-f16.gguf",
  "llama3.1:8b": "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/resolve/main/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf",
  "qwen3:0.6b": "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf",
  "qwen3:1.7b": "https://huggingface.co/unsloth/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q4_K_M.gguf",
  "qwen3:8b": "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
  "qwen3:30b-a3b": "https://huggingface.co/Qwen/Qwen3-30B-A3B-GGUF/resolve/main/Qwen3-30B-A3B-Q4_K_M.gguf",
  "olmoe": "https://huggingface.co/allenai/OLMoE-1B-7B-0924-Instruct-GGUF/resolve/main/olmoe-1b-7b-0924-instruct-q4_k_m.gguf",
}

class CLIError(Exception):
  """A mistake on the command line or in the model file: printed as one line, exit status 1."""

def model_file(name:str) -> pathlib.Path:
  """The local file for --model: a path as it is, or one of `models` downloaded (once) through fetch's cache."""
  if name in models:
    try: return fetch(models[name])
    except OSError as e: raise CLIError(f"downloading model '{name}' from {models[name]} failed: {e}") from e
  if (p := pathlib.Path(name).expanduser()).is_file(): return p
  raise CLIError(f"--model '{name}' is neither a file nor a known model name; known names: {', '.join(models)}")

def stream_reply(model:Transformer, tok:SimpleTokenizer, ids:list[int], out:Any, **sampling:Any) -> Iterator[str]:
  """Generates a reply to the prompt's token ids, writing it to `out` as it comes; yields the pieces (the caller joins them)."""
  dec, gen = tok.stream_decoder(), model.generate(ids, **sampling)
  try:
    for tid in gen:
      if tok.is_end(tid): break
      if (piece := dec(tid)):
        out.write(piece)
        out.flush()
        yield piece
    if (piece := dec(None)):
      out.write(piece)
      yield piece
  finally: gen.close()

def prompt_ids(model:Transformer, tok:SimpleTokenizer, template:Any, messages:list[dict]) -> list[int]:
  ids = tok.encode(template.render(messages, add_generation_prompt=True))
  if len(ids) >= model.max_context:
    raise CLIError(f"the prompt has {len(ids)} tokens, but the context holds {model.max_context} (raise --max_context or shorten it)")
  return ids

def benchmark(model:Transformer, tok:SimpleTokenizer, count:int) -> None:
  """Times `count` decode steps from a one-token prompt: per token its time, tok/s, GB/s the kernels read and wrote, and the MB they
  moved / MB in use on the device, as tinygrad prints them."""
  toks = [tok.bos_id if tok.bos_id is not None else tok.eos_id]
  gen = model.generate(toks)
  try:
    for _ in range(count):
      GlobalCounters.reset()
      st = time.perf_counter_ns()
      if (tid := next(gen, None)) is None: break   # the context is full
      ns = time.perf_counter_ns() - st
      toks.append(tid)
      print(f"{ns*1e-6:7.2f} ms, {1e9/ns:7.2f} tok/s, {GlobalCounters.global_mem/ns:7.2f} GB/s, {GlobalCounters.global_mem//1000000}/"
            f"{GlobalCounters.mem_used//1000000} MB  --  {tok.decode(toks[1:])!r}", flush=True)
  finally: gen.close()

def chat(model:Transformer, tok:SimpleTokenizer, template:Any, sampling:dict) -> None:
  """The terminal chat: a line from stdin is a user turn, the reply streams to stdout; Ctrl-C stops a reply, Ctrl-D ends the chat."""
  messages: list[dict] = []
  while True:
    try: line = input(">>> ")
    except EOFError: break
    messages.append({"role": "user", "content": line})
    try: ids = prompt_ids(model, tok, template, messages)
    except CLIError as e:
      print(f"error: {e}", file=sys.stderr)
      messages.pop()
      continue
    pieces: list[str] = []
    try: pieces.extend(stream_reply(model, tok, ids, sys.stdout, **sampling))
    except KeyboardInterrupt: pass
    print("\n")
    messages.append({"role": "assistant", "content": "".join(pieces)})

def main(argv:list[str]|None=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m tinygrad.llm", description=__doc__)
  parser.add_argument("--model", "-m", default=next(iter(models)), help=f"a local .gguf file or one of: {', '.join(models)}")
  parser.add_argument("--max_context", type=int, default=4096, help="the KV cache's length in tokens (prompt and reply together)")
  parser.add_argument("--serve", nargs="?", type=int, const=8000, metavar="PORT", help="serve the OpenAI-style API and chat page (port 8000)")
  parser.add_argument("--host", default="127.0.0.1", help="the address --serve binds (default 127.0.0.1: this machine only)")
  parser.add_argument("--warmup", action="store_true", help="compile prefill and decode before the first prompt")
  parser.add_argument("--benchmark", nargs="?", type=int, const=20, metavar="COUNT", help="time COUNT decode steps (default 20) and exit")
  parser.add_argument("--prompt", help="answer this one prompt and exit")
  parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
  parser.add_argument("--seed", type=int, help="the sampling seed")
  args = parser.parse_args(argv)
  if args.max_context < 2: parser.error(f"--max_context must be at least 2, got {args.max_context}")
  if args.benchmark is not None and args.benchmark < 1: parser.error(f"--benchmark COUNT must be at least 1, got {args.benchmark}")
  if args.temperature < 0: parser.error(f"--temperature must be >= 0, got {args.temperature}")
  try: run(args)
  except CLIError as e: sys.exit(f"error: {e}")
  except KeyboardInterrupt: sys.exit(130)

def run(args:argparse.Namespace) -> None:
  path = model_file(args.model)
  try:
    model, kv = Transformer.from_gguf(path, args.max_context)
    tok = SimpleTokenizer.from_gguf_kv(kv)
    template = chat_template(kv, tok)
  except (ValueError, NotImplementedError, OSError) as e: raise CLIError(str(e) if str(path) in str(e) else f"{path}: {e}") from e
  name = kv.get("general.name") or kv.get("general.basename") or path.stem
  params = nn.state.get_parameters(model)
  print(f"using model \"{name}\" ({path.stat().st_size:,} bytes, {sum(p.numel() for p in params):,} parameters), max context {model.max_context}"
        f" on {params[0].device}", file=sys.stderr)
  sampling = {"temperature": args.temperature, "seed": args.seed}
  server = None
  if args.serve is not None:   # bound before the warmup, so that a port in use is reported at once
    try: server = LLMServer((args.host, args.serve), model, name, tok, template)
    except OSError as e: raise CLIError(f"cannot serve on {args.host}:{args.serve}: {e.strerror or e}") from e
  if args.warmup or server is not None: model.warmup()
  if server is not None:
    print(f"serving on http://{args.host}:{server.server_address[1]}/", file=sys.stderr, flush=True)
    try: server.serve_forever()
    finally: server.server_close()
  elif args.benchmark is not None: benchmark(model, tok, args.benchmark)
  elif args.prompt is not None:
    for _ in stream_reply(model, tok, prompt_ids(model, tok, template, [{"role": "user", "content": args.prompt}]), sys.stdout, **sampling): pass
    print()
  else: chat(model, tok, template, sampling)
