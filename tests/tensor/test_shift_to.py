# Shifts on int tensors, and Tensor.to / to_ between devices (CPU, PYTHON, NULL).
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import GlobalCounters
from tinygrad.uop.ops import Ops

DEVICES = [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"]
INTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64]

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("dt", INTS, ids=str)
def test_shifts_match_numpy(dev, dt):
  npdt = np.dtype(dt.fmt)
  rng = np.random.default_rng(dt.itemsize)
  info = np.iinfo(npdt)
  a = rng.integers(info.min, info.max, size=(3, 5), dtype=npdt, endpoint=True)
  sh = rng.integers(0, dt.bitsize, size=(5,)).astype(npdt)
  t, s = Tensor(a, device=dev), Tensor(sh, device=dev)
  for got, ref in (((t << s), a << sh), ((t >> s), a >> sh), (t << 3, a << npdt.type(3)), (t >> 1, a >> npdt.type(1)),
                   (t.lshift(2), a << npdt.type(2)), (t.rshift(dt.bitsize - 1), a >> npdt.type(dt.bitsize - 1))):
    assert got.dtype is dt
    np.testing.assert_array_equal(got.numpy(), ref)

@pytest.mark.parametrize("dev", DEVICES)
def test_shift_non_contiguous_and_reverse(dev):
  a = np.arange(24, dtype=np.int32).reshape(4, 6)
  t = Tensor(a, device=dev)
  np.testing.assert_array_equal((t.T[::2] << 1).numpy(), a.T[::2] << 1)
  np.testing.assert_array_equal((t.flip(1) >> Tensor([1, 2, 3, 0, 1, 2], device=dev)).numpy(), a[:, ::-1] >> np.array([1, 2, 3, 0, 1, 2]))
  np.testing.assert_array_equal((1 << Tensor([0, 1, 5], device=dev)).numpy(), [1, 2, 32])
  np.testing.assert_array_equal((256 >> Tensor([0, 1, 5], device=dev)).numpy(), [256, 128, 8])
  assert (Tensor([1, 2], dtype=dtypes.uint8, device=dev) << Tensor([1, 1], dtype=dtypes.int32, device=dev)).dtype is dtypes.int32

@pytest.mark.cpu
def test_shift_bad_dtype():
  with pytest.raises(RuntimeError, match="int tensors.*float"): Tensor([1.0, 2.0]) << 1
  with pytest.raises(RuntimeError, match="int tensors.*bool"): Tensor([True]) >> Tensor([False])
  assert (Tensor([True, True]) << 1).tolist() == [2, 2]  # bool with a python int promotes to int, as in numpy
  with pytest.raises(RuntimeError, match="broadcast"): Tensor([1, 2, 3]) << Tensor([1, 2])

@pytest.mark.cpu
def test_to_between_cpu_and_python():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(a)
  p = (t * 2).T.to("PYTHON")
  assert p.device == "PYTHON" and p.shape == (4, 3) and p.dtype is dtypes.float32
  np.testing.assert_array_equal(p.numpy(), (a * 2).T)
  back = (p.sum(1) + 1).to("CPU")
  assert back.device == "CPU"
  np.testing.assert_array_equal(back.numpy(), (a * 2).T.sum(1) + 1)
  assert t.to("CPU") is t and t.to(None) is t
  # the copied data is its own: realizing the source again doesn't change it
  for dt in (dtypes.int8, dtypes.bfloat16, dtypes.bool, dtypes.uint64):
    x = Tensor([1, 0, 3], dtype=dt)
    np.testing.assert_array_equal(x.to("PYTHON").numpy(), x.numpy())

@pytest.mark.cpu
def test_to_schedule_has_a_copy():
  t = Tensor([1.0, 2.0, 3.0]) + 1
  items, _ = t.to("PYTHON").schedule()
  assert [si.ast.op for si in items] == [Ops.SINK, Ops.COPY]   # the kernel, then the copy of its output
  assert items[1].bufs[0].device == "PYTHON" and items[1].bufs[1].device == "CPU"
  GlobalCounters.reset()
  assert t.to("PYTHON").tolist() == [2.0, 3.0, 4.0]
  assert GlobalCounters.kernel_count == 1

def test_to_inplace_and_null():
  x = Tensor([1, 2, 3], device="PYTHON")
  assert x.to_("NULL") is x and x.device == "NULL"
  x.realize()
  with pytest.raises(RuntimeError, match="NULL"): x.numpy()
  y = Tensor.arange(5, device="PYTHON").to("NULL").to("PYTHON")
  with pytest.raises(RuntimeError, match="NULL"): y.numpy()
  z = Tensor([4, 5], device="PYTHON")
  z.to_("PYTHON")
  assert z.device == "PYTHON" and z.tolist() == [4, 5]
  assert Tensor.zeros(0, 2, device="PYTHON").to("NULL").shape == (0, 2)

def test_mixed_devices_raise():
  a, b = Tensor([1.0, 2.0], device="PYTHON"), Tensor([1.0, 2.0], device="NULL")
  with pytest.raises(RuntimeError, match="same device.*PYTHON.*NULL"): a + b
  with pytest.raises(RuntimeError, match="same device"): a.cat(b)
  with pytest.raises(RuntimeError, match="same device"): (a > 0).where(b, 0)
  with pytest.raises(ValueError): a.to(("PYTHON", "NULL"))
