"""NCCL bindings (runtime/support/nccl.py) and the CUDA device's collective. Without a GPU: the library loads (or its absence says what
to install), its version, a unique id, the error mapping, the dtype and op tables. With a GPU (marker `gpu`): a one-GPU communicator's
collectives on device buffers, and an all-reduce of a tensor sharded over two GPUs against numpy (skipped with fewer than two)."""
import ctypes
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops
from tinygrad.runtime.support import nccl
from tinygrad.runtime.ops_cuda import cuda_usable, device_count

needs_nccl = pytest.mark.skipif(not nccl.available(), reason=f"libnccl.so.2 not found: {nccl.NCCL_EXTRA}")

def test_missing_library_says_what_to_install(monkeypatch):
  monkeypatch.setattr(nccl, "_candidates", lambda: ["/nonexistent/libnccl.so.2"])
  with pytest.raises(RuntimeError, match=r"NCCL could not be loaded .*/nonexistent/libnccl.so.2.*pip install 'tinygrad\[cuda\]'"):
    nccl.library.__wrapped__()

def test_dtype_and_op_tables():
  assert nccl.data_type(dtypes.float32.name) == 7 and nccl.data_type(dtypes.bfloat16.name) == 9 and nccl.data_type(dtypes.half.name) == 6
  assert nccl.data_type(dtypes.int64.name) == 4 and nccl.data_type(dtypes.uint8.name) == 1 and nccl.data_type(dtypes.bool.name) == 1
  with pytest.raises(TypeError, match="NCCL has no data type for short"): nccl.data_type(dtypes.int16.name)
  assert [nccl.red_op(op, "float") for op in ("ADD", "MUL", "MAX", "MIN")] == [0, 1, 2, 3]
  # bool is bytes of 0/1: a sum is a logical or (max), a product a logical and (min)
  assert nccl.red_op("ADD", "bool") == 2 and nccl.red_op("MUL", "bool") == 3
  with pytest.raises(ValueError, match="NCCL has no reduction 'AVG2'"): nccl.red_op("AVG2", "float")

@needs_nccl
def test_version():
  major, minor, patch = nccl.version()
  assert (major, minor) >= (2, 9) and 0 <= patch < 100

@needs_nccl
def test_unique_id_without_a_gpu():
  a, b = nccl.unique_id(), nccl.unique_id()
  assert len(a) == len(b) == nccl.UNIQUE_ID_BYTES and a != b

@needs_nccl
def test_error_mapping():
  nccl.check(0, "ncclNothing")
  with pytest.raises(nccl.NCCLError, match="NCCL: ncclAllReduce of 4 float failed with ncclInvalidArgument: invalid argument") as e:
    nccl.check(4, "ncclAllReduce of 4 float")
  assert (e.value.call, e.value.code) == ("ncclAllReduce of 4 float", 4)
  with pytest.raises(nccl.NCCLError, match="ncclSystemError: unhandled system error"): nccl.check(2, "ncclCommInitAll")
  # a real call that fails (-1 ranks; without a GPU, NCCL's CUDA check fails first), named with NCCL's message
  comm = ctypes.c_void_p()
  with pytest.raises(nccl.NCCLError, match=r"NCCL: ncclCommInitRank failed with (ncclInvalidArgument|ncclUnhandledCudaError): "):
    nccl.check(nccl.library().ncclCommInitRank(ctypes.byref(comm), -1, (ctypes.c_char * 128)(), 0), "ncclCommInitRank")

def test_cuda_advertises_the_collective_only_with_nccl():
  cuda = Device.get_class("CUDA")
  assert cuda.has_all_reduce(("CUDA", "CUDA:1"), dtypes.float32) is nccl.available()
  assert cuda.has_all_reduce(("CUDA", "CUDA:1"), dtypes.int16) is False   # no NCCL type: the scheduler's copies and adds
  with Context(NCCL=0): assert cuda.has_all_reduce(("CUDA", "CUDA:1"), dtypes.float32) is False

# ***** on a GPU *****

needs_gpu = pytest.mark.skipif(not cuda_usable(), reason="no usable NVIDIA GPU (cuda-python, driver and GPU needed)")
needs_two_gpus = pytest.mark.skipif(not (cuda_usable() and device_count() >= 2), reason="needs two NVIDIA GPUs (cuda-python, driver)")

@pytest.mark.gpu
@needs_gpu
@needs_nccl
def test_one_gpu_communicator_on_device_buffers():
  # a world of one rank: each collective is a copy on the device, which checks the calls, pointers and streams end to end
  dev = Device["CUDA"]
  a = np.arange(12, dtype=np.float32)
  src, out = Tensor(a, device="CUDA").realize(), Tensor.empty(12, device="CUDA").realize()
  sb, ob = src._buffer().ensure_allocated(), out._buffer().ensure_allocated()
  dev.all_reduce("ADD", [ob], [sb])
  np.testing.assert_array_equal(out.numpy(), a)
  (comm,) = nccl.Communicator.init_all([0])
  dev.driver()
  comm.broadcast(sb._buf.ptr, ob._buf.ptr, 12, "float", 0, int(dev.stream))
  comm.all_gather(sb._buf.ptr, ob._buf.ptr, 12, "float", int(dev.stream))
  np.testing.assert_array_equal(out.numpy(), a)
  comm.destroy()

@pytest.mark.gpu
@needs_two_gpus
@needs_nccl
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_two_gpu_shard_all_reduce_equals_numpy(dtype):
  a = (np.random.default_rng(0).standard_normal((10, 6)) * 10).astype(dtype)
  t = Tensor(a).shard(("CUDA:0", "CUDA:1"), axis=0)
  items, _ = t.sum(0).schedule()
  assert [si.ast.op for si in items].count(Ops.ALLREDUCE) == 1   # one NCCL collective, no copies and adds
  rtol = 1e-2 if dtype == np.float16 else 1e-5
  np.testing.assert_allclose(t.sum(0).numpy(), a.sum(0, dtype=np.float64).astype(dtype), rtol=rtol)
  np.testing.assert_allclose(t.max(0).numpy(), a.max(0))
  m = Tensor(a).shard(("CUDA:0", "CUDA:1"), axis=1).sum(1)
  for d in ("CUDA:0", "CUDA:1"): np.testing.assert_allclose(m.to(d).numpy(), a.sum(1, dtype=np.float64).astype(dtype), rtol=rtol)
