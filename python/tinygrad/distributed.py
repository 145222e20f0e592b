"""tinygrad.distributed: collectives across processes (and hosts) through MPI, with mpi4py.

Run a script with `mpirun -n N python script.py` (Open MPI as root: add --allow-run-as-root; more ranks than cores: --oversubscribe);
`launch_command(n, argv)` spells that command. Each rank calls init(), then the collectives below in the same order; each takes a
Tensor and returns a new Tensor on the caller's device with the caller's dtype. Outside mpirun (or without mpi4py) the world is
one process, rank 0, and every collective returns its input's value.

Tensors on CUDA devices move through NCCL where it loads (runtime/support/nccl.py; NCCL=0 turns it off): one communicator per GPU,
made on first use from an ncclUniqueId that rank 0 makes and MPI broadcasts (ncclCommInitRank), and the collectives read and write the
device buffers on the device's stream, with no host copy (all_gather of ranks with different sizes, and dtypes NCCL has no type for,
take the host path below). Other tensors' data moves through mpi4py's buffer interface (numpy views of the realized bytes; nothing is
pickled). float32/64, ints and bool
reduce inside MPI; float16, bfloat16 and fp8, which MPI has no arithmetic for, are gathered as raw bytes and reduced on the caller's
device in the rank order, so every rank gets the same bits.

Every collective first exchanges a small header (call number, collective, dtype, shape), so ranks that disagree raise a ValueError
naming each rank's shape and dtype, on every rank, instead of reducing garbage or waiting forever. Failures don't hang:
  - an uncaught exception on a rank prints the rank and calls MPI_Abort, which ends every rank of the job (mpirun exits non-zero);
  - with a timeout (init(timeout=seconds) or TINYGRAD_MPI_TIMEOUT), a collective polls its non-blocking request and, past the
    deadline, raises DistributedTimeoutError naming the rank and the call; the world is then unusable and the process aborts the job
    at exit (a rank that is in another collective, or never arrives, can't be waited for or cancelled).
"""
from __future__ import annotations
import atexit
import contextlib
import os
import sys
import time
import numpy as np
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import NCCL
from tinygrad.tensor import Tensor

REDUCE_OPS = ("sum", "max", "min")
# launchers that set these start every rank with them: Open MPI, PMIx, MPICH/Hydra and Slurm's PMI
_LAUNCHER_ENV = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK")
_MAX_DIMS = 16
_COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "barrier")

class DistributedTimeoutError(TimeoutError):
  """A collective did not complete on every rank within the timeout."""

class _World:
  def __init__(self, comm, timeout:float|None):
    self.comm, self.timeout, self.calls, self.broken = comm, timeout, 0, False
    self.nccl: dict[str, object] = {}   # device -> this rank's NCCL communicator on it
    self.rank, self.size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())

_world: _World|None = None

def _parse_timeout(timeout:float|None) -> float|None:
  if timeout is None and (env := os.environ.get("TINYGRAD_MPI_TIMEOUT", "")) != "":
    try: timeout = float(env)
    except ValueError: raise ValueError(f"TINYGRAD_MPI_TIMEOUT must be a number of seconds, got {env!r}") from None
  if timeout is not None and not timeout > 0: raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
  return timeout

def under_launcher() -> bool:
  """True when this process was started by mpirun/mpiexec/srun (one of their rank variables is set)."""
  return any(k in os.environ for k in _LAUNCHER_ENV)

def init(timeout:float|None=None) -> None:
  """Joins the MPI world when started by an MPI launcher (rank and size from MPI), else makes a world of one. timeout (seconds, or
  TINYGRAD_MPI_TIMEOUT; None waits forever) bounds how long each collective waits for the other ranks. Calling it again only changes
  the timeout."""
  global _world
  timeout = _parse_timeout(timeout)
  if _world is not None:
    _world.timeout = timeout
    return
  comm = None
  if under_launcher():
    try: from mpi4py import MPI
    except ImportError as e:
      raise RuntimeError(f"started by an MPI launcher but mpi4py can't be imported ({e}): pip install 'tinygrad[mpi]' and Open MPI") from e
    comm = MPI.COMM_WORLD
  _world = _World(comm, timeout)
  if comm is not None and comm.Get_size() > 1: _install_abort_hooks(_world)

def _install_abort_hooks(world:_World) -> None:
  previous = sys.excepthook
  def abort_on_uncaught(tp, value, tb):
    previous(tp, value, tb)
    sys.stderr.write(f"tinygrad.distributed: rank {world.rank} of {world.size} raised {tp.__name__}: {value}; aborting the other ranks\n")
    sys.stderr.flush()
    world.comm.Abort(1)
  sys.excepthook = abort_on_uncaught
  # after a timeout requests are still pending, and MPI_Finalize (mpi4py's, at exit) would wait for them forever; atexit runs this
  # before mpi4py's finalizer, which was registered earlier
  atexit.register(lambda: world.comm.Abort(1) if world.broken else None)

def _get_world() -> _World:
  if _world is None: init()
  assert _world is not None
  return _world

def rank() -> int:
  """This process's rank, 0 .. world_size()-1."""
  return _get_world().rank

def world_size() -> int:
  """The number of processes in the world (1 outside an MPI launcher)."""
  return _get_world().size

# ***** moving bytes *****

def _mpi_type(dt:DType):
  """The MPI datatype MPI can reduce dt in, or None where MPI has no arithmetic for it (float16, bfloat16, fp8)."""
  from mpi4py import MPI
  return {dtypes.bool: MPI.C_BOOL, dtypes.int8: MPI.INT8_T, dtypes.uint8: MPI.UINT8_T, dtypes.int16: MPI.INT16_T,
          dtypes.uint16: MPI.UINT16_T, dtypes.int32: MPI.INT32_T, dtypes.uint32: MPI.UINT32_T, dtypes.int64: MPI.INT64_T,
          dtypes.uint64: MPI.UINT64_T, dtypes.float32: MPI.FLOAT, dtypes.float64: MPI.DOUBLE}.get(dt)

def _raw_dtype(dt:DType) -> np.dtype:
  """The numpy dtype a tensor's bytes are viewed as: its own, or an unsigned int of its size where numpy has none."""
  return np.dtype(dt.fmt or f"u{dt.itemsize}")   # bfloat16 and fp8 have no struct format: their bits as uint16/uint8

def _host_array(t:Tensor) -> np.ndarray:
  """t's realized bytes as a flat, contiguous numpy array (a view of the buffer where the device's memory is the host's)."""
  if t.numel() == 0: return np.empty(0, _raw_dtype(t.dtype))
  return np.frombuffer(t._buffer().as_buffer(allow_zero_copy=True), dtype=_raw_dtype(t.dtype))

def _to_tensor(arr:np.ndarray, shape:tuple[int, ...], like:Tensor) -> Tensor:
  """arr (raw bytes of like.dtype) as a Tensor of shape on like's device with like's dtype."""
  if like.dtype.fmt is not None: return Tensor(arr.reshape(shape), device=like.device, dtype=like.dtype)
  return Tensor(arr.reshape(shape), device=like.device).bitcast(like.dtype)

def _receiver(like:Tensor) -> tuple[Tensor|None, np.ndarray]:
  """Where a collective receives a value of like's shape, dtype and device: (a new tensor, a numpy view of its memory) on a device whose
  memory is the host's, so the bytes land in place; else (None, a numpy array to copy in with _to_tensor)."""
  if like.numel() and like.dtype.fmt is not None:
    out = Tensor.empty(*like.shape, dtype=like.dtype, device=like.device)
    with contextlib.suppress(RuntimeError): return out, np.frombuffer(out._buffer().as_buffer(force_zero_copy=True), dtype=_raw_dtype(like.dtype))
  return None, np.empty(like.numel(), _raw_dtype(like.dtype))

def _wait(world:_World, req, what:str) -> None:
  if world.timeout is None: return req.Wait()
  deadline, pause = time.monotonic() + world.timeout, 1e-5
  while not req.Test():
    if time.monotonic() > deadline:
      world.broken = True
      raise DistributedTimeoutError(f"rank {world.rank} of {world.size}: {what} did not complete within {world.timeout:g}s; the other ranks "
                                    "raised, exited or are in another collective (the job is aborted at exit)")
    time.sleep(pause)
    pause = min(pause * 2, 1e-3)   # a short sleep: two ranks polling on two cores would otherwise starve each other

def _check_tensor(name:str, t) -> Tensor:
  if not isinstance(t, Tensor): raise TypeError(f"{name} takes a Tensor, got {type(t).__name__}")
  if any(not isinstance(s, int) for s in t.shape): raise ValueError(f"{name} needs a Tensor of int shape, got {t.shape}")
  if t.ndim > _MAX_DIMS: raise ValueError(f"{name} supports up to {_MAX_DIMS} dims, got shape {t.shape}")
  if t.dtype in dtypes.weaks: t = t.cast(dtypes.default_float if t.dtype == dtypes.weakfloat else dtypes.default_int)
  return t

def _exchange_headers(world:_World, name:str, t:Tensor|None, arg:int) -> np.ndarray:
  """Every rank's (call number, collective, arg, dtype, ndim, shape..., whether its data goes through NCCL) as rows; raises where the
  ranks disagree on the call or on the transport (a CUDA tensor on one rank meeting a CPU tensor on another)."""
  from mpi4py import MPI
  world.calls += 1
  hdr = np.full(6 + _MAX_DIMS, -1, np.int64)
  hdr[:3] = world.calls, _COLLECTIVES.index(name), arg
  if t is not None: hdr[3], hdr[4], hdr[5:5 + t.ndim] = dtypes.all.index(t.dtype), t.ndim, t.shape
  hdr[-1] = t is not None and _uses_nccl(t)
  rows = np.empty((world.size, hdr.size), np.int64)
  _wait(world, world.comm.Iallgather([hdr, MPI.INT64_T], [rows, MPI.INT64_T]), f"{name} (call {world.calls})")
  if (rows[:, :3] != hdr[:3]).any():
    calls = ", ".join(f"rank {r}: {_COLLECTIVES[c]}(arg {a}) as call {n}" for r, (n, c, a) in enumerate(rows[:, :3].tolist()))
    raise RuntimeError(f"rank {world.rank}: the ranks are in different collectives: {calls}")
  if (rows[:, -1] != hdr[-1]).any():
    how = ", ".join(f"rank {r}: {'NCCL (a CUDA tensor)' if n else 'MPI'}" for r, n in enumerate(rows[:, -1].tolist()))
    raise RuntimeError(f"rank {world.rank}: {name} (call {world.calls}) has the ranks' data on different transports: {how}")
  return rows

def _describe(rows:np.ndarray) -> str:
  return ", ".join(f"rank {r}: {tuple(row[5:5 + row[4]].tolist())} {dtypes.all[row[3]].name}" for r, row in enumerate(rows))

def _shape_of(row:np.ndarray) -> tuple[int, ...]: return tuple(int(x) for x in row[5:5 + row[4]])

# ***** NCCL for CUDA tensors *****

_NCCL_OPS = {"sum": "ADD", "max": "MAX", "min": "MIN"}

def _uses_nccl(t:Tensor) -> bool:
  if not (NCCL and isinstance(t.device, str) and t.device.split(":")[0] == "CUDA"): return False
  from tinygrad.runtime.support import nccl
  return nccl.available() and nccl.supports(t.dtype.name)

def _nccl_comm(world:_World, device:str):
  """This rank's NCCL communicator on device: rank 0's ncclUniqueId reaches every rank through MPI, then ncclCommInitRank (which
  waits for every rank)."""
  if (comm := world.nccl.get(device)) is not None: return comm
  from mpi4py import MPI
  from tinygrad.device import Device
  from tinygrad.runtime.support import nccl
  uid = np.frombuffer(nccl.unique_id(), np.uint8).copy() if world.rank == 0 else np.empty(nccl.UNIQUE_ID_BYTES, np.uint8)
  _wait(world, world.comm.Ibcast([uid, MPI.BYTE], root=0), f"the NCCL unique id for {device}")
  Device[device].driver()   # NCCL takes the GPU of the current CUDA context
  comm = world.nccl[device] = nccl.Communicator.init_rank(world.size, uid.tobytes(), world.rank)
  return comm

def _nccl_call(world:_World, t:Tensor, out_shape:tuple[int, ...], call) -> Tensor:
  """call(comm, src address, dst address, stream) on t's realized buffer and a new output buffer of out_shape, on t's device's stream."""
  from tinygrad.device import Device
  comm, src = _nccl_comm(world, t.device), t._buffer().ensure_allocated()
  out = Tensor.empty(*out_shape, dtype=t.dtype, device=t.device)
  dst = out._buffer().ensure_allocated()
  if dst.size: call(comm, src._buf.ptr, dst._buf.ptr, int(Device[t.device].stream))
  return out

# ***** the collectives *****

def all_reduce(t:Tensor, op:str="sum") -> Tensor:
  """The elementwise sum, max or min of t over all ranks (every rank passes the same shape and dtype), on every rank. For bool, sum
  and max are a logical or and min a logical and."""
  t = _check_tensor("all_reduce", t)
  if op not in REDUCE_OPS: raise ValueError(f"all_reduce op must be one of {REDUCE_OPS}, got {op!r}")
  world = _get_world()
  if world.size == 1: return t.contiguous().clone()
  rows = _exchange_headers(world, "all_reduce", t, REDUCE_OPS.index(op))
  if (rows[:, 3:] != rows[0, 3:]).any(): raise ValueError(f"all_reduce needs the same shape and dtype on every rank, got {_describe(rows)}")
  if _uses_nccl(t):
    return _nccl_call(world, t, t.shape, lambda comm, src, dst, stream: comm.all_reduce(src, dst, t.numel(), t.dtype.name, _NCCL_OPS[op], stream))
  from mpi4py import MPI
  send = _host_array(t)
  if (mpi_type := _mpi_type(t.dtype)) is None:
    # no MPI arithmetic for this dtype: gather every rank's bytes and reduce here, in rank order, so every rank computes the same bits
    parts = np.empty((world.size, send.size), send.dtype)
    _wait(world, world.comm.Iallgather([send, MPI.BYTE], [parts, MPI.BYTE]), f"all_reduce (call {world.calls})")
    stacked = _to_tensor(parts, (world.size,) + t.shape, t)
    acc = stacked[0]
    for r in range(1, world.size): acc = acc + stacked[r] if op == "sum" else acc.maximum(stacked[r]) if op == "max" else acc.minimum(stacked[r])
    return acc.contiguous()
  mpi_op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN} if t.dtype != dtypes.bool else {"sum": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND}
  ret, out = _receiver(t)
  _wait(world, world.comm.Iallreduce([send, mpi_type], [out, mpi_type], op=mpi_op[op]), f"all_reduce (call {world.calls})")
  return ret if ret is not None else _to_tensor(out, t.shape, t)

def broadcast(t:Tensor, root:int=0) -> Tensor:
  """Rank root's t on every rank (every rank passes a tensor of the same shape and dtype: its values are replaced)."""
  t = _check_tensor("broadcast", t)
  world = _get_world()
  if not isinstance(root, int) or not 0 <= root < world.size: raise ValueError(f"broadcast root must be a rank in [0, {world.size}), got {root!r}")
  if world.size == 1: return t.contiguous().clone()
  rows = _exchange_headers(world, "broadcast", t, root)
  if (rows[:, 3:] != rows[0, 3:]).any(): raise ValueError(f"broadcast needs the same shape and dtype on every rank, got {_describe(rows)}")
  if _uses_nccl(t):
    return _nccl_call(world, t, t.shape, lambda comm, src, dst, stream: comm.broadcast(src, dst, t.numel(), t.dtype.name, root, stream))
  from mpi4py import MPI
  buf = _host_array(t).copy() if world.rank == root else np.empty(t.numel(), _raw_dtype(t.dtype))
  _wait(world, world.comm.Ibcast([buf, MPI.BYTE], root=root), f"broadcast (call {world.calls})")
  return _to_tensor(buf, t.shape, t)

def all_gather(t:Tensor, axis:int=0) -> Tensor:
  """Every rank's t concatenated along axis in rank order, on every rank. The ranks' tensors may differ in size along axis only."""
  t = _check_tensor("all_gather", t)
  if t.ndim == 0: raise ValueError("all_gather needs a tensor of at least one dim to concatenate along, got a scalar")
  if not isinstance(axis, int) or not -t.ndim <= axis < t.ndim: raise ValueError(f"all_gather axis {axis!r} is out of range for shape {t.shape}")
  axis = axis % t.ndim
  world = _get_world()
  if world.size == 1: return t.contiguous().clone()
  rows = _exchange_headers(world, "all_gather", t, axis)
  others = [c for c in range(3, 5 + _MAX_DIMS) if c != 5 + axis]
  if (rows[:, others] != rows[0, others]).any():
    raise ValueError(f"all_gather along axis {axis} needs the same dtype and the same sizes on the other axes on every rank, got {_describe(rows)}")
  shapes = [_shape_of(row) for row in rows]
  if _uses_nccl(t) and all(sh == t.shape for sh in shapes):
    # ncclAllGather puts the ranks' buffers one after another: (ranks, *shape), then joined along axis
    out = _nccl_call(world, t, (world.size,) + t.shape, lambda comm, src, dst, stream: comm.all_gather(src, dst, t.numel(), t.dtype.name, stream))
    return out[0].cat(*[out[r] for r in range(1, world.size)], dim=axis).contiguous()
  from mpi4py import MPI
  send = _host_array(t)
  counts = [int(np.prod(s)) * send.itemsize for s in shapes]
  out = np.empty(sum(counts) // send.itemsize, send.dtype)
  displs = np.cumsum([0] + counts[:-1]).tolist()
  _wait(world, world.comm.Iallgatherv([send, MPI.BYTE], [out, counts, displs, MPI.BYTE]), f"all_gather (call {world.calls})")
  parts, start = [], 0
  for s, c in zip(shapes, counts):
    parts.append(_to_tensor(out[start:start + c // send.itemsize], s, t))
    start += c // send.itemsize
  return parts[0].cat(*parts[1:], dim=axis).contiguous()

def barrier() -> None:
  """Returns once every rank has called barrier()."""
  world = _get_world()
  if world.size == 1: return
  _exchange_headers(world, "barrier", None, 0)   # an all-gather: no rank leaves it before every rank has entered it

# ***** launching *****

def launch_command(n:int, argv:list[str], python:str|None=None) -> list[str]:
  """The mpirun command that runs `python argv...` as n ranks on this host: --oversubscribe (more ranks than cores is allowed), and
  Open MPI's consent to run as root where this process is root."""
  if not isinstance(n, int) or n < 1: raise ValueError(f"launch_command needs n >= 1 ranks, got {n!r}")
  root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
  return ["mpirun", "-n", str(n), "--oversubscribe", *root, python or sys.executable, *argv]
