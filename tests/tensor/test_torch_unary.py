import math
import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# name: (ours, torch, low, high); inputs avoid the kinks/singularities where the one-sided derivatives differ
UNARY = {
  "neg": (lambda x: -x, lambda x: -x, -2, 2), "abs": (lambda x: x.abs(), torch.abs, -2, 2),
  "exp": (lambda x: x.exp(), torch.exp, -3, 3), "exp2": (lambda x: x.exp2(), torch.exp2, -3, 3),
  "log": (lambda x: x.log(), torch.log, 0.1, 4), "log2": (lambda x: x.log2(), torch.log2, 0.1, 4),
  "log10": (lambda x: x.log10(), torch.log10, 0.1, 4), "sqrt": (lambda x: x.sqrt(), torch.sqrt, 0.1, 4),
  "rsqrt": (lambda x: x.rsqrt(), torch.rsqrt, 0.1, 4), "reciprocal": (lambda x: x.reciprocal(), torch.reciprocal, 0.5, 3),
  "square": (lambda x: x.square(), torch.square, -2, 2), "sign": (lambda x: x.sign(), torch.sign, -2, 2),
  "sin": (lambda x: x.sin(), torch.sin, -5, 5), "cos": (lambda x: x.cos(), torch.cos, -5, 5), "tan": (lambda x: x.tan(), torch.tan, -1.2, 1.2),
  "asin": (lambda x: x.asin(), torch.asin, -0.9, 0.9), "acos": (lambda x: x.acos(), torch.acos, -0.9, 0.9),
  "atan": (lambda x: x.atan(), torch.atan, -4, 4), "sinh": (lambda x: x.sinh(), torch.sinh, -3, 3),
  "cosh": (lambda x: x.cosh(), torch.cosh, -3, 3), "tanh": (lambda x: x.tanh(), torch.tanh, -3, 3),
  "asinh": (lambda x: x.asinh(), torch.asinh, -3, 3), "acosh": (lambda x: x.acosh(), torch.acosh, 1.1, 4),
  "atanh": (lambda x: x.atanh(), torch.atanh, -0.9, 0.9), "erf": (lambda x: x.erf(), torch.erf, -3, 3),
  "trunc": (lambda x: x.trunc(), torch.trunc, -3, 3), "floor": (lambda x: x.floor(), torch.floor, -3, 3),
  "ceil": (lambda x: x.ceil(), torch.ceil, -3, 3), "round": (lambda x: x.round(), torch.round, -3, 3),
  "relu": (lambda x: x.relu(), torch.relu, -2, 2), "relu6": (lambda x: x.relu6(), F.relu6, -3, 9),
  "leaky_relu": (lambda x: x.leaky_relu(0.2), lambda x: F.leaky_relu(x, 0.2), -2, 2),
  "elu": (lambda x: x.elu(0.7), lambda x: F.elu(x, 0.7), -2, 2), "celu": (lambda x: x.celu(1.3), lambda x: F.celu(x, 1.3), -2, 2),
  "selu": (lambda x: x.selu(), F.selu, -2, 2), "gelu": (lambda x: x.gelu(), lambda x: F.gelu(x, approximate="tanh"), -3, 3),
  "quick_gelu": (lambda x: x.quick_gelu(), lambda x: x * torch.sigmoid(1.702 * x), -3, 3),
  "silu": (lambda x: x.silu(), F.silu, -4, 4), "swish": (lambda x: x.swish(), F.silu, -4, 4), "mish": (lambda x: x.mish(), F.mish, -4, 4),
  "sigmoid": (lambda x: x.sigmoid(), torch.sigmoid, -6, 6), "hardsigmoid": (lambda x: x.hardsigmoid(), F.hardsigmoid, -4, 4),
  "hardswish": (lambda x: x.hardswish(), F.hardswish, -4, 4),
  "hardtanh": (lambda x: x.hardtanh(-0.5, 1.5), lambda x: F.hardtanh(x, -0.5, 1.5), -3, 3),
  "logsigmoid": (lambda x: x.logsigmoid(), F.logsigmoid, -6, 6), "softplus": (lambda x: x.softplus(), F.softplus, -6, 6),
  "softplus_beta": (lambda x: x.softplus(2.0), lambda x: F.softplus(x, 2.0), -6, 6), "softsign": (lambda x: x.softsign(), F.softsign, -4, 4),
}

@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
  ours, theirs, low, high = UNARY[name]
  compare(ours, theirs, [(3, 5)], low=low, high=high, atol=2e-6, rtol=2e-6)

@pytest.mark.parametrize("name", ["exp", "log", "sin", "tanh", "erf", "sigmoid", "gelu", "atan", "asinh", "softplus"])
def test_unary_float64(name):
  ours, theirs, low, high = UNARY[name]
  compare(ours, theirs, [(17,)], dtype=np.float64, low=low, high=high, atol=1e-13, rtol=1e-13)

@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_predicates(name):
  v = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 3e38], dtype=np.float32)
  compare(lambda x: getattr(x, name)(), getattr(torch, name), vals=[v])

def test_erf_dense_grid():
  # float64 erf against math.erf (torch agrees to 1 ulp); float32 against the float64 result rounded
  x = np.linspace(-6, 6, 4001)
  ref = np.array([math.erf(v) for v in x])
  compare(lambda t: t.erf(), torch.erf, vals=[x], grad=False, atol=1e-15, rtol=2e-15)
  np.testing.assert_allclose(torch.erf(torch.tensor(x)).numpy(), ref, atol=1e-16, rtol=1e-15)
  compare(lambda t: t.erf(), torch.erf, vals=[x.astype(np.float32)], grad=False, atol=1.5e-7, rtol=2e-7)

def test_unary_int_inputs():
  v = np.array([-3, -1, 0, 2, 5], dtype=np.int32)
  for op in ["abs", "neg", "sign", "square"]:
    compare(lambda x, op=op: getattr(x, op)(), lambda x, op=op: getattr(torch, op)(x), vals=[v])
  for op in ["exp", "sqrt", "sin", "sigmoid"]:
    compare(lambda x, op=op: getattr(x, op)(), lambda x, op=op: getattr(torch, op)(x), vals=[np.abs(v)], atol=1e-6, rtol=1e-6)

EDGES = {
  "sigmoid": (lambda x: x.sigmoid(), torch.sigmoid, [-100.0, 100.0, -20.0, 0.0]),
  "softplus": (lambda x: x.softplus(), F.softplus, [-100.0, 100.0, 30.0, 0.0]),
  "logsigmoid": (lambda x: x.logsigmoid(), F.logsigmoid, [-100.0, 100.0, 0.0]), "mish": (lambda x: x.mish(), F.mish, [-100.0, 100.0, 25.0, 0.0]),
  "tanh": (lambda x: x.tanh(), torch.tanh, [-100.0, 100.0, 1e-8]), "asinh": (lambda x: x.asinh(), torch.asinh, [-1e20, 1e20, 1e-8, 0.0]),
  "round": (lambda x: x.round(), torch.round, [0.5, 1.5, 2.5, -0.5, -2.5]), "sqrt": (lambda x: x.sqrt(), torch.sqrt, [0.0, 4.0]),
  "pow": (lambda x: x ** 2, lambda x: x ** 2, [-3.0, -0.5, 0.0]), "rpow": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, [-3.0, 0.5, 0.0]),
}

@pytest.mark.parametrize("name", list(EDGES))
def test_edge_values_and_gradients(name):
  # far out, at 0 and at ties: values and gradients (the kinks of abs/clamp/relu6/leaky_relu and max ties follow 0.14's convention)
  ours, theirs, v = EDGES[name]
  compare(ours, theirs, vals=[np.array(v, dtype=np.float32)], atol=1e-6, rtol=1e-5)
