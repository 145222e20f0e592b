import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor  # noqa: E402
import torch.nn.functional as F  # noqa: E402

TCONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TCONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
SPATIAL = {1: (9,), 2: (7, 6), 3: (5, 4, 5)}

# (dims, groups, stride, padding, dilation)
CONVS = [(1, 1, 1, 0, 1), (1, 2, 2, 1, 2), (2, 1, 1, 1, 1), (2, 2, (2, 1), (1, 2), (1, 2)), (2, 4, 1, 0, 1), (3, 1, 2, 1, 1), (3, 2, 1, 1, 2)]

@pytest.mark.parametrize("dims,groups,stride,padding,dilation", CONVS)
def test_conv(dims, groups, stride, padding, dilation):
  cin, cout = 4, 4
  compare(lambda x, w, b: x.conv2d(w, b, groups=groups, stride=stride, padding=padding, dilation=dilation),
          lambda x, w, b: TCONV[dims](x, w, b, groups=groups, stride=stride, padding=padding, dilation=dilation),
          [(2, cin) + SPATIAL[dims], (cout, cin // groups) + (3,) * dims, (cout,)], atol=1e-4, rtol=1e-4)

def test_conv_asymmetric_padding():
  # tinygrad also takes torch-pad style (left, right, top, bottom) pairs
  compare(lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)), lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w),
          [(1, 2, 5, 5), (3, 2, 3, 2)], atol=1e-4, rtol=1e-4)

@pytest.mark.parametrize("dims,groups,stride,padding,dilation", CONVS)
def test_conv_transpose(dims, groups, stride, padding, dilation):
  cin, cout = 4, 2
  cpg = cout // groups if cout % groups == 0 else 1
  compare(lambda x, w, b: x.conv_transpose2d(w, b, groups=groups, stride=stride, padding=padding, dilation=dilation),
          lambda x, w, b: TCONVT[dims](x, w, b, groups=groups, stride=stride, padding=padding, dilation=dilation),
          [(2, cin) + SPATIAL[dims], (cin, cpg) + (3,) * dims, (cpg * groups,)],
          atol=1e-4, rtol=1e-4)

def test_conv_transpose_output_padding():
  compare(lambda x, w: x.conv_transpose2d(w, stride=2, padding=1, output_padding=1),
          lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [(1, 2, 4, 3), (2, 3, 3, 3)], atol=1e-4, rtol=1e-4)

TPOOL = {"max": {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}, "avg": {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}}
# (dims, kernel, stride, padding, ceil_mode)
POOLS = [(1, (3,), 2, 1, True), (2, (2, 2), None, 0, False), (2, (3, 2), (2, 1), (1, 0), True), (2, (3, 3), 2, 1, False), (3, (2, 2, 2), 2, 0, True)]

@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("dims,kernel,stride,padding,ceil_mode", POOLS)
def test_pool(kind, dims, kernel, stride, padding, ceil_mode):
  kw = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode)
  if kind == "max": compare(lambda x: x.max_pool2d(**kw), lambda x: TPOOL["max"][dims](x, **kw), [(2, 3) + SPATIAL[dims]])
  else:
    for cip in (True, False):
      compare(lambda x: x.avg_pool2d(**kw, count_include_pad=cip), lambda x: TPOOL["avg"][dims](x, **kw, count_include_pad=cip),
              [(2, 3) + SPATIAL[dims]], atol=1e-5, rtol=1e-5)

def test_max_pool_dilation_indices_unpool():
  compare(lambda x: x.max_pool2d((2, 2), stride=1, dilation=2), lambda x: F.max_pool2d(x, 2, stride=1, dilation=2), [(1, 2, 6, 6)])
  compare(lambda x: x.max_pool2d((2, 2), return_indices=True), lambda x: F.max_pool2d(x, 2, return_indices=True), [(1, 2, 6, 4)])
  def ours(x):
    v, i = x.max_pool2d((2, 2), return_indices=True)
    return v.max_unpool2d(i, (2, 2))
  compare(ours, lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), [(1, 2, 6, 4)])

# (mode, input shape, size, align_corners); torch's "linear"/"bilinear"/"trilinear" by dims, tinygrad says "linear"
INTERP = [("nearest", (1, 2, 5), (7,), False), ("nearest", (1, 2, 4, 5), (7, 3), False), ("nearest-exact", (1, 2, 4, 5), (7, 3), False),
          ("linear", (1, 2, 5), (8,), False), ("linear", (1, 2, 4, 5), (7, 3), False), ("linear", (1, 2, 4, 5), (7, 9), True),
          ("linear", (1, 1, 3, 4, 2), (5, 2, 3), False)]

@pytest.mark.parametrize("mode,shape,size,align", INTERP)
def test_interpolate(mode, shape, size, align):
  tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode == "linear" else mode
  compare(lambda x: x.interpolate(size, mode=mode, align_corners=align),
          lambda x: F.interpolate(x, size, mode=tmode, **({"align_corners": align} if mode == "linear" else {})), [shape], atol=1e-5, rtol=1e-5)

def test_norms():
  compare(lambda x: x.layernorm(), lambda x: F.layer_norm(x, (5,)), [(3, 4, 5)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.layernorm((1, 2), eps=1e-3), lambda x: F.layer_norm(x, (4, 5), eps=1e-3), [(3, 4, 5)], atol=1e-5, rtol=1e-5)
  m, v = np.array([0.1, -0.3, 0.2], dtype=np.float32), np.array([0.5, 1.0, 2.0], dtype=np.float32)
  compare(lambda x, w, b: x.batchnorm(w, b, Tensor(m), (Tensor(v) + 1e-5).rsqrt()),
          lambda x, w, b: F.batch_norm(x, torch.tensor(m), torch.tensor(v), w, b, eps=1e-5), [(2, 3, 4, 4), (3,), (3,)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.normalize(dim=1), lambda x: F.normalize(x, dim=1), [(3, 4)], atol=1e-6, rtol=1e-5)
  compare(lambda x: x.normalize(p=1.0, dim=0), lambda x: F.normalize(x, p=1.0, dim=0), [(3, 4)], atol=1e-6, rtol=1e-5)

def test_linear_sequential():
  compare(lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w + b, [(3, 4), (4, 5), (5,)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.sequential([lambda t: t * 2, lambda t: t.relu()]), lambda x: (x * 2).relu(), [(3, 4)])

MASK = np.tril(np.ones((4, 6), dtype=bool), 2)

@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "float_mask", "gqa"])
def test_sdpa(kind):
  kq, kk = (2, 2, 4, 8), (2, 2, 6, 8)
  if kind == "plain":
    compare(lambda q, k, v: q.scaled_dot_product_attention(k, v), F.scaled_dot_product_attention, [kq, kk, kk], atol=1e-5, rtol=1e-5)
  elif kind == "causal":
    compare(lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            [kq, kq, kq], atol=1e-5, rtol=1e-5)
  elif kind == "bool_mask":
    compare(lambda q, k, v: q.scaled_dot_product_attention(k, v, Tensor(MASK)),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, torch.tensor(MASK)),
            [kq, kk, kk], atol=1e-5, rtol=1e-5)
  elif kind == "float_mask":
    compare(lambda q, k, v, m: q.scaled_dot_product_attention(k, v, m), lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
            [kq, kk, kk, (4, 6)], atol=1e-5, rtol=1e-5)
  else:
    compare(lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
            [(1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8)], atol=1e-5, rtol=1e-5)

Y3 = np.array([1, 0, 3, 2, 3], dtype=np.int64)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
  r = reduction
  p = np.random.default_rng(1).uniform(0.05, 0.95, (5, 3)).astype(np.float32)
  y = np.random.default_rng(2).uniform(0, 1, (5, 3)).astype(np.float32)
  compare(lambda x: x.binary_crossentropy(Tensor(y), r), lambda x: F.binary_cross_entropy(x, torch.tensor(y), reduction=r), vals=[p],
          atol=1e-5, rtol=1e-5)
  compare(lambda x: x.binary_crossentropy_logits(Tensor(y), r),
          lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(y), reduction=r), [(5, 3)],
          atol=1e-5, rtol=1e-5)
  pw = np.array([0.5, 2.0, 1.0], dtype=np.float32)
  compare(lambda x: x.binary_crossentropy_logits(Tensor(y), r, pos_weight=Tensor(pw)),
          lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(y), reduction=r, pos_weight=torch.tensor(pw)), [(5, 3)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.sparse_categorical_crossentropy(Tensor(Y3), reduction=r), lambda x: F.cross_entropy(x, torch.tensor(Y3), reduction=r), [(5, 4)],
          atol=1e-5, rtol=1e-5)
  # tinygrad's default ignore_index=-1 means "ignore nothing" (a -1 label matches no class but is counted): compare torch's -100
  yi = np.array([1, -100, 3, 2, -100], dtype=np.int64)
  compare(lambda x: x.sparse_categorical_crossentropy(Tensor(yi), ignore_index=-100, label_smoothing=0.1, reduction=r),
          lambda x: F.cross_entropy(x, torch.tensor(yi), ignore_index=-100, label_smoothing=0.1, reduction=r), [(5, 4)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.cross_entropy(Tensor(Y3), reduction=r),
          lambda x: F.cross_entropy(x, torch.tensor(Y3), reduction=r), [(5, 4)], atol=1e-5, rtol=1e-5)
  ps = np.random.default_rng(3).dirichlet(np.ones(4), 5).astype(np.float32)
  compare(lambda x: x.cross_entropy(Tensor(ps), reduction=r, label_smoothing=0.2),
          lambda x: F.cross_entropy(x, torch.tensor(ps), reduction=r, label_smoothing=0.2), [(5, 4)], atol=1e-5, rtol=1e-5)
  w = np.array([1.0, 0.5, 2.0, 1.5], dtype=np.float32)
  compare(lambda x: x.log_softmax().nll_loss(Tensor(Y3), Tensor(w), reduction=r),
          lambda x: F.nll_loss(x.log_softmax(-1), torch.tensor(Y3), torch.tensor(w), reduction=r), [(5, 4)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.nll_loss(Tensor(yi), ignore_index=-100, reduction=r), lambda x: F.nll_loss(x, torch.tensor(yi), ignore_index=-100, reduction=r),
          [(5, 4)], atol=1e-5, rtol=1e-5)

def test_cross_entropy_spatial():
  y = np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]], dtype=np.int64)
  compare(lambda x: x.cross_entropy(Tensor(y)), lambda x: F.cross_entropy(x, torch.tensor(y)), [(2, 3, 2, 2)], atol=1e-5, rtol=1e-5)
  compare(lambda x: x.nll_loss(Tensor(y)), lambda x: F.nll_loss(x, torch.tensor(y)), [(2, 3, 2, 2)], atol=1e-5, rtol=1e-5)
