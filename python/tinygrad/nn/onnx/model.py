"""Reading ONNX files through the `onnx` package: the model itself (with external data, checked), its tensors and types as ours."""
from __future__ import annotations
import pathlib
from typing import Any
import numpy as np
from tinygrad.dtype import DType, dtypes, from_np_dtype
from tinygrad.tensor import Tensor
from tinygrad.device import Device
from tinygrad.helpers import prod
from tinygrad.nn.onnx.registry import MAX_OPSET, Domain

def import_onnx() -> Any:
  try:
    import onnx
  except ImportError as e:
    raise ImportError("tinygrad.nn.onnx reads models with the onnx package: pip install 'tinygrad[onnx]' (or pip install onnx)") from e
  return onnx

def load_model(src:Any) -> Any:
  """An onnx.ModelProto from a path, the file's bytes (bytes or a uint8 Tensor) or a ModelProto, checked by onnx.checker and with its
  external data loaded from beside the file."""
  onnx = import_onnx()
  from google.protobuf.message import DecodeError
  if isinstance(src, onnx.ModelProto): model, where = src, "the model"
  elif isinstance(src, (bytes, bytearray, memoryview, Tensor)):
    data = bytes(src) if not isinstance(src, Tensor) else src.data().tobytes() if src.dtype == dtypes.uint8 else None
    if data is None: raise TypeError(f"an ONNX model given as a Tensor must hold its file's bytes as uint8, got {src.dtype}")
    where = "the model's bytes"
    try: model = onnx.load_from_string(data)
    except (DecodeError, ValueError) as e: raise ValueError(f"{where} are not a valid ONNX model: {e}") from None
  elif isinstance(src, (str, pathlib.Path)):
    path = pathlib.Path(src)
    if not path.is_file(): raise FileNotFoundError(f"ONNX model {str(path)!r} does not exist")
    where = str(path)
    # external data stays in its files: tensor_from_proto maps it from there (a model above 2 GB is read once, when it runs)
    try: model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError) as e: raise ValueError(f"{where} is not a valid ONNX model (truncated or corrupt?): {e}") from None
  else: raise TypeError(f"OnnxRunner takes a path, bytes, a uint8 Tensor or an onnx.ModelProto, got {type(src).__name__}")
  for opset in model.opset_import:
    if opset.domain in ("", Domain.ONNX.value) and opset.version > MAX_OPSET:
      raise NotImplementedError(f"{where} needs ONNX opset {opset.version}, newer than the newest supported ({MAX_OPSET})")
  external = [t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
  if external and not isinstance(src, (str, pathlib.Path)):
    raise ValueError(f"ONNX tensor {external[0]!r} is in an external file: load the model from its path, not from {where}")
  # a file is checked from its path, so its external data files are found beside it
  try: onnx.checker.check_model(str(src) if isinstance(src, (str, pathlib.Path)) else model)
  except onnx.checker.ValidationError as e: raise ValueError(f"{where} is not a valid ONNX model: {e}") from None
  return model

# onnx.TensorProto.DataType names that are not numpy's
_SPECIAL_DTYPES = {"BFLOAT16": dtypes.bfloat16, "FLOAT8E4M3FN": dtypes.fp8e4m3, "FLOAT8E5M2": dtypes.fp8e5m2,
                   "FLOAT8E4M3FNUZ": dtypes.fp8e4m3fnuz, "FLOAT8E5M2FNUZ": dtypes.fp8e5m2fnuz}

def dtype_from_onnx(elem_type:int) -> DType|None:
  """Our dtype of an ONNX element type; None for STRING (string tensors stay numpy arrays on the host)."""
  onnx = import_onnx()
  name = onnx.TensorProto.DataType.Name(elem_type)
  if name == "STRING": return None
  if name in _SPECIAL_DTYPES: return _SPECIAL_DTYPES[name]
  try: return from_np_dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
  except (KeyError, ValueError, TypeError): raise NotImplementedError(f"ONNX element type {name} is not supported") from None

def array_to_value(arr:np.ndarray, dtype:DType|None=None, device:str|None=None) -> Tensor|np.ndarray:
  """A Tensor holding a numpy array's values (numpy's bfloat16/float8 kept bit for bit); strings stay a numpy array."""
  if arr.dtype.kind in "OSU": return np.asarray(arr, dtype=object)
  ml_dtype = {"bfloat16": dtypes.bfloat16, "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2,
              "float8_e4m3fnuz": dtypes.fp8e4m3fnuz, "float8_e5m2fnuz": dtypes.fp8e5m2fnuz}.get(arr.dtype.name)
  if ml_dtype is not None:
    bits = _contiguous(arr).view(np.uint16 if ml_dtype.itemsize == 2 else np.uint8)
    return Tensor(bits, device=device).bitcast(ml_dtype)
  return Tensor(_contiguous(arr), dtype=dtype, device=device)

# np.ascontiguousarray would make a 0-d array 1-d
def _contiguous(arr:np.ndarray) -> np.ndarray: return arr if arr.flags.c_contiguous else arr.copy()

def tensor_from_proto(proto:Any, device:str|None=None, base_dir:pathlib.Path|None=None) -> Tensor|np.ndarray:
  """The value of a TensorProto. Data in an external file (beside the model, in base_dir) is a lazy copy from a view of that file, so
  its bytes are read once, when the value is first used."""
  onnx = import_onnx()
  if proto.data_location == onnx.TensorProto.EXTERNAL: return _external_tensor(proto, device, base_dir)
  arr = onnx.numpy_helper.to_array(proto)
  return array_to_value(arr, dtype_from_onnx(proto.data_type), device)

def _external_tensor(proto:Any, device:str|None, base_dir:pathlib.Path|None) -> Tensor|np.ndarray:
  info = {e.key: e.value for e in proto.external_data}
  if base_dir is None: raise ValueError(f"ONNX tensor {proto.name!r} is in an external file: load the model from its path, not from bytes")
  if "location" not in info: raise ValueError(f"ONNX tensor {proto.name!r} is external but names no file")
  file = (base_dir / info["location"]).resolve()
  if not file.is_relative_to(base_dir.resolve()):
    raise ValueError(f"ONNX tensor {proto.name!r}: external file {info['location']!r} is outside the model's directory")
  if not file.is_file(): raise FileNotFoundError(f"ONNX tensor {proto.name!r}: external data file {str(file)!r} does not exist")
  dtype, shape = dtype_from_onnx(proto.data_type), tuple(proto.dims)
  if dtype is None: raise NotImplementedError(f"ONNX tensor {proto.name!r}: string tensors in external data are not supported")
  offset, nbytes, size = int(info.get("offset", 0)), prod(shape) * dtype.itemsize, file.stat().st_size
  if "length" in info and int(info["length"]) != nbytes:
    raise ValueError(f"ONNX tensor {proto.name!r} of shape {shape} {dtype.name} needs {nbytes} bytes, its external data has {info['length']}")
  if offset + nbytes > size: raise ValueError(f"ONNX tensor {proto.name!r}: external file {str(file)!r} has {size} bytes, needs {offset + nbytes}")
  if nbytes == 0: return Tensor.empty(*shape, dtype=dtype, device=device)
  view = Tensor(file)[offset:offset + nbytes].bitcast(dtype).reshape(shape)
  return view.to(device or Device.DEFAULT)
