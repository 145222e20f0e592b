"""Decoder-only transformer language models read from GGUF files (llama.cpp's format): Llama 2/3/3.1+ and Mistral (`llama`), `qwen2`,
`qwen3`, and the mixture-of-experts `qwen3moe` and `olmoe`. The weights are gguf_load's tensors, used as they come (a quantized weight
stays a lazy dequantization of its packed bytes, so the matmul that reads it is the kernel that dequantizes it).

Generation keeps a float32 KV cache of max_context positions per layer, updated in place. A prompt is fed in chunks of up to
prefill_chunk tokens and each new token on its own, each under its own TinyJit with the position (and the chunk length) a bound
Variable: after the first steps nothing is scheduled or compiled again. Sampling runs on the host over the last position's logits."""
from __future__ import annotations
import itertools
import math
import pathlib
from dataclasses import dataclass
from typing import Any, Iterator
import numpy as np
from tinygrad import Tensor, TinyJit, UOp, nn
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import resolve
from tinygrad.tensor.disk import is_disk
from tinygrad.llm.gguf import gguf_load
from tinygrad.llm.quants import GGMLType, gather_rows

__all__ = ["Transformer", "TransformerConfig", "SUPPORTED_ARCHITECTURES"]

SUPPORTED_ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3moe", "olmoe")
# llama.cpp rotates adjacent pairs (its "normal" rope) for llama, whose q/k rows the converter permuted for that; the others rotate
# the two halves of each head ("neox")
_INTERLEAVED_ROPE = {"llama"}
# qwen3moe renormalizes the top-k router weights to sum to 1, olmoe uses them as they are (llama.cpp's defaults for each)
_NORM_TOPK_DEFAULT = {"qwen3moe": True}
_ROPE_SCALINGS = ("none", "linear")

@dataclass(frozen=True)
class TransformerConfig:
  arch: str
  n_layers: int
  dim: int
  hidden_dim: int
  n_heads: int
  n_kv_heads: int
  head_dim: int
  vocab_size: int
  norm_eps: float
  rope_theta: float
  rope_dim: int
  rope_interleaved: bool
  rope_linear_scale: float    # positions are divided by it (rope.scaling.type "linear")
  max_context: int
  qkv_bias: bool = False
  qk_norm: str = ""           # "": none, "head": RMSNorm over each head (qwen3), "full": over the whole projection (olmoe)
  n_experts: int = 0
  n_experts_used: int = 0
  norm_topk: bool = False

  @staticmethod
  def from_gguf_kv(kv:dict[str, Any], weights:dict[str, tuple[int, ...]], max_context:int|None=None) -> TransformerConfig:
    """The config of a GGUF's metadata and its tensors' shapes (by name); ValueError for what this model can't run."""
    arch = kv.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
      raise ValueError(f"GGUF architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    def get(key:str, default:Any=None) -> Any:
      if (v := kv.get(f"{arch}.{key}", default)) is None: raise ValueError(f"the GGUF metadata has no {arch}.{key}")
      return v
    n_heads, dim = get("attention.head_count"), get("embedding_length")
    if isinstance(n_heads, list) or isinstance(get("attention.head_count_kv", n_heads), list):
      raise ValueError(f"{arch}: a head count per layer is not supported")
    head_dim = get("attention.key_length", dim // n_heads)
    if get("attention.value_length", head_dim) != head_dim: raise ValueError(f"{arch}: value_length != key_length is not supported")
    if (scaling := kv.get(f"{arch}.rope.scaling.type", "none")) not in _ROPE_SCALINGS:
      raise ValueError(f"{arch}: rope scaling {scaling!r} is not supported (supported: {', '.join(_ROPE_SCALINGS)})")
    ctx = get("context_length")
    if max_context is not None and (not isinstance(max_context, int) or max_context < 2):
      raise ValueError(f"max_context must be an int >= 2, got {max_context!r}")
    n_experts = kv.get(f"{arch}.expert_count", 0)
    cfg = TransformerConfig(
      arch=arch, n_layers=get("block_count"), dim=dim, n_heads=n_heads, n_kv_heads=get("attention.head_count_kv", n_heads),
      head_dim=head_dim, hidden_dim=get("expert_feed_forward_length") if n_experts else get("feed_forward_length"),
      vocab_size=weights["token_embd.weight"][0] if "token_embd.weight" in weights else len(kv.get("tokenizer.ggml.tokens", ())),
      norm_eps=get("attention.layer_norm_rms_epsilon"), rope_theta=kv.get(f"{arch}.rope.freq_base", 10000.0),
      rope_dim=kv.get(f"{arch}.rope.dimension_count", head_dim), rope_interleaved=arch in _INTERLEAVED_ROPE,
      rope_linear_scale=kv.get(f"{arch}.rope.scaling.factor", 1.0) if scaling == "linear" else 1.0,
      max_context=min(ctx, max_context) if max_context is not None else ctx,
      qkv_bias="blk.0.attn_q.bias" in weights,
      qk_norm="" if "blk.0.attn_q_norm.weight" not in weights else "head" if weights["blk.0.attn_q_norm.weight"][-1] == head_dim else "full",
      n_experts=n_experts, n_experts_used=kv.get(f"{arch}.expert_used_count", 0),
      norm_topk=kv.get(f"{arch}.expert_weights_norm", _NORM_TOPK_DEFAULT.get(arch, False)))
    if cfg.n_heads % cfg.n_kv_heads: raise ValueError(f"{arch}: {cfg.n_heads} query heads are not a multiple of {cfg.n_kv_heads} kv heads")
    if cfg.rope_dim % 2 or cfg.rope_dim > cfg.head_dim: raise ValueError(f"{arch}: rope dimension {cfg.rope_dim} (head dim {cfg.head_dim})")
    if n_experts and not 0 < cfg.n_experts_used <= n_experts:
      raise ValueError(f"{arch}: {cfg.n_experts_used} experts used per token out of {n_experts}")
    return cfg

def _rope_table(cfg:TransformerConfig, freq_factors:np.ndarray|None) -> Tensor:
  """(max_context, rope_dim) float32: the cos of each position's angles, then their sin (angles in float64 on the host)."""
  inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, cfg.rope_dim, 2, dtype=np.float64) / cfg.rope_dim))
  if freq_factors is not None: inv_freq = inv_freq / freq_factors.astype(np.float64)   # llama 3.1+: rope_freqs.weight
  ang = np.arange(cfg.max_context, dtype=np.float64)[:, None] / cfg.rope_linear_scale * inv_freq[None]
  return Tensor(np.concatenate([np.cos(ang), np.sin(ang)], axis=-1).astype(np.float32)).realize()

def _rope(x:Tensor, cos:Tensor, sin:Tensor, interleaved:bool) -> Tensor:
  """Rotates the first 2*cos.shape[-1] features of x (B, T, heads, head_dim) by the angles of cos/sin (T, rope_dim/2)."""
  half = cos.shape[-1]
  rot, rest = x[..., :2 * half], x[..., 2 * half:]
  cos, sin = cos.reshape(1, cos.shape[0], 1, half), sin.reshape(1, sin.shape[0], 1, half)
  if interleaved:   # pairs (x0, x1), (x2, x3), ...
    pairs = rot.reshape(*rot.shape[:-1], half, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    out = (a * cos - b * sin).unsqueeze(-1).cat((a * sin + b * cos).unsqueeze(-1), dim=-1).reshape(rot.shape)
  else:             # the first half with the second
    a, b = rot[..., :half], rot[..., half:]
    out = (a * cos - b * sin).cat(a * sin + b * cos, dim=-1)
  return out if x.shape[-1] == 2 * half else out.cat(rest, dim=-1)

def _top_k(x:Tensor, k:int) -> tuple[Tensor, Tensor]:
  """(values, int32 indices) of the k largest along the last axis, largest first, ties to the lower index. By rank counting (n x n
  compares): for a router's few experts this fuses into a kernel or two, where Tensor.topk's sort takes a dozen."""
  n = x.shape[-1]
  i, j = Tensor.arange(n).reshape(n, 1), Tensor.arange(n).reshape(1, n)
  a, b = x.unsqueeze(-1), x.unsqueeze(-2)                                  # [..., i, j]: x_i, x_j
  rank = ((b > a) | ((b == a) & (j < i))).sum(-1)                          # how many rank above x_i
  slot = rank.unsqueeze(-1) == Tensor.arange(k)                            # [..., i, r]: x_i is the r-th largest
  return slot.where(x.unsqueeze(-1), 0).sum(-2), (slot * Tensor.arange(n).reshape(n, 1)).sum(-2).cast(dtypes.int32)

class Linear(nn.Linear):
  """nn.Linear whose weight may be read from its quantized blocks by the type's block_dot (quants.py: the block scale multiplies a
  block's partial sums, not each element); from_gguf sets `quantized` for the weights whose type has one."""
  quantized: tuple[Tensor, GGMLType]|None = None   # (the weight's (out, in / block_elems, block_bytes) uint8 blocks, their type)
  def __call__(self, x:Tensor) -> Tensor:
    if self.quantized is None: return super().__call__(x)
    blocks, t = self.quantized
    assert t.block_dot is not None
    y = t.block_dot(x.float().reshape(*x.shape[:-1], blocks.shape[1], t.block_elems), blocks)
    return y if self.bias is None else y + self.bias

class ExpertLinear:
  """The weights of n experts, (n, out, in) as GGUF stores ffn_*_exps; each token's x goes through the experts it selected."""
  def __init__(self, n:int, in_features:int, out_features:int): self.weight = Tensor.zeros(n, out_features, in_features)
  def __call__(self, x:Tensor, sel:Tensor) -> Tensor:
    # x (B, T, 1 or k, in), sel (B, T, k) -> (B, T, k, out); only the selected experts' weights are read
    return (x.unsqueeze(-2) * self.weight[sel]).sum(-1)

def _rows(x:Tensor) -> Tensor:
  """x (B, T, d) with T a prefill chunk's length (a bound Variable) as (B, the chunk's most tokens, d), zero rows after the T: the
  projections' GEMMs get a known number of rows, so each decoded weight element serves several of them (codegen/opt/heuristic.py
  decoded_rows_tile); their results are cut back to T."""
  T = x.shape[1]
  return x if isinstance(T, int) else x.pad(((0, 0), (0, T.vmax - T), (0, 0)))

class TransformerBlock:
  def __init__(self, cfg:TransformerConfig):
    self.cfg = cfg
    q_out, kv_out = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    self.attn_norm, self.ffn_norm = nn.RMSNorm(cfg.dim, cfg.norm_eps), nn.RMSNorm(cfg.dim, cfg.norm_eps)
    self.attn_q, self.attn_k = Linear(cfg.dim, q_out, bias=cfg.qkv_bias), Linear(cfg.dim, kv_out, bias=cfg.qkv_bias)
    self.attn_v, self.attn_output = Linear(cfg.dim, kv_out, bias=cfg.qkv_bias), Linear(q_out, cfg.dim, bias=False)
    if cfg.qk_norm == "head": self.attn_q_norm, self.attn_k_norm = nn.RMSNorm(cfg.head_dim, cfg.norm_eps), nn.RMSNorm(cfg.head_dim, cfg.norm_eps)
    if cfg.qk_norm == "full": self.attn_q_norm, self.attn_k_norm = nn.RMSNorm(q_out, cfg.norm_eps), nn.RMSNorm(kv_out, cfg.norm_eps)
    if cfg.n_experts:
      self.ffn_gate_inp = Linear(cfg.dim, cfg.n_experts, bias=False)
      self.ffn_gate_exps = ExpertLinear(cfg.n_experts, cfg.dim, cfg.hidden_dim)
      self.ffn_up_exps = ExpertLinear(cfg.n_experts, cfg.dim, cfg.hidden_dim)
      self.ffn_down_exps = ExpertLinear(cfg.n_experts, cfg.hidden_dim, cfg.dim)
    else:
      self.ffn_gate, self.ffn_up = Linear(cfg.dim, cfg.hidden_dim, bias=False), Linear(cfg.dim, cfg.hidden_dim, bias=False)
      self.ffn_down = Linear(cfg.hidden_dim, cfg.dim, bias=False)
    # made by Transformer on its device: the keys and the values of the cache, each (B, kv heads, max_context, head_dim), written in
    # place
    self.cache_k: Tensor|None = None
    self.cache_v: Tensor|None = None

  def _attention(self, x:Tensor, T:int|UOp, start_pos:int|UOp, rope:Tensor) -> Tensor:
    """x: the normalized activations of T tokens, as _rows gives them."""
    cfg, B = self.cfg, x.shape[0]
    # the projections get buffers of their own: fused into rope (which reads two features per output) and the cache write, each
    # weight would be read and dequantized several times over
    q, k, v = self.attn_q(x).contiguous()[:, :T], self.attn_k(x).contiguous()[:, :T], self.attn_v(x).contiguous()[:, :T]
    if cfg.qk_norm == "full": q, k = self.attn_q_norm(q), self.attn_k_norm(k)
    q, k, v = q.reshape(B, T, cfg.n_heads, cfg.head_dim), k.reshape(B, T, cfg.n_kv_heads, cfg.head_dim), v.reshape(B, T, cfg.n_kv_heads, cfg.head_dim)
    if cfg.qk_norm == "head": q, k = self.attn_q_norm(q), self.attn_k_norm(k)
    cos, sin = rope[start_pos:start_pos+T].chunk(2, dim=-1)
    q, k = _rope(q, cos, sin, cfg.rope_interleaved), _rope(k, cos, sin, cfg.rope_interleaved)
    k, v = k.transpose(1, 2), v.transpose(1, 2)                                # (B, kv heads, T, head_dim)
    assert self.cache_k is not None and self.cache_v is not None
    self.cache_k[:, :, start_pos:start_pos+T, :].assign(k.cast(self.cache_k.dtype))
    self.cache_v[:, :, start_pos:start_pos+T, :].assign(v.cast(self.cache_v.dtype))
    keys, values = self.cache_k[:, :, 0:start_pos+T, :], self.cache_v[:, :, 0:start_pos+T, :]
    if resolve(T == 1):
      attn = q.transpose(1, 2).scaled_dot_product_attention(keys, values, enable_gqa=True).transpose(1, 2)
      return self.attn_output(_rows(attn.reshape(B, T, cfg.n_heads * cfg.head_dim)).contiguous())[:, :T]
    # a chunk's attention as (B, kv heads, group, T, ...) per kv head's group of query heads: the head axes are split and merged
    # only where T (a Variable) isn't in between, or every index would divide by it. The scores and their softmax get buffers:
    # fused into the product with the values, each score and its exp would be recomputed for every one of the head_dim outputs
    group = cfg.n_heads // cfg.n_kv_heads
    qg = q.reshape(B, T, cfg.n_kv_heads, group, cfg.head_dim).permute(0, 2, 3, 1, 4)
    # query t (at start_pos+t) sees keys 0..start_pos+t
    mask = Tensor.full((T, start_pos + T), float("-inf")).triu(start_pos + 1)
    scores = (qg @ keys.unsqueeze(2).transpose(-2, -1) * (1 / math.sqrt(cfg.head_dim)) + mask).contiguous()
    attn = (scores.softmax(-1).contiguous() @ values.unsqueeze(2)).permute(0, 3, 1, 2, 4)   # (B, T, kv heads, group, head_dim)
    return self.attn_output(_rows(attn.reshape(B, T, cfg.n_heads * cfg.head_dim)).contiguous())[:, :T]

  def _feed_forward(self, x:Tensor) -> Tensor:
    if not self.cfg.n_experts:
      gate = self.ffn_gate(x)
      # two sums in one kernel run at half the speed of each alone (clang keeps a block_dot's lanes apart poorly, and a float16 weight's
      # two GEMMs get no register tile): the gate gets a buffer
      gate = gate.contiguous()
      return self.ffn_down((gate.silu() * self.ffn_up(x)).contiguous())
    probs = self.ffn_gate_inp(x).float().softmax(-1)                              # (B, T, n_experts)
    weights, sel = _top_k(probs, self.cfg.n_experts_used)
    if self.cfg.norm_topk: weights = weights / weights.sum(-1, keepdim=True)
    h = x.unsqueeze(2)                                                            # (B, T, 1, dim)
    hidden = (self.ffn_gate_exps(h, sel).silu() * self.ffn_up_exps(h, sel)).contiguous()
    return (self.ffn_down_exps(hidden, sel) * weights.unsqueeze(-1)).sum(2)

  def __call__(self, x:Tensor, start_pos:int|UOp, rope:Tensor) -> Tensor:
    # the normalized activations get a buffer: fused into the projections, each weight element would recompute its input's norm
    T = x.shape[1]
    h = x + self._attention(_rows(self.attn_norm(x)).contiguous(), T, start_pos, rope)
    ff = self._feed_forward(_rows(self.ffn_norm(h)).contiguous())
    # a chunk's down projection gets a buffer of all its rows: with the residual add fused in, its GEMM's rows would be T (a Variable),
    # and a loop of unknown size gets no register tile
    if not isinstance(T, int): ff = ff.contiguous()
    return (h + ff[:, :T]).contiguous()

class Transformer:
  """A GGUF language model (from_gguf) with a KV cache of max_context positions; generate() yields new token ids."""
  def __init__(self, cfg:TransformerConfig, prefill_chunk:int=32):
    if prefill_chunk < 1: raise ValueError(f"prefill_chunk must be >= 1, got {prefill_chunk}")
    self.config, self.max_context, self.prefill_chunk = cfg, cfg.max_context, prefill_chunk
    self.token_embd = nn.Embedding(cfg.vocab_size, cfg.dim)
    self.blk = [TransformerBlock(cfg) for _ in range(cfg.n_layers)]
    self.output_norm, self.output = nn.RMSNorm(cfg.dim, cfg.norm_eps), Linear(cfg.dim, cfg.vocab_size, bias=False)
    self._rope: Tensor|None = None
    self._freq_factors: np.ndarray|None = None
    # a quantized token embedding's (vocab, dim / block_elems, block_bytes) uint8 blocks and type: from_gguf sets it
    self._embd_blocks: tuple[Tensor, GGMLType]|None = None
    self._cached: list[int] = []     # the tokens whose keys and values are in the cache, from position 0
    self._prefill_jit, self._decode_jit = TinyJit(self._prefill), TinyJit(self._decode)
    self._v_start = UOp.variable("start_pos", 0, cfg.max_context - 1)
    self._v_toks = UOp.variable("toks", 1, prefill_chunk)

  # ***** loading *****

  @staticmethod
  def from_gguf(gguf:str|pathlib.Path|Tensor, max_context:int|None=None, prefill_chunk:int=32) -> tuple[Transformer, dict]:
    """(the model, the GGUF metadata) of a .gguf file (path or a Tensor of its bytes); max_context caps the model's context_length."""
    # the config is checked from the headers, before any weight is copied
    configs: list[TransformerConfig] = []
    packed: dict[str, tuple[Tensor, GGMLType]] = {}
    kv, sd = gguf_load(gguf, check=lambda kv, shapes: configs.append(TransformerConfig.from_gguf_kv(kv, shapes, max_context)), packed=packed)
    cfg = configs[0]
    # a tensor still viewing the file on its DISK device is copied to the default device now, once (not at every step)
    sd = {k: v.to(None).realize() if is_disk(v.device) else v for k, v in sd.items()}
    if "output.weight" not in sd and "token_embd.weight" in sd:   # tied embeddings
      sd["output.weight"] = sd["token_embd.weight"]
      if "token_embd.weight" in packed: packed["output.weight"] = packed["token_embd.weight"]
    model = Transformer(cfg, prefill_chunk)
    if (factors := sd.pop("rope_freqs.weight", None)) is not None:
      if factors.shape != (cfg.rope_dim // 2,): raise ValueError(f"rope_freqs.weight has shape {factors.shape}, expected ({cfg.rope_dim // 2},)")
      model._freq_factors = factors.float().numpy()
    try: nn.state.load_state_dict(model, sd, strict=True, verbose=False, consume=True, realize=False)
    except KeyError as e: raise ValueError(f"{gguf if not isinstance(gguf, Tensor) else 'the GGUF'}: {e.args[0]}") from None
    if (embd := packed.get("token_embd.weight")) is not None:
      blocks, t = embd
      model._embd_blocks = (blocks.reshape(cfg.vocab_size, cfg.dim // t.block_elems, t.block_bytes), t)
    for name, (blocks, t) in packed.items():
      if t.block_dot is None or not name.endswith(".weight"): continue
      layer: Any = model
      for part in name[:-len(".weight")].split("."): layer = layer[int(part)] if part.isdigit() else getattr(layer, part, None)
      if isinstance(layer, Linear):
        out_features, in_features = layer.weight.shape
        layer.quantized = (blocks.reshape(out_features, in_features // t.block_elems, t.block_bytes), t)
    return model, kv

  # ***** running *****

  def _setup(self) -> None:
    if self._rope is not None: return
    cfg, dev = self.config, self.token_embd.weight.device
    self._rope = _rope_table(cfg, self._freq_factors).to(dev).realize()
    for b in self.blk:
      b.cache_k, b.cache_v = (Tensor.zeros(1, cfg.n_kv_heads, cfg.max_context, cfg.head_dim, device=dev).contiguous().realize() for _ in range(2))

  def forward(self, tokens:Tensor, start_pos:int|UOp) -> Tensor:
    """The float32 logits (vocab_size,) after the last of tokens (1, T), which sit at positions start_pos.. of the context."""
    assert self._rope is not None
    # rows gathered by index: nn.Embedding's one-hot sum would read (and dequantize) the whole table for every token; a quantized
    # table's rows as blocks (quants.gather_rows)
    if self._embd_blocks is None: x = self.token_embd.weight[tokens].float().contiguous()
    else: x = gather_rows(self._embd_blocks[0], self._embd_blocks[1], tokens).float().contiguous()
    for b in self.blk: x = b(x, start_pos, self._rope)
    return self.output(self.output_norm(x[:, -1:]).contiguous()).float().reshape(self.config.vocab_size)

  def _prefill(self, tokens:Tensor, start_pos:UOp, toks:UOp) -> Tensor: return self.forward(tokens[:, :toks], start_pos)
  def _decode(self, tokens:Tensor, start_pos:UOp) -> Tensor: return self.forward(tokens, start_pos)

  def logits(self, tokens:list[int], start_pos:int) -> np.ndarray:
    """Feeds tokens (at most prefill_chunk) at positions start_pos.. into the KV cache (whose earlier positions must hold this
    context's keys and values) and returns the float32 logits (vocab_size,) after the last one. generate() is built on it."""
    if not 1 <= len(tokens) <= self.prefill_chunk or not 0 <= start_pos <= self.max_context - len(tokens):
      raise ValueError(f"logits: {len(tokens)} tokens at {start_pos} (1..{self.prefill_chunk} tokens, within max_context {self.max_context})")
    self._setup()
    sp = self._v_start.bind(start_pos)
    if len(tokens) == 1: out = self._decode_jit(Tensor([tokens], dtype=dtypes.int32).realize(), sp)
    else:
      padded = Tensor([tokens + [0] * (self.prefill_chunk - len(tokens))], dtype=dtypes.int32).realize()
      out = self._prefill_jit(padded, sp, self._v_toks.bind(len(tokens)))
    # the cache now holds these tokens at start_pos..; what precedes them is known only if it was cached by us
    self._cached = self._cached[:start_pos] + list(tokens) if len(self._cached) >= start_pos else []
    return out.numpy()

  def generate(self, tokens:list[int], temperature:float=0.0, top_k:int=0, top_p:float=1.0, seed:int|None=None) -> Iterator[int]:
    """Yields the next token ids after the prompt `tokens`, one per next(), until the context (max_context) is full. temperature 0
    (or top_k 1) is greedy; otherwise tokens are drawn from softmax(logits / temperature) cut to the top_k most likely and to the
    smallest set whose probability reaches top_p, reproducibly for a given seed. The cache keeps the longest prefix shared with
    the previous call. ValueError, raised here before any compute, for a bad prompt or sampling setting."""
    tokens = list(tokens)
    if not tokens: raise ValueError("generate needs a non-empty prompt")
    if len(tokens) >= self.max_context:
      raise ValueError(f"the prompt has {len(tokens)} tokens, the context holds {self.max_context} (max_context) with room for one more")
    if (bad := next((t for t in tokens if not isinstance(t, (int, np.integer)) or not 0 <= t < self.config.vocab_size), None)) is not None:
      raise ValueError(f"token {bad!r} is not an id of the vocabulary (0..{self.config.vocab_size - 1})")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
      raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not isinstance(top_k, int) or top_k < 0: raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1): raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    return self._generate([int(t) for t in tokens], float(temperature), top_k, float(top_p), np.random.default_rng(seed))

  def _generate(self, tokens:list[int], temperature:float, top_k:int, top_p:float, rng:np.random.Generator) -> Iterator[int]:
    self._setup()
    # reuse the cached prefix, but feed at least the last prompt token (its logits give the first new token)
    pos = min(sum(1 for _ in itertools.takewhile(lambda ab: ab[0] == ab[1], zip(tokens, self._cached))), len(tokens) - 1)
    del self._cached[pos:]
    while pos < len(tokens):
      n = min(self.prefill_chunk, len(tokens) - pos)
      logits = self.logits(tokens[pos:pos+n], pos)
      pos += n
    while True:
      tokens.append(tid := _sample(logits, temperature, top_k, top_p, rng))
      yield tid
      if len(tokens) >= self.max_context: return
      logits = self.logits([tid], pos)
      pos += 1

  def warmup(self) -> None:
    """Runs prefill and decode enough times for their JITs to capture, so a first request compiles nothing."""
    for _ in range(3):
      self._cached = []
      for _ in zip(range(3), self.generate([0, 0])): pass
    self._cached = []

def _sample(logits:np.ndarray, temperature:float, top_k:int, top_p:float, rng:np.random.Generator) -> int:
  if temperature == 0 or top_k == 1: return int(np.argmax(logits))
  z = logits.astype(np.float64) / temperature
  cand = np.argpartition(-z, top_k - 1)[:top_k] if 0 < top_k < z.shape[0] else np.arange(z.shape[0])
  cand = cand[np.argsort(-z[cand], kind="stable")]                 # most likely first
  p = np.exp(z[cand] - z[cand[0]])
  p /= p.sum()
  if top_p < 1: p = p[:int(np.searchsorted(np.cumsum(p), top_p)) + 1]   # the smallest prefix reaching top_p
  return int(cand[int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right").clip(0, len(p) - 1))])
