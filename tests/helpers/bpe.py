"""Tokenizer vocabularies trained in the tests on a paragraph of text, returned as the tokenizer.ggml.* GGUF metadata a converted model carries:
train_bpe makes a byte-level BPE (model "gpt2": GPT-2's byte alphabet, merges as "a b"), sentencepiece_vocab a SentencePiece one (model
"llama": scored pieces with "▁" for spaces, <0xNN> byte tokens). Written apart from tinygrad.llm.tokenizer on purpose: the tests check one
against the other."""
import collections
import re

# the special tokens of the supported chat formats (Llama 3, ChatML, OLMo)
SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>",
            "<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>")
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6

def gpt2_alphabet() -> list[str]:
  """The character byte-level BPE vocabularies spell byte b with: printable Latin-1 as itself, the other bytes as 256, 257, ... in order."""
  shifted = iter(range(256, 512))
  return [chr(b) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF else chr(next(shifted)) for b in range(256)]

def _learn_merges(words:collections.Counter, n_merges:int) -> list[tuple[str, str]]:
  """Plain BPE training: join the most frequent adjacent pair (ties: the smallest pair) n_merges times. words: tuple of symbols -> count."""
  merges = []
  for _ in range(n_merges):
    pairs: collections.Counter = collections.Counter()
    for w, c in words.items():
      for p in zip(w, w[1:]): pairs[p] += c
    if not pairs: break
    best = min(pairs, key=lambda p: (-pairs[p], p))
    merges.append(best)
    joined: collections.Counter = collections.Counter()
    for w, c in words.items():
      out, i = [], 0
      while i < len(w):
        if i + 1 < len(w) and (w[i], w[i + 1]) == best: out.append(w[i] + w[i + 1]); i += 2
        else: out.append(w[i]); i += 1
      joined[tuple(out)] += c
    words = joined
  return merges

def train_bpe(text:str, n_merges:int, pre:str="llama-bpe", specials:tuple[str, ...]=SPECIALS) -> dict:
  """A byte-level BPE trained on text: the 256 byte tokens, then one token per merge, then the specials (control tokens);
  BOS <|begin_of_text|>, EOS <|end_of_text|> when they are among the specials."""
  alphabet = gpt2_alphabet()
  words = collections.Counter(tuple(alphabet[b] for b in w.encode()) for w in re.findall(r" ?[^\W\d_]+| ?\d+| ?[^\w\s]+|\s+", text))
  merges = _learn_merges(words, n_merges)
  tokens = list(alphabet)
  for a, b in merges:
    if a + b not in tokens: tokens.append(a + b)
  types = [NORMAL] * len(tokens) + [CONTROL] * len(specials)
  tokens += specials
  kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": [f"{a} {b}" for a, b in merges]}
  for key, tok in (("bos", "<|begin_of_text|>"), ("eos", "<|end_of_text|>")):
    if tok in specials: kv[f"tokenizer.ggml.{key}_token_id"] = tokens.index(tok)
  return kv

def sentencepiece_vocab(text:str, n_merges:int, add_space_prefix:bool=True) -> dict:
  """A SentencePiece BPE vocabulary trained on text: <unk>, <s>, </s>, the 256 <0xNN> byte tokens, the merged pieces (score -k for the k-th
  merge, so earlier merges win) and the characters of text (scored below every merge). Characters outside text encode as bytes."""
  words = collections.Counter(tuple("\u2581" + w) for w in text.split())
  merges = _learn_merges(words, n_merges)
  tokens, types, scores = ["<unk>", "<s>", "</s>"], [UNKNOWN, CONTROL, CONTROL], [0.0, 0.0, 0.0]
  tokens += [f"<0x{b:02X}>" for b in range(256)]
  types += [BYTE] * 256
  scores += [0.0] * 256
  for a, b in merges:
    if a + b not in tokens: tokens.append(a + b); types.append(NORMAL); scores.append(-float(len(tokens)))
  for ch in sorted(set("\u2581" + text.replace(" ", "\u2581")) - set(tokens)):
    tokens.append(ch); types.append(NORMAL); scores.append(-1e6 - len(tokens))
  return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
          "tokenizer.ggml.scores": scores, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
          "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_space_prefix": add_space_prefix}
