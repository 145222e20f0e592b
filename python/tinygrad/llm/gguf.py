"""GGUF files (llama.cpp's weight format): gguf_load reads the key/value metadata and the tensors. Each tensor's stored bytes are copied
as they are from the mapped file (a DISK view: the file is never read whole into memory) to the device; a quantized one comes back as
lazy dequantization ops over its packed blocks (quants.py), so the kernel that reads the weight reads the packed bytes and no float copy
of it is ever written. Every size and offset in the file is checked before anything is read."""
from __future__ import annotations
import pathlib
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.device import Device
from tinygrad.helpers import prod, round_up
from tinygrad.nn.state import WeightSource
from tinygrad.tensor.disk import is_disk
from tinygrad.llm.quants import GGMLType, ggml_type as ggml_type_of, _ggml_iq_grid  # noqa: F401  (tinygrad 0.14 has the grid helper here)

__all__ = ["gguf_load", "ggml_data_to_tensor"]

def _nbytes(n:int, t:GGMLType, what:str) -> int:
  if n % t.block_elems: raise ValueError(f"{what}: {n} elements is not a whole number of {t.name} blocks of {t.block_elems}")
  return n // t.block_elems * t.block_bytes

def _values(packed:Tensor, t:GGMLType, shape:tuple[int, ...]) -> Tensor:
  """The tensor of shape `shape` stored in `packed`: native types are their values already, quantized ones are lazily dequantized."""
  return packed.reshape(shape) if t.native is not None else t.dequantize(packed).reshape(shape)

def ggml_data_to_tensor(t:Tensor, n:int, ggml_type:int) -> Tensor:
  """The n values of ggml type `ggml_type` whose bytes start t (a uint8 tensor), as a 1-d tensor: native types keep their dtype,
  quantized ones are dequantized to float32 (Q1_0 to float16) as llama.cpp does, by lazy ops on t's device (the default device for a
  file's DISK tensor, whose native values stay views of the file)."""
  if t.dtype is not dtypes.uint8 or t.ndim != 1: raise ValueError(f"ggml_data_to_tensor needs a 1-d uint8 tensor, got {t.shape} {t.dtype}")
  gt = ggml_type_of(ggml_type, "ggml_data_to_tensor")
  if (nbytes := _nbytes(n, gt, "ggml_data_to_tensor")) > t.shape[0]:
    raise ValueError(f"ggml_data_to_tensor: {n} {gt.name} values need {nbytes} bytes, the tensor has {t.shape[0]}")
  if gt.native is not None: return t[:nbytes].bitcast(gt.native)
  return _values(t[:nbytes].to(None if is_disk(t.device) else t.device).reshape(-1, gt.block_bytes), gt, (n,))

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

def _gguf_parse(src:WeightSource) -> tuple[dict[str, Any], list[_Stored]]:
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
  data_start, spans, tensors = round_up(r.pos, alignment), [], []
  for name, dims, typ, off in infos:
    t = ggml_type_of(typ, f"{src.name}: tensor {name!r}")
    nbytes = _nbytes(prod(dims), t, f"{src.name}: tensor {name!r} ({t.name})")
    src.span(data_start + off, data_start + off + nbytes, f"tensor {name!r} ({t.name}, dims {dims})")
    spans.append((off, off + nbytes, name))
    tensors.append(_Stored(name, t, tuple(reversed(dims)), data_start + off, nbytes))
  spans.sort()
  for (_, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
    if b1 < e0 and e1 > b1: raise ValueError(f"{src.name}: the data of tensors {n0!r} and {n1!r} overlap (corrupt header)")
  return kv, tensors

@dataclass(frozen=True)
class _Stored:
  """A tensor's place in the file: its type, shape (ggml's dims reversed) and bytes [start, start + nbytes)."""
  name: str
  type: GGMLType
  shape: tuple[int, ...]
  start: int
  nbytes: int
  def packed(self, src:WeightSource, whole:Tensor|None, device:str) -> Tensor:
    """The stored bytes on device: native values as their dtype, quantized blocks as a (blocks, bytes per block) uint8 tensor."""
    t = self.type
    shape, dt = (self.shape, t.native) if t.native is not None else ((self.nbytes // t.block_bytes, t.block_bytes), dtypes.uint8)
    # a file's bytes are a DISK view copied to the device; a tensor of the bytes already on a device is sliced (quantized blocks stay views)
    if whole is None: return src.view(self.start, dt, shape).to(device)
    view = whole[self.start:self.start+self.nbytes].to(device)
    return view.bitcast(dt).reshape(shape).contiguous() if t.native is not None else view.reshape(shape)

def _gguf_split_paths(path:pathlib.Path, kv:dict) -> list[pathlib.Path]:
  if (total := kv.get("split.count", 1)) <= 1: return [path]
  if kv.get("split.no", 0) != 0: raise ValueError(f"{path}: a multi-part GGUF must be loaded from its first part, this is split.no={kv['split.no']}")
  if not (m := re.match(r"^(.*)-00001-of-\d{5}\.gguf$", str(path))):
    raise ValueError(f"{path}: the first part's name must end in -00001-of-NNNNN.gguf")
  return [pathlib.Path(f"{m.group(1)}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)]

def gguf_load(fn:Tensor|str|pathlib.Path, device:str|None=None,
              check:Callable[[dict, dict[str, tuple[int, ...]]], Any]|None=None,
              packed:dict[str, tuple[Tensor, GGMLType]]|None=None) -> tuple[dict, dict[str, Tensor]]:
  """(key/value metadata, tensors by name) of a .gguf file; the parts of a split model (NAME-00001-of-0000N.gguf) are merged when loaded
  by path. Tensors have ggml's dims reversed (row-major) and live on `device` (default: the bytes' device if they are a non-DISK tensor,
  else the default device); native types keep their dtype, quantized ones are float32 (Q1_0 float16) computed lazily from their packed
  blocks, which are copied to the device now. `check(metadata, {name: shape})` runs after the headers are read, before any tensor is
  copied: a caller refuses a file it can't use without reading its weights. `packed`, when given, gets each quantized tensor's
  (blocks, bytes per block) uint8 blocks and type by name, for kernels that read the blocks themselves (quants.block_dot)."""
  whole = fn if isinstance(fn, Tensor) and not is_disk(fn.device) else None
  device = Device.canonicalize(device) if device is not None else whole.device if whole is not None else Device.DEFAULT
  src = WeightSource(fn)
  kv, stored = _gguf_parse(src)
  parts = [(src, stored)]
  if kv.get("split.count", 1) > 1:
    if isinstance(fn, Tensor): raise ValueError("a multi-part GGUF must be loaded by path (got a Tensor)")
    parts += [(s, _gguf_parse(s)[1]) for s in map(WeightSource, _gguf_split_paths(pathlib.Path(fn), kv)[1:])]
  if check is not None: check(kv, {st.name: st.shape for _, sts in parts for st in sts})
  blocks = {st.name: (st, st.packed(s, whole, device)) for s, sts in parts for st in sts}
  # the copies run now, once, so the dequantization ops read realized buffers; quantized blocks of a tensor already on the device are
  # read where they are (realizing those views would copy them)
  if copies := [p for st, p in blocks.values() if whole is None or st.type.native is not None or whole.device != device]: Tensor.realize(*copies)
  if packed is not None: packed.update((name, (p, st.type)) for name, (st, p) in blocks.items() if st.type.native is None)
  return kv, {name: _values(p, st.type, st.shape) for name, (st, p) in blocks.items()}
