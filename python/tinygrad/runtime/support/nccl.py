"""NCCL (NVIDIA's collective communication library) through ctypes: the few calls tinygrad makes, over libnccl.so.2 from the
nvidia-nccl-cu12 wheel (the `nvidia.nccl` package's lib/ folder), else the system's. NCCL is optional (pip install 'tinygrad[cuda]'):
this module imports without it, and the first call says what is missing.

  version()                          NCCL's version as (major, minor, patch)
  unique_id()                        a new ncclUniqueId (128 bytes) for ncclCommInitRank: rank 0 makes it, the others receive it
  Communicator.init_all(devices)     one communicator per GPU of this process (ncclCommInitAll): the in-process all-reduce of CUDA:0, CUDA:1
  Communicator.init_rank(n, id, r)   this process's communicator in a world of n ranks (ncclCommInitRank), for tinygrad.distributed
  all_reduce / broadcast / all_gather  enqueue a collective on a stream; `group()` wraps the calls of one thread for several GPUs

Every ncclResult_t other than ncclSuccess raises NCCLError naming the call and NCCL's own message (ncclGetErrorString, then
ncclGetLastError where it says more). Buffers and streams are raw addresses (CUdeviceptr, CUstream as int): no host copy anywhere.
"""
from __future__ import annotations
import contextlib
import ctypes
import functools
import importlib.util
import pathlib
from typing import Iterator

NCCL_EXTRA = "pip install 'tinygrad[cuda]' (it brings nvidia-nccl-cu12, which ships libnccl.so.2)"
UNIQUE_ID_BYTES = 128

class NCCLError(RuntimeError):
  """An NCCL call returned an error: `call` is its name, `code` the ncclResult_t."""
  def __init__(self, call:str, code:int, message:str):
    super().__init__(f"NCCL: {call} failed with {RESULT_NAMES.get(code, f'ncclResult_t {code}')}: {message}")
    self.call, self.code = call, code

# ncclResult_t (nccl.h)
RESULT_NAMES = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError", 4: "ncclInvalidArgument",
                5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress", 8: "ncclTimeout"}

# ncclRedOp_t for the reduce ops tinygrad all-reduces (ADD, MUL and MAX, the names of tinygrad.uop.Ops), and for distributed's "min"
RED_OPS = {"ADD": 0, "MUL": 1, "MAX": 2, "MIN": 3}

# ncclDataType_t by tinygrad dtype name (DType.name); bool travels as uint8 (red_op makes its sum a max), fp8 from NCCL 2.24 on
DATA_TYPES = {"signed char": 0, "unsigned char": 1, "bool": 1, "int": 2, "unsigned int": 3, "long": 4, "unsigned long": 5,
              "half": 6, "float": 7, "double": 8, "__bf16": 9, "float8_e4m3": 10, "float8_e5m2": 11}

def _candidates() -> list[str]:
  # the wheel's copy first (found without importing anything: `nvidia` is a namespace package), then the dynamic loader's search path
  out = []
  with contextlib.suppress(ImportError, ValueError):
    if (spec := importlib.util.find_spec("nvidia.nccl")) is not None:
      out += [str(p) for d in (spec.submodule_search_locations or []) if (p := pathlib.Path(d) / "lib" / "libnccl.so.2").is_file()]
  return out + ["libnccl.so.2"]

@functools.cache
def library() -> ctypes.CDLL:
  """libnccl.so.2 with the prototypes of the calls used here, or a RuntimeError saying how to install it."""
  errors = []
  for path in _candidates():
    try:
      lib = ctypes.CDLL(path)
      break
    except OSError as e: errors.append(f"{path}: {e}")
  else: raise RuntimeError(f"NCCL could not be loaded ({'; '.join(errors)}): {NCCL_EXTRA}")
  c_int, ptr, size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
  protos = {"ncclGetVersion": [ctypes.POINTER(c_int)], "ncclGetUniqueId": [ctypes.c_char_p],
            "ncclCommInitAll": [ctypes.POINTER(ptr), c_int, ctypes.POINTER(c_int)],
            "ncclCommInitRank": [ctypes.POINTER(ptr), c_int, ctypes.c_char * UNIQUE_ID_BYTES, c_int],
            "ncclCommDestroy": [ptr], "ncclCommAbort": [ptr], "ncclGroupStart": [], "ncclGroupEnd": [],
            "ncclAllReduce": [ptr, ptr, size_t, c_int, c_int, ptr, ptr],
            "ncclBroadcast": [ptr, ptr, size_t, c_int, c_int, ptr, ptr],
            "ncclAllGather": [ptr, ptr, size_t, c_int, ptr, ptr]}
  for name, args in protos.items():
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = args, c_int
  lib.ncclGetErrorString.argtypes, lib.ncclGetErrorString.restype = [c_int], ctypes.c_char_p
  lib.ncclGetLastError.argtypes, lib.ncclGetLastError.restype = [ptr], ctypes.c_char_p
  return lib

def available() -> bool:
  """Whether libnccl.so.2 loads (says nothing about GPUs)."""
  try: library()
  except RuntimeError: return False
  return True

def error_message(code:int) -> str:
  """NCCL's text for an ncclResult_t, and its last error's details where it has some."""
  lib = library()
  msg = (lib.ncclGetErrorString(code) or b"").decode(errors="replace")
  last = (lib.ncclGetLastError(None) or b"").decode(errors="replace")
  return f"{msg} ({last})" if last else msg

def check(code:int, call:str) -> None:
  """Raises NCCLError unless code is ncclSuccess."""
  if code != 0: raise NCCLError(call, code, error_message(code))

def version() -> tuple[int, int, int]:
  v = ctypes.c_int()
  check(library().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
  # NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z from 2.9 on
  return v.value // 10000, v.value // 100 % 100, v.value % 100

def unique_id() -> bytes:
  """A new ncclUniqueId (it opens NCCL's bootstrap socket on this host: rank 0 of a world makes it and sends it to the others)."""
  buf = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
  check(library().ncclGetUniqueId(buf), "ncclGetUniqueId")
  return buf.raw

def data_type(dtype_name:str) -> int:
  """The ncclDataType_t of a tinygrad dtype (its C name, DType.name), or a TypeError naming the dtype."""
  if (dt := DATA_TYPES.get(dtype_name)) is None: raise TypeError(f"NCCL has no data type for {dtype_name} (supported: {', '.join(DATA_TYPES)})")
  return dt

def supports(dtype_name:str) -> bool:
  """Whether this NCCL has a data type for a tinygrad dtype (fp8 from 2.24 on)."""
  return dtype_name in DATA_TYPES and (DATA_TYPES[dtype_name] < 10 or version() >= (2, 24, 0))

def red_op(op:str, dtype_name:str) -> int:
  """The ncclRedOp_t of a reduce op name; on bool (0/1 bytes) a sum is a logical or (max) and a product a logical and (min)."""
  if dtype_name == "bool": op = {"ADD": "MAX", "MUL": "MIN"}.get(op.upper(), op)
  if (ret := RED_OPS.get(op.upper())) is None: raise ValueError(f"NCCL has no reduction {op!r} (supported: {', '.join(RED_OPS)})")
  return ret

@contextlib.contextmanager
def group() -> Iterator[None]:
  """ncclGroupStart/ncclGroupEnd around the calls of one thread that drives several GPUs: NCCL launches them together."""
  lib = library()
  check(lib.ncclGroupStart(), "ncclGroupStart")
  try: yield
  finally: check(lib.ncclGroupEnd(), "ncclGroupEnd")

class Communicator:
  """One rank of an NCCL communicator (ncclComm_t), on one GPU."""
  def __init__(self, handle:ctypes.c_void_p, rank:int, size:int): self.handle, self.rank, self.size = handle, rank, size
  def __repr__(self): return f"<NCCL communicator rank {self.rank} of {self.size}>"
  @staticmethod
  def init_all(device_ids:list[int]) -> list[Communicator]:
    """A communicator for each of this process's GPUs device_ids (CUDA ordinals), rank i on device_ids[i]."""
    n = len(device_ids)
    comms = (ctypes.c_void_p * n)()
    check(library().ncclCommInitAll(comms, n, (ctypes.c_int * n)(*device_ids)), f"ncclCommInitAll over GPUs {device_ids}")
    return [Communicator(ctypes.c_void_p(comms[i]), i, n) for i in range(n)]
  @staticmethod
  def init_rank(size:int, uid:bytes, rank:int) -> Communicator:
    """This process's rank of a world of `size` ranks that share uid (unique_id() on one of them); the current CUDA context's GPU is used."""
    if len(uid) != UNIQUE_ID_BYTES: raise ValueError(f"an ncclUniqueId is {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
    comm = ctypes.c_void_p()
    check(library().ncclCommInitRank(ctypes.byref(comm), size, (ctypes.c_char * UNIQUE_ID_BYTES).from_buffer_copy(uid), rank),
          f"ncclCommInitRank (rank {rank} of {size})")
    return Communicator(comm, rank, size)
  def all_reduce(self, src:int, dst:int, count:int, dtype_name:str, op:str, stream:int) -> None:
    check(library().ncclAllReduce(src, dst, count, data_type(dtype_name), red_op(op, dtype_name), self.handle, stream),
          f"ncclAllReduce of {count} {dtype_name} (rank {self.rank} of {self.size})")
  def broadcast(self, src:int, dst:int, count:int, dtype_name:str, root:int, stream:int) -> None:
    check(library().ncclBroadcast(src, dst, count, data_type(dtype_name), root, self.handle, stream),
          f"ncclBroadcast of {count} {dtype_name} from rank {root} (rank {self.rank} of {self.size})")
  def all_gather(self, src:int, dst:int, count:int, dtype_name:str, stream:int) -> None:
    check(library().ncclAllGather(src, dst, count, data_type(dtype_name), self.handle, stream),
          f"ncclAllGather of {count} {dtype_name} per rank (rank {self.rank} of {self.size})")
  def destroy(self) -> None:
    if self.handle: check(library().ncclCommDestroy(self.handle), "ncclCommDestroy")
    self.handle = ctypes.c_void_p()
