# A padded view of a sum (a max-pool's padding around a conv, batchnorm and relu: ResNet's stem) pushes its mask into the sum's loads;
# the mask of a factor whose address doesn't move with what the mask tests (the conv's weight) is lifted out of the sum
# (schedule/rangeify.py pm_lift_gates): the weight is read ungated (packable, a vector), the padded positions are still the pad value.
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops
from tests.helpers.devices import DEVICES
from tests.helpers.kernels import rand
from tests.helpers.numpy_ref import np_conv

def _stem(x:Tensor, w:Tensor, m:Tensor, s:Tensor) -> Tensor:
  return x.conv2d(w, stride=2, padding=3).batchnorm(None, None, m, s).relu().pad((1, 1, 1, 1), value=float("-inf"))

def _np_stem(x, w, m, s) -> np.ndarray:
  y = np.maximum((np_conv(x, w, 1, 2, 1, [(3, 3), (3, 3)]) - m.reshape(1, -1, 1, 1)) * s.reshape(1, -1, 1, 1), 0)
  return np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)

def _weight_loads(t:Tensor, w:Tensor) -> list:
  # the weight's PARAM is the one of its size (the input's differs)
  (si,) = [si for si in t.schedule()[0] if si.ast.op is Ops.SINK]
  return [u for u in si.ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.PARAM
          and u.src[0].src[0].src[0].arg == w.numel()]

@pytest.mark.parametrize("device", DEVICES)
def test_padded_conv_reads_its_weight_ungated(device):
  xn, wn, mn, sn = rand(1, 3, 20, 20), rand(8, 3, 7, 7, seed=1), rand(8, seed=2), np.abs(rand(8, seed=3)) + 0.5
  x, w, m, s = (Tensor(a, device=device).realize() for a in (xn, wn, mn, sn))
  out = _stem(x, w, m, s)
  loads = _weight_loads(out, w)
  assert loads and all(len(ld.src) == 1 for ld in loads)
  np.testing.assert_allclose(out.numpy(), _np_stem(xn, wn, mn, sn), rtol=1e-4, atol=1e-4)

def test_gate_on_the_summed_range_stays():
  # a mask that tests the sum's own range (a padded input of a conv) stays on its load
  x, w = Tensor(rand(1, 3, 10, 10)).realize(), Tensor(rand(4, 3, 3, 3, seed=1)).realize()
  out = x.conv2d(w, padding=1)
  (si,) = [si for si in out.schedule()[0] if si.ast.op is Ops.SINK]
  assert any(u.op is Ops.LOAD and len(u.src) == 3 for u in si.ast.toposort())
