# Reductions, scans and sorts against numpy: values, dtypes, NaN, empty tensors, errors; accurate float sums in one kernel.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes, Context
from tinygrad.engine.realize import GlobalCounters

A = np.array([[3., 1., 2., 1.], [-1., 5., 5., 0.], [2., 2., -7., 4.]], np.float32)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_stats(device, axis, keepdim):
  t = Tensor(A, device=device)
  for got, want in [(t.var(axis, keepdim), A.var(axis, keepdims=keepdim, ddof=1)), (t.std(axis, keepdim), A.std(axis, keepdims=keepdim, ddof=1)),
                    (t.any(axis, keepdim), A.any(axis, keepdims=keepdim)), (t.all(axis, keepdim), A.all(axis, keepdims=keepdim))]:
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_arg_and_nan(device):
  t = Tensor(A, device=device)
  for ax in (None, 0, 1):
    np.testing.assert_array_equal(t.argmax(ax).numpy(), A.argmax(ax))
    np.testing.assert_array_equal(t.argmin(ax).numpy(), A.argmin(ax))
  n = Tensor([1., np.nan, 2.], device=device)
  assert np.isnan(n.max().item()) and np.isnan(n.min().item()) and n.argmax().item() == 1 and n.argmin().item() == 1
  assert t.argmax(1).dtype is dtypes.int32

@pytest.mark.parametrize("device", DEVICES)
def test_scans(device):
  t = Tensor(A, device=device)
  for ax in (0, 1, -1):
    np.testing.assert_allclose(t.cumsum(ax).numpy(), A.cumsum(ax))
    np.testing.assert_allclose(t.cumprod(ax).numpy(), A.cumprod(ax))
    np.testing.assert_allclose(t.cummax(ax)[0].numpy(), np.maximum.accumulate(A, ax))
    np.testing.assert_allclose(t.cummin(ax)[0].numpy(), np.minimum.accumulate(A, ax))
    np.testing.assert_allclose(t.logcumsumexp(ax).numpy(), np.logaddexp.accumulate(A.astype(np.float64), ax), rtol=1e-5)
  np.testing.assert_array_equal(Tensor([0, 1, -1, 2, 2, 3, -3], device=device).cummax(0)[1].numpy(), [0, 1, 1, 3, 4, 5, 5])  # ties: later (torch)
  assert Tensor([1, 2], dtype=dtypes.int8).cumsum().dtype is dtypes.int32

@pytest.mark.cpu
def test_long_cumsum():
  a = np.arange(1300, dtype=np.float32) % 7
  np.testing.assert_allclose(Tensor(a).cumsum().numpy(), a.cumsum())

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort(device, descending):
  a = np.array([[3., np.nan, 1., 2., 1., -np.inf, 5.], [0., 0., 9., -1., 4., 4., 4.]], np.float32)
  v, i = Tensor(a, device=device).sort(-1, descending)
  order = np.argsort(-a if descending else a, axis=-1, kind="stable")
  if descending: order = np.array([[1, 6, 0, 3, 2, 4, 5], [2, 4, 5, 6, 0, 1, 3]])  # NaN first, ties in order (torch)
  np.testing.assert_array_equal(i.numpy(), order)
  np.testing.assert_array_equal(v.numpy(), np.take_along_axis(a, order, -1))
  tv, ti = Tensor(a, device=device).topk(3, largest=not descending)
  assert tv.shape == (2, 3) and ti.dtype is dtypes.int32

@pytest.mark.cpu
def test_sum_accuracy_split():
  # a big sum with one result: the outer level of its staged sum is a kernel of partial sums (threaded), a second kernel adds them;
  # the levels (so the accuracy) are the staged sum's. A smaller sum is still one kernel.
  GlobalCounters.reset()
  assert Tensor.ones(10**8, buffer=False).sum().item() == 1e8 and GlobalCounters.kernel_count == 2
  GlobalCounters.reset()
  assert Tensor.ones(10**5, buffer=False).sum().item() == 1e5 and GlobalCounters.kernel_count == 1
  r = np.random.default_rng(0).random(10**6, dtype=np.float32)
  assert abs(Tensor(r).sum().item() - r.astype(np.float64).sum()) / r.sum() < 5e-7

@pytest.mark.cpu
def test_sum_of_stored_values_is_one_kernel():
  # summing a buffer only reads memory, which one core does about as fast as all of them: no partials kernel, no second launch
  x = np.random.default_rng(2).standard_normal(1 << 22, dtype=np.float32)
  t = Tensor(x).realize()
  for expr, ref in ((t.sum(), x.astype(np.float64).sum()), (t.reshape(2048, 2048).sum(), x.astype(np.float64).sum()),
                    (t.reshape(2, 2048, 1024).sum((1, 2)), x.reshape(2, -1).astype(np.float64).sum(1)), (t.half().sum(), None)):
    items = expr.schedule()[0]
    assert len(items) == 1 and items[0].name.startswith("r_") and "16" in items[0].name.split("_")[-1], [i.name for i in items]
    if ref is not None: np.testing.assert_allclose(expr.numpy(), ref, rtol=1e-6, atol=2e-3)
  assert len((t * 2).sum().schedule()[0]) == 2   # computed values: partial sums on every core, then their sum
  with Context(NUM_CPU_THREADS=8): assert len(t.reshape(4096, 1024).sum().schedule()[0]) == 2  # more cores than one core's stream keeps busy: split

@pytest.mark.cpu
def test_empty_and_dtypes():
  np.testing.assert_array_equal(Tensor.zeros(0, 3).sum(0).numpy(), np.zeros(3))
  assert np.isnan(Tensor.zeros(0, 3).mean().item()) and Tensor.zeros(0).all().item() and not Tensor.zeros(0).any().item()
  assert Tensor([1, 2], dtype=dtypes.int8).sum().dtype is dtypes.int32 and Tensor([1, 2]).mean().dtype is dtypes.float32
  assert Tensor(3.).sum(-1).item() == 3.0

def test_errors():
  with pytest.raises(IndexError, match=r"\(2, 3\)"): Tensor.zeros(2, 3).sum(2)
  with pytest.raises(IndexError, match=r"\(2, 3\)"): Tensor.zeros(2, 3).argmax(-3)
  with pytest.raises(RuntimeError, match="multiple times"): Tensor.zeros(2, 3).sum((0, 0))
  with pytest.raises(IndexError, match="empty"): Tensor.zeros(0).argmax()
  with pytest.raises(ValueError, match="out of range"): Tensor.zeros(4).topk(5)

@pytest.mark.cpu
def test_split_sum_random_and_axes():
  # the partials kernel over a permuted, padded view (sum over both axes of a transposed matrix whose size is no power of two)
  rng = np.random.default_rng(1)
  r = rng.standard_normal((1500, 1401)).astype(np.float32)
  assert len((Tensor(r).T * 2).sum().schedule()[0]) == 2
  ref = r.astype(np.float64).sum()
  # as close as numpy's pairwise sum (1.5e-4 here); one float32 accumulator in order is 1.3e-2 off
  assert abs((Tensor(r).T * 2).sum().item() - 2 * ref) < 4e-3
  # stored values (no arithmetic before the sum) stay one kernel, a staged sum over the flat elements: as accurate
  assert len(Tensor(r).T.sum().schedule()[0]) == 1
  assert abs(Tensor(r).T.sum().item() - ref) < 2e-3
  np.testing.assert_allclose(Tensor(r).sum(axis=(0, 1), keepdim=True).numpy(), [[ref]], rtol=1e-5, atol=1e-3)
  # few results: each its own partials
  np.testing.assert_allclose(Tensor(r[:1400].reshape(2, -1)).sum(1).numpy(), r[:1400].reshape(2, -1).astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)
