# A parameter created as a constant (Tensor.ones/zeros/full, Tensor(2.0, requires_grad=True), rand, eye, ...) used as it is: its backward
# pass fills .grad and an optimizer step updates it, against numpy (torch's behaviour for leaves that require grad).
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, Context
from tinygrad.nn import optim

pytestmark = pytest.mark.cpu

@pytest.mark.parametrize("make", [lambda: Tensor.ones(3), lambda: Tensor.ones(3, requires_grad=True), lambda: Tensor.zeros(3, requires_grad=True),
                                  lambda: Tensor.full((3,), 2.0, requires_grad=True), lambda: Tensor.full_like(Tensor.ones(3), 4.0),
                                  lambda: Tensor.ones_like(Tensor.ones(3), requires_grad=True), lambda: Tensor([1.0, 2, 3], requires_grad=True)],
                         ids=["ones", "ones_rg", "zeros_rg", "full_rg", "full_like", "ones_like_rg", "list_rg"])
def test_constant_vector_backward(make):
  t = make()
  assert t.requires_grad is not False
  v = t.numpy()
  (t * Tensor([1.0, 2.0, 3.0]) + t * t).sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), np.array([1, 2, 3], dtype=np.float32) + 2 * v)

def test_scalar_requires_grad_is_a_float_parameter():
  # a Python scalar that requires grad is a float32 leaf of its own (not the interned constant, which gets no gradient)
  t = Tensor(2.0, requires_grad=True)
  assert t.dtype is dtypes.float32 and t.shape == () and t.requires_grad is True
  (t * t).backward()
  assert t.grad.item() == 4.0
  w = Tensor(3, dtype=dtypes.float16, requires_grad=True)
  (w * 5).backward()
  assert w.dtype is dtypes.float16 and w.grad.item() == 5.0
  # a scalar seed: backward of the leaf itself
  s = Tensor(2.5, requires_grad=True)
  s.backward()
  assert s.grad.item() == 1.0
  # two equal constants are two parameters, each with its own gradient (tinygrad's test_const_backward_pass)
  w1, w2 = Tensor(3.5).clone(), Tensor(3.5).clone()
  (w1 + w2 * 2).backward()
  assert (w1.grad.item(), w2.grad.item()) == (1.0, 2.0)

def test_creation_functions_take_requires_grad():
  for t in (Tensor.ones(2, 2, requires_grad=True), Tensor.empty(2, requires_grad=True), Tensor.rand(3, requires_grad=True),
            Tensor.randn(3, requires_grad=True), Tensor.uniform(3, requires_grad=True), Tensor.normal(3, requires_grad=True),
            Tensor.eye(2, requires_grad=True), Tensor.arange(3.0, requires_grad=True), Tensor.linspace(0, 1, 3, requires_grad=True),
            Tensor.zeros_like(Tensor.ones(2), requires_grad=True), Tensor.full_like(Tensor.ones(2), 1.0, requires_grad=True)):
    assert t.requires_grad is True, t
  assert Tensor.ones(2, requires_grad=False).requires_grad is False and Tensor.rand(2).requires_grad is None
  e = Tensor.eye(3, requires_grad=True)
  (e * Tensor.arange(9.0).reshape(3, 3)).sum().backward()
  np.testing.assert_equal(e.grad.numpy(), np.arange(9.0).reshape(3, 3))
  a = Tensor.arange(4.0, requires_grad=True)
  (a * a).sum().backward()
  np.testing.assert_equal(a.grad.numpy(), 2 * np.arange(4.0))

@pytest.mark.parametrize("make", [lambda: Tensor(2, requires_grad=True), lambda: Tensor([1, 2], requires_grad=True),
                                  lambda: Tensor.arange(3, requires_grad=True), lambda: Tensor.ones(2, dtype=dtypes.int32, requires_grad=True),
                                  lambda: Tensor(True, requires_grad=True)])
def test_only_floats_require_grad(make):
  with pytest.raises(RuntimeError, match="only float Tensors can require gradients"): make()

def test_backward_of_python_constants_says_what_to_do():
  k = Tensor(2.0)
  with pytest.raises(RuntimeError, match=r"weakfloat \(a constant of Python values: Tensor\(2.0, requires_grad=True\)"): (k * k).backward()

def sgd_numpy(x, grad_fn, lr, momentum=0.0, steps=3):
  b = np.zeros_like(x)
  for _ in range(steps):
    g = grad_fn(x)
    b = momentum * b + g if momentum else g
    x = x - lr * b
  return x

def adam_numpy(x, grad_fn, lr, b1=0.9, b2=0.999, eps=1e-8, steps=3):
  m, v = np.zeros_like(x), np.zeros_like(x)
  for i in range(1, steps + 1):
    g = grad_fn(x)
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    x = x - lr * (m / (1 - b1 ** i)) / (np.sqrt(v / (1 - b2 ** i)) + eps)
  return x

@pytest.mark.parametrize("make,shape", [(lambda: Tensor.ones(3, requires_grad=True), (3,)), (lambda: Tensor.ones(3), (3,)),
                                        (lambda: Tensor.full((2, 2), 3.0), (2, 2)), (lambda: Tensor(2.0, requires_grad=True), ()),
                                        (lambda: Tensor.full((), 2.0), ()), (lambda: Tensor.zeros(1, requires_grad=True), (1,))],
                         ids=["ones_rg", "ones", "full", "scalar_rg", "full_0d", "zeros_rg"])
@pytest.mark.parametrize("opt", ["sgd", "sgd_momentum", "adam"])
def test_optimizer_step_on_a_constant_parameter(make, shape, opt):
  # loss = sum(c * t + t * t): the gradient is c + 2t (0-d parameters included: their update used to come back with lr's shape (1,))
  t = make()
  x0 = t.numpy().astype(np.float32)
  c = np.arange(1, x0.size + 1, dtype=np.float32).reshape(shape)
  make_opt = {"sgd": lambda p: optim.SGD(p, lr=0.1), "sgd_momentum": lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
              "adam": lambda p: optim.Adam(p, lr=0.1)}[opt]
  o = make_opt([t])
  with Context(TRAINING=1):
    for _ in range(3):
      o.zero_grad()
      (Tensor(c) * t + t * t).sum().backward()
      o.step()
  grad_fn = lambda x: c + 2 * x
  want = adam_numpy(x0, grad_fn, 0.1) if opt == "adam" else sgd_numpy(x0, grad_fn, 0.1, momentum=0.9 if opt == "sgd_momentum" else 0.0)
  assert t.shape == shape
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-6)
