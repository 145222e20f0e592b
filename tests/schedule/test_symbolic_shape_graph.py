# Symbolic shapes without running kernels (the NULL device): shapes that hold bound Variables, the scheduler's unbinding (var_vals,
# one kernel AST for every value) and the value ranges behind the checks (a hypothesis property test). Kernels run in
# tests/schedule/test_symbolic_shapes.py.
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, Variable, Context
from tinygrad.uop.ops import UOp, Ops, sym_le
from tinygrad.schedule import create_schedule_with_vars, strip_binds

def _schedule(t:Tensor):
  with Context(DEV="NULL"): return create_schedule_with_vars([t.uop], ["NULL"])

def test_movement_shapes():
  v = Variable("i", 1, 10).bind(4)
  t = Tensor.empty(3, 10, device="NULL")
  x = t[:, :v]
  assert x.shape == (3, v)
  assert x.reshape(1, 3, v).shape == (1, 3, v) and x.reshape(-1).shape[0].render() == "(i*3)"
  assert x[:, 1:].shape[1].render() == "(i+-1)"
  assert x.pad(((0, 0), (v, 1))).shape[1].render() == "(i*2+1)"
  assert x[:, :1].expand(3, v).shape == (3, v) and x.sum(1).shape == (3,) and x.max(0).shape == (v,)
  assert t[:, v:v+2].shape == (3, 2)   # (v+2) - v simplifies to an int
  assert Tensor.arange(v, device="NULL").shape == (v,) and Tensor.arange(2, v+3, device="NULL").shape[0].render() == "(i+1)"

def test_bad_symbolic_input():
  v = Variable("i", 1, 10).bind(4)
  t = Tensor.empty(3, 10, device="NULL")
  with pytest.raises(IndexError, match="only step 1"): t[:, :v:2]
  with pytest.raises(RuntimeError, match="can't expand"): t[:, :v].expand(3, 4)
  with pytest.raises(ValueError, match="invalid shrink"): t[:, :v].shrink(((0, 3), (11, 12)))
  with pytest.raises(TypeError, match="takes ints or int Variable expressions, got 0.5"): Tensor.arange(0, v, 0.5)
  with pytest.raises(RuntimeError, match=r"shape \(-1, 7\) can't be inferred for input of shape \(3, i\)"): t[:, :v].reshape(-1, 7)
  assert t[:, :v].reshape(v, -1).shape == (v, 3)

def test_var_vals_and_one_ast_for_every_value():
  var = Variable("n", 1, 32)
  t = Tensor.empty(4, 32, device="NULL")
  asts = []
  for n in (3, 17):
    items, _, var_vals = _schedule((t[:, :var.bind(n)] * var.bind(n)).sum(1))
    assert var_vals == {"n": n}
    asts.append(tuple(si.ast for si in items))
  assert asts[0] == asts[1]
  # the AST takes the Variable unbound, as an int argument
  params = {u for ast in asts[0] for u in ast.toposort() if u.op is Ops.PARAM and u.arg.name == "n"}
  assert len(params) == 1 and next(iter(params)).arg.vmin_vmax == (1, 32)

def test_strip_binds_maps_back_to_the_original_nodes():
  v = Variable("n", 1, 8).bind(5)
  t = Tensor.empty(8, device="NULL")[:v] + 1
  stripped, var_vals, original = strip_binds([t.uop])
  assert var_vals == {"n": 5} and original[stripped[0]] is t.uop
  assert not any(u.is_bound_var for u in stripped[0].toposort())
  plain = Tensor.empty(8, device="NULL") + 1
  assert strip_binds([plain.uop]) == ([plain.uop], {}, {})

def test_two_values_of_one_variable():
  var = Variable("n", 1, 8)
  t = Tensor.empty(8, device="NULL")
  with pytest.raises(ValueError, match="'n' is bound to two values in one schedule: 2 and 3"):
    _schedule(t[:var.bind(2)].sum() + t[:var.bind(3)].sum())

def test_broadcast_of_different_variables():
  t = Tensor.empty(8, device="NULL")
  a, b = t[:Variable("i", 1, 8).bind(2)], t[:Variable("j", 1, 8).bind(2)]
  with pytest.raises(IndexError, match="shape mismatch: objects cannot be broadcast to a single shape"): a * b

@settings(max_examples=200, deadline=None)
@given(lo=st.integers(0, 50), span=st.integers(0, 50), val=st.integers(-5, 110), off=st.integers(0, 5))
def test_value_ranges(lo, span, val, off):
  """bind accepts exactly the values in [min, max]; a symbolic size's range holds its value at every binding, and sym_le never
  rejects sizes that can be in order."""
  hi = lo + span
  v = Variable("k", lo, hi)
  if not lo <= val <= hi:
    with pytest.raises(ValueError, match=rf"{val} not in range \[{lo}, {hi}\] of k"): v.bind(val)
    return
  b = v.bind(val)
  assert b.unbind() == (v, val) and b.vmin == lo and b.vmax == hi
  t = Tensor.empty(hi + off + 1, device="NULL")
  size = t[b:b + off + 1].shape[0]
  assert size == off + 1
  n = t[:b + off].shape[0]
  if span == 0: assert n == val + off   # a Variable with one value folds to it
  else: assert isinstance(n, UOp) and n.vmin <= val + off <= n.vmax and n.sym_infer({"k": val}) == val + off
  assert sym_le(b, b + off) and sym_le(0, b) and not sym_le(b + hi + 1 - lo + 1, b)

def test_null_device_launches_with_the_values():
  """NULL runs everything up to the launch, which checks the kernel gets one int per Variable."""
  from tinygrad import GlobalCounters
  var = Variable("n", 1, 16)
  t = Tensor.empty(4, 16, device="NULL")
  for n in (2, 9):
    before = GlobalCounters.kernel_count
    (t[:, :var.bind(n)].exp() * var.bind(n)).sum(1).realize()
    assert GlobalCounters.kernel_count > before
