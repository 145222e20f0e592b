# tinygrad.llm.tokenizer: byte-level BPE and SentencePiece vocabularies made in the test (tests/helpers/bpe.py), round trips, merge order,
# the pre-tokenizer of each family, special tokens, the stream decoder, bad input; Hugging Face's tokenizers as the oracle for byte-level BPE.
import time
import pytest
from tinygrad.llm.tokenizer import SimpleTokenizer
from tests.helpers.bpe import train_bpe, sentencepiece_vocab, gpt2_alphabet

PARAGRAPH = """The quick brown fox jumps over the lazy dog. It's 2024, and we're testing 12345 tokens: don't they'll work? I'M SURE.
Tokenizers split text into words, then merge bytes into tokens; the merges are learned from how often pairs appear together in the text.
Ünïcödé wörds, 中文字符, and emoji 👍 show up too."""

MIXED = ["", "hello", "Hello, world!", "naïve café résumé", "中文字符和日本語のテキスト", "Ελληνικά и кириллица", "emoji 👍🏽 👨‍👩‍👧 🇩🇪!",
         "digits 1234567890 and 3.14159", "   leading and trailing   ", "tabs\tand\t\ttabs", "new\nlines\n\n\nand\r\nCRLF\n",
         "multiple     spaces  between", "It's they're we've I'd you'll SHE'S", "symbols !@#$%^&*()_+-=[]{}|;':\",./<>?`~",
         "\u00a0nbsp\u2003em space", "mixed\u0085next line", "x" * 300, " " * 50 + "\n"]

@pytest.fixture(scope="module")
def bpe_kv():
  return train_bpe(PARAGRAPH, 150)

@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "olmo", "default"])
@pytest.mark.parametrize("text", MIXED, ids=range(len(MIXED)))
def test_bpe_round_trip(bpe_kv, pre, text):
  tok = SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.pre": pre})
  ids = tok.encode(text)
  assert all(isinstance(i, int) for i in ids)
  assert tok.decode(ids) == text
  assert "".join(map(tok.stream_decoder(), ids)) == text

def test_bpe_uses_its_merges(bpe_kv):
  tok = SimpleTokenizer.from_gguf_kv(bpe_kv)
  # words of the training text come out in few tokens, text of other bytes one byte per token
  assert len(tok.encode(" the quick brown fox")) < 8
  assert len(tok.encode("zzzq")) == 4

def _tiny_bpe(tokens:list[str], merges:list[str]|None, pre:str="default") -> SimpleTokenizer:
  alphabet = gpt2_alphabet()
  kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": alphabet + tokens + ["<|end|>"],
        "tokenizer.ggml.token_type": [1] * (256 + len(tokens)) + [3], "tokenizer.ggml.eos_token_id": 256 + len(tokens)}
  if merges is not None: kv["tokenizer.ggml.merges"] = merges
  return SimpleTokenizer.from_gguf_kv(kv)

def test_bpe_merges_in_rank_order():
  # "abc": with "b c" ranked first the word becomes [a][bc] then [abc]; with "a b" first it becomes [ab][c], which no merge joins
  tok = _tiny_bpe(["bc", "ab", "abc"], ["b c", "a b", "a bc"])
  assert tok.encode("abc") == [258]
  tok = _tiny_bpe(["bc", "ab", "abc"], ["a b", "b c", "a bc"])
  assert tok.encode("abc") == [257, ord("c")]
  # equal candidates: the leftmost pair joins first ("aaa" -> [aa][a])
  tok = _tiny_bpe(["aa"], ["a a"])
  assert tok.encode("aaa") == [256, ord("a")] and tok.encode("aaaa") == [256, 256]

def test_llama3_takes_whole_words_first():
  # Llama 3's tokenizer (ignore_merges) uses a word found whole in the vocabulary even where no merge path leads to it
  assert _tiny_bpe(["ab", "abc"], ["a b"], "llama-bpe").encode("abc") == [257]
  assert _tiny_bpe(["ab", "abc"], ["a b"], "default").encode("abc") == [256, ord("c")]

def test_bpe_without_merges_ranks_by_token_id():
  # no tokenizer.ggml.merges: the token of lower id is the earlier merge
  assert _tiny_bpe(["bc", "ab"], None).encode("abc") == [ord("a"), 256]
  assert _tiny_bpe(["ab", "bc"], None).encode("abc") == [256, ord("c")]

def test_pretokenizer_presets():
  # a vocabulary that knows "12", "123", "1234": Llama 3 cuts digit runs in threes, Qwen 2 digit by digit, GPT-2 keeps a run whole
  toks = ["12", "123", "1234"]
  merges = ["1 2", "12 3", "123 4"]
  assert _tiny_bpe(toks, merges, "llama-bpe").encode("1234") == [257, ord("4")]
  assert _tiny_bpe(toks, merges, "qwen2").encode("1234") == [ord(c) for c in "1234"]
  assert _tiny_bpe(toks, merges, "olmo").encode("1234") == [258]
  # GPT-2 attaches the space before a word to it, Llama 3 and Qwen 2 any one non-letter: "$" and "a" end up in one word
  sp = gpt2_alphabet()[ord(" ")]
  assert _tiny_bpe([sp + "a", "$a"], [f"{sp} a", "$ a"], "llama-bpe").encode("$a a") == [257, 256]
  assert _tiny_bpe([sp + "a", "$a"], [f"{sp} a", "$ a"], "default").encode("$a a") == [ord("$"), ord("a"), 256]

def test_special_tokens(bpe_kv):
  tok = SimpleTokenizer.from_gguf_kv(bpe_kv)
  toks = bpe_kv["tokenizer.ggml.tokens"]
  sid = {t: toks.index(t) for t in ("<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>")}
  ids = tok.encode("<|begin_of_text|><|im_start|>user\nhi<|im_end|>\n<|eot_id|>")
  assert ids[:2] == [sid["<|begin_of_text|>"], sid["<|im_start|>"]] and ids[-1] == sid["<|eot_id|>"] and sid["<|im_end|>"] in ids
  assert tok.decode(ids) == "<|begin_of_text|><|im_start|>user\nhi<|im_end|>\n<|eot_id|>"
  # an incomplete special token is plain text
  assert not set(tok.encode("<|im_start| <|im_end")) & set(sid.values())
  # encode adds no BOS
  assert tok.encode("hi")[0] != tok.bos_id and tok.bos_id == sid["<|begin_of_text|>"]

def test_special_tokens_longest_first():
  kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": gpt2_alphabet() + ["<|a|>", "<|a|>b"],
        "tokenizer.ggml.token_type": [1] * 256 + [3, 4], "tokenizer.ggml.eos_token_id": 256}
  assert SimpleTokenizer.from_gguf_kv(kv).encode("<|a|>b<|a|>") == [257, 256]

def test_end_tokens(bpe_kv):
  toks = bpe_kv["tokenizer.ggml.tokens"]
  tok = SimpleTokenizer.from_gguf_kv(bpe_kv)
  for t in ("<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>"): assert tok.is_end(toks.index(t)), t
  assert tok.eos_id == toks.index("<|end_of_text|>") and tok.eot_id == toks.index("<|eot_id|>")
  assert not tok.is_end(toks.index("<|im_start|>")) and not tok.is_end(tok.encode("the")[0])
  # the metadata's eot id counts even when its text is no known end token
  assert SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.eot_token_id": toks.index("<|user|>")}).is_end(toks.index("<|user|>"))

def test_bos_follows_add_bos_token(bpe_kv):
  assert SimpleTokenizer.from_gguf_kv(bpe_kv).bos_id is not None  # Llama 3 adds a BOS by default
  assert SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.add_bos_token": False}).bos_id is None
  assert SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.pre": "qwen2"}).bos_id is None

def test_stream_decoder_whole_characters():
  tok = _tiny_bpe([], [])  # one token per byte: every multi-byte character is split over tokens
  text = "a€👍🏽b"
  ids = tok.encode(text)
  assert len(ids) == len(text.encode())
  step = tok.stream_decoder()
  pieces = [step(i) for i in ids]
  assert pieces == ["a", "", "", "€", "", "", "", "👍", "", "", "", "🏽", "b"]
  assert step(None) == ""
  # a character cut off at the end comes out as U+FFFD when flushed, as decode renders it
  step = tok.stream_decoder()
  assert [step(i) for i in ids[:3]] == ["a", "", ""] and step(None) == "\ufffd" == tok.decode(ids[1:3])

def test_decode_bad_ids(bpe_kv):
  tok = SimpleTokenizer.from_gguf_kv(bpe_kv)
  n = len(bpe_kv["tokenizer.ggml.tokens"])
  for bad in (-1, n, 10**12, "5", 1.0, None):
    with pytest.raises(ValueError, match="not in the vocabulary"): tok.decode([1, bad])
    with pytest.raises(ValueError, match="not in the vocabulary"): tok.stream_decoder()(bad if bad is not None else -1)

def test_bad_metadata(bpe_kv):
  with pytest.raises(ValueError, match="'bert'.*gpt2, llama"): SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.model": "bert"})
  with pytest.raises(ValueError, match="'deepseek-coder'.*llama-bpe.*qwen2"):
    SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.pre": "deepseek-coder"})
  with pytest.raises(ValueError, match="token_type has 3 entries"): SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.token_type": [1, 1, 1]})
  with pytest.raises(ValueError, match="no tokenizer.ggml.tokens"): SimpleTokenizer.from_gguf_kv({"tokenizer.ggml.model": "gpt2"})
  with pytest.raises(ValueError, match="eos token id 99999"): SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.eos_token_id": 99999})
  with pytest.raises(ValueError, match="merges\\[0\\]"): SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.merges": ["ab"]})
  with pytest.raises(TypeError): SimpleTokenizer.from_gguf_kv(bpe_kv).encode(b"bytes")

def test_long_inputs_are_fast(bpe_kv):
  tok = SimpleTokenizer.from_gguf_kv(bpe_kv)
  tok.encode("warm up the word regex")
  # a multi-KB prompt, one 50,000-letter word and a 50,000-space run: a quadratic merge loop would take minutes on the last two
  for text in (PARAGRAPH * 30, "ab" * 25_000, " " * 50_000 + "x"):
    t0 = time.perf_counter()
    ids = tok.encode(text)
    assert time.perf_counter() - t0 < 10 and tok.decode(ids) == text

# ***** SentencePiece (tokenizer.ggml.model "llama") *****

def _tiny_spm(pieces:dict[str, float], add_space_prefix:bool=True) -> tuple[SimpleTokenizer, list[str]]:
  toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + list(pieces)
  kv = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": toks, "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * len(pieces),
        "tokenizer.ggml.scores": [0.0] * 259 + list(pieces.values()), "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.add_space_prefix": add_space_prefix}
  return SimpleTokenizer.from_gguf_kv(kv), toks

def test_spm_merges_by_score():
  # "▁hel": "he" (score -1) joins before "▁h" (-3), then "hel" (-2); with the scores swapped "▁h" joins first and nothing follows
  tok, toks = _tiny_spm({"▁": -9, "h": -9, "e": -9, "l": -9, "▁h": -3, "he": -1, "hel": -2})
  assert [toks[i] for i in tok.encode("hel")] == ["▁", "hel"]
  tok, toks = _tiny_spm({"▁": -9, "h": -9, "e": -9, "l": -9, "▁h": -1, "he": -3, "hel": -2})
  assert [toks[i] for i in tok.encode("hel")] == ["▁h", "e", "l"]

def test_spm_space_prefix_and_byte_fallback():
  tok, toks = _tiny_spm({"▁": -9, "h": -9, "i": -9, "▁h": -1, "▁hi": -1})
  assert [toks[i] for i in tok.encode("hi hi")] == ["▁hi", "▁hi"]
  # é is no piece: its two UTF-8 bytes as <0xC3><0xA9>
  assert [toks[i] for i in tok.encode("hé")] == ["▁h", "<0xC3>", "<0xA9>"]
  assert tok.decode(tok.encode("hé")) == "hé"
  # after a special token the text is prefixed with a space again; without add_space_prefix never
  assert [toks[i] for i in tok.encode("<s>hi")] == ["<s>", "▁hi"]
  tok, toks = _tiny_spm({"▁": -9, "h": -9, "i": -9, "▁h": -1, "▁hi": -1, "hi": -2}, add_space_prefix=False)
  assert [toks[i] for i in tok.encode("hi hi")] == ["hi", "▁hi"]
  assert tok.preset == "spm" and tok.bos_id == 1 and tok.is_end(2)

@pytest.mark.parametrize("text", [t for t in MIXED if t], ids=range(len(MIXED) - 1))
def test_spm_round_trip(text):
  tok = SimpleTokenizer.from_gguf_kv(sentencepiece_vocab(PARAGRAPH, 120))
  ids = tok.encode(text)
  assert tok.decode(ids) == text and "".join(map(tok.stream_decoder(), ids)) == text
  assert len(tok.encode(" the quick brown fox")) < 12

# ***** Hugging Face's tokenizers as the oracle for byte-level BPE *****

# the pre-tokenizer regexes as the Hugging Face tokenizer.json files of each family write them
HF_PATTERNS = {
  "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
  "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
  "olmo": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}

@pytest.mark.parametrize("pre", list(HF_PATTERNS))
def test_bpe_matches_hf_tokenizers(bpe_kv, pre):
  hf = pytest.importorskip("tokenizers")
  toks, types = bpe_kv["tokenizer.ggml.tokens"], bpe_kv["tokenizer.ggml.token_type"]
  vocab = {t: i for i, (t, ty) in enumerate(zip(toks, types)) if ty == 1}
  model = hf.models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in bpe_kv["tokenizer.ggml.merges"]], ignore_merges=pre == "llama-bpe")
  ref = hf.Tokenizer(model)
  ref.pre_tokenizer = hf.pre_tokenizers.Sequence([hf.pre_tokenizers.Split(hf.Regex(HF_PATTERNS[pre]), behavior="isolated"),
                                                  hf.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  ref.add_special_tokens([hf.AddedToken(t, special=True, normalized=False) for t, ty in zip(toks, types) if ty == 3])
  tok = SimpleTokenizer.from_gguf_kv({**bpe_kv, "tokenizer.ggml.pre": pre})
  text = "\n".join(MIXED) + "<|im_start|>user\n" + PARAGRAPH * 3 + "<|im_end|>It'S 99999 bottles\u3000of\u2028beer\x0c" + PARAGRAPH.upper()
  assert len(text.encode()) > 2000
  assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids
  for t in MIXED: assert tok.encode(t) == ref.encode(t, add_special_tokens=False).ids, t
