"""The ONNX operator table: every operator is a function registered under its name, domain and the opset version it was introduced
or last changed in. A model's node gets the newest implementation whose version is at most the model's opset for that domain."""
from __future__ import annotations
import enum
from typing import Callable, NamedTuple

class Domain(enum.Enum):
  ONNX = "ai.onnx"
  ML = "ai.onnx.ml"
  PREVIEW = "ai.onnx.preview"
  TRAINING = "ai.onnx.preview.training"
  MICROSOFT = "com.microsoft"
  @classmethod
  def from_onnx(cls, domain:str|None) -> Domain:
    if not domain: return cls.ONNX
    try: return cls(domain)
    except ValueError: raise NotImplementedError(f"ONNX domain {domain!r} is not supported (supported: {[d.value for d in cls]})") from None

class OpSetId(NamedTuple):
  domain: Domain
  version: int

# the newest opset of the default domain a model may declare; a newer one is refused before anything runs
MAX_OPSET = 28

onnx_ops: dict[str, dict[OpSetId, Callable]] = {}

def onnx_op(name:str, since:int=1, domain:Domain=Domain.ONNX) -> Callable[[Callable], Callable]:
  """Register the decorated function as operator `name` of `domain` from opset `since` on. The function takes the node's inputs
  positionally (a Tensor, None for an omitted optional input, a list of Tensors for a sequence) and its attributes as keywords."""
  def register(fn:Callable) -> Callable:
    onnx_ops.setdefault(name, {})[OpSetId(domain, since)] = fn
    return fn
  return register

def select_op(name:str, domain:Domain, version:int) -> Callable:
  if name not in onnx_ops: raise NotImplementedError(f"ONNX operator {name!r} is not supported")
  eligible = {v.version: fn for v, fn in onnx_ops[name].items() if v.domain is domain and v.version <= version}
  if not eligible:
    have = sorted(f"{v.domain.value} {v.version}" for v in onnx_ops[name])
    raise NotImplementedError(f"ONNX operator {name!r} is not supported for domain {domain.value} opset {version} (have: {', '.join(have)})")
  return eligible[max(eligible)]
