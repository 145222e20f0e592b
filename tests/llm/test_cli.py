# `python -m tinygrad.llm` as a user runs it (a subprocess) on a tiny GGUF with random weights: one prompt, the terminal chat, the benchmark
# lines, --serve, and the errors for a bad model name, file, architecture or prompt. What it prints is checked against the same model
# run here through the Python API.
import os
import pathlib
import re
import socket
import subprocess
import sys
import gguf
import numpy as np
import pytest
import tinygrad
from tinygrad.llm import cli
from tinygrad.llm.chat_template import chat_template
from tinygrad.llm.model import Transformer
from tinygrad.llm.tokenizer import SimpleTokenizer
from tests.helpers.gguf_models import write_model

pytestmark = pytest.mark.cpu
openai = pytest.importorskip("openai")
# the subprocess imports the tinygrad this test imported (the checkout or an installed copy)
PACKAGE_ROOT = str(pathlib.Path(tinygrad.__file__).resolve().parents[1])
CTX = 64

def run_cli(*args:str, stdin:str="", timeout:float=300) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
  return subprocess.run([sys.executable, "-m", "tinygrad.llm", *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout)

@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory) -> pathlib.Path: return write_model(tmp_path_factory.mktemp("llm") / "tiny.gguf", "llama", "F32", context=256)

@pytest.fixture(scope="module")
def local(gguf_file):
  """The same model in this process: (model, tokenizer, chat template)."""
  model, kv = Transformer.from_gguf(gguf_file, CTX)
  tok = SimpleTokenizer.from_gguf_kv(kv)
  return model, tok, chat_template(kv, tok)

def greedy_reply(local, messages:list[dict]) -> str:
  model, tok, template = local
  dec, pieces = tok.stream_decoder(), []
  for tid in model.generate(tok.encode(template.render(messages, add_generation_prompt=True))):
    if tok.is_end(tid): break
    pieces.append(dec(tid))
  return "".join(pieces) + dec(None)

def test_prompt_answers_once(gguf_file, local):
  r = run_cli("--model", str(gguf_file), "--max_context", str(CTX), "--prompt", "Hello there")
  assert r.returncode == 0, r.stderr
  assert r.stdout == greedy_reply(local, [{"role": "user", "content": "Hello there"}]) + "\n"
  assert '"tiny-llama-F32"' in r.stderr and f"max context {CTX}" in r.stderr

def test_chat_reads_turns_from_stdin(gguf_file, local):
  r = run_cli("--model", str(gguf_file), "--max_context", str(CTX), stdin="Hi\n")
  assert r.returncode == 0, r.stderr
  assert r.stdout == ">>> " + greedy_reply(local, [{"role": "user", "content": "Hi"}]) + "\n\n>>> "

BENCH_LINE = re.compile(r"^ *\d+\.\d\d ms, +\d+\.\d\d tok/s, +\d+\.\d\d GB/s, \d+/\d+ MB  --  .*$")

def test_benchmark_prints_a_line_per_token(gguf_file):
  r = run_cli("--model", str(gguf_file), "--max_context", str(CTX), "--benchmark", "3")
  assert r.returncode == 0, r.stderr
  lines = r.stdout.splitlines()
  assert len(lines) == 3 and all(BENCH_LINE.match(line) for line in lines), r.stdout
  # the decode steps read the weights: the last (compiled) step moved at least the matmul weights' bytes
  gbs, ms = float(lines[-1].split("tok/s,")[1].split("GB/s")[0]), float(lines[-1].split("ms,")[0])
  assert gbs * ms * 1e6 > 300_000
  # a context that fills up ends the benchmark early, without a line for the step that did not happen
  r = run_cli("--model", str(gguf_file), "--max_context", "4", "--benchmark", "10")
  assert r.returncode == 0 and len(r.stdout.splitlines()) == 3 and all(BENCH_LINE.match(line) for line in r.stdout.splitlines()), r.stdout

def test_serve_answers_openai_requests(gguf_file, local):
  env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
  proc = subprocess.Popen([sys.executable, "-m", "tinygrad.llm", "--model", str(gguf_file), "--max_context", str(CTX), "--serve", "0"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
  try:
    lines: list[str] = []
    while not (m := re.search(r"serving on http://127\.0\.0\.1:(\d+)/", line := proc.stderr.readline())):
      assert line, "".join(lines)
      lines.append(line)
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{m.group(1)}/v1", api_key="unused", max_retries=0, timeout=120)
    assert [x.id for x in c.models.list().data] == ["tiny-llama-F32"]
    msgs = [{"role": "user", "content": "Hello there"}]
    text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(model="x", messages=msgs, stream=True) if ch.choices)
    assert text == greedy_reply(local, msgs)
  finally:
    proc.terminate()
    proc.wait(30)

@pytest.mark.parametrize("args,message", [
  (["--model", "no-such-model"], "known names: llama3.2:1b, "),
  (["--model", "{tmp}/not-there.gguf"], "neither a file nor a known model name"),
  (["--model", "{tmp}/text.gguf"], "not a GGUF file"),
  (["--model", "{tmp}/mamba.gguf"], "'mamba' is not supported (supported: llama"),
  (["--model", "{gguf}", "--max_context", "8", "--prompt", "a prompt longer than eight tokens, surely"], "the context holds 8"),
])
def test_errors_are_one_line(tmp_path, gguf_file, args, message):
  (tmp_path / "text.gguf").write_text("hello")
  w = gguf.GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
  w.add_block_count(1)
  w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
  w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
  r = run_cli(*[a.format(tmp=tmp_path, gguf=gguf_file) for a in args])
  assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
  assert r.stderr.splitlines()[-1].startswith("error: ")

def test_port_in_use_is_one_line(gguf_file):
  with socket.socket() as busy:
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    r = run_cli("--model", str(gguf_file), "--serve", str(port := busy.getsockname()[1]))
  assert r.returncode == 1 and f"error: cannot serve on 127.0.0.1:{port}: Address already in use" in r.stderr and "Traceback" not in r.stderr

def test_bad_arguments_exit_2(gguf_file):
  for args in (["--max_context", "1"], ["--benchmark", "0"], ["--temperature", "-1"], ["--serve", "port"]):
    r = run_cli("--model", str(gguf_file), *args, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "error:" in r.stderr

def test_named_models_come_through_fetch(monkeypatch, gguf_file):
  fetched = []
  monkeypatch.setattr(cli, "fetch", lambda url: fetched.append(url) or gguf_file)
  assert cli.model_file("qwen3:0.6b") == gguf_file and fetched == [cli.models["qwen3:0.6b"]]
  def offline(url): raise OSError("network is unreachable")
  monkeypatch.setattr(cli, "fetch", offline)
  with pytest.raises(cli.CLIError, match=r"downloading model 'olmoe' from https://.*: network is unreachable"): cli.model_file("olmoe")
  assert all(url.startswith("https://huggingface.co/") and url.endswith(".gguf") for url in cli.models.values())
