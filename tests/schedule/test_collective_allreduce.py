"""All-reduce through a device collective (schedule/allreduce.py: Compiled.has_all_reduce, as NCCL gives CUDA): one ALLREDUCE schedule item
per all-reduce instead of copies and adds. Checked without a GPU: the schedule's shape on NULL devices (NULL_ALLREDUCE=1), and the
numerics on CPU devices given a host collective for the test (numpy), forward, training and TinyJit; the CPU's own path is unchanged."""
import numpy as np
import pytest
from tinygrad import Tensor, Device, TinyJit, dtypes, nn
from tinygrad.device import Compiled
from tinygrad.helpers import Context
from tinygrad.nn.optim import SGD
from tinygrad.uop.ops import Ops

D2, D3 = ("CPU:0", "CPU:1"), ("CPU:0", "CPU:1", "CPU:2")
N2, N3 = ("NULL:0", "NULL:1"), ("NULL:0", "NULL:1", "NULL:2")

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def ops_of(items): return [si.ast.op for si in items]
def sharded_null(shape, devices, axis):
  with Context(NULL_ALLOW_COPYOUT=1): return Tensor.empty(*shape, device="NULL").shard(devices, axis=axis).realize()   # no copies left

# ***** the schedule's shape (NULL devices: nothing runs) *****

@pytest.mark.parametrize("devices", [N2, N3])
def test_one_collective_item_instead_of_copies(devices):
  with Context(NULL_ALLREDUCE=1):
    items, _ = sharded_null((12, 5), devices, 0).sum(0).schedule()
  assert ops_of(items).count(Ops.ALLREDUCE) == 1 and Ops.COPY not in ops_of(items)
  # a partial sum per device and the collective: its results are the tensor's buffers, no kernel copies them
  assert len(items) == len(devices) + 1
  si = next(si for si in items if si.ast.op is Ops.ALLREDUCE)
  # outputs then inputs, one of each per device, each the reduced shape (1, 5)
  assert [b.device for b in si.bufs] == [Device.canonicalize(d) for d in devices] * 2 and {b.size for b in si.bufs} == {5}
  assert si.ast.arg.op is Ops.ADD and si.name.startswith("allreduce add")
  # it runs after the partial sums it reads, and before the kernels that read its outputs
  pos = items.index(si)
  writers = {b: i for i, x in enumerate(items) if x.ast.op is Ops.SINK for b in x.bufs[:1]}
  assert all(writers[b] < pos for b in si.bufs[len(devices):])
  assert all(i > pos for i, x in enumerate(items) if x.ast.op is Ops.SINK and set(x.bufs[1:]) & set(si.bufs[:len(devices)]))

def test_without_the_capability_the_graph_of_copies():
  with Context(NULL_ALLREDUCE=0):
    items, _ = sharded_null((12, 5), N2, 0).sum(0).schedule()
  assert Ops.ALLREDUCE not in ops_of(items) and Ops.COPY in ops_of(items)

def test_collective_per_reduce_op_and_realize_runs():
  with Context(NULL_ALLREDUCE=1):
    t = sharded_null((8, 4), N2, 1)
    items, _ = Tensor.schedule(t.max(1), t.sum(1), t.prod(1))
    assert sorted(si.ast.arg.op.name for si in items if si.ast.op is Ops.ALLREDUCE) == ["ADD", "MAX", "MUL"]
    (t.sum(1) + 1).realize()   # the NULL device's collective runs nothing, as its kernels

def test_devices_not_all_of_one_kind_or_repeated_use_the_graph():
  from tinygrad.schedule.allreduce import has_collective
  with Context(NULL_ALLREDUCE=1):
    assert has_collective(("NULL", "NULL:1"), dtypes.float32)
    assert not has_collective(("NULL", "NULL"), dtypes.float32) and not has_collective(("NULL", "CPU"), dtypes.float32)
  assert not has_collective(("CPU", "CPU:1"), dtypes.float32)   # the CPU has none: its all-reduce stays the scheduler's copies and adds

# ***** numerics: CPU devices with a host collective for the test *****

@pytest.fixture
def host_collective(monkeypatch):
  calls = []
  def all_reduce(self, op, dsts, srcs):
    calls.append((op, [b.device for b in dsts]))
    for s in srcs: Device[s.device].synchronize()
    arrs = [np.frombuffer(s.as_buffer(), dtype=s.dtype.fmt) for s in srcs]
    r = {"ADD": np.add, "MAX": np.maximum, "MUL": np.multiply}[op].reduce(arrs)
    for d in dsts: d.copyin(memoryview(np.ascontiguousarray(r).data).cast("B"))
  cpu = Device.get_class("CPU")
  monkeypatch.setattr(cpu, "has_all_reduce", classmethod(lambda cls, devices, dtype: True))
  monkeypatch.setattr(cpu, "all_reduce", all_reduce)
  yield calls
  for d in [d for d in list(Device._opened) if d.startswith("CPU:")]: Device.close(d)

@pytest.mark.cpu
@pytest.mark.parametrize("devices", [D2, D3])
def test_reduces_over_the_sharded_axis(host_collective, devices):
  a = rnd(10, 6)
  t = Tensor(a).shard(devices, axis=0)
  np.testing.assert_allclose(t.sum(0).numpy(), a.sum(0), rtol=1e-5)
  np.testing.assert_allclose(t.max(0).numpy(), a.max(0))
  np.testing.assert_allclose((t.sum() * 2).numpy(), a.sum() * 2, rtol=1e-5)
  np.testing.assert_allclose(Tensor(a).shard(devices, axis=1).mean(1).numpy(), a.mean(1), rtol=1e-5, atol=1e-6)
  assert [op for op, _ in host_collective] == ["ADD", "MAX", "ADD", "ADD"]
  assert host_collective[0][1] == [Device.canonicalize(d) for d in devices]

@pytest.mark.cpu
def test_collective_reading_another_and_linear_schedule(host_collective):
  from tinygrad.engine.realize import run_linear, estimate_uop
  a = rnd(9, 4, seed=3)
  t = Tensor(a).shard(D2, axis=0)
  # the variance's sum reads the mean's all-reduce: two collectives, the inner one first
  with Context(SPEC=1): np.testing.assert_allclose(((t - t.mean(0)) ** 2).sum(0).numpy(), ((a - a.mean(0)) ** 2).sum(0), rtol=1e-5)
  assert len(host_collective) == 2
  out = Tensor(a).shard(D2, axis=0).max(0)
  linear = out.schedule_linear()
  assert [estimate_uop(c).mem for c in linear.src if c.src[0].op is Ops.ALLREDUCE] == [4 * 4 * 4]   # 4 floats in and out on 2 devices
  run_linear(linear)   # tinygrad 0.14's LINEAR of CALLs runs the collective too
  np.testing.assert_allclose(out.numpy(), a.max(0))
  assert [op for op, _ in host_collective] == ["ADD", "ADD", "MAX"]

@pytest.mark.cpu
def test_data_parallel_training_matches_one_device(host_collective):
  x, y = rnd(8, 5, seed=1), rnd(8, 3, seed=2)
  def train(shard:bool):
    Tensor.manual_seed(0)
    m = nn.Linear(5, 3)
    opt = SGD(nn.state.get_parameters(m), lr=0.1)
    if shard:
      for p in nn.state.get_parameters(m): p.shard_(D2)
    xt, yt = (Tensor(x).shard(D2, axis=0), Tensor(y).shard(D2, axis=0)) if shard else (Tensor(x), Tensor(y))
    losses = []
    with Context(TRAINING=1):
      for _ in range(3):
        opt.zero_grad()
        loss = ((m(xt) - yt) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, m.weight.numpy()
  (l1, w1), (l2, w2) = train(False), train(True)
  np.testing.assert_allclose(l2, l1, rtol=1e-5)
  np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)
  assert host_collective, "the sharded gradients were all-reduced by the collective"

@pytest.mark.cpu
def test_tinyjit_replays_the_collective(host_collective):
  @TinyJit
  def f(t:Tensor) -> Tensor: return (t.shard(D2, axis=0).sum(0) * 2).to("CPU").realize()
  for i in range(4):
    a = rnd(6, 4, seed=i)
    np.testing.assert_allclose(f(Tensor(a).realize()).numpy(), a.sum(0) * 2, rtol=1e-5)
  assert len(host_collective) == 4   # the plain call, the capture's and both replays: the replays call it too

def test_base_device_has_no_collective():
  assert Compiled.has_all_reduce(("X", "X:1"), dtypes.float32) is False
  with pytest.raises(NotImplementedError, match="no collective all-reduce"): Compiled.all_reduce(Device["NULL"], "ADD", [], [])
