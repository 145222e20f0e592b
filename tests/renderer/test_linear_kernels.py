# Hand-built linear kernels rendered, compiled and run on CPU, interpreted on PYTHON, checked against numpy.
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.linear_kernels import Linear, c, run, add_kernel, sum_kernel, var_kernel
from tinygrad.device import Device, Buffer
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp

@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_add(device):
  a, b = np.random.default_rng(0).standard_normal((2, 10), dtype=np.float32)
  out, = run(device, add_kernel(10), [a, b], [dtypes.float])
  np.testing.assert_array_equal(out, a + b)

@pytest.mark.parametrize("device", DEVICES)
def test_sum_with_accumulator(device):
  a = np.random.default_rng(1).standard_normal(100, dtype=np.float32)
  out, = run(device, sum_kernel(4, 25), [a], [dtypes.float])
  np.testing.assert_allclose(out, a.reshape(4, 25).sum(axis=1), rtol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_int_variables(device):
  a = np.arange(10, dtype=np.float32)
  spec = Device[device].renderer.to_program(var_kernel())
  assert spec.var_names == ("m", "n")  # Variables without a slot are ordered by name
  for n in (3, 10):
    out, = run(device, var_kernel(), [a], [dtypes.float], {"n": n, "m": 5})
    np.testing.assert_array_equal(out, np.where(np.arange(10) < n, a * 2 + 5, 0))
  with pytest.raises(RuntimeError, match=r"variable\(s\) \['n'\]"): run(device, var_kernel(), [a], [dtypes.float], {"m": 5})
  with pytest.raises(ValueError, match=r"n=11 is outside its range \[1, 10\]"): run(device, var_kernel(), [a], [dtypes.float], {"n": 11, "m": 0})

def vector_kernel(n:int) -> list[UOp]:
  """float4 loads (SHRINK), per-lane adds (INDEX of the vector), a STACK and a float4 store."""
  k = Linear()
  out, a, b = k.param(0, dtypes.float, n), k.param(1, dtypes.float, n), k.param(2, dtypes.float, n)
  r = k.range(n // 4, 0)
  base = r * c(4)
  va = k.add(UOp(Ops.SHRINK, dtypes.float, (a, base, c(4))).load())
  vb = k.add(UOp(Ops.SHRINK, dtypes.float, (b, base, c(4))).load())
  lanes = [k.add(va.index(c(i)) + vb.index(c(i))) for i in range(4)]
  vec = k.add(UOp(Ops.STACK, dtypes.float, tuple(lanes)))
  return k.sink(f"E_{n//4}_4", k.end(k.add(UOp(Ops.SHRINK, dtypes.float, (out, base, c(4))).store(vec)), r))

@pytest.mark.parametrize("device", DEVICES)
def test_vector_load_store(device):
  a, b = np.random.default_rng(2).standard_normal((2, 16), dtype=np.float32)
  out, = run(device, vector_kernel(16), [a, b], [dtypes.float])
  np.testing.assert_array_equal(out, a + b)

def gated_kernel() -> list[UOp]:
  """out[i] = i < 3 ? a[i+7] : -1 (the load must not happen when the gate is off: a[i+7] is out of bounds for i >= 3),
  and out2[i] = a[i] only where a[i] > 0 (an IF block)."""
  k = Linear()
  out, out2, a = k.param(0, dtypes.float, 10), k.param(1, dtypes.float, 10), k.param(2, dtypes.float, 10)
  r = k.range(10, 0)
  gate = k.add(r < c(3))
  v = k.add(UOp(Ops.LOAD, dtypes.float, (k.add(a.index(r + c(7))), c(-1.0, dtypes.float), gate)))
  st = k.store(out, r, v)
  x = k.load(a, r)
  cond = k.add(c(0.0, dtypes.float) < x)
  blk = k.add(UOp(Ops.IF, dtypes.void, (cond,)))
  st2 = k.store(out2, r, x)
  endif = k.add(UOp(Ops.ENDIF, dtypes.void, (blk,)))
  return k.sink("gated", k.end(k.add(UOp(Ops.GROUP, dtypes.void, (st, st2, endif))), r))

@pytest.mark.parametrize("device", DEVICES)
def test_gates(device):
  a = np.linspace(-1, 1, 10, dtype=np.float32)
  out, out2 = run(device, gated_kernel(), [a], [dtypes.float, dtypes.float])
  np.testing.assert_array_equal(out, np.where(np.arange(10) < 3, np.concatenate([a[7:], a[:7]]), -1))
  np.testing.assert_array_equal(out2, np.where(a > 0, a, 0))

@pytest.mark.parametrize("device", DEVICES)
def test_gated_store_and_do_while(device):
  """A gated STORE, and an endless RANGE left by an END with a condition: count up until the counter reaches 5."""
  k = Linear()
  out = k.param(0, dtypes.int, 2)
  acc = k.acc(0, dtypes.int)
  init = k.add(acc.index(c(0)).store(c(0)))
  loop = k.add(UOp(Ops.RANGE, dtypes.void, (UOp(Ops.NOOP),), (0, None)))
  cur = acc.after(init, loop).index(c(0))
  nxt = k.add(k.add(cur.load()) + c(1))
  st = k.add(cur.store(nxt))
  done = k.end(st, loop, k.add(nxt < c(5)))
  val = k.add(acc.after(done).index(c(0)).load())
  st_out = k.store(out, c(0), val)
  k.add(out.index(c(1)).store(c(7), k.add(val < c(0))))  # never stored: the gate is false
  uops = k.sink("count", st_out, k.uops[-1])
  out_np, = run(device, uops, [], [dtypes.int])
  np.testing.assert_array_equal(out_np, [5, 0])

@pytest.mark.parametrize("device", DEVICES)
def test_kernel_writes_through_a_view(device):
  """A kernel writing through an offset view of a bigger buffer touches only the view."""
  dev = Device[device]
  spec = dev.renderer.to_program(add_kernel(4))
  base = Buffer(device, 12, dtypes.float).copyin(np.full(12, 9, np.float32).data)
  a, b = (Buffer(device, 4, dtypes.float).copyin(np.arange(4, dtype=np.float32).data) for _ in range(2))
  dev.run(spec, [base.view(4, dtypes.float, 16), a, b])
  np.testing.assert_array_equal(base.numpy(), [9, 9, 9, 9, 0, 2, 4, 6, 9, 9, 9, 9])

def threaded_kernel(threads:int, per:int) -> list[UOp]:
  """out[t*per + i] = a[t*per + i] * 2 + t: launch t of `threads` (SPECIAL core_id) does its own slice."""
  k = Linear()
  out, a = k.param(0, dtypes.int, threads*per), k.param(1, dtypes.int, threads*per)
  t = k.special(threads)
  r = k.range(per, 0)
  idx = k.add(t * c(per) + r)
  return k.sink("E_threads", k.end(k.store(out, idx, k.add(k.load(a, idx) * c(2) + t)), r))

@pytest.mark.parametrize("device", DEVICES)
def test_core_id_launches(device):
  spec = Device[device].renderer.to_program(threaded_kernel(4, 1000))
  assert spec.global_size == (4, 1, 1) and spec.core_id == 0 and spec.vals({}) == (0,)
  assert spec.estimates.ops == 4 * 1000 * 2  # every launch counts; the index arithmetic doesn't
  a = np.arange(4000, dtype=np.int32)
  out, = run(device, threaded_kernel(4, 1000), [a], [dtypes.int])
  np.testing.assert_array_equal(out, a * 2 + np.arange(4000) // 1000)

@pytest.mark.parametrize("device", DEVICES)
def test_core_id_after_variables(device):
  # the launch index is passed after the kernel's Variables, and set per launch by the runtime
  k = Linear()
  out = k.param(0, dtypes.int, 6)
  t, v = k.special(3), k.var("n", 0, 9)
  uops = k.sink("E_mixed", k.store(out, k.add(t * c(2)), k.add(k.add(v * c(10)) + t)))
  spec = Device[device].renderer.to_program(uops)
  assert spec.global_size == (3, 1, 1) and spec.core_id == 1 and spec.var_names == ("n", "core_id") and spec.vals({"n": 4}) == (4, 0)
  out_buf = Buffer(device, 6, dtypes.int).allocate()
  Device[device].run(spec, [out_buf], {"n": 4})
  assert out_buf.numpy().tolist()[::2] == [40, 41, 42]

def test_python_device_checks_bounds():
  k = Linear()
  out, a = k.param(0, dtypes.float, 4), k.param(1, dtypes.float, 4)
  r = k.range(5, 0)
  uops = k.sink("oob", k.end(k.store(out, r, k.load(a, r)), r))
  with pytest.raises(IndexError, match=r"kernel oob: index 4 is out of bounds for data1_4 \(4 elements\)"):
    run("PYTHON", uops, [np.zeros(4, np.float32)], [dtypes.float])

def test_negative_index_is_out_of_bounds_on_python():
  k = Linear()
  out = k.param(0, dtypes.int, 4)
  uops = k.sink("neg", k.store(out, c(-1), c(3)))
  with pytest.raises(IndexError, match="index -1 is out of bounds for data0_4"): run("PYTHON", uops, [], [dtypes.int])

def test_estimates():
  spec = Device["CPU"].renderer.to_program(sum_kernel(4, 25))
  assert spec.estimates.ops == 100              # the adds; index arithmetic is not counted
  assert spec.estimates.lds == 100*4 + 4*4      # every load of a, every store of out
  assert spec.estimates.mem == 100*4 + 4*4
  vspec = Device["CPU"].renderer.to_program(var_kernel())
  assert vspec.estimate({"n": 3, "m": 0}).ops == 3*2 and vspec.estimates.ops == 10*2  # unknown n counts at its upper bound
  assert (spec.outs, spec.ins, spec.globals) == ((0,), (1,), (0, 1))
