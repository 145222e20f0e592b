"""Random operators (RandomUniform/Normal and their -Like forms, Bernoulli, Multinomial). A `seed` attribute seeds tinygrad's generator
(Tensor.manual_seed) before drawing, so a seeded node gives the same values on every run."""
from __future__ import annotations
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx

def _seed(seed:float|None) -> None:
  if seed is not None: Tensor.manual_seed(int(seed))

def _dtype(dtype:int|None, like:Tensor|None=None):
  return dtype_from_onnx(dtype) if dtype is not None else like.dtype if like is not None else dtypes.float32

@onnx_op("RandomUniform", 1)
def RandomUniform(dtype:int=1, high:float=1.0, low:float=0.0, seed:float|None=None, shape:list[int]|None=None) -> Tensor:
  _seed(seed)
  return Tensor.uniform(*(shape or []), low=low, high=high, dtype=_dtype(dtype))

@onnx_op("RandomNormal", 1)
def RandomNormal(dtype:int=1, mean:float=0.0, scale:float=1.0, seed:float|None=None, shape:list[int]|None=None) -> Tensor:
  _seed(seed)
  return (Tensor.randn(*(shape or [])) * scale + mean).cast(_dtype(dtype))

@onnx_op("RandomUniformLike", 1)
def RandomUniformLike(x:Tensor, dtype:int|None=None, high:float=1.0, low:float=0.0, seed:float|None=None) -> Tensor:
  _seed(seed)
  return Tensor.uniform(*x.shape, low=low, high=high, dtype=_dtype(dtype, x), device=x.device)

@onnx_op("RandomNormalLike", 1)
def RandomNormalLike(x:Tensor, dtype:int|None=None, mean:float=0.0, scale:float=1.0, seed:float|None=None) -> Tensor:
  _seed(seed)
  return (Tensor.randn(*x.shape, device=x.device) * scale + mean).cast(_dtype(dtype, x))

@onnx_op("Bernoulli", 15)
def Bernoulli(x:Tensor, dtype:int|None=None, seed:float|None=None) -> Tensor:
  _seed(seed)
  return (Tensor.rand(*x.shape, device=x.device) < x).cast(_dtype(dtype, x))

@onnx_op("Multinomial", 7)
def Multinomial(x:Tensor, dtype:int=6, sample_size:int=1, seed:float|None=None) -> Tensor:
  # the input holds unnormalized log-probabilities per batch row
  _seed(seed)
  return x.softmax(-1).multinomial(sample_size, replacement=True).cast(_dtype(dtype))
