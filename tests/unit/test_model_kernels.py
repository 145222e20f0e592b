# Kernel counts of the graphs benches/bench_models.py measures (schedule only, on the NULL device): no more kernels than tinygrad 0.14
# schedules for the same code (issue 10's speed item; 0.14's counts measured with benches/compare.py --script bench_models.py).
import os
import sys
import pytest
from tinygrad import Tensor, Context, dtypes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benches"))
from bench_models import MODELS, COUNTS  # noqa: E402

TINYGRAD_014 = {"mlp": 16, "cnn": 25, "gpt2": 14, "softmax": 3, "layernorm": 3, "matmul_bias_relu": 1, "attention": 4}

def _kernels(body:str) -> int:
  def param(*shape):
    t = Tensor.empty(*shape)
    t.requires_grad = True
    return t
  env = {"Tensor": Tensor, "dtypes": dtypes, "param": param}
  exec(body, env)
  outs = env["outs"]
  return len(outs[0].schedule(*outs[1:])[0])

@pytest.mark.parametrize("name", list(TINYGRAD_014))
def test_no_more_kernels_than_tinygrad(name):
  with Context(DEV="NULL"): n = _kernels({**MODELS, **COUNTS}[name])
  assert n <= TINYGRAD_014[name], f"{name}: {n} kernels, tinygrad 0.14 schedules {TINYGRAD_014[name]}"
