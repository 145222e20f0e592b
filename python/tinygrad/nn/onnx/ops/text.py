"""String operators on host (numpy) string tensors: strings are not Tensors, so these run in Python on numpy object arrays."""
from __future__ import annotations
import re
import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op

@onnx_op("StringNormalizer", 10)
def StringNormalizer(x:np.ndarray, case_change_action:str="NONE", is_case_sensitive:int=0, locale:str="",
                     stopwords:list[str]|None=None) -> np.ndarray:
  stop = set(stopwords or [])
  fold = (lambda s: s) if is_case_sensitive else str.lower
  stop = {fold(s) for s in stop}
  row = x.reshape(-1)
  kept = [s for s in row if fold(s) not in stop]
  change = {"LOWER": str.lower, "UPPER": str.upper, "NONE": lambda s: s}
  if case_change_action not in change: raise NotImplementedError(f"StringNormalizer: case_change_action={case_change_action!r}")
  kept = [change[case_change_action](s) for s in kept] or [""]
  out = np.array(kept, dtype=object)
  return out.reshape(1, -1) if x.ndim == 2 else out

@onnx_op("StringConcat", 20)
def StringConcat(x:np.ndarray, y:np.ndarray) -> np.ndarray: return np.char.add(x.astype(str), y.astype(str)).astype(object)

@onnx_op("StringSplit", 20)
def StringSplit(x:np.ndarray, delimiter:str|None=None, maxsplit:int|None=None) -> tuple[np.ndarray, Tensor]:
  parts = [str(s).split(delimiter or None, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1)]
  width = max((len(p) for p in parts), default=0)
  out = np.array([p + [""] * (width - len(p)) for p in parts], dtype=object).reshape(x.shape + (width,))
  return out, Tensor(np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape))

@onnx_op("RegexFullMatch", 20)
def RegexFullMatch(x:np.ndarray, pattern:str="") -> Tensor:
  rx = re.compile(pattern)
  return Tensor(np.array([rx.fullmatch(str(s)) is not None for s in x.reshape(-1)], dtype=bool).reshape(x.shape), dtype=dtypes.bool)
