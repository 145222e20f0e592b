# DEV=CUDA on a real GPU: Tensor numerics against numpy, copies both ways and between GPUs, synchronize and timing, BEAM. Every test
# skips cleanly where cuda-python, the driver or a GPU is missing (CI has none; tests/renderer/test_cuda_render.py and
# tests/runtime/test_cuda_fake_driver.py are the no-GPU half).
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Device, nn
from tinygrad.device import Buffer
from tinygrad.helpers import Context, GlobalCounters
from tinygrad.runtime.ops_cuda import cuda_usable, device_count

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable NVIDIA GPU (cuda-python, driver and GPU needed)")]

@pytest.fixture(autouse=True)
def _no_disk_cache():
  with Context(CACHELEVEL=0): yield   # the user's compile cache is not the tests'

rng = np.random.default_rng(0)
def rand(*shape, dt=np.float32): return rng.standard_normal(shape).astype(dt)
def T(x, **kw): return Tensor(x, device="CUDA", **kw)

def test_elementwise_and_reduce():
  a, b = rand(33, 65), rand(33, 65)
  ta, tb = T(a), T(b)
  np.testing.assert_allclose((ta * tb + 1).numpy(), a * b + 1, rtol=1e-6)
  np.testing.assert_allclose((ta.abs() + 1).sqrt().log2().numpy(), np.log2(np.sqrt(np.abs(a) + 1)), rtol=1e-5)
  np.testing.assert_allclose(ta.exp().numpy(), np.exp(a), rtol=1e-5)
  np.testing.assert_allclose(ta.sin().numpy(), np.sin(a), atol=1e-5)
  np.testing.assert_allclose(ta.sum().numpy(), a.sum(), rtol=1e-4)
  np.testing.assert_allclose(ta.max(axis=0).numpy(), a.max(axis=0))
  np.testing.assert_equal(ta.argmax(axis=1).numpy(), a.argmax(axis=1))
  np.testing.assert_equal(((ta * 100).cast(dtypes.int32) // 7).numpy(), (a * 100).astype(np.int32) // 7)
  big = rand(1 << 20)
  np.testing.assert_allclose(T(big).sum().numpy(), big.sum(dtype=np.float64), rtol=1e-4)   # a grouped reduce in shared memory

def test_matmul_conv_softmax():
  a, b = rand(128, 96), rand(96, 80)
  np.testing.assert_allclose((T(a) @ T(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  x, w = rand(2, 3, 16, 16), rand(8, 3, 3, 3)
  ref = np.zeros((2, 8, 16, 16), np.float32)
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  for i in range(16):
    for j in range(16): ref[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i+3, j:j+3], w)
  np.testing.assert_allclose(T(x).conv2d(T(w), padding=1).numpy(), ref, rtol=1e-4, atol=1e-4)
  s = rand(64, 1000)
  e = np.exp(s - s.max(axis=1, keepdims=True))
  np.testing.assert_allclose(T(s).softmax(axis=1).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

@pytest.mark.parametrize("dt,npdt,tol", [(dtypes.half, np.float16, 1e-2), (dtypes.bfloat16, np.float32, 3e-2)])
def test_half_types(dt, npdt, tol):
  a, b = rand(64, 48), rand(48, 32)
  ta, tb = T(a).cast(dt), T(b).cast(dt)
  np.testing.assert_allclose((ta @ tb).float().numpy(), a @ b, rtol=tol, atol=tol * 10)
  np.testing.assert_allclose((ta * 2 + 1).float().numpy(), (a * 2 + 1).astype(npdt).astype(np.float32), rtol=tol)

def test_copies_and_views():
  x = rand(3000)
  buf = Buffer("CUDA", 3000, dtypes.float32).copyin(memoryview(x))
  np.testing.assert_array_equal(buf.numpy(), x)
  np.testing.assert_array_equal(buf.view(100, dtypes.float32, 400).numpy(), x[100:200])
  np.testing.assert_array_equal(T(x).to("CPU").numpy(), x)
  np.testing.assert_array_equal(Tensor(x, device="CPU").to("CUDA").numpy(), x)

@pytest.mark.skipif(cuda_usable() and device_count() < 2, reason="needs two GPUs")
def test_copy_between_gpus():
  x = rand(4096)
  np.testing.assert_array_equal(T(x).to("CUDA:1").numpy(), x)
  np.testing.assert_array_equal((T(x).to("CUDA:1") * 2).to("CUDA").numpy(), x * 2)

def test_synchronize_and_timing():
  dev = Device["CUDA"]
  x = T(rand(1 << 16)).realize()
  GlobalCounters.reset()
  with Context(DEBUG=2): (x * 3).realize()   # DEBUG=2 times every kernel with CUDA events
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.time_sum_s > 0
  dev.synchronize()
  assert not dev.pending

def test_training_step_matches_cpu():
  xs = rand(8, 16)
  def step(device):
    with Context(DEV=device, TRAINING=1):
      Tensor.manual_seed(3)   # the same initial weights on both devices (threefry is integer arithmetic)
      l1, l2 = nn.Linear(16, 32), nn.Linear(32, 4)
      opt = nn.optim.Adam(nn.state.get_parameters([l1, l2]), lr=1e-2)
      x, y = Tensor(xs), Tensor([0, 1, 2, 3, 0, 1, 2, 3])
      for _ in range(3):
        opt.zero_grad()
        loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
      return loss.numpy()
  np.testing.assert_allclose(step("CUDA"), step("CPU"), rtol=1e-4)

def test_beam_on_cuda():
  a, b = rand(256, 256), rand(256, 256)
  with Context(BEAM=2, IGNORE_BEAM_CACHE=1): out = (T(a) @ T(b)).numpy()
  np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_tensor_core_matmul(dt):
  # the heuristics put an fp16/bf16 matmul on mma.sync (Opt(TC) first), and BEAM may too; both against numpy on the inputs as dt holds them
  import tinygrad.engine.realize as realize
  ta, tb = T(rand(256, 128)).cast(dt).realize(), T(rand(128, 192)).cast(dt).realize()
  a, b = ta.float().numpy(), tb.float().numpy()
  before = set(realize._specs)
  np.testing.assert_allclose(ta.matmul(tb, dtype=dtypes.float).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert any(s.applied_opts and s.applied_opts[0].op.name == "TC" for k, s in realize._specs.items() if k not in before)
  with Context(BEAM=2, IGNORE_BEAM_CACHE=1): out = (ta @ tb).float().numpy()
  np.testing.assert_allclose(out, a @ b, rtol=1e-2, atol=1e-1)

def test_movement_indexing_and_dtypes():
  a = rand(6, 10)
  ta = T(a)
  np.testing.assert_array_equal(ta.permute(1, 0).reshape(5, 12).numpy(), a.T.reshape(5, 12))
  np.testing.assert_array_equal(ta[1:5:2, ::-3].numpy(), a[1:5:2, ::-3])
  np.testing.assert_array_equal(ta.pad(((1, 2), (0, 3))).numpy(), np.pad(a, ((1, 2), (0, 3))))
  np.testing.assert_array_equal(ta.cat(ta * 2, dim=1).numpy(), np.concatenate([a, a * 2], axis=1))
  np.testing.assert_array_equal(ta.expand(3, 6, 10).numpy(), np.broadcast_to(a, (3, 6, 10)))
  np.testing.assert_array_equal((ta > 0).where(ta, -ta).numpy(), np.where(a > 0, a, -a))
  np.testing.assert_allclose(ta.cumsum(axis=1).numpy(), np.cumsum(a, axis=1), rtol=1e-5, atol=1e-6)
  idx = rng.integers(0, 10, (6, 4))
  np.testing.assert_array_equal(ta.gather(1, T(idx.astype(np.int32))).numpy(), np.take_along_axis(a, idx, axis=1))
  rows = rng.integers(0, 6, 9).astype(np.int32)
  np.testing.assert_array_equal(ta[T(rows)].numpy(), a[rows])
  np.testing.assert_array_equal(Tensor.arange(37, device="CUDA").numpy(), np.arange(37))
  i = rng.integers(-1000, 1000, 257).astype(np.int32)
  np.testing.assert_array_equal(((T(i) * 3) % 7 + (T(i) >> 2)).numpy(), (i * 3) % 7 + (i >> 2))
  np.testing.assert_array_equal((T(i).cast(dtypes.int64) * 100000).numpy(), i.astype(np.int64) * 100000)
  np.testing.assert_array_equal((T(i) > 0).numpy(), i > 0)
  u8 = rng.integers(0, 255, 100).astype(np.uint8)
  np.testing.assert_array_equal((T(u8) + 7).numpy(), u8 + np.uint8(7))

def test_big_copies_both_ways_keep_order():
  # 40 MiB goes through several pinned staging buffers; a kernel queued before a read-back and a copy queued before a kernel are ordered
  x = rand(10 << 20)
  t = T(x).realize()
  np.testing.assert_array_equal(t.numpy(), x)
  y = (t * 2 + 1).realize()
  np.testing.assert_array_equal(y.numpy(), x * 2 + 1)
  z = rand(10 << 20)
  t2 = T(z)
  np.testing.assert_array_equal((t2 - y).numpy(), z - (x * 2 + 1))

def test_threads_share_the_device():
  # realizes from several threads queue kernels and copies on the device's one stream: every result is right
  import threading
  xs = [rand(1 << 16) for _ in range(4)]
  out: dict[int, np.ndarray] = {}
  def work(k):
    t = T(xs[k])
    for _ in range(5): t = (t * 1.5 - 0.25).realize()
    out[k] = t.numpy()
  threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for th in threads: th.start()
  for th in threads: th.join()
  for k, x in enumerate(xs):
    ref = x
    for _ in range(5): ref = ref * np.float32(1.5) - np.float32(0.25)
    np.testing.assert_allclose(out[k], ref, rtol=1e-6, atol=1e-6)
