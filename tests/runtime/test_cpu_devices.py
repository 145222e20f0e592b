# CPU, CPU:1, CPU:2, ... as separate devices of one host (runtime/ops_cpu.py): while several are in use each runs its work on a
# queue of its own (runtime/support/cpu_queue.py), so their kernels overlap; copies between them, frees and reads are ordered with
# that work, errors in queued work reach the caller, and each device's thread pool holds its share of the cores.
import ctypes
import threading
import time
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.device import Buffer, Device
from tinygrad.helpers import Context
from tinygrad.runtime import ops_cpu
from tests.helpers.programs import apply_op, program_plans, random_inputs

pytestmark = pytest.mark.cpu   # kernels compiled by the C compiler

# hand-written kernels: gate_then_fill waits until the host sets gate[0] (at most 10 s), then fills out[i] = value + i; meet is one of
# two kernels (me = 0 or 1) that each say they started and wait (at most 10 s) for the other to start, recording when they started and
# ended. A kernel the test holds back with a closed gate makes the order of queued work observable without timing assumptions.
KERNELS = r"""
#include <time.h>
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
void gate_then_fill(volatile int *gate, float *out, int n, int value) {
  double start = now();
  while (!gate[0] && now() - start < 10.0) {}
  for (int i = 0; i < n; i++) out[i] = (float)(value + i);
}
void meet(volatile int *started, double *stamps, int me) {
  stamps[0] = now();
  started[me] = 1;
  while (!started[1 - me] && now() - stamps[0] < 10.0) {}
  stamps[1] = now();
}
void nop__entry(const unsigned long long *args, int core_id) { (void)args; (void)core_id; }
"""

def close_other_cpus() -> None:
  for d in [d for d in list(Device._opened) if d.startswith("CPU:")]: Device.close(d)

@pytest.fixture
def devices():
  """CPU and CPU:1 in use (so both queued) for the test, CPU:1 closed after it: other tests see the CPU they expect."""
  Device["CPU"]
  Device["CPU:1"]
  yield "CPU", "CPU:1"
  Device.close("CPU:1")

def _kernel(device:str, name:str):
  dev = Device[device]
  return dev.runtime(name, dev.compiler.compile_cached(KERNELS))

def _buf(device:str, n:int, dtype=dtypes.float32) -> Buffer: return Buffer(device, n, dtype).allocate()

class Gate:
  """An int the host sets straight in memory (a copyin would wait for the queue, whose kernel waits for the gate)."""
  def __init__(self):
    self.buf = _buf("CPU", 1, dtypes.int32)
    self.buf._buf.mv[:4] = bytes(4)
  def open(self) -> None: self.buf._buf.mv[0] = 1

def _fill_after(gate:Gate, out:Buffer, value:int) -> None:
  """Queues a kernel on out's device that fills out with value + i once the gate opens."""
  _kernel(out.device, "gate_then_fill")(gate.buf._buf, out._buf, vals=(out.size, value))

def _raw(buf:Buffer) -> np.ndarray:
  """The buffer's memory as it is now, not waiting for its device."""
  return np.frombuffer(buf._buf.mv, np.float32).copy()

def test_devices_queue_only_while_several_are_in_use(devices):
  assert Device["CPU"].queue is not None and Device["CPU:1"].queue is not None
  Device.close("CPU:1")
  try:
    if len(ops_cpu._in_use) == 1: assert Device["CPU"].queue is None   # alone again: kernels run on the calling thread
  finally: Device["CPU:1"]

def test_kernels_of_two_devices_overlap(devices):
  # each kernel waits for the other to start: launched one after another, both started before either ended (stamps taken inside the
  # kernels); run one after the other, the first would wait out its 10 s and end before the second started
  started = _buf("CPU", 2, dtypes.int32)
  started._buf.mv[:8] = bytes(8)
  stamps = {d: _buf(d, 2, dtypes.float64) for d in devices}
  for me, d in enumerate(devices): _kernel(d, "meet")(started._buf, stamps[d]._buf, vals=(me,))
  for d in devices: Device[d].synchronize()
  (s0, e0), (s1, e1) = (stamps[d].numpy() for d in devices)
  assert s0 < e1 and s1 < e0 and e0 - s0 < 10 and e1 - s1 < 10, f"kernels ran one after the other: {s0=} {e0=} {s1=} {e1=}"

def test_launch_returns_before_the_kernel_ends_and_a_read_waits(devices):
  gate, out = Gate(), _buf("CPU:1", 8)
  _fill_after(gate, out, 7)
  assert Device["CPU:1"].queue.completed < Device["CPU:1"].queue.submitted   # the launch returned; the kernel waits for the gate
  threading.Timer(0.1, gate.open).start()
  np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32) + 7)   # numpy() waited for it

def test_copy_waits_for_the_writes_on_its_source(devices):
  # the source's writer is held back when the copy is queued on the destination
  gate, src, dst = Gate(), _buf("CPU", 1024).copyin(np.full(1024, -1, np.float32).data), _buf("CPU:1", 1024)
  _fill_after(gate, src, 5)
  dst.copy_from(src)
  gate.open()
  np.testing.assert_array_equal(dst.numpy(), np.arange(1024, dtype=np.float32) + 5)

def test_later_writes_on_the_source_wait_for_the_copy(devices):
  # the destination's queue is held back, so the copy waits there; the source's next write (queued after it) must not pass it
  gate, open_gate = Gate(), Gate()
  open_gate.open()
  src, dst = _buf("CPU", 1024).copyin(np.arange(1024, dtype=np.float32).data), _buf("CPU:1", 1024)
  _fill_after(gate, _buf("CPU:1", 4), 0)
  dst.copy_from(src)
  _fill_after(open_gate, src, 1000)
  time.sleep(0.05)
  np.testing.assert_array_equal(_raw(src), np.arange(1024, dtype=np.float32))   # the write waits for the copy
  gate.open()
  np.testing.assert_array_equal(dst.numpy(), np.arange(1024, dtype=np.float32))
  np.testing.assert_array_equal(src.numpy(), np.arange(1024, dtype=np.float32) + 1000)

def test_freed_memory_goes_back_after_the_queued_work(devices):
  # the LRU cache gets a freed buffer's memory only once the kernel writing it has run (else a new buffer could get it meanwhile)
  n = 12_345   # a size no other buffer here has
  gate, out = Gate(), _buf("CPU:1", n)
  cache, opaque = out.allocator.cache[(n * 4, None)], out._buf
  _fill_after(gate, out, 0)
  out.deallocate()
  assert not any(o is opaque for o in cache)
  gate.open()
  Device["CPU:1"].synchronize()
  assert any(o is opaque for o in cache)

def test_buffers_of_a_closed_device_order_with_the_one_reopened(devices):
  # a buffer allocated before Device.close("CPU:1"), written by a kernel of the CPU:1 opened after: reading it waits for that kernel
  gate, out = Gate(), _buf("CPU:1", 64)
  Device.close("CPU:1")
  Device["CPU:1"]
  _fill_after(gate, out, 4)
  threading.Timer(0.1, gate.open).start()
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
  close_other_cpus()   # (devices other tests left open would make CPU queue from the start)
  for _ in range(3): check()
  epoch = Device["CPU"].launch_epoch
  Device["CPU:2"]
  try:
    assert Device["CPU"].queue is not None and Device["CPU"].launch_epoch != epoch
    for _ in range(3): check()
    # an input a queued kernel is still writing: the replay's kernel is queued behind it, not run at once on the calling thread
    x, gate = Tensor.empty(4096).realize(), Gate()
    _fill_after(gate, x._buffer(), 0)
    out = step(x)
    gate.open()
    np.testing.assert_allclose(out.numpy(), np.arange(4096, dtype=np.float32) * 3 + 1)
  finally: Device.close("CPU:2")
  for _ in range(2): check()

def test_thread_split_between_devices(devices):
  # NUM_CPU_THREADS is split evenly between the CPU devices in use; a device's pool takes its share at its next launch
  def pools_after_a_launch() -> list[int]:
    sizes = []
    for dev in list(ops_cpu._in_use):
      if (pool := dev.native_pool()) is None: pytest.skip("no C thread pool here")
      entry = ctypes.cast(ops_cpu.load_library(dev.compiler.compile_cached(KERNELS)).nop__entry, ctypes.c_void_p).value
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
