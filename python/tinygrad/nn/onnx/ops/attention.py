"""Attention for language models beyond Attention (nn.py): FlexAttention (preview domain, with score and probability modifier
subgraphs), LinearAttention (recurrent-state attention: linear, gated, delta and gated delta rules) and the stateful causal
depthwise convolution that runs beside it in Mamba and Gated DeltaNet blocks."""
from __future__ import annotations
import math
from typing import Any
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op, Domain
from tinygrad.nn.onnx.model import dtype_from_onnx
from tinygrad.nn.onnx.ops.control import run_subgraph

@onnx_op("CausalConvWithState", 27)
def CausalConvWithState(x:Tensor, weight:Tensor, bias:Tensor|None=None, past_state:Tensor|None=None, activation:str="none"):
  if activation not in ("none", "silu", "swish"):
    raise NotImplementedError(f"CausalConvWithState: activation={activation!r} is not supported (none, silu, swish)")
  if x.ndim != 3 or weight.ndim != 3 or weight.shape[:2] != (x.shape[1], 1):
    raise ValueError(f"CausalConvWithState: input must be (batch, channels, length) and weight (channels, 1, k), got {x.shape} and {weight.shape}")
  batch, channels, length = x.shape
  k = weight.shape[2]
  if past_state is not None and past_state.shape != (batch, channels, k - 1):
    raise ValueError(f"CausalConvWithState: past_state must be {(batch, channels, k - 1)}, got {past_state.shape}")
  pad = past_state if past_state is not None else Tensor.zeros(batch, channels, k - 1, dtype=x.dtype, device=x.device)
  padded = pad.cat(x, dim=2) if k > 1 else x
  # half-precision inputs are summed in float32 and rounded once, as onnx's reference does
  acc = dtypes.float32 if x.dtype.itemsize < 4 else x.dtype
  out = padded.cast(acc).conv2d(weight.cast(acc), bias.cast(acc) if bias is not None else None, groups=channels).cast(x.dtype)
  if activation != "none": out = out.cast(dtypes.float32).silu().cast(x.dtype)
  return out, padded[:, :, length:]

def _heads(x:Tensor, heads:int, name:str) -> Tensor:
  """(B, T, H*D) -> (B, H, T, D) in float32, where the recurrence runs."""
  if x.ndim != 3 or x.shape[-1] % heads: raise ValueError(f"LinearAttention: {name} must be (B, T, {heads}*D), got {x.shape}")
  return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2).cast(dtypes.float32)

@onnx_op("LinearAttention", 27)
def LinearAttention(query:Tensor, key:Tensor, value:Tensor, past_state:Tensor|None=None, decay:Tensor|None=None, beta:Tensor|None=None,
                    chunk_size:int=64, kv_num_heads:int|None=None, q_num_heads:int|None=None, scale:float=0.0,
                    update_rule:str="gated_delta"):
  if update_rule not in ("linear", "gated", "delta", "gated_delta"):
    raise NotImplementedError(f"LinearAttention: update_rule={update_rule!r} is not supported (linear, gated, delta, gated_delta)")
  if not q_num_heads or not kv_num_heads or q_num_heads % kv_num_heads:
    raise ValueError(f"LinearAttention: q_num_heads ({q_num_heads}) must be a positive multiple of kv_num_heads ({kv_num_heads})")
  gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
  for name, t, needed in (("decay", decay, gated), ("beta", beta, delta)):
    if needed != (t is not None): raise ValueError(f"LinearAttention: update_rule={update_rule!r} {'needs' if needed else 'takes no'} {name} input")
  q, k, v = _heads(query, q_num_heads, "query"), _heads(key, kv_num_heads, "key"), _heads(value, kv_num_heads, "value")
  b, _, t, dk = q.shape
  dv, group = v.shape[-1], q_num_heads // kv_num_heads
  if k.shape != (b, kv_num_heads, t, dk) or v.shape[:3] != (b, kv_num_heads, t):
    raise ValueError(f"LinearAttention: query {query.shape}, key {key.shape} and value {value.shape} do not agree for {q_num_heads} query and "
                     f"{kv_num_heads} key/value heads")
  if past_state is not None and past_state.shape != (b, kv_num_heads, dk, dv):
    raise ValueError(f"LinearAttention: past_state must be {(b, kv_num_heads, dk, dv)}, got {past_state.shape}")
  # decay: per head (B, T, H) or per key dimension (B, T, H*dk), as (B, H, T, 1|dk); beta: per head or shared, as (B, H|1, T, 1)
  g = None
  if decay is not None:
    if decay.ndim != 3 or decay.shape[-1] not in (kv_num_heads, kv_num_heads * dk):
      raise ValueError(f"LinearAttention: decay must be (B, T, {kv_num_heads}) or (B, T, {kv_num_heads * dk}), got {decay.shape}")
    g = _heads(decay, kv_num_heads, "decay")
  rate = None
  if beta is not None:
    if beta.ndim != 3 or beta.shape[-1] not in (kv_num_heads, 1):
      raise ValueError(f"LinearAttention: beta must be (B, T, {kv_num_heads}) or (B, T, 1), got {beta.shape}")
    rate = beta.transpose(1, 2).unsqueeze(-1).cast(dtypes.float32)
  state = past_state.cast(dtypes.float32) if past_state is not None else Tensor.zeros(b, kv_num_heads, dk, dv, device=query.device)
  scale = scale or 1 / math.sqrt(dk)
  qg = q.reshape(b, kv_num_heads, group, t, dk)        # query head h reads key/value head h // group
  if not delta and (g is None or g.shape[-1] == 1):
    # without the delta correction the recurrence has a closed form: with G the running sum of the decays, output t reads the
    # past state decayed by exp(G_t) plus each step s <= t decayed by exp(G_t - G_s), a causal (T, T) attention like softmax's
    big_g = g.cumsum(2) if g is not None else Tensor.zeros(b, kv_num_heads, t, 1, device=query.device)
    causal = Tensor.ones(t, t, dtype=dtypes.bool, device=query.device).tril()
    weights = causal.where(big_g - big_g.transpose(-1, -2), -math.inf).exp()               # (B, H, T, T)
    scores = (qg @ k.unsqueeze(2).transpose(-1, -2)) * weights.unsqueeze(2)
    out = scores @ v.unsqueeze(2) + (qg * big_g.exp().unsqueeze(2)) @ state.unsqueeze(2)
    last = big_g[:, :, t - 1:t] if t else big_g.sum(2, keepdim=True)
    state = state * last.exp() + (k * (last - big_g).exp()).transpose(-1, -2) @ v
  else:
    outs = []
    for i in range(t):
      kt, vt = k[:, :, i], v[:, :, i]
      if g is not None: state = state * g[:, :, i].exp().unsqueeze(-1)
      if rate is not None: vt = rate[:, :, i] * (vt - (state * kt.unsqueeze(-1)).sum(-2))
      state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
      outs.append((qg[:, :, :, i].unsqueeze(-1) * state.unsqueeze(2)).sum(-2))
    out = Tensor.stack(*outs, dim=3) if outs else Tensor.zeros(b, kv_num_heads, group, 0, dv, device=query.device)
  out = (out * scale).reshape(b, q_num_heads, t, dv).transpose(1, 2).reshape(b, t, q_num_heads * dv)
  return out.cast(query.dtype), state.cast(past_state.dtype if past_state is not None else query.dtype)

@onnx_op("FlexAttention", 1, Domain.PREVIEW)
def FlexAttention(q:Tensor, k:Tensor, v:Tensor, prob_mod:Any=None, score_mod:Any=None, scale:float|None=None,
                  softmax_precision:int|None=None) -> Tensor:
  if q.ndim != 4 or k.ndim != 4 or v.ndim != 4: raise ValueError(f"FlexAttention: Q, K and V must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
  hq, hkv = q.shape[1], k.shape[1]
  if v.shape[1] != hkv or v.shape[2] != k.shape[2] or k.shape[3] != q.shape[3] or hq % hkv:
    raise ValueError(f"FlexAttention: Q {q.shape}, K {k.shape} and V {v.shape} do not agree (query heads a multiple of key/value heads)")
  if hq != hkv: k, v = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
  # the scale is split over Q and K, in their dtype; the scores then move to the softmax's precision
  root = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
  precision = dtype_from_onnx(softmax_precision) if softmax_precision is not None else \
    (q.dtype if q.dtype == dtypes.float64 else dtypes.float32)
  scores = ((q * root) @ (k * root).transpose(-1, -2)).cast(precision)
  if score_mod is not None: scores = _modify(score_mod, scores, "score_mod")
  probs = scores.softmax(-1)
  if prob_mod is not None: probs = _modify(prob_mod, probs, "prob_mod")
  return (probs @ v.cast(precision)).cast(v.dtype)

def _modify(graph:Any, x:Tensor, name:str) -> Tensor:
  if len(graph.graph_inputs) != 1 or len(graph.graph_outputs) != 1:
    raise ValueError(f"FlexAttention: {name} must take one input and give one output, it has {len(graph.graph_inputs)} and "
                     f"{len(graph.graph_outputs)}")
  out = run_subgraph(graph, [x])[0]
  if out.shape != x.shape: raise ValueError(f"FlexAttention: {name} must keep the shape {x.shape}, it gave {out.shape}")
  return out.cast(x.dtype)
