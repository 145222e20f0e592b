"""Finite-difference checks of Tensor gradients, for any test file: `from gradcheck import gradcheck`.

  gradcheck(fn, *inputs, eps=1e-6, atol=1e-6, rtol=1e-5, device=None) -> list[np.ndarray]

fn takes one Tensor per input (float64 Tensors made from the numpy arrays `inputs`) and returns a Tensor (any shape, a float
dtype; it is cast to float64). Its output is reduced to the scalar sum(out * r) for a fixed random r of out's shape, so every
output element's gradient counts. The gradient Tensor.gradient gives is compared with central differences of that scalar,
element by element of every input ((f(x + eps) - f(x - eps)) / 2eps, forward passes run by tinygrad in float64). Returns the
analytic gradients. Keep inputs small (every element costs two forward passes) and away from kinks (relu at 0, ties of max).
"""
from __future__ import annotations
import numpy as np
from tinygrad import Tensor, dtypes

def _scalar(fn, arrays:list[np.ndarray], r:np.ndarray|None, device:str|None) -> tuple[Tensor, list[Tensor], np.ndarray]:
  ts = [Tensor(a, dtype=dtypes.float64, device=device) for a in arrays]
  out = fn(*ts)
  if not isinstance(out, Tensor): raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
  if not dtypes.is_float(out.dtype): raise TypeError(f"gradcheck: fn must return a float Tensor, got {out.dtype}")
  if r is None:   # weights of either sign, fixed (a failure reproduces), none near 0 (every output element counts)
    rng = np.random.default_rng(0)
    r = rng.uniform(0.5, 1.5, out.shape) * rng.choice([-1.0, 1.0], out.shape)
  return (out.cast(dtypes.float64) * Tensor(np.asarray(r, dtype=np.float64), device=device)).sum(), ts, r

def gradcheck(fn, *inputs, eps:float=1e-6, atol:float=1e-6, rtol:float=1e-5, device:str|None=None) -> list[np.ndarray]:
  arrays = [np.array(a, dtype=np.float64) for a in inputs]
  loss, ts, r = _scalar(fn, arrays, None, device)
  analytic = [g.numpy() for g in loss.gradient(*ts)]
  for i, a in enumerate(arrays):
    assert analytic[i].shape == a.shape, f"gradcheck: input {i} has shape {a.shape}, its gradient {analytic[i].shape}"
    numeric = np.zeros_like(a)
    for j in np.ndindex(*a.shape):
      vals = []
      for d in (eps, -eps):
        moved = [x.copy() for x in arrays]
        moved[i][j] += d
        vals.append(_scalar(fn, moved, r, device)[0].item())
      numeric[j] = (vals[0] - vals[1]) / (2 * eps)
    np.testing.assert_allclose(analytic[i], numeric, atol=atol, rtol=rtol, err_msg=f"gradcheck: gradient of input {i} (shape {a.shape})")
  return analytic
