# tinygrad.llm.chat_template: each family's Jinja template (written here in the form its models ship) rendered by jinja2 and by the built-in
# fallback gives the same text; the sandboxed environment (tojson, raise_exception, strftime_now, trim_blocks); bad messages; without jinja2.
import sys
import time
import numpy as np
import pytest
from tinygrad.llm.gguf import gguf_load
from tinygrad.llm.tokenizer import SimpleTokenizer
from tinygrad.llm.chat_template import chat_template, FallbackChatTemplate, JinjaChatTemplate
from tests.helpers.bpe import train_bpe, sentencepiece_vocab

pytest.importorskip("jinja2")

PARAGRAPH = "A user asks the assistant a question, and the assistant answers it briefly. System prompts set the tone of the answers."

LLAMA3 = """{% for message in messages %}
{% set turn = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}
{% if loop.first %}{% set turn = bos_token + turn %}{% endif %}
{{ turn }}
{%- endfor %}
{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"""

CHATML = """{% for message in messages %}
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
{%- endfor %}
{% if add_generation_prompt %}
{{ '<|im_start|>assistant\n' }}
{%- endif %}"""

INST = """{% if messages[0]['role'] == 'system' %}
{% set system = messages[0]['content'] %}{% set turns = messages[1:] %}
{% else %}
{% set system = none %}{% set turns = messages %}
{% endif %}
{% for message in turns %}
{% if (message['role'] == 'user') != loop.index0 is even %}{{ raise_exception('roles must alternate user/assistant/user/...') }}{% endif %}
{% set content = message['content'] %}
{% if loop.first and system is not none %}{% set content = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content %}{% endif %}
{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content | trim + ' [/INST]' }}
{%- elif message['role'] == 'assistant' %}{{ ' ' + content | trim + ' ' + eos_token }}
{%- endif %}
{% endfor %}"""

OLMO = """{{ bos_token }}{% for message in messages %}
{% if message['role'] == 'system' or message['role'] == 'user' %}{{ '<|' + message['role'] + '|>\n' + message['content'] + '\n' }}
{%- elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' + message['content'] + eos_token }}{% if not loop.last %}{{ '\n' }}{% endif %}
{%- endif %}
{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}
{% endfor %}"""

# family: (its template, its architecture and tokenizer metadata)
FAMILIES = {
  "llama3": (LLAMA3, {"general.architecture": "llama", **train_bpe(PARAGRAPH, 60, pre="llama-bpe")}),
  "chatml": (CHATML, {"general.architecture": "qwen3", **train_bpe(PARAGRAPH, 60, pre="qwen2")}),
  "inst": (INST, {"general.architecture": "llama", **sentencepiece_vocab(PARAGRAPH, 60)}),
  "olmo": (OLMO, {"general.architecture": "olmoe", **train_bpe(PARAGRAPH, 60, pre="olmo")}),
}
# OLMoE's BOS and EOS are both <|endoftext|>
_olmo_kv = FAMILIES["olmo"][1]
_olmo_kv["tokenizer.ggml.bos_token_id"] = _olmo_kv["tokenizer.ggml.eos_token_id"] = _olmo_kv["tokenizer.ggml.tokens"].index("<|endoftext|>")
CONVERSATIONS = [
  [{"role": "user", "content": "Hello!"}],
  [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
   {"role": "user", "content": "  And 3+3? ünïcode 👍 <b>&</b>\n"}],
  [{"role": "user", "content": [{"type": "text", "text": "Two "}, {"type": "text", "text": "parts"}]}],
  [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello there. "}],
]

def _template(family:str, with_source:bool=True):
  source, kv = FAMILIES[family]
  kv = {**kv, "tokenizer.chat_template": source} if with_source else kv
  tok = SimpleTokenizer.from_gguf_kv(kv)
  return chat_template(kv, tok), tok

@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("conv", range(len(CONVERSATIONS)))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_fallback_renders_like_the_template(family, conv, gen):
  jinja, tok = _template(family)
  fallback, _ = _template(family, with_source=False)
  assert isinstance(jinja, JinjaChatTemplate) and fallback.name == f"fallback:{family}"
  text = jinja.render(CONVERSATIONS[conv], add_generation_prompt=gen)
  assert text == fallback.render(CONVERSATIONS[conv], add_generation_prompt=gen)
  assert tok.decode(tok.encode(text)) == text or family == "inst"  # SentencePiece adds a space after each special token it splits out

def test_rendered_prompts():
  msgs = CONVERSATIONS[1]
  llama3, tok = _template("llama3")
  text = llama3.render(msgs)
  assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>")
  assert text.endswith("And 3+3? ünïcode 👍 <b>&</b><|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
  ids = tok.encode(text)
  assert ids[0] == tok.bos_id and ids.count(tok.special_tokens["<|eot_id|>"]) == 4
  assert _template("chatml")[0].render(msgs[:2]) == "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n" \
                                                    "<|im_start|>assistant\n"
  assert _template("inst")[0].render(msgs) == "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4 </s><s>[INST] And 3+3? " \
                                              "ünïcode 👍 <b>&</b> [/INST]"
  assert _template("olmo")[0].render(msgs[:3], add_generation_prompt=False) == "<|endoftext|><|system|>\nYou are terse.\n<|user|>\nWhat is 2+2?\n" \
                                                                               "<|assistant|>\n4<|endoftext|>"

def test_without_jinja2(monkeypatch):
  monkeypatch.setitem(sys.modules, "jinja2", None)  # import jinja2 raises ImportError
  for family in FAMILIES:
    tmpl, _ = _template(family)
    assert isinstance(tmpl, FallbackChatTemplate) and tmpl.name == f"fallback:{family}"

def test_family_from_vocabulary():
  kv = {"general.architecture": "llama", **train_bpe(PARAGRAPH, 10, pre="default")}
  assert chat_template(kv, SimpleTokenizer.from_gguf_kv(kv)).name == "fallback:llama3"   # <|start_header_id|> is in the vocabulary
  kv = {"general.architecture": "llama", **train_bpe(PARAGRAPH, 10, pre="default", specials=("<|im_start|>", "<|im_end|>", "<|user|>"))}
  assert chat_template(kv, SimpleTokenizer.from_gguf_kv(kv)).name == "fallback:chatml"
  kv = {"general.architecture": "qwen2", **train_bpe(PARAGRAPH, 10, pre="llama-bpe")}
  assert chat_template(kv, SimpleTokenizer.from_gguf_kv(kv)).name == "fallback:chatml"  # the architecture decides first

def _jinja(source:str) -> JinjaChatTemplate:
  _, kv = FAMILIES["llama3"]
  return chat_template({**kv, "tokenizer.chat_template": source}, SimpleTokenizer.from_gguf_kv(kv))

def test_jinja_environment():
  msgs = [{"role": "user", "content": "<a & 'b'> ü"}]
  # tojson as transformers has it: no HTML escaping, non-ASCII kept, json.dumps' keywords
  assert _jinja("{{ messages[0].content | tojson }}").render(msgs) == '"<a & \'b\'> ü"'
  assert _jinja("{{ {'b': 1, 'a': [2]} | tojson(sort_keys=true, indent=1) }}").render(msgs) == '{\n "a": [\n  2\n ],\n "b": 1\n}'
  assert _jinja("{{ strftime_now('%Y') }}").render(msgs) == time.strftime("%Y")
  assert _jinja("{{ bos_token }}|{{ eos_token }}").render(msgs) == "<|begin_of_text|>|<|end_of_text|>"
  # trim_blocks and lstrip_blocks: a line holding only a block tag leaves nothing behind
  assert _jinja("{% for m in messages %}\n  {% if true %}\n{{ m.role }}\n  {% endif %}\n{% endfor %}\n").render(msgs) == "user\n"
  assert _jinja("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}").render(msgs) == "1"  # loop controls
  # extra variables reach the template (tools, enable_thinking, ...)
  assert _jinja("{{ tools | length }}{{ enable_thinking }}").render(msgs, tools=[{"a": 1}], enable_thinking=False) == "1False"
  with pytest.raises(ValueError, match="roles must alternate"): _jinja("{{ raise_exception('roles must alternate') }}").render(msgs)

def test_jinja_sandbox():
  # a template from a downloaded file cannot reach Python internals or change what it is given
  with pytest.raises(ValueError): _jinja("{{ ''.__class__.__mro__[1].__subclasses__() }}").render([{"role": "user", "content": "x"}])
  msgs = [{"role": "user", "content": "x"}]
  with pytest.raises(ValueError): _jinja("{{ messages.append(1) }}").render(msgs)
  assert msgs == [{"role": "user", "content": "x"}]
  with pytest.raises(ValueError, match="does not parse"): _jinja("{% for m in messages %}")

BAD_MESSAGES = [("not a list", "non-empty list"), ([], "non-empty list"), (["hi"], "messages\\[0\\] must be an object"),
                ([{"content": "hi"}], "string 'role'"), ([{"role": "user", "content": 5}], "content must be a string"),
                ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "'image_url' is not supported"),
                ([{"role": "user", "content": ["text"]}], "'str' is not supported")]

@pytest.mark.parametrize("family", ["llama3", "inst"])
@pytest.mark.parametrize("with_source", [True, False])
@pytest.mark.parametrize("bad", range(len(BAD_MESSAGES)))
def test_bad_messages(family, with_source, bad):
  msgs, match = BAD_MESSAGES[bad]
  with pytest.raises(ValueError, match=match): _template(family, with_source)[0].render(msgs)

@pytest.mark.parametrize("with_source", [True, False])
def test_inst_roles_must_alternate(with_source):
  with pytest.raises(ValueError, match="alternat"):
    _template("inst", with_source)[0].render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])

def test_fallback_refuses_tools():
  with pytest.raises(ValueError, match="jinja2"): _template("chatml", with_source=False)[0].render(CONVERSATIONS[0], tools=[{"type": "function"}])
  assert "Hello!" in _template("chatml", with_source=False)[0].render(CONVERSATIONS[0], tools=None)

def test_from_gguf_file(tmp_path):
  # the path python -m tinygrad.llm takes: metadata written by the gguf package, read back by gguf_load
  gguf = pytest.importorskip("gguf")
  kv = {**FAMILIES["llama3"][1], "tokenizer.chat_template": LLAMA3}
  w = gguf.GGUFWriter(str(tmp_path / "tok.gguf"), "llama")
  w.add_tokenizer_model(kv["tokenizer.ggml.model"])
  w.add_tokenizer_pre(kv["tokenizer.ggml.pre"])
  w.add_token_list(kv["tokenizer.ggml.tokens"])
  w.add_token_types(kv["tokenizer.ggml.token_type"])
  w.add_token_merges(kv["tokenizer.ggml.merges"])
  w.add_bos_token_id(kv["tokenizer.ggml.bos_token_id"])
  w.add_eos_token_id(kv["tokenizer.ggml.eos_token_id"])
  w.add_add_bos_token(True)
  w.add_chat_template(LLAMA3)
  w.add_tensor("x", np.zeros(4, np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  loaded, _ = gguf_load(tmp_path / "tok.gguf")
  tok = SimpleTokenizer.from_gguf_kv(loaded)
  text = chat_template(loaded, tok).render(CONVERSATIONS[1])
  assert text == _template("llama3")[0].render(CONVERSATIONS[1])
  assert tok.encode(text) == SimpleTokenizer.from_gguf_kv(kv).encode(text) and tok.decode(tok.encode(text)) == text

def test_fallback_template_as_in_tinygrad():
  # tinygrad 0.14: tinygrad.llm.cli.FallbackTemplate(tok).render(messages=..., add_generation_prompt=True) in the tokenizer's family format
  from tinygrad.llm.cli import FallbackTemplate
  kv = {"general.architecture": "llama", **train_bpe(PARAGRAPH, 10, pre="llama-bpe")}
  tok = SimpleTokenizer.from_gguf_kv(kv)
  msgs = [{"role": "user", "content": "Hi"}]
  want = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
  assert FallbackTemplate(tok).render(messages=msgs, add_generation_prompt=True) == want
