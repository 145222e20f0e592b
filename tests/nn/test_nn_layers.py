# tinygrad.nn layers: parameter names, shapes and initialisation as tinygrad 0.14 (and torch), every forward against a numpy formula
# written here, BatchNorm's running statistics in training vs evaluation, and bad inputs.
import itertools
import math
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, nn, dtypes, Context

pytestmark = pytest.mark.cpu

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def close(t:Tensor, ref, atol=1e-5, rtol=1e-5):
  got, ref = t.numpy(), np.asarray(ref)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)
def params(layer) -> dict[str, Tensor]: return {k: v for k, v in vars(layer).items() if isinstance(v, Tensor)}

# ***** numpy references *****
def np_conv(x, w, b, stride, dilation, pads, groups):
  """Cross-correlation of x (N, C, *sp) with w (O, C/groups, *k); pads is [(begin, end)] per spatial dim."""
  nd = x.ndim - 2
  x = np.pad(x, [(0, 0), (0, 0)] + list(pads))
  k = w.shape[2:]
  out_sp = [(x.shape[2 + i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
  O, cpg = w.shape[0], w.shape[1]
  out = np.zeros((x.shape[0], O, *out_sp), np.float64)
  for o in range(O):
    g = o // (O // groups)
    xs = x[:, g * cpg:(g + 1) * cpg]
    for pos in itertools.product(*[range(s) for s in out_sp]):
      for kk in itertools.product(*[range(s) for s in k]):
        idx = tuple(p * s + q * d for p, s, q, d in zip(pos, stride, kk, dilation))
        out[(slice(None), o) + pos] += (xs[(slice(None), slice(None)) + idx] * w[(o, slice(None)) + kk]).sum(1)
  if b is not None: out += b.reshape((1, -1) + (1,) * nd)
  return out

def np_conv_transpose(x, w, b, stride, dilation, padding, output_padding, groups):
  """Scatter form: every input element adds w times itself at stride*i + dilation*k, then the padding is cropped."""
  nd, N, C = x.ndim - 2, x.shape[0], x.shape[1]
  k, opg = w.shape[2:], w.shape[1]
  full = [(x.shape[2 + i] - 1) * stride[i] + dilation[i] * (k[i] - 1) + 1 + output_padding[i] for i in range(nd)]
  out = np.zeros((N, opg * groups, *full), np.float64)
  cpg = C // groups
  for c in range(C):
    g = c // cpg
    for pos in itertools.product(*[range(s) for s in x.shape[2:]]):
      for kk in itertools.product(*[range(s) for s in k]):
        idx = tuple(p * s + q * d for p, s, q, d in zip(pos, stride, kk, dilation))
        out[(slice(None), slice(g * opg, (g + 1) * opg)) + idx] += x[(slice(None), c) + pos][:, None] * w[(c, slice(None)) + kk][None]
  out = out[(slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(padding, full))]
  if b is not None: out += b.reshape((1, -1) + (1,) * nd)
  return out

def np_norm(x, axes, eps):
  m = x.mean(axis=axes, keepdims=True)
  return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)
def chan(v, nd): return v.reshape((1, -1) + (1,) * (nd - 2))
def sigmoid(x): return 1 / (1 + np.exp(-x))

# ***** parameters: names, shapes, dtypes, initialisation *****
class TestParameters:
  def test_linear(self):
    lin = nn.Linear(16, 5)
    assert {k: v.shape for k, v in params(lin).items()} == {"weight": (5, 16), "bias": (5,)}
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert np.abs(w).max() <= 1 / 4 and np.abs(b).max() <= 1 / 4 and w.std() > 0.1   # uniform in +-1/sqrt(16)
    assert nn.Linear(3, 2, bias=False).bias is None

  def test_conv(self):
    c = nn.Conv2d(4, 6, 3, groups=2)
    assert c.weight.shape == (6, 2, 3, 3) and c.bias.shape == (6,) and c.kernel_size == (3, 3)
    assert np.abs(c.weight.numpy()).max() <= 1 / math.sqrt(4 * 9)
    c1 = nn.Conv1d(3, 5, 4, bias=False)
    assert isinstance(c1, nn.Conv2d) and c1.weight.shape == (5, 3, 4) and c1.bias is None
    assert nn.Conv2d(2, 3, (2, 4)).weight.shape == (3, 2, 2, 4)
    t = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert t.weight.shape == (4, 3, 3, 3) and t.bias.shape == (6,)
    assert nn.ConvTranspose1d(3, 2, 5).weight.shape == (3, 2, 5)

  def test_same_padding(self):
    # 0.14 stores 'same' as flat (begin, end) pads, last dim first, the odd one after
    assert nn.Conv2d(1, 1, (3, 4), padding="same").padding == (1, 2, 1, 1)
    assert nn.Conv2d(1, 1, (3, 2), padding="same", dilation=2).padding == (1, 1, 2, 2)
    assert nn.Conv1d(1, 1, 5, padding="SAME").padding == (2, 2)

  def test_norms(self):
    bn = nn.BatchNorm(3)
    assert set(params(bn)) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    assert bn.num_batches_tracked.dtype == dtypes.long and bn.num_batches_tracked.shape == ()
    assert not bn.running_mean.is_param and not bn.running_var.is_param and not bn.num_batches_tracked.is_param and bn.weight.is_param
    np.testing.assert_equal(bn.running_var.numpy(), np.ones(3))
    assert nn.BatchNorm2d is nn.BatchNorm and nn.BatchNorm3d is nn.BatchNorm
    bn2 = nn.BatchNorm(3, affine=False, track_running_stats=False)
    assert bn2.weight is None and bn2.bias is None and not hasattr(bn2, "running_mean")
    ln = nn.LayerNorm((2, 3))
    assert ln.weight.shape == (2, 3) and ln.axis == (-1, -2)
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None
    assert nn.GroupNorm(2, 6).weight.shape == (6,) and nn.InstanceNorm(5).bias.shape == (5,)
    assert nn.RMSNorm(7).weight.shape == (7,) and nn.RMSNorm(7, elementwise_affine=False).weight is None

  def test_embedding_lstm(self):
    e = nn.Embedding(10, 4)
    assert e.weight.shape == (10, 4) and np.abs(e.weight.numpy()).max() <= math.sqrt(6 / 14)
    cell = nn.LSTMCell(3, 5)
    shapes = {k: v.shape for k, v in params(cell).items()}
    assert shapes == {"weight_ih": (20, 3), "weight_hh": (20, 5), "bias_ih": (20,), "bias_hh": (20,)}
    assert np.abs(cell.weight_ih.numpy()).max() <= 1 / math.sqrt(5)
    assert nn.LSTMCell(3, 5, bias=False).bias_ih is None

  def test_parameters_are_own_buffers(self):
    # equal initial values must not share storage: writing one layer's parameter leaves the other layer's alone
    a, b = nn.LayerNorm(3), nn.LayerNorm(3)
    Tensor.realize(a.weight, b.weight, a.bias, b.bias)
    a.weight.assign(Tensor([2.0, 3.0, 4.0]))
    np.testing.assert_equal(b.weight.numpy(), np.ones(3))
    np.testing.assert_equal(a.weight.numpy(), [2.0, 3.0, 4.0])

  def test_constant_initialised_parameters_get_gradients(self):
    ln, bn = nn.LayerNorm(3), nn.BatchNorm(3)
    x, up = rnd(4, 3), rnd(4, 3, seed=1)
    with Context(TRAINING=1): ((ln(Tensor(x)) + bn(Tensor(x))) * Tensor(up)).sum().backward()
    close(ln.weight.grad, (np_norm(x, (1,), 1e-5) * up).sum(0), atol=1e-5)
    close(ln.bias.grad, up.sum(0), atol=1e-5)
    close(bn.weight.grad, (np_norm(x, (0,), 1e-5) * up).sum(0), atol=1e-4)
    close(bn.bias.grad, up.sum(0), atol=1e-5)

# ***** forwards against numpy *****
class TestForward:
  @pytest.mark.parametrize("dev", DEVICES)
  def test_linear(self, dev):
    lin = nn.Linear(4, 3)
    lin.weight, lin.bias = lin.weight.to(dev), lin.bias.to(dev)
    x = rnd(2, 5, 4)
    close(lin(Tensor(x, device=dev)), x @ lin.weight.numpy().T + lin.bias.numpy())
    lin2 = nn.Linear(4, 3, bias=False)
    close(lin2(Tensor(x)), x @ lin2.weight.numpy().T)

  @pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=1), dict(padding=(1, 0)), dict(padding="same"),
                                  dict(padding="same", dilation=2), dict(dilation=(1, 2), stride=(2, 1)), dict(groups=2, bias=False)])
  def test_conv2d(self, kw):
    c = nn.Conv2d(4, 6, (3, 2) if kw.get("padding") != "same" else (3, 4), **kw)
    x = rnd(2, 4, 7, 6)
    st, dl = [(s, s) if isinstance(s, int) else s for s in (c.stride, c.dilation)]
    p = c.padding
    pads = [(p, p)] * 2 if isinstance(p, int) else [(p[0], p[0]), (p[1], p[1])] if len(p) == 2 else [(p[2], p[3]), (p[0], p[1])]
    ref = np_conv(x, c.weight.numpy(), None if c.bias is None else c.bias.numpy(), st, dl, pads, c.groups)
    close(c(Tensor(x)), ref, atol=1e-4)
    if kw.get("padding") == "same": assert ref.shape[2:] == x.shape[2:]

  @pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding="same", dilation=3), dict(groups=3)])
  def test_conv1d(self, kw):
    c = nn.Conv1d(3, 6, 3, **kw)
    x = rnd(2, 3, 9)
    p = c.padding
    pads = [(p, p)] if isinstance(p, int) else [(p[0], p[1])]
    ref = np_conv(x, c.weight.numpy(), c.bias.numpy(), (c.stride,), (c.dilation,), pads, c.groups)
    close(c(Tensor(x)), ref, atol=1e-4)

  @pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1), dict(dilation=2, groups=2)])
  def test_conv_transpose2d(self, kw):
    c = nn.ConvTranspose2d(4, 2, 3, **kw)
    x = rnd(2, 4, 3, 4)
    mk = lambda v: (v, v)  # noqa: E731
    ref = np_conv_transpose(x, c.weight.numpy(), c.bias.numpy(), mk(c.stride), mk(c.dilation), mk(c.padding), mk(c.output_padding), c.groups)
    close(c(Tensor(x)), ref, atol=1e-4)

  def test_conv_transpose1d(self):
    c = nn.ConvTranspose1d(3, 4, 3, stride=3, padding=1, bias=False)
    x = rnd(1, 3, 5)
    close(c(Tensor(x)), np_conv_transpose(x, c.weight.numpy(), None, (3,), (1,), (1,), (0,), 1), atol=1e-4)

  @pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5)])
  def test_batchnorm_train(self, shape):
    bn = nn.BatchNorm(3, momentum=0.2)
    bn.weight, bn.bias = Tensor(rnd(3, seed=1)), Tensor(rnd(3, seed=2))
    x = rnd(*shape) * 2 + 1
    axes = tuple(i for i in range(len(shape)) if i != 1)
    with Context(TRAINING=1): out = bn(Tensor(x)).numpy()
    np.testing.assert_allclose(out, np_norm(x, axes, 1e-5) * chan(bn.weight.numpy(), len(shape)) + chan(bn.bias.numpy(), len(shape)),
                               atol=1e-4, rtol=1e-4)
    n = x.size // 3
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.2 * x.mean(axes), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.8 + 0.2 * x.var(axes) * n / (n - 1), atol=1e-5, rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1

  def test_batchnorm_running_stats_and_eval(self):
    bn = nn.BatchNorm(2)
    rm, rv = np.zeros(2), np.ones(2)
    xs = [rnd(4, 2, 3, seed=s) * (s + 1) for s in range(3)]
    with Context(TRAINING=1):
      for x in xs:
        bn(Tensor(x)).realize()
        rm = 0.9 * rm + 0.1 * x.mean((0, 2))
        rv = 0.9 * rv + 0.1 * x.var((0, 2), ddof=1)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)
    assert bn.num_batches_tracked.item() == 3
    # evaluation normalises with the running statistics and leaves them alone
    x = rnd(3, 2, 3, seed=9)
    with Context(TRAINING=0): out = bn(Tensor(x))
    close(out, (x - chan(rm, 3)) / np.sqrt(chan(rv, 3) + 1e-5), atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
    assert bn.num_batches_tracked.item() == 3

  def test_batchnorm_no_running_stats(self):
    # without running statistics it normalises with the batch's, also in evaluation
    bn = nn.BatchNorm(3, affine=False, track_running_stats=False)
    x = rnd(5, 3, 2)
    close(bn(Tensor(x)), np_norm(x, (0, 2), 1e-5), atol=1e-5)

  def test_batchnorm_grad(self):
    # d(sum(w_c * bn(x)))/dx matches the analytic batchnorm gradient (the detached mean in the variance is exact)
    bn = nn.BatchNorm(2, affine=False)
    x = rnd(4, 2, 3)
    xt = Tensor(x)
    w = rnd(4, 2, 3, seed=5)
    with Context(TRAINING=1): (bn(xt) * Tensor(w)).sum().backward()
    axes, n = (0, 2), 12
    xh, inv = np_norm(x, axes, 1e-5), 1 / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    ref = inv / n * (n * w - w.sum(axes, keepdims=True) - xh * (w * xh).sum(axes, keepdims=True))
    np.testing.assert_allclose(xt.grad.numpy(), ref, atol=1e-4, rtol=1e-4)

  @pytest.mark.parametrize("shape", [(2, 6, 5), (3, 6, 2, 2), (2, 6)])
  def test_groupnorm(self, shape):
    gn = nn.GroupNorm(3, 6)
    gn.weight, gn.bias = Tensor(rnd(6, seed=1)), Tensor(rnd(6, seed=2))
    x = rnd(*shape) * 3 - 1
    ref = np_norm(x.reshape(shape[0], 3, -1), (2,), 1e-5).reshape(shape) * chan(gn.weight.numpy(), len(shape)) + chan(gn.bias.numpy(), len(shape))
    close(gn(Tensor(x)), ref, atol=1e-4)

  def test_instancenorm(self):
    inn = nn.InstanceNorm(3)
    inn.weight, inn.bias = Tensor(rnd(3, seed=1)), Tensor(rnd(3, seed=2))
    x = rnd(2, 3, 4, 5)
    close(inn(Tensor(x)), np_norm(x, (2, 3), 1e-5) * chan(inn.weight.numpy(), 4) + chan(inn.bias.numpy(), 4), atol=1e-4)
    close(nn.InstanceNorm(3, affine=False)(Tensor(x)), np_norm(x, (2, 3), 1e-5), atol=1e-4)

  def test_layernorm(self):
    ln = nn.LayerNorm((3, 4), eps=1e-3)
    ln.weight, ln.bias = Tensor(rnd(3, 4, seed=1)), Tensor(rnd(3, 4, seed=2))
    x = rnd(2, 3, 4)
    close(ln(Tensor(x)), np_norm(x, (1, 2), 1e-3) * ln.weight.numpy() + ln.bias.numpy(), atol=1e-4)
    close(nn.LayerNorm(4, elementwise_affine=False)(Tensor(x)), np_norm(x, (2,), 1e-5), atol=1e-4)

  def test_layernorm2d(self):
    ln = nn.LayerNorm2d(3)
    ln.weight, ln.bias = Tensor(rnd(3, seed=1)), Tensor(rnd(3, seed=2))
    x = rnd(2, 3, 4, 2)
    close(ln(Tensor(x)), np_norm(x, (1,), 1e-5) * chan(ln.weight.numpy(), 4) + chan(ln.bias.numpy(), 4), atol=1e-4)

  def test_rmsnorm(self):
    rms = nn.RMSNorm(5)
    rms.weight = Tensor(rnd(5, seed=1))
    x = rnd(3, 5)
    close(rms(Tensor(x)), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * rms.weight.numpy(), atol=1e-5)
    # half input: normalised in float32, returned in half
    out = nn.RMSNorm(5, elementwise_affine=False)(Tensor(x, dtype=dtypes.half))
    assert out.dtype == dtypes.half
    np.testing.assert_allclose(out.numpy().astype(np.float32), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6), atol=3e-3, rtol=3e-3)

  def test_embedding(self):
    e = nn.Embedding(7, 3)
    idx = np.array([[0, 6, 2], [2, 2, 1]], np.int32)
    close(e(Tensor(idx)), e.weight.numpy()[idx])
    close(e(Tensor(np.array(4, np.int64))), e.weight.numpy()[4])

  def test_embedding_grad(self):
    e = nn.Embedding(5, 2)
    idx = np.array([1, 3, 1, 0])
    g = rnd(4, 2)
    (e(Tensor(idx)) * Tensor(g)).sum().backward()
    ref = np.zeros((5, 2), np.float32)
    np.add.at(ref, idx, g)
    close(e.weight.grad, ref)

  def test_lstmcell(self):
    cell = nn.LSTMCell(3, 4)
    cell.bias_ih, cell.bias_hh = Tensor(rnd(16, seed=1)), Tensor(rnd(16, seed=2))
    wi, wh, bi, bh = (getattr(cell, k).numpy() for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    def ref(x, h, c):
      i, f, g, o = np.split(x @ wi.T + bi + h @ wh.T + bh, 4, axis=1)
      c2 = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
      return sigmoid(o) * np.tanh(c2), c2
    x, h, c = rnd(2, 3), rnd(2, 4, seed=3), rnd(2, 4, seed=4)
    h2, c2 = cell(Tensor(x), (Tensor(h), Tensor(c)))
    rh, rc = ref(x, h, c)
    close(h2, rh, atol=1e-5)
    close(c2, rc, atol=1e-5)
    # no state: zeros
    h0, c0 = cell(Tensor(x))
    rh, rc = ref(x, np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    close(h0, rh, atol=1e-5)
    close(c0, rc, atol=1e-5)

# ***** bad inputs *****
class TestBadInput:
  def test_shapes(self):
    with pytest.raises(RuntimeError, match=r"Linear: input of shape \(2, 5\) doesn't match in_features=3"): nn.Linear(3, 4)(Tensor.ones(2, 5))
    with pytest.raises(RuntimeError, match=r"Conv2d: expected input of shape \(N, 3, \.\.\.\), got \(2, 5, 6, 6\)"):
      nn.Conv2d(3, 4, 3)(Tensor.ones(2, 5, 6, 6))
    with pytest.raises(RuntimeError, match=r"Conv2d: expected 4-d input .* got \(3, 6, 6\)"): nn.Conv2d(3, 4, 3)(Tensor.ones(3, 6, 6))
    with pytest.raises(RuntimeError, match=r"Conv2d: expected 3-d input .* got \(1, 3, 6, 6\)"): nn.Conv1d(3, 4, 3)(Tensor.ones(1, 3, 6, 6))
    with pytest.raises(RuntimeError, match=r"ConvTranspose2d: expected input of shape \(N, 4, \.\.\.\)"):
      nn.ConvTranspose2d(4, 2, 3)(Tensor.ones(1, 2, 3, 3))
    with pytest.raises(RuntimeError, match=r"BatchNorm: expected input of shape \(N, 3, \.\.\.\), got \(2, 4, 5\)"):
      nn.BatchNorm(3)(Tensor.ones(2, 4, 5))
    with pytest.raises(RuntimeError, match=r"GroupNorm: expected input of shape \(N, 4, \.\.\.\), got \(2, 6, 3\)"):
      nn.GroupNorm(2, 4)(Tensor.ones(2, 6, 3))
    with pytest.raises(RuntimeError, match=r"InstanceNorm: .*\(N, 3, \.\.\.\), got \(6,\)"): nn.InstanceNorm(3)(Tensor.ones(6))
    with pytest.raises(RuntimeError, match=r"LayerNorm: the last dims of the input \(2, 5\) must be normalized_shape \(4,\)"):
      nn.LayerNorm(4)(Tensor.ones(2, 5))
    with pytest.raises(RuntimeError, match=r"LayerNorm2d: expected 4-d input"): nn.LayerNorm2d(3)(Tensor.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"RMSNorm: the last dim of the input \(2, 3\) must be 4"): nn.RMSNorm(4)(Tensor.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"LSTMCell: expected input of shape \(batch, 3\), got \(2, 5\)"): nn.LSTMCell(3, 4)(Tensor.ones(2, 5))
    with pytest.raises(RuntimeError, match=r"LSTMCell: h and c must have shape \(2, 4\)"):
      nn.LSTMCell(3, 4)(Tensor.ones(2, 3), (Tensor.ones(2, 4), Tensor.ones(1, 4)))

  def test_batchnorm_one_value_per_channel(self):
    with Context(TRAINING=1), pytest.raises(ValueError, match=r"more than 1 value per channel .* \(1, 3\)"): nn.BatchNorm(3)(Tensor.ones(1, 3))

  def test_constructor_args(self):
    with pytest.raises(ValueError, match="Invalid padding string 'valid'"): nn.Conv2d(2, 4, 3, padding="valid")
    with pytest.raises(ValueError, match=r"padding='same' is not supported for strided convolutions \(stride=2\)"):
      nn.Conv2d(2, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match=r"in_channels \(3\) and out_channels \(4\) must be divisible by groups \(2\)"): nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"): nn.GroupNorm(2, 5)

  def test_embedding_float_index(self):
    with pytest.raises(TypeError, match="Expected integer dtype for index in embedding, got dtypes.float"): nn.Embedding(4, 2)(Tensor([1.0]))

def test_lazy_submodules():
  import tinygrad.nn as tnn
  with pytest.raises(AttributeError, match="has no attribute 'nope'"): tnn.nope  # noqa: B018
  assert tnn.optim.SGD is nn.optim.SGD

def test_state_dict_round_trip_after_training(tmp_path):
  # the layers' names are the state dict's keys (torch's too); trained weights and BatchNorm statistics survive safe_save/safe_load
  from tinygrad.nn.state import get_state_dict, get_parameters, load_state_dict, safe_save, safe_load
  class Model:
    def __init__(self): self.fc1, self.bn, self.fc2 = nn.Linear(4, 3), nn.BatchNorm(3), nn.Linear(3, 2)
    def __call__(self, x): return self.fc2(self.bn(self.fc1(x)).relu())
  m = Model()
  assert sorted(get_state_dict(m)) == ["bn.bias", "bn.num_batches_tracked", "bn.running_mean", "bn.running_var", "bn.weight",
                                       "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
  x = Tensor(rnd(5, 4))
  opt = nn.optim.SGD(get_parameters(m), lr=0.1)
  with Context(TRAINING=1):
    for _ in range(2):
      opt.zero_grad()
      m(x).square().mean().backward()
      opt.step()
  safe_save(get_state_dict(m), fn := str(tmp_path / "m.safetensors"))
  m2 = Model()
  load_state_dict(m2, safe_load(fn), verbose=False)
  assert m2.bn.num_batches_tracked.item() == 2
  np.testing.assert_equal(m2(x).numpy(), m(x).numpy())
