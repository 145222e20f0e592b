# The server on a real Transformer (a tiny random-weight GGUF): what the openai client receives is what the model generates through the
# Python API, for streamed and plain replies, prompts that follow one another (the KV cache keeps a shared prefix between requests),
# requests arriving together, seeded sampling and stop strings.
import threading
import pytest
from tinygrad.llm.chat_template import chat_template
from tinygrad.llm.model import Transformer
from tinygrad.llm.serve import LLMServer
from tinygrad.llm.tokenizer import SimpleTokenizer
from tests.helpers.gguf_models import write_model

pytestmark = pytest.mark.cpu
openai = pytest.importorskip("openai")
CTX = 64

@pytest.fixture(scope="module")
def served(tmp_path_factory):
  model, kv = Transformer.from_gguf(write_model(tmp_path_factory.mktemp("llm") / "tiny.gguf", "qwen3", "Q8_0", context=256), CTX)
  tok = SimpleTokenizer.from_gguf_kv(kv)
  template = chat_template(kv, tok)
  server = LLMServer(("127.0.0.1", 0), model, "tiny", tok, template, verbose=False)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield server
  server.shutdown()
  server.server_close()

def client(server) -> "openai.OpenAI":
  return openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused", max_retries=0, timeout=120)

def reference(server, messages:list[dict], **sampling) -> tuple[str, int, int]:
  """(reply text, prompt tokens, reply tokens) straight from the model; run while the server is idle (one generation at a time)."""
  ids = server.tok.encode(server.template.render(messages, add_generation_prompt=True))
  dec, pieces, n = server.tok.stream_decoder(), [], 0
  with server.generation_lock:
    for tid in server.model.generate(ids, **sampling):
      if server.tok.is_end(tid): break
      pieces.append(dec(tid))
      n += 1
  return "".join(pieces) + dec(None), len(ids), n

def ask(server, text:str, stream:bool, **kw) -> tuple[str, str|None, object]:
  msgs = [{"role": "user", "content": text}]
  if not stream:
    r = client(server).chat.completions.create(model="tiny", messages=msgs, **kw)
    return r.choices[0].message.content, r.choices[0].finish_reason, r.usage
  chunks = list(client(server).chat.completions.create(model="tiny", messages=msgs, stream=True, stream_options={"include_usage": True}, **kw))
  finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
  return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), finish[0] if finish else None, chunks[-1].usage

@pytest.mark.parametrize("stream", [True, False])
def test_reply_is_the_models_generation(served, stream):
  want, n_prompt, n_reply = reference(served, [{"role": "user", "content": "Hello there"}])
  text, finish, usage = ask(served, "Hello there", stream)
  assert text == want and want
  assert finish == ("stop" if n_prompt + n_reply < CTX else "length")
  assert (usage.prompt_tokens, usage.completion_tokens) == (n_prompt, n_reply)

def test_prompts_in_turn_and_together(served):
  prompts = ["the first question", "a second, different one", "the first question!"]
  want = {p: reference(served, [{"role": "user", "content": p}])[0] for p in prompts}
  for p in prompts + prompts[::-1]: assert ask(served, p, stream=False)[0] == want[p]
  got: dict[str, str] = {}
  threads = [threading.Thread(target=lambda p=p, i=i: got.__setitem__(p, ask(served, p, stream=bool(i % 2))[0])) for i, p in enumerate(prompts)]
  for t in threads: t.start()
  for t in threads: t.join(300)
  assert got == want

def test_seeded_sampling_and_max_tokens(served):
  want = reference(served, [{"role": "user", "content": "Pick"}], temperature=0.9, seed=7)[0]
  assert ask(served, "Pick", stream=True, temperature=0.9, seed=7)[0] == want
  assert ask(served, "Pick", stream=False, temperature=0.9, seed=7)[0] == want
  text, finish, usage = ask(served, "Pick", stream=False, temperature=0.9, seed=7, max_tokens=3)
  assert finish == "length" and usage.completion_tokens == 3 and want.startswith(text)

def test_stop_string_in_real_output(served):
  want = reference(served, [{"role": "user", "content": "Hello there"}])[0]
  stop = want[4:7]
  text, finish, _ = ask(served, "Hello there", stream=True, stop=[stop])
  assert text == want[:want.find(stop)] and finish == "stop"
