# nn functional ops (softmax family, linear, conv, pooling, normalisation, attention, interpolation, losses) against small numpy
# references written here, on CPU (and a subset on PYTHON); error paths; kernel counts no higher than tinygrad 0.14's.
import itertools
import math
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.numpy_ref import np_conv, np_windows
from tinygrad import Tensor, dtypes

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def close(t:Tensor, ref, atol=1e-5, rtol=1e-5):
  got, ref = t.numpy(), np.asarray(ref)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)

# ***** numpy references *****
def np_softmax(x, axis=-1):
  e = np.exp(x - x.max(axis=axis, keepdims=True))
  return e / e.sum(axis=axis, keepdims=True)
def np_log_softmax(x, axis=-1):
  m = x - x.max(axis=axis, keepdims=True)
  return m - np.log(np.exp(m).sum(axis=axis, keepdims=True))

def np_conv_transpose(x, w, groups=1, stride=1, dilation=1, padding=0, output_padding=0):
  n = w.ndim - 2
  s, d, p, op = ((v,) * n if isinstance(v, int) else v for v in (stride, dilation, padding, output_padding))
  bs, cin, sp = x.shape[0], x.shape[1], x.shape[2:]
  cin_g, rc, k = cin // groups, w.shape[1], w.shape[2:]
  full = [(i - 1) * ss + dd * (kk - 1) + 1 + oo for i, ss, dd, kk, oo in zip(sp, s, d, k, op)]
  out = np.zeros((bs, rc * groups, *full), np.float64)
  for g, ic, oc in itertools.product(range(groups), range(cin_g), range(rc)):
    for pos in itertools.product(*[range(v) for v in sp]):
      for kk in itertools.product(*[range(v) for v in k]):
        tgt = tuple(pp * ss + q * dd for pp, ss, q, dd in zip(pos, s, kk, d))
        out[(slice(None), g * rc + oc, *tgt)] += x[(slice(None), g * cin_g + ic, *pos)] * w[(g * cin_g + ic, oc, *kk)]
  return out[(..., *[slice(pp, f - pp) for pp, f in zip(p, full)])]

def np_attention(q, k, v, mask=None, causal=False):
  s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
  if causal: mask = np.tril(np.ones(s.shape[-2:], bool))
  if mask is not None: s = s + (np.where(mask, 0, -np.inf) if mask.dtype == bool else mask)
  return np_softmax(s) @ v

def np_interp_axis(x, ax, out, mode, align):
  n = x.shape[ax]
  dst = np.arange(out, dtype=np.float64)
  if mode == "nearest": idx = np.minimum(np.floor(dst * n / out).astype(int), n - 1)
  elif mode == "nearest-exact": idx = np.minimum(np.floor((dst + 0.5) * n / out).astype(int), n - 1)
  if mode != "linear": return np.take(x, idx, axis=ax)
  src = dst * (n - 1) / (out - 1) if align and out > 1 else (np.zeros(out) if align else np.maximum((dst + 0.5) * n / out - 0.5, 0))
  lo = np.minimum(np.floor(src).astype(int), n - 1)
  hi, frac = np.minimum(lo + 1, n - 1), src - lo
  shp = [1] * x.ndim
  shp[ax] = out
  a, b = np.take(x, lo, axis=ax), np.take(x, hi, axis=ax)
  return a + (b - a) * frac.reshape(shp)

# ***** softmax family *****
class TestSoftmax:
  @pytest.mark.parametrize("dev", DEVICES)
  @pytest.mark.parametrize("axis", [-1, 0])
  def test_softmax_family(self, dev, axis):
    a = rnd(3, 5) * 4
    t = Tensor(a, device=dev)
    close(t.softmax(axis), np_softmax(a, axis))
    close(t.log_softmax(axis), np_log_softmax(a, axis), atol=1e-5)
    close(t.softmin(axis), np_softmax(-a, axis))
  @pytest.mark.cpu
  def test_large_values_stable(self):
    a = np.array([[1000., 1001., 1002.], [-1000., -1000., -999.]], np.float32)
    close(Tensor(a).softmax(), np_softmax(a))
    close(Tensor(a).log_softmax(), np_log_softmax(a), atol=1e-4)
    close(Tensor(a).logsumexp(1), np.log(np.exp(a - a.max(1, keepdims=True)).sum(1)) + a.max(1), rtol=1e-6)
  @pytest.mark.cpu
  @pytest.mark.parametrize("axis,keepdim", [(None, False), (1, False), (0, True), ((0, 2), False)])
  def test_logsumexp(self, axis, keepdim):
    a = rnd(2, 3, 4)
    ref = np.log(np.exp(a).sum(axis=axis, keepdims=keepdim))
    close(Tensor(a).logsumexp(axis, keepdim), ref, atol=1e-5)
  @pytest.mark.cpu
  def test_logsumexp_infinities(self):
    a = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [0.0, -np.inf]], np.float32)
    np.testing.assert_array_equal(Tensor(a).logsumexp(1).numpy(), [-np.inf, np.inf, 0.0])
  @pytest.mark.cpu
  def test_softmax_dtype(self):
    t = Tensor(rnd(2, 4)).cast(dtypes.half)
    assert t.softmax(dtype=dtypes.float32).dtype is dtypes.float32 and t.softmax().dtype is dtypes.half
    h = t.numpy()
    # the max is subtracted in half, the rest computes in float32
    close(t.softmax(dtype=dtypes.float32), np_softmax((h - h.max(-1, keepdims=True)).astype(np.float32)), atol=1e-6)
  @pytest.mark.cpu
  def test_bad_axis(self):
    with pytest.raises(IndexError, match=r"dimension 2 is out of range for a tensor of shape \(2, 3\)"): Tensor.ones(2, 3).softmax(2)

# ***** linear, sequential *****
class TestLinear:
  @pytest.mark.cpu
  @pytest.mark.parametrize("dev", DEVICES)
  def test_linear(self, dev):
    x, w, b = rnd(4, 3), rnd(3, 5, seed=1), rnd(5, seed=2)
    close(Tensor(x, device=dev).linear(Tensor(w, device=dev), Tensor(b, device=dev)), x @ w + b, atol=1e-5)
    close(Tensor(x).linear(Tensor(w)), x @ w, atol=1e-5)
    close(Tensor(x).linear(Tensor(b[:3])), x * b[:3])   # a 1-d weight scales
  @pytest.mark.cpu
  def test_linear_dtype(self):
    x, w = Tensor([[1, 2]]), Tensor([[1], [3]])
    r = x.linear(w, Tensor([1]), dtype=dtypes.float32)
    assert r.dtype is dtypes.float32 and r.tolist() == [[8.0]]
  @pytest.mark.cpu
  def test_sequential(self):
    assert Tensor([1, 2, 3]).sequential([lambda x: x * 2, lambda x: x + 1]).tolist() == [3, 5, 7]
    assert Tensor([1]).sequential([]).tolist() == [1]
  @pytest.mark.cpu
  def test_linear_shape_error(self):
    with pytest.raises(RuntimeError, match=r"cannot dot \(4, 3\) and \(4, 5\)"): Tensor.ones(4, 3).linear(Tensor.ones(4, 5))

# ***** convolutions *****
class TestConv:
  @pytest.mark.parametrize("dev", DEVICES)
  def test_conv2d_basic(self, dev):
    x, w, b = rnd(2, 3, 5, 6), rnd(4, 3, 3, 2, seed=1), rnd(4, seed=2)
    ref = np_conv(x, w) + b.reshape(1, 4, 1, 1)
    close(Tensor(x, device=dev).conv2d(Tensor(w, device=dev), Tensor(b, device=dev)), ref, atol=1e-4)
  @pytest.mark.parametrize("groups,stride,dilation,padding", [(1, 2, 1, 1), (2, 1, 2, 0), (2, (2, 1), (1, 2), (1, 0)), (1, 1, 1, (1, 0, 2, 1)),
                                                              (4, 3, 1, 2)])
  @pytest.mark.cpu
  def test_conv2d_options(self, groups, stride, dilation, padding):
    x, w = rnd(2, 4, 7, 6), rnd(4, 4 // groups, 3, 3, seed=1)
    if isinstance(padding, int): pads = [(padding, padding)] * 2
    elif len(padding) == 2: pads = [(p, p) for p in padding]
    else: pads = [(padding[2], padding[3]), (padding[0], padding[1])]   # torch order: last dim first
    close(Tensor(x).conv2d(Tensor(w), groups=groups, stride=stride, dilation=dilation, padding=padding),
          np_conv(x, w, groups, stride, dilation, pads), atol=1e-4)
  @pytest.mark.cpu
  def test_conv_1d_3d(self):
    x1, w1 = rnd(2, 3, 9), rnd(2, 3, 4, seed=1)
    close(Tensor(x1).conv2d(Tensor(w1), stride=2, padding=1), np_conv(x1, w1, 1, 2, 1, [(1, 1)]), atol=1e-4)
    x3, w3 = rnd(1, 2, 4, 5, 3), rnd(3, 2, 2, 3, 2, seed=1)
    close(Tensor(x3).conv2d(Tensor(w3), padding=(0, 1, 0)), np_conv(x3, w3, pads=[(0, 0), (1, 1), (0, 0)]), atol=1e-4)
  @pytest.mark.cpu
  def test_conv_negative_padding_and_strings(self):
    x, w = rnd(1, 1, 6, 6), rnd(1, 1, 3, 3, seed=1)
    close(Tensor(x).conv2d(Tensor(w), padding=-1), np_conv(x[:, :, 1:-1, 1:-1], w), atol=1e-4)
    close(Tensor(x).conv2d(Tensor(w), padding="valid"), np_conv(x, w), atol=1e-4)
    # 'same' keeps the size: the odd total padding goes after, as in torch
    w2 = rnd(1, 1, 2, 3, seed=2)
    out = Tensor(x).conv2d(Tensor(w2), padding="same", dilation=(1, 2))
    assert out.shape == (1, 1, 6, 6)
    close(out, np_conv(x, w2, dilation=(1, 2), pads=[(0, 1), (2, 2)]), atol=1e-4)
  @pytest.mark.cpu
  def test_conv_int_and_dtype(self):
    x, w = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4), np.ones((1, 1, 2, 2), np.int32)
    r = Tensor(x).conv2d(Tensor(w))
    assert r.dtype is dtypes.int32
    np.testing.assert_array_equal(r.numpy(), np_conv(x, w).astype(np.int32))
    assert Tensor(x).cast(dtypes.half).conv2d(Tensor(w).cast(dtypes.half), dtype=dtypes.float32).dtype is dtypes.float32
  @pytest.mark.parametrize("dev", DEVICES)
  def test_conv_transpose2d(self, dev):
    x, w, b = rnd(2, 4, 3, 4), rnd(4, 3, 3, 2, seed=1), rnd(3, seed=2)
    ref = np_conv_transpose(x, w) + b.reshape(1, 3, 1, 1)
    close(Tensor(x, device=dev).conv_transpose2d(Tensor(w, device=dev), Tensor(b, device=dev)), ref, atol=1e-4)
  @pytest.mark.parametrize("groups,stride,dilation,padding,output_padding", [(1, 2, 1, 0, 1), (2, (2, 3), 1, 1, (1, 2)), (2, 1, 2, (1, 0), 0),
                                                                            (1, 3, (2, 1), 2, 1)])
  @pytest.mark.cpu
  def test_conv_transpose2d_options(self, groups, stride, dilation, padding, output_padding):
    x, w = rnd(1, 4, 3, 4), rnd(4, 2, 3, 3, seed=1)
    got = Tensor(x).conv_transpose2d(Tensor(w), groups=groups, stride=stride, dilation=dilation, padding=padding, output_padding=output_padding)
    close(got, np_conv_transpose(x, w, groups, stride, dilation, padding, output_padding), atol=1e-4)
  @pytest.mark.cpu
  def test_conv_transpose1d(self):
    x, w = rnd(2, 2, 5), rnd(2, 3, 3, seed=1)
    close(Tensor(x).conv_transpose2d(Tensor(w), stride=2, padding=1), np_conv_transpose(x, w, stride=2, padding=1), atol=1e-4)
  @pytest.mark.cpu
  def test_image_ops_match_plain(self):
    x, w = rnd(1, 4, 5, 5), rnd(4, 4, 3, 3, seed=1)
    close(Tensor(x).image_conv2d(Tensor(w), padding=1), np_conv(x, w, pads=[(1, 1)] * 2), atol=1e-4)
    a, b = rnd(2, 3), rnd(3, 5, seed=1)
    close(Tensor(a).image_dot(Tensor(b)), a @ b, atol=1e-5)
  @pytest.mark.cpu
  def test_conv_errors(self):
    with pytest.raises(RuntimeError, match=r"input \(1, 3, 5, 5\) doesn't match weight \(2, 2, 3, 3\) with groups=1"):
      Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 2, 3, 3))
    with pytest.raises(RuntimeError, match=r"need the same number"): Tensor.ones(1, 3, 5).conv2d(Tensor.ones(2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"kernel size \(3, 3\) .*larger than the \(padded\) input size \(2, 2\)"):
      Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match=r"bias shape \(3,\) must be \(2,\)"):
      Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(2, 1, 3, 3), Tensor.ones(3))
    with pytest.raises(ValueError, match="stride must be a positive int"): Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 2, 2), stride=0)
    with pytest.raises(ValueError, match="Padding must be an int or a sequence of length 2 or 4"):
      Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 2, 2), padding=(1, 1, 1))
    with pytest.raises(RuntimeError, match="padding='same' needs stride 1, got 2"):
      Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 2, 2), padding="same", stride=2)
    with pytest.raises(ValueError, match="'valid' or 'same'"): Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 2, 2), padding="full")
    with pytest.raises(RuntimeError, match=r"conv_transpose2d: input \(1, 3, 4, 4\) doesn't match weight \(2, 1, 2, 2\)"):
      Tensor.ones(1, 3, 4, 4).conv_transpose2d(Tensor.ones(2, 1, 2, 2))
    with pytest.raises(RuntimeError, match=r"image_conv2d needs 4-d"): Tensor.ones(1, 1, 4).image_conv2d(Tensor.ones(1, 1, 2))

# ***** pooling *****
def _pads_of(padding, n):
  if isinstance(padding, int): return [(padding, padding)] * n
  if len(padding) == n: return [(p, p) for p in padding]
  return [(padding[2 * (n - 1 - i)], padding[2 * (n - 1 - i) + 1]) for i in range(n)]

class TestPool:
  @pytest.mark.parametrize("dev", DEVICES)
  def test_max_avg_default(self, dev):
    x = rnd(2, 3, 6, 5)
    win, _, _ = np_windows(x, (2, 2), (2, 2), (1, 1), [(0, 0)] * 2)
    close(Tensor(x, device=dev).max_pool2d(), win.max((-2, -1)))
    close(Tensor(x, device=dev).avg_pool2d(), win.mean((-2, -1)), atol=1e-6)
  @pytest.mark.parametrize("k,stride,dilation,padding,ceil", [((3, 3), 2, 1, 1, False), ((3, 2), (1, 2), (2, 1), 0, False), ((3, 3), 2, 1, 1, True),
                                                              ((2, 3), 3, 1, (1, 1), True), ((2, 2), 2, 2, (1, 0, 0, 1), True), (3, 1, 1, 0, False)])
  @pytest.mark.cpu
  def test_max_pool(self, k, stride, dilation, padding, ceil):
    x = rnd(1, 2, 7, 8)
    k_ = (k, k) if isinstance(k, int) else k
    s_ = (stride,) * 2 if isinstance(stride, int) else stride
    d_ = (dilation,) * 2 if isinstance(dilation, int) else dilation
    win, _, _ = np_windows(x, k_, s_, d_, _pads_of(padding, 2), ceil, fill=-np.inf)
    close(Tensor(x).max_pool2d(k, stride, dilation, padding, ceil), win.max((-2, -1)))
  @pytest.mark.parametrize("k,stride,padding,ceil,include", [((3, 3), 2, 1, False, True), ((3, 3), 2, 1, False, False), ((3, 3), 2, 1, True, True),
                                                             ((3, 3), 2, 1, True, False), ((2, 3), (2, 2), (1, 1), True, True),
                                                             ((2, 2), 3, 0, True, True)])
  @pytest.mark.cpu
  def test_avg_pool(self, k, stride, padding, ceil, include):
    x = rnd(2, 1, 7, 8)
    s_ = (stride,) * 2 if isinstance(stride, int) else stride
    win, m_in, m_reg = np_windows(x, k, s_, (1, 1), _pads_of(padding, 2), ceil)
    ref = win.sum((-2, -1)) / (m_reg if include else m_in).sum((-2, -1))
    close(Tensor(x).avg_pool2d(k, stride, 1, padding, ceil, include), ref, atol=1e-6)
  @pytest.mark.cpu
  def test_pool_1d_3d(self):
    x1 = rnd(2, 3, 9)
    win, _, _ = np_windows(x1, (3,), (2,), (1,), [(1, 1)], fill=-np.inf)
    close(Tensor(x1).max_pool2d((3,), 2, padding=1), win.max(-1))
    x3 = rnd(1, 1, 4, 4, 4)
    win, _, _ = np_windows(x3, (2, 2, 2), (2, 2, 2), (1, 1, 1), [(0, 0)] * 3)
    close(Tensor(x3).avg_pool2d((2, 2, 2)), win.mean((-3, -2, -1)), atol=1e-6)
  @pytest.mark.cpu
  def test_int_max_pool(self):
    x = np.arange(-8, 8, dtype=np.int32).reshape(1, 1, 4, 4)
    r = Tensor(x).max_pool2d(padding=1)
    assert r.dtype is dtypes.int32
    win, _, _ = np_windows(x, (2, 2), (2, 2), (1, 1), [(1, 1)] * 2, fill=np.iinfo(np.int32).min)
    np.testing.assert_array_equal(r.numpy(), win.max((-2, -1)))
  @pytest.mark.parametrize("dev", DEVICES)
  def test_return_indices_and_unpool(self, dev):
    x = rnd(2, 2, 6, 5)
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 9.0   # a tie: the first position wins
    vals, idx = Tensor(x, device=dev).max_pool2d((3, 2), stride=(2, 2), padding=(1, 0), return_indices=True)
    assert idx.dtype is dtypes.int32
    flat = x.reshape(2, 2, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 2, -1), -1).reshape(vals.shape), vals.numpy())
    assert idx.numpy()[0, 0, 0, 0] == 0
    win, _, _ = np_windows(x, (3, 2), (2, 2), (1, 1), [(1, 1), (0, 0)], fill=-np.inf)
    close(vals, win.max((-2, -1)))
    un = Tensor(vals.numpy(), device=dev).max_unpool2d(Tensor(idx.numpy(), device=dev), (3, 2), stride=(2, 2), padding=(1, 0), output_size=(6, 5))
    ref = np.zeros((2, 2, 30), np.float32)
    np.put_along_axis(ref, idx.numpy().reshape(2, 2, -1), vals.numpy().reshape(2, 2, -1), -1)
    close(un, ref.reshape(2, 2, 6, 5))
  @pytest.mark.cpu
  def test_unpool_default_size(self):
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    v, i = Tensor(x).max_pool2d(return_indices=True)
    un = v.max_unpool2d(i)
    ref = np.zeros((1, 1, 4, 4), np.float32)
    ref[..., 1::2, 1::2] = x[..., 1::2, 1::2]
    close(un, ref)
  @pytest.mark.cpu
  def test_pool_errors(self):
    with pytest.raises(RuntimeError, match=r"kernel size \(3, 3\) .*input size \(2, 2\) of shape \(1, 1, 2, 2\)"):
      Tensor.ones(1, 1, 2, 2).max_pool2d((3, 3))
    with pytest.raises(ValueError, match="kernel_size must be positive ints"): Tensor.ones(1, 1, 4, 4).avg_pool2d((0, 2))
    with pytest.raises(RuntimeError, match=r"a 2-d kernel \(2, 2\) needs an input of at least 2 dims, got \(4,\)"): Tensor.ones(4).max_pool2d()
    with pytest.raises(ValueError, match="dilation must be a positive int"): Tensor.ones(1, 1, 4, 4).max_pool2d(dilation=(1, 0))
    with pytest.raises(RuntimeError, match=r"indices shape \(1, 1, 1, 1\) must match input shape \(1, 1, 2, 2\)"):
      Tensor.ones(1, 1, 2, 2).max_unpool2d(Tensor.zeros(1, 1, 1, 1, dtype=dtypes.int32))

# ***** normalisation *****
class TestNorm:
  @pytest.mark.parametrize("dev", DEVICES)
  def test_layernorm(self, dev):
    a = rnd(3, 4, 5) * 3 + 1
    for axis in (-1, (1, 2)):
      m = a.mean(axis=axis, keepdims=True)
      ref = (a - m) / np.sqrt(((a - m) ** 2).mean(axis=axis, keepdims=True) + 1e-5)
      close(Tensor(a, device=dev).layernorm(axis), ref, atol=1e-5)
  @pytest.mark.cpu
  def test_batchnorm(self):
    x, w, b, mean, invstd = rnd(2, 3, 4), rnd(3, seed=1), rnd(3, seed=2), rnd(3, seed=3), np.abs(rnd(3, seed=4)) + 0.5
    sh = (1, 3, 1)
    ref = (x - mean.reshape(sh)) * w.reshape(sh) * invstd.reshape(sh) + b.reshape(sh)
    close(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(mean), Tensor(invstd)), ref, atol=1e-5)
    close(Tensor(x).batchnorm(None, None, Tensor(mean), Tensor(invstd)), (x - mean.reshape(sh)) * invstd.reshape(sh), atol=1e-5)
    # statistics along the last axis
    close(Tensor(x).batchnorm(None, None, Tensor(mean[:1].repeat(4)), Tensor(invstd[:1].repeat(4)), axis=2),
          (x - mean[0]) * invstd[0], atol=1e-5)
  @pytest.mark.cpu
  @pytest.mark.parametrize("p,dim", [(2.0, 1), (1, 0), (3, -1), (0, 1)])
  def test_normalize(self, p, dim):
    a = rnd(3, 4)
    a[0, 0] = 0
    den = (a != 0).sum(dim, keepdims=True) if p == 0 else (np.abs(a) ** p).sum(dim, keepdims=True) ** (1 / p)
    close(Tensor(a).normalize(p, dim), a / np.maximum(den, 1e-12), atol=1e-5)
    close(Tensor.zeros(2, 3).normalize(), np.zeros((2, 3), np.float32))

# ***** attention *****
class TestAttention:
  @pytest.mark.parametrize("dev", DEVICES)
  def test_sdpa(self, dev):
    q, k, v = rnd(2, 3, 4, 8), rnd(2, 3, 5, 8, seed=1), rnd(2, 3, 5, 6, seed=2)
    close(Tensor(q, device=dev).scaled_dot_product_attention(Tensor(k, device=dev), Tensor(v, device=dev)), np_attention(q, k, v), atol=1e-5)
  @pytest.mark.cpu
  def test_masks(self):
    q, k, v = rnd(2, 4, 8), rnd(2, 4, 8, seed=1), rnd(2, 4, 3, seed=2)
    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True), np_attention(q, k, v, causal=True), atol=1e-5)
    bmask = np.random.default_rng(3).random((4, 4)) > 0.3
    bmask[:, 0] = True
    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(bmask)), np_attention(q, k, v, bmask), atol=1e-5)
    fmask = rnd(4, 4, seed=4)
    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(fmask)), np_attention(q, k, v, fmask), atol=1e-5)
  @pytest.mark.cpu
  def test_gqa(self):
    q, k, v = rnd(1, 4, 3, 8), rnd(1, 2, 3, 8, seed=1), rnd(1, 2, 3, 8, seed=2)
    ref = np_attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True), ref, atol=1e-5)
  @pytest.mark.cpu
  def test_half_dtype(self):
    q = Tensor(rnd(2, 3, 4)).cast(dtypes.half)
    assert q.scaled_dot_product_attention(q, q).dtype is dtypes.half
  @pytest.mark.cpu
  def test_errors(self):
    q = Tensor.ones(2, 4, 8)
    with pytest.raises(RuntimeError, match="both attn_mask and is_causal"):
      q.scaled_dot_product_attention(q, q, attn_mask=Tensor.ones(4, 4, dtype=dtypes.bool), is_causal=True)
    with pytest.raises(RuntimeError, match=r"query \(2, 4, 8\), key \(2, 4, 7\)"): q.scaled_dot_product_attention(Tensor.ones(2, 4, 7), q)
    with pytest.raises(RuntimeError, match=r"enable_gqa needs query heads a multiple"):
      Tensor.ones(1, 3, 2, 4).scaled_dot_product_attention(Tensor.ones(1, 2, 2, 4), Tensor.ones(1, 2, 2, 4), enable_gqa=True)

# ***** interpolation *****
class TestInterpolate:
  @pytest.mark.cpu
  @pytest.mark.parametrize("mode,align", [("linear", False), ("linear", True), ("nearest", False), ("nearest-exact", False)])
  @pytest.mark.parametrize("size", [(7,), (3, 9), (2, 1)])
  def test_modes(self, mode, align, size):
    a = rnd(2, 4, 5)
    ref = a.astype(np.float64)
    for j, s in enumerate(size): ref = np_interp_axis(ref, a.ndim - len(size) + j, s, mode, align)
    close(Tensor(a).interpolate(size, mode, align), ref, atol=1e-5)
  @pytest.mark.parametrize("dev", DEVICES)
  def test_int_input(self, dev):
    a = np.array([[1, 2, 3, 4], [21, 22, 23, 24], [41, 42, 43, 44]], np.int32)
    r = Tensor(a, device=dev).interpolate((2, 3))
    assert r.dtype is dtypes.int32
    ref = np_interp_axis(np_interp_axis(a.astype(np.float64), 0, 2, "linear", False), 1, 3, "linear", False)
    np.testing.assert_array_equal(r.numpy(), ref.astype(np.int32))
  @pytest.mark.cpu
  def test_errors(self):
    with pytest.raises(ValueError, match=r"size of 1 to 2 positive ints for shape \(2, 3\), got \(1, 2, 3\)"):
      Tensor.ones(2, 3).interpolate((1, 2, 3))
    with pytest.raises(ValueError, match="mode must be linear"): Tensor.ones(2, 3).interpolate((4,), mode="cubic")
    with pytest.raises(ValueError, match="align_corners needs mode='linear'"): Tensor.ones(2, 3).interpolate((4,), mode="nearest", align_corners=True)

# ***** losses *****
def np_bce(p, y): return -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log(1 - p), -100))
class TestLosses:
  @pytest.mark.parametrize("dev", DEVICES)
  @pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
  def test_bce(self, dev, reduction):
    p, y = 1 / (1 + np.exp(-rnd(3, 4))), (rnd(3, 4, seed=1) > 0).astype(np.float32)
    ref = np_bce(p, y)
    ref = ref.mean() if reduction == "mean" else ref.sum() if reduction == "sum" else ref
    close(Tensor(p, device=dev).binary_crossentropy(Tensor(y, device=dev), reduction), ref, atol=1e-5)
  @pytest.mark.cpu
  def test_bce_clamped(self):
    close(Tensor([0.0, 1.0]).binary_crossentropy(Tensor([1.0, 0.0]), "none"), [100.0, 100.0])
  @pytest.mark.cpu
  def test_bce_logits(self):
    x, y, pw = rnd(3, 4) * 5, (rnd(3, 4, seed=1) > 0).astype(np.float32), np.abs(rnd(4, seed=2))
    ls = lambda z: -np.log1p(np.exp(-z))   # noqa: E731
    close(Tensor(x).binary_crossentropy_logits(Tensor(y)), (-(y * ls(x) + (1 - y) * ls(-x))).mean(), atol=1e-5)
    close(Tensor(x).binary_crossentropy_logits(Tensor(y), "none", Tensor(pw)), -(pw * y * ls(x) + (1 - y) * ls(-x)), atol=1e-5)
    # huge logits stay finite
    close(Tensor([200.0, -200.0]).binary_crossentropy_logits(Tensor([0.0, 1.0]), "none"), [200.0, 200.0])
  @pytest.mark.cpu
  @pytest.mark.parametrize("dev", DEVICES)
  def test_sparse_cce(self, dev):
    x, y = rnd(5, 4), np.array([0, 3, 1, 1, 2], np.int32)
    lp = np_log_softmax(x)
    picked = lp[np.arange(5), y]
    close(Tensor(x, device=dev).sparse_categorical_crossentropy(Tensor(y, device=dev)), -picked.mean(), atol=1e-5)
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), reduction="none"), -picked, atol=1e-5)
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), reduction="sum"), -picked.sum(), atol=1e-5)
    # ignore_index drops the loss and the count; label smoothing mixes in the mean log-probability
    keep = y != 1
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), ignore_index=1), -(picked * keep).sum() / keep.sum(), atol=1e-5)
    sm = 0.9 * picked + 0.1 * lp.mean(-1)
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), label_smoothing=0.1), -sm.mean(), atol=1e-5)
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), ignore_index=1, label_smoothing=0.1), -(sm * keep).sum() / keep.sum(), atol=1e-5)
  @pytest.mark.cpu
  def test_sparse_cce_batched(self):
    x, y = rnd(2, 3, 4), np.array([[0, 3, 1], [2, 2, 0]], np.int32)
    lp = np_log_softmax(x)
    close(Tensor(x).sparse_categorical_crossentropy(Tensor(y), reduction="none"), -np.take_along_axis(lp, y[..., None], -1)[..., 0], atol=1e-5)
  @pytest.mark.cpu
  def test_cross_entropy(self):
    x, y = rnd(4, 3, 2), np.array([[0, 2], [1, 1], [2, 0], [0, 0]], np.int32)
    lp = np_log_softmax(x, 1)
    picked = np.take_along_axis(lp, y[:, None], 1)[:, 0]
    close(Tensor(x).cross_entropy(Tensor(y)), -picked.mean(), atol=1e-5)
    probs = np_softmax(rnd(4, 3, 2, seed=5), 1)
    close(Tensor(x).cross_entropy(Tensor(probs), reduction="none"), -(lp * probs).sum(1), atol=1e-5)
    smooth = 0.8 * np.eye(3)[y].transpose(0, 2, 1) + 0.2 / 3
    close(Tensor(x).cross_entropy(Tensor(y), "sum", label_smoothing=0.2), -(lp * smooth).sum(), atol=1e-4)
    # 1-d logits, a 0-d label
    close(Tensor(x[:, 0, 0]).cross_entropy(Tensor(np.int32(2))), -np_log_softmax(x[:, 0, 0])[2], atol=1e-5)
  @pytest.mark.cpu
  def test_nll_loss(self):
    x, y, w = np_log_softmax(rnd(5, 3)), np.array([0, 2, 1, 2, 0], np.int32), np.abs(rnd(3, seed=1)) + 0.1
    picked = x[np.arange(5), y]
    close(Tensor(x).nll_loss(Tensor(y)), -picked.mean(), atol=1e-6)
    close(Tensor(x).nll_loss(Tensor(y), Tensor(w)), -(picked * w[y]).sum() / w[y].sum(), atol=1e-6)
    keep = y != 2
    close(Tensor(x).nll_loss(Tensor(y), Tensor(w), ignore_index=2), -(picked * w[y] * keep).sum() / (w[y] * keep).sum(), atol=1e-6)
    close(Tensor(x).nll_loss(Tensor(y), reduction="none"), -picked, atol=1e-6)
    x4, y4 = rnd(2, 3, 2, 2), np.array([[[0, 1], [2, 2]], [[1, 1], [0, 2]]], np.int32)
    close(Tensor(x4).nll_loss(Tensor(y4), reduction="sum"), -np.take_along_axis(x4, y4[:, None], 1).sum(), atol=1e-5)
  @pytest.mark.cpu
  def test_loss_errors(self):
    x = Tensor.ones(2, 3)
    with pytest.raises(ValueError, match=r"reduction='x' must be one of \('mean', 'sum', 'none'\)"): x.binary_crossentropy(x, reduction="x")
    with pytest.raises(RuntimeError, match=r"target shape \(3,\) must be the input shape \(2, 3\) or it without dim 1"):
      x.cross_entropy(Tensor([1, 2, 0]))
    with pytest.raises(RuntimeError, match=r"labels shape \(3,\) must be the logits shape \(2, 3\) without its last dim"):
      x.sparse_categorical_crossentropy(Tensor([1, 2, 0]))
    with pytest.raises(RuntimeError, match=r"nll_loss: target shape \(2, 1\) must be the input shape \(2, 3\) without dim 1"):
      x.nll_loss(Tensor([[1], [0]]))
    with pytest.raises(RuntimeError, match=r"target shape \(2, 4\) must match input shape \(2, 3\)"): x.binary_crossentropy(Tensor.ones(2, 4))
    with pytest.raises(ValueError, match="label_smoothing must be in"): x.cross_entropy(Tensor([1, 2]), label_smoothing=1.5)
    with pytest.raises(TypeError, match="class labels must be an int tensor, got dtypes.float"): x.cross_entropy(Tensor([1.0, 2.0]))

# ***** non-Tensor arguments where a Tensor is needed: TypeError naming the op *****
@pytest.mark.parametrize("call", [
  lambda x: x.linear([[1.0]]), lambda x: x.conv2d("w"), lambda x: x.conv2d(Tensor.ones(1, 1, 1, 1), bias=3), lambda x: x.conv_transpose2d(None),
  lambda x: x.max_unpool2d([0]), lambda x: x.image_conv2d(2.0), lambda x: x.image_dot([1]), lambda x: x.batchnorm(None, None, 0, 1),
  lambda x: x.scaled_dot_product_attention(x, "v"), lambda x: x.binary_crossentropy(1), lambda x: x.binary_crossentropy_logits(x, pos_weight=2),
  lambda x: x.sparse_categorical_crossentropy([0]), lambda x: x.cross_entropy(0), lambda x: x.nll_loss(x, weight=[1.0])])
def test_tensor_arguments(call):
  with pytest.raises(TypeError, match=r"takes Tensors, got (list|str|int|NoneType|float)"): call(Tensor.ones(1, 1, 2, 2))

# ***** kernel counts: no more than tinygrad 0.14 schedules for the same code (measured with GlobalCounters.kernel_count there) *****
def _kernels(t:Tensor) -> int: return len(t.schedule()[0])
class TestKernelCounts:
  def _inputs(self):
    r = lambda *s, seed=0: Tensor(rnd(*s, seed=seed)).realize()   # noqa: E731
    return r(32, 64), r(64, 48, seed=1), r(48, seed=2), [r(2, 4, 16, 8, seed=i) for i in range(3)], r(2, 3, 8, 8, seed=4), r(4, 3, 3, 3, seed=5)
  @pytest.mark.parametrize("name,limit", [("softmax", 3), ("log_softmax", 3), ("logsumexp", 2), ("layernorm", 3), ("matmul+bias+relu", 1),
                                          ("linear", 1), ("attention", 4), ("attention causal", 4), ("conv2d", 1), ("max_pool2d", 1),
                                          ("avg_pool2d", 1), ("cnn forward", 5), ("conv_transpose2d", 1), ("interpolate", 2),
                                          ("max_pool2d indices", 2), ("binary_crossentropy_logits", 1)])
  @pytest.mark.cpu
  def test_counts(self, name, limit):
    x, w, b, (q, k, v), img, cw = self._inputs()
    r = lambda *s: Tensor(rnd(*s, seed=7)).realize()   # noqa: E731
    def cnn():
      h = r(2, 3, 16, 16).conv2d(cw, r(4)).batchnorm(r(4), r(4), r(4), r(4)).relu().max_pool2d()
      h = h.conv2d(r(8, 4, 3, 3), r(8)).relu().max_pool2d()   # (2, 8, 2, 2)
      return h.reshape(2, -1).linear(r(32, 10), r(10))
    t = {"softmax": lambda: x.softmax(), "log_softmax": lambda: x.log_softmax(), "logsumexp": lambda: x.logsumexp(1),
         "layernorm": lambda: x.layernorm(), "matmul+bias+relu": lambda: (x @ w + b).relu(), "linear": lambda: x.linear(w, b),
         "attention": lambda: q.scaled_dot_product_attention(k, v), "attention causal": lambda: q.scaled_dot_product_attention(k, v, is_causal=True),
         "conv2d": lambda: img.conv2d(cw), "max_pool2d": lambda: img.max_pool2d(), "avg_pool2d": lambda: img.avg_pool2d(), "cnn forward": cnn,
         "conv_transpose2d": lambda: img.conv_transpose2d(r(3, 4, 3, 3), stride=2), "interpolate": lambda: img.interpolate((16, 16)),
         "max_pool2d indices": lambda: img.max_pool2d(return_indices=True)[1],
         "binary_crossentropy_logits": lambda: x.binary_crossentropy_logits(x)}[name]()
    assert _kernels(t) <= limit

@pytest.mark.cpu
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_bilinear_uint8_no_wraparound(align_corners):
  # torch's mode name; uint8 values are interpolated in float and rounded (0.14 wraps 253 + 25 to 22)
  a = np.array([[0, 50, 100], [150, 200, 250]], np.uint8).reshape(1, 1, 2, 3)
  out = Tensor(a).interpolate((3, 5), mode="bilinear", align_corners=align_corners)
  assert out.dtype == dtypes.uint8
  ref = Tensor(a.astype(np.float32)).interpolate((3, 5), mode="linear", align_corners=align_corners).numpy()
  np.testing.assert_allclose(out.numpy(), ref, atol=1)
  assert out.numpy()[0, 0, 1].tolist() == ([75, 95, 125, 155, 175] if not align_corners else [75, 100, 125, 150, 175])
  with pytest.raises(ValueError, match=r"'bilinear' resamples 2 dims"): Tensor(a).interpolate((5,), mode="bilinear")
