"""The ai.onnx.ml domain: LabelEncoder, ArrayFeatureExtractor, Binarizer."""
from __future__ import annotations
from typing import Any
import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op, Domain
from tinygrad.nn.onnx.model import array_to_value

@onnx_op("Binarizer", 1, Domain.ML)
def Binarizer(x:Tensor, threshold:float=0.0) -> Tensor: return (x > threshold).cast(x.dtype)

@onnx_op("ArrayFeatureExtractor", 1, Domain.ML)
def ArrayFeatureExtractor(x:Any, y:Tensor) -> Any:
  idx = y.flatten().tolist()
  if isinstance(x, np.ndarray): return x[..., idx]
  return x[..., Tensor(idx, dtype=dtypes.int64, device=x.device)] if len(idx) else x[..., :0]

@onnx_op("LabelEncoder", 2, Domain.ML)
def LabelEncoder(x:Any, default_float:float=-0.0, default_int64:int=-1, default_string:str="_Unused", default_tensor:Any=None,
                 keys_floats:list[float]|None=None, keys_int64s:list[int]|None=None, keys_strings:list[str]|None=None, keys_tensor:Any=None,
                 values_floats:list[float]|None=None, values_int64s:list[int]|None=None, values_strings:list[str]|None=None,
                 values_tensor:Any=None) -> Any:
  def listed(t:Any) -> list|None:
    if t is None: return None
    return list(t.reshape(-1)) if isinstance(t, np.ndarray) else t.flatten().tolist()
  keys = next(k for k in (keys_floats, keys_int64s, keys_strings, listed(keys_tensor)) if k is not None)
  values = next(v for v in (values_floats, values_int64s, values_strings, listed(values_tensor)) if v is not None)
  if default_tensor is not None: default = listed(default_tensor)[0]
  elif values_strings is not None or isinstance(values_tensor, np.ndarray): default = default_string
  elif values_int64s is not None: default = default_int64
  else: default = default_float
  # a lookup table over every element, on the host: keys may be strings, and floats match NaN to NaN
  data = x.numpy() if isinstance(x, Tensor) else x
  table = {(_nan_key(k)): v for k, v in zip(keys, values)}
  out = np.array([table.get(_nan_key(v), default) for v in data.reshape(-1)]).reshape(data.shape)
  if values_strings is not None or isinstance(values_tensor, np.ndarray): return out.astype(object)
  if isinstance(values_tensor, Tensor): return Tensor(out).cast(values_tensor.dtype)
  return array_to_value(out.astype(np.int64 if values_int64s is not None else np.float32))

def _nan_key(v:Any) -> Any: return "nan" if isinstance(v, float) and v != v else v
