# Autograd through the Tensor API: gradients of every differentiable op against central finite differences in float64
# (tests/helpers/gradcheck.py) or closed forms, backward()'s .grad semantics (tinygrad 0.14: every float tensor in the graph, accumulated),
# detach, requires_grad=False, errors, and that backward graphs still fuse into few kernels.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.gradcheck import gradcheck
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops

pytestmark = pytest.mark.cpu

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape)
def pos(*shape, seed=0): return np.abs(rnd(*shape, seed=seed)) + 0.5
A, B, P = rnd(3, 4), rnd(3, 4, seed=1), pos(3, 4, seed=2)

# (name, fn, inputs): every differentiable op of the Tensor API; inputs keep away from kinks (relu at 0, ties of max)
CASES = [
  ("add", lambda x, y: x + y, [A, B]),
  ("add_broadcast", lambda x, y: x + y, [A, rnd(4, seed=3)]),
  ("sub", lambda x, y: x - y, [A, B]),
  ("rsub_const", lambda x: 2.5 - x, [A]),
  ("mul", lambda x, y: x * y, [A, B]),
  ("mul_broadcast", lambda x, y: x * y, [A, rnd(3, 1, seed=3)]),
  ("div", lambda x, y: x / y, [A, P]),
  ("rdiv_const", lambda x: 1.0 / x, [P]),
  ("neg", lambda x: -x, [A]),
  ("pow", lambda x, y: x ** y, [P, B]),
  ("pow_const", lambda x: x ** 3, [A]),
  ("pow_frac", lambda x: x ** 0.5, [P]),
  ("rpow", lambda x: 2.0 ** x, [A]),
  ("sqrt", lambda x: x.sqrt(), [P]),
  ("exp", lambda x: x.exp(), [A]),
  ("exp2", lambda x: x.exp2(), [A]),
  ("log", lambda x: x.log(), [P]),
  ("log2", lambda x: x.log2(), [P]),
  ("sin", lambda x: x.sin(), [A]),
  ("cos", lambda x: x.cos(), [A]),
  ("reciprocal", lambda x: x.reciprocal(), [P]),
  ("square", lambda x: x.square(), [A]),
  ("relu", lambda x: x.relu(), [A]),
  ("abs", lambda x: x.abs(), [A]),
  ("clamp", lambda x: x.clamp(-0.5, 0.7), [A]),
  ("maximum", lambda x, y: x.maximum(y), [A, B]),
  ("minimum", lambda x, y: x.minimum(y), [A, B]),
  ("where", lambda x, y: (x > y).where(x, y * 2), [A, B]),
  ("sum", lambda x: x.sum(), [A]),
  ("sum_axis", lambda x: x.sum(axis=1, keepdim=True), [A]),
  ("mean", lambda x: x.mean(axis=0), [A]),
  ("max", lambda x: x.max(), [A]),
  ("max_axis", lambda x: x.max(axis=1), [A]),
  ("min_axis", lambda x: x.min(axis=0), [A]),
  ("prod", lambda x: x.prod(axis=1), [A]),
  ("matmul", lambda x, y: x @ y, [A, rnd(4, 2, seed=4)]),
  ("matvec", lambda x, y: x @ y, [A, rnd(4, seed=4)]),
  ("dot", lambda x, y: x.dot(y.T), [A, B]),
  ("reshape", lambda x: x.reshape(2, 6) * Tensor.arange(6).cast(dtypes.float64), [A]),
  ("expand", lambda x: x.reshape(3, 1, 4).expand(3, 2, 4), [A]),
  ("permute", lambda x: x.reshape(3, 2, 2).permute(2, 0, 1), [A]),
  ("transpose", lambda x: x.T, [A]),
  ("pad", lambda x: x.pad(((1, 2), (0, 1))), [A]),
  ("pad_value", lambda x: x.pad((1, 1), value=2.0), [A]),
  ("shrink", lambda x: x.shrink(((1, 3), (0, 2))), [A]),
  ("flip", lambda x: x.flip(0), [A]),
  ("squeeze_unsqueeze", lambda x: x.unsqueeze(0).squeeze(0).flatten(), [A]),
  ("getitem", lambda x: x[1:, ::2], [A]),
  ("getitem_neg_step", lambda x: x[::-1, 1:3], [A]),
  ("getitem_int", lambda x: x[1] * x[:, 2].sum(), [A]),
  ("cat", lambda x, y: x.cat(y, dim=1), [A, B]),
  ("stack", lambda x, y: Tensor.stack(x, y, dim=0), [A, B]),
  ("cast_float32", lambda x: (x.cast(dtypes.float32) * 3).cast(dtypes.float64), [A]),
  ("chain", lambda x, y: ((x * y).relu().sum(axis=1) / (y.exp().sum(axis=1) + 1)).sqrt(), [A, B]),
]

# ops of the other kind files: built from the primitives, their gradients come from the same rules
IMG, KER, LABELS, TARGETS = rnd(1, 2, 5, 5, seed=5), rnd(3, 2, 3, 3, seed=6), [1, 0, 3], (rnd(3, 4, seed=7) > 0).astype(np.float64)
CASES += [
  ("sigmoid", lambda x: x.sigmoid(), [A]),
  ("tanh", lambda x: x.tanh(), [A]),
  ("softmax", lambda x: x.softmax(axis=1), [A]),
  ("log_softmax", lambda x: x.log_softmax(axis=1), [A]),
  ("logsumexp", lambda x: x.logsumexp(axis=1), [A]),
  ("layernorm", lambda x: x.layernorm(), [A]),
  ("conv2d", lambda x, w: x.conv2d(w, padding=1), [IMG, KER]),
  ("avg_pool2d", lambda x: x.avg_pool2d(2), [IMG]),
  ("max_pool2d", lambda x: x.max_pool2d(2), [IMG]),
  ("sparse_categorical_crossentropy", lambda x: x.sparse_categorical_crossentropy(Tensor(LABELS)), [A]),
  ("binary_crossentropy_logits", lambda x: x.binary_crossentropy_logits(Tensor(TARGETS)), [A]),
  ("gather", lambda x: x.gather(1, Tensor([[0, 2], [1, 1], [3, 0]])), [A]),
  ("einsum", lambda x, y: Tensor.einsum("ij,kj->ik", x, y), [A, B]),
  ("attention", lambda q, k: q.reshape(1, 3, 4).scaled_dot_product_attention(k.reshape(1, 3, 4), k.reshape(1, 3, 4)), [A, B]),
]

@pytest.mark.parametrize("name, fn, inputs", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, inputs):
  if name == "cast_float32": gradcheck(fn, *inputs, eps=1e-3, atol=1e-4, rtol=1e-4)
  else: gradcheck(fn, *inputs)

# a subset on each device (PYTHON interprets the kernels), on smaller inputs
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["mul", "div", "max_axis", "matmul", "pad", "where"])
def test_gradcheck_devices(device, name):
  _, fn, inputs = next(c for c in CASES if c[0] == name)
  gradcheck(fn, *[x[:2, :3] if x.shape == (3, 4) else x[:3] for x in inputs], device=device)

def grads(loss:Tensor, *ts:Tensor) -> list[np.ndarray]: return [g.numpy() for g in loss.gradient(*ts)]

class TestClosedForms:
  def test_max_ties_split(self):
    # as tinygrad: the gradient of a max is shared equally by the elements equal to it
    t = Tensor([1.0, 3.0, 3.0])
    np.testing.assert_equal(grads(t.max(), t)[0], [0.0, 0.5, 0.5])
    x, y = Tensor([1.0, 3.0]), Tensor([3.0, 3.0])
    gx, gy = grads(x.maximum(y).sum(), x, y)
    np.testing.assert_equal(gx, [0.0, 0.5])
    np.testing.assert_equal(gy, [1.0, 0.5])
  def test_prod_with_zeros(self):
    t = Tensor([0.0, 2.0, 3.0])
    np.testing.assert_equal(grads(t.prod(), t)[0], [6.0, 0.0, 0.0])
    t = Tensor([0.0, 2.0, 0.0])
    np.testing.assert_equal(grads(t.prod(), t)[0], [0.0, 0.0, 0.0])
  def test_pow_at_zero(self):
    b, e = Tensor([0.0, 2.0, 0.0]), Tensor([2.0, 0.0, 0.0])
    gb, ge = grads((b ** e).sum(), b, e)
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(ge, [0.0, np.log(2.0), 0.0], rtol=1e-6)
  def test_relu_at_zero(self):
    t = Tensor([-1.0, 0.0, 2.0])
    np.testing.assert_equal(grads(t.relu().sum(), t)[0], [0.0, 0.0, 1.0])
  def test_floor_and_compare_have_zero_gradient(self):
    t = Tensor([0.5, 1.5, -2.5])
    np.testing.assert_equal(grads((t.floor() + t.ceil() + (t > 0).float()).sum(), t)[0], [0.0, 0.0, 0.0])
  def test_seed_gradient(self):
    t = Tensor([1.0, 2.0])
    np.testing.assert_equal((t * 2).gradient(t, gradient=Tensor([1.0, 10.0]))[0].numpy(), [2.0, 20.0])
  def test_half(self):
    t = Tensor([1.0, 2.0, 3.0], dtype=dtypes.half)
    (g,) = (t * t).sum().gradient(t)
    assert g.dtype is dtypes.half
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0, 6.0])
  def test_through_int_cast_is_zero(self):
    t = Tensor([1.5, 2.5])
    np.testing.assert_equal(grads((t.int().float() * t).sum(), t)[0], [1.0, 2.0])
  def test_copy_between_devices(self):
    t = Tensor([1.0, 2.0, 3.0])
    (g,) = (t.to("PYTHON") * 3).sum().gradient(t)
    assert g.device == t.device
    np.testing.assert_equal(g.numpy(), [3.0, 3.0, 3.0])

class TestBackward:
  def test_fills_grads(self):
    x, w = Tensor(rnd(2, 3).astype(np.float32)), Tensor(rnd(2, 3, seed=1).astype(np.float32))
    y = x * w
    loss = y.sum()
    assert loss.backward() is loss
    np.testing.assert_allclose(x.grad.numpy(), w.numpy())
    np.testing.assert_allclose(w.grad.numpy(), x.numpy())
    # as in tinygrad 0.14: intermediates and the loss itself get theirs too
    np.testing.assert_equal(y.grad.numpy(), np.ones((2, 3)))
    assert loss.grad.item() == 1.0
  def test_accumulates(self):
    z = Tensor([1.0, 2.0])
    held = None
    (z * z).sum().backward()
    held = z.grad
    (z * 3).sum().backward()
    assert z.grad is held   # accumulated in place: whoever holds .grad sees the sum
    np.testing.assert_equal(z.grad.numpy(), [5.0, 7.0])
  def test_accumulate_shape_mismatch(self):
    z = Tensor([1.0, 2.0])
    z.grad = Tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"shape \(2,\).*shape \(3,\)"): (z * 2).sum().backward()
  def test_detach(self):
    t = Tensor([1.0, 3.0])
    np.testing.assert_equal(grads((t.detach() * t).sum(), t)[0], [1.0, 3.0])
    d = t.detach()
    (d * 2).sum().backward()
    # as in tinygrad 0.14, a float tensor in the graph that the gradient can't reach gets zeros
    np.testing.assert_equal(t.grad.numpy(), [0.0, 0.0])
    np.testing.assert_equal(d.grad.numpy(), [2.0, 2.0])
    np.testing.assert_equal(d.numpy(), [1.0, 3.0])
  def test_detach_schedules_as_identity(self):
    x = Tensor(rnd(4, 4).astype(np.float32))
    y = (x * 2).detach().exp().contiguous_backward() + 1
    assert len(y.schedule()[0]) == 1
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy() * 2) + 1, rtol=1e-6)
  def test_contiguous_backward(self):
    x, w = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
    (g,) = (x.contiguous_backward() * w).sum().gradient(x)
    assert g.uop.op is Ops.CONTIGUOUS
    np.testing.assert_equal(g.numpy(), [3.0, 4.0])
  def test_requires_grad_false(self):
    x, c = Tensor([1.0, 2.0]), Tensor([3.0, 4.0], requires_grad=False)
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_equal(x.grad.numpy(), [3.0, 4.0])
    assert x.requires_grad_(False) is x and x.requires_grad is False
    with pytest.raises(RuntimeError, match="only float Tensors can require gradients, got dtypes.int"): Tensor([1, 2]).requires_grad_()
  def test_ints_and_constants_get_none(self):
    a, b = Tensor([1.0, 2.0]), Tensor([3, 4])
    k, f = Tensor(2.0), Tensor.full((2,), 5.0, buffer=False)
    (a * b * k * f).sum().backward()
    assert b.grad is None and k.grad is None and f.grad is None
    np.testing.assert_equal(a.grad.numpy(), [30.0, 40.0])
  def test_input_realized_after_the_graph(self):
    x = Tensor.rand(3) + 0
    loss = (x * 2).sum()
    x.realize()   # x now reads its buffer; the graph still holds the node it was
    loss.backward()
    np.testing.assert_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
  def test_to_moves_grad(self):
    x = Tensor([1.0, 2.0])
    (x * 4).sum().backward()
    y = x.to("PYTHON")
    assert y.grad is not None and y.grad.device == "PYTHON" and y.is_param
    np.testing.assert_equal(y.grad.numpy(), [4.0, 4.0])
  def test_is_param(self):
    t = Tensor([1.0])
    assert t.is_param is True and (t * 2).is_param is True
    assert t.is_param_(False) is t and t.is_param is False
    assert Tensor.zeros(2).is_param_().is_param is True
  def test_deep_chain(self):
    x = Tensor([0.5, 0.25])
    y = x
    for _ in range(2000): y = y * 1.0001 + 0.001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 2000] * 2, rtol=1e-4)

class TestErrors:
  def test_non_scalar_needs_gradient(self):
    x = Tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"only for a scalar, got shape \(3,\)"): (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"only for a scalar, got shape \(3,\)"): (x * 2).gradient(x)
  def test_gradient_shape_and_type(self):
    x = Tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\), the tensor has shape \(2,\)"): (x * 2).backward(Tensor([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="gradient must be a Tensor, got list"): (x * 2).backward([1.0, 1.0])
    with pytest.raises(TypeError, match="gradient takes Tensors, got ndarray"): (x * 2).sum().gradient(np.ones(2))
  def test_ints(self):
    xi, xf = Tensor([1, 2, 3]), Tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="only float Tensors have gradient: gradient got dtypes.int"): (xf * 2).sum().gradient(xi)
    with pytest.raises(RuntimeError, match="only float Tensors have gradient: backward got dtypes.int"): (xi * 2).sum().backward()
  def test_target_not_in_graph_is_zero(self):
    # tinygrad 0.14 gives zeros for a target the output does not depend on (also through detach)
    x, y = Tensor([1.0, 2.0, 3.0]), Tensor([4.0, 5.0, 6.0])
    gx, gy, gd = grads((x * 2 + y.detach()).sum(), x, y, y.detach())
    np.testing.assert_equal(gx, [2.0, 2.0, 2.0])
    np.testing.assert_equal(gy, [0.0, 0.0, 0.0])
    np.testing.assert_equal(gd, [1.0, 1.0, 1.0])

class TestFusion:
  def _kernels(self, *ts:Tensor) -> int: return len(ts[0].schedule(*ts[1:])[0])
  def test_mul_relu_sum(self):
    # tinygrad 0.14 schedules 2 kernels for the two gradients and 3 with the loss; so do we
    x, w = Tensor(rnd(16, 32).astype(np.float32)), Tensor(rnd(16, 32, seed=1).astype(np.float32))
    loss = (x * w).relu().sum()
    loss.backward()
    assert self._kernels(x.grad, w.grad) == 2
    assert self._kernels(loss, x.grad, w.grad) == 3
    xn, wn = x.numpy(), w.numpy()
    mask = (xn * wn > 0).astype(np.float32)
    np.testing.assert_allclose(x.grad.numpy(), wn * mask)
    np.testing.assert_allclose(w.grad.numpy(), xn * mask)
  def test_matmul_relu_sum(self):
    x, w = Tensor(rnd(16, 32).astype(np.float32)), Tensor(rnd(32, 8, seed=1).astype(np.float32))
    loss = (x @ w).relu().sum()
    loss.backward()
    assert self._kernels(loss, x.grad, w.grad) == 4   # as tinygrad 0.14
    xn, wn = x.numpy(), w.numpy()
    mask = (xn @ wn > 0).astype(np.float32)
    np.testing.assert_allclose(x.grad.numpy(), mask @ wn.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), xn.T @ mask, rtol=1e-5, atol=1e-5)

def test_mean_gradient_of_a_constant_seed():
  # the seed gradient (1.0) times 1/count is a division of two constants once rendered: constant folding must know FDIV
  x = Tensor.ones(4, 3).contiguous()
  x.requires_grad = True
  x.mean().backward()
  np.testing.assert_allclose(x.grad.numpy(), np.full((4, 3), 1 / 12, np.float32), rtol=1e-6)

def test_realized_constant_gradient_stays_a_constant_elsewhere():
  # the gradient of a 0-d tensor's sum is the constant 1.0 itself; realizing it must not turn every later use of the constant 1.0
  # into a load of that buffer (the codegen's rules on constants then no longer see it: here exp(x)/(1+exp(x)) at x = 300, whose
  # overflow-safe form needs the 1 of 1 + exp(x), gave a NaN gradient)
  x = Tensor(np.float32(0.5), requires_grad=True)
  (g,) = x.reshape(()).sum().gradient(x)
  assert g.realize().numpy() == 1.0
  y = Tensor(np.array([300.0, -300.0, 0.0], np.float32))
  (gy,) = (y.exp() / (1 + y.exp())).sum().gradient(y)
  np.testing.assert_allclose(gy.numpy(), [0.0, 0.0, 0.25], atol=1e-7)
