# pad with mode="reflect", "replicate" and "circular" against np.pad (torch's flat (left, right) pairs from the last dim), and the
# error torch raises for a reflect pad as large as the dim.
import numpy as np
import pytest
from tinygrad import Tensor

A = np.arange(12, dtype=np.float32).reshape(3, 4)
NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}

PADS = [(2, 1, 1, 2), (0, 3), (3, 0, 0, 0), (1, 1)]

# reflect needs pads below the dim's size (the larger ones are the error test's)
@pytest.mark.cpu
@pytest.mark.parametrize("mode,pads", [(m, p) for m in NP_MODE for p in PADS if m != "reflect" or max(p) < 3])
def test_pad_mode_matches_numpy(mode, pads):
  np_pads = [(0, 0)] * (A.ndim - len(pads) // 2) + [(pads[i], pads[i + 1]) for i in range(len(pads) - 2, -1, -2)]
  np.testing.assert_array_equal(Tensor(A).pad(pads, mode=mode).numpy(), np.pad(A, np_pads, mode=NP_MODE[mode]))

@pytest.mark.cpu
def test_pad_replicate_gradient_accumulates_at_edges():
  t = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
  t.pad((2, 1), mode="replicate").sum().backward()
  np.testing.assert_array_equal(t.grad.numpy(), [3.0, 1.0, 2.0])

def test_reflect_pad_too_large_raises():
  with pytest.raises(ValueError, match=r"reflect padding \(4, 0\) must be less than the size 4 of dim 1"): Tensor(A).pad((4, 0), mode="reflect")
  with pytest.raises(ValueError, match=r"reflect"): Tensor(A).pad((0, 0, 0, 3), mode="reflect")

# a negative amount cuts; reflect and replicate read the edges of the whole input first (torch), so a cut on one side of a dim does
# not shrink what the other side reflects or replicates
@pytest.mark.cpu
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("pads", [(3, -3), (2, -3), (3, -4), (-1, 3), (-3, 2, 2, -2), (-2, -1)])
def test_pad_mode_with_cuts_matches_numpy(mode, pads):
  np_pads = [(0, 0)] * (A.ndim - len(pads) // 2) + [(pads[i], pads[i + 1]) for i in range(len(pads) - 2, -1, -2)]
  full = np.pad(A, [(max(b, 0), max(a, 0)) for b, a in np_pads], mode=NP_MODE[mode])
  ref = full[tuple(slice(-min(b, 0), full.shape[i] + min(a, 0)) for i, (b, a) in enumerate(np_pads))]
  np.testing.assert_array_equal(Tensor(A).pad(pads, mode=mode).numpy(), ref)
