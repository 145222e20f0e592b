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

@onnx_op("TfIdfVectorizer", 9)
def TfIdfVectorizer(x:Tensor|np.ndarray, max_gram_length:int, max_skip_count:int, min_gram_length:int, mode:str, ngram_counts:list[int],
                    ngram_indexes:list[int], pool_int64s:list[int]|None=None, pool_strings:list[str]|None=None,
                    weights:list[float]|None=None) -> Tensor:
  if mode not in ("TF", "IDF", "TFIDF"): raise NotImplementedError(f"TfIdfVectorizer: mode={mode!r} is not supported (TF, IDF, TFIDF)")
  pool = pool_int64s if pool_int64s is not None else pool_strings
  if pool is None: raise ValueError("TfIdfVectorizer: one of pool_int64s and pool_strings is required")
  if x.ndim > 2: raise ValueError(f"TfIdfVectorizer: input must be [C] or [B, C], got shape {x.shape}")
  out_size = max(ngram_indexes) + 1
  if weights and len(weights) != out_size:
    raise ValueError(f"TfIdfVectorizer: {len(weights)} weights for an output of {out_size} (max(ngram_indexes) + 1) entries")
  # the pool lists its n-grams by size (section i of ngram_counts holds (i+1)-grams); each takes the next ngram_indexes entry, also
  # where its size is outside [min_gram_length, max_gram_length] and it is not counted; a repeated n-gram keeps its last index
  grams: dict[int, dict[tuple, int]] = {}
  gram_id = 0
  for i, start in enumerate(ngram_counts):
    end, size = ngram_counts[i + 1] if i + 1 < len(ngram_counts) else len(pool), i + 1
    if (end - start) % size: raise ValueError(f"TfIdfVectorizer: pool section {i} of {end - start} items does not split into {size}-grams")
    for g in range(start, end, size):
      if gram_id >= len(ngram_indexes): raise ValueError(f"TfIdfVectorizer: the pool has more n-grams than ngram_indexes ({len(ngram_indexes)})")
      if min_gram_length <= size <= max_gram_length: grams.setdefault(size, {})[tuple(pool[g:g + size])] = ngram_indexes[gram_id]
      gram_id += 1
  if isinstance(x, np.ndarray):
    # strings: each becomes its index in the pool's vocabulary (-1 when it is in no n-gram), on the host
    vocab = {s: i for i, s in enumerate(dict.fromkeys(pool))}
    x = Tensor(np.array([vocab.get(s, -1) for s in x.reshape(-1)], dtype=np.int64).reshape(x.shape))
    grams = {size: {tuple(vocab[s] for s in gram): idx for gram, idx in table.items()} for size, table in grams.items()}
  rows = x.reshape(1, -1) if x.ndim < 2 else x
  n_rows, length = rows.shape
  counts = Tensor.zeros(n_rows, out_size, device=x.device)
  for size, table in grams.items():
    pool_t = Tensor(list(table), dtype=rows.dtype, device=x.device).reshape(1, 1, len(table), size)
    onehot = np.zeros((len(table), out_size), dtype=np.float32)
    onehot[np.arange(len(table)), list(table.values())] = 1
    # unigrams are counted once; longer n-grams at every skip distance 1..max_skip_count+1 (items skip-1 apart)
    found = None
    for skip in ([1] if size == 1 else range(1, max_skip_count + 2)):
      starts = length - (size - 1) * skip
      if starts <= 0: break
      windows = Tensor.stack(*[rows[:, k * skip:k * skip + starts] for k in range(size)], dim=-1)    # (rows, starts, size)
      hits = (windows.unsqueeze(2) == pool_t).all(-1).cast(dtypes.float32).sum(1)                  # (rows, n-grams)
      found = hits if found is None else found + hits
    if found is not None: counts = counts + found @ Tensor(onehot, device=x.device)
  if mode != "TF":
    scale = Tensor(list(weights), dtype=dtypes.float32, device=x.device) if weights else None
    if mode == "IDF": counts = (counts > 0).cast(dtypes.float32) * (scale if scale is not None else 1)
    elif scale is not None: counts = counts * scale
  return counts if x.ndim == 2 else counts.reshape(out_size)
