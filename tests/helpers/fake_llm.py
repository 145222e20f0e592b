"""A scripted stand-in for the language model, its tokenizer and chat template (tinygrad.llm's interfaces), so the server's protocol is
tested without running a network: the tokens are the 256 bytes plus two specials, and the reply to a prompt is a known function of the
prompt's tokens and the seed."""
from __future__ import annotations
import codecs
import threading
import time
from typing import Callable, Iterator

BOS, EOS = 256, 257
SPECIALS = {"<|bos|>": BOS, "<|end|>": EOS}

class ByteTokenizer:
  bos_id: int|None = BOS
  eos_id, eot_id, preset = EOS, None, "bytes"
  def encode(self, text:str) -> list[int]:
    ids: list[int] = []
    while text:
      hits = [(i, s) for s in SPECIALS if (i := text.find(s)) >= 0]
      if not hits: return ids + list(text.encode())
      i, s = min(hits)
      ids += list(text[:i].encode()) + [SPECIALS[s]]
      text = text[i + len(s):]
    return ids
  def _bytes(self, tid:int) -> bytes: return bytes([tid]) if tid < 256 else next(s for s, i in SPECIALS.items() if i == tid).encode()
  def decode(self, ids:list[int]) -> str: return b"".join(self._bytes(t) for t in ids).decode(errors="replace")
  def stream_decoder(self) -> Callable[[int|None], str]:
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    return lambda tid=None: dec.decode(b"", final=True) if tid is None else dec.decode(self._bytes(tid))
  def is_end(self, tid:int) -> bool: return tid == EOS

class LineTemplate:
  def render(self, messages:list[dict], add_generation_prompt:bool=True) -> str:
    return "<|bos|>" + "".join(f"[{m['role']}] {m['content']}\n" for m in messages) + ("[assistant] " if add_generation_prompt else "")

SENTENCE = "The quick brown fox jumps over the lazy dog. Olé, naïve café — 日本語!"

def scripted_reply(tokens:list[int], seed:int|None=None) -> str:
  """The text ScriptedModel answers with (before its end token): a tag from the prompt and the seed, then a sentence with multi-byte
  characters, so a character split over tokens is exercised."""
  return f"<{sum(tokens) % 9973}:{seed}> {SENTENCE}"

class ScriptedModel:
  """Generates scripted_reply one byte token at a time (then its end token, or the sentence again and again when endless), `delay`
  seconds per token. It records its calls, fails if two generations ever overlap, and counts generators closed early."""
  def __init__(self, max_context:int=512, delay:float=0.0, endless:bool=False):
    self.max_context, self.delay, self.endless = max_context, delay, endless
    self.calls: list[dict] = []
    self.active, self.overlaps, self.closed_early, self.tokens_out = 0, 0, 0, 0
    self.lock = threading.Lock()

  def generate(self, tokens:list[int], temperature:float=0.0, top_k:int=0, top_p:float=1.0, seed:int|None=None) -> Iterator[int]:
    if not tokens or len(tokens) >= self.max_context: raise ValueError(f"prompt of {len(tokens)} tokens for a context of {self.max_context}")
    self.calls.append({"tokens": list(tokens), "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed})
    return self._run(list(tokens), seed)

  def _run(self, tokens:list[int], seed:int|None) -> Iterator[int]:
    with self.lock:
      self.overlaps += self.active > 0
      self.active += 1
    done = False
    try:
      reply = list(scripted_reply(tokens, seed).encode())
      pos = len(tokens)
      while True:
        for t in reply:
          if pos >= self.max_context:   # a full context ends the generation, as the model's does
            done = True
            return
          time.sleep(self.delay)
          self.tokens_out += 1
          pos += 1
          yield t
        if not self.endless:
          done = True
          yield EOS
          return
    finally:
      if not done: self.closed_early += 1
      with self.lock: self.active -= 1
