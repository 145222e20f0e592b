# Lazy Tensor.assign (AFTER(storage, STORE(view, value)) in the graph): one realize runs all the writes it needs, each written in place
# into its buffer, read-after-write and write-after-read ordered; checked against numpy, with kernel counts from the schedule.
import numpy as np
import pytest
from tinygrad import Tensor, GlobalCounters, dtypes
from tinygrad.uop.ops import Ops
from tinygrad.helpers import prod
from tests.helpers.devices import DEVICES

def f32(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def kernels(*ts:Tensor) -> int:
  """Realizes ts in one realize; returns the kernels it ran."""
  before = GlobalCounters.kernel_count
  Tensor.realize(*ts)
  return GlobalCounters.kernel_count - before

def buf(t:Tensor):
  return t._buffer()

# ***** lazy, in place *****

@pytest.mark.parametrize("device", DEVICES)
def test_assign_is_lazy_and_in_place(device):
  a = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
  storage = buf(a)
  a.assign(a + 1)
  assert a.uop.op is Ops.AFTER   # nothing ran yet
  items, _ = a.schedule()
  # no copy kernel: one kernel, whose only buffer is a's (it reads and writes it)
  assert len(items) == 1 and items[0].bufs == [storage]
  assert kernels(a) == 1
  assert buf(a) is storage
  np.testing.assert_equal(a.numpy(), np.arange(6) + 1)

@pytest.mark.cpu
def test_chain_before_realize():
  a = Tensor(np.arange(6, dtype=np.float32)).realize()
  a.assign(a + 1)
  a.assign(a * 2)
  assert kernels(a) == 2
  np.testing.assert_equal(a.numpy(), (np.arange(6) + 1) * 2)

@pytest.mark.cpu
def test_reads_before_and_after_a_write_in_one_realize():
  # y reads x before both writes, z between them: the writes wait for the reads of what they overwrite
  ref = np.arange(6, dtype=np.float32)
  x = Tensor(ref).realize()
  y = x * 2
  x += 1
  z = x * 3
  x *= 2
  w = x - 1
  Tensor.realize(w, z, y, x)
  np.testing.assert_equal(y.numpy(), ref * 2)
  np.testing.assert_equal(z.numpy(), (ref + 1) * 3)
  np.testing.assert_equal(x.numpy(), (ref + 1) * 2)
  np.testing.assert_equal(w.numpy(), (ref + 1) * 2 - 1)

@pytest.mark.cpu
def test_realized_later_reads_the_buffer_then():
  # a lazy tensor reads a buffer when it runs (as in tinygrad): after the write ran, that is the new value
  x = Tensor([1.0, 2.0, 3.0]).realize()
  y = x + 1
  x.assign(x * 10).realize()
  np.testing.assert_equal(y.numpy(), [11.0, 21.0, 31.0])

@pytest.mark.cpu
def test_not_run_unless_needed():
  a = Tensor([1.0, 2.0]).realize()
  b = Tensor([5.0, 6.0]).realize()
  a.assign(b * 2)
  c = (b + 1).realize()   # a's write is not in c's graph
  np.testing.assert_equal(c.numpy(), [6.0, 7.0])
  np.testing.assert_equal(a.numpy(), [10.0, 12.0])

@pytest.mark.cpu
def test_write_runs_once():
  a = Tensor([1.0, 2.0]).realize()
  a.assign(a + 1)
  b = a * 1   # holds the write
  a.realize()
  np.testing.assert_equal(b.numpy(), [2.0, 3.0])   # the write is realized: b's realize does not run it again
  np.testing.assert_equal(a.numpy(), [2.0, 3.0])

@pytest.mark.cpu
def test_repeated_steps_hit_the_schedule_cache():
  w, ref = Tensor(np.ones((3, 4), np.float32)).realize(), np.ones((3, 4), np.float32)
  g = Tensor(f32(3, 4)).realize()
  for _ in range(4):
    w.assign(w * 0.5 + g)
    ref = ref * 0.5 + g.numpy()
    assert kernels(w) == 1
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-6)
  for _ in range(3):   # several steps in one realize
    w.assign(w * 0.5 + g)
    ref = ref * 0.5 + g.numpy()
  assert kernels(w) == 3
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-6)

@pytest.mark.cpu
def test_lazy_target_takes_the_value():
  t = Tensor.arange(4).float() + 1
  t.assign(t * 3)
  np.testing.assert_equal(t.numpy(), [3.0, 6.0, 9.0, 12.0])
  e = Tensor.empty(3)
  e.assign(Tensor([1.0, 2.0, 3.0]))
  np.testing.assert_equal(e.numpy(), [1.0, 2.0, 3.0])

# ***** hazards: the value reads other elements of the buffer it overwrites *****

@pytest.mark.cpu
def test_value_reading_other_elements_gets_a_buffer():
  a = Tensor(np.arange(5, dtype=np.float32)).realize()
  a.assign(a.flip(0))
  assert kernels(a) == 2   # the flipped value first, then the write
  np.testing.assert_equal(a.numpy(), np.arange(5)[::-1])
  a = Tensor(np.arange(5, dtype=np.float32)).realize()
  a[1:] = a[:4]
  ref = np.arange(5, dtype=np.float32)
  ref[1:] = ref[:4].copy()
  np.testing.assert_equal(a.numpy(), ref)
  m = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)).realize()
  m.assign(m.T + m.sum(1, keepdim=True))
  r = np.arange(16, dtype=np.float32).reshape(4, 4)
  np.testing.assert_equal(m.numpy(), r.T + r.sum(1, keepdims=True))

# ***** views: only the viewed elements are written *****

@pytest.mark.cpu
def test_setitem_writes_only_the_region():
  a, ref = Tensor(f32(6, 5)).realize(), f32(6, 5)
  a[1:4, ::2] = 7.0
  ref[1:4, ::2] = 7.0
  items, _ = a.schedule()
  # one kernel, whose loops run over the 3x3 region only
  assert len(items) == 1 and prod(u.src[0].arg for u in items[0].ast.toposort() if u.op is Ops.RANGE) == 9
  np.testing.assert_equal(a.numpy(), ref)

@pytest.mark.parametrize("device", DEVICES)
def test_views(device):
  ref = np.arange(24, dtype=np.float32).reshape(4, 6)
  a = Tensor(ref.copy(), device=device).realize()
  a.T.assign(a.T * 2)                  # permute
  ref.T[...] = ref.T * 2
  a[::-1, 1].assign(Tensor([1.0, 2.0, 3.0, 4.0], device=device))   # flip + shrink
  ref[::-1, 1] = [1.0, 2.0, 3.0, 4.0]
  p = a.pad(((1, 1), (0, 0)))          # the padding has no place in the buffer: only the buffer's part is written
  p += 100
  ref += 100
  s = a.reshape(2, 12)[1, 3::4]        # reshape + step slice
  s *= -1
  ref.reshape(2, 12)[1, 3::4] *= -1
  np.testing.assert_equal(a.numpy(), ref)
  np.testing.assert_equal(p.numpy(), np.pad(ref, ((1, 1), (0, 0))))
  np.testing.assert_equal(s.numpy(), ref.reshape(2, 12)[1, 3::4])

@pytest.mark.cpu
def test_views_see_a_write_through_another_view():
  ref = f32(3, 4)
  a = Tensor(ref.copy()).realize()
  row, col = a[1], a[:, 2]
  row[1:3] = Tensor([8.0, 9.0])
  ref[1, 1:3] = [8.0, 9.0]
  np.testing.assert_equal(col.numpy(), ref[:, 2])
  np.testing.assert_equal(a.numpy(), ref)

@pytest.mark.cpu
def test_inplace_on_view_is_one_kernel():
  a, ref = Tensor(f32(4, 5)).realize(), f32(4, 5)
  a[1] += 100
  a[2:, 1:] *= 2
  ref[1] += 100
  ref[2:, 1:] *= 2
  assert kernels(a) == 2
  np.testing.assert_allclose(a.numpy(), ref, rtol=1e-6)

@pytest.mark.cpu
def test_setitem_chain_and_reads():
  ref = np.zeros((4, 4), np.float32)
  a = Tensor(ref.copy()).realize()
  before = a.sum()
  for i in range(4):
    a[i, i] = float(i + 1)
    ref[i, i] = i + 1
  after = a.sum(0)
  Tensor.realize(after, before, a)
  assert before.item() == 0.0
  np.testing.assert_equal(after.numpy(), ref.sum(0))
  np.testing.assert_equal(a.numpy(), ref)

@pytest.mark.cpu
def test_advanced_setitem_in_place():
  a, ref = Tensor(f32(5, 3)).realize(), f32(5, 3)
  storage = buf(a)
  a[Tensor([4, 0])] = Tensor(np.full((2, 3), 2.5, np.float32))
  ref[[4, 0]] = 2.5
  np.testing.assert_equal(a.numpy(), ref)
  assert buf(a) is storage

@pytest.mark.cpu
def test_dtypes_and_operators():
  i = Tensor([7, -3, 12], dtype=dtypes.int32).realize()
  i //= 2
  i <<= 1
  i ^= 5
  np.testing.assert_equal(i.numpy(), ((np.array([7, -3, 12]) // 2) << 1) ^ 5)
  b = Tensor([True, False, True]).realize()
  b &= Tensor([True, True, False])
  np.testing.assert_equal(b.numpy(), [True, False, False])
  h = Tensor([1.0, 2.0], dtype=dtypes.float16).realize()
  h += 0.5
  assert h.dtype is dtypes.float16 and h.tolist() == [1.5, 2.5]

# ***** the optimizer update: one realize, one kernel per parameter *****

def _mlp():
  shapes = [(4, 3), (3,), (3, 5), (5,), (5, 2), (2,)]
  params = [Tensor(f32(*s, seed=i), requires_grad=True).realize() for i, s in enumerate(shapes)]
  x = Tensor(f32(8, 4, seed=9)).realize()
  h = x
  for i in range(0, 6, 2):
    h = h @ params[i] + params[i + 1]
    if i < 4: h = h.relu()
  return params, h.square().mean()

@pytest.mark.cpu
def test_sgd_update_is_one_schedule_of_in_place_kernels():
  params, loss = _mlp()
  loss.backward()
  Tensor.realize(*[p.grad for p in params])
  want = [p.numpy() - 0.1 * p.grad.numpy() for p in params]
  storage = [buf(p) for p in params]
  for p in params: p.assign(p - 0.1 * p.grad)
  items, _ = params[0].schedule(*params[1:])
  # one kernel per parameter, each writing its parameter's buffer (tinygrad 0.14 runs 6 kernels for this code too)
  assert len(items) == 6 and sorted(id(si.bufs[0]) for si in items) == sorted(id(b) for b in storage)
  assert kernels(*params) == 6
  for p, w, b in zip(params, want, storage):
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-6)
    assert buf(p) is b

@pytest.mark.cpu
def test_sgd_update_with_lazy_gradients():
  params, loss = _mlp()
  ref_params, ref_loss = _mlp()
  ref_loss.backward()
  want = [p.numpy() - 0.1 * p.grad.numpy() for p in ref_params]
  loss.backward()
  for p in params: p.assign(p - 0.1 * p.grad)
  # the backward pass and the update in one realize: tinygrad 0.14 runs 17 kernels for this code
  assert kernels(*params) <= 17
  for p, w in zip(params, want): np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)

@pytest.mark.cpu
def test_running_stats_update_with_the_forward_pass():
  # BatchNorm's running statistics: written in place in the same realize as the output that reads the batch statistics
  rm, rv = Tensor.zeros(3).contiguous().realize(), Tensor.ones(3).contiguous().realize()
  ref_m, ref_v = np.zeros(3, np.float32), np.ones(3, np.float32)
  for step in range(3):
    xs = f32(8, 3, seed=step)
    x = Tensor(xs)
    mean, var = x.mean(0), x.var(0)
    out = (x - mean) / (var + 1e-5).sqrt() * rm.reshape(1, 3).exp()   # reads the old running mean
    want = (xs - xs.mean(0)) / np.sqrt(xs.var(0, ddof=1) + 1e-5) * np.exp(ref_m)
    rm.assign(rm * 0.9 + mean * 0.1)
    rv.assign(rv * 0.9 + var * 0.1)
    ref_m, ref_v = ref_m * 0.9 + xs.mean(0) * 0.1, ref_v * 0.9 + xs.var(0, ddof=1) * 0.1
    Tensor.realize(out, rm, rv)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rm.numpy(), ref_m, rtol=1e-6)
    np.testing.assert_allclose(rv.numpy(), ref_v, rtol=1e-6)

# ***** autograd *****

@pytest.mark.cpu
def test_gradient_flows_to_the_written_value():
  # as in tinygrad 0.14 (and torch): the written value takes the gradient of the tensor it was written into; the old contents none
  w = Tensor([1.0, 2.0, 3.0], requires_grad=True).realize()
  x = Tensor([4.0, 5.0, 6.0], requires_grad=True).realize()
  w.assign(x * 2)
  (w * w).sum().backward()
  np.testing.assert_equal(w.grad.numpy(), [16.0, 20.0, 24.0])
  np.testing.assert_equal(x.grad.numpy(), [32.0, 40.0, 48.0])
  # through a view: the gradient of the written elements (tinygrad 0.14 has no gradient rule for this one)
  w = Tensor([0.0, 0.0, 0.0, 0.0], requires_grad=True).realize()
  x = Tensor([4.0, 5.0], requires_grad=True).realize()
  w[1:3] = x * 2
  (w * Tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [4.0, 6.0])
  np.testing.assert_equal(w.numpy(), [0.0, 8.0, 10.0, 0.0])

# ***** errors *****

def test_errors():
  t = Tensor([1.0, 2.0, 3.0]).realize()
  with pytest.raises(RuntimeError, match=r"dtypes.float.*dtypes.int"): t.assign(Tensor([1, 2, 3]))
  with pytest.raises(RuntimeError, match=r"\(2,\) to shape \(3,\)"): t.assign(Tensor([1.0, 2.0]))
  with pytest.raises(RuntimeError, match=r"expanded view \(shape \(2, 3\)\)"): t.reshape(1, 3).expand(2, 3).assign(Tensor.ones(2, 3))
  with pytest.raises(RuntimeError, match="same device"): t.assign(Tensor([1.0, 2.0, 3.0], device="PYTHON"))

def test_two_writes_of_one_version_raise():
  a = Tensor([1.0, 2.0, 3.0]).realize()
  v = a.reshape(1, 3)   # a plain reshape of the buffer: assigned as a whole, it changes alone (as in tinygrad)
  a.assign(a + 1)
  v.assign(v * 2)
  with pytest.raises(RuntimeError, match="two assigns"): Tensor.realize(a, v)

# ***** random programs of writes and reads against numpy *****

def _random_program(seed:int):
  rng = np.random.default_rng(seed)
  ref = rng.standard_normal((4, 6)).astype(np.float32)
  a = Tensor(ref.copy()).realize()
  reads: list[tuple[Tensor, np.ndarray]] = []
  pending: list[Tensor] = []
  for _ in range(12):
    k = rng.integers(7)
    r0, r1 = sorted(rng.integers(0, 5, 2))
    r1 += 1
    c = float(rng.integers(1, 4))
    if k == 0: a.assign(a * 0.5 + c); ref = ref * 0.5 + c
    elif k == 1: a[r0:r1] = c; ref[r0:r1] = c
    elif k == 2: a[:, ::2] += c; ref[:, ::2] += c
    elif k == 3: a.T[1:4].assign(a.T[1:4] * -1); ref.T[1:4] *= -1
    elif k == 4: a.assign(a.flip(1)); ref = ref[:, ::-1].copy()
    elif k == 5:   # a read of the current value, realized with later writes
      pending.append(t := a.sum(1) * 1)
      reads.append((t, ref.sum(1)))
    else:   # realize what is pending: the reads so far must still see the values they were built on
      Tensor.realize(a, *pending)
      pending = []
  Tensor.realize(*pending, a)
  return a, ref, reads

@pytest.mark.cpu
@pytest.mark.parametrize("seed", range(6))
def test_random_programs(seed):
  a, ref, reads = _random_program(seed)
  np.testing.assert_allclose(a.numpy(), ref, rtol=1e-5, atol=1e-5)
  for t, want in reads: np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-5)

@pytest.mark.cpu
def test_reading_both_versions_in_one_kernel_raises():
  # one kernel can't read a buffer's contents from before a write and after it (tinygrad 0.14 raises too)
  a = Tensor([1.0, 2.0, 3.0]).realize()
  old = a * 1
  a.assign(a + 10)
  with pytest.raises(RuntimeError, match="both before and after an assign"): (old + a).realize()
  old.realize()   # the earlier read first: then both are fine
  np.testing.assert_equal((old + a).numpy(), [12.0, 14.0, 16.0])

@pytest.mark.cpu
def test_writes_whose_values_read_each_other():
  # each new value reads both old values (a weight and a bias updated from gradients that read both): they can't both be computed in
  # place, so one is computed into a buffer first; the result is as if all reads came before all writes
  w0, b0 = np.array([1., 2., 3.], np.float32), np.array([0.5, -1., 2.], np.float32)
  w, b = Tensor(w0).contiguous().realize(), Tensor(b0).contiguous().realize()
  nw, nb = w - 0.1 * (w * 2 + b) * b, b - 0.1 * (w * 2 + b) * w
  w.assign(nw)
  b.assign(nb)
  Tensor.realize(w, b)
  y0 = w0 * 2 + b0
  np.testing.assert_allclose(w.numpy(), w0 - 0.1 * y0 * b0, rtol=1e-6)
  np.testing.assert_allclose(b.numpy(), b0 - 0.1 * y0 * w0, rtol=1e-6)

@pytest.mark.cpu
def test_overwritten_values_take_no_gradient():
  # tinygrad's test_set_overlapping_backward: the old contents keep the gradient only where a later write did not overwrite them
  w = f32(6, seed=3)
  z, x, y = Tensor.zeros(6), Tensor.ones(4).contiguous(), Tensor.ones(4) * 2
  z[:4] = x
  z[2:] = y
  (z * Tensor(w)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), w[:4] * np.array([1, 1, 0, 0], np.float32))
  np.testing.assert_allclose(y.grad.numpy(), w[2:])
  # a strided write into a tensor assigned as a whole: x keeps the gradient of the columns the write skipped
  w2 = f32(3, 4, seed=4)
  z, x = Tensor.zeros(3, 4), Tensor(f32(3, 4, seed=5)).contiguous() * 3
  z.assign(x)
  z[:, ::2] = Tensor.ones(3, 2) * 5
  (z * Tensor(w2)).sum().backward()
  keep = np.zeros((3, 4), np.float32)
  keep[:, 1::2] = 1
  np.testing.assert_allclose(x.grad.numpy(), w2 * keep)
