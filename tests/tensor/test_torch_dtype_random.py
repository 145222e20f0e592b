import numpy as np
import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor, dtypes  # noqa: E402

TO = {"int8": (dtypes.int8, torch.int8), "int32": (dtypes.int32, torch.int32),
      "int64": (dtypes.int64, torch.int64), "uint8": (dtypes.uint8, torch.uint8),
      "bool": (dtypes.bool, torch.bool), "half": (dtypes.float16, torch.float16), "double": (dtypes.float64, torch.float64),
      "bfloat16": (dtypes.bfloat16, torch.bfloat16)}

@pytest.mark.parametrize("to", list(TO))
def test_casts_in_range(to):
  # values every target holds (out-of-range float->int is undefined in C and differs in torch too)
  v = np.array([0.0, 1.7, -0.0, 3.5, 100.25, 0.5], dtype=np.float32)
  if to not in ("uint8", "bool"): v = np.concatenate([v, -v])
  ours, theirs = TO[to]
  compare(lambda x: x.cast(ours), lambda x: x.to(theirs), vals=[v], grad=to in ("half", "double"), atol=0, rtol=0, check_dtype=to != "bfloat16")

def test_cast_grads_and_bitcast():
  compare(lambda x: x.half().float() * 2, lambda x: x.half().float() * 2, [(3, 4)], atol=1e-3, rtol=1e-3)
  v = np.array([1.0, -2.5, 0.0, np.inf], dtype=np.float32)
  compare(lambda x: x.bitcast(dtypes.int32), lambda x: x.view(torch.int32), vals=[v])
  compare(lambda x: x.bitcast(dtypes.uint32).cast(dtypes.int64), lambda x: x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF, vals=[v])
  compare(lambda x: x.int(), lambda x: x.int(), vals=[np.array([True, False])])

def test_random_statistics():
  # distributions by statistics only: torch's generator is another algorithm, so values can't match
  Tensor.manual_seed(0)
  n = 20000
  u, g = Tensor.rand(n).numpy(), Tensor.randn(n).numpy()
  assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005 and u.min() >= 0 and u.max() < 1
  assert abs(g.mean()) < 0.03 and abs(g.std() - 1) < 0.03
  k = Tensor.randint(n, low=-3, high=4).numpy()
  assert set(np.unique(k)) == set(range(-3, 4))
  p = Tensor.randperm(50).numpy()
  assert sorted(p.tolist()) == list(range(50))
  m = Tensor([0.1, 0.0, 0.9]).multinomial(4000, replacement=True).numpy()
  assert not (m == 1).any() and abs((m == 2).mean() - 0.9) < 0.03
  ku = Tensor.kaiming_uniform(64, 64).numpy()
  bound = np.sqrt(6 / ((1 + 0.01 ** 2) * 64))
  assert np.abs(ku).max() <= bound and abs(ku.std() - bound / np.sqrt(3)) < 0.1 * bound
