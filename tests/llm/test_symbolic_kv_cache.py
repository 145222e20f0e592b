# An attention block built the way tinygrad's LLM model builds one: the sequence length `toks` and the position `start_pos` are bound
# Variables, the KV cache is written with cache[:, :, :, sp:sp+T].assign(...), the keys are a symbolic shrink of it, rope rotates a
# slice of the heads (cat with the rest, which can be empty), and attention takes a causal mask of a symbolic shape. Run for prefill
# chunks and single-token steps, with and without TinyJit, against numpy.
import math
import numpy as np
import pytest
from tinygrad import Tensor, Variable, TinyJit
from tinygrad.uop.ops import resolve

B, D, H, KVH, HD, MAXCTX, CHUNK = 1, 64, 4, 2, 16, 24, 4
rng = np.random.default_rng(24)
W = {k: rng.standard_normal(s).astype(np.float32) / 8 for k, s in dict(q=(D, H * HD), k=(D, KVH * HD), v=(D, KVH * HD), o=(H * HD, D)).items()}
XS = rng.standard_normal((B, MAXCTX, D)).astype(np.float32)

def _np_rope(x:np.ndarray, pos:np.ndarray, rope:int) -> np.ndarray:
  freqs = 1.0 / (10000 ** (np.arange(0, rope, 2) / rope))
  ang = pos[:, None] * freqs[None]
  x1, x2 = x[..., :rope // 2], x[..., rope // 2:rope]
  return np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x2 * np.cos(ang) + x1 * np.sin(ang), x[..., rope:]], -1)

def _np_block(x:np.ndarray, sp:int, cache:np.ndarray, rope:int) -> np.ndarray:
  T = x.shape[1]
  q, k, v = ((x @ W[n]).reshape(B, T, h, HD).transpose(0, 2, 1, 3) for n, h in (("q", H), ("k", KVH), ("v", KVH)))
  pos = np.arange(sp, sp + T)
  cache[0][:, :, sp:sp+T], cache[1][:, :, sp:sp+T] = _np_rope(k, pos, rope), v
  keys, values = (np.repeat(c[:, :, :sp+T], H // KVH, 1) for c in cache)
  s = _np_rope(q, pos, rope) @ keys.transpose(0, 1, 3, 2) / math.sqrt(HD) + np.triu(np.full((T, sp + T), -np.inf), sp + 1)
  p = np.exp(s - s.max(-1, keepdims=True))
  return ((p / p.sum(-1, keepdims=True)) @ values).transpose(0, 2, 1, 3).reshape(B, T, -1) @ W["o"]

class Block:
  def __init__(self, rope:int, write:str="assign"):
    self.rope, self.write = rope, write
    self.w = {k: Tensor(v).realize() for k, v in W.items()}
    ang = Tensor.arange(MAXCTX).unsqueeze(1) * (1.0 / (10000 ** (Tensor.arange(0, rope, 2) / rope))).unsqueeze(0)
    self.freqs = ang.cos().cat(ang.sin(), dim=-1).contiguous().realize()
    self.cache_kv = Tensor.zeros(2, B, KVH, MAXCTX, HD).contiguous().realize() if write == "assign" else Tensor.empty(2, B, KVH, MAXCTX, HD)
  def _rope(self, x:Tensor, sp, T) -> Tensor:
    cos, sin = self.freqs[sp:sp+T].reshape(1, 1, T, self.rope).chunk(2, dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return (x1 * cos - x2 * sin).cat(x2 * cos + x1 * sin, dim=-1)
  def __call__(self, x:Tensor, sp) -> Tensor:
    b, T, _ = x.shape
    q, k, v = ((x @ self.w[n]).reshape(b, T, h, HD).transpose(1, 2) for n, h in (("q", H), ("k", KVH), ("v", KVH)))
    q = self._rope(q[..., :self.rope], sp, T).cat(q[..., self.rope:], dim=-1)
    k = self._rope(k[..., :self.rope], sp, T).cat(k[..., self.rope:], dim=-1)
    if self.write == "assign":
      self.cache_kv[:, :, :, sp:sp+T, :].assign(Tensor.stack(k, v))
      cache = self.cache_kv
    else:   # the model's spelling: the cache after a store into its view, as a new tensor (self.cache_kv stays the storage)
      cache = Tensor(self.cache_kv.uop.after(self.cache_kv[:, :, :, sp:sp+T, :].uop.store(Tensor.stack(k, v).uop)))
    keys, values = cache[0, :, :, 0:sp+T, :], cache[1, :, :, 0:sp+T, :]
    mask = Tensor.full((1, 1, T, sp + T), float("-inf")).triu(sp + 1) if resolve(T != 1) else None
    attn = q.scaled_dot_product_attention(keys, values, attn_mask=mask, enable_gqa=True)
    assert attn.shape is not None and attn.shape[2] is T
    return (attn.transpose(1, 2).reshape(b, T, H * HD) @ self.w["o"]).realize()

@pytest.mark.cpu
@pytest.mark.parametrize("jit", [False, True], ids=["plain", "tinyjit"])
@pytest.mark.parametrize("rope", [8, HD], ids=["rope_half", "rope_all"])   # rope_all: the piece cat with is empty
@pytest.mark.parametrize("write", ["assign", "after_store"])
def test_kv_cache_block_matches_numpy(jit, rope, write):
  blk, cache = Block(rope, write), np.zeros((2, B, KVH, MAXCTX, HD), np.float32)
  v_sp, v_toks = Variable("start_pos", 0, MAXCTX - 1), Variable("toks", 1, CHUNK)
  prefill, step = (TinyJit(blk.__call__), TinyJit(blk.__call__)) if jit else (blk.__call__, blk.__call__)
  xall, sp = Tensor(XS).realize(), 0
  for n in (3, 2, 4, 1, 3, 1, 1, 1, 1):
    if n > 1:
      sp_b, toks = v_sp.bind(sp), v_toks.bind(n)
      got = prefill(xall[:, sp_b:sp_b+toks], sp_b)
      assert got.shape[1] is toks
      got = got.pad((None, (0, CHUNK - toks), None)).numpy()[:, :n]
    else: got = step(Tensor(XS[:, sp:sp+1]), v_sp.bind(sp)).numpy()
    np.testing.assert_allclose(got, _np_block(XS[:, sp:sp+n], sp, cache, rope), rtol=1e-4, atol=1e-5, err_msg=f"start_pos={sp} toks={n}")
    sp += n
  if jit: assert prefill.captured is not None and step.captured is not None

@pytest.mark.cpu
@pytest.mark.parametrize("T", [0, 1, 2])
def test_attention_at_position_0_with_an_empty_cache(T):
  # no token before: the keys are the T new ones (none at all for T=0, an empty result)
  blk, cache = Block(8), np.zeros((2, B, KVH, MAXCTX, HD), np.float32)
  got = blk(Tensor(XS[:, :T]), Variable("start_pos", 0, MAXCTX - 1).bind(0))
  assert got.shape == (B, T, D)
  np.testing.assert_allclose(got.numpy(), _np_block(XS[:, :T], 0, cache, 8) if T else np.zeros((B, 0, D)), rtol=1e-4, atol=1e-5)
