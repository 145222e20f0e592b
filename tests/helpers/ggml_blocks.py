"""Packed blocks of any ggml type for tests: random bytes with the float16 fields (scales, mins) set to finite values, or edge cases."""
import numpy as np
from tinygrad.llm.quants import GGML_TYPES

TYPE_IDS = {t.name: i for i, t in GGML_TYPES.items()}
# {type name: byte offsets of the float16 fields in its block}
F16_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2),
              "Q5_K": (0, 2), "Q6_K": (208,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ2_S": (0,), "IQ4_XS": (0,), "Q1_0": (0,), "MXFP4": ()}

def random_blocks(name:str, nblocks:int, seed:int=0, fill:int|None=None, scales:tuple[float, float]=(-1.0, 1.0),
                  exponents:tuple[int, int]=(120, 134)) -> np.ndarray:
  """(nblocks, bytes per block) uint8 of ggml type `name`: every byte `fill` (or random), then the float16 fields uniform in `scales`
  (a single value when the bounds are equal), and an MXFP4 block's e8m0 exponent in [exponents[0], exponents[1]). Native types (F32,
  F16, BF16) are random normal values (or bytes `fill`)."""
  t, rng = GGML_TYPES[TYPE_IDS[name]], np.random.default_rng(seed)
  if t.native is not None and fill is None:
    vals = rng.standard_normal(nblocks).astype(np.float32)
    raw = {"F32": vals, "F16": vals.astype(np.float16), "BF16": (vals.view(np.uint32) >> 16).astype(np.uint16)}[name]
    return raw.view(np.uint8).reshape(nblocks, t.block_bytes)
  b = np.full((nblocks, t.block_bytes), fill, np.uint8) if fill is not None else rng.integers(0, 256, (nblocks, t.block_bytes), np.uint8)
  for off in F16_FIELDS.get(name, ()):
    b[:, off:off+2] = rng.uniform(*scales, nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
  if name == "MXFP4": b[:, 0] = rng.integers(*exponents, nblocks, endpoint=True)
  return b
