# tinygrad.nn layers and nn.optim against torch (opt-in group: pytest -m torch): our weights copied into the torch module, then the
# forward, the input and parameter gradients, BatchNorm's running statistics, state-dict names, and 20-step optimizer trajectories.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tinygrad import Tensor, nn, Context  # noqa: E402
from tinygrad.nn import optim  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel lengths")]

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def tensors(layer) -> dict[str, Tensor]: return {k: v for k, v in vars(layer).items() if isinstance(v, Tensor)}

def load_into_torch(ours, theirs) -> None:
  """Copies every tensor of our layer into the torch module's tensor of the same name (they must name the same set)."""
  sd = theirs.state_dict()
  assert set(tensors(ours)) == set(sd), (sorted(tensors(ours)), sorted(sd))
  with torch.no_grad():
    for k, v in tensors(ours).items(): sd[k].copy_(torch.from_numpy(v.numpy()))

def compare(ours, theirs, x:np.ndarray, *, training=True, atol=1e-4, rtol=1e-4, integer_input=False):
  """Forward and backward (of sum(out * a fixed random weight)) through both; outputs, input grad and parameter grads agree."""
  load_into_torch(ours, theirs)
  theirs.train(training)
  up = None
  xt = Tensor(x)
  tx = torch.from_numpy(x)
  if not integer_input: tx.requires_grad_(True)
  with Context(TRAINING=int(training)):
    out = ours(xt)
    up = rnd(*out.shape, seed=7)
    (out * Tensor(up)).sum().backward()
  tout = theirs(tx)
  (tout * torch.from_numpy(up)).sum().backward()
  np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=atol, rtol=rtol)
  if not integer_input: np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), atol=atol, rtol=rtol)
  for name, p in theirs.named_parameters():
    np.testing.assert_allclose(getattr(ours, name).grad.numpy(), p.grad.numpy(), atol=atol, rtol=rtol, err_msg=name)
  return ours, theirs

@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
  compare(nn.Linear(5, 3, bias=bias), torch.nn.Linear(5, 3, bias=bias), rnd(4, 5))

@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=(2, 1), dilation=(1, 2)), dict(padding="same"),
                                dict(padding="same", dilation=2), dict(groups=2, bias=False)])
def test_conv2d(kw):
  k = (3, 4) if kw.get("padding") == "same" else 3
  compare(nn.Conv2d(4, 6, k, **kw), torch.nn.Conv2d(4, 6, k, **kw), rnd(2, 4, 7, 8))

@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=2, dilation=2), dict(padding="same", groups=3)])
def test_conv1d(kw):
  compare(nn.Conv1d(3, 6, 4, **kw), torch.nn.Conv1d(3, 6, 4, **kw), rnd(2, 3, 11))

@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(dilation=2, groups=2, bias=False)])
def test_conv_transpose(kw):
  compare(nn.ConvTranspose2d(4, 6, 3, **kw), torch.nn.ConvTranspose2d(4, 6, 3, **kw), rnd(2, 4, 4, 5))
  compare(nn.ConvTranspose1d(4, 2, 3, **kw), torch.nn.ConvTranspose1d(4, 2, 3, **kw), rnd(2, 4, 6))

def test_batchnorm_train_then_eval():
  ours, theirs = nn.BatchNorm2d(3, momentum=0.3), torch.nn.BatchNorm2d(3, momentum=0.3)
  ours.weight.assign(Tensor(rnd(3, seed=1)))
  ours.bias.assign(Tensor(rnd(3, seed=2)))
  load_into_torch(ours, theirs)
  for s in range(3):
    x = rnd(4, 3, 2, 3, seed=s) * (s + 1)
    with Context(TRAINING=1): out = ours(Tensor(x)).numpy()
    theirs.train()
    np.testing.assert_allclose(out, theirs(torch.from_numpy(x)).detach().numpy(), atol=1e-4, rtol=1e-4)
  for k in ("running_mean", "running_var", "num_batches_tracked"):
    np.testing.assert_allclose(getattr(ours, k).numpy(), theirs.state_dict()[k].numpy(), atol=1e-5, rtol=1e-5, err_msg=k)
  x = rnd(2, 3, 2, 2, seed=9)
  with Context(TRAINING=0): out = ours(Tensor(x)).numpy()
  theirs.eval()
  np.testing.assert_allclose(out, theirs(torch.from_numpy(x)).detach().numpy(), atol=1e-5, rtol=1e-5)

def test_batchnorm_grads():
  compare(nn.BatchNorm(3), torch.nn.BatchNorm1d(3), rnd(5, 3, 4))
  compare(nn.BatchNorm3d(2), torch.nn.BatchNorm3d(2), rnd(2, 2, 2, 3, 2), training=False)

def test_norms():
  compare(nn.GroupNorm(2, 6), torch.nn.GroupNorm(2, 6), rnd(3, 6, 4))
  compare(nn.InstanceNorm(3), torch.nn.InstanceNorm2d(3, affine=True), rnd(2, 3, 4, 5))
  compare(nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4)), rnd(2, 3, 4))
  compare(nn.RMSNorm(5, eps=1e-6), torch.nn.RMSNorm(5, eps=1e-6), rnd(3, 5))

def test_embedding():
  compare(nn.Embedding(10, 4), torch.nn.Embedding(10, 4), np.array([[1, 9, 1], [0, 3, 3]]), integer_input=True)

def test_lstmcell():
  ours, theirs = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
  ours.bias_ih.assign(Tensor(rnd(16, seed=1)))
  ours.bias_hh.assign(Tensor(rnd(16, seed=2)))
  load_into_torch(ours, theirs)
  x, h, c = rnd(2, 3), rnd(2, 4, seed=3), rnd(2, 4, seed=4)
  h2, c2 = ours(Tensor(x), (Tensor(h), Tensor(c)))
  (h2.sum() + (c2 * 2).sum()).backward()
  th, tc = theirs(torch.from_numpy(x), (torch.from_numpy(h), torch.from_numpy(c)))
  (th.sum() + (tc * 2).sum()).backward()
  np.testing.assert_allclose(h2.numpy(), th.detach().numpy(), atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(c2.numpy(), tc.detach().numpy(), atol=1e-5, rtol=1e-5)
  for name, p in theirs.named_parameters():
    np.testing.assert_allclose(getattr(ours, name).grad.numpy(), p.grad.numpy(), atol=1e-5, rtol=1e-5, err_msg=name)

# ***** optimizers: 20 steps of least squares from the same start *****
X, Y = rnd(6, 4, seed=1), rnd(6, 3, seed=2)
W0, B0 = rnd(3, 4, seed=3), rnd(3, seed=4)
CASES = {
  "sgd": (lambda ps: optim.SGD(ps, lr=0.01, weight_decay=0.1), lambda ps: torch.optim.SGD(ps, lr=0.01, weight_decay=0.1)),
  "sgd_momentum": (lambda ps: optim.SGD(ps, lr=0.005, momentum=0.9), lambda ps: torch.optim.SGD(ps, lr=0.005, momentum=0.9)),
  "sgd_nesterov": (lambda ps: optim.SGD(ps, lr=0.005, momentum=0.8, nesterov=True, weight_decay=0.01),
                   lambda ps: torch.optim.SGD(ps, lr=0.005, momentum=0.8, nesterov=True, weight_decay=0.01)),
  "adam": (lambda ps: optim.Adam(ps, lr=0.05, b1=0.8, b2=0.99, eps=1e-6), lambda ps: torch.optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6)),
  "adamw": (lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=0.1), lambda ps: torch.optim.AdamW(ps, lr=0.05, weight_decay=0.1)),
}

@pytest.mark.parametrize("name", CASES)
def test_optimizer_trajectory(name):
  ours_make, torch_make = CASES[name]
  w, b = Tensor(W0.copy()), Tensor(B0.copy())
  opt = ours_make([w, b])
  with Context(TRAINING=1):
    for _ in range(20):
      opt.zero_grad()
      ((Tensor(X) @ w.T + b - Tensor(Y)) ** 2).sum().backward()
      opt.step()
  tw, tb = torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)
  topt = torch_make([tw, tb])
  for _ in range(20):
    topt.zero_grad()
    ((torch.from_numpy(X) @ tw.T + tb - torch.from_numpy(Y)) ** 2).sum().backward()
    topt.step()
  np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=2e-4, atol=2e-5)
