"""Model state: state dicts of objects (get_state_dict, get_parameters, load_state_dict) and weight files: safetensors (safe_load,
safe_save, safe_load_metadata), torch checkpoints (torch_load: zip and legacy formats, through an unpickler that only knows the globals a
state dict needs), tar and zip archives. Files are mapped, never read whole; every size and offset a file claims is checked against the
file before a byte is read, and a bad file raises ValueError naming the file and the tensor."""
from __future__ import annotations
import io
import json
import mmap
import pathlib
import pickle
import struct
import zlib
from collections import OrderedDict
from typing import Any
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.device import Device
from tinygrad.helpers import prod, DEBUG, Timing, GlobalCounters, tqdm, round_up
from tinygrad.schedule.buffers import new_buffer, buffer_of, buffer_view
from tinygrad.tensor.disk import is_disk, contiguous_view
from tinygrad.uop.ops import Ops

__all__ = ["safe_dtypes", "inverse_safe_dtypes", "safe_load_metadata", "safe_load", "safe_save", "get_state_dict", "get_parameters",
           "load_state_dict", "zip_extract", "tar_extract", "torch_load", "TensorIO"]

safe_dtypes: dict[str, DType] = {
  "BOOL": dtypes.bool, "I8": dtypes.int8, "U8": dtypes.uint8, "I16": dtypes.int16, "U16": dtypes.uint16, "I32": dtypes.int32,
  "U32": dtypes.uint32, "I64": dtypes.int64, "U64": dtypes.uint64, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2,
  "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F32": dtypes.float32, "F64": dtypes.float64}
inverse_safe_dtypes: dict[DType, str] = {v: k for k, v in safe_dtypes.items()}

# ***** bytes of a file or a tensor *****

class WeightSource:
  """The bytes of a weight file (a read-only map of it, for parsing) or of a uint8 tensor, and a name for error messages. A file (given
  by path, or as a DISK tensor of it) also gives its tensors as DISK views (view(...)): nothing is read until they are realized."""
  def __init__(self, fn:Tensor|str|pathlib.Path):
    self.disk: Tensor|None = None
    if isinstance(fn, Tensor):
      if fn.ndim != 1 or fn.dtype is not dtypes.uint8: raise ValueError(f"expected a 1-d uint8 tensor of file bytes, got {fn.shape} {fn.dtype}")
      if not is_disk(fn.device):
        self.name, self.mv = f"<tensor of {fn.shape[0]} bytes>", fn.data()
        return
      # a DISK tensor: the file's bytes it views are mapped, not read
      view = contiguous_view(fn.uop, fn.device, type(fn))
      buf = buffer_of(view.src[0] if view.op is Ops.RESHAPE else view)
      self.disk, path, start = fn, buf.device.split(":", 1)[1], buf.offset
    else: path, start = str(fn), 0
    self.name = path
    with open(path, "rb") as f:
      size = f.seek(0, io.SEEK_END)
      if start + (n := fn.shape[0] if isinstance(fn, Tensor) else size - start) > size:
        raise ValueError(f"{path}: the tensor views bytes [{start}, {start+n}) but the file has {size} bytes")
      # an empty file can't be mapped; it is simply too short for every format here
      self.mv = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))[start:start+n] if size else memoryview(b"")
    if self.disk is None: self._path = pathlib.Path(path)
  def __len__(self): return len(self.mv)
  def span(self, start:int, end:int, what:str) -> memoryview:
    """Bytes [start, end) of the source; ValueError if they are not all inside it."""
    if not 0 <= start <= end <= len(self.mv):
      raise ValueError(f"{self.name}: {what} claims bytes [{start}, {end}) but the file has {len(self.mv)} bytes (truncated or corrupt)")
    return self.mv[start:end]
  def offset_of(self, mv:memoryview) -> int|None:
    """Where mv (a slice of this source's bytes) starts in them; None for other bytes (a deflated zip member)."""
    if not self.is_file() or mv.obj is not self.mv.obj or not len(mv): return None
    import numpy as np
    return int(np.frombuffer(mv, np.uint8).ctypes.data - np.frombuffer(self.mv, np.uint8).ctypes.data)
  def is_file(self) -> bool: return self.disk is not None or hasattr(self, "_path")
  def view(self, start:int, dtype:DType, shape:tuple[int, ...]) -> Tensor:
    """The bytes at start (checked by span before) as a tensor of dtype and shape: a DISK view of the file, else a realized copy on the
    default device."""
    nbytes = prod(shape) * dtype.itemsize
    if not self.is_file(): return tensor_from_bytes(self.span(start, start + nbytes, "a tensor"), dtype, shape)
    if self.disk is None: self.disk = Tensor(self._path)
    return self.disk[start:start+nbytes].bitcast(dtype).reshape(shape)

def tensor_from_bytes(mv:memoryview, dtype:DType, shape:tuple[int, ...], device:str|None=None) -> Tensor:
  """A realized tensor on `device` holding the raw bytes mv (one copy, straight into the device buffer)."""
  dev = Device.canonicalize(device) if device is not None else Device.DEFAULT
  buf = new_buffer(dev, prod(shape), dtype)
  b = buffer_of(buf).allocate()
  if len(mv): b.copyin(mv)
  return Tensor(buffer_view(buf, tuple(shape)), device=dev)

# ***** safetensors *****

def _safe_header(src:WeightSource) -> tuple[int, dict[str, Any]]:
  if len(src) < 8: raise ValueError(f"{src.name}: {len(src)} bytes is too short for a safetensors file (it starts with an 8-byte header size)")
  n = struct.unpack("<Q", src.mv[:8])[0]
  raw = src.span(8, 8 + n, "the safetensors header")
  try: header = json.loads(bytes(raw).decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError) as e: raise ValueError(f"{src.name}: the safetensors header is not valid JSON ({e})") from e
  if not isinstance(header, dict): raise ValueError(f"{src.name}: the safetensors header must be a JSON object, got {type(header).__name__}")
  return 8 + n, header

def _safe_entries(src:WeightSource, data_start:int, header:dict[str, Any]) -> list[tuple[str, DType, tuple[int, ...], int, int]]:
  """(name, dtype, shape, begin, end) of every tensor, checked: known dtype, sizes that match the shape, inside the file, no overlaps."""
  data_len, entries = len(src) - data_start, []
  for name, info in header.items():
    if name == "__metadata__": continue
    where = f"tensor {name!r}"
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
      raise ValueError(f"{src.name}: {where} needs 'dtype', 'shape' and 'data_offsets', got {info!r}")
    if (dt := safe_dtypes.get(info["dtype"])) is None if isinstance(info["dtype"], str) else True:
      raise ValueError(f"{src.name}: {where} has unknown dtype {info['dtype']!r} (known: {', '.join(safe_dtypes)})")
    shape, offs = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
      raise ValueError(f"{src.name}: {where} has a bad shape {shape!r}")
    if not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs) or not 0 <= offs[0] <= offs[1]:
      raise ValueError(f"{src.name}: {where} has bad data_offsets {offs!r}")
    if offs[1] - offs[0] != prod(shape) * dt.itemsize:
      raise ValueError(f"{src.name}: {where} of shape {tuple(shape)} {dt.name} needs {prod(shape)*dt.itemsize} bytes, "
                       f"its data_offsets {offs} give {offs[1]-offs[0]}")
    if offs[1] > data_len:
      raise ValueError(f"{src.name}: {where} claims data bytes [{offs[0]}, {offs[1]}) past the end of the data ({data_len} bytes; truncated?)")
    entries.append((name, dt, tuple(shape), offs[0], offs[1]))
  spans = sorted((b, e, n) for n, _, _, b, e in entries if e > b)
  for (_, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
    if b1 < e0: raise ValueError(f"{src.name}: the data of tensors {n0!r} and {n1!r} overlap (corrupt header)")
  return entries

def safe_load_metadata(fn:Tensor|str|pathlib.Path) -> tuple[Tensor, int, dict[str, Any]]:
  """The file's bytes as a uint8 tensor, where its data starts, and its parsed JSON header (tensor entries and __metadata__)."""
  src = WeightSource(fn)
  data_start, header = _safe_header(src)
  _safe_entries(src, data_start, header)
  t = fn if isinstance(fn, Tensor) else src.view(0, dtypes.uint8, (len(src),))
  return t, data_start, header

def safe_load(fn:Tensor|str|pathlib.Path) -> dict[str, Tensor]:
  """The tensors of a .safetensors file, by name: views of the file on its DISK device (given by path or as a DISK tensor), whose bytes
  are read when a tensor is realized on a device (.to(device), load_state_dict): one copy, straight into the device's buffer. From a
  tensor on another device, copies realized on the default device. A header that lies about sizes, offsets or dtypes raises ValueError
  naming the file and the tensor."""
  src = WeightSource(fn)
  data_start, header = _safe_header(src)
  return {name: src.view(data_start + b, dt, shape) for name, dt, shape, b, _ in _safe_entries(src, data_start, header)}

def safe_save(tensors:dict[str, Tensor], fn:str|pathlib.Path, metadata:dict[str, Any]|None=None):
  """Writes the tensors (and optional metadata, stored as the header's __metadata__) to a .safetensors file."""
  headers: dict[str, Any] = {}
  if metadata: headers["__metadata__"] = metadata
  offset = 0
  for k, v in tensors.items():
    if not isinstance(k, str): raise TypeError(f"safe_save: tensor names must be str, got {k!r}")
    if not isinstance(v, Tensor): raise TypeError(f"safe_save: {k!r} is a {type(v).__name__}, not a Tensor")
    if (name := inverse_safe_dtypes.get(v.dtype)) is None:
      what = "a concrete dtype (not a weak one)" if v.dtype in dtypes.weaks else f"a dtype safetensors has ({', '.join(safe_dtypes)})"
      raise ValueError(f"safe_save: tensor {k!r} has dtype {v.dtype}; safe_save requires {what}")
    headers[k] = {"dtype": name, "shape": list(v.shape), "data_offsets": [offset, offset + v.nbytes()]}
    offset += v.nbytes()
  j = json.dumps(headers, separators=(",", ":")).encode("utf-8")
  # the data starts 8-byte aligned, as the safetensors package writes it
  j += b" " * (round_up(len(j), 8) - len(j))
  # a new file, not the old one truncated: a map of the old file (safe_load_metadata's tensor source) must never see it shrink
  pathlib.Path(fn).unlink(missing_ok=True)
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", len(j)))
    f.write(j)
    for v in tensors.values():
      if v.numel(): f.write(v.data())

# ***** state dicts *****

def get_state_dict(obj, prefix:str="", tensor_type=Tensor) -> dict[str, Tensor]:
  """Every tensor reachable from obj through attributes, lists, tuples and dicts, named by its path ('l1.weight', 'layers.0.bias')."""
  state_dict: dict[str, Tensor] = {}
  # depth first in attribute order, as the recursive definition would go; an object already on the path (a cycle) is not entered again
  stack: list[tuple[Any, str, tuple[int, ...]]] = [(obj, prefix, ())]
  while stack:
    o, pre, path = stack.pop()
    if isinstance(o, tensor_type):
      state_dict[pre.strip(".")] = o
      continue
    if id(o) in path: continue
    path += (id(o),)
    if hasattr(o, "_asdict"): o = o._asdict()   # namedtuple
    elif not isinstance(o, (dict, list, tuple)) and hasattr(o, "__dict__"): o = o.__dict__
    if isinstance(o, dict): items = [(f"{pre}{k}.", v) for k, v in o.items()]
    elif isinstance(o, (list, tuple)): items = [(f"{pre}{i}.", v) for i, v in enumerate(o)]
    else: continue
    stack.extend((v, p, path) for p, v in reversed(items))
  return state_dict

def get_parameters(obj) -> list[Tensor]:
  """The tensors of get_state_dict(obj), in its order."""
  return list(get_state_dict(obj).values())

def load_state_dict(model, state_dict:dict[str, Tensor], strict=True, verbose=True, consume=False, realize=True) -> list[Tensor]:
  """Points each tensor of model's state dict at the tensor of the same name in state_dict (moved to its device) and returns them.
  strict: a name missing from state_dict raises KeyError (else it is skipped); a shape mismatch raises ValueError; consume deletes
  loaded entries from state_dict; realize computes each loaded tensor."""
  if not isinstance(state_dict, dict): raise TypeError(f"load_state_dict needs a dict of tensors, got {type(state_dict).__name__}")
  start_mem_used, ret = GlobalCounters.mem_used, []
  model_state_dict = get_state_dict(model)
  if strict and (missing := [k for k in model_state_dict if k not in state_dict]):
    raise KeyError(f"load_state_dict: {len(missing)} of the model's tensors are missing from the state dict: {missing}")
  if DEBUG >= 1 and (unused := sorted(state_dict.keys() - model_state_dict.keys())): print("WARNING: unused weights in state_dict", unused)
  with Timing("loaded weights in ", lambda et_ns: f", {(B:=GlobalCounters.mem_used-start_mem_used)/1e9:.2f} GB loaded at {B/et_ns:.2f} GB/s",
              enabled=verbose):
    for k, v in (t := tqdm(model_state_dict.items(), disable=None if verbose else True)):
      t.set_description(f"ram used: {GlobalCounters.mem_used/1e9:5.2f} GB, {k:50s}")
      if k not in state_dict:
        if DEBUG >= 1: print(f"WARNING: not loading {k}")
        continue
      if not isinstance(new := state_dict[k], Tensor):
        raise TypeError(f"load_state_dict: state dict entry {k!r} is a {type(new).__name__}, not a Tensor")
      if v.shape != new.shape:
        # a scalar and a one-element vector are the same weight
        if {(), (1,)} == {new.shape, v.shape}: new = new.reshape(v.shape)
        else: raise ValueError(f"Shape mismatch in layer `{k}`: Expected shape {v.shape}, but found {new.shape} in state dict.")
      v.replace(new.to(v.device))
      if realize: v.realize()
      if consume: del state_dict[k]
      ret.append(v)
  return ret

# ***** archives *****

def _zip_members(src:WeightSource) -> dict[str, memoryview]:
  """The (decompressed) bytes of each file in a zip archive; stored members are views of the mapped file."""
  import zipfile
  try: zf = zipfile.ZipFile(_MVReader(src.mv))
  except zipfile.BadZipFile as e: raise ValueError(f"{src.name}: not a zip archive ({e})") from e
  files: dict[str, memoryview] = {}
  with zf:
    for zi in zf.infolist():
      if zi.is_dir(): continue
      # the data follows the local header (30 bytes), whose name and extra field lengths may differ from the central directory's
      local = src.span(zi.header_offset, zi.header_offset + 30, f"zip member {zi.filename!r}'s local header")
      if bytes(local[:4]) != b"PK\x03\x04": raise ValueError(f"{src.name}: zip member {zi.filename!r} has no local header at {zi.header_offset}")
      start = zi.header_offset + 30 + sum(struct.unpack("<HH", local[26:30]))
      data = src.span(start, start + zi.compress_size, f"zip member {zi.filename!r}")
      if zi.compress_type == zipfile.ZIP_STORED: files[zi.filename] = data
      elif zi.compress_type == zipfile.ZIP_DEFLATED:
        try: files[zi.filename] = memoryview(zlib.decompress(data, -15))
        except zlib.error as e: raise ValueError(f"{src.name}: zip member {zi.filename!r} does not inflate ({e})") from e
      else: raise NotImplementedError(f"{src.name}: zip member {zi.filename!r} uses compression {zi.compress_type} (only stored and deflate)")
  return files

class _MVReader(io.RawIOBase):
  """A seekable read-only file over a memoryview (no copy), for zipfile and tarfile."""
  def __init__(self, mv:memoryview): self.mv, self.pos, self.nbytes = mv, 0, len(mv)
  def readable(self): return True
  def seekable(self): return True
  def tell(self): return self.pos
  def seek(self, offset:int, whence:int=0):
    self.pos = max(0, [offset, self.pos + offset, self.nbytes + offset][whence])
    return self.pos
  def _bytes(self, start:int, end:int): return self.mv[start:end]
  def write(self, b): raise io.UnsupportedOperation(f"{type(self).__name__} is read-only")
  def readinto(self, b):
    n = max(0, min(len(b), self.nbytes - self.pos))
    if n: b[:n] = self._bytes(self.pos, self.pos + n)
    self.pos += n
    return n

class TensorIO(_MVReader):
  """A seekable read-only file over a 1-d uint8 Tensor (tinygrad 0.14's nn.state.TensorIO), for loaders that take a file object. A read
  realizes only the bytes it returns (a slice of the tensor), so a large or lazily loaded tensor is never read whole."""
  def __init__(self, t:Tensor):
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype is not dtypes.uint8:
      raise ValueError(f"TensorIO needs a 1-d uint8 Tensor, got {getattr(t, 'shape', type(t).__name__)} {getattr(t, 'dtype', '')}".rstrip())
    self.tensor, self.pos, self.nbytes = t, 0, t.shape[0]
  def _bytes(self, start:int, end:int): return self.tensor[start:end].data()
  def seek(self, offset:int, whence:int=0):
    self.pos = min(super().seek(offset, whence), self.nbytes)   # as in 0.14, a position past the end is the end
    return self.pos

def _tar_members(src:WeightSource) -> dict[str, memoryview]:
  import tarfile
  try:
    with tarfile.open(fileobj=io.BufferedReader(_MVReader(src.mv)), mode="r:") as tar:
      members = [m for m in tar if m.type in (tarfile.REGTYPE, tarfile.AREGTYPE)]
  except tarfile.TarError as e: raise ValueError(f"{src.name}: not an uncompressed tar archive ({e})") from e
  return {m.name: src.span(m.offset_data, m.offset_data + m.size, f"tar member {m.name!r}") for m in members}

def zip_extract(fn:Tensor|str|pathlib.Path) -> dict[str, Tensor]:
  """The files of a zip archive (stored or deflated) as uint8 tensors, by name."""
  return {k: tensor_from_bytes(v, dtypes.uint8, (len(v),)) for k, v in _zip_members(WeightSource(fn)).items()}

def tar_extract(fn:Tensor|str|pathlib.Path) -> dict[str, Tensor]:
  """The regular files of an (uncompressed) tar archive as uint8 tensors, by name."""
  return {k: tensor_from_bytes(v, dtypes.uint8, (len(v),)) for k, v in _tar_members(WeightSource(fn)).items()}

# ***** torch checkpoints *****

_TORCH_STORAGES = {"HalfStorage": dtypes.float16, "FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64,
                   "BFloat16Storage": dtypes.bfloat16, "ByteStorage": dtypes.uint8, "CharStorage": dtypes.int8, "ShortStorage": dtypes.int16,
                   "IntStorage": dtypes.int32, "LongStorage": dtypes.int64, "BoolStorage": dtypes.bool,
                   "Float8_e4m3fnStorage": dtypes.fp8e4m3, "Float8_e5m2Storage": dtypes.fp8e5m2}

_TORCH_TENSOR_TYPES = {n.replace("Storage", "Tensor") for n in _TORCH_STORAGES}

class _StorageType:
  def __init__(self, name:str, dtype:DType): self.name, self.dtype = name, dtype
  def __repr__(self): return f"torch.{self.name}"

class _Storage:
  """A storage a checkpoint refers to: its dtype, element count, and bytes once they are known (legacy files put them after the pickle)."""
  def __init__(self, key:str, dtype:DType, numel:int, data:memoryview|None):
    self.key, self.dtype, self.numel, self.data = key, dtype, numel, data
    self.tensor: Tensor|None = None

class _Parameter:
  def __setstate__(self, state): self.tensor = state[0]

def _rebuild_tensor_from(src:WeightSource, storage:_Storage, storage_offset:int, size, stride) -> Tensor|None:
  if not isinstance(storage, _Storage): raise ValueError(f"{src.name}: a tensor refers to {storage!r}, not a storage")
  if storage.data is None: return None   # the first pass over a legacy file only learns the storages
  if not all(type(x) is int and x >= 0 for x in (storage_offset, *size, *stride)) or len(size) != len(stride):
    raise ValueError(f"{src.name}: storage {storage.key!r} is viewed with a bad offset/size/stride {storage_offset}, {tuple(size)}, {tuple(stride)}")
  shape, stride = tuple(size), tuple(stride)
  if prod(shape) and storage_offset + sum((s - 1) * st for s, st in zip(shape, stride)) >= storage.numel:
    raise ValueError(f"{src.name}: a tensor of shape {shape} (strides {stride}, offset {storage_offset}) reads past the end of storage "
                     f"{storage.key!r} ({storage.numel} elements)")
  if prod(shape) == 0: return tensor_from_bytes(memoryview(b""), storage.dtype, shape)
  return _strided_view(src, storage, shape, stride, storage_offset)

def _storage_tensor(src:WeightSource, storage:_Storage) -> Tensor:
  """The storage's elements as a 1-d tensor, made once per storage (tensors sharing it share it): a DISK view of the file where its
  bytes are a range of the file, else (a deflated zip member) a copy on the default device."""
  if storage.tensor is None:
    if (off := src.offset_of(storage.data)) is not None: storage.tensor = src.view(off, storage.dtype, (storage.numel,))
    else: storage.tensor = tensor_from_bytes(storage.data[:storage.numel * storage.dtype.itemsize], storage.dtype, (storage.numel,))
  return storage.tensor

def _strided_view(src:WeightSource, storage:_Storage, shape:tuple[int, ...], stride:tuple[int, ...], offset:int) -> Tensor:
  """torch's as_strided(storage, shape, stride, offset) as movement ops over the storage: nothing is materialized, so memory stays
  bounded by the file's storages (a stride-0 view of one element over 100M is an expand of it). A view the movement ops can't say
  (strides that overlap other than by 0: windows) is a lazy gather from it."""
  base = _storage_tensor(src, storage)
  keep = [i for i, (s, st) in enumerate(zip(shape, stride)) if s != 1 and st != 0]
  order = sorted(keep, key=lambda i: -stride[i])
  span = sum((shape[i] - 1) * stride[i] for i in keep) + 1
  x = base[offset:offset+span]
  if order == keep and all(stride[a] == shape[b] * stride[b] for a, b in zip(order, order[1:])) and (not keep or stride[keep[-1]] == 1) \
     and all(stride[i] != 0 or shape[i] == 1 for i in range(len(shape))):
    return x.reshape(shape)   # contiguous: a view of the file's range as it is
  # the movement ops below aren't a contiguous byte range: they run on the default device over a copy of the span
  if is_disk(x.device): x = x.to(Device.DEFAULT)
  if not all(stride[a] % stride[b] == 0 and stride[a] >= shape[b] * stride[b] for a, b in zip(order, order[1:])):
    return _gathered(x, shape, stride)
  if order:
    x = x.pad(((0, shape[order[0]] * stride[order[0]] - span),)).reshape(shape[order[0]], stride[order[0]])
    for b in order[1:]: x = x[..., :shape[b] * stride[b]].reshape(*x.shape[:-1], shape[b], stride[b])
    x = x[..., :1].reshape(x.shape[:-1])
    x = x.permute(*[order.index(i) for i in keep])
  return x.reshape(tuple(shape[i] if i in keep else 1 for i in range(len(shape)))).expand(shape)

def _gathered(x:Tensor, shape:tuple[int, ...], stride:tuple[int, ...]) -> Tensor:
  """x[sum(i_d * stride_d)] at every index (i_0, ...) of shape: a lazy gather (nothing is computed until it is realized)."""
  idx = None
  for d, (s, st) in enumerate(zip(shape, stride)):
    a = Tensor.arange(s, device=x.device).reshape(tuple(s if j == d else 1 for j in range(len(shape)))) * st
    idx = a if idx is None else idx + a
  return x[idx]

class _TorchUnpickler(pickle.Unpickler):
  """Knows only the globals of a tensor state dict; any other global (os.system, builtins.eval, ...) raises before anything runs."""
  def __init__(self, f, src:WeightSource, storages:dict[str, _Storage], storage_data, objects:dict[str, Any]|None=None):
    super().__init__(f)
    self.src, self.storages, self.storage_data, self.objects = src, storages, storage_data, objects
  def find_class(self, module:str, name:str):
    if module == "collections" and name == "OrderedDict": return OrderedDict
    if module == "torch._utils" and name in ("_rebuild_tensor", "_rebuild_tensor_v2"):
      return lambda storage, storage_offset, size, stride, *_: _rebuild_tensor_from(self.src, storage, storage_offset, size, stride)
    if module == "torch._utils" and name == "_rebuild_parameter": return lambda data, *_: data
    if module == "torch.nn.parameter" and name == "Parameter": return _Parameter
    if module == "torch" and name in _TORCH_STORAGES: return _StorageType(name, _TORCH_STORAGES[name])
    # the tar format names each tensor's original type (torch.FloatTensor, ...); only the storage's type matters
    if module == "torch" and name in _TORCH_TENSOR_TYPES: return name
    if module == "torch" and name == "Size": return tuple
    raise pickle.UnpicklingError(f"{self.src.name}: torch_load refuses the global {module}.{name} (only tensor state dicts are loaded)")
  def persistent_load(self, pid):
    if self.objects is not None:   # the tar format: tensors by key, rebuilt before the pickle is read
      if isinstance(pid, (str, int)) and (obj := self.objects.get(str(pid))) is not None: return obj
      raise pickle.UnpicklingError(f"{self.src.name}: unknown persistent id {pid!r}")
    if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" or not isinstance(pid[1], _StorageType):
      raise pickle.UnpicklingError(f"{self.src.name}: unknown persistent id {pid!r}")
    _, st, key, _location, numel = pid[:5]
    key = str(key)
    if type(numel) is not int or numel < 0: raise ValueError(f"{self.src.name}: storage {key!r} has a bad size {numel!r}")
    if (s := self.storages.get(key)) is None:
      self.storages[key] = s = _Storage(key, st.dtype, numel, self.storage_data(key, st.dtype, numel))
    return s

def _load_pickle(f, src:WeightSource, storages:dict[str, _Storage], storage_data, objects:dict[str, Any]|None=None) -> Any:
  try: return _TorchUnpickler(f, src, storages, storage_data, objects).load()
  except (EOFError, pickle.UnpicklingError, struct.error) as e:
    raise (pickle.UnpicklingError if isinstance(e, pickle.UnpicklingError) else ValueError)(f"{src.name}: bad torch pickle ({e})") from e

def _unwrap(obj):
  """Old checkpoints pickle nn.Parameter by its state: the tensor inside it, in the top-level dict."""
  if isinstance(obj, dict):
    for k, v in obj.items():
      if isinstance(v, _Parameter): obj[k] = v.tensor
  return obj

_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c

def torch_load(fn:Tensor|str|pathlib.Path) -> dict[str, Tensor]:
  """The state dict of a torch.save file, tensors realized on the default device: the zip format, the legacy pickle format (torch < 1.6,
  or _use_new_zipfile_serialization=False) and the tar format of torch < 0.4.
  Nothing in the file runs: the unpickler refuses every global but the few a tensor state dict uses (pickle.UnpicklingError)."""
  src = WeightSource(fn)
  if bytes(src.mv[:4]) == b"PK\x03\x04":
    files = _zip_members(src)
    if not (pkls := [k for k in files if k == "data.pkl" or k.endswith("/data.pkl")]): raise ValueError(f"{src.name}: a zip without data.pkl")
    base = pkls[0][:-len("data.pkl")]
    def zip_data(key, dtype, numel):
      if (d := files.get(f"{base}data/{key}")) is None: raise ValueError(f"{src.name}: storage {key!r} is missing from the archive")
      if len(d) < numel * dtype.itemsize:
        raise ValueError(f"{src.name}: storage {key!r} has {len(d)} bytes, {numel} {dtype.name} need {numel*dtype.itemsize}")
      return d
    return _unwrap(_load_pickle(io.BytesIO(files[pkls[0]]), src, {}, zip_data))
  if bytes(src.mv[257:262]) == b"ustar": return _torch_load_tar(src)
  # legacy: pickles of the magic number, protocol version and system info, the object (its storages by key), the storage keys, then
  # each storage's bytes, each after an 8-byte element count
  f = _MVReader(src.mv)
  if _load_pickle(f, src, {}, None) != _LEGACY_MAGIC: raise ValueError(f"{src.name}: not a torch checkpoint (no zip header, no legacy magic number)")
  _load_pickle(f, src, {}, None); _load_pickle(f, src, {}, None)
  obj_pos, storages = f.tell(), {}
  _load_pickle(f, src, storages, lambda *_: None)
  keys, pos, found = _load_pickle(f, src, {}, None), f.tell(), {}
  if not isinstance(keys, list): raise ValueError(f"{src.name}: the storage key list is a {type(keys).__name__}")
  for key in keys:
    if (s := storages.get(str(key))) is None: raise ValueError(f"{src.name}: storage {key!r} is listed but no tensor uses it")
    n = struct.unpack("<q", src.span(pos, pos + 8, f"storage {key!r}'s size"))[0]
    if n != s.numel: raise ValueError(f"{src.name}: storage {key!r} holds {n} elements, the pickle says {s.numel}")
    found[str(key)] = src.span(pos + 8, pos + 8 + n * s.dtype.itemsize, f"storage {key!r}")
    pos += 8 + n * s.dtype.itemsize
  def legacy_data(key, dtype, numel):
    if (d := found.get(key)) is None: raise ValueError(f"{src.name}: storage {key!r} has no data")
    return d
  f.seek(obj_pos)
  return _unwrap(_load_pickle(f, src, {}, legacy_data))

def _torch_load_tar(src:WeightSource) -> Any:
  """The tar format of torch < 0.4: 'storages' (a count, then per storage a pickled (key, location, type), an int64 element count and
  the bytes), 'tensors' (a count, then per tensor a pickled (key, storage key, type), int32 ndim, 4 bytes, ndim int64 sizes, ndim int64
  strides, an int64 storage offset) and 'pickle' (the object, tensors by key as persistent ids)."""
  files = _tar_members(src)
  if missing := [k for k in ("storages", "tensors", "pickle") if k not in files]: raise ValueError(f"{src.name}: a torch tar without {missing}")
  part = WeightSource.__new__(WeightSource)
  part.name, part.mv = f"{src.name} (storages)", files["storages"]
  f, storages = _MVReader(part.mv), {}
  for _ in range(_count(_load_pickle(f, src, {}, None), part, "storages")):
    key, _location, st = _load_pickle(f, src, {}, None)
    if not isinstance(st, _StorageType): raise ValueError(f"{src.name}: storage {key!r} has type {st!r}")
    n = struct.unpack("<q", part.span(f.pos, f.pos + 8, f"storage {key!r}'s size"))[0]
    if n < 0: raise ValueError(f"{src.name}: storage {key!r} has a negative size {n}")
    storages[str(key)] = _Storage(str(key), st.dtype, n, part.span(f.pos + 8, f.pos + 8 + n * st.dtype.itemsize, f"storage {key!r}"))
    f.seek(f.pos + 8 + n * st.dtype.itemsize)
  part.name, part.mv = f"{src.name} (tensors)", files["tensors"]
  f, objects = _MVReader(part.mv), {}
  for _ in range(_count(_load_pickle(f, src, {}, None), part, "tensors")):
    key, storage_id, _ = _load_pickle(f, src, {}, None)
    if (storage := storages.get(str(storage_id))) is None: raise ValueError(f"{src.name}: tensor {key!r} uses unknown storage {storage_id!r}")
    ndim = struct.unpack("<i", part.span(f.pos, f.pos + 4, f"tensor {key!r}'s ndim"))[0]
    if not 0 <= ndim <= 64: raise ValueError(f"{src.name}: tensor {key!r} has {ndim} dimensions")
    raw = part.span(f.pos + 8, f.pos + 8 + 16 * ndim + 8, f"tensor {key!r}'s sizes and strides")
    f.seek(f.pos + 8 + 16 * ndim + 8)
    vals = struct.unpack(f"<{2*ndim+1}q", raw)
    size, stride, offset = vals[:ndim], vals[ndim:2*ndim], vals[-1]
    objects[str(key)] = _rebuild_tensor_from(src, storage, offset, size, stride)
  return _unwrap(_load_pickle(io.BytesIO(files["pickle"]), src, {}, None, objects))

def _count(n, part:WeightSource, what:str) -> int:
  # each entry takes more than a byte: a count beyond the bytes there is a lie
  if type(n) is not int or not 0 <= n <= len(part): raise ValueError(f"{part.name}: bad number of {what} {n!r}")
  return n
