"""Run by test_distributed.py as `mpirun -n 2 python mpi_failures.py MODE TIMEOUT`: rank 1 misbehaves while rank 0 all-reduces.
MODE raise: rank 1 raises (its uncaught exception must end the job). MODE absent: rank 1 never joins (rank 0 must time out)."""
import sys
import time
from tinygrad import Tensor
import tinygrad.distributed as dist

mode, timeout = sys.argv[1], float(sys.argv[2])
dist.init(timeout=timeout)
if dist.rank() == 1:
  if mode == "raise": raise RuntimeError("rank one failed on purpose")
  time.sleep(10 * timeout)
dist.all_reduce(Tensor.ones(4)).realize()
print("rank 0 finished the all_reduce: it should not have")
