# CPU, CPU:1, CPU:2, ... as separate devices of one host (runtime/ops_cpu.py): while several are in use each runs its work on a
# queue of its own (runtime/support/cpu_queue.py), so their kernels overlap; copies between them, frees and reads are ordered with
# that work, errors in queued work reach the caller, and each device's thread pool holds its share of the cores.
import ctypes
import threading
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.device import Buffer, Device
from tinygrad.helpers import Context
from tinygrad.runtime import ops_cpu
from tests.helpers.programs import apply_op, program_plans, random_inputs

pytestmark = pytest.mark.cpu   # kernels compiled by the C compiler

# a hand-written kernel that spins `ms` milliseconds, then fills out[i] = value + i, recording when it started and ended
SPIN = r"""
#include <time.h>
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
void spin_then_fill(double *stamps, float *out, int n, int ms, int value) {
  double start = now();
  stamps[0] = start;
  while (now() - start < ms * 1e-3) {}
  for (int i = 0; i < n; i++) out[i] = (float)(value + i);
  stamps[1] = now();
}
void nop__entry(const unsigned long long *args, int core_id) { (void)args; (void)core_id; }
"""

@pytest.fixture
def devices():
  """CPU and CPU:1 in use (so both queued) for the test, CPU:1 closed after it: other tests see the CPU they expect."""
  Device["CPU"]
  Device["CPU:1"]
  yield "CPU", "CPU:1"
  Device.close("CPU:1")

def _spin(device:str):
  dev = Device[device]
  prg = dev.runtime("spin_then_fill", dev.compiler.compile_cached(SPIN))
  def launch(stamps:Buffer, out:Buffer, ms:int, value:int): prg(stamps._buf, out._buf, vals=(out.size, ms, value))
  return launch

def _buf(device:str, n:int, dtype=dtypes.float32) -> Buffer: return Buffer(device, n, dtype).allocate()

def test_devices_queue_only_while_several_are_in_use(devices):
  assert Device["CPU"].queue is not None and Device["CPU:1"].queue is not None
  Device.close("CPU:1")
  try:
    if len(ops_cpu._in_use) == 1: assert Device["CPU"].queue is None   # alone again: kernels run on the calling thread
  finally: Device["CPU:1"]

def test_kernels_of_two_devices_overlap(devices):
  # each kernel spins 300 ms: launched one after another, both started before either ended (stamps taken inside the kernels)
  stamps = {d: _buf(d, 2, dtypes.float64) for d in devices}
  outs = {d: _buf(d, 16) for d in devices}
  for i, d in enumerate(devices): _spin(d)(stamps[d], outs[d], 300, i)
  for d in devices: Device[d].synchronize()
  (s0, e0), (s1, e1) = (stamps[d].numpy() for d in devices)
  assert s0 < e1 and s1 < e0, f"kernels ran one after the other: {s0=} {e0=} {s1=} {e1=}"
  for i, d in enumerate(devices): np.testing.assert_array_equal(outs[d].numpy(), np.arange(16, dtype=np.float32) + i)

def test_launch_returns_before_the_kernel_ends_and_a_read_waits(devices):
  stamps, out = _buf("CPU:1", 2, dtypes.float64), _buf("CPU:1", 8)
  _spin("CPU:1")(stamps, out, 200, 7)
  assert Device["CPU:1"].queue.completed < Device["CPU:1"].queue.submitted   # still running
  np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32) + 7)   # numpy() waited for it

def test_copy_waits_for_the_writes_on_its_source(devices):
  # the source is written by a kernel still spinning when the copy is queued on the destination
  stamps, src, dst = _buf("CPU", 2, dtypes.float64), _buf("CPU", 1024), _buf("CPU:1", 1024)
  _spin("CPU")(stamps, src, 200, 5)
  dst.copy_from(src)
  np.testing.assert_array_equal(dst.numpy(), np.arange(1024, dtype=np.float32) + 5)

def test_later_writes_on_the_source_wait_for_the_copy(devices):
  # the destination's queue is busy, so the copy waits there; the source's next write (queued after it) must not pass it
  stamps, busy = _buf("CPU:1", 2, dtypes.float64), _buf("CPU:1", 4)
  src, dst = _buf("CPU", 1024).copyin(np.arange(1024, dtype=np.float32).data), _buf("CPU:1", 1024)
  _spin("CPU:1")(stamps, busy, 200, 0)
  dst.copy_from(src)
  _spin("CPU")(_buf("CPU", 2, dtypes.float64), src, 0, 1000)
  np.testing.assert_array_equal(dst.numpy(), np.arange(1024, dtype=np.float32))
  np.testing.assert_array_equal(src.numpy(), np.arange(1024, dtype=np.float32) + 1000)

def test_freed_memory_goes_back_after_the_queued_work(devices):
  # the LRU cache gets a freed buffer's memory only once the kernel writing it has run (else a new buffer could get it meanwhile)
  n = 12_345   # a size no other buffer here has
  stamps, out = _buf("CPU:1", 2, dtypes.float64), _buf("CPU:1", n)
  cache, opaque = out.allocator.cache[(n * 4, None)], out._buf
  _spin("CPU:1")(stamps, out, 200, 0)
  out.deallocate()
  assert not any(o is opaque for o in cache)
  Device["CPU:1"].synchronize()
  assert any(o is opaque for o in cache)

def test_buffers_of_a_closed_device_order_with_the_one_reopened(devices):
  # a buffer allocated before Device.close("CPU:1"), written by a kernel of the CPU:1 opened after: reading it waits for that kernel
  stamps, out = _buf("CPU:1", 2, dtypes.float64), _buf("CPU:1", 64)
  Device.close("CPU:1")
  Device["CPU:1"]
  _spin("CPU:1")(stamps, out, 200, 4)
  np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) + 4)

def test_an_error_in_queued_work_reaches_the_caller(devices):
  q = Device["CPU:1"].queue
  ran: list[int] = []
  def fail(): raise ValueError("kernel failed")
  q.submit(fail)
  q.submit(ran.append, 1)   # behind the failed job: skipped, it may read what the failed one didn't write
  with pytest.raises(ValueError, match="kernel failed"): Device["CPU:1"].synchronize()
  Device["CPU:1"].synchronize()   # reported once
  assert ran == []
  np.testing.assert_array_equal((Tensor([1.0, 2.0], device="CPU:1") * 2).numpy(), [2.0, 4.0])

def test_an_error_in_a_queued_kernel_reaches_the_caller(devices, monkeypatch):
  a = Tensor(np.arange(4, dtype=np.float32), device="CPU:1").realize()
  (a + 0.75).realize()
  prg = next(p for p in Device["CPU:1"]._programs.values() if "0.75" in p.spec.src)
  def broken(*args): raise RuntimeError("boom in the kernel")
  monkeypatch.setattr(prg, "fxn", broken)
  monkeypatch.setattr(prg, "_runners", {})
  out = (a + 0.75).realize()   # the launch is queued and returns
  with pytest.raises(RuntimeError, match="boom in the kernel"): out.numpy()

def test_tensor_graph_across_devices_matches_numpy(devices):
  x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
  a = Tensor(x).realize()
  b = (a @ a + 1).to("CPU:1")
  c = (b * 2).sum(axis=0).to("CPU") + a[0]
  np.testing.assert_allclose(c.numpy(), ((x @ x + 1) * 2).sum(axis=0) + x[0], rtol=1e-4, atol=1e-2)

def test_jit_replays_across_devices(devices):
  @TinyJit
  def step(a:Tensor, b:Tensor) -> Tensor: return ((a * 2).to("CPU:1") + b).relu().to("CPU") - a
  rng = np.random.default_rng(1)
  for _ in range(5):
    x, y = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    out = step(Tensor(x).realize(), Tensor(y, device="CPU:1").realize())
    np.testing.assert_allclose(out.numpy(), np.maximum(x * 2 + y, 0) - x, rtol=1e-6)
  assert step.captured is not None

def test_jit_captured_alone_replays_after_a_second_device_opens():
  # its launchers were made for a device running inline; a device opened later gives it a queue, and the replays follow
  @TinyJit
  def step(a:Tensor) -> Tensor: return (a * 3 + 1).contiguous()
  rng = np.random.default_rng(2)
  def check():
    x = rng.standard_normal(4096).astype(np.float32)
    np.testing.assert_allclose(step(Tensor(x).realize()).numpy(), x * 3 + 1, rtol=1e-6)
  for _ in range(3): check()
  epoch = Device["CPU"].launch_epoch
  Device["CPU:2"]
  try:
    assert Device["CPU"].queue is not None and Device["CPU"].launch_epoch != epoch
    for _ in range(3): check()
    # an input a queued kernel is still writing: the replay's kernel is queued behind it, not run at once on the calling thread
    x = Tensor.empty(4096).realize()
    _spin("CPU")(_buf("CPU", 2, dtypes.float64), x._buffer(), 200, 0)
    np.testing.assert_allclose(step(x).numpy(), np.arange(4096, dtype=np.float32) * 3 + 1)
  finally: Device.close("CPU:2")
  for _ in range(2): check()

def test_thread_split_between_devices(devices):
  # NUM_CPU_THREADS is split evenly between the CPU devices in use; a device's pool takes its share at its next launch
  def pools_after_a_launch() -> list[int]:
    sizes = []
    for dev in list(ops_cpu._in_use):
      if (pool := dev.native_pool()) is None: pytest.skip("no C thread pool here")
      entry = ctypes.cast(ops_cpu.load_library(dev.compiler.compile_cached(SPIN)).nop__entry, ctypes.c_void_p).value
      pool.runner(entry, 0, 4)()
      sizes.append(pool.started + 1)   # its workers and the launching thread
    return sizes
  with Context(NUM_CPU_THREADS=12):
    ops_cpu.rebalance()
    k = len(ops_cpu._in_use)
    assert ops_cpu.device_threads() == 12 // k and pools_after_a_launch() == [12 // k] * k
    Device["CPU:2"]
    try: assert ops_cpu.device_threads() == 12 // (k + 1) and pools_after_a_launch() == [12 // (k + 1)] * (k + 1)
    finally: Device.close("CPU:2")
    assert pools_after_a_launch() == [12 // k] * k
    with Context(CPU_DEVICE_THREADS=3):
      ops_cpu.rebalance()
      assert ops_cpu.device_threads() == 3 and pools_after_a_launch() == [3] * k
  ops_cpu.rebalance()

def test_threads_share_one_device_queue(devices):
  # realizing on CPU:1 from several threads at once: one queue, every result right
  errors: list[BaseException] = []
  def work(i:int):
    try:
      x = np.arange(500, dtype=np.float32) * i
      for _ in range(5): np.testing.assert_array_equal((Tensor(x, device="CPU:1") + i).numpy(), x + i)
    except BaseException as e: errors.append(e)
  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  if errors: raise errors[0]

# ***** property: random op chains moving between CPU and CPU:1 give numpy's results *****

@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=program_plans())
def test_property_op_chains_across_devices_match_numpy(devices, prog):
  shapes, n_ops, seed, data = prog
  vals = random_inputs(shapes, seed, lambda: data.draw(st.sampled_from(devices)))
  for _ in range(n_ops):
    if data.draw(st.booleans()):   # move a value to the other device
      t, a = data.draw(st.sampled_from(vals))
      vals.append((t.to(devices[1] if t.device == devices[0] else devices[0]), a))
    else:   # an op on values of one device
      device = data.draw(st.sampled_from(sorted({t.device for t, _ in vals})))
      vals.append(apply_op(data.draw, [(t, a) for t, a in vals if t.device == device]))
  outs = vals[len(shapes):]
  if data.draw(st.booleans()): Tensor.realize(*[t for t, _ in outs])   # one schedule for both devices
  for t, a in outs: np.testing.assert_allclose(t.numpy(), a, rtol=1e-4, atol=1e-4)
