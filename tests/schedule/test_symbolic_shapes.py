# Symbolic shapes (issue 13 item 3): tensors whose sizes are bound Variables run kernels compiled once for the Variable, which take its
# value at launch. Every result is checked against numpy for each bound value in a range, and the kernels are counted.
import math
import numpy as np
import pytest
from tinygrad import Tensor, Variable, Device, TinyJit, GlobalCounters, dtypes
from tinygrad.uop.ops import Ops
from tinygrad.engine.jit import JitError
from tinygrad.engine import realize
from tinygrad.schedule import schedule_cache
from tests.helpers.devices import DEVICES

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

@pytest.mark.cpu
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

@pytest.mark.cpu
def test_the_kernel_takes_the_variable_as_an_int_argument():
  v = Variable("kv_len", 1, 16).bind(4)
  linear, var_vals = Tensor.rand(2, 16).realize()[:, :v].sum(1).linear_with_vars()
  assert var_vals == {"kv_len": 4}
  ast = linear.src[0].src[0]
  params = [u for u in ast.toposort() if u.op.name == "PARAM" and u.arg.name == "kv_len"]
  assert len(params) == 1 and params[0].arg.vmin_vmax == (1, 16)          # unbound in the AST: no value in it
  spec = realize.get_spec(realize.ScheduleItem.from_call(linear.src[0]), Device.DEFAULT)
  assert spec.var_names == ("kv_len",) and spec.var_dtypes == (dtypes.int,)
  assert any(u.op is Ops.RANGE and u.src[0].op is Ops.PARAM and u.src[0].arg.name == "kv_len" for u in spec.uops)   # the loop ends at it

@pytest.mark.cpu
def test_run_linear_with_var_vals():
  var = Variable("n", 1, MAX)
  a = Tensor(A).realize()
  for n in (2, 7):
    out = a[:, :var.bind(n)].sum(1)
    linear, var_vals = out.linear_with_vars()
    assert var_vals == {"n": n}
    realize.run_linear(linear, var_vals)
    np.testing.assert_allclose(out.numpy(), A[:, :n].sum(1), rtol=1e-5)

@pytest.mark.cpu
def test_run_linear_needs_the_values():
  linear, var_vals = Tensor(A).realize()[:, :Variable("n", 1, MAX).bind(3)].sum(1).linear_with_vars()
  with pytest.raises(RuntimeError, match=r"needs values for the variable\(s\) \['n'\]"): realize.run_linear(linear)
  with pytest.raises(ValueError, match=r"n=10 is outside its range \[1, 9\]"): realize.run_linear(linear, {"n": 10})

@pytest.mark.cpu
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

@pytest.mark.cpu
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

def _heads(t:Tensor, toks) -> Tensor: return t[:, :toks].reshape(1, toks, 4, 16).transpose(1, 2)

@pytest.mark.cpu
def test_same_bound_variable_broadcasts_however_the_size_was_reached():
  # sizes reached by different movements (a shrink to toks+0, a reshape to 2*toks and to toks*2) are the same size: they broadcast
  x = rng.standard_normal((2, MAX)).astype(np.float32)
  var = Variable("toks", 1, MAX)
  for n in (1, 3, MAX):
    toks, t = var.bind(n), Tensor(x)
    a = t[:, :toks]
    np.testing.assert_allclose(_padded(a.shrink(((0, 2), (0, toks + 0))) + a, (2, MAX)), _np_padded(2 * x[:, :n], (2, MAX)))
    np.testing.assert_allclose(_padded(a.reshape(2 * toks) + a.reshape(toks * 2), (2 * MAX,)), _np_padded(2 * x[:, :n].reshape(-1), (2 * MAX,)))
    np.testing.assert_allclose(_padded(a.pad(((0, 0), (0, 0))) * a, (2, MAX)), _np_padded(x[:, :n] ** 2, (2, MAX)))

@pytest.mark.cpu
def test_cat_with_an_empty_piece_on_a_symbolic_shape():
  x = rng.standard_normal((1, MAX, 64)).astype(np.float32)
  var = Variable("toks", 1, MAX)
  for n in (1, 4):
    toks = var.bind(n)
    q = _heads(Tensor(x), toks)
    assert q[..., 16:].shape[-1] == 0
    want = x[:, :n].reshape(1, n, 4, 16).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(_padded(q[..., :16].cat(q[..., 16:], dim=-1), (1, 4, MAX, 16)), _np_padded(want, (1, 4, MAX, 16)))
    np.testing.assert_allclose(_padded(q[..., :0].cat(q, dim=-1) + q, (1, 4, MAX, 16)), _np_padded(2 * want, (1, 4, MAX, 16)))

@pytest.mark.cpu
def test_tinyjit_input_of_a_symbolic_shape():
  # the input's shape holds the bound Variable: the capture is for the Variable, each call brings its value, and the returned tensor
  # has the call's shape
  jf = TinyJit(lambda x, y: (x * 2 + y).realize())
  var = Variable("n", 1, MAX)
  a, b = Tensor(A).realize(), Tensor(B[:4]).realize()
  for n in (2, 5, 1, 9, 3):
    out = jf(a[:, :var.bind(n)], b[:, :var.bind(n)])
    assert out.shape[1].unbind() == (var, n)
    np.testing.assert_allclose(_padded(out, (4, MAX)), _np_padded(A[:, :n] * 2 + B[:4, :n], (4, MAX)), rtol=1e-6, err_msg=f"n={n}")
    np.testing.assert_allclose(out.realize().shrink(((0, 4), (0, var.bind(n)))).realize()[:, :n].numpy(), A[:, :n] * 2 + B[:4, :n], rtol=1e-6)
  assert len(jf.captured.jit_cache) == 1
  with pytest.raises(JitError, match="'n' bound to 4, another argument binds it to 3"): jf(a[:, :var.bind(3)], b[:, :var.bind(4)])

@pytest.mark.cpu
def test_realizing_a_realized_symbolic_tensor_runs_nothing():
  t = (Tensor(A).realize()[:, :Variable("n", 1, MAX).bind(3)] + 1).realize()
  before = GlobalCounters.kernel_count
  t.realize()
  assert GlobalCounters.kernel_count == before

def test_nbytes_of_tensors_and_uops():
  t = Tensor(A).realize()
  assert t.nbytes() == t.uop.nbytes() == A.nbytes and t.uop.element_size() == 4
  assert Tensor.empty(5, dtype="half").uop.nbytes() == 10
  s = t[:, :Variable("n", 1, MAX).bind(4)]
  # a symbolic size is not one number (0.14 raises ValueError too); its largest is
  for f in (s.nbytes, s.uop.nbytes):
    with pytest.raises(ValueError, match="not constant"): f()
  assert s.uop.max_numel() == s.max_numel() == A.size and s.uop.max_shape == A.shape

@pytest.mark.cpu
def test_invalid_symbolic_reshape_is_a_value_error():
  # 30 elements are (3, n) for one value of n only: the sizes must be the same for every value (0.14 raises ValueError)
  a, var = Tensor.rand(30), Variable("n", 1, 10)
  for n in (1, 4, 10):
    with pytest.raises(ValueError, match=r"shape \(3, n\) is invalid for input of shape \(30,\)"): a.reshape(3, var.bind(n))
  with pytest.raises(ValueError, match="not the same for every value"): a[:var.bind(4)].reshape(2, var.bind(4))
  np.testing.assert_allclose(_padded(Tensor(A)[:, :var.bind(3)].reshape(4 * var.bind(3), 1).reshape(4, var.bind(3)), (4, 10)),
                             _np_padded(A[:, :3], (4, 10)))

@pytest.mark.cpu
def test_reshape_none_keeps_a_dim():
  x = Tensor(A)[:, :Variable("n", 1, MAX).bind(6)].reshape(2, 2, -1)
  assert x.reshape(None, None, 1, -1).shape == (2, 2, 1, x.shape[2]) and x.reshape(1, None, None, -1).shape == (1, 2, x.shape[2], 2)
  np.testing.assert_equal(Tensor(B).reshape(None, 3, 3).numpy(), B.reshape(MAX, 3, 3))

NEG_SLICES = [
  ("-3:-1", lambda t, v: t[:, -3:-1], lambda a, n: a[:, -3:-1]), ("-1:", lambda t, v: t[:, -1:], lambda a, n: a[:, -1:]),
  (":-1", lambda t, v: t[:, :-1], lambda a, n: a[:, :-1]), ("-15:", lambda t, v: t[:, -15:], lambda a, n: a[:, -15:]),
  (":-15", lambda t, v: t[:, :-15], lambda a, n: a[:, :-15]), ("-v:", lambda t, v: t[:, -v:], lambda a, n: a[:, -n:]),
  ("int_dim_-v:", lambda t, v: Tensor(A)[:, -v:], lambda a, n: A[:, -n:]), ("-1", lambda t, v: t[:, -1], lambda a, n: a[:, -1]),
  ("-2", lambda t, v: t[:, -2], lambda a, n: a[:, -2]),
]

@pytest.mark.cpu
@pytest.mark.parametrize("name,fn,ref", NEG_SLICES, ids=[c[0] for c in NEG_SLICES])
def test_negative_slices_of_a_symbolic_dim(name, fn, ref):
  # negative bounds count from the end of the symbolic size and stop at 0, as Python's slices (0.14 gives wrong elements when the
  # size is smaller than the bound)
  var = Variable("n", 1, MAX)
  for n in (1, 2, 3, 7, MAX):
    if name == "-2" and n < 2:
      with pytest.raises(IndexError, match=r"index -2 is out of bounds for dimension 1 with size n \(= 1\)"):
        fn(Tensor(A)[:, :var.bind(n)], var.bind(n))
      continue
    got, want = fn(Tensor(A)[:, :var.bind(n)], var.bind(n)), ref(A[:, :n], n)
    np.testing.assert_allclose(_padded(got, got.max_shape), _np_padded(want, got.max_shape), err_msg=f"n={n}")

def test_symbolic_slice_bound_of_either_sign_is_an_error():
  v = Variable("k", -2, 2).bind(1)
  with pytest.raises(IndexError, match=r"bounds that are never negative or always negative, got k in \[-2, 2\]"): Tensor(A)[:, v:]

BITS = rng.standard_normal((MAX, 4)).astype(np.float32)

@pytest.mark.cpu
@pytest.mark.parametrize("dtype", ["uint8", "float16", "uint64", "float64"])
def test_bitcast_to_another_itemsize(dtype):
  # the bytes of the last dim regroup (little-endian, as numpy's view): int shapes, a symbolic leading dim, a symbolic last dim
  t, var = Tensor(BITS), Variable("n", 1, MAX // 2)
  np.testing.assert_array_equal(t.bitcast(dtype).numpy(), BITS.view(dtype))
  np.testing.assert_array_equal(t.bitcast(dtype).bitcast("float32").numpy(), BITS)
  cols = np.ascontiguousarray(BITS.T)
  for n in (1, 2, 4):
    got = t[:var.bind(n)].bitcast(dtype)
    np.testing.assert_array_equal(_padded(got, got.max_shape), _np_padded(BITS[:n].view(dtype), got.max_shape), err_msg=f"n={n}")
    got = t.T[:, :2 * var.bind(n)].bitcast(dtype)
    np.testing.assert_array_equal(_padded(got, got.max_shape), _np_padded(cols[:, :2 * n].view(dtype), got.max_shape), err_msg=f"n={n}")

def test_bitcast_that_does_not_divide_the_last_dim():
  with pytest.raises(RuntimeError, match=r"bitcast of shape \(9, 3\) from dtypes.float to dtypes.ulong: the last dim's 12 bytes"):
    Tensor(BITS[:, :3]).bitcast("uint64")
  with pytest.raises(RuntimeError, match=r"the last dim's \(n\*4\) bytes are not a multiple of 8"):
    Tensor(BITS).T[:, :Variable("n", 1, MAX).bind(3)].bitcast("uint64")
  with pytest.raises(RuntimeError, match="needs the same itemsize"): Tensor(BITS).bitcast("bool")

@pytest.mark.cpu
def test_conv_over_a_symbolic_length_whose_ceil_division_is_not_constant():
  # (v + 6 - 11) / 6 rounds up to a size that is not one expression of v's floor: the output length and values match the int conv
  v = Variable("v", 11, 100)
  x, w = Tensor(rng.standard_normal((1, 8, 100)).astype(np.float32)).realize(), Tensor(rng.standard_normal((16, 8, 12)).astype(np.float32))
  for val in (11, 17, 79):
    got = x[:, :, :v.bind(val)].conv2d(w, stride=6, padding=(3, 3))
    want = x[:, :, :val].conv2d(w, stride=6, padding=(3, 3)).numpy()
    assert got.shape[2].sym_infer({"v": val}) == want.shape[2] == (val + 6 - 12) // 6 + 1
    np.testing.assert_allclose(got[:, :, :want.shape[2]].numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"v={val}")

@pytest.mark.cpu
def test_arange_with_a_symbolic_step():
  s, b, e, neg = Variable("s", 1, 3), Variable("b", 0, 5), Variable("e", 10, 20), Variable("m", -3, -1)
  for step in (1, 2, 3):
    for got, want in ((Tensor.arange(0, 10, s.bind(step)), np.arange(0, 10, step)),
                      (Tensor.arange(b.bind(2), e.bind(14), s.bind(step)), np.arange(2, 14, step)),
                      (Tensor.arange(10, 0, neg.bind(-step)), np.arange(10, 0, -step))):
      np.testing.assert_array_equal(_padded(got, got.max_shape), _np_padded(want, got.max_shape), err_msg=f"step={step}")
  with pytest.raises(ValueError, match=r"step that is never 0 and of one sign, got k in \[-1, 1\]"):
    Tensor.arange(0, 10, Variable("k", -1, 1).bind(1))

@pytest.mark.cpu
def test_empty_of_a_symbolic_shape():
  # the buffer holds the largest size; the tensor sees the bound size
  v = Variable("n", 1, MAX)
  for n in (2, 5):
    e = Tensor.empty(4, v.bind(n))
    assert e.shape[1] is v.bind(n)
    e.assign(Tensor(A)[:, :v.bind(n)] * 2).realize()
    np.testing.assert_allclose(_padded(e, (4, MAX)), _np_padded(A[:, :n] * 2, (4, MAX)))

def test_chunk_of_a_symbolic_dim_raises():
  t = Tensor(A)[:, :Variable("n", 1, MAX).bind(4)]
  with pytest.raises(AssertionError, match=r"can't chunk the symbolic dim 1 \(size n\) of \(4, n\)"): t.chunk(2, dim=1)
  assert [c.shape for c in t.chunk(2, dim=0)] == [(2, t.shape[1])] * 2

@pytest.mark.cpu
def test_an_unbound_variable_names_itself_when_a_kernel_needs_it():
  with pytest.raises(RuntimeError, match=r"needs values for the variable\(s\) \['u'\].*unbound"): (Tensor(Variable("u", 1, 10)) + 1).item()
  assert Tensor(Variable("u", 1, 10).bind(2) + 1).item() == 3

@pytest.mark.cpu
def test_matmul_with_transposed_weight_over_symbolic_rows():
  # x @ w.T with x's rows a Variable: the kernel optimizations that tile rows by their size leave a symbolic loop alone
  x, w = rng.standard_normal((MAX, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
  xt, wt, var, start = Tensor(x[None]).realize(), Tensor(w).realize(), Variable("n", 1, 4), Variable("start", 0, 4)
  for s, n in ((0, 1), (3, 2), (4, 4)):
    rows = xt[:, start.bind(s):start.bind(s)+var.bind(n)]
    np.testing.assert_allclose(_padded((rows @ wt.T).realize(), (1, 4, 32)), _np_padded(x[None, s:s+n] @ w.T, (1, 4, 32)), rtol=1e-4, atol=1e-4)
    want = x[None, s:s+n] + x[None, s:s+n] @ w @ w.T
    np.testing.assert_allclose(_padded((rows + (rows @ wt) @ wt.T).realize(), (1, 4, 32)), _np_padded(want, (1, 4, 32)), rtol=1e-4, atol=1e-3)

@pytest.mark.cpu
def test_tinyjit_return_of_a_variable_no_argument_binds():
  a, var = Tensor(A).realize(), Variable("n", 1, MAX)
  jf = TinyJit(lambda x: (x[:, :var.bind(3)] + 1).realize())
  jf(a)
  with pytest.raises(JitError, match=r"Variable\(s\) \['n'\], which no argument binds"): jf(a)
