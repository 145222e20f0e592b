#!/usr/bin/env python3
"""Data-parallel training on several devices of one process (Tensor.shard over CPU:0..CPU:N-1) and over MPI ranks, against one device,
and the all-reduce's bandwidth against a memory copy (issue 29 item 6).

  step_1proc_s        median wall time of one training step in one process (MLP 784-512-512-10, Adam, the global batch)
  step_<N>dev_s       the same step with the batch sharded over N CPU devices of this process and the parameters copied to each
                      (gradients all-reduced by the scheduler's ring/tree of copies)
  dev_step_ratio      step_<N>dev_s / step_1proc_s
  (with --jit, also step_1proc_jit_s, step_<N>dev_jit_s and dev_jit_step_ratio: the same steps under TinyJit, which replays the
  kernels without the Python that builds, lowers and schedules the graph each eager step)
  dev_allreduce_gbs   bytes of a float32 tensor / time of its all-reduce over N CPU devices (a sum over the sharded axis)
  step_<N>ranks_s     the same step data-parallel over N ranks (`mpirun -n N`): each rank its 1/N of the batch, the gradients
                      all-reduced and averaged before opt.step() (rank 0's time; every rank waits for the others in the all-reduce)
  step_ratio          step_<N>ranks_s / step_1proc_s (on a machine with fewer cores than ranks x threads this is the overhead)
  allreduce_gbs       bytes of a float32 tensor / time of tinygrad.distributed.all_reduce(t).realize() over N ranks
  mpi_allreduce_gbs   the same bytes through mpi4py's Allreduce on numpy arrays alone (MPI's share of the above)
  memcpy_gbs          the same bytes through np.copyto in one process

  python benches/bench_multi.py [--ranks 2] [--devices 2] [--no-mpi] [--jit] [--batch 128] [--steps 10] [--mbytes 16]; prints JSON.
"""
from __future__ import annotations
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import numpy as np

def make_model():
  from tinygrad import nn
  class MLP:
    def __init__(self): self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)
    def __call__(self, x): return self.l3(self.l2(self.l1(x).relu()).relu())
  return MLP()

def step_time(batch:int, steps:int, devices:tuple[str, ...]|None=None, jit:bool=False) -> float:
  """Median wall time of a training step on this rank's share of the global batch (data-parallel when the world has several ranks, or
  over `devices` in this process); jit: the step under TinyJit (one process only: the ranks' all-reduce reads the gradients' bytes)."""
  from tinygrad import Tensor, TinyJit, nn
  from tinygrad.helpers import Context
  from tinygrad.nn.state import get_parameters
  import tinygrad.distributed as dist
  size, rank = dist.world_size(), dist.rank()
  Tensor.manual_seed(0)
  model = make_model()
  params = get_parameters(model)
  opt = nn.optim.Adam(params, lr=1e-3)
  rng = np.random.default_rng(0)
  X, Y = rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch).astype(np.int32)
  n = batch // size
  x, y = Tensor(X[rank * n:(rank + 1) * n]).realize(), Tensor(Y[rank * n:(rank + 1) * n]).realize()
  if devices:
    Tensor.realize(*params)
    for p in params: p.shard_(devices)
    x, y = x.shard(devices, 0).realize(), y.shard(devices, 0).realize()
  if jit and size > 1: raise ValueError("--jit measures one process (the ranks' all-reduce reads the gradients' bytes on the host)")
  def step():
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    if size > 1:
      # the gradients realized in one schedule first: all_reduce reads each one's bytes, and realizing them one at a time would run
      # the backward pass they share once per parameter
      Tensor.realize(loss, *[p.grad for p in params])
      for p in params: p.grad = dist.all_reduce(p.grad) / size
    loss.realize()
    opt.step()
    return loss
  run = TinyJit(step) if jit else step
  times = []
  with Context(TRAINING=1):
    for i in range(steps + 3):
      start = time.perf_counter()
      run().item()
      if i >= 3: times.append(time.perf_counter() - start)
  return statistics.median(times)

def allreduce_rates(mbytes:float, reps:int=10) -> dict[str, float]:
  from tinygrad import Tensor
  import tinygrad.distributed as dist
  from mpi4py import MPI
  nbytes = int(mbytes * 2**20) // 4 * 4
  t = Tensor(np.ones(nbytes // 4, np.float32)).realize()
  dist.all_reduce(t).realize()
  times = []
  for _ in range(reps):
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(t).realize()
    times.append(time.perf_counter() - start)
  src, dst = np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)
  mpi_times = []
  for _ in range(reps):
    MPI.COMM_WORLD.Barrier()
    start = time.perf_counter()
    MPI.COMM_WORLD.Allreduce(src, dst, op=MPI.SUM)
    mpi_times.append(time.perf_counter() - start)
  return {"allreduce_gbs": nbytes / statistics.median(times) / 1e9, "mpi_allreduce_gbs": nbytes / statistics.median(mpi_times) / 1e9}

def device_allreduce_gbs(mbytes:float, devices:tuple[str, ...], reps:int=10) -> float:
  from tinygrad import Tensor, Device
  n = int(mbytes * 2**20) // 4
  t = Tensor(np.ones((len(devices), n), np.float32)).shard(devices, 0).realize()
  t.sum(0).realize()
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    out = t.sum(0).realize()
    for d in devices: Device[d].synchronize()
    times.append(time.perf_counter() - start)
  del out
  return n * 4 / statistics.median(times) / 1e9

def memcpy_gbs(mbytes:float, reps:int=10) -> float:
  nbytes = int(mbytes * 2**20) // 4 * 4
  src, dst = np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    np.copyto(dst, src)
    times.append(time.perf_counter() - start)
  return nbytes / statistics.median(times) / 1e9

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--ranks", type=int, default=2)
  ap.add_argument("--batch", type=int, default=128)
  ap.add_argument("--steps", type=int, default=10)
  ap.add_argument("--mbytes", type=float, default=16)
  ap.add_argument("--devices", type=int, default=2, help="CPU devices of this process for the sharded step (0: skip)")
  ap.add_argument("--no-mpi", action="store_true", help="skip the MPI ranks")
  ap.add_argument("--jit", action="store_true", help="also time the one-process steps under TinyJit")
  ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)   # set on the ranks mpirun starts
  args = ap.parse_args()
  if args.batch % args.ranks: raise SystemExit(f"--batch {args.batch} must divide into --ranks {args.ranks}")
  import tinygrad.distributed as dist
  dist.init(timeout=600)
  if args.worker:
    res = {f"step_{args.ranks}ranks_s": step_time(args.batch, args.steps), **allreduce_rates(args.mbytes)}
    if dist.rank() == 0: print("RESULT " + json.dumps(res), flush=True)
    return
  res = {"ranks": args.ranks, "batch": args.batch, "mbytes": args.mbytes, "step_1proc_s": step_time(args.batch, args.steps)}
  # (one device before any other CPU device opens: from then on the cores are split between them)
  if args.jit: res["step_1proc_jit_s"] = step_time(args.batch, args.steps, jit=True)
  if args.devices > 1:
    devices = tuple(f"CPU:{i}" for i in range(args.devices))
    res[f"step_{args.devices}dev_s"] = step_time(args.batch, args.steps, devices)
    res["dev_step_ratio"] = res[f"step_{args.devices}dev_s"] / res["step_1proc_s"]
    res["dev_allreduce_gbs"] = device_allreduce_gbs(args.mbytes, devices)
    if args.jit:
      res[f"step_{args.devices}dev_jit_s"] = step_time(args.batch, args.steps, devices, jit=True)
      res["dev_jit_step_ratio"] = res[f"step_{args.devices}dev_jit_s"] / res["step_1proc_jit_s"]
  res["memcpy_gbs"] = memcpy_gbs(args.mbytes)
  if args.no_mpi:
    print(json.dumps(res, indent=1))
    return
  proc = subprocess.run(dist.launch_command(args.ranks, [os.path.abspath(__file__), "--worker", *sys.argv[1:]]), capture_output=True, text=True)
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
  if proc.returncode != 0 or not lines: raise SystemExit(f"mpirun failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
  res.update(json.loads(lines[0].removeprefix("RESULT ")))
  res["step_ratio"] = res[f"step_{args.ranks}ranks_s"] / res["step_1proc_s"]
  print(json.dumps(res, indent=1))

if __name__ == "__main__":
  main()
