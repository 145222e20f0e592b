"""Chat messages -> the prompt text a model was trained on. The GGUF file's tokenizer.chat_template (Jinja) is rendered with jinja2 when it is
installed (the `llm` extra), in a sandbox set up the way Hugging Face's transformers renders it; without jinja2, or for a file without a
template, a built-in format per family: Llama 3 headers, Llama 2 / Mistral [INST], ChatML (Qwen 2/3), OLMo (<|user|>)."""
from __future__ import annotations
import json
import time
from typing import Any, Callable
from tinygrad.llm.tokenizer import SimpleTokenizer

__all__ = ["chat_template", "JinjaChatTemplate", "FallbackChatTemplate", "normalize_messages"]

def normalize_messages(messages:Any) -> list[dict]:
  """Checks messages (a non-empty list of {"role": str, "content": str | None | [{"type": "text", "text": str}, ...]}) and returns copies with
  each list of text parts joined into one string, so a template sees the same strings whether or not it knows OpenAI's content parts."""
  if not isinstance(messages, list) or not messages: raise ValueError(f"messages must be a non-empty list of messages, not {messages!r:.200}")
  out = []
  for i, msg in enumerate(messages):
    if not isinstance(msg, dict): raise ValueError(f"messages[{i}] must be an object, not {type(msg).__name__}")
    if not isinstance(msg.get("role"), str): raise ValueError(f"messages[{i}] needs a string 'role', it has {msg.get('role')!r:.100}")
    content = msg.get("content")
    if isinstance(content, list):
      texts = []
      for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
          kind = part.get("type") if isinstance(part, dict) else type(part).__name__
          raise ValueError(f"messages[{i}].content[{j}] of type {kind!r} is not supported (only {{'type': 'text', 'text': str}} parts)")
        texts.append(part["text"])
      content = "".join(texts)
    elif content is not None and not isinstance(content, str):
      raise ValueError(f"messages[{i}].content must be a string or a list of text parts, not {type(content).__name__}")
    out.append({**msg, "content": content})
  return out

class JinjaChatTemplate:
  """The model's own Jinja template. Settings as transformers renders chat templates: an immutable sandbox (a template cannot touch Python
  objects), trim_blocks/lstrip_blocks, loop controls, tojson without HTML escaping, raise_exception, strftime_now, bos_token/eos_token."""
  name = "jinja"
  def __init__(self, source:str, bos_token:str, eos_token:str):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    self._errors: tuple[type[Exception], ...] = (jinja2.TemplateError, TypeError)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
      return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    def raise_exception(message:str): raise jinja2.TemplateError(message)
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda fmt: time.strftime(fmt), bos_token=bos_token, eos_token=eos_token)
    try: self._template = env.from_string(source)
    except jinja2.TemplateError as e: raise ValueError(f"the GGUF file's tokenizer.chat_template does not parse: {e}") from e
  def render(self, messages:list[dict], add_generation_prompt:bool=True, **variables) -> str:
    msgs = normalize_messages(messages)
    try: return self._template.render(messages=msgs, add_generation_prompt=add_generation_prompt, **variables)
    except self._errors as e: raise ValueError(f"the chat template rejected the messages: {e}") from e

def _llama3(msgs:list[dict], gen:bool, bos:str, eos:str) -> str:
  out = bos + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{(m['content'] or '').strip()}<|eot_id|>" for m in msgs)
  return out + ("<|start_header_id|>assistant<|end_header_id|>\n\n" if gen else "")

def _chatml(msgs:list[dict], gen:bool, bos:str, eos:str) -> str:
  return "".join(f"<|im_start|>{m['role']}\n{m['content'] or ''}<|im_end|>\n" for m in msgs) + ("<|im_start|>assistant\n" if gen else "")

def _inst(msgs:list[dict], gen:bool, bos:str, eos:str) -> str:
  # Llama 2's format: an optional system message folded into the first user turn, then strictly alternating user/assistant turns
  system = (msgs[0]["content"] or "") if msgs[0]["role"] == "system" else None
  turns, out = msgs[1:] if system is not None else msgs, ""
  for i, m in enumerate(turns):
    if (m["role"] == "user") != (i % 2 == 0): raise ValueError("the [INST] format needs roles alternating user/assistant/user/...")
    content = m["content"] or ""
    if i == 0 and system is not None: content = f"<<SYS>>\n{system}\n<</SYS>>\n\n{content}"
    if m["role"] == "user": out += f"{bos}[INST] {content.strip()} [/INST]"
    elif m["role"] == "assistant": out += f" {content.strip()} {eos}"
  return out

def _olmo(msgs:list[dict], gen:bool, bos:str, eos:str) -> str:
  out = bos
  for i, m in enumerate(msgs):
    if m["role"] in ("system", "user"): out += f"<|{m['role']}|>\n{m['content'] or ''}\n"
    elif m["role"] == "assistant": out += f"<|assistant|>\n{m['content'] or ''}{eos}" + ("\n" if i < len(msgs) - 1 else "")
    if i == len(msgs) - 1 and gen: out += "<|assistant|>\n"
  return out

FALLBACK_FORMATS: dict[str, Callable[[list[dict], bool, str, str], str]] = {"llama3": _llama3, "inst": _inst, "chatml": _chatml, "olmo": _olmo}

class FallbackChatTemplate:
  """A built-in chat format (FALLBACK_FORMATS), rendering exactly what its family's reference template renders for plain messages."""
  def __init__(self, family:str, bos_token:str, eos_token:str):
    if family not in FALLBACK_FORMATS: raise ValueError(f"no built-in chat format {family!r} (there are: {', '.join(FALLBACK_FORMATS)})")
    self.name, self.family, self._bos, self._eos = f"fallback:{family}", family, bos_token, eos_token
  def render(self, messages:list[dict], add_generation_prompt:bool=True, **variables) -> str:
    if variables.get("tools"): raise ValueError("tool definitions need the model's own chat template, rendered with jinja2 (pip install jinja2)")
    return FALLBACK_FORMATS[self.family](normalize_messages(messages), add_generation_prompt, self._bos, self._eos)

def fallback_family(kv:dict, tok:SimpleTokenizer) -> str:
  """The built-in format for a model: by architecture where it decides, then by tokenizer, then by the chat tokens in the vocabulary."""
  arch = kv.get("general.architecture", "")
  if arch.startswith("qwen"): return "chatml"
  if arch.startswith("olmo"): return "olmo"
  if tok.model == "llama": return "inst"
  if tok.preset in ("llama3", "qwen2", "olmo"): return {"llama3": "llama3", "qwen2": "chatml", "olmo": "olmo"}[tok.preset]
  if "<|start_header_id|>" in tok.special_tokens: return "llama3"
  if "<|user|>" in tok.special_tokens and "<|im_start|>" not in tok.special_tokens: return "olmo"
  return "chatml"

class FallbackTemplate(FallbackChatTemplate):
  """tinygrad 0.14's name and constructor (in tinygrad.llm.cli): the built-in format of a tokenizer's family, BOS text from its bos_id."""
  def __init__(self, tok:SimpleTokenizer):
    super().__init__(fallback_family({}, tok), tok.decode([tok.bos_id]) if tok.bos_id is not None else "", tok.decode([tok.eos_id]))

def chat_template(kv:dict, tok:SimpleTokenizer, use_jinja:bool=True) -> JinjaChatTemplate|FallbackChatTemplate:
  """The chat template of a model from its GGUF metadata: the file's own (tokenizer.chat_template) when jinja2 imports and use_jinja, else
  the built-in format of its family. The returned object's .name says which ("jinja" or "fallback:<family>")."""
  def token_text(key:str) -> str:
    tid = kv.get(key)
    return tok.decode([tid]) if tid is not None else ""
  # bos_token is the BOS text whether or not the tokenizer adds a BOS by itself: templates that want one write it
  bos, eos = token_text("tokenizer.ggml.bos_token_id"), tok.decode([tok.eos_id])
  if use_jinja and isinstance(source := kv.get("tokenizer.chat_template"), str):
    try: return JinjaChatTemplate(source, bos, eos)
    except ImportError: pass
  return FallbackChatTemplate(fallback_family(kv, tok), bos, eos)
