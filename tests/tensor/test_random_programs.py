# Random Tensor programs (issue 9): elementwise, movement and reduce ops in random combination give numpy's results on CPU and
# PYTHON. Each program starts from a few realized inputs and applies random ops to random earlier values, so fusion, movement ops
# turned into index arithmetic, reduces inside and across kernels and buffers reused at several indices all get exercised.
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tinygrad import Tensor, dtypes
from tests.helpers.devices import DEVICES
from tests.helpers.programs import apply_op

@st.composite
def programs(draw):
  vals = []
  for _ in range(draw(st.integers(1, 3))):
    shape = draw(st.sampled_from([(4,), (3, 5), (2, 3, 4), (8, 8), (1, 6), (16,), (2, 1, 3)]))
    vals.append(shape)
  return vals, draw(st.integers(3, 10)), draw(st.integers(0, 2**31 - 1)), draw(st.data())

@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs())
def test_random_program_matches_numpy(device, prog):
  shapes, n_ops, seed, data = prog
  rng = np.random.default_rng(seed)
  vals = []
  for shape in shapes:
    a = rng.uniform(-2, 2, shape).astype(np.float32)
    vals.append((Tensor(a, device=device, dtype=dtypes.float32), a))
  for _ in range(n_ops): vals.append(apply_op(data.draw, vals))
  outs = vals[len(shapes):]
  # every value of the program realized together: one schedule whose targets share intermediates
  Tensor.realize(*[t for t, _ in outs])
  for t, a in outs:
    assert t.shape == a.shape
    np.testing.assert_allclose(t.numpy(), a, rtol=1e-4, atol=1e-4)
