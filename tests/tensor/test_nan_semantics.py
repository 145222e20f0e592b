# Where tinygrad 0.14 is silently wrong about NaN (and x/x at 0) we follow torch and numpy; README "Differences from tinygrad 0.14"
# lists each case. Every expectation here is numpy's (or torch's documented rule where numpy has none).
import math
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor

pytestmark = pytest.mark.cpu
NAN = float("nan")

def _same(got, want): np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), np.asarray(want, dtype=np.float32))

@pytest.mark.parametrize("device", DEVICES)
def test_max_min_propagate_nan(device):
  x = np.array([[1.0, NAN, 3.0], [2.0, 5.0, 4.0]], dtype=np.float32)
  t = Tensor(x, device=device)
  assert math.isnan(t.max().item()) and math.isnan(t.min().item())
  _same(t.max(axis=1).numpy(), np.max(x, axis=1))
  _same(t.min(axis=1).numpy(), np.min(x, axis=1))
  _same(t.max(axis=0).numpy(), np.max(x, axis=0))

@pytest.mark.parametrize("device", DEVICES)
def test_maximum_minimum_nan_either_side(device):
  a, b = np.array([1.0, NAN, NAN], dtype=np.float32), np.array([NAN, 0.0, NAN], dtype=np.float32)
  _same(Tensor(a, device=device).maximum(Tensor(b, device=device)).numpy(), np.maximum(a, b))
  _same(Tensor(a, device=device).minimum(Tensor(b, device=device)).numpy(), np.minimum(a, b))

@pytest.mark.parametrize("device", DEVICES)
def test_argmax_argmin_first_nan(device):
  x = np.array([1.0, NAN, 3.0, NAN], dtype=np.float32)
  assert Tensor(x, device=device).argmax().item() == np.argmax(x) == 1
  assert Tensor(x, device=device).argmin().item() == np.argmin(x) == 1

@pytest.mark.parametrize("device", DEVICES)
def test_sort_keeps_nan_last(device):
  x = np.array([3.0, NAN, 1.0, 2.0, NAN], dtype=np.float32)
  vals, idx = Tensor(x, device=device).sort()
  _same(vals.numpy(), np.sort(x))
  assert sorted(idx.tolist()) == list(range(5)) and all(math.isnan(x[i]) for i in idx.tolist()[3:])
  _same(Tensor(x, device=device).sort(descending=True)[0].numpy(), np.sort(x)[::-1])
  _same(Tensor(x, device=device).topk(3)[0].numpy(), np.sort(x)[::-1][:3])

@pytest.mark.parametrize("device", DEVICES)
def test_x_over_x_at_zero(device):
  x = Tensor(np.array([0.0, 2.0, np.inf], dtype=np.float32), device=device)
  with np.errstate(invalid="ignore"): _same((x / x).numpy(), np.array([NAN, 1.0, NAN], dtype=np.float32))
