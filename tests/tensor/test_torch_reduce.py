import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare  # noqa: E402

REDUCE = {
  "sum": (lambda x: x.sum(1), lambda x: x.sum(1)), "sum_all": (lambda x: x.sum(), lambda x: x.sum()),
  "sum_keep": (lambda x: x.sum((0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdim=True)),
  "prod": (lambda x: x.prod(-1), lambda x: x.prod(-1)), "max": (lambda x: x.max(1), lambda x: x.amax(1)),
  "min": (lambda x: x.min((0, 1)), lambda x: x.amin((0, 1))), "mean": (lambda x: x.mean(2), lambda x: x.mean(2)),
  "var": (lambda x: x.var(1), lambda x: x.var(1)), "std": (lambda x: x.std(0, correction=0), lambda x: x.std(0, correction=0)),
  "var_mean": (lambda x: x.var_mean(-1), lambda x: torch.var_mean(x, -1)), "std_mean": (lambda x: x.std_mean(1), lambda x: torch.std_mean(x, 1)),
  "logsumexp": (lambda x: x.logsumexp(1), lambda x: x.logsumexp(1)), "softmax": (lambda x: x.softmax(1), lambda x: x.softmax(1)),
  "log_softmax": (lambda x: x.log_softmax(), lambda x: x.log_softmax(-1)),
  "softmin": (lambda x: x.softmin(0), lambda x: torch.nn.functional.softmin(x, 0)),
  "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1)), "cumprod": (lambda x: x.cumprod(2), lambda x: x.cumprod(2)),
  "logcumsumexp": (lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1)),
  "cummax": (lambda x: x.cummax(1), lambda x: tuple(torch.cummax(x, 1))), "cummin": (lambda x: x.cummin(2), lambda x: tuple(torch.cummin(x, 2))),
  "sort": (lambda x: x.sort(1), lambda x: tuple(torch.sort(x, 1))),
  "sort_desc": (lambda x: x.sort(0, descending=True), lambda x: tuple(torch.sort(x, 0, descending=True))),
  "topk": (lambda x: x.topk(2, dim=1), lambda x: tuple(torch.topk(x, 2, dim=1))),
  "topk_small": (lambda x: x.topk(2, dim=2, largest=False), lambda x: tuple(torch.topk(x, 2, dim=2, largest=False))),
}

@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce(name):
  ours, theirs = REDUCE[name]
  compare(ours, theirs, [(3, 4, 5)], atol=1e-5, rtol=1e-5)

def test_arg_and_bool_reductions():
  compare(lambda x: (x.argmax(1), x.argmin(0), x.argmax(), x.argsort(1), x.argsort(0, descending=True)),
          lambda x: (x.argmax(1), x.argmin(0), x.argmax(), x.argsort(1), x.argsort(0, descending=True)), [(4, 6)], check_dtype=False)
  b = np.array([[True, False, True], [True, True, True]])
  compare(lambda x: (x.any(1), x.all(0), x.all()), lambda x: (x.any(1), x.all(0), x.all()), vals=[b])

def test_int_reductions():
  v = np.array([[3, -1, 4], [1, -5, 9]], dtype=np.int32)
  # sum of int32 is int32 in tinygrad (int64 in torch)
  compare(lambda x: (x.sum(1), x.prod(0), x.cumsum(1)), lambda x: (x.sum(1), x.prod(0), x.cumsum(1)), vals=[v], check_dtype=False)
  compare(lambda x: (x.max(1), x.min(0)), lambda x: (x.amax(1), x.amin(0)), vals=[v])
  compare(lambda x: x.mean(1), lambda x: x.float().mean(1), vals=[v])

def test_sort_keeps_signed_zeros_and_nan():
  v = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0], dtype=np.float32)
  ours, _ = compare(lambda x: x.sort()[0], lambda x: torch.sort(x, stable=True)[0], vals=[v], grad=False)[0]
  assert list(np.signbit(ours)) == list(np.signbit(np.sort(v, kind="stable")))

def test_nan_reductions():
  v = np.array([[1.0, np.nan, 2.0], [3.0, 0.0, -1.0]], dtype=np.float32)
  compare(lambda x: (x.max(1), x.min(1), x.sum(1), x.argmax(1)), lambda x: (x.amax(1), x.amin(1), x.sum(1), x.argmax(1)), vals=[v],
          grad=False, check_dtype=False)
