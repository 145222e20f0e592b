# TinyJit: capture on the second call, replay after; replays compute what the function computes (numpy is the reference).
import re
import numpy as np
import pytest
from tinygrad import Tensor, TinyJit, GlobalCounters, Context, nn, dtypes, Variable
from tinygrad.engine import jit as jit_mod, realize
from tinygrad.engine.jit import JitError, CapturedJit, ExecItem
from tinygrad import helpers
from tinygrad.helpers import ansistrip
from tinygrad.tensor import core as tensor_core
from tests.helpers.devices import DEVICES
from tests.helpers.memory import check_no_live_overlap

pytestmark = pytest.mark.cpu

def _buf(a:np.ndarray, device:str="CPU") -> Tensor: return Tensor(a.astype(np.float32), device=device).realize()

@pytest.mark.parametrize("device", DEVICES)
def test_replay_matches_numpy(device):
  @TinyJit
  def f(a, b): return ((a + b).relu() * 2).sum(axis=1)
  rng = np.random.default_rng(0)
  for _ in range(5):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(f(_buf(x, device), _buf(y, device)).numpy(), (np.maximum(x + y, 0) * 2).sum(axis=1), rtol=1e-5)
  assert isinstance(f.captured, CapturedJit) and len(f.captured) >= 1 and all(isinstance(i, ExecItem) for i in f.captured.items)

def test_first_call_runs_second_captures_then_replays():
  calls = []
  @TinyJit
  def f(a):
    calls.append(1)
    return a * 3
  x = _buf(np.ones(4))
  f(x)
  assert f.captured is None and len(calls) == 1
  f(x)
  assert f.captured is not None and len(calls) == 2
  for _ in range(3): f(x)
  assert len(calls) == 2, "a replay must not call the Python function"

def test_replay_does_not_schedule_or_lower(monkeypatch):
  @TinyJit
  def f(a): return (a * 2 + 1).exp2()
  x = _buf(np.arange(6))
  f(x), f(x)
  def boom(*a, **k): raise AssertionError("replay must not schedule or lower")
  y = _buf(np.arange(6) + 1.0)
  k0 = GlobalCounters.kernel_count
  with monkeypatch.context() as m:
    m.setattr(tensor_core, "create_schedule", boom)
    m.setattr(realize, "get_spec", boom)
    out = f(y)
  np.testing.assert_allclose(out.numpy(), 2.0 ** (2 * (np.arange(6) + 1.0) + 1), rtol=1e-6)
  assert GlobalCounters.kernel_count > k0, "replayed kernels count in GlobalCounters"

def test_outputs_are_not_overwritten_by_later_calls():
  @TinyJit
  def f(a): return a * 2
  outs = [f(_buf(np.full(3, i))) for i in range(5)]
  for i, o in enumerate(outs): np.testing.assert_equal(o.numpy(), np.full(3, 2 * i))

def test_kwargs_and_containers():
  @TinyJit
  def f(a, pair, d, *, scale): return a + pair[0] * pair[1] + d["k"] * scale
  rng = np.random.default_rng(1)
  for _ in range(4):
    a, p0, p1, k, s = (rng.standard_normal(5) for _ in range(5))
    got = f(_buf(a), [_buf(p0), _buf(p1)], {"k": _buf(k)}, scale=_buf(s))
    np.testing.assert_allclose(got.numpy(), a + p0 * p1 + k * s, rtol=1e-5, atol=1e-6)

def test_returns_tuple_dict_and_none():
  @TinyJit
  def f(a): return {"double": a * 2, "pair": (a + 1, None)}
  for i in range(4):
    r = f(_buf(np.full(2, i)))
    np.testing.assert_equal(r["double"].numpy(), [2 * i] * 2)
    np.testing.assert_equal(r["pair"][0].numpy(), [i + 1] * 2)
    assert r["pair"][1] is None

def test_view_inputs_of_realized_buffers():
  @TinyJit
  def f(a): return a * 2
  for i in range(5):
    base = _buf(np.arange(20) + i)
    np.testing.assert_equal(f(base[2:7]).numpy(), (np.arange(2, 7) + i) * 2)
    np.testing.assert_equal(base.numpy(), np.arange(20) + i)

def test_view_inputs_strided_and_reshaped():
  @TinyJit
  def f(a): return a.sum(axis=0)
  for i in range(4):
    base = _buf(np.arange(24).reshape(4, 6) * (i + 1))
    np.testing.assert_equal(f(base[:, ::2].T).numpy(), (np.arange(24).reshape(4, 6) * (i + 1))[:, ::2].T.sum(axis=0))

def test_assign_into_input_goes_to_each_calls_input():
  @TinyJit
  def f(a):
    a.assign(a * 2 + 1)
    return a.sum()
  for i in range(4):
    x = _buf(np.full(3, i))
    s = f(x)
    np.testing.assert_equal(x.numpy(), np.full(3, 2 * i + 1))
    assert s.item() == 3 * (2 * i + 1)

def test_returning_an_input_returns_this_calls_input():
  @TinyJit
  def f(a, b):
    a.assign(a + b)
    return a, b * 1
  for i in range(4):
    x, y = _buf(np.full(2, i)), _buf(np.full(2, 10))
    ra, rb = f(x, y)
    assert ra is x
    np.testing.assert_equal(ra.numpy(), [i + 10] * 2)
    np.testing.assert_equal(rb.numpy(), [10] * 2)

def test_random_numbers_advance_like_unjitted():
  def f(x): return x + Tensor.rand(4) + Tensor.randn(2, 3).sum()
  x = _buf(np.zeros(4))
  Tensor.manual_seed(7)
  want = [f(x).numpy() for _ in range(5)]
  Tensor.manual_seed(7)
  jf = TinyJit(f)
  got = [jf(x).numpy() for _ in range(5)]
  for w, g in zip(want, got): np.testing.assert_array_equal(w, g)
  assert len({tuple(g) for g in got}) == 5, "each call draws new numbers"
  # draws after the JIT continue the same sequence
  Tensor.manual_seed(7)
  for _ in range(5): f(x)
  after = Tensor.rand(3).numpy()
  Tensor.manual_seed(7)
  for _ in range(5): jf(x)
  np.testing.assert_array_equal(Tensor.rand(3).numpy(), after)

def test_random_after_manual_seed_reseeds_the_replay():
  jf = TinyJit(lambda x: x + Tensor.rand(3))
  x = _buf(np.zeros(3))
  for _ in range(3): jf(x)
  Tensor.manual_seed(11)
  got = [jf(x).numpy() for _ in range(2)]
  Tensor.manual_seed(11)
  want = [(x + Tensor.rand(3)).numpy() for _ in range(2)]
  for w, g in zip(want, got): np.testing.assert_array_equal(w, g)

def test_dropout_training_step_matches_unjitted():
  def run(jit):
    Tensor.manual_seed(3)
    w = Tensor.ones(6, 6).contiguous().realize()
    def f(x):
      with Context(TRAINING=1): return (x @ w).dropout(0.5)
    g = TinyJit(f) if jit else f
    return [g(_buf(np.full((2, 6), i))).numpy() for i in range(5)]
  for a, b in zip(run(False), run(True)): np.testing.assert_array_equal(a, b)

def _mlp_losses(jit:bool, prune:bool=False, jits:list|None=None) -> tuple[list[float], list[np.ndarray]]:
  Tensor.manual_seed(0)
  l1, l2 = nn.Linear(8, 16), nn.Linear(16, 4)
  opt = nn.optim.AdamW(nn.state.get_parameters([l1, l2]), lr=1e-2)
  def step(x, y):
    with Context(TRAINING=1):
      opt.zero_grad()
      loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      return loss
  st = TinyJit(step, prune=prune) if jit else step
  if jits is not None: jits.append(st)
  rng = np.random.default_rng(0)
  losses = []
  for _ in range(6):
    x, y = Tensor(rng.standard_normal((5, 8), dtype=np.float32)), Tensor(rng.integers(0, 4, 5).astype(np.int32))
    losses.append(st(x, y).item())
  return losses, [p.numpy() for p in (l1.weight, l2.weight, l2.bias)]

def test_training_step_matches_unjitted():
  (la, wa), (lb, wb) = _mlp_losses(False), _mlp_losses(True)
  np.testing.assert_allclose(la, lb, rtol=1e-6)
  for a, b in zip(wa, wb): np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

def test_capture_plans_the_calls_intermediates():
  # three realizes per call: planned together, the first and third intermediates share memory; replays stay correct
  def f(x):
    a = (x * 2).contiguous().realize()
    b = (a + 1).contiguous().realize()
    c = (b * 3).contiguous().realize()
    return c + 1
  j = TinyJit(f)
  for i in range(5):
    x = np.arange(64, dtype=np.float32) + i
    np.testing.assert_allclose(j(_buf(x)).numpy(), (x * 2 + 1) * 3 + 1)
  assert j.captured is not None and check_no_live_overlap(j.captured.items) == 3

def test_planned_training_step_never_overlaps_live_buffers():
  jits: list = []
  _mlp_losses(True, jits=jits)   # equal to unjitted: test_training_step_matches_unjitted
  assert jits[0].captured is not None and check_no_live_overlap(jits[0].captured.items) > 0
  held = Tensor.ones(3).contiguous().realize()   # a tensor made outside: its buffer is never planned
  def g(x):
    y = (x + held).contiguous().realize()
    return (y * 2).contiguous().realize() + 1
  j = TinyJit(g)
  for i in range(4): np.testing.assert_allclose(j(_buf(np.full(3, i))).numpy(), (np.full(3, i) + 1) * 2 + 1)
  assert j.captured is not None
  check_no_live_overlap(j.captured.items)
  assert held._buffer() in [b for item in j.captured.items for b in item.bufs]   # read by the kernels, in its own memory

def test_prune_drops_input_independent_kernels():
  w = Tensor.ones(4).contiguous().realize()
  def f(a): return a + (w * 2 + 1).contiguous()    # the constant part is its own kernel that doesn't depend on a
  j, jp = TinyJit(f), TinyJit(f, prune=True)
  for i in range(4):
    x = _buf(np.full(4, i))
    np.testing.assert_equal(j(x).numpy(), np.full(4, i + 3))
    np.testing.assert_equal(jp(x).numpy(), np.full(4, i + 3))
  assert j.captured is not None and jp.captured is not None and len(jp.captured) < len(j.captured)

def test_prune_keeps_training_correct():
  (la, wa), (lb, wb) = _mlp_losses(False), _mlp_losses(True, prune=True)
  np.testing.assert_allclose(la, lb, rtol=1e-6)
  for a, b in zip(wa, wb): np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

def test_jit_0_never_captures():
  with Context(JIT=0):
    calls = []
    @TinyJit
    def f(a):
      calls.append(1)
      return a + 1
    for i in range(4): np.testing.assert_equal(f(_buf(np.full(2, i))).numpy(), [i + 1] * 2)
    assert f.captured is None and len(calls) == 4

@pytest.mark.parametrize("level", [1, 2])
def test_jit_1_and_2_capture(level):
  with Context(JIT=level):
    f = TinyJit(lambda a: a * a)
    for i in range(4): np.testing.assert_equal(f(_buf(np.full(2, i))).numpy(), [i * i] * 2)
    assert f.captured is not None

def test_reset_captures_again():
  calls = []
  def body(a):
    calls.append(1)
    return a - 1
  f = TinyJit(body)
  x = _buf(np.ones(3))
  for _ in range(3): f(x)
  f.reset()
  assert f.captured is None
  np.testing.assert_equal(f(_buf(np.ones((2, 2)))).numpy(), np.zeros((2, 2)))   # a new shape after reset is fine
  f(_buf(np.ones((2, 2))))
  assert f.captured is not None and len(calls) == 4   # 2 before the reset (run, capture), 2 after

def test_method_gets_a_capture_per_instance():
  class Scale:
    def __init__(self, s): self.w = Tensor([s] * 3).realize()
    @TinyJit
    def __call__(self, x): return x * self.w
  a, b = Scale(2.0), Scale(5.0)
  for i in range(4):
    x = _buf(np.full(3, i))
    np.testing.assert_equal(a(x).numpy(), [2 * i] * 3)
    np.testing.assert_equal(b(x).numpy(), [5 * i] * 3)
  assert a.__call__.captured is not None and a.__call__ is not b.__call__ and a.__call__ is a.__call__
  Scale.__call__.reset()
  assert a.__call__.captured is None

def test_replay_overhead_is_a_launch_loop():
  @TinyJit
  def chain(x):
    for _ in range(50): x = (x + 1).contiguous()
    return x
  xs = [_buf(np.zeros(8)) for _ in range(2)]
  for i in range(3): chain(xs[i % 2])
  assert chain.captured is not None and len(chain.captured) == 50
  np.testing.assert_equal(chain(xs[0]).numpy(), np.full(8, 50))

def test_host_read_outside_capture_still_works():
  # reading data is only refused while capturing: the first call and after the capture are fine
  @TinyJit
  def f(a): return a + 1
  x = _buf(np.ones(2))
  f(x)
  assert not realize.capturing
  f(x)
  assert not realize.capturing
  assert f(x).tolist() == [2.0, 2.0]

def test_capture_list_is_left_clean_after_an_error():
  @TinyJit
  def f(a):
    if f.cnt == 1: raise ValueError("boom")
    return a + 1
  x = _buf(np.ones(2))
  f(x)
  with pytest.raises(ValueError, match="boom"): f(x)
  assert not realize.capturing and jit_mod.realize.capturing == []

def test_bound_variable_arguments():
  v = Variable("n", 1, 10)
  f = TinyJit(lambda a, n: a + 1)
  x = _buf(np.ones(2))
  for k in (2, 3, 4): np.testing.assert_equal(f(x, v.bind(k)).numpy(), [2.0, 2.0])
  with pytest.raises(JitError, match=r"Variables\) at arguments \[\('var', 1, 'n'\), 0\]"): f(x, 3)

def test_bool_and_int_inputs():
  @TinyJit
  def f(m, i): return m.where(i * 2, i)
  for k in range(4):
    m, i = Tensor(np.array([True, False, True])).realize(), Tensor(np.array([k, k + 1, k + 2], dtype=np.int32)).realize()
    np.testing.assert_equal(f(m, i).numpy(), np.where([True, False, True], np.array([k, k + 1, k + 2]) * 2, [k, k + 1, k + 2]))
    assert f(m, i).dtype == dtypes.int32

# ***** property: a TinyJit of a random Tensor program computes what the program computes, call after call *****

from hypothesis import given, settings, HealthCheck, strategies as st  # noqa: E402

OPS = st.tuples(st.sampled_from(["unary", "binary", "reduce", "permute", "flip", "shrink", "reshape", "matmul", "contiguous"]),
                st.integers(0, 7), st.integers(0, 7), st.integers(0, 3))

def _apply(vals:list[Tensor], op:tuple) -> Tensor|None:
  kind, i, j, p = op
  t = vals[i % len(vals)]
  nd = t.ndim
  if kind == "unary": return [t.relu(), t.exp2() * 0.25, t.abs().sqrt(), -t][p]
  if kind == "binary":
    same = [u for u in vals if u.shape == t.shape]
    u = same[j % len(same)]
    return [t + u, t * u, t.maximum(u), (t > u).where(t, u * 0.5)][p]
  if kind == "reduce" and nd >= 1: return (t.sum if p % 2 else t.max)(axis=j % nd, keepdim=p >= 2)
  if kind == "permute" and nd >= 2: return t.permute(tuple(reversed(range(nd))))
  if kind == "flip" and nd >= 1: return t.flip(j % nd)
  if kind == "shrink" and nd >= 1 and t.shape[0] >= 2: return t[:t.shape[0] // 2]
  if kind == "reshape": return t.reshape(-1)
  if kind == "matmul" and nd == 2:
    if (rhs := [u for u in vals if u.ndim == 2 and u.shape[0] == t.shape[1]]): return t @ rhs[j % len(rhs)]
  if kind == "contiguous": return t.contiguous()
  return None

def _program(ops:list[tuple]):
  def prog(a:Tensor, b:Tensor, c:Tensor):
    vals = [a, b, c]
    for op in ops:
      if (v := _apply(vals, op)) is not None: vals.append(v)
    return vals[-1] * 2.0 + 1.0, vals[len(vals) // 2] + 0.5
  return prog

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=7), seed=st.integers(0, 2**16))
def test_property_jit_equals_unjitted(ops, seed):
  prog = _program(ops)
  jitted = TinyJit(prog)
  rng = np.random.default_rng(seed)
  for _ in range(4):
    ins = [rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (4, 6), (6, 3))]
    want = [w.numpy() for w in prog(*[Tensor(a).realize() for a in ins])]
    got = [g.numpy() for g in jitted(*[Tensor(a).realize() for a in ins])]
    for w, g in zip(want, got): np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  assert jitted.captured is not None

def test_debug2_prints_a_line_per_kernel_on_replays(capsys, monkeypatch):
  # tinygrad's examples time their jitted steps with DEBUG=2: each replayed launch prints its line, numbered like a plain run's
  @TinyJit
  def f(a, n): return (a[:n] * 2 + 1).sum(axis=1).realize()
  rng = np.random.default_rng(0)
  x = rng.standard_normal((6, 8)).astype(np.float32)
  for i in range(2): f(_buf(x), Variable("n", 1, 6).bind(3 + i))
  names = [it.spec.name for it in f.captured.items if it.spec is not None]
  capsys.readouterr()
  monkeypatch.setattr(helpers, "NO_COLOR", False)
  with Context(DEBUG=2):
    k0 = GlobalCounters.kernel_count
    out = f(_buf(x), Variable("n", 1, 6).bind(4))
  lines = [ln for ln in capsys.readouterr().out.splitlines() if "***" in ln]
  np.testing.assert_allclose(out[:4].numpy(), (x[:4] * 2 + 1).sum(axis=1), rtol=1e-5)
  assert len(lines) == len(names) >= 1
  # tinygrad 0.14's line: the head in magenta for a replay, the time / the total so far, the rates
  line = re.compile(r"\*\*\* CPU +(\d+) (\S+) +arg +\d+ mem +[\d.]+ GB tm +[\d.]+(us|ms|s )/ *[\d.]+ms \( *\d+ GFLOPS +\d+\|\d+ +GB/s\)")
  for ln, name, num in zip(lines, names, range(k0 + 1, k0 + 1 + len(names))):
    assert ln.startswith("\x1b[35m***") and (m := line.fullmatch(ansistrip(ln))) is not None, ln
    assert m[1] == str(num) and m[2] == name

def test_debug1_says_a_replay_scheduled_nothing(capsys):
  @TinyJit
  def f(a): return (a * 2 + 1).sum() + a.max()
  f(_buf(np.arange(6))), f(_buf(np.arange(6)))
  capsys.readouterr()
  with Context(DEBUG=1): f(_buf(np.arange(6) + 1.0))
  out = capsys.readouterr().out
  assert "TinyJit replayed" in out and "schedule cache" not in out
