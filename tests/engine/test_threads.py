# Tensors from several threads: the sqlite compile cache, the schedule cache, the allocators' caches, the device registry, the random
# counters and GlobalCounters are shared by every thread, and realizing from any of them, at once or one after another, must work.
import sys
import threading
import numpy as np
import pytest
import tinygrad.schedule as schedule
from tinygrad import Tensor
from tinygrad.helpers import GlobalCounters

def _run_threads(fn, n:int=4) -> None:
  errors: list[BaseException] = []
  barrier = threading.Barrier(n)
  def wrap(i:int):
    try:
      barrier.wait()
      fn(i)
    except BaseException as e: errors.append(e)
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-5)   # switch threads often, so unguarded shared state would show
  try:
    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads: t.start()
    for t in threads: t.join()
  finally: sys.setswitchinterval(old)
  if errors: raise errors[0]

@pytest.mark.cpu
def test_realize_in_a_second_thread():
  assert (Tensor([1.]) + 1).tolist() == [2.0]
  out: list = []
  t = threading.Thread(target=lambda: out.append((Tensor([1.]) + 1).tolist()))
  t.start()
  t.join()
  assert out == [[2.0]]

def _graph(n:int, i:int, rng) -> None:
  a, b = rng.standard_normal((n + 3, 5 + i % 3)).astype(np.float32), rng.standard_normal((5 + i % 3, 4)).astype(np.float32)
  z = (Tensor(a) @ Tensor(b)).relu() * (i + 1) + n
  ref = np.maximum(a @ b, 0) * (i + 1) + n
  np.testing.assert_allclose(z.numpy(), ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(z.sum(axis=1).numpy(), ref.sum(axis=1), rtol=1e-4, atol=1e-3)
  # + a fresh buffer: an arange alone is a constant graph, the same node in every thread, so another thread may have realized it already
  ar = Tensor.arange(10 + i + 3 * n) + Tensor([0])
  assert ar.reshape(1, -1).expand(2, -1).contiguous().max(axis=1).tolist() == [9 + i + 3 * n] * 2

@pytest.mark.cpu
@pytest.mark.parametrize("same", [False, True], ids=["different_graphs", "same_graph"])
def test_four_threads_realize_concurrently(same, monkeypatch):
  # a tiny schedule cache: threads evict each other's entries all the time
  monkeypatch.setattr(schedule, "SCHEDULE_CACHE_SIZE", 2)
  GlobalCounters.reset()
  _graph(9, 0, np.random.default_rng(9))
  per_graph = GlobalCounters.kernel_count   # every graph runs as many kernels
  GlobalCounters.reset()
  iters = 6
  def work(n:int):
    rng = np.random.default_rng(0 if same else n)
    for i in range(iters): _graph(0 if same else n, i, rng)
  _run_threads(work)
  # every kernel each thread ran was counted once
  assert GlobalCounters.kernel_count == 4 * iters * per_graph

@pytest.mark.cpu
def test_random_draws_in_threads_are_distinct():
  Tensor.manual_seed(7)
  draws: list = [None] * 4
  def work(n:int): draws[n] = Tensor.rand(64).numpy()
  _run_threads(work)
  # each draw advanced the shared counter: no two threads got the same numbers
  assert len({d.tobytes() for d in draws}) == 4
