# A copy (Tensor.to) of a buffer's value and an assign that overwrites it, scheduled in one realize: the copy sees the version it was
# taken of, the write lands in its storage. The copy's source (a view of a pending write) gets a buffer of its own, and that node is
# also the view the assign stores through: the store must still go to the storage. Checked against numpy, also as random programs.
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, dtypes

pytestmark = pytest.mark.cpu

def pending(values:np.ndarray) -> Tensor:
  """A tensor that is a write not yet run (an assign into an empty buffer), holding values."""
  x = Tensor(values, device="CPU")
  return Tensor.empty(*values.shape, dtype=x.dtype, device="CPU").assign(x)

def test_scalar_counter_copied_then_incremented():
  n = Tensor.zeros((), dtype=dtypes.long, device="CPU")
  c = n.to("CPU:1")
  n += 1
  Tensor.realize(n, c)
  assert n.numpy() == 1 and c.numpy() == 0 and c.device == "CPU:1"
  n += 1   # the counter keeps counting in its own buffer
  assert n.numpy() == 2 and c.numpy() == 0

@pytest.mark.parametrize("realized_first", [False, True])
def test_vector_copied_then_assigned(realized_first):
  ref = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
  t = pending(ref)
  if realized_first: t.realize()
  c = t.to("CPU:1")
  t.assign(t * 2 + 1)
  Tensor.realize(t, c)
  np.testing.assert_equal(t.numpy(), ref * 2 + 1)
  np.testing.assert_equal(c.numpy(), ref)

def test_copies_to_two_devices_then_assigned():
  ref = np.array([1.5, -2.0, 3.0, 0.25], dtype=np.float32)
  t = pending(ref)
  c1, c2 = t.to("CPU:1"), t.to("CPU:2")
  t.assign(t * 2 + 1)
  Tensor.realize(c1, t, c2)
  np.testing.assert_equal(t.numpy(), ref * 2 + 1)
  np.testing.assert_equal(c1.numpy(), ref)
  np.testing.assert_equal(c2.numpy(), ref)

def test_copy_after_the_assign_sees_the_new_value():
  ref = np.array([1.0, 2.0, 3.0], dtype=np.float32)
  t = pending(ref)
  old = t.to("CPU:1")
  t.assign(t * 2 + 1)
  new = t.to("CPU:1")
  Tensor.realize(new, old, t)
  np.testing.assert_equal(old.numpy(), ref)
  np.testing.assert_equal(new.numpy(), ref * 2 + 1)
  np.testing.assert_equal(t.numpy(), ref * 2 + 1)

def test_copy_realized_alone_then_assigned():
  # the copy's source is realized by the first realize; the assign built after it must still write t's storage
  n = Tensor.zeros((), dtype=dtypes.long, device="CPU")
  c = n.to("CPU:1").realize()
  n += 1
  n.realize()
  assert n.numpy() == 1 and c.numpy() == 0

def test_copy_of_the_slice_that_is_assigned():
  # the slice node is both the copy's source and the view the write goes through
  ref = np.arange(5, dtype=np.float32)
  t = pending(ref)
  c = t[1:3].to("CPU:1")
  t[1:3] += 10
  Tensor.realize(t, c)
  want = ref.copy()
  want[1:3] += 10
  np.testing.assert_equal(t.numpy(), want)
  np.testing.assert_equal(c.numpy(), ref[1:3])

# ***** random interleavings of writes and copies against numpy *****

# t is (2, 3): its buffer seen through a RESHAPE, so a copy of all of t and the write of all of t go through one view node, as do a
# copy of a row and a write of that row
_step = st.one_of(
  st.tuples(st.just("assign"), st.integers(1, 3)),                     # t.assign(t * 2 + k)
  st.tuples(st.just("row_add"), st.integers(0, 1), st.integers(1, 3)),  # t[i] += k
  st.tuples(st.just("copy"), st.none()),                               # t.to("CPU:1")
  st.tuples(st.just("copy"), st.integers(0, 1)),                       # t[i].to("CPU:1")
  st.tuples(st.just("realize"),),                                      # realize t and the copies so far
)

@settings(max_examples=40, deadline=None)
@given(start_realized=st.booleans(), steps=st.lists(_step, max_size=8))
def test_random_assigns_and_copies(start_realized, steps):
  ref = np.array([[0.5, -1.0, 2.0], [3.0, -4.0, 1.0]], dtype=np.float32)
  t = pending(ref)
  if start_realized: t.realize()
  copies: list[tuple[Tensor, np.ndarray]] = []
  for step in steps:
    if step[0] == "assign":
      t.assign(t * 2 + step[1])
      ref = ref * 2 + step[1]
    elif step[0] == "row_add":
      t[step[1]] += step[2]
      ref = ref.copy()
      ref[step[1]] += step[2]
    elif step[0] == "copy":
      copies.append((t.to("CPU:1"), ref.copy()) if step[1] is None else (t[step[1]].to("CPU:1"), ref[step[1]].copy()))
    else: Tensor.realize(t, *(c for c, _ in copies))
  Tensor.realize(*(c for c, _ in copies), t)
  np.testing.assert_equal(t.numpy(), ref)
  for c, want in copies:
    assert c.device == "CPU:1"
    np.testing.assert_equal(c.numpy(), want)
