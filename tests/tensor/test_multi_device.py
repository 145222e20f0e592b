"""Tensors sharded over several devices of one process (Tensor.shard): every op kind forward and backward against numpy, uneven shards,
all-reduce variants, data- and model-parallel training against one device."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, Device, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import SGD, Adam
from tinygrad.nn.state import get_parameters
from tinygrad.uop.ops import Ops

pytestmark = pytest.mark.cpu

@pytest.fixture(autouse=True, scope="module")
def _close_devices():
  # CPU:1, CPU:2, ... closed after these tests: later tests in this process see CPU alone, with all its cores
  yield
  for d in [d for d in list(Device._opened) if d.startswith("CPU:")]: Device.close(d)
D2 = ("CPU:0", "CPU:1")
D3 = ("CPU:0", "CPU:1", "CPU:2")

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

@pytest.mark.parametrize("devices", [D2, D3])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_shard_roundtrip_and_sizes(devices, axis):
  a = rnd(10, 6)
  s = Tensor(a).shard(devices, axis)
  assert s.device == tuple(d if d != "CPU:0" else "CPU" for d in devices) and s.shape == (10, 6)
  if axis is not None: assert sum(x.shape[axis] for x in s.uop.src) == a.shape[axis]
  np.testing.assert_array_equal(s.numpy(), a)
  np.testing.assert_array_equal(s.realize().numpy(), a)
  np.testing.assert_array_equal(s.to("CPU").numpy(), a)

def test_uneven_shard_sizes():
  s = Tensor(np.arange(10, dtype=np.float32)).shard(D3, axis=0)
  assert [x.shape[0] for x in s.uop.src] == [4, 3, 3]
  np.testing.assert_array_equal((s * 2 + 1).numpy(), np.arange(10) * 2 + 1)
  assert s.sum().item() == 45

def test_shard_errors():
  t = Tensor([1.0, 2.0])
  with pytest.raises(ValueError, match="different kinds"): t.shard(("CPU", "PYTHON"))
  with pytest.raises(RuntimeError, match="multi-device"): t.shard(D2).shard(D2)
  with pytest.raises(RuntimeError, match="same device"): t.shard(D2) + Tensor([1.0, 2.0], device="CPU:1")
  assert t.shard(("CPU",)).device == "CPU"

ELEMENTWISE = [lambda x, y: x + y, lambda x, y: x * y - y, lambda x, y: (x > y).where(x, y), lambda x, y: x.maximum(y).exp2(),
               lambda x, y: (x.abs() + 1).log() / (y * y + 1).sqrt()]
NP_ELEMENTWISE = [lambda x, y: x + y, lambda x, y: x * y - y, lambda x, y: np.where(x > y, x, y), lambda x, y: np.exp2(np.maximum(x, y)),
                  lambda x, y: np.log(np.abs(x) + 1) / np.sqrt(y * y + 1)]

@pytest.mark.parametrize("i", range(len(ELEMENTWISE)))
@pytest.mark.parametrize("ax_x,ax_y", [(0, 0), (0, None), (None, 1), (0, 1), (1, None)])
def test_elementwise_mixed_shardings(i, ax_x, ax_y):
  a, b = rnd(9, 4, seed=1), rnd(9, 4, seed=2)
  out = ELEMENTWISE[i](Tensor(a).shard(D3, ax_x), Tensor(b).shard(D3, ax_y))
  np.testing.assert_allclose(out.numpy(), NP_ELEMENTWISE[i](a, b), rtol=1e-5, atol=1e-6)

def test_broadcast_and_python_values():
  a, b = rnd(6, 4), rnd(4)
  s = Tensor(a).shard(D2, 0)
  np.testing.assert_allclose((s + Tensor(b).shard(D2) * 3 - 1).numpy(), a + b * 3 - 1, rtol=1e-6)
  np.testing.assert_allclose((2 ** s.clip(-1, 1)).numpy(), 2 ** np.clip(a, -1, 1), rtol=1e-6)

MOVEMENT = [
  ("reshape merge", lambda t: t.reshape(24, 5), lambda a: a.reshape(24, 5)),
  ("reshape split", lambda t: t.reshape(3, 2, 4, 5), lambda a: a.reshape(3, 2, 4, 5)),
  ("reshape across", lambda t: t.reshape(5, 24), lambda a: a.reshape(5, 24)),
  ("flatten", lambda t: t.flatten(), lambda a: a.reshape(-1)),
  ("permute", lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
  ("expand", lambda t: t.reshape(6, 4, 1, 5).expand(6, 4, 3, 5), lambda a: np.broadcast_to(a.reshape(6, 4, 1, 5), (6, 4, 3, 5))),
  ("shrink", lambda t: t[1:5, 2:, ::2], lambda a: a[1:5, 2:, ::2]),
  ("shrink one shard", lambda t: t[4:6], lambda a: a[4:6]),
  ("pad", lambda t: t.pad(((1, 2), (0, 1), (2, 0))), lambda a: np.pad(a, ((1, 2), (0, 1), (2, 0)))),
  ("flip", lambda t: t.flip(0), lambda a: a[::-1]),
  ("flip other", lambda t: t.flip(2), lambda a: a[:, :, ::-1]),
  ("index", lambda t: t[Tensor([5, 0, 2, 2], device=t.device)], lambda a: a[[5, 0, 2, 2]]),
  ("gather", lambda t: t.gather(1, Tensor(np.array([[[0], [3]]] * 6), device=t.device).expand(6, 2, 5)), None),
  ("cat", lambda t: t.cat(t * 2, dim=0), lambda a: np.concatenate([a, a * 2], 0)),
]

@pytest.mark.parametrize("name,fn,npfn", MOVEMENT, ids=[m[0] for m in MOVEMENT])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_movement(name, fn, npfn, axis):
  a = rnd(6, 4, 5)
  want = fn(Tensor(a)).numpy() if npfn is None else npfn(a)
  np.testing.assert_allclose(fn(Tensor(a).shard(D3, axis)).numpy(), want, rtol=1e-6)

REDUCES = [(r, d) for r in ("sum", "max", "min", "mean", "prod", "std") for d in (None, 0, 1, (0, 2))] + \
          [(r, d) for r in ("softmax", "argmax") for d in (0, 1, 2)]

@pytest.mark.parametrize("axis", [0, 1, 2, None])
@pytest.mark.parametrize("red,dim", REDUCES)
def test_reduce(axis, red, dim):
  a = rnd(6, 5, 4) * 0.5 + (1.0 if red == "prod" else 0.0)
  got = getattr(Tensor(a).shard(D3, axis), red)(dim).numpy()
  want = getattr(Tensor(a), red)(dim).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("ax_a,ax_b", [(0, None), (None, 1), (1, 0), (0, 1), (None, None), (1, None)])
def test_matmul_either_side_sharded(ax_a, ax_b):
  a, b = rnd(8, 6, seed=3), rnd(6, 5, seed=4)
  got = Tensor(a).shard(D2, ax_a) @ Tensor(b).shard(D2, ax_b)
  np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("axis", [0, 1, None])
def test_backward(axis):
  a, b = rnd(6, 4, seed=5), rnd(4, 3, seed=6)
  def loss(x, w): return ((x @ w).relu() * x.sum(1, keepdim=True)).softmax(1).log().mean()
  x0, w0 = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
  loss(x0, w0).backward()
  x1, w1 = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
  loss(x1.shard(D3, axis), w1.shard(D3)).backward()
  assert isinstance(x1.grad.device, str)   # the leaf's gradient is on the leaf's device
  np.testing.assert_allclose(x1.grad.numpy(), x0.grad.numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(w1.grad.numpy(), w0.grad.numpy(), rtol=1e-5, atol=1e-6)

def test_sharded_leaf_gradient_is_sharded():
  a = rnd(6, 4)
  x = Tensor(a).shard(D2, 0).requires_grad_()
  (x * x).sum().backward()
  assert x.grad.device == x.device
  np.testing.assert_allclose(x.grad.numpy(), 2 * a, rtol=1e-6)

@pytest.mark.parametrize("axis", [0, 1, None])
def test_setitem_and_assign(axis):
  a = rnd(6, 4)
  s = Tensor(a).shard(D3, axis).realize()
  s[1:4, 2] = 7.0
  a[1:4, 2] = 7.0
  np.testing.assert_array_equal(s.numpy(), a)
  s.assign(s * 2).realize()
  np.testing.assert_array_equal(s.numpy(), a * 2)
  assert s.device == tuple(d if d != "CPU:0" else "CPU" for d in D3)

def test_random_on_devices():
  Tensor.manual_seed(3)
  r = Tensor.rand(8, 4, device=D2)
  assert r.device == D2[:0] + ("CPU", "CPU:1") and r.shape == (8, 4)
  v = r.numpy()
  assert 0 <= v.min() and v.max() < 1 and len(np.unique(v)) > 16
  s = Tensor.ones(8, 4).shard(D2, 0)
  with Context(TRAINING=1): d = s.dropout(0.5)
  assert set(np.unique(d.numpy())) <= {0.0, 2.0}

def test_creation_on_devices():
  t = Tensor([[1, 2], [3, 4]], device=D2)
  assert t.device == ("CPU", "CPU:1")
  np.testing.assert_array_equal((t + 1).numpy(), [[2, 3], [4, 5]])
  e = Tensor.empty(3, 2, device=D2)
  assert e.device == ("CPU", "CPU:1") and e.shape == (3, 2)
  np.testing.assert_array_equal(Tensor.zeros(3, 2, device=D2).contiguous().numpy(), np.zeros((3, 2)))
  np.testing.assert_array_equal(Tensor.arange(6, device=D2).numpy(), np.arange(6))

@pytest.mark.parametrize("ring", [0, 2])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_all_reduce_variants(ring, n):
  devices = tuple(f"CPU:{i}" for i in range(n))
  a = rnd(n * 3 + 1, 5)
  s = Tensor(a).shard(devices, 0)
  for op, want in (("sum", a.sum(0)), ("max", a.max(0))):
    with Context(RING=ring): out = getattr(s, op)(0).realize()
    assert out.uop.op is Ops.MSTACK and out.uop.arg is None
    shards = [Tensor(x, device=d).numpy() for x, d in zip(out.uop.src, out.device)]
    for x in shards: np.testing.assert_array_equal(x, shards[0])   # the same bits on every device
    np.testing.assert_allclose(shards[0].reshape(-1), want, rtol=1e-5)

def test_all_reduce_of_one_row_per_device_is_two_copies_and_an_add():
  # each device's row goes to the all-reduce as it is (no kernel copying it), and each device's result is the buffer the add or the copy
  # writes (no kernel for the reshape that drops the summed axis)
  a = rnd(2, 1024)
  t = Tensor(a).shard(D2, 0).realize()
  assert sorted(si.ast.op.name for si in t.sum(0).schedule()[0]) == ["COPY", "COPY", "SINK"]
  out = t.sum(0).realize()
  for x, d in zip(out.uop.src, out.device): np.testing.assert_allclose(Tensor(x, device=d).numpy(), a.sum(0), rtol=1e-6)
  np.testing.assert_array_equal(t.max(0).numpy(), a.max(0))

def _mlp(): return [nn.Linear(4, 8), nn.Linear(8, 3)]
def _mlp_fwd(m, x): return m[1](m[0](x).relu())
def _cnn(): return [nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Linear(4 * 4 * 4, 3)]
def _cnn_fwd(m, x): return m[2](m[1](m[0](x)).relu().max_pool2d().flatten(1))

def _train(make, fwd, opt_cls, in_shape, devices):
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  model = make()
  params = get_parameters(model)
  Tensor.realize(*params)
  if devices:
    for p in params: p.shard_(devices)
  opt = opt_cls(params, lr=0.05)
  losses = []
  with Context(TRAINING=1):
    for _ in range(3):
      x, y = Tensor(rng.random((8,) + in_shape, dtype=np.float32)), Tensor(rng.integers(0, 3, 8))
      if devices: x, y = x.shard(devices, 0), y.shard(devices, 0)
      opt.zero_grad()
      loss = fwd(model, x).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      losses.append(loss.item())
  return losses, [p.numpy() for p in params]

@pytest.mark.parametrize("make,fwd,opt_cls,in_shape", [(_mlp, _mlp_fwd, SGD, (4,)), (_mlp, _mlp_fwd, Adam, (4,)),
                                                      (_cnn, _cnn_fwd, Adam, (1, 10, 10))], ids=["mlp-sgd", "mlp-adam", "cnn-adam"])
def test_data_parallel_training_matches_one_device(make, fwd, opt_cls, in_shape):
  l1, w1 = _train(make, fwd, opt_cls, in_shape, None)
  l2, w2 = _train(make, fwd, opt_cls, in_shape, D2)
  np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-6)
  for a, b in zip(w2, w1): np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

def test_model_parallel_linear():
  Tensor.manual_seed(1)
  lin = nn.Linear(6, 10)
  x = Tensor(rnd(5, 6))
  want = lin(x).numpy()
  lin.weight.shard_(D3, axis=0)
  lin.bias.shard_(D3, axis=0)
  out = lin(x.shard(D3))
  assert out.device == ("CPU", "CPU:1", "CPU:2")
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)

OPS = [("add", lambda t: t + 1), ("mul", lambda t: t * t), ("sum0", lambda t: t.sum(0, keepdim=True).expand(t.shape)),
       ("sum1", lambda t: t.sum(1, keepdim=True).expand(t.shape)), ("T", lambda t: t.T.contiguous().T), ("flip", lambda t: t.flip(1)),
       ("exp", lambda t: (t * 0.1).exp()), ("roll", lambda t: t.roll(1, 0)), ("pad", lambda t: t.pad(((1, 0), (0, 0)))[:-1])]

@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(range(len(OPS))), min_size=1, max_size=4), st.sampled_from([0, 1, None]), st.integers(2, 3),
       st.integers(1, 7))
def test_random_op_chains_match_one_device(chain, axis, ndev, rows):
  a = rnd(rows, 3, seed=rows)
  x, y = Tensor(a), Tensor(a).shard(tuple(f"CPU:{i}" for i in range(ndev)), axis)
  for i in chain: x, y = OPS[i][1](x), OPS[i][1](y)
  np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-5, atol=1e-5)

def test_jit_data_parallel_step_replays_like_eager():
  # the pattern of tinygrad's multi-device MNIST example: parameters copied to every device, each step's batch sharded, under TinyJit
  from tinygrad import TinyJit
  def run(jit:bool):
    Tensor.manual_seed(2)
    model = _mlp()
    params = get_parameters(model)
    Tensor.realize(*params)
    for p in params: p.to_(D2)
    opt = Adam(params, lr=0.05)
    data = Tensor(np.random.default_rng(1).random((64, 4), dtype=np.float32)).realize()
    labels = Tensor(np.random.default_rng(2).integers(0, 3, 64)).realize()
    def step(i:Tensor) -> Tensor:
      with Context(TRAINING=1):
        opt.zero_grad()
        idx = (Tensor.arange(8) + i * 8) % 64
        x, y = data[idx].shard_(D2, axis=0), labels[idx].shard_(D2, axis=0)
        loss = _mlp_fwd(model, x).sparse_categorical_crossentropy(y).backward()
        opt.step()
        return loss.realize()
    fn = TinyJit(step) if jit else step
    losses = [fn(Tensor([i]).reshape(()).realize()).item() for i in range(5)]
    return losses, [p.numpy() for p in params]
  (l1, w1), (l2, w2) = run(False), run(True)
  np.testing.assert_allclose(l2, l1, rtol=1e-6)
  assert len(set(l2)) == len(l2)   # every replay trained on its own batch
  for a, b in zip(w2, w1): np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

def _fake_mnist(d):
  # IDX files in MNIST's layout with a learnable pattern (a band whose position is the label): the example's data, made here
  import gzip
  import struct
  rng = np.random.default_rng(0)
  for prefix, n in (("train", 2000), ("t10k", 400)):
    y = rng.integers(0, 10, n).astype(np.uint8)
    x = rng.integers(0, 30, (n, 28, 28)).astype(np.uint8)
    for i, label in enumerate(y): x[i, 2 * label:2 * label + 6, 4:24] += 200
    (d / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + x.tobytes()))
    (d / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(struct.pack(">BBBBI", 0, 0, 8, 1, n) + y.tobytes()))

@pytest.mark.slow
def test_tinygrad_multigpu_mnist_example_runs_unchanged(tmp_path):
  # tinygrad's own example, from a tinygrad source checkout named by TINYGRAD_SRC (not part of this repository), on CPU:0 and CPU:1
  import os
  import pathlib
  import subprocess
  import sys
  if not (src := os.environ.get("TINYGRAD_SRC")) or not (example := pathlib.Path(src) / "examples" / "beautiful_mnist_multigpu.py").exists():
    pytest.skip("set TINYGRAD_SRC to a tinygrad source checkout to run its multi-device MNIST example")
  _fake_mnist(tmp_path)
  env = {**os.environ, "MNIST_URL": f"{tmp_path}/", "DEV": "CPU", "STEPS": "10", "BS": "64", "TARGET_EVAL_ACC_PCT": "90",
         "PYTHONPATH": str(pathlib.Path(__import__("tinygrad").__file__).parent.parent)}
  proc = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "test_acc=" in proc.stdout + proc.stderr
