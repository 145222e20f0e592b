# Random ops: the same seed gives the same numbers as tinygrad 0.14 (its outputs recorded below, computed once with 0.14.0), on every
# device; distributions and error paths.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context

DEVICES = ["PYTHON", pytest.param("CPU", marks=pytest.mark.cpu)]
r6 = lambda t: [round(v, 6) for v in t.flatten().tolist()]

# tinygrad 0.14.0 with Tensor.manual_seed(7) before each line
REF_SEED7 = {
  "randn": (lambda: Tensor.randn(5), [0.507284, -2.046151, -0.70804, 0.103537, 0.250976]),
  "uniform": (lambda: Tensor.uniform(4, low=-2.0, high=3.0), [0.172474, -1.763647, -1.954577, 1.374335]),
  "normal": (lambda: Tensor.normal(4, mean=1.0, std=2.0), [-0.044301, 0.2951, 0.447772, 3.399503]),
  "randint": (lambda: Tensor.randint(6, low=-5, high=5), [-5, -5, -3, -2, -5, 3]),
  "kaiming_uniform": (lambda: Tensor.kaiming_uniform(2, 3), [-1.214842, -1.320696, -0.799921, -0.496007, -1.376706, 0.904776]),
  "glorot_uniform": (lambda: Tensor.glorot_uniform(2, 3), [-0.94106, -1.023058, -0.619647, -0.384224, -1.066445, 0.700872]),
  "scaled_uniform": (lambda: Tensor.scaled_uniform(2, 3), [-0.350712, -0.381271, -0.230929, -0.143192, -0.397441, 0.261199]),
  "rand_half": (lambda: Tensor.rand(4, dtype=dtypes.half), [0.480469, 0.34082, 0.077148, 0.428711]),
  "rand64": (lambda: Tensor.rand(3, dtype=dtypes.float64), [0.03304, 0.324626, 0.819903]),
}

@pytest.mark.cpu
@pytest.mark.parametrize("name", list(REF_SEED7))
def test_same_numbers_as_014(name):
  fn, ref = REF_SEED7[name]
  Tensor.manual_seed(7)
  np.testing.assert_allclose(r6(fn()), ref, atol=2e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_seed_sequence(device):
  Tensor.manual_seed(7)
  a, b = Tensor.rand(3, device=device), Tensor.rand(3, device=device)
  np.testing.assert_allclose(r6(a), [0.434495, 0.047271, 0.009085], atol=2e-6)
  np.testing.assert_allclose(r6(b), [0.949456, 0.387042, 0.965637], atol=2e-6)
  Tensor.manual_seed(7)
  assert Tensor.rand(3, device=device).tolist() == a.tolist()

@pytest.mark.cpu
def test_random_bits():
  key, counter = Tensor([1, 2], dtype=dtypes.uint32), Tensor([5, 0], dtype=dtypes.uint32)
  assert Tensor.random_bits(key, counter, 5).tolist() == [1031849886, 860212176, 1407182684, 1166257442, 3343204590]  # 0.14's words
  assert Tensor.random_bits(key, counter, 0).shape == (0,)
  with pytest.raises(ValueError, match="uint32 key and counter of shape"): Tensor.random_bits(Tensor([1, 2]), counter, 3)
  with pytest.raises(ValueError, match="non-negative int count"): Tensor.random_bits(key, counter, -1)
  with pytest.raises(TypeError, match="random_bits takes Tensors"): Tensor.random_bits([1, 2], counter, 3)

@pytest.mark.cpu
def test_dropout():
  x = Tensor.ones(10)
  assert x.dropout(0.3) is x   # not training: the identity
  Tensor.manual_seed(42)
  with Context(TRAINING=1):
    ref = [1.4285714626312256, 0.0, 0.0, 0.0, 1.4285714626312256, 1.4285714626312256, 1.4285714626312256, 0.0, 1.4285714626312256, 0.0]
    np.testing.assert_allclose(x.dropout(0.3).tolist(), ref, rtol=1e-7)   # 0.14's output for this seed
    assert x.dropout(0.0) is x and x.dropout(1.0).tolist() == [0.0] * 10
    kept = Tensor.ones(4000).dropout(0.25).numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, np.float32(1 / 0.75)} and abs((kept == 0).mean() - 0.25) < 0.03
  with pytest.raises(ValueError, match=r"in \[0, 1\], got 1.5"): x.dropout(1.5)

@pytest.mark.cpu
def test_distributions():
  Tensor.manual_seed(0)
  n = Tensor.randn(20000).numpy()
  assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
  u = Tensor.uniform(20000, low=2.0, high=4.0).numpy()
  assert u.min() >= 2.0 and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.03
  i = Tensor.randint(5000, low=3, high=7).numpy()
  assert set(np.unique(i).tolist()) == {3, 4, 5, 6}
  k = Tensor.kaiming_normal(64, 32).numpy()
  assert abs(k.std() - (2 / (1 + 0.01 ** 2) / 32) ** 0.5) < 0.02

def test_random_errors():
  with pytest.raises(ValueError, match="rand needs a float dtype"): Tensor.rand(3, dtype=dtypes.int32)
  with pytest.raises(ValueError, match="low < high"): Tensor.randint(3, low=5, high=5)
  with pytest.raises(TypeError, match="randint needs an int dtype"): Tensor.randint(3, dtype=dtypes.float32)
  with pytest.raises(ValueError, match="low < high"): Tensor.uniform(3, low=1.0, high=0.0)
  with pytest.raises(ValueError, match="std >= 0"): Tensor.normal(3, std=-1.0)
  with pytest.raises(TypeError, match="manual_seed needs an int"): Tensor.manual_seed(1.5)
  with pytest.raises(ValueError, match="non-negative int n"): Tensor.randperm(-1)
  w = Tensor([1.0, 2.0])
  with pytest.raises(RuntimeError, match=r"1-d or 2-d tensor of weights, got shape \(1, 1, 2\)"): w.reshape(1, 1, 2).multinomial()
  with pytest.raises(RuntimeError, match="num_samples > 0"): w.multinomial(0)
  with pytest.raises(RuntimeError, match="can't draw 3 samples without replacement from 2"): w.multinomial(3)

# randperm and multinomial sort (argsort, topk) and scan (cumsum) as 0.14 does: those ops come with the reduce/sort work of issue 10

@pytest.mark.cpu
def test_randperm_multinomial():
  Tensor.manual_seed(42)
  p = Tensor.randperm(8)
  assert p.dtype is dtypes.int32 and p.tolist() == [5, 2, 0, 3, 7, 6, 4, 1]   # 0.14's permutation for this seed
  Tensor.manual_seed(42)
  assert Tensor([1, 2, 3, 4]).multinomial(12, replacement=True).tolist() == [0, 3, 3, 3, 2, 3, 3, 2, 3, 2, 2, 3]
  Tensor.manual_seed(42)
  assert Tensor([1, 2, 3, 4]).multinomial(3).tolist() == [2, 1, 3]
  assert sorted(Tensor.randperm(50).tolist()) == list(range(50))
  m = Tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]).multinomial(4, replacement=True)
  assert m.shape == (2, 4) and m.tolist() == [[1] * 4, [0] * 4]
