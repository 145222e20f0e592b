"""The tokenizers of GGUF language models, built from the file's tokenizer.ggml.* metadata: byte-level BPE (tokenizer.ggml.model "gpt2")
with the pre-tokenizer (word-splitting regex) of each supported family, and SentencePiece (model "llama": score-ranked merges, "▁" for
spaces, <0xNN> byte fallback). Special tokens (control and user-defined) are split out of the text before either runs."""
from __future__ import annotations
import codecs
import functools
import heapq
import itertools
import re
import unicodedata
from typing import Callable, Sequence

__all__ = ["SimpleTokenizer"]

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# the texts of the special tokens that end a turn or a document in the supported families; is_end covers those in the vocabulary
END_TOKEN_TEXTS = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "</s>")
SPM_SPACE = "\u2581"  # "▁": SentencePiece's stand-in for a space

@functools.cache
def _unicode_classes() -> tuple[str, str, str]:
  """(letters, numbers, whitespace) as bodies of re character classes: Python's re has no \\p{L} or \\p{N}, so the code points of the
  Unicode categories L*, N* and Z* are listed, runs of neighbours as ranges (a class listing every code point makes matching slow).
  Planes 4 and up hold no letters, digits or spaces, so the scan stops at 0x40000."""
  def ranges(pred:Callable[[str], bool]) -> str:
    cps = [cp for cp in range(0x40000) if pred(unicodedata.category(chr(cp)))]
    runs = [[cp for _, cp in g] for _, g in itertools.groupby(enumerate(cps), lambda e: e[1] - e[0])]
    return "".join(re.escape(chr(r[0])) + (f"-{re.escape(chr(r[-1]))}" if len(r) > 1 else "") for r in runs)
  # \s of the regex engines tokenizers are specified in is Unicode White_Space: these controls plus the separators (Z*)
  return ranges(lambda c: c[0] == "L"), ranges(lambda c: c[0] == "N"), r"\t\n\x0b\x0c\r\x85" + ranges(lambda c: c[0] == "Z")

def _gpt2_words(L:str, N:str, S:str) -> str:
  return f"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+"
def _llama3_words(L:str, N:str, S:str, digits:str="{1,3}") -> str:
  return (f"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n{L}{N}]?[{L}]+|[{N}]{digits}| ?[^{S}{L}{N}]+[\\r\\n]*|[{S}]*[\\r\\n]+|"
          f"[{S}]+(?![^{S}])|[{S}]+")
def _qwen2_words(L:str, N:str, S:str) -> str: return _llama3_words(L, N, S, digits="")  # digits one by one

# the pre-tokenizer of each tokenizer.ggml.pre value: (canonical preset name, regex builder)
PRETOKENIZERS: dict[str, tuple[str, Callable[[str, str, str], str]]] = {
  "default": ("gpt2", _gpt2_words), "gpt2": ("gpt2", _gpt2_words), "olmo": ("olmo", _gpt2_words),
  "llama-bpe": ("llama3", _llama3_words), "llama3": ("llama3", _llama3_words), "llama-v3": ("llama3", _llama3_words),
  "qwen2": ("qwen2", _qwen2_words)}
TOKENIZER_MODELS = ("gpt2", "llama")

@functools.cache
def _word_splitter(preset:str) -> re.Pattern:
  return re.compile(PRETOKENIZERS[preset][1](*_unicode_classes()))

@functools.cache
def _gpt2_byte_map() -> dict[str, int]:
  """GPT-2's printable stand-in character for each byte -> the byte: printable Latin-1 bytes stand for themselves, the rest are shifted to
  256 and up in byte order (how byte-level BPE vocabularies spell bytes)."""
  own = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
  return {chr(b): b for b in own} | {chr(256 + i): b for i, b in enumerate(b for b in range(256) if b not in own)}

def _merge_pairs(parts:list, rank:Callable) -> list:
  """Joins the adjacent pair of lowest rank (rank(a, b) is None for pairs that never merge), the leftmost first among equal ranks, until no
  pair merges. A heap of candidate pairs over a linked list keeps a long word O(n log n); rescanning every pair after each join is quadratic."""
  n = len(parts)
  parts, nxt, prv = list(parts), list(range(1, n + 1)), list(range(-1, n - 1))
  heap = [(r, i, parts[i], parts[i + 1]) for i in range(n - 1) if (r := rank(parts[i], parts[i + 1])) is not None]
  heapq.heapify(heap)
  def push(i:int) -> None:
    if i >= 0 and (j := nxt[i]) < n and (r := rank(parts[i], parts[j])) is not None: heapq.heappush(heap, (r, i, parts[i], parts[j]))
  while heap:
    _, i, a, b = heapq.heappop(heap)
    # an entry is stale once either side has joined something else (parts only grow, so equal contents mean the same pair)
    if (j := nxt[i]) >= n or parts[i] != a or parts[j] != b: continue
    parts[i], parts[j] = a + b, None
    nxt[i] = nxt[j]
    if nxt[i] < n: prv[nxt[i]] = i
    push(prv[i])
    push(i)
  return [p for p in parts if p is not None]

class SimpleTokenizer:
  """Text <-> token ids. `preset` is the canonical pre-tokenizer name (gpt2, llama3, qwen2, olmo) for byte-level BPE, "spm" for
  SentencePiece. encode adds no BOS (the chat template or the caller does); decode renders special tokens as their text."""
  def __init__(self, normal_tokens:dict[str, int], special_tokens:dict[str, int], preset:str="llama3", bos_id:int|None=None, eos_id:int=0,
               eot_id:int|None=None, *, model:str="gpt2", merges:Sequence[str]|None=None, scores:Sequence[float]|None=None,
               other_tokens:dict[str, int]|None=None, add_space_prefix:bool=True):
    if model not in TOKENIZER_MODELS: raise ValueError(f"unsupported tokenizer.ggml.model {model!r} (supported: {', '.join(TOKENIZER_MODELS)})")
    if model == "gpt2" and preset not in PRETOKENIZERS:
      raise ValueError(f"unsupported tokenizer.ggml.pre {preset!r} (supported: {', '.join(PRETOKENIZERS)})")
    self.model, self.preset = model, ("spm" if model == "llama" else PRETOKENIZERS[preset][0])
    self.special_tokens = dict(special_tokens)
    self._special_ids = frozenset(self.special_tokens.values())
    every = {**(other_tokens or {}), **normal_tokens, **self.special_tokens}
    self.vocab_size = max(every.values(), default=-1) + 1
    for name, tid in (("bos", bos_id), ("eos", eos_id), ("eot", eot_id)):
      if tid is not None and not 0 <= tid < self.vocab_size: raise ValueError(f"{name} token id {tid} is not in the vocabulary of {self.vocab_size}")
    self.bos_id, self.eos_id, self.eot_id = bos_id, eos_id, eot_id
    ends_in_vocab = {self.special_tokens[t] for t in END_TOKEN_TEXTS if t in self.special_tokens}
    self._ends = frozenset(t for t in (eos_id, eot_id) if t is not None) | ends_in_vocab
    # longest first: the regex alternation takes the first alternative that matches, and one special may be a prefix of another
    specials = sorted(self.special_tokens, key=len, reverse=True)
    self._split_specials = re.compile("|".join(map(re.escape, specials))) if specials else None
    self._cache: dict = {}
    # the bytes each id decodes to
    self._id_bytes: list[bytes] = [b""] * self.vocab_size
    for text, tid in every.items(): self._id_bytes[tid] = text.encode()
    if model == "gpt2":
      byte_of = _gpt2_byte_map()
      def to_bytes(tok:str) -> bytes:
        try: return bytes(byte_of[c] for c in tok)
        except KeyError: return tok.encode()  # not spelled in GPT-2's byte alphabet: the text is meant as is
      self._tokens = {to_bytes(t): tid for t, tid in normal_tokens.items()}
      for b, tid in self._tokens.items(): self._id_bytes[tid] = b
      self._words = _word_splitter(preset)
      self._whole_words = self.preset == "llama3"  # llama3's vocabulary is used whole-word first (its tokenizer's ignore_merges)
      if merges:
        self._ranks = {}
        for r, m in enumerate(merges):
          a, sep, b = m.partition(" ")
          if not sep: raise ValueError(f"tokenizer.ggml.merges[{r}] = {m!r} is not two tokens separated by a space")
          self._ranks.setdefault((to_bytes(a), to_bytes(b)), r)
        self._rank = lambda a, b: self._ranks.get((a, b))
      else: self._rank = lambda a, b: self._tokens.get(a + b)  # no merges: the earlier token id is the earlier merge
    else:
      self._tokens = dict(normal_tokens)
      tid_score = [0.0] * self.vocab_size if scores is None else list(scores)
      self._rank = lambda a, b: -tid_score[t] if (t := self._tokens.get(a + b)) is not None else None
      self._byte_ids = [every.get(f"<0x{b:02X}>") for b in range(256)]
      self._unk_id = next((every[t] for t in ("<unk>",) if t in every), None)
      self.add_space_prefix = add_space_prefix
      for text, tid in normal_tokens.items(): self._id_bytes[tid] = text.replace(SPM_SPACE, " ").encode()
      for b, tid in enumerate(self._byte_ids):
        if tid is not None: self._id_bytes[tid] = bytes([b])

  @staticmethod
  def from_gguf_kv(kv:dict) -> SimpleTokenizer:
    def need(key:str):
      if key not in kv: raise ValueError(f"the GGUF metadata has no {key}")
      return kv[key]
    model, tokens = need("tokenizer.ggml.model"), list(need("tokenizer.ggml.tokens"))
    types = list(kv.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens)))
    if len(types) != len(tokens): raise ValueError(f"tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} tokens")
    normal, special, other = {}, {}, {}
    for tid, (tok, typ) in enumerate(zip(tokens, types)):
      (normal if typ == NORMAL else special if typ in (CONTROL, USER_DEFINED) else other).setdefault(tok, tid)
    eos = kv.get("tokenizer.ggml.eos_token_id")
    if eos is None and (eos := next((special[t] for t in END_TOKEN_TEXTS if t in special), None)) is None:
      raise ValueError("the GGUF metadata has no tokenizer.ggml.eos_token_id and the vocabulary has no end token")
    eot = kv.get("tokenizer.ggml.eot_token_id", next((special[t] for t in ("<|eot_id|>", "<|im_end|>") if t in special), None))
    # llama.cpp's defaults: SentencePiece and Llama 3 add a BOS, the other byte-level BPE families don't
    pre = kv.get("tokenizer.ggml.pre", "default")
    add_bos = kv.get("tokenizer.ggml.add_bos_token", model == "llama" or PRETOKENIZERS.get(pre, ("",))[0] == "llama3")
    if "tokenizer.ggml.scores" in kv and len(kv["tokenizer.ggml.scores"]) != len(tokens):
      raise ValueError(f"tokenizer.ggml.scores has {len(kv['tokenizer.ggml.scores'])} entries for {len(tokens)} tokens")
    return SimpleTokenizer(normal, special, pre, bos_id=kv.get("tokenizer.ggml.bos_token_id") if add_bos else None, eos_id=eos, eot_id=eot,
                           model=model, merges=kv.get("tokenizer.ggml.merges"), scores=kv.get("tokenizer.ggml.scores"), other_tokens=other,
                           add_space_prefix=kv.get("tokenizer.ggml.add_space_prefix", True))

  # ***** encoding *****

  def _encode_bpe(self, word:bytes) -> list[int]:
    if self._whole_words and (tid := self._tokens.get(word)) is not None: return [tid]
    ids = []
    for part in _merge_pairs([word[i:i+1] for i in range(len(word))], self._rank):
      if (tid := self._tokens.get(part)) is None:
        if len(part) == 1: raise ValueError(f"cannot encode byte 0x{part[0]:02X}: the vocabulary has no token for it")
        # a merge whose result is not in the vocabulary: spell it with the tokens of its bytes
        ids.extend(self._encode_bpe_bytes(part))
      else: ids.append(tid)
    return ids
  def _encode_bpe_bytes(self, part:bytes) -> list[int]:
    return [tid for i in range(len(part)) for tid in self._encode_bpe(part[i:i+1])]

  def _encode_spm(self, piece:str) -> list[int]:
    ids = []
    for sym in _merge_pairs(list(piece), self._rank):
      if (tid := self._tokens.get(sym)) is not None: ids.append(tid); continue
      for b in sym.encode():  # byte fallback
        if (tid := self._byte_ids[b]) is None: tid = self._unk_id
        if tid is None: raise ValueError(f"cannot encode {sym!r}: the vocabulary has neither a token nor <0x{b:02X}> for it, and no <unk>")
        ids.append(tid)
    return ids

  def _encode_text(self, text:str, after_special:bool) -> list[int]:
    if self.model == "llama":
      text = (" " + text if self.add_space_prefix and after_special else text).replace(" ", SPM_SPACE)
      return self._encode_spm(text)  # no word splitting here, so nothing small enough to cache
    return [tid for word in self._words.findall(text) for tid in self._cached(word.encode(), self._encode_bpe)]

  def _cached(self, word, encode:Callable) -> list[int]:
    if (ids := self._cache.get(word)) is None:
      if len(self._cache) >= 1 << 16: self._cache.clear()  # bounded: a long stream of distinct words must not grow it forever
      ids = self._cache[word] = encode(word)
    return ids

  def encode(self, text:str) -> list[int]:
    if not isinstance(text, str): raise TypeError(f"encode takes a str, not {type(text).__name__}")
    ids: list[int] = []
    pos, after_special = 0, True
    for m in (self._split_specials.finditer(text) if self._split_specials is not None else ()):
      if m.start() > pos: ids.extend(self._encode_text(text[pos:m.start()], after_special))
      ids.append(self.special_tokens[m.group()])
      pos, after_special = m.end(), True
    if pos < len(text): ids.extend(self._encode_text(text[pos:], after_special))
    return ids

  # ***** decoding *****

  def _bytes_of(self, tid:int) -> bytes:
    if not isinstance(tid, int) or isinstance(tid, bool) or not 0 <= tid < self.vocab_size:
      raise ValueError(f"token id {tid!r} is not in the vocabulary (ids 0..{self.vocab_size - 1})")
    return self._id_bytes[tid]

  def _strips_space(self, tid:int) -> bool:
    # SentencePiece prefixed the text with a space when encoding it: the first token's leading space is that prefix
    return self.model == "llama" and self.add_space_prefix and tid not in self._special_ids and self._id_bytes[tid][:1] == b" "

  def decode(self, ids:Sequence[int]) -> str:
    ids = list(ids)
    out = b"".join(self._bytes_of(t) for t in ids)
    if ids and self._strips_space(ids[0]): out = out[1:]
    return out.decode(errors="replace")

  def stream_decoder(self) -> Callable[[int|None], str]:
    """A function taking each new token id and returning the text it completes (a character split over tokens comes out whole, with the
    token that ends it); None flushes an unfinished character as U+FFFD. The pieces add up to decode(all ids)."""
    dec, first = codecs.getincrementaldecoder("utf-8")("replace"), [True]
    def step(tid:int|None=None) -> str:
      if tid is None: return dec.decode(b"", final=True)
      b = self._bytes_of(tid)
      if first[0]: b, first[0] = (b[1:] if self._strips_space(tid) else b), False
      return dec.decode(b)
    return step

  def is_end(self, tid:int) -> bool: return tid in self._ends
