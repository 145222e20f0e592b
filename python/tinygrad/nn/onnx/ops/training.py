"""The training domain (ai.onnx.preview.training): one optimizer step of Adagrad, Momentum and Adam over any number of tensors.
Inputs are R (learning rate), T (step count), then the tensors X..., their gradients G..., and the optimizer's state per tensor."""
from __future__ import annotations
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op, Domain

def _groups(inputs:tuple[Tensor, ...], n:int) -> list[list[Tensor]]:
  size = len(inputs) // n
  return [list(inputs[i * size:(i + 1) * size]) for i in range(n)]

@onnx_op("Adagrad", 1, Domain.TRAINING)
def Adagrad(r:Tensor, t:Tensor, *inputs:Tensor, decay_factor:float=0.0, epsilon:float=1e-6, norm_coefficient:float=0.0) -> tuple[Tensor, ...]:
  xs, gs, hs = _groups(inputs, 3)
  rate = r / (1 + t.cast(r.dtype) * decay_factor)
  new_x, new_h = [], []
  for x, g, h in zip(xs, gs, hs):
    g = norm_coefficient * x + g
    h = h + g * g
    new_x.append(x - rate * g / (h.sqrt() + epsilon))
    new_h.append(h)
  return tuple(new_x + new_h)

@onnx_op("Momentum", 1, Domain.TRAINING)
def Momentum(r:Tensor, t:Tensor, *inputs:Tensor, alpha:float, beta:float, mode:str, norm_coefficient:float) -> tuple[Tensor, ...]:
  xs, gs, vs = _groups(inputs, 3)
  # the first step (T == 0) takes the gradient unscaled
  beta_t = (t > 0).where(beta, 1.0)
  new_x, new_v = [], []
  for x, g, v in zip(xs, gs, vs):
    g = norm_coefficient * x + g
    v = alpha * v + beta_t * g
    new_x.append(x - r * (g + alpha * v) if mode == "nesterov" else x - r * v)
    new_v.append(v)
  return tuple(new_x + new_v)

@onnx_op("Adam", 1, Domain.TRAINING)
def Adam(r:Tensor, t:Tensor, *inputs:Tensor, alpha:float=0.9, beta:float=0.999, epsilon:float=1e-6, norm_coefficient:float=0.0,
         norm_coefficient_post:float=0.0) -> tuple[Tensor, ...]:
  xs, gs, vs, hs = _groups(inputs, 4)
  tf = t.cast(r.dtype)
  rate = (tf > 0).where(r * (1 - beta ** tf).sqrt() / (1 - alpha ** tf), r)
  new_x, new_v, new_h = [], [], []
  for x, g, v, h in zip(xs, gs, vs, hs):
    g = norm_coefficient * x + g
    v = alpha * v + (1 - alpha) * g
    h = beta * h + (1 - beta) * g * g
    new_x.append((1 - norm_coefficient_post) * (x - rate * v / (h.sqrt() + epsilon)))
    new_v.append(v)
    new_h.append(h)
  return tuple(new_x + new_v + new_h)
