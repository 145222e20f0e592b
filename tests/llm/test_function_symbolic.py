# A transformer block written the way tinygrad's LLM model (tinygrad/llm/model.py) writes one: the block's attention and feed-forward
# are one @function(precompile=True, allow_implicit=True) (the weights are implicit inputs), the KV cache is a Tensor.empty (or, as in
# tinygrad 0.14's release, a Tensor.zeros) made on the first call and written inside the function as
# cache.uop.after(cache[...].uop.store(...)), and the sequence length `toks` and the position `start_pos` are bound Variables. Run for
# prefill chunks and single-token steps, with and without TinyJit, against numpy; the precompiled body is scheduled once and reused for
# later positions. And a gradient through a symbolic number of rows, with and without a function.
import math
import numpy as np
import pytest
from tinygrad import Tensor, Variable, TinyJit, function, dtypes
from tinygrad.uop.ops import resolve
import tinygrad.schedule as schedule_mod
from tinygrad.helpers import Context

B, D, H, KVH, HD, ROPE, FF, MAXCTX, CHUNK, EPS = 1, 32, 4, 2, 8, 4, 48, 20, 4, 1e-5
rng = np.random.default_rng(11)
W = {k: rng.standard_normal(s).astype(np.float32) / 6 for k, s in
     dict(q=(D, H * HD), k=(D, KVH * HD), v=(D, KVH * HD), o=(H * HD, D), gate=(D, FF), up=(D, FF), down=(FF, D),
          attn_norm=(D,), ffn_norm=(D,)).items()}
XS = rng.standard_normal((B, MAXCTX, D)).astype(np.float32)

def _np_rms(x:np.ndarray, w:np.ndarray) -> np.ndarray: return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w

def _np_rope(x:np.ndarray, pos:np.ndarray) -> np.ndarray:
  ang = pos[:, None] * (1.0 / (10000 ** (np.arange(0, ROPE, 2) / ROPE)))[None]
  x1, x2 = x[..., :ROPE // 2], x[..., ROPE // 2:ROPE]
  return np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x2 * np.cos(ang) + x1 * np.sin(ang), x[..., ROPE:]], -1)

def _np_block(x:np.ndarray, sp:int, cache:np.ndarray) -> np.ndarray:
  T, pos = x.shape[1], np.arange(sp, sp + x.shape[1])
  xn = _np_rms(x, W["attn_norm"])
  q, k, v = ((xn @ W[n]).reshape(B, T, h, HD).transpose(0, 2, 1, 3) for n, h in (("q", H), ("k", KVH), ("v", KVH)))
  cache[0][:, :, sp:sp+T], cache[1][:, :, sp:sp+T] = _np_rope(k, pos), v
  keys, values = (np.repeat(c[:, :, :sp+T], H // KVH, 1) for c in cache)
  s = _np_rope(q, pos) @ keys.transpose(0, 1, 3, 2) / math.sqrt(HD) + np.triu(np.full((T, sp + T), -np.inf), sp + 1)
  p = np.exp(s - s.max(-1, keepdims=True))
  h = x + ((p / p.sum(-1, keepdims=True)) @ values).transpose(0, 2, 1, 3).reshape(B, T, -1) @ W["o"]
  hn = _np_rms(h, W["ffn_norm"])
  g = hn @ W["gate"]
  return h + ((g / (1 + np.exp(-g))) * (hn @ W["up"])) @ W["down"]

class Block:
  def __init__(self, cache_init:str="empty"):
    self.cache_init = cache_init   # how the KV cache is made on the first call: Tensor.empty (the model's) or Tensor.zeros (0.14's)
    self.w = {k: Tensor(v).realize() for k, v in W.items()}
    ang = Tensor.arange(MAXCTX).unsqueeze(1) * (1.0 / (10000 ** (Tensor.arange(0, ROPE, 2) / ROPE))).unsqueeze(0)
    self.freqs = ang.cos().cat(ang.sin(), dim=-1).contiguous().realize()
  def _rms(self, x:Tensor, w:Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + EPS).rsqrt() * w
  def _rope(self, x:Tensor, sp, T) -> Tensor:
    cos, sin = self.freqs[sp:sp+T].reshape(1, 1, T, ROPE).chunk(2, dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return (x1 * cos - x2 * sin).cat(x2 * cos + x1 * sin, dim=-1)
  def _attention(self, x:Tensor, sp) -> Tensor:
    b, T, _ = x.shape
    q, k, v = ((x @ self.w[n]).reshape(b, T, h, HD).transpose(1, 2) for n, h in (("q", H), ("k", KVH), ("v", KVH)))
    q = self._rope(q[..., :ROPE], sp, T).cat(q[..., ROPE:], dim=-1)
    k = self._rope(k[..., :ROPE], sp, T).cat(k[..., ROPE:], dim=-1)
    cache = Tensor(self.cache_kv.uop.after(self.cache_kv[:, :, :, sp:sp+T, :].uop.store(Tensor.stack(k, v).uop)))
    keys, values = cache[0, :, :, 0:sp+T, :], cache[1, :, :, 0:sp+T, :]
    mask = Tensor.full((1, 1, T, sp + T), float("-inf"), dtype=x.dtype, buffer=False).triu(sp + 1) if resolve(T != 1) else None
    attn = q.scaled_dot_product_attention(keys, values, attn_mask=mask, enable_gqa=True)
    return attn.transpose(1, 2).reshape(b, T, H * HD) @ self.w["o"]
  def _feed_forward(self, x:Tensor) -> Tensor: return ((x @ self.w["gate"]).silu().contiguous() * (x @ self.w["up"])) @ self.w["down"]
  def __call__(self, x:Tensor, sp) -> Tensor:
    if not hasattr(self, "cache_kv"):
      self.cache_kv = getattr(Tensor, self.cache_init)(2, x.shape[0], KVH, MAXCTX, HD, dtype=dtypes.float, device=x.device)
    @function(precompile=True, allow_implicit=True)
    def _run(x:Tensor, sp) -> Tensor:
      h = x + self._attention(self._rms(x, self.w["attn_norm"]), sp)
      return (h + self._feed_forward(self._rms(h, self.w["ffn_norm"]))).contiguous()
    return _run(x, sp)

class Blocks:
  """Blocks in sequence, as a model runs them: each one's output (a call's result of a symbolic shape) is the next one's input."""
  def __init__(self, n:int, cache_init:str="empty"): self.blocks = [Block(cache_init) for _ in range(n)]
  def __call__(self, x:Tensor, sp) -> Tensor:
    for b in self.blocks: x = b(x, sp)
    return x

def _np_blocks(x:np.ndarray, sp:int, caches:list[np.ndarray]) -> np.ndarray:
  for c in caches: x = _np_block(x, sp, c)
  return x

def _new_caches(n:int) -> list[np.ndarray]: return [np.zeros((2, B, KVH, MAXCTX, HD), np.float32) for _ in range(n)]

def _run_steps(prefill, step, chunks, caches:list[np.ndarray], sp:int=0, on_step=None) -> int:
  v_sp, v_toks, xall = Variable("start_pos", 0, MAXCTX - 1), Variable("toks", 1, CHUNK), Tensor(XS).realize()
  for i, n in enumerate(chunks):
    if n > 1:
      sp_b, toks = v_sp.bind(sp), v_toks.bind(n)
      out = prefill(xall[:, sp_b:sp_b+toks], sp_b)
      assert out.shape is not None and out.shape[1] is toks
      got = out.pad((None, (0, CHUNK - toks), None)).numpy()[:, :n]
    else: got = step(Tensor(XS[:, sp:sp+1]), v_sp.bind(sp)).numpy()
    np.testing.assert_allclose(got, _np_blocks(XS[:, sp:sp+n], sp, caches), rtol=1e-4, atol=1e-4, err_msg=f"start_pos={sp} toks={n}")
    if on_step is not None: on_step(i)
    sp += n
  return sp

@pytest.mark.cpu
@pytest.mark.parametrize("jit", [False, True], ids=["plain", "tinyjit"])
@pytest.mark.parametrize("nblocks,cache_init", [(1, "empty"), (2, "empty"), (2, "zeros")])
def test_precompiled_block_matches_numpy(jit, nblocks, cache_init):
  # (a Tensor.zeros cache is a write that has not run when the first call reads it: it runs once, not again at every call)
  model = Blocks(nblocks, cache_init)
  prefill, step = (TinyJit(model.__call__), TinyJit(model.__call__)) if jit else (model, model)
  # prefill from position 0 (attention over the new tokens only), more chunks of other lengths, then single tokens
  _run_steps(prefill, step, (3, 2, 4, 1, 3, 1, 1, 1, 1), _new_caches(nblocks))
  if jit: assert prefill.captured is not None and step.captured is not None

@pytest.mark.cpu
def test_precompiled_block_schedule_is_reused_for_later_positions(monkeypatch):
  monkeypatch.setattr(schedule_mod, "schedule_cache", type(schedule_mod.schedule_cache)())
  model, sizes = Blocks(2), []
  # the first chunk and the first single token schedule (and cache) the block; later positions and lengths find it in the cache
  with Context(SCACHE=1):
    _run_steps(model, model, (3, 1, 2, 1, 4, 1, 3, 1), _new_caches(2), on_step=lambda i: sizes.append(len(schedule_mod.schedule_cache)))
  assert sizes[1] > sizes[0] > 0
  assert sizes[2:] == [sizes[1]] * len(sizes[2:]), f"schedule cache grew on later positions: {sizes}"

@pytest.mark.cpu
@pytest.mark.parametrize("T", [0, 1, 3])
def test_precompiled_block_at_position_0(T):
  # the first call: the KV cache was never written, the keys are the T new ones (none for T=0: an empty result, and the next call
  # still starts at position 0)
  blk, cache = Block(), np.zeros((2, B, KVH, MAXCTX, HD), np.float32)
  sp = Variable("start_pos", 0, MAXCTX - 1).bind(0)
  x = Tensor(XS).realize()[:, :Variable("toks", 1, CHUNK).bind(T)] if T > 1 else Tensor(XS[:, :T])
  out = blk(x, sp)
  assert out.shape[0] == B and out.shape[1] is x.shape[1] and out.shape[2] == D
  got = out.pad((None, (0, CHUNK - out.shape[1]), None)).numpy()[:, :T] if T > 1 else out.numpy()
  np.testing.assert_allclose(got, _np_block(XS[:, :T], 0, cache) if T else np.zeros((B, 0, D)), rtol=1e-4, atol=1e-4)
  if T == 0:
    np.testing.assert_allclose(blk(Tensor(XS[:, :2]), sp).numpy(), _np_block(XS[:, :2], 0, cache), rtol=1e-4, atol=1e-4)

@pytest.mark.cpu
@pytest.mark.parametrize("precompile", [None, False, True], ids=["no_function", "inline", "precompiled"])
def test_gradient_through_a_symbolic_length(precompile):
  # rows of a symbolic count (a prefill chunk) through a matmul: the weight's gradient sums over the rows that are there
  r = np.random.default_rng(5)
  xs, w0 = r.standard_normal((6, 8)).astype(np.float32), r.standard_normal((8, 3)).astype(np.float32)
  def f(x:Tensor, w:Tensor) -> Tensor: return (x @ w).relu() * 3
  fn = f if precompile is None else function(f, precompile=precompile, precompile_backward=precompile)
  w, xt, v = Tensor(w0, requires_grad=True), Tensor(xs).realize(), Variable("n", 1, 6)
  for n in (2, 5):
    w.grad = None
    fn(xt[:v.bind(n)], w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), xs[:n].T @ ((xs[:n] @ w0 > 0) * 3.0), rtol=1e-5, atol=1e-5, err_msg=f"n={n}")
