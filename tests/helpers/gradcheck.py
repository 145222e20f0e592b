"""Finite-difference checks of Tensor gradients, for any test file: `from tests.helpers.gradcheck import gradcheck`.

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
  analytic = loss.gradient(*ts)
  # every perturbed forward pass is realized with the gradients, in one schedule: its kernels compile in one batch (and repeat)
  moved: list[tuple[int, tuple, Tensor, Tensor]] = []
  for i, a in enumerate(arrays):
    for j in np.ndindex(*a.shape):
      f = []
      for d in (eps, -eps):
        shifted = [x.copy() for x in arrays]
        shifted[i][j] += d
        f.append(_scalar(fn, shifted, r, device)[0])
      moved.append((i, j, f[0], f[1]))
  analytic[0].realize(*analytic[1:], *[f for _, _, fp, fm in moved for f in (fp, fm)])
  numeric = [np.zeros_like(a) for a in arrays]
  for i, j, fp, fm in moved: numeric[i][j] = (fp.item() - fm.item()) / (2 * eps)
  ret = [g.numpy() for g in analytic]
  for i, (g, n) in enumerate(zip(ret, numeric)):
    assert g.shape == n.shape, f"gradcheck: input {i} has shape {n.shape}, its gradient {g.shape}"
    np.testing.assert_allclose(g, n, atol=atol, rtol=rtol, err_msg=f"gradcheck: gradient of input {i} (shape {n.shape})")
  return ret
