# Random Tensor programs (issue 9): elementwise, movement and reduce ops in random combination give numpy's results on CPU and
# PYTHON. Each program starts from a few realized inputs and applies random ops to random earlier values, so fusion, movement ops
# turned into index arithmetic, reduces inside and across kernels and buffers reused at several indices all get exercised.
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from tinygrad import Tensor
from tests.helpers.devices import DEVICES
from tests.helpers.programs import apply_op, program_plans, random_inputs

@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=program_plans())
def test_random_program_matches_numpy(device, prog):
  shapes, n_ops, seed, data = prog
  vals = random_inputs(shapes, seed, lambda: device)
  for _ in range(n_ops): vals.append(apply_op(data.draw, vals))
  outs = vals[len(shapes):]
  # every value of the program realized together: one schedule whose targets share intermediates
  Tensor.realize(*[t for t, _ in outs])
  for t, a in outs:
    assert t.shape == a.shape
    np.testing.assert_allclose(t.numpy(), a, rtol=1e-4, atol=1e-4)
