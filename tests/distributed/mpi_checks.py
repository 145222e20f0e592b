"""Run by test_distributed.py as `mpirun -n 2 python mpi_checks.py OUTDIR`: every check of the collectives and of data-parallel
training in one launch (an MPI job costs seconds to start). Each rank writes OUTDIR/rank<r>.json: {check name: "ok" or what failed}."""
import sys
import numpy as np
from tinygrad import Tensor, dtypes, nn
from tinygrad.helpers import Context
from tinygrad.dtype import truncate
from tinygrad.device import Device
from tinygrad.nn.state import get_parameters
import tinygrad.distributed as dist
from rank_checks import check, write_results

dist.init(timeout=120)
RANK, SIZE = dist.rank(), dist.world_size()

def np_view(dt):
  return np.dtype(dt.fmt) if dt.fmt is not None else np.float32

def rank_data(dt, r, shape):
  """Rank r's input for dtype dt: every rank can rebuild every other rank's, to compute the expected result with numpy."""
  rng = np.random.default_rng(1000 * r + dtypes.all.index(dt))
  if dt == dtypes.bool: return rng.integers(0, 2, shape).astype(bool)
  if dtypes.is_int(dt): return rng.integers(0, 50, shape).astype(np.dtype(dt.fmt))
  return as_values_of(dt, rng.uniform(-4, 4, shape).astype(np.float32).astype(np_view(dt)))

def as_values_of(dt, a:np.ndarray) -> np.ndarray:
  """fp8 data (exchanged as float32) rounded to values of dt, as a Tensor of dt holds them."""
  return np.vectorize(truncate[dt], otypes=[np.float32])(a) if dt in dtypes.fp8s else a

def expect_equal(got:Tensor, want:np.ndarray, dt, what:str):
  assert got.dtype == dt and got.device == Device.DEFAULT, f"{what}: got {got.dtype} on {got.device}, want {dt} on {Device.DEFAULT}"
  g = got.numpy()
  assert g.shape == want.shape, f"{what}: shape {g.shape}, want {want.shape}"
  if dt in (dtypes.bfloat16,) + dtypes.fp8s: np.testing.assert_allclose(g, want.astype(np.float32), rtol=2e-2, err_msg=what)
  elif dtypes.is_float(dt): np.testing.assert_allclose(g, want, rtol=1e-3 if dt == dtypes.float16 else 1e-6, err_msg=what)
  else: np.testing.assert_array_equal(g, want, err_msg=what)

supported = Device[Device.DEFAULT].renderer.supported_dtypes()
for dt in [d for d in dtypes.all if d in supported]:
  @check(f"collectives {dt.name}")
  def _collectives(dt=dt):
    shape = (3, 5)
    mine, all_ranks = Tensor(rank_data(dt, RANK, shape), dtype=dt), [rank_data(dt, r, shape) for r in range(SIZE)]
    if dt == dtypes.bool:
      any_true = np.logical_or.reduce(all_ranks)
      want = {"sum": any_true, "max": any_true, "min": np.logical_and.reduce(all_ranks)}
    else:
      acc = np.float32 if dt in (dtypes.bfloat16,) + dtypes.fp8s else None
      want = {"sum": as_values_of(dt, np.sum(all_ranks, axis=0, dtype=acc).astype(all_ranks[0].dtype)), "max": np.max(all_ranks, axis=0),
              "min": np.min(all_ranks, axis=0)}
    for op, w in want.items(): expect_equal(dist.all_reduce(mine, op), w, dt, f"all_reduce {op}")
    expect_equal(dist.broadcast(mine, root=SIZE - 1), all_ranks[-1], dt, "broadcast")
    expect_equal(dist.all_gather(mine, axis=1), np.concatenate(all_ranks, axis=1), dt, "all_gather axis 1")
    # uneven along the gathered axis: rank r has r+1 rows
    uneven = [rank_data(dt, r, (r + 1, 2)) for r in range(SIZE)]
    expect_equal(dist.all_gather(Tensor(uneven[RANK], dtype=dt), axis=0), np.concatenate(uneven, axis=0), dt, "all_gather uneven")

@check("lazy and non-contiguous inputs")
def _lazy():
  t = (Tensor.arange(12).reshape(3, 4).float() * (RANK + 1)).T[1:]
  want = sum((np.arange(12).reshape(3, 4).astype(np.float32) * (r + 1)).T[1:] for r in range(SIZE))
  expect_equal(dist.all_reduce(t), want, dtypes.float32, "all_reduce of a transposed slice")

@check("mismatched shapes raise on every rank")
def _mismatch():
  try: dist.all_reduce(Tensor.ones(2 + RANK))
  except ValueError as e:
    assert all(f"rank {r}: ({2 + r},)" in str(e) for r in range(SIZE)), str(e)
  else: raise AssertionError("no error for shapes that differ between ranks")
  try: dist.all_gather(Tensor.ones(2, 2, dtype=dtypes.int32 if RANK else dtypes.float32))
  except ValueError as e: assert "int" in str(e) and "float" in str(e), str(e)
  else: raise AssertionError("no error for dtypes that differ between ranks")
  # a CUDA tensor (NCCL) on one rank meeting a host tensor on another: every rank raises before any data moves (NCCL pretended on rank 1)
  uses_nccl = dist._uses_nccl
  dist._uses_nccl = lambda t: RANK == 1
  try: dist.broadcast(Tensor.ones(3))
  except RuntimeError as e: assert "rank 0: MPI, rank 1: NCCL (a CUDA tensor)" in str(e), str(e)
  else: raise AssertionError("no error for transports that differ between ranks")
  finally: dist._uses_nccl = uses_nccl
  dist.barrier()   # the world is still usable after those errors
  expect_equal(dist.all_reduce(Tensor([1.0])), np.array([float(SIZE)], np.float32), dtypes.float32, "all_reduce after an error")

class MLP:
  def __init__(self): self.l1, self.l2 = nn.Linear(10, 16), nn.Linear(16, 3)
  def __call__(self, x): return self.l2(self.l1(x).relu())

class CNN:
  def __init__(self): self.c1, self.l1 = nn.Conv2d(1, 4, 3), nn.Linear(4 * 3 * 3, 3)
  def __call__(self, x): return self.l1(self.c1(x).relu().max_pool2d(2).flatten(1))

def train(model_cls, make_opt, X, Y, data_parallel:bool, steps=3):
  Tensor.manual_seed(RANK if data_parallel else 0)   # different seeds per rank: the broadcast below must make the weights agree
  model = model_cls()
  params = get_parameters(model)
  if data_parallel:
    for p in params: p.assign(dist.broadcast(p, root=0)).realize()
  opt, losses = make_opt(params), []
  n = X.shape[0] // SIZE
  x, y = (Tensor(X[RANK * n:(RANK + 1) * n]), Tensor(Y[RANK * n:(RANK + 1) * n])) if data_parallel else (Tensor(X), Tensor(Y))
  with Context(TRAINING=1):
    for _ in range(steps):
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y)
      loss.backward()
      if data_parallel:
        for p in params: p.grad = dist.all_reduce(p.grad) / SIZE
        loss = dist.all_reduce(loss) / SIZE
      # the loss before the step in both runs (all_reduce realizes it; a loss left lazy past opt.step() is read as in tinygrad 0.14)
      loss.realize()
      opt.step()
      losses.append(loss.item())
  return losses, [p.numpy() for p in params]

def data_parallel_matches(model_cls, make_opt, X, Y):
  ref_losses, ref_weights = train(model_cls, make_opt, X, Y, data_parallel=False)
  Tensor.manual_seed(0)   # rank 0's weights are broadcast: seed 0 on rank 0, as the reference
  dp_losses, dp_weights = train(model_cls, make_opt, X, Y, data_parallel=True)
  np.testing.assert_allclose(dp_losses, ref_losses, rtol=1e-5, atol=1e-6)
  for a, b in zip(dp_weights, ref_weights): np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

rng = np.random.default_rng(7)
@check("data-parallel MLP with SGD")
def _mlp():
  data_parallel_matches(MLP, lambda ps: nn.optim.SGD(ps, lr=0.1, momentum=0.9), rng.standard_normal((8, 10)).astype(np.float32),
                        rng.integers(0, 3, 8).astype(np.int32))

@check("data-parallel CNN with Adam")
def _cnn():
  data_parallel_matches(CNN, lambda ps: nn.optim.Adam(ps, lr=0.01), rng.standard_normal((8, 1, 8, 8)).astype(np.float32),
                        rng.integers(0, 3, 8).astype(np.int32))

write_results(sys.argv[1], RANK, SIZE)
