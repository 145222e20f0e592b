# A kernel's code stays small whatever its loops: no optimization (the CPU heuristic, BEAM's candidates) may expand UPCAST/UNROLL lanes
# past codegen/opt/kernel.py's MAX_EXPANDED_OPS, a register tile's lanes are written once as vector expressions (codegen/expander.py)
# and a long elementwise body (a threefry hash) is not copied per lane; and a gather of rows by an index tensor (X[idx]) is a load per
# element, not a sum over every row of X. The model is tinygrad's beautiful_mnist shape: two 5x5 convs of 32 channels on 28x28,
# batchnorm, max-pool, two 3x3 convs of 64, batchnorm, max-pool, a linear layer; Adam; batch 512.
import resource
import numpy as np
import pytest
from tinygrad import Tensor, nn, GlobalCounters
from tinygrad.uop.ops import Ops
from tinygrad.helpers import Context
from tinygrad.engine.realize import get_spec
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, expanded_ops, MAX_EXPANDED_OPS
from tinygrad.runtime.support.compiler_cpu import ClangCompiler
from tests.helpers.kernels import rand

pytestmark = pytest.mark.cpu

class MnistCNN:
  def __init__(self):
    self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
                   nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x:Tensor) -> Tensor: return x.sequential(self.layers)

def _kernels(*tensors:Tensor) -> list:
  return [si for si in Tensor.schedule(*tensors)[0] if si.ast.op.name != "COPY"]

def test_mnist_training_step_kernels_are_small():
  model = MnistCNN()
  opt = nn.optim.Adam(nn.state.get_parameters(model))
  X, Y = Tensor.empty(60000, 1, 28, 28), Tensor.empty(60000, dtype="int32")
  with Context(TRAINING=1):
    samples = Tensor.randint(512, high=60000)
    loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
    kernels = _kernels(loss, *opt.schedule_step())
  specs = [get_spec(si, "CPU") for si in kernels]
  biggest = max(specs, key=lambda s: len(s.src))
  # the batchnorm statistic over 512 x 24 x 24 (nested reduces) was 4.2 MB of C with every reduce loop unrolled; the 3x3 conv's 8 x 8
  # register tile 20 KB with its lanes written one by one
  assert len(biggest.src) <= MAX_KERNEL_BYTES, (biggest.name, len(biggest.src))
  assert _compile_cpu_seconds(biggest.src) < 0.5, biggest.name

MAX_KERNEL_BYTES = 9_500   # with the 1 KB vector fma helper a conv's channel tile calls and the wide-vector prelude (renderer/cstyle.py)

def _compile_cpu_seconds(src:str) -> float:
  """The compiler processes' CPU time: on a busy machine their wall time is mostly waiting for a core."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  ClangCompiler(cachekey=None).compile(src)
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

def test_register_tile_lanes_are_written_once():
  # a conv's register tile (4 columns x 4 output channels per step, a row of inputs times a weight): one vector expression per
  # row of lanes, with the bits of the PYTHON device's scalar lanes
  x, w = rand(1, 8, 10, 10), rand(64, 8, 3, 3, seed=1)
  (si,) = _kernels(Tensor(x).realize().conv2d(Tensor(w).realize()))
  assert len(get_spec(si, "CPU").src) < 5_000
  cpu = Tensor(x).conv2d(Tensor(w)).numpy()
  np.testing.assert_array_equal(cpu, Tensor(x, device="PYTHON").conv2d(Tensor(w, device="PYTHON")).numpy())
  np.testing.assert_allclose(cpu, _conv2d(x, w), rtol=1e-5, atol=1e-5)

def _conv2d(x:np.ndarray, w:np.ndarray) -> np.ndarray:
  kh, kw = w.shape[2:]
  win = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(2, 3))
  return np.einsum("bchwij,ocij->bohw", win, w.astype(np.float64))

def test_random_kernel_is_not_copied_per_lane():
  # threefry's 20 rounds per element, once in the loop: not four copies of them for a float4 store
  (si,) = _kernels(Tensor.rand(25600))
  assert len(get_spec(si, "CPU").src) < 7_000

def test_nested_reduces_unroll_once():
  x = np.random.default_rng(0).standard_normal((32, 32, 24, 24), dtype=np.float32)
  t = Tensor(x).realize()
  out = t.sum(axis=(0, 2, 3))   # over 18,432 elements: one nested reduce per dim
  (si,) = _kernels(out)
  spec = get_spec(si, "CPU")
  assert len(spec.src) < 16_000, len(spec.src)
  np.testing.assert_allclose(out.numpy(), x.sum(axis=(0, 2, 3)), rtol=1e-4)

def test_no_opt_may_expand_past_the_budget():
  (si,) = _kernels(Tensor.empty(32, 32, 24, 24).sum(axis=(0, 2, 3)))
  ast, err = si.ast, None
  try:
    for _ in range(3): ast = apply_opt(ast, Opt(OptOps.UNROLL, 0, 0))[0]   # each nested reduce's whole loop as lanes, as BEAM may try
  except KernelOptError as e: err = e
  assert err is not None and "operations, more than" in str(err)
  assert expanded_ops(ast) <= MAX_EXPANDED_OPS

def test_gather_of_rows_is_a_load_per_element():
  rows = 20_000   # more than one staged sum's worth (REDUCE_STAGE): the one-hot sum must stay one loop to fold
  xn = np.random.default_rng(1).standard_normal((rows, 1, 28, 28), dtype=np.float32)
  yn = np.random.default_rng(2).integers(0, 10, rows, dtype=np.int32)
  X, Y = Tensor(xn).realize(), Tensor(yn).realize()
  idx = np.random.default_rng(3).integers(-rows, rows, 128, dtype=np.int32)
  s = Tensor(idx).realize()
  GlobalCounters.reset()
  a, b = X[s], Y[s]
  Tensor.realize(a, b)
  # a load and a bounds check per output element, nothing per row of X: a sum over the rows would be 128 * 784 * 20,000 ops
  assert GlobalCounters.global_ops < 50 * 128 * 784, GlobalCounters.global_ops
  assert GlobalCounters.kernel_count <= 2
  np.testing.assert_equal(a.numpy(), xn[idx])
  np.testing.assert_equal(b.numpy(), yn[idx])

def test_lane_gates_decided_by_their_range_fold():
  # a max-pool's backward (relu, then 2x2 pool): each upcast lane's loads are gated by window bounds, 0+r < 27 for a loop r < 8, that
  # the lane's range decides; folded, the gates are few and the kernel less than half the size
  xn = np.random.default_rng(5).standard_normal((16, 64, 8, 8), dtype=np.float32)
  x = Tensor(xn, requires_grad=True)
  x.relu().max_pool2d().sum().backward()
  specs = [get_spec(si, "CPU") for si in _kernels(x.grad)]
  assert max(len(s.src) for s in specs) < 16_000, [(s.name, len(s.src)) for s in specs]
  windows = xn.reshape(16, 64, 4, 2, 4, 2)
  expected = (windows > 0) & (windows == windows.max(axis=(3, 5), keepdims=True))   # the relu's and the window maximum's gradient
  np.testing.assert_equal(x.grad.numpy(), expected.reshape(xn.shape).astype(np.float32))

def test_sum_over_dims_stages_by_level_size():
  # a batchnorm statistic over 512 x 20 x 20: two nested sums (each at most 2**STAGE_BITS elements: the 20 x 20 of an image, then the
  # batch), not one per dim (each level an accumulator the optimizer may not unroll away)
  xn = np.random.default_rng(6).standard_normal((512, 4, 20, 20), dtype=np.float32)
  out = Tensor(xn).realize().sum(axis=(0, 2, 3))
  (si,) = _kernels(out)
  assert [len(u.src) - 1 for u in si.ast.toposort() if u.op is Ops.REDUCE] == [2, 1]   # ranges of each level, the innermost first
  np.testing.assert_allclose(out.numpy(), xn.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-3)

def test_vector_lanes_of_a_centered_sum():
  # a column variance: the upcast columns' lanes are one vector expression (x - mean)*(x - mean) summed into vector accumulators
  xn = np.random.default_rng(4).standard_normal((4096, 8), dtype=np.float32) * 3 + 1
  x = Tensor(xn)
  mu = x.mean(axis=0)
  np.testing.assert_allclose(((x - mu) * (x - mu)).mean(axis=0).numpy(), xn.astype(np.float64).var(axis=0), rtol=1e-4)
