"""Run by test_distributed.py as `mpirun -n 2 python nccl_checks.py OUTDIR` on a host with two GPUs: rank r works on CUDA:r, and the
collectives of its CUDA tensors go through NCCL (the communicator made from rank 0's unique id, sent over MPI). Each rank writes
OUTDIR/rank<r>.json: {check name: "ok" or what failed}."""
import sys
import numpy as np
from tinygrad import Tensor
import tinygrad.distributed as dist
from rank_checks import check, write_results

dist.init(timeout=120)
RANK, SIZE = dist.rank(), dist.world_size()
DEV = f"CUDA:{RANK}"

def data(r:int, dt=np.float32) -> np.ndarray: return (np.random.default_rng(r).standard_normal((5, 3)) * 8).astype(dt)

@check("nccl used")
def _():
  assert dist._uses_nccl(Tensor.empty(2, device=DEV)), "a CUDA tensor should go through NCCL here"

@check("nccl all_reduce")
def _():
  for dt, op, ref in ((np.float32, "sum", np.add), (np.int32, "max", np.maximum), (np.float32, "min", np.minimum)):
    out = dist.all_reduce(Tensor(data(RANK, dt), device=DEV), op)
    assert out.device == DEV and out.dtype == Tensor(data(RANK, dt)).dtype
    np.testing.assert_allclose(out.numpy(), ref.reduce([data(r, dt) for r in range(SIZE)]), rtol=1e-6)

@check("nccl all_reduce bool")
def _():
  x = [np.array([True, False, False]), np.array([False, False, True])]
  np.testing.assert_array_equal(dist.all_reduce(Tensor(x[RANK], device=DEV)).numpy(), x[0] | x[1])

@check("nccl broadcast")
def _():
  np.testing.assert_array_equal(dist.broadcast(Tensor(data(RANK), device=DEV), root=1).numpy(), data(1))

@check("nccl all_gather")
def _():
  for axis in (0, 1):
    np.testing.assert_array_equal(dist.all_gather(Tensor(data(RANK), device=DEV), axis).numpy(), np.concatenate([data(r) for r in range(SIZE)], axis))

@check("nccl lazy input")
def _():
  t = Tensor(data(RANK), device=DEV) * 2 + 1   # not realized: computed on the GPU first
  np.testing.assert_allclose(dist.all_reduce(t).numpy(), sum(data(r) * 2 + 1 for r in range(SIZE)), rtol=1e-6)

write_results(sys.argv[1], RANK, SIZE)
