# Symbolic shapes (issue 13 item 3): tensors whose sizes are bound Variables run kernels compiled once for the Variable, which take its
# value at launch. Every result is checked against numpy for each bound value in a range, and the kernels are counted.
import math
import numpy as np
import pytest
from tinygrad import Tensor, Variable, Device, TinyJit
from tinygrad.engine import realize
from tinygrad.schedule import schedule_cache
from tests.cpu.conftest import DEVICES

MAX = 9
VALUES = range(1, MAX + 1)
rng = np.random.default_rng(13)
A = rng.standard_normal((4, MAX)).astype(np.float32)
B = rng.standard_normal((MAX, MAX)).astype(np.float32)

def _padded(t:Tensor, maxes:tuple[int, ...]) -> np.ndarray:
  """t (a symbolic shape) padded with zeros to the int shape `maxes`, as numpy: one kernel for every bound value."""
  return t.pad(tuple((0, m - s) for s, m in zip(t.shape, maxes))).numpy()

def _np_padded(a:np.ndarray, maxes:tuple[int, ...]) -> np.ndarray:
  return np.pad(a, [(0, m - s) for s, m in zip(a.shape, maxes)]) if maxes else a

# (name, tinygrad fn of (tensor of A, tensor of B, bound n), numpy fn of (A, B, n), the padded result shape)
CASES = [
  ("shrink", lambda a, b, n: a[:, :n], lambda a, b, n: a[:, :n], (4, MAX)),
  ("shrink_start", lambda a, b, n: a[:, n-1:], lambda a, b, n: a[:, n-1:], (4, MAX)),
  ("reshape", lambda a, b, n: a[:, :n].reshape(4, 1, n).permute(1, 2, 0).reshape(n, 4), lambda a, b, n: a[:, :n].T, (MAX, 4)),
  ("reshape_infer", lambda a, b, n: a[:, :n].reshape(n, -1), lambda a, b, n: a[:, :n].reshape(n, -1), (MAX, 4)),
  ("flatten", lambda a, b, n: a[:, :n].reshape(-1), lambda a, b, n: a[:, :n].reshape(-1), (4 * MAX,)),
  ("expand", lambda a, b, n: a[0:1, :n].expand(3, n), lambda a, b, n: np.broadcast_to(a[0:1, :n], (3, n)), (3, MAX)),
  ("expand_sym", lambda a, b, n: a[:, 0:1].expand(4, n), lambda a, b, n: np.broadcast_to(a[:, 0:1], (4, n)), (4, MAX)),
  ("pad", lambda a, b, n: a[:, :n].pad(((1, 0), (2, 1))), lambda a, b, n: np.pad(a[:, :n], ((1, 0), (2, 1))), (5, MAX + 3)),
  ("pad_sym", lambda a, b, n: a[:, :3].pad(((0, 0), (n, 0))), lambda a, b, n: np.pad(a[:, :3], ((0, 0), (n, 0))), (4, MAX + 3)),
  ("index", lambda a, b, n: b[n - 1], lambda a, b, n: b[n - 1], (MAX,)),
  ("index_sym_dim", lambda a, b, n: b[:n][n - 1, 2:4], lambda a, b, n: b[n - 1, 2:4], (2,)),
  ("pad_flat", lambda a, b, n: a[:, :3].pad((n, 0)), lambda a, b, n: np.pad(a[:, :3], ((0, 0), (n, 0))), (4, MAX + 3)),
  ("arange", lambda a, b, n: Tensor.arange(n), lambda a, b, n: np.arange(n), (MAX,)),
  ("arange_start", lambda a, b, n: Tensor.arange(n, MAX + 2), lambda a, b, n: np.arange(n, MAX + 2), (MAX + 1,)),
  ("mul_var", lambda a, b, n: a[:, :n] * n, lambda a, b, n: a[:, :n] * n, (4, MAX)),
  ("add_var", lambda a, b, n: n + a[:, :n], lambda a, b, n: n + a[:, :n], (4, MAX)),
  ("var_on_ints", lambda a, b, n: a * n - n, lambda a, b, n: a * n - n, (4, MAX)),
  ("sum", lambda a, b, n: a[:, :n].sum(1), lambda a, b, n: a[:, :n].sum(1), (4,)),
  ("sum_all", lambda a, b, n: a[:, :n].sum(), lambda a, b, n: a[:, :n].sum(), ()),
  ("sum_keep", lambda a, b, n: b[:n].sum(0), lambda a, b, n: b[:n].sum(0), (MAX,)),
  ("max", lambda a, b, n: a[:, :n].max(1), lambda a, b, n: a[:, :n].max(1), (4,)),
  ("mean", lambda a, b, n: a[:, :n].mean(1), lambda a, b, n: a[:, :n].mean(1), (4,)),
  ("var", lambda a, b, n: a[:, :n].var(1, correction=0), lambda a, b, n: a[:, :n].var(1), (4,)),
  ("argmax", lambda a, b, n: a[:, :n].argmax(1), lambda a, b, n: a[:, :n].argmax(1), (4,)),
  ("logsumexp", lambda a, b, n: a[:, :n].logsumexp(1), lambda a, b, n: np.log(np.exp(a[:, :n]).sum(1)), (4,)),
  ("cumsum", lambda a, b, n: a[:, :n].cumsum(1), lambda a, b, n: a[:, :n].cumsum(1), (4, MAX)),
  ("flip", lambda a, b, n: a[:, :n].flip(1), lambda a, b, n: a[:, :n][:, ::-1], (4, MAX)),
  ("cat", lambda a, b, n: a[:, :n].cat(a[:, :2], dim=1), lambda a, b, n: np.concatenate([a[:, :n], a[:, :2]], 1), (4, MAX + 2)),
  ("softmax", lambda a, b, n: a[:, :n].softmax(1), lambda a, b, n: _softmax(a[:, :n]), (4, MAX)),
  ("matmul_inner", lambda a, b, n: a[:, :n] @ b[:n], lambda a, b, n: a[:, :n] @ b[:n], (4, MAX)),
  ("matmul_outer", lambda a, b, n: a @ b[:, :n], lambda a, b, n: a @ b[:, :n], (4, MAX)),
  ("realized", lambda a, b, n: (a[:, :n] * 2).realize().sum(1), lambda a, b, n: (a[:, :n] * 2).sum(1), (4,)),
  ("realized_pad", lambda a, b, n: (a[:, :n] + 1).realize().pad(((0, 0), (1, 0))), lambda a, b, n: np.pad(a[:, :n] + 1, ((0, 0), (1, 0))),
   (4, MAX + 1)),
  ("attention", lambda a, b, n: (a @ b[:n].T / 3).softmax(-1) @ b[:n], lambda a, b, n: _softmax(a @ b[:n].T / 3) @ b[:n], (4, MAX)),
]

def _softmax(x:np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

@pytest.mark.parametrize("name,fn,ref,maxes", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", DEVICES)
def test_matches_numpy_for_every_value(name, fn, ref, maxes, device):
  var = Variable("n", 1, MAX)
  a, b = Tensor(A, device=device).realize(), Tensor(B, device=device).realize()
  specs = None
  for n in VALUES:
    out = _padded(fn(a, b, var.bind(n)), maxes)
    np.testing.assert_allclose(out, _np_padded(np.asarray(ref(A, B, n), dtype=out.dtype), maxes), rtol=1e-5, atol=1e-5, err_msg=f"n={n}")
    # the kernels are compiled for the Variable: the second value and later ones reuse them
    if n == 2: specs = len(realize._specs)
    elif n > 2: assert len(realize._specs) == specs, f"n={n} compiled new kernels"

def test_shape_holds_the_bound_variable():
  v = Variable("i", 1, 10).bind(5)
  t = Tensor.ones(3, 10)[:, :v]
  assert t.shape[0] == 3 and t.shape[1] is v
  assert t.reshape(3 * v).shape[0].render() == "(i*3)"
  assert Tensor(v).shape == () and Tensor.arange(v).shape[0] is v
  with pytest.raises(RuntimeError, match="symbolic shape"): t.numpy()

def test_the_kernel_takes_the_variable_as_an_int_argument():
  v = Variable("kv_len", 1, 16).bind(4)
  linear, var_vals = Tensor.rand(2, 16).realize()[:, :v].sum(1).linear_with_vars()
  assert var_vals == {"kv_len": 4}
  ast = linear.src[0].src[0]
  params = [u for u in ast.toposort() if u.op.name == "PARAM" and u.arg.name == "kv_len"]
  assert len(params) == 1 and params[0].arg.vmin_vmax == (1, 16)          # unbound in the AST: no value in it
  spec = realize.get_spec(realize.ScheduleItem.from_call(linear.src[0]), Device.DEFAULT)
  assert "const int kv_len" in spec.src and "< kv_len;" in spec.src   # the loop ends at it

def test_run_linear_with_var_vals():
  var = Variable("n", 1, MAX)
  a = Tensor(A).realize()
  for n in (2, 7):
    out = a[:, :var.bind(n)].sum(1)
    linear, var_vals = out.linear_with_vars()
    assert var_vals == {"n": n}
    realize.run_linear(linear, var_vals)
    np.testing.assert_allclose(out.numpy(), A[:, :n].sum(1), rtol=1e-5)

def test_run_linear_needs_the_values():
  linear, var_vals = Tensor(A).realize()[:, :Variable("n", 1, MAX).bind(3)].sum(1).linear_with_vars()
  with pytest.raises(RuntimeError, match=r"needs values for the variable\(s\) \['n'\]"): realize.run_linear(linear)
  with pytest.raises(ValueError, match=r"n=10 is outside its range \[1, 9\]"): realize.run_linear(linear, {"n": 10})

def test_schedule_cache_reuses_the_schedule():
  var = Variable("n", 1, MAX)
  a = Tensor(A).realize()
  a[:, :var.bind(1)].exp().sum(1).realize()
  before = set(schedule_cache)
  for n in VALUES: np.testing.assert_allclose(a[:, :var.bind(n)].exp().sum(1).numpy(), np.exp(A[:, :n]).sum(1), rtol=1e-5)
  # the numpy() path adds one schedule; the values add none (counted as new keys: the LRU may be full)
  assert len([k for k in schedule_cache if k not in before]) == 1

@pytest.mark.parametrize("device", DEVICES)
def test_setitem_at_a_symbolic_position(device):
  var = Variable("pos", 0, MAX - 1)
  c, want = Tensor.zeros(MAX, 3, device=device).contiguous().realize(), np.zeros((MAX, 3), np.float32)
  for pos in (0, 4, 8, 2):
    c[var.bind(pos):var.bind(pos)+1] = Tensor.full((1, 3), pos + 1.0, device=device)
    want[pos] = pos + 1.0
    np.testing.assert_equal(c.numpy(), want)

def test_bind_out_of_range_names_the_variable():
  v = Variable("seq", 1, 10)
  with pytest.raises(ValueError, match=r"11 not in range \[1, 10\] of seq"): v.bind(11)
  with pytest.raises(ValueError, match=r"0 not in range \[1, 10\] of seq"): v.bind(0)

def test_slice_past_the_dim_raises_before_a_kernel_runs():
  # the Variable's range reaches past the dim: the shape is accepted, a value past it is caught at schedule time
  var = Variable("n", 1, 2 * MAX)
  a = Tensor(A).realize()
  np.testing.assert_allclose(a[:, :var.bind(3)].sum(1).numpy(), A[:, :3].sum(1), rtol=1e-5)
  with pytest.raises(IndexError, match=r"the slice \[0:12\] of dim 1 is out of range for its size 9 with \{'n': 12\}"):
    a[:, :var.bind(12)].sum(1).realize()

def test_two_values_of_one_variable_in_a_schedule():
  v = Variable("n", 1, MAX)
  a = Tensor(A).realize()
  with pytest.raises(ValueError, match="'n' is bound to two values"): (a[:, :v.bind(2)].sum(1) + a[:, :v.bind(3)].sum(1)).realize()

def test_mismatched_symbolic_shapes():
  a = Tensor(A).realize()
  x, y = a[:, :Variable("i", 1, MAX).bind(3)], a[:, :Variable("j", 1, MAX).bind(3)]
  with pytest.raises(IndexError, match="shape mismatch: objects cannot be broadcast"): x + y
  with pytest.raises(IndexError, match="shape mismatch"): x + a[:, :3]
  with pytest.raises(RuntimeError, match="can't expand"): x.expand(2, 4, 5)

def _decode(steps:int, device:str="CPU", jit:bool=False):
  """Single-head attention over a KV cache that grows by one row a step: the position is a bound Variable."""
  d, maxlen = 8, 128
  r = np.random.default_rng(7)
  wq, wk, wv = (r.standard_normal((d, d)).astype(np.float32) / 3 for _ in range(3))
  xs = r.standard_normal((steps, d)).astype(np.float32)
  Wq, Wk, Wv = (Tensor(w, device=device).realize() for w in (wq, wk, wv))
  ck, cv = (Tensor.zeros(maxlen, d, device=device).contiguous().realize() for _ in range(2))
  nk, nv = np.zeros((maxlen, d), np.float32), np.zeros((maxlen, d), np.float32)
  pos_var = Variable("pos", 0, maxlen - 1)
  def step(x:Tensor, p) -> Tensor:
    Tensor.realize(ck[p:p+1].assign(x @ Wk), cv[p:p+1].assign(x @ Wv))
    return (((x @ Wq) @ ck[:p+1].T / math.sqrt(d)).softmax(-1) @ cv[:p+1]).realize()
  if jit: step = TinyJit(step)
  for pos in range(steps):
    got = step(Tensor(xs[pos:pos+1], device=device), pos_var.bind(pos)).numpy()
    nk[pos], nv[pos] = xs[pos] @ wk, xs[pos] @ wv
    want = _softmax((xs[pos:pos+1] @ wq) @ nk[:pos+1].T / math.sqrt(d)) @ nv[:pos+1]
    yield pos, got, want

@pytest.mark.cpu
def test_decode_100_steps_compiles_nothing_after_the_first_two():
  misses = []
  for pos, got, want in _decode(100):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"step {pos}")
    misses.append(len(realize._specs))
  assert misses[2:] == [misses[1]] * 98, f"kernels compiled after step 2: {sorted(set(misses))}"

@pytest.mark.cpu
def test_decode_under_tinyjit():
  # the JIT replays the kernels captured at one position with each later position's value
  for pos, got, want in _decode(12, jit=True): np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"step {pos}")

def test_decode_on_python_device():
  for pos, got, want in _decode(4, "PYTHON"): np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"step {pos}")
