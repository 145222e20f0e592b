"""Helper for the torch group: compare() runs one op as a pair of callables (ours, torch's) on the same random inputs; forward by
np.testing.assert_allclose, then the input gradients of a random-weighted sum of every float output."""
from __future__ import annotations
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinygrad import Tensor, dtypes  # noqa: E402

_TORCH_DT = {np.float32: torch.float32, np.float64: torch.float64, np.int32: torch.int32, np.int64: torch.int64, np.bool_: torch.bool,
             np.float16: torch.float16, np.int8: torch.int8, np.uint8: torch.uint8, np.int16: torch.int16}

def make(shape, dtype=np.float32, low=-2.0, high=2.0, rng=None):
  rng = rng if rng is not None else np.random.default_rng(0)
  if dtype is np.bool_: return rng.random(shape) < 0.5
  if np.issubdtype(dtype, np.integer): return rng.integers(int(low), int(high), size=shape).astype(dtype)
  return rng.uniform(low, high, size=shape).astype(dtype)

def _outs(x): return list(x) if isinstance(x, (tuple, list)) else [x]

def _np(t) -> np.ndarray:
  if isinstance(t, Tensor): return t.numpy()
  return t.detach().numpy() if t.dtype is not torch.bfloat16 else t.detach().float().numpy()

def compare(ours, theirs, shapes=(), *, vals=None, dtype=np.float32, low=-2.0, high=2.0, grad=True, atol=1e-5, rtol=1e-5,
            grad_atol=None, grad_rtol=None, check_dtype=True, seed=0):
  """shapes: one input per shape (random in [low, high) of dtype); vals: explicit numpy inputs instead (or appended after them).
  Returns the forward outputs (ours, torch's) as numpy arrays."""
  rng = np.random.default_rng(seed)
  arrs = [make(s, dtype, low, high, rng) for s in shapes] + [np.asarray(v) for v in (vals or [])]
  diff = [grad and np.issubdtype(a.dtype, np.floating) for a in arrs]
  ts = [Tensor(a, requires_grad=d) for a, d in zip(arrs, diff)]
  tts = [torch.tensor(a, requires_grad=d) for a, d in zip(arrs, diff)]
  outs, touts = _outs(ours(*ts)), _outs(theirs(*tts))
  assert len(outs) == len(touts), f"{len(outs)} outputs vs torch's {len(touts)}"
  res = []
  for i, (o, to) in enumerate(zip(outs, touts)):
    o_np, t_np = _np(o), _np(to)
    assert o_np.shape == t_np.shape, f"output {i}: shape {o_np.shape} vs torch {t_np.shape}"
    # indices and int sums: tinygrad's default int is int32 where torch's is int64
    if check_dtype and not (o_np.dtype == np.int32 and t_np.dtype == np.int64):
      assert o_np.dtype == t_np.dtype, f"output {i}: dtype {o_np.dtype} vs torch {t_np.dtype}"
    np.testing.assert_allclose(o_np.astype(np.float64) if o_np.dtype != np.bool_ else o_np, t_np, atol=atol, rtol=rtol,
                               err_msg=f"forward output {i}")
    res.append((o_np, t_np))
  if not grad or not any(diff): return res
  # random-weighted sum of every float output that torch can differentiate
  loss, tloss = None, None
  for o, to in zip(outs, touts):
    if not to.requires_grad or not to.dtype.is_floating_point: continue
    w = rng.uniform(-1, 1, size=tuple(to.shape)).astype(_np(to).dtype)
    term, tterm = (o * Tensor(w)).sum(), (to * torch.tensor(w)).sum()
    loss, tloss = (term, tterm) if loss is None else (loss + term, tloss + tterm)
  if loss is None: return res
  tgrads = torch.autograd.grad(tloss, [t for t, d in zip(tts, diff) if d], allow_unused=True)
  grads = loss.gradient(*[t for t, d in zip(ts, diff) if d])
  for i, (g, tg) in enumerate(zip(grads, tgrads)):
    tg_np = np.zeros(g.shape, dtype=_np(g).dtype) if tg is None else _np(tg)
    np.testing.assert_allclose(_np(g), tg_np, atol=grad_atol if grad_atol is not None else atol * 10,
                               rtol=grad_rtol if grad_rtol is not None else rtol * 10, err_msg=f"gradient of input {i}")
  return res

__all__ = ["compare", "make", "torch", "Tensor", "dtypes"]
