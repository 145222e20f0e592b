# The traps of tinygrad's JIT (its own test file lists them), one test each: here each either computes the right result or raises
# JitError saying what to do. The last tests pin the inherent ones TinyJit's docstring documents (Python is frozen at capture).
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, dtypes
from tinygrad.engine import realize
from tinygrad.engine.jit import JitError

pytestmark = pytest.mark.cpu

def _buf(a, dtype=np.float32) -> Tensor: return Tensor(np.asarray(a, dtype=dtype)).realize()

def _captured(f, *args, **kwargs):
  """Calls f twice (run, capture) so the next call replays."""
  f(*args, **kwargs)
  f(*args, **kwargs)
  assert f.captured is not None

@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.numpy(), lambda t: t.data(), lambda t: t.tolist()],
                         ids=["item", "numpy", "data", "tolist"])
def test_host_read_during_capture_raises(read):
  @TinyJit
  def f(a):
    s = a.sum()
    read(s.reshape(1) if s.shape == () else s)
    return a * 2
  x = _buf([1.0, 2.0])
  f(x)    # the first call runs the function as it is: reading is fine
  with pytest.raises(JitError, match=r"\.numpy\(\), \.item\(\).*return the tensor"): f(x)
  assert not realize.capturing

@pytest.mark.parametrize("other", [lambda: _buf(np.ones(4)), lambda: _buf(np.ones((2, 3))), lambda: _buf(np.ones((2, 2)), np.int32),
                                   lambda: _buf(np.ones((2, 2))).to("PYTHON")], ids=["numel", "shape", "dtype", "device"])
def test_input_of_another_shape_dtype_or_device_raises(other):
  f = TinyJit(lambda a: a + 1)
  _captured(f, _buf(np.ones((2, 2))))
  with pytest.raises(JitError, match=r"TinyJit input 0 has .*captured for shape \(2, 2\) dtype dtypes.float device CPU"): f(other())

def test_view_of_another_slice_raises():
  f = TinyJit(lambda a: a * 2)
  base = _buf(np.arange(10))
  _captured(f, base[2:5])
  np.testing.assert_equal(f(_buf(np.arange(10) + 1)[2:5]).numpy(), (np.arange(2, 5) + 1) * 2)   # the same slice of another buffer
  with pytest.raises(JitError, match=r"a view of a dtypes.float buffer of 10"): f(base[3:6])

def test_same_buffer_twice_raises():
  f = TinyJit(lambda a, b: a + b)
  x, y = _buf([1.0, 2.0]), _buf([3.0, 4.0])
  _captured(f, x, y)
  with pytest.raises(JitError, match=r"inputs 0 and 1 are the same buffer.*\.clone\(\)"): f(x, x)
  with pytest.raises(JitError, match="same buffer"): f(x, x.reshape(2))    # a view of it counts too
  np.testing.assert_equal(f(x, x.clone().realize()).numpy(), [2.0, 4.0])

def test_unrealized_constant_input_is_realized():
  f = TinyJit(lambda a: a * 3)
  for i in range(4):
    np.testing.assert_equal(f(Tensor.full((3,), float(i))).numpy(), [3.0 * i] * 3)     # an unrealized constant
    np.testing.assert_equal(f(Tensor.ones(3) * (i + 1)).numpy(), [3.0 * (i + 1)] * 3)   # an unrealized computation

def test_python_number_tensor_input_raises():
  f = TinyJit(lambda a, b: a * b)
  with pytest.raises(JitError, match=r"Python constant .* without storage.*dtype="): f(_buf([1.0]), Tensor(2.0))

def test_non_tensor_in_outputs_raises():
  f = TinyJit(lambda a: (a * 2, 3))
  x = _buf([1.0])
  f(x)
  with pytest.raises(JitError, match=r"returned a int.*return Tensors \(or None\) only"): f(x)

def test_nested_jit_is_correct():
  inner = TinyJit(lambda a: a * 2)
  @TinyJit
  def outer(a): return inner(a) + 1
  for i in range(5): np.testing.assert_equal(outer(_buf([float(i)])).numpy(), [2.0 * i + 1])
  # the inner one, used alone, is still a TinyJit of its own
  for i in range(4): np.testing.assert_equal(inner(_buf([float(i)])).numpy(), [2.0 * i])

def test_method_shared_across_instances_is_per_instance():
  class Model:
    def __init__(self, w): self.w = _buf([w, w])
    @TinyJit
    def forward(self, x): return x * self.w
  m1, m2 = Model(2.0), Model(7.0)
  x = _buf([1.0, 2.0])
  for _ in range(3): np.testing.assert_equal(m1.forward(x).numpy(), [2.0, 4.0])
  for _ in range(3): np.testing.assert_equal(m2.forward(x).numpy(), [7.0, 14.0])   # 0.14 would reuse m1's weights here

def test_method_on_unhashable_instances_raises():
  class Model:
    __hash__ = None  # type: ignore[assignment]
    @TinyJit
    def forward(self, x): return x * 2
  with pytest.raises(JitError, match="hashable and weak-referenceable"): Model().forward(_buf([1.0]))

def test_slice_assign_into_input():
  @TinyJit
  def f(a, v):
    a[1:3] = v
    return (a * 2).sum()
  for i in range(4):
    x = _buf(np.arange(5))
    s = f(x, _buf([10.0 + i, 20.0 + i]))
    want = np.arange(5.0)
    want[1:3] = [10 + i, 20 + i]
    np.testing.assert_equal(x.numpy(), want)
    assert s.item() == want.sum() * 2

def test_positional_vs_keyword_mismatch_raises():
  f = TinyJit(lambda a, b: a - b)
  x, y = _buf([5.0]), _buf([2.0])
  _captured(f, x, b=y)
  np.testing.assert_equal(f(x, b=y).numpy(), [3.0])
  with pytest.raises(JitError, match=r"at arguments \[0, 'b'\] and is now called with them at \[0, 1\].*positional or keyword"): f(x, y)

def test_changed_python_argument_raises():
  f = TinyJit(lambda a, k: a * k)
  _captured(f, _buf([1.0]), 2)
  np.testing.assert_equal(f(_buf([3.0]), 2).numpy(), [6.0])
  with pytest.raises(JitError, match=r"Python arguments changed since capture \(1: 2 -> 3\)"): f(_buf([1.0]), 3)

def test_outputs_of_one_call_survive_the_next():
  f = TinyJit(lambda a: a + 1)
  outs = [f(_buf([float(i)])) for i in range(4)]
  assert [o.item() for o in outs] == [1.0, 2.0, 3.0, 4.0]   # 0.14 returns one tensor whose buffer each call overwrites

def test_output_fed_back_as_input():
  f = TinyJit(lambda a: a * 2)
  x = _buf([1.0])
  for _ in range(5): x = f(x)
  assert x.item() == 32.0

def test_random_is_not_repeated():
  f = TinyJit(lambda: Tensor.rand(8).contiguous())
  draws = [f().numpy() for _ in range(4)]
  assert len({d.tobytes() for d in draws}) == 4

def test_function_that_runs_no_kernel_raises():
  f = TinyJit(lambda a: a)
  x = _buf([1.0])
  f(x)
  with pytest.raises(JitError, match="captured no kernel"): f(x)

# ***** inherent: Python runs only at capture (documented in TinyJit's docstring) *****

def test_inherent_python_control_flow_is_frozen():
  flag = {"double": True}
  f = TinyJit(lambda a: a * 2 if flag["double"] else a * 3)
  _captured(f, _buf([1.0]))
  flag["double"] = False
  assert f(_buf([1.0])).item() == 2.0   # the branch taken at capture

def test_inherent_closure_constants_are_frozen():
  scale = [2.0]
  f = TinyJit(lambda a: a * scale[0])
  _captured(f, _buf([1.0]))
  scale[0] = 5.0
  assert f(_buf([1.0])).item() == 2.0

def test_inherent_host_data_made_inside_is_frozen():
  data = [np.array([1.0], dtype=np.float32)]
  f = TinyJit(lambda a: a + Tensor(data[0]))
  _captured(f, _buf([0.0]))
  data[0] = np.array([9.0], dtype=np.float32)
  assert f(_buf([0.0])).item() == 1.0   # pass what changes as an argument instead

def test_inherent_global_tensor_reassigned_is_not_seen():
  state = {"w": _buf([2.0])}
  f = TinyJit(lambda a: a * state["w"])
  _captured(f, _buf([1.0]))
  state["w"] = _buf([4.0])
  assert f(_buf([1.0])).item() == 2.0   # the captured kernels read the old buffer; assign() into it instead:
  state["w"] = None
  g_w = _buf([2.0])
  g = TinyJit(lambda a: a * g_w)
  _captured(g, _buf([1.0]))
  g_w.assign(Tensor([4.0])).realize()
  assert g(_buf([1.0])).item() == 4.0

def test_dtype_of_scalar_input_is_checked():
  f = TinyJit(lambda a: a + 1)
  _captured(f, _buf([1.0]))
  with pytest.raises(JitError, match="dtype dtypes.int"): f(Tensor([1], dtype=dtypes.int32).realize())
