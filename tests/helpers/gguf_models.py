"""Tiny GGUF language models with random weights, written with the `gguf` package the way llama.cpp's converter lays them out
(write_model), and a float64 numpy forward pass over the same file read back by gguf's own reader and dequantizer (NumpyModel): the
reference the model's logits and greedy tokens are checked against."""
from __future__ import annotations
import pathlib
from typing import Any
import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe", "olmoe")
GGML_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4")
_SPECIALS = {"llama": ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
             "qwen": ("<|endoftext|>", "<|im_start|>", "<|im_end|>"), "olmoe": ("<|endoftext|>", "<|padding|>")}
_PRE = {"llama": "llama-bpe", "qwen": "qwen2", "olmoe": "olmo"}
# the f16 fields of the K-quant blocks that random bytes get set: {type: (offset of d, offset of dmin or None)}
_K_SCALES = {"Q2_K": (80, 82), "Q3_K": (108, None), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208, None)}

def _byte_unicode() -> list[str]:
  """GPT-2's printable stand-in for each byte: printable Latin-1 bytes stand for themselves, the rest for 256, 257, ... in order."""
  keep = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) | set(range(ord("®"), ord("ÿ") + 1))
  out, n = [], 0
  for b in range(256):
    if b in keep: out.append(chr(b))
    else: out.append(chr(256 + n)); n += 1
  return out

def byte_vocab(arch:str) -> dict[str, Any]:
  """A byte-level BPE vocabulary: the 256 byte tokens, a few merges, then the family's special tokens."""
  fam = "qwen" if arch.startswith("qwen") else arch
  tokens = _byte_unicode()
  merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]
  tokens += ["".join(m) for m in merges]
  specials = _SPECIALS[fam]
  first = len(tokens)
  tokens += list(specials)
  ids = {s: first + i for i, s in enumerate(specials)}
  ret: dict[str, Any] = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": _PRE[fam], "tokenizer.ggml.tokens": tokens,
                         "tokenizer.ggml.token_type": [1] * first + [3] * len(specials), "tokenizer.ggml.merges": [" ".join(m) for m in merges]}
  if fam == "llama": ret.update({"tokenizer.ggml.bos_token_id": ids["<|begin_of_text|>"], "tokenizer.ggml.eos_token_id": ids["<|end_of_text|>"],
                                 "tokenizer.ggml.eot_token_id": ids["<|eot_id|>"]})
  elif fam == "qwen": ret.update({"tokenizer.ggml.bos_token_id": ids["<|endoftext|>"], "tokenizer.ggml.eos_token_id": ids["<|im_end|>"]})
  else: ret.update({"tokenizer.ggml.bos_token_id": ids["<|endoftext|>"], "tokenizer.ggml.eos_token_id": ids["<|endoftext|>"]})
  return ret

def _quantized(rng:np.random.Generator, shape:tuple[int, ...], std:float, ggml_type:str) -> np.ndarray:
  """Weights of `shape` (out last-but-one, in last) with about `std`, in ggml_type's bytes (or dtype for the float types)."""
  if ggml_type in ("F32", "F16"): return (rng.standard_normal(shape) * std).astype(np.float32 if ggml_type == "F32" else np.float16)
  qt = QT[ggml_type]
  if ggml_type not in _K_SCALES: return gguf.quants.quantize((rng.standard_normal(shape) * std).astype(np.float32), qt)
  # gguf can't quantize K types: random blocks, with d (and dmin) set so the values have mean ~0 and the wanted std
  bs, ts = gguf.constants.GGML_QUANT_SIZES[qt]
  if shape[-1] % bs: raise ValueError(f"{ggml_type} needs rows of a multiple of {bs} elements, got {shape}")
  blocks = rng.integers(0, 256, (int(np.prod(shape)) // bs, ts), dtype=np.uint8)
  d_off, m_off = _K_SCALES[ggml_type]
  def with_scales(d:float, dmin:float) -> np.ndarray:
    blocks[:, d_off:d_off+2] = np.frombuffer(np.float16(d).tobytes(), np.uint8)
    if m_off is not None: blocks[:, m_off:m_off+2] = np.frombuffer(np.float16(dmin).tobytes(), np.uint8)
    return gguf.quants.dequantize(blocks, qt).astype(np.float64)
  a = with_scales(1.0, 0.0)
  b = with_scales(0.0, 1.0) if m_off is not None else np.zeros_like(a)
  ratio = -a.mean() / b.mean() if m_off is not None else 0.0
  d = std / (a + ratio * b).std()
  with_scales(d, ratio * d)
  return blocks.reshape(*shape[:-1], shape[-1] // bs * ts)

def write_model(path:str|pathlib.Path, arch:str="llama", ggml_type:str="F32", vocab:dict[str, Any]|None=None, **shape) -> pathlib.Path:
  """Writes a tiny `arch` model with random weights to path (GGUF, as llama.cpp's converter names and shapes things): its 2-D weights
  (and the experts' 3-D ones) in ggml_type, norms, biases and the router in F32. `vocab` is tokenizer.ggml.* metadata (default a
  256-byte BPE vocabulary with the family's specials). shape: dim, n_layers, n_heads, n_kv_heads, head_dim, hidden, n_experts,
  n_experts_used, context, rope_theta, norm_eps, seed, tied (no output.weight), rope_freqs (llama3-style factors),
  rope_scaling_linear (a factor), chat_template."""
  if arch not in ARCHS: raise ValueError(f"unknown arch {arch!r}")
  big = ggml_type.endswith("_K")
  s = dict(dim=256 if big else 64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=512 if big else 96, n_experts=4, n_experts_used=2,
           context=64, rope_theta=10000.0, norm_eps=1e-5, seed=0, tied=False, rope_freqs=False, rope_scaling_linear=None, chat_template=None)
  if unknown := set(shape) - set(s) - {"head_dim"}: raise TypeError(f"write_model: unknown shape keys {sorted(unknown)}")
  s.update(shape)
  head_dim = shape.get("head_dim", s["dim"] // s["n_heads"])
  moe = arch in ("qwen3moe", "olmoe")
  vocab = vocab if vocab is not None else byte_vocab(arch)
  n_vocab, dim, hidden = len(vocab["tokenizer.ggml.tokens"]), s["dim"], s["hidden"]
  q_out, kv_out = s["n_heads"] * head_dim, s["n_kv_heads"] * head_dim
  rng = np.random.default_rng(s["seed"])
  w = gguf.GGUFWriter(str(path), arch)
  w.add_name(f"tiny-{arch}-{ggml_type}")
  w.add_context_length(s["context"])
  w.add_embedding_length(dim)
  w.add_block_count(s["n_layers"])
  w.add_head_count(s["n_heads"])
  w.add_head_count_kv(s["n_kv_heads"])
  w.add_rope_freq_base(s["rope_theta"])
  w.add_layer_norm_rms_eps(s["norm_eps"])
  if arch == "llama":
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(n_vocab)
  if head_dim != dim // s["n_heads"] or arch.startswith("qwen3"):
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
  if moe:
    w.add_expert_count(s["n_experts"])
    w.add_expert_used_count(s["n_experts_used"])
    w.add_expert_feed_forward_length(hidden)
    if arch == "qwen3moe": w.add_feed_forward_length(hidden * 3)
  else: w.add_feed_forward_length(hidden)
  if s["rope_scaling_linear"] is not None:
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(s["rope_scaling_linear"])
  w.add_quantization_version(2)
  for k, v in vocab.items():
    if isinstance(v, list): w.add_array(k, v)
    elif isinstance(v, str): w.add_string(k, v)
    elif isinstance(v, bool): w.add_bool(k, v)
    else: w.add_uint32(k, v)
  if s["chat_template"] is not None: w.add_chat_template(s["chat_template"])

  def weight(name:str, shape:tuple[int, ...], std:float) -> None:
    data = _quantized(rng, shape, std, ggml_type)
    if ggml_type in ("F32", "F16"): w.add_tensor(name, data)
    else: w.add_tensor(name, data, raw_dtype=QT[ggml_type])
  def f32(name:str, data:np.ndarray) -> None: w.add_tensor(name, data.astype(np.float32))
  def norm(name:str, n:int) -> None: f32(name, 1 + 0.1 * rng.standard_normal(n))

  weight("token_embd.weight", (n_vocab, dim), 1.0)
  for i in range(s["n_layers"]):
    p = f"blk.{i}."
    norm(p + "attn_norm.weight", dim)
    for n, out in (("attn_q", q_out), ("attn_k", kv_out), ("attn_v", kv_out)):
      weight(p + n + ".weight", (out, dim), dim ** -0.5)
      if arch == "qwen2": f32(p + n + ".bias", 0.1 * rng.standard_normal(out))
    if arch in ("qwen3", "qwen3moe"): norm(p + "attn_q_norm.weight", head_dim), norm(p + "attn_k_norm.weight", head_dim)
    if arch == "olmoe": norm(p + "attn_q_norm.weight", q_out), norm(p + "attn_k_norm.weight", kv_out)
    weight(p + "attn_output.weight", (dim, q_out), q_out ** -0.5)
    norm(p + "ffn_norm.weight", dim)
    if moe:
      f32(p + "ffn_gate_inp.weight", rng.standard_normal((s["n_experts"], dim)) * dim ** -0.5)
      weight(p + "ffn_gate_exps.weight", (s["n_experts"], hidden, dim), dim ** -0.5)
      weight(p + "ffn_up_exps.weight", (s["n_experts"], hidden, dim), dim ** -0.5)
      weight(p + "ffn_down_exps.weight", (s["n_experts"], dim, hidden), hidden ** -0.5)
    else:
      weight(p + "ffn_gate.weight", (hidden, dim), dim ** -0.5)
      weight(p + "ffn_up.weight", (hidden, dim), dim ** -0.5)
      weight(p + "ffn_down.weight", (dim, hidden), hidden ** -0.5)
  norm("output_norm.weight", dim)
  if not s["tied"]: weight("output.weight", (n_vocab, dim), dim ** -0.5)
  if s["rope_freqs"]: f32("rope_freqs.weight", np.linspace(1.0, 8.0, head_dim // 2))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return pathlib.Path(path)

class NumpyModel:
  """The model of a GGUF file in float64 numpy, over the weights as gguf's reader and gguf.quants.dequantize give them. Its rope
  rotates head halves for every arch: a llama file's q/k rows are put back in that layout first (undoing the converter's permutation)."""
  def __init__(self, path:str|pathlib.Path):
    r = gguf.GGUFReader(str(path))
    self.kv = {f.name: f.contents() for f in r.fields.values() if not f.name.startswith("GGUF.")}
    arch = self.arch = self.kv["general.architecture"]
    self.w = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(tuple(int(x) for x in reversed(t.shape)))
              for t in r.tensors}
    k = lambda key, d=None: self.kv.get(f"{arch}.{key}", d)
    self.n_layers, self.n_heads, self.n_kv = k("block_count"), k("attention.head_count"), k("attention.head_count_kv")
    self.head_dim = k("attention.key_length", k("embedding_length") // self.n_heads)
    self.eps, self.theta = k("attention.layer_norm_rms_epsilon"), k("rope.freq_base", 10000.0)
    self.rope_dim = k("rope.dimension_count", self.head_dim)
    self.linear = k("rope.scaling.factor", 1.0) if k("rope.scaling.type") == "linear" else 1.0
    self.n_used, self.norm_topk = k("expert_used_count", 0), k("expert_weights_norm", arch == "qwen3moe")
    if "output.weight" not in self.w: self.w["output.weight"] = self.w["token_embd.weight"]
    if arch == "llama":
      for i in range(self.n_layers):
        for n, h in (("attn_q", self.n_heads), ("attn_k", self.n_kv)):
          m = self.w[f"blk.{i}.{n}.weight"]
          self.w[f"blk.{i}.{n}.weight"] = m.reshape(h, self.head_dim // 2, 2, -1).swapaxes(1, 2).reshape(m.shape)

  def _rms(self, x:np.ndarray, w:np.ndarray) -> np.ndarray: return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

  def _rope(self, x:np.ndarray, pos:np.ndarray) -> np.ndarray:
    inv = 1.0 / (self.theta ** (np.arange(0, self.rope_dim, 2) / self.rope_dim))
    if "rope_freqs.weight" in self.w: inv = inv / self.w["rope_freqs.weight"]
    ang = (pos[:, None] / self.linear * inv[None])[:, None, :]        # (T, 1, rope_dim/2) against x (T, heads, head_dim)
    half = self.rope_dim // 2
    a, b = x[..., :half], x[..., half:self.rope_dim]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), a * np.sin(ang) + b * np.cos(ang), x[..., self.rope_dim:]], -1)

  def _lin(self, x:np.ndarray, name:str) -> np.ndarray:
    y = x @ self.w[name + ".weight"].T
    return y + self.w[name + ".bias"] if name + ".bias" in self.w else y

  def _ffn(self, x:np.ndarray, p:str) -> np.ndarray:
    silu = lambda g: g / (1 + np.exp(-g))
    if p + "ffn_gate_inp.weight" not in self.w: return self._lin(silu(self._lin(x, p + "ffn_gate")) * self._lin(x, p + "ffn_up"), p + "ffn_down")
    logits = x @ self.w[p + "ffn_gate_inp.weight"].T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
      sel = np.argsort(-probs[t], kind="stable")[:self.n_used]
      wt = probs[t, sel] / (probs[t, sel].sum() if self.norm_topk else 1.0)
      for e, we in zip(sel, wt):
        g, u = self.w[p + "ffn_gate_exps.weight"][e] @ x[t], self.w[p + "ffn_up_exps.weight"][e] @ x[t]
        out[t] += we * (self.w[p + "ffn_down_exps.weight"][e] @ (silu(g) * u))
    return out

  def logits(self, tokens:list[int]) -> np.ndarray:
    """(len(tokens), vocab) float64 logits at every position of the sequence (causal attention over it from position 0)."""
    T, hd = len(tokens), self.head_dim
    x, pos = self.w["token_embd.weight"][np.array(tokens)], np.arange(T, dtype=np.float64)
    for i in range(self.n_layers):
      p = f"blk.{i}."
      xn = self._rms(x, self.w[p + "attn_norm.weight"])
      q, k, v = self._lin(xn, p + "attn_q"), self._lin(xn, p + "attn_k"), self._lin(xn, p + "attn_v")
      full = p + "attn_q_norm.weight" in self.w and self.w[p + "attn_q_norm.weight"].shape[0] != hd
      if full: q, k = self._rms(q, self.w[p + "attn_q_norm.weight"]), self._rms(k, self.w[p + "attn_k_norm.weight"])
      q, k, v = q.reshape(T, self.n_heads, hd), k.reshape(T, self.n_kv, hd), v.reshape(T, self.n_kv, hd)
      if p + "attn_q_norm.weight" in self.w and not full:
        q, k = self._rms(q, self.w[p + "attn_q_norm.weight"]), self._rms(k, self.w[p + "attn_k_norm.weight"])
      q, k = self._rope(q, pos), self._rope(k, pos)
      rep = self.n_heads // self.n_kv
      k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
      s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
      a = np.exp(s - s.max(-1, keepdims=True))
      a /= a.sum(-1, keepdims=True)
      x = x + self._lin(np.einsum("hts,shd->thd", a, v).reshape(T, -1), p + "attn_output")
      x = x + self._ffn(self._rms(x, self.w[p + "ffn_norm.weight"]), p)
    return self._lin(self._rms(x, self.w["output_norm.weight"]), "output")

  def greedy(self, tokens:list[int], n:int) -> list[int]:
    out = list(tokens)
    for _ in range(n): out.append(int(np.argmax(self.logits(out)[-1])))
    return out[len(tokens):]
