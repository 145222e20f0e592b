"""GGUF files (llama.cpp's weight format): gguf_load reads the key/value metadata and the tensors, dequantizing the quantized ggml types
exactly as llama.cpp's dequantize_row_* do. Dequantization runs on the host in numpy over the mapped file (one pass over each block
array), then the float tensor is copied to the device; native types are views of the file on its DISK device, read when realized on a device.
Every size and offset in the file is checked before it is read."""
from __future__ import annotations
import functools
import pathlib
import re
import struct
from typing import Any, Callable
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod, round_up
from tinygrad.nn.state import WeightSource, tensor_from_bytes
from tinygrad.tensor.disk import is_disk
from tinygrad.llm import ggml_tables as _tables

__all__ = ["gguf_load", "ggml_data_to_tensor"]

# native types {ggml_type: dtype}
_GGML_NATIVE: dict[int, DType] = {0: dtypes.float32, 1: dtypes.float16, 24: dtypes.int8, 25: dtypes.int16, 26: dtypes.int32, 27: dtypes.int64,
                                  28: dtypes.float64, 30: dtypes.bfloat16}
_GGML_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 18: "IQ3_XXS",
               21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 30: "BF16", 39: "MXFP4", 41: "Q1_0"}

# ***** dequantization: blocks is a (number of blocks, bytes per block) uint8 array, the result (number of blocks, elements per block) *****

def _f16(b:np.ndarray) -> np.ndarray: return np.ascontiguousarray(b).view(np.float16).astype(np.float32)
def _nibbles(qs:np.ndarray) -> np.ndarray:
  """(n, k) bytes -> (n, 2k): the low nibbles of all k bytes, then their high nibbles (ggml's order within a block)."""
  return np.concatenate([qs & 0xF, qs >> 4], axis=-1)
def _bits(b:np.ndarray) -> np.ndarray:
  """(..., k) bytes -> (..., k, 8): bit j of each byte, least significant first."""
  return (b[..., None] >> np.arange(8, dtype=np.uint8)) & 1

def _q4_0(b): return (_nibbles(b[:, 2:]).astype(np.float32) - 8) * _f16(b[:, 0:2])
def _q4_1(b): return _nibbles(b[:, 4:]).astype(np.float32) * _f16(b[:, 0:2]) + _f16(b[:, 2:4])
def _q5(b, off):
  # bit j of the 32-bit qh is the fifth bit of element j
  qh = _bits(b[:, off:off+4]).reshape(-1, 32)
  return (_nibbles(b[:, off+4:]) | (qh << 4)).astype(np.float32)
def _q5_0(b): return (_q5(b, 2) - 16) * _f16(b[:, 0:2])
def _q5_1(b): return _q5(b, 4) * _f16(b[:, 0:2]) + _f16(b[:, 2:4])
def _q8_0(b): return b[:, 2:].view(np.int8).astype(np.float32) * _f16(b[:, 0:2])

def _k_scales(s:np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The 8 six-bit scales and mins packed in the 12 bytes of a Q4_K/Q5_K block."""
  lo, hi = s[:, 0:4], s[:, 8:12]
  sc = np.concatenate([lo & 63, (hi & 0xF) | ((lo >> 6) << 4)], axis=-1)
  mn = np.concatenate([s[:, 4:8] & 63, (hi >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=-1)
  return sc.astype(np.float32), mn.astype(np.float32)
def _qk(b, qs_off, qh):
  d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
  sc, mn = _k_scales(b[:, 4:16])
  # 4 chunks of 32 bytes: their low nibbles are elements [64c, 64c+32), high nibbles [64c+32, 64c+64)
  qs = b[:, qs_off:qs_off+128].reshape(-1, 4, 32)
  q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
  if qh is not None: q += _bits(qh).transpose(0, 2, 1).astype(np.float32) * 16   # bit c of qh[l] is the fifth bit of element 32c+l
  return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).reshape(-1, 256)
def _q4_k(b): return _qk(b, 16, None)
def _q5_k(b): return _qk(b, 48, b[:, 16:48])
def _q6_k(b):
  ql, qh = b[:, 0:128].reshape(-1, 2, 64), b[:, 128:192].reshape(-1, 2, 32)
  sc, d = b[:, 192:208].view(np.int8).astype(np.float32).reshape(-1, 2, 8), _f16(b[:, 208:210])
  # per half of 128: four runs of 32 from (low nibbles of ql[0:32], ql[32:64], high nibbles of both), two bits of qh each
  low = np.stack([ql[:, :, 0:32] & 0xF, ql[:, :, 32:64] & 0xF, ql[:, :, 0:32] >> 4, ql[:, :, 32:64] >> 4], axis=2)
  high = np.stack([(qh >> s) & 3 for s in (0, 2, 4, 6)], axis=2)
  q = (low | (high << 4)).astype(np.float32) - 32                # (n, 2, 4, 32)
  scales = sc.reshape(-1, 2, 4, 2).repeat(16, axis=3)           # scale index is 16-element run: run r of 32 uses sc[2r], sc[2r+1]
  return (d[:, :, None, None] * scales * q).reshape(-1, 256)

_KMASK_SIGNS = np.array([1.0, -1.0], dtype=np.float32)
def _grid(name:str) -> np.ndarray:
  return np.frombuffer(bytes.fromhex("".join(getattr(_tables, name))), dtype=np.uint8).reshape(getattr(_tables, name + "_SHAPE")).astype(np.float32)
_GRIDS: dict[str, np.ndarray] = {}
def _grid_cached(name:str) -> np.ndarray:
  if name not in _GRIDS: _GRIDS[name] = _grid(name)
  return _GRIDS[name]
@functools.lru_cache(None)
def _ggml_iq_grid(device:str, grid:tuple[int, ...], grid_shape:tuple[int, int]) -> Tensor:
  """An IQ grid as ggml stores it (ggml-common.h: each entry one word of grid_shape[1] bytes, the first byte lowest) -> a float32
  Tensor of grid_shape on device (tinygrad 0.14's helper; the dequantizers here read the same tables as numpy arrays, _grid)."""
  if len(grid) != grid_shape[0] or grid_shape[1] not in (4, 8):
    raise ValueError(f"an IQ grid of {len(grid)} words can't be shaped {grid_shape} (words of 4 or 8 bytes)")
  words = np.array(grid, dtype=np.uint32 if grid_shape[1] == 4 else np.uint64).astype("<u4" if grid_shape[1] == 4 else "<u8")
  return Tensor(words.view(np.uint8).reshape(grid_shape).astype(np.float32), device=device)
# sign byte of IQ2/IQ3: 7 stored bits, the eighth makes the number of set bits even
_KSIGNS = np.array([i | (0x80 if bin(i).count("1") % 2 else 0) for i in range(128)], dtype=np.uint8)

def _iq3_xxs(b):
  d = _f16(b[:, 0:2])
  aux = b[:, 66:98].copy().view(np.uint32)                                    # (n, 8): per 32 elements, 4x7 sign bits and a 4-bit scale
  db = d * (0.5 + (aux >> 28).astype(np.float32)) * 0.5                       # (n, 8)
  signs = _KSIGNS[(aux[:, :, None] >> np.array([0, 7, 14, 21], dtype=np.uint32)) & 127]       # (n, 8, 4)
  grid = _grid_cached("IQ3XXS_GRID")[b[:, 2:66]].reshape(-1, 8, 4, 8)        # 2 grid entries of 4 per 8 elements
  return (db[:, :, None, None] * grid * _KMASK_SIGNS[_bits(signs)]).reshape(-1, 256)
def _iq3_s(b):
  d = _f16(b[:, 0:2])
  qh, signs, scales = b[:, 66:74], b[:, 74:106].reshape(-1, 8, 4), b[:, 106:110]
  idx = b[:, 2:66].reshape(-1, 8, 8).astype(np.int32) | (_bits(qh).astype(np.int32) << 8)     # (n, 8 groups, 8 grid entries)
  db = d * (1 + 2 * _nibbles(scales)[:, [0, 4, 1, 5, 2, 6, 3, 7]].astype(np.float32))     # group g: nibble g%2 of byte g//2
  grid = _grid_cached("IQ3S_GRID")[idx].reshape(-1, 8, 4, 8)
  return (db[:, :, None, None] * grid * _KMASK_SIGNS[_bits(signs)]).reshape(-1, 256)
def _iq2_s(b):
  d = _f16(b[:, 0:2])
  qs, signs, qh, scales = b[:, 2:34].reshape(-1, 8, 4), b[:, 34:66].reshape(-1, 8, 4), b[:, 66:74], b[:, 74:82]
  hi = (qh[:, :, None] >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 3                         # (n, 8, 4)
  idx = qs.astype(np.int32) | (hi.astype(np.int32) << 8)
  sc = np.stack([scales & 0xF, scales >> 4], axis=-1).repeat(2, axis=-1).astype(np.float32)  # (n, 8, 4): grid entry l uses nibble l//2
  db = d[:, :, None] * (0.5 + sc) * 0.25
  grid = _grid_cached("IQ2S_GRID")[idx]                                                      # (n, 8, 4, 8)
  return (db[..., None] * grid * _KMASK_SIGNS[_bits(signs)]).reshape(-1, 256)
def _iq4_xs(b):
  d = _f16(b[:, 0:2])
  sh = b[:, 2:4].copy().view(np.uint16).astype(np.int32)                     # (n, 1)
  sl = _nibbles(b[:, 4:8])[:, [0, 4, 1, 5, 2, 6, 3, 7]].astype(np.int32)     # group g: nibble g%2 of byte g//2
  ls = sl | (((sh >> (2 * np.arange(8))) & 3) << 4)
  dl = d * (ls - 32).astype(np.float32)                                      # (n, 8)
  q = np.array(_tables.KVALUES_IQ4NL, dtype=np.float32)[_nibbles(b[:, 8:].reshape(-1, 8, 16))]
  return (dl[:, :, None] * q).reshape(-1, 256)
def _mxfp4(b):
  e = b[:, 0].astype(np.uint32)
  # the e8m0 exponent as half its power of two (the code values are doubled)
  d = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32).view(np.float32)
  return np.array(_tables.KVALUES_MXFP4, dtype=np.float32)[_nibbles(b[:, 1:17])] * d[:, None]
def _q1_0(b): return _f16(b[:, 0:2]).astype(np.float16) * (_bits(b[:, 2:18]).reshape(-1, 128).astype(np.float16) * 2 - 1)

# quant types {ggml_type: (elements per block, bytes per block, dequantize)}
_GGML_QUANT: dict[int, tuple[int, int, Callable[[np.ndarray], np.ndarray]]] = {
  2: (32, 18, _q4_0), 3: (32, 20, _q4_1), 6: (32, 22, _q5_0), 7: (32, 24, _q5_1), 8: (32, 34, _q8_0), 12: (256, 144, _q4_k), 13: (256, 176, _q5_k),
  14: (256, 210, _q6_k), 18: (256, 98, _iq3_xxs), 21: (256, 110, _iq3_s), 22: (256, 82, _iq2_s), 23: (256, 136, _iq4_xs), 39: (32, 17, _mxfp4),
  41: (128, 18, _q1_0)}

def _ggml_nbytes(n:int, ggml_type:int, what:str) -> int:
  if (dt := _GGML_NATIVE.get(ggml_type)) is not None: return n * dt.itemsize
  if (q := _GGML_QUANT.get(ggml_type)) is None:
    raise ValueError(f"{what}: GGML type {ggml_type} is not supported (supported: {', '.join(f'{v} ({k})' for k, v in _GGML_NAMES.items())})")
  if n % q[0]: raise ValueError(f"{what}: {n} elements is not a whole number of {_GGML_NAMES[ggml_type]} blocks of {q[0]}")
  return n // q[0] * q[1]

def _dequantize(mv:memoryview, n:int, ggml_type:int, shape:tuple[int, ...], device:str|None=None) -> Tensor:
  if (dt := _GGML_NATIVE.get(ggml_type)) is not None: return tensor_from_bytes(mv, dt, shape, device)
  epb, bpb, fn = _GGML_QUANT[ggml_type]
  out = fn(np.frombuffer(mv, dtype=np.uint8).reshape(-1, bpb))
  return Tensor(np.ascontiguousarray(out).reshape(shape), device=device)

def ggml_data_to_tensor(t:Tensor, n:int, ggml_type:int) -> Tensor:
  """The n values of ggml type `ggml_type` whose bytes start t (a uint8 tensor), as a 1-d tensor on t's device: native types keep their
  dtype, quantized ones are dequantized to float32 (Q1_0 to float16) as llama.cpp does."""
  if t.dtype is not dtypes.uint8 or t.ndim != 1: raise ValueError(f"ggml_data_to_tensor needs a 1-d uint8 tensor, got {t.shape} {t.dtype}")
  nbytes = _ggml_nbytes(n, ggml_type, "ggml_data_to_tensor")
  if nbytes > t.shape[0]:
    raise ValueError(f"ggml_data_to_tensor: {n} {_GGML_NAMES[ggml_type]} values need {nbytes} bytes, the tensor has {t.shape[0]}")
  # a file's native values are a view of it; quantized ones are dequantized on the host into a tensor on the default device
  if is_disk(t.device):
    return t[:nbytes].bitcast(dt) if (dt := _GGML_NATIVE.get(ggml_type)) is not None else _dequantize(t[:nbytes].data(), n, ggml_type, (n,))
  return _dequantize(t[:nbytes].data(), n, ggml_type, (n,), t.device)

# ***** the file *****

class _Reader:
  """Little-endian reads from the mapped file, each checked against its end."""
  def __init__(self, src:WeightSource): self.src, self.pos = src, 0
  def take(self, n:int, what:str) -> memoryview:
    ret = self.src.span(self.pos, self.pos + n, what)
    self.pos += n
    return ret
  def unpack(self, fmt:str, what:str): return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]
  def string(self, what:str) -> str:
    raw = bytes(self.take(self.unpack("Q", what), what))
    try: return raw.decode("utf-8")
    except UnicodeDecodeError as e: raise ValueError(f"{self.src.name}: {what} is not UTF-8 ({e})") from e

# gguf value types {type: (struct format, name)}; 8 is a string, 9 an array
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

def _read_value(r:_Reader, typ:int, what:str) -> Any:
  if (fmt := _GGUF_SCALARS.get(typ)) is not None: return r.unpack(fmt, what)
  if typ == 8: return r.string(what)
  if typ != 9: raise ValueError(f"{r.src.name}: {what} has unknown value type {typ}")
  item, n = r.unpack("i", what), r.unpack("Q", what)
  if item == 9: raise ValueError(f"{r.src.name}: {what} is an array of arrays (not used by GGUF files)")
  # every item takes at least a byte: a count beyond the bytes left is a lie (and would loop for ever)
  if n > len(r.src) - r.pos: raise ValueError(f"{r.src.name}: {what} claims {n} items but only {len(r.src) - r.pos} bytes are left")
  if (fmt := _GGUF_SCALARS.get(item)) is not None:
    raw = r.take(n * struct.calcsize(fmt), what)
    return list(struct.unpack(f"<{n}{fmt}", raw))
  return [_read_value(r, item, what) for _ in range(n)]

def _gguf_parse(src:WeightSource, device:str|None=None) -> tuple[dict[str, Any], dict[str, Tensor]]:
  r = _Reader(src)
  magic = bytes(r.take(4, "the GGUF magic")) if len(src) >= 4 else b""
  if magic != b"GGUF": raise ValueError(f"{src.name}: not a GGUF file (magic {magic!r})")
  if (version := r.unpack("i", "the GGUF version")) not in (2, 3): raise ValueError(f"{src.name}: GGUF version {version} is not supported (2 or 3)")
  n_tensors, n_kv = r.unpack("q", "the tensor count"), r.unpack("q", "the key/value count")
  if not 0 <= n_tensors <= len(src) or not 0 <= n_kv <= len(src):
    raise ValueError(f"{src.name}: claims {n_tensors} tensors and {n_kv} key/values, more than the file can hold")
  kv: dict[str, Any] = {}
  for i in range(n_kv):
    k = r.string(f"key {i}")
    kv[k] = _read_value(r, r.unpack("i", f"the type of {k!r}"), f"value {k!r}")
  infos = []
  for i in range(n_tensors):
    name = r.string(f"tensor name {i}")
    ndim = r.unpack("I", f"tensor {name!r}'s dims")
    if ndim > 8: raise ValueError(f"{src.name}: tensor {name!r} claims {ndim} dimensions")
    dims = tuple(r.unpack("Q", f"tensor {name!r}'s dims") for _ in range(ndim))
    infos.append((name, dims, r.unpack("i", f"tensor {name!r}'s type"), r.unpack("Q", f"tensor {name!r}'s offset")))
  alignment = kv.get("general.alignment", 32)
  if not isinstance(alignment, int) or alignment <= 0: raise ValueError(f"{src.name}: bad general.alignment {alignment!r}")
  data_start, spans = round_up(r.pos, alignment), []
  for name, dims, typ, off in infos:
    nbytes = _ggml_nbytes(prod(dims), typ, f"{src.name}: tensor {name!r}")
    src.span(data_start + off, data_start + off + nbytes, f"tensor {name!r} ({_GGML_NAMES[typ]}, dims {dims})")
    spans.append((off, off + nbytes, name))
  spans.sort()
  for (_, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
    if b1 < e0 and e1 > b1: raise ValueError(f"{src.name}: the data of tensors {n0!r} and {n1!r} overlap (corrupt header)")
  sd = {name: _load_tensor(src, data_start + off, prod(dims), typ, tuple(reversed(dims)), device) for name, dims, typ, off in infos}
  return kv, sd

def _load_tensor(src:WeightSource, start:int, n:int, typ:int, shape:tuple[int, ...], device:str|None) -> Tensor:
  # native types of a file are views of it on its DISK device (read when realized on a device); quantized ones are dequantized now
  if src.is_file() and (dt := _GGML_NATIVE.get(typ)) is not None: return src.view(start, dt, shape)
  return _dequantize(src.mv[start:start+_ggml_nbytes(n, typ, "")], n, typ, shape, device)

def _gguf_split_paths(path:pathlib.Path, kv:dict) -> list[pathlib.Path]:
  if (total := kv.get("split.count", 1)) <= 1: return [path]
  if kv.get("split.no", 0) != 0: raise ValueError(f"{path}: a multi-part GGUF must be loaded from its first part, this is split.no={kv['split.no']}")
  if not (m := re.match(r"^(.*)-00001-of-\d{5}\.gguf$", str(path))):
    raise ValueError(f"{path}: the first part's name must end in -00001-of-NNNNN.gguf")
  return [pathlib.Path(f"{m.group(1)}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)]

def gguf_load(fn:Tensor|str|pathlib.Path) -> tuple[dict, dict[str, Tensor]]:
  """(key/value metadata, tensors by name) of a .gguf file; the parts of a split model (NAME-00001-of-0000N.gguf) are merged when loaded
  by path. Tensors have ggml's dims reversed (row-major), native types keep their dtype, quantized ones come out float32."""
  # tensors dequantized from a file (by path or a DISK tensor of it) go to the default device
  device = fn.device if isinstance(fn, Tensor) and not is_disk(fn.device) else None
  kv, sd = _gguf_parse(WeightSource(fn), device)
  if kv.get("split.count", 1) <= 1: return kv, sd
  if isinstance(fn, Tensor): raise ValueError("a multi-part GGUF must be loaded by path (got a Tensor)")
  for p in _gguf_split_paths(pathlib.Path(fn), kv)[1:]: sd.update(_gguf_parse(WeightSource(p))[1])
  return kv, sd
