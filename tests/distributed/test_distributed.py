"""tinygrad.distributed: a world of one in this process, and the collectives across `mpirun -n 2` (marker `mpi`: skipped without
mpirun and mpi4py). The MPI checks run in one launch of mpi_checks.py (an MPI job takes seconds to start); the failure modes in one
launch each."""
import json
import os
import pathlib
import subprocess
import time
import numpy as np
import pytest
import tinygrad
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
import tinygrad.distributed as dist

HERE = pathlib.Path(__file__).parent

def mpirun(script:str, *args:str, timeout:float, tmp_path:pathlib.Path) -> tuple[subprocess.CompletedProcess, float]:
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(tinygrad.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
         "CACHEDB": str(tmp_path / "cache.db")}
  for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "TINYGRAD_MPI_TIMEOUT"): env.pop(k, None)
  start = time.monotonic()
  proc = subprocess.run(dist.launch_command(2, [str(HERE / script), *args]), env=env, capture_output=True, text=True, timeout=timeout)
  return proc, time.monotonic() - start

# ***** a world of one (no launcher) *****

@pytest.mark.cpu
def test_world_of_one(monkeypatch):
  for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"): monkeypatch.delenv(k, raising=False)
  monkeypatch.setattr(dist, "_world", None)
  dist.init()
  assert (dist.rank(), dist.world_size()) == (0, 1)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  for out in (dist.all_reduce(Tensor(x)), dist.all_reduce(Tensor(x), "max"), dist.broadcast(Tensor(x)), dist.all_gather(Tensor(x), 1)):
    assert out.dtype == dtypes.float32 and out.device == Tensor(x).device
    np.testing.assert_array_equal(out.numpy(), x)
  dist.barrier()

@pytest.mark.cpu
def test_collectives_send_host_memory_without_copying_it():
  # what MPI sends from a CPU tensor is a view of its buffer (an all-reduce of a gradient copies nothing before MPI reads it)
  t = Tensor(np.arange(4, dtype=np.float32)).realize()
  sent = dist._host_array(t)
  t.assign(t + 10).realize()   # in place: the same buffer
  np.testing.assert_array_equal(sent, [10, 11, 12, 13])
  np.testing.assert_array_equal(dist._host_array(Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3).T), [0, 3, 1, 4, 2, 5])

def test_bad_arguments(monkeypatch):
  monkeypatch.setattr(dist, "_world", None)
  with pytest.raises(ValueError, match="op must be one of"): dist.all_reduce(Tensor.ones(2), op="mean")
  with pytest.raises(ValueError, match="root must be a rank"): dist.broadcast(Tensor.ones(2), root=1)
  with pytest.raises(ValueError, match="axis 2 is out of range"): dist.all_gather(Tensor.ones(2, 2), axis=2)
  with pytest.raises(TypeError, match="takes a Tensor"): dist.all_reduce(np.ones(2))
  with pytest.raises(ValueError, match="positive number"): dist.init(timeout=0)
  monkeypatch.setenv("TINYGRAD_MPI_TIMEOUT", "soon")
  with pytest.raises(ValueError, match="TINYGRAD_MPI_TIMEOUT"): dist.init()

def test_launch_command():
  cmd = dist.launch_command(3, ["a.py", "x"], python="py")
  assert cmd[:5] == ["mpirun", "-n", "3", "--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])][:5]
  assert cmd[-3:] == ["py", "a.py", "x"]
  with pytest.raises(ValueError): dist.launch_command(0, ["a.py"])

# ***** across mpirun -n 2 *****

@pytest.fixture(scope="module")
def mpi_results(tmp_path_factory):
  out = tmp_path_factory.mktemp("mpi")
  proc, _ = mpirun("mpi_checks.py", str(out), timeout=600, tmp_path=out)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
  assert all(r["size"] == 2 for r in ranks)
  return [r["results"] for r in ranks]

def failures(results, prefix:str) -> dict[str, str]:
  names = [k for k in results[0] if k.startswith(prefix)]
  assert names, f"no check named {prefix!r} ran"
  return {f"rank {r} {k}": res[k] for r, res in enumerate(results) for k in names if res.get(k) != "ok"}

@pytest.mark.mpi
@pytest.mark.cpu
@pytest.mark.slow
@pytest.mark.parametrize("group", ["collectives ", "lazy and non-contiguous", "mismatched shapes", "data-parallel MLP", "data-parallel CNN"])
def test_across_two_ranks(mpi_results, group):
  assert not (bad := failures(mpi_results, group)), "\n".join(f"{k}:\n{v}" for k, v in bad.items())

@pytest.mark.mpi
@pytest.mark.cpu
@pytest.mark.slow
def test_rank_that_raises_ends_the_job(tmp_path):
  proc, took = mpirun("mpi_failures.py", "raise", "120", timeout=300, tmp_path=tmp_path)
  assert proc.returncode != 0 and "should not have" not in proc.stdout
  assert "rank 1 of 2 raised RuntimeError: rank one failed on purpose" in proc.stderr, proc.stderr[-3000:]
  assert took < 120, f"the job took {took:.0f}s: rank 0 waited for its timeout instead of being aborted"

@pytest.mark.mpi
@pytest.mark.cpu
@pytest.mark.slow
def test_rank_that_never_joins_times_out(tmp_path):
  proc, took = mpirun("mpi_failures.py", "absent", "5", timeout=300, tmp_path=tmp_path)
  assert proc.returncode != 0 and "should not have" not in proc.stdout
  assert "rank 0 of 2: all_reduce (call 1) did not complete within 5s" in proc.stderr, proc.stderr[-3000:]
  assert took < 45, f"the job took {took:.0f}s after a 5s timeout"

# ***** NCCL: CUDA tensors across ranks *****

def test_which_tensors_use_nccl(monkeypatch):
  from tinygrad.runtime.support import nccl
  monkeypatch.setattr(nccl, "available", lambda: True)
  assert dist._uses_nccl(Tensor.empty(3, device="CUDA:1")) and dist._uses_nccl(Tensor.empty(3, device="CUDA", dtype=dtypes.bool))
  assert not dist._uses_nccl(Tensor.empty(3, device="CPU"))                          # CPU tensors keep the mpi4py path
  assert not dist._uses_nccl(Tensor.empty(3, device="CUDA", dtype=dtypes.int16))     # no NCCL type: the host path
  with Context(NCCL=0): assert not dist._uses_nccl(Tensor.empty(3, device="CUDA"))
  monkeypatch.setattr(nccl, "available", lambda: False)
  assert not dist._uses_nccl(Tensor.empty(3, device="CUDA"))

def _two_gpus_with_nccl() -> bool:
  from tinygrad.runtime.ops_cuda import cuda_usable, device_count
  from tinygrad.runtime.support import nccl
  return cuda_usable() and device_count() >= 2 and nccl.available()

@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.skipif(not _two_gpus_with_nccl(), reason="needs two NVIDIA GPUs and NCCL (pip install 'tinygrad[cuda]')")
def test_nccl_across_two_ranks(tmp_path):
  proc, _ = mpirun("nccl_checks.py", str(tmp_path), timeout=600, tmp_path=tmp_path)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
  bad = {f"rank {r} {k}": v for r, res in enumerate(ranks) for k, v in res["results"].items() if v != "ok"}
  assert len(ranks[0]["results"]) == 6 and not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())
