# tinygrad 0.14's schedule API: Tensor.schedule_linear / linear_with_vars give a LINEAR UOp of CALLs, engine.realize.run_linear runs it.
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.engine.realize import run_linear
from tinygrad.helpers import GlobalCounters
from tinygrad.schedule import ScheduleItem
from tinygrad.uop.ops import Ops, AxisType
from tests.helpers.kernels import kinds

DEVICES = [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"]

@pytest.mark.parametrize("dev", DEVICES)
def test_linear_with_vars_then_run(dev):
  a = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4), device=dev)
  b = ((a + 1).sum(1) * 2)
  later = b + 100   # built before scheduling: it must reuse b's buffer once b has run
  linear, var_vals = b.linear_with_vars()
  assert linear.op is Ops.LINEAR and var_vals == {}
  assert [c.op for c in linear.src] == [Ops.CALL] and linear.src[0].src[0].op is Ops.SINK
  assert [s.op for s in linear.src[0].src[1:]] == [Ops.BUFFER, Ops.BUFFER]
  assert kinds(linear.src[0].src[0]) == [(AxisType.LOOP, 4), (AxisType.REDUCE, 4)]   # the row sum's kernel
  GlobalCounters.reset()
  run_linear(linear, var_vals)
  assert GlobalCounters.kernel_count == 1
  ref = (np.arange(16, dtype=np.float32).reshape(4, 4) + 1).sum(1) * 2
  np.testing.assert_array_equal(b.numpy(), ref)
  assert GlobalCounters.kernel_count == 1          # reading b runs nothing more
  np.testing.assert_array_equal(later.numpy(), ref + 100)
  assert GlobalCounters.kernel_count == 2          # only the + 100

@pytest.mark.parametrize("dev", DEVICES)
def test_schedule_linear_several_tensors(dev):
  x = Tensor([1.0, 2.0, 3.0], device=dev)
  y, z = x * 2, (x + 1).sum()
  linear = y.schedule_linear(z)
  assert len(linear.src) == 2 and all(c.op is Ops.CALL for c in linear.src)
  items = [ScheduleItem.from_call(c) for c in linear.src]
  assert sorted(si.name for si in items) == sorted(si.name for si in (x * 2).schedule(((x + 1).sum()))[0])
  run_linear(linear)
  assert y.tolist() == [2.0, 4.0, 6.0] and z.item() == 9.0

def test_schedule_linear_of_realized_is_empty():
  x = Tensor([1, 2, 3], device="PYTHON").realize()
  assert x.schedule_linear().src == ()

@pytest.mark.cpu
def test_linear_with_a_copy():
  c = (Tensor([1, 2, 3]) * 3).to("PYTHON")
  linear = c.schedule_linear()
  assert [call.src[0].op for call in linear.src] == [Ops.SINK, Ops.COPY]
  copy = ScheduleItem.from_call(linear.src[1])
  assert [b.device for b in copy.bufs] == ["PYTHON", "CPU"] and copy.name.startswith("copy")
  run_linear(linear)
  assert c.tolist() == [3, 6, 9]

def test_unrun_linear_and_bad_input():
  t = Tensor([1.0, 2.0], device="PYTHON") + 1
  t.schedule_linear()
  with pytest.raises(RuntimeError, match="never allocated or written"): t.numpy()   # scheduled but not run
  with pytest.raises(ValueError, match="LINEAR"): run_linear(Tensor([1.0], device="PYTHON").uop)
  u = Tensor([1.0], device="PYTHON") * 2
  linear = u.schedule_linear()
  run_linear(linear, {"n": 3})   # values for Variables its kernels don't take are not used
  assert u.tolist() == [2.0]
  with pytest.raises(ValueError, match="CALL"): ScheduleItem.from_call(linear)
