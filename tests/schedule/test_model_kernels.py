# Kernel counts of the graphs benches/bench_models.py measures (schedule only, on the NULL device): no more kernels than tinygrad 0.14
# schedules for the same code (issue 10's speed item; 0.14's counts measured with benches/compare.py --script bench_models.py).
import pytest
from tinygrad import Tensor, Context, dtypes
from benches.bench_models import MODELS, COUNTS

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

def test_relu_gradient_is_not_recomputed_per_tap():
  # a relu's gradient feeding a conv's weight gradient gets a buffer of its own (rangeify's MAX_RECOMPUTED_OPS): computed inside the
  # weight-gradient kernel it would run again for every input channel and tap (144 times here). Nothing small is buffered for it
  from tinygrad.uop.ops import Ops
  from tinygrad.dtype import dtypes as dt
  with Context(DEV="NULL"):
    x, w = Tensor.empty(64, 16, 8, 8), Tensor.empty(32, 16, 3, 3)
    w.requires_grad = True
    x.conv2d(w, padding=1).relu().sum().backward()
    items, _ = w.grad.schedule()
  wgrad = [it for it in items if it.ast.op is Ops.SINK and any(u.op is Ops.PARAM and u.arg.slot == 0 and u.src[0].arg == 32 * 16 * 9
                                                              for u in it.ast.toposort())]
  assert len(wgrad) == 1
  assert not [u for u in wgrad[0].ast.toposort() if u.op is Ops.CMPLT and dt.is_float(u.src[0].dtype)], "relu's compare in the conv's kernel"

def test_a_reduce_two_kernels_need_runs_once():
  # a gradient (a reduce) that AdamW's two moment updates both read gets a buffer: fused into both kernels it would run twice
  from tinygrad.uop.ops import Ops
  with Context(DEV="NULL"):
    a, b, m, v = Tensor.empty(64, 32), Tensor.empty(32, 48), Tensor.empty(64, 48).realize(), Tensor.empty(64, 48).realize()
    g = a @ b
    items, _ = Tensor.schedule(m.assign(m * 0.9 + g), v.assign(v * 0.99 + g * g))
  assert sum(1 for it in items if it.ast.op is Ops.SINK and any(u.op is Ops.REDUCE for u in it.ast.toposort())) == 1
