# Text in, text out through every part of tinygrad.llm on one file: a tiny random llama whose GGUF carries a byte-level BPE vocabulary
# trained here on a paragraph (merges in the file) and a chat template; the prompt is rendered, tokenized and answered greedily, token
# for token as the float64 numpy model of the same weights answers it, by the Python API and by `python -m tinygrad.llm --prompt`.
import os
import subprocess
import sys
import pytest
from tinygrad.llm.model import Transformer
from tinygrad.llm.tokenizer import SimpleTokenizer
from tinygrad.llm.chat_template import chat_template
from tests.helpers.bpe import train_bpe
from tests.helpers.gguf_models import write_model, NumpyModel

pytestmark = pytest.mark.cpu

PARAGRAPH = ("Small models answer quickly. The weights of this one are random, so its words are too, but every one of them is the word "
             "the same arithmetic in float64 picks: the tokenizer, the template, the packed weights and the cache must all agree. ") * 3

@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
  vocab = train_bpe(PARAGRAPH, 80)
  return write_model(tmp_path_factory.mktemp("e2e") / "chat.gguf", "llama", "Q4_K", vocab=vocab, context=256)

def _prompt_ids(kv:dict, tok:SimpleTokenizer, text:str) -> tuple[str, list[int]]:
  prompt = chat_template(kv, tok).render([{"role": "user", "content": text}])
  return prompt, tok.encode(prompt)

def test_chat_turn_matches_numpy(model_file):
  model, kv = Transformer.from_gguf(model_file, 128)
  tok = SimpleTokenizer.from_gguf_kv(kv)
  prompt, ids = _prompt_ids(kv, tok, "Do the weights agree?")
  assert tok.decode(ids) == prompt and len(ids) < len(prompt.encode())   # merges from the file were applied
  gen = model.generate(ids)
  got = [next(gen) for _ in range(8)]
  gen.close()
  assert got == NumpyModel(model_file).greedy(ids, 8)

def test_cli_prompt_answers_as_the_api(model_file):
  model, kv = Transformer.from_gguf(model_file, 128)
  tok = SimpleTokenizer.from_gguf_kv(kv)
  _, ids = _prompt_ids(kv, tok, "Do the weights agree?")
  # a context 6 tokens longer than the prompt: the answer ends there if no end token comes first
  model, _ = Transformer.from_gguf(model_file, len(ids) + 6)
  want = []
  for t in model.generate(ids):
    if tok.is_end(t): break
    want.append(t)
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
  out = subprocess.run([sys.executable, "-m", "tinygrad.llm", "--model", str(model_file), "--max_context", str(len(ids) + 6), "--prompt",
                        "Do the weights agree?"], capture_output=True, text=True, env=env, timeout=300)
  assert want and out.returncode == 0, out.stderr
  assert out.stdout.strip().startswith(tok.decode(want).strip())
