# `function` (a traced, reusable call), Tensor.call/as_param/callify and hand-written kernels (Tensor.custom_kernel): forward and
# backward results against numpy, reuse of the traced body's schedule and kernels, and the errors (implicit buffers, device use while
# tracing, a loop without its END).
import numpy as np
import pytest
from tinygrad import Tensor, UOp, GlobalCounters, function, dtypes, Variable
from tinygrad.uop.ops import Ops, AxisType
from tinygrad.helpers import Context
from tinygrad.uop.ops import KernelInfo
import tinygrad.schedule as schedule_mod
import tinygrad.engine.realize as realize_mod
from tests.helpers.devices import DEVICES

def f32(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def kernels(*ts:Tensor) -> int:
  before = GlobalCounters.kernel_count
  Tensor.realize(*ts)
  return GlobalCounters.kernel_count - before

# ***** function: forward *****

@pytest.mark.parametrize("device", DEVICES)
def test_function_forward(device):
  @function
  def f(x, y): return (x * y + 1).relu()
  a, b = f32(4, 5), f32(4, 5, seed=1)
  r = f(Tensor(a, device=device), Tensor(b, device=device))
  assert r.uop.op is Ops.GETTUPLE and r.uop.src[0].op is Ops.FUNCTION and r.device == device
  assert r.shape == (4, 5) and r.dtype is dtypes.float32
  np.testing.assert_allclose(r.numpy(), np.maximum(a * b + 1, 0), rtol=1e-6)

@pytest.mark.cpu
def test_function_tuple_kwargs_lists_and_constants():
  @function
  def f(x, ys, scale=None): return x + ys[0] * scale, (x * ys[1]).sum(1)
  a, b, c = f32(3, 4), f32(3, 4, seed=1), f32(3, 4, seed=2)
  p, q = f(Tensor(a), [Tensor(b), Tensor(c)], scale=Tensor(2.0))
  np.testing.assert_allclose(p.numpy(), a + b * 2, rtol=1e-6)
  np.testing.assert_allclose(q.numpy(), (a * c).sum(1), rtol=1e-5)
  # the constant stays in the body: only the three tensors are arguments
  assert len(p.uop.src[0].src) == 4

@pytest.mark.cpu
def test_function_same_tensor_twice_is_one_argument():
  @function
  def f(x, y): return x * y
  t = Tensor(f32(5))
  r = f(t, t)
  assert len(r.uop.src[0].src) == 2
  np.testing.assert_allclose(r.numpy(), t.numpy() ** 2, rtol=1e-6)

@pytest.mark.cpu
def test_function_lazy_inputs():
  @function
  def f(x): return x.exp()
  a = f32(6)
  x = Tensor(a) * 2   # not realized: the whole graph of x is the argument
  np.testing.assert_allclose(f(x).numpy(), np.exp(a * 2), rtol=1e-5)

@pytest.mark.cpu
def test_function_second_call_reuses_body_schedule_and_kernels():
  traced = []
  @function
  def f(x, w): return (x @ w).relu() + 1
  def run(seed):
    x, w = Tensor(f32(4, 8, seed=seed)).realize(), Tensor(f32(8, 3, seed=seed + 1)).realize()
    r = f(x, w)
    traced.append(r.uop.src[0].src[0])
    return r, x.numpy(), w.numpy()
  r, x, w = run(0)
  np.testing.assert_allclose(r.numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-5, atol=1e-6)
  scheduled, compiled = len(schedule_mod.schedule_cache), len(realize_mod._specs)
  r, x, w = run(2)
  assert traced[0] is traced[1]   # the same body (UOps are interned): nothing new to trace
  np.testing.assert_allclose(r.numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-5, atol=1e-6)
  # the second call on other tensors scheduled nothing (a schedule cache hit) and compiled nothing
  assert len(schedule_mod.schedule_cache) == scheduled and len(realize_mod._specs) == compiled

@pytest.mark.cpu
def test_function_nested():
  @function
  def inner(x): return x * 3
  @function
  def outer(x, y): return inner(x) + inner(y) * 2
  a, b = f32(5), f32(5, seed=1)
  np.testing.assert_allclose(outer(Tensor(a), Tensor(b)).numpy(), a * 3 + b * 6, rtol=1e-6)

@pytest.mark.cpu
def test_function_method():
  class Layer:
    def __init__(self): self.w = Tensor(f32(3, 2)).realize()
    @function
    def __call__(self, x): return x @ self.w
  layer, a = Layer(), f32(4, 3, seed=1)
  np.testing.assert_allclose(layer(Tensor(a)).numpy(), a @ layer.w.numpy(), rtol=1e-5)

# ***** function: errors *****

def test_function_implicit_buffer_raises():
  w = Tensor(f32(4)).realize()
  @function
  def g(x): return x + w
  msg = r"function .*g has 1 implicit buffer\(s\), but allow_implicit=False\n  0: dtype=dtypes.float, size=4, device="
  with pytest.raises(RuntimeError, match=msg):
    g(Tensor(f32(4)))

@pytest.mark.cpu
def test_function_allow_implicit():
  w = Tensor(f32(4)).realize()
  @function(allow_implicit=True)
  def g(x): return x + w
  a = f32(3, 4, seed=1)
  r = g(Tensor(a))
  assert len(r.uop.src[0].src) == 3   # the body, x, then w
  np.testing.assert_allclose(r.numpy(), a + w.numpy(), rtol=1e-6)

def test_function_device_use_while_tracing_raises():
  @function
  def h(x): return Tensor(x.sum().numpy())
  with pytest.raises(RuntimeError, match="usage of device"):
    h(Tensor(f32(4)))

def test_function_bad_return_raises():
  @function
  def bad(x): return 3
  with pytest.raises(RuntimeError, match="function return type <class 'int'> not supported"):
    bad(Tensor(f32(2)))

# ***** function: backward *****

@pytest.mark.cpu
@pytest.mark.parametrize("precompile", [False, True])
def test_function_backward(precompile):
  @function(precompile=precompile, precompile_backward=precompile)
  def lin(x, w): return (x @ w).relu(), (x * 2).sum()
  xn, wn = f32(3, 4), f32(4, 5, seed=1)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  a, b = lin(x, w)
  (a.sum() + b).backward()
  m = (xn @ wn > 0).astype(np.float32)
  np.testing.assert_allclose(w.grad.numpy(), xn.T @ m, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), m @ wn.T + 2, rtol=1e-5, atol=1e-6)

@pytest.mark.cpu
def test_function_backward_to_implicit_weight():
  w = Tensor(f32(4), requires_grad=True).realize()
  @function(allow_implicit=True)
  def g(x): return (x * w).sum()
  a = f32(3, 4, seed=1)
  g(Tensor(a)).backward()
  np.testing.assert_allclose(w.grad.numpy(), a.sum(0), rtol=1e-5)

@pytest.mark.cpu
def test_function_grad_fxn():
  seen = []
  def grad(g, call):
    seen.append(call.op)
    return (g * 10,)   # deliberately not the true gradient: it must be what flows
  @function(grad_fxn=grad)
  def f(x): return x * 2
  x = Tensor(f32(5), requires_grad=True)
  f(x).sum().backward()
  assert seen == [Ops.FUNCTION]
  np.testing.assert_allclose(x.grad.numpy(), np.full(5, 10, np.float32))

# ***** precompile *****

@pytest.mark.cpu
def test_precompile_is_its_own_unit():
  def body(x): return x + 1
  plain, pre = function(body), function(body, precompile=True)
  a = f32(8)
  x = Tensor(a).realize()
  r1, r2 = plain(x) * 2, pre(x) * 2
  assert kernels(r1) == 1   # inlined: fused with the multiply
  assert kernels(r2) == 2   # the body's kernel, then the multiply
  np.testing.assert_allclose(r1.numpy(), (a + 1) * 2, rtol=1e-6)
  np.testing.assert_allclose(r2.numpy(), (a + 1) * 2, rtol=1e-6)

@pytest.mark.cpu
def test_precompile_second_call_schedules_nothing_new():
  @function(precompile=True)
  def f(x, y): return (x * y).sum(0), x - y
  def run(seed):
    a, b = f32(6, 3, seed=seed), f32(6, 3, seed=seed + 1)
    p, q = f(Tensor(a).realize(), Tensor(b).realize())
    Tensor.realize(p, q)
    np.testing.assert_allclose(p.numpy(), (a * b).sum(0), rtol=1e-5)
    np.testing.assert_allclose(q.numpy(), a - b, rtol=1e-6)
  run(0)
  scheduled, compiled = len(schedule_mod.schedule_cache), len(realize_mod._specs)
  run(5)
  assert len(schedule_mod.schedule_cache) == scheduled and len(realize_mod._specs) == compiled

@pytest.mark.cpu
def test_precompile_outputs_follow_their_arguments():
  # the same call traced again after its argument changed in place is the same graph: it must see the new contents (a training step)
  @function(precompile=True)
  def f(x): return x + 1, x * 2
  w = Tensor(f32(4)).realize()
  p, q = f(w)
  assert kernels(p) == 2   # the whole body ran
  np.testing.assert_allclose(p.numpy(), f32(4) + 1, rtol=1e-6)
  w.assign(w * 10).realize()
  p2, q2 = f(w)
  np.testing.assert_allclose(p2.numpy(), f32(4) * 10 + 1, rtol=1e-6)
  np.testing.assert_allclose(q.numpy(), f32(4) * 20, rtol=1e-6)   # q (lazy) is computed now: from w as it is now, as without function

@pytest.mark.parametrize("precompile", [False, True])
def test_function_writes_into_an_explicit_argument(precompile):
  # an assign, a setitem and tinygrad's AFTER(buf, STORE(view, x)) into an argument: its storage is the same argument, not an implicit
  # buffer, and the write lands in the caller's tensor (both as 0.14)
  @function(precompile=precompile)
  def assign(a, b): return a.assign(b + 1)
  @function(precompile=precompile)
  def setitem(a, b):
    a[:, 1:2] = b[:, 1:2] + 5
    return a
  @function(precompile=precompile)
  def store_at(buf, x, sp): return Tensor(buf.uop.after(buf[:, sp:sp+1].uop.store(x.uop)))
  b, x, v = f32(2, 8), np.array([[1.], [2.]], np.float32), Variable("sp", 0, 7)
  for fn, args, want in ((assign, (Tensor(b),), b + 1), (setitem, (Tensor(b),), np.where(np.arange(8) == 1, b + 5, 0)),
                         (store_at, (Tensor(x), v.bind(2)), np.where(np.arange(8) == 2, x, 0))):
    a = Tensor.zeros(2, 8).contiguous().realize()
    np.testing.assert_allclose(fn(a, *args).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-6)

# ***** Tensor.call and as_param *****

@pytest.mark.cpu
@pytest.mark.parametrize("precompile", [False, True])
def test_function_write_into_an_unallocated_implicit_buffer_stays(precompile):
  # a KV cache made with Tensor.empty (no memory until first used) that the body writes through a view: the write lands in the
  # cache's own buffer (the memory planner must not give it to the call's intermediates), which the next call and the caller read
  # (the intermediates are larger than the cache, so that a planned cache would not sit at the start of the arena)
  cache = Tensor.empty(64, 2)
  @function(precompile=precompile, allow_implicit=True)
  def f(x):
    y = (x + 1).contiguous()
    c = Tensor(cache.uop.after(cache[:, 1].uop.store(y[:64].uop)))
    return ((y * 2).contiguous() + c.sum()).contiguous()
  a = f32(512, seed=int(precompile))   # (another test's freed cache may come back with its contents: other numbers)
  f(Tensor(a)).realize()
  np.testing.assert_allclose(cache[:, 1].numpy(), a[:64] + 1, rtol=1e-6)

@pytest.mark.cpu
@pytest.mark.parametrize("precompile", [False, True])
def test_function_reads_a_pending_write_of_the_caller(precompile):
  # a Tensor.zeros cache (a write that has not run) that the body writes into at a position: the zeros are written once, before the
  # first call, not again at each call (which would erase what the calls before wrote) nor after it when the caller reads the cache
  cache = Tensor.zeros(16)
  @function(precompile=precompile, allow_implicit=True)
  def put(x, sp):
    return Tensor(cache.uop.after(cache[sp:sp+x.shape[0]].uop.store(x.uop)))[:sp+x.shape[0]].sum()
  v_sp, v_n, t = Variable("sp", 0, 8), Variable("n", 1, 8), Tensor(f32(16)).realize()
  want = np.zeros(16, np.float32)
  for sp, n in ((0, 5), (5, 3)):
    got = put(t[v_sp.bind(sp):v_sp.bind(sp)+v_n.bind(n)], v_sp.bind(sp)).numpy()
    want[sp:sp+n] = f32(16)[sp:sp+n]
    np.testing.assert_allclose(got, want[:sp+n].sum(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cache.numpy(), want, rtol=1e-6)

def test_as_param():
  t = Tensor.empty(4, 3, dtype=dtypes.int32, device="PYTHON").as_param(2)
  assert t.uop.op is Ops.PARAM and t.uop.arg.slot == 2 and t.shape == (4, 3) and t.dtype is dtypes.int32 and t.device == "PYTHON"

@pytest.mark.cpu
def test_call():
  x, y = Tensor.empty(4).as_param(0), Tensor.empty(4).as_param(1)
  body = x * y + 1
  a, b = f32(4), f32(4, seed=1)
  r = Tensor(a).call(Tensor(b), fxn=body)
  assert r.uop.op is Ops.GETTUPLE
  np.testing.assert_allclose(r.numpy(), a * b + 1, rtol=1e-6)
  np.testing.assert_allclose(Tensor(a).call(Tensor(b), fxn=body.uop).numpy(), a * b + 1, rtol=1e-6)
  xt = Tensor(a, requires_grad=True)
  xt.call(Tensor(b), fxn=body).sum().backward()
  np.testing.assert_allclose(xt.grad.numpy(), b, rtol=1e-6)

def test_call_argument_mismatch():
  body = Tensor.empty(4).as_param(0) + 1
  with pytest.raises(TypeError, match=r"arg 0 shape mismatch: expected \(4,\), got \(3,\)"):
    Tensor(f32(3)).call(fxn=body).realize()
  with pytest.raises(TypeError, match="arg 0 dtype mismatch"):
    Tensor(np.arange(4, dtype=np.int32)).call(fxn=body).realize()

# ***** callify *****

@pytest.mark.cpu
def test_callify():
  a = Tensor(f32(4)).realize()
  b, c = a + 1, a * 2
  d = b + 10
  assert b.callify(c) is b
  assert b.uop.op is Ops.GETTUPLE and c.uop.op is Ops.GETTUPLE   # nothing ran
  assert kernels(b, c) == 2   # one unit: its two kernels
  np.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-6)
  np.testing.assert_allclose(c.numpy(), a.numpy() * 2, rtol=1e-6)
  np.testing.assert_allclose(d.numpy(), a.numpy() + 11, rtol=1e-6)

# ***** hand-written kernels *****

def add_one_kernel(B:UOp, A:UOp) -> UOp:
  A, B = A.flatten(), B.flatten()
  i = UOp.range(A.numel(), 0)
  return B[i].store(A[i] + 1).end(i).sink(arg=KernelInfo(f"add_one_{A.numel()}"))

def row_sum_kernel(O:UOp, A:UOp) -> UOp:
  i, k = UOp.range(A.shape[0], 0), UOp.range(A.shape[1], 1, AxisType.REDUCE)
  O = O[i].set(0.0)
  O = O[i].set(O.after(k)[i] + A[i, k], end=k)
  return O.end(i).sink(arg=KernelInfo("row_sum"))

def sum_kernel(B:UOp, A:UOp) -> UOp:
  i = UOp.range(A.shape[0], 0, AxisType.REDUCE)
  B = B[0].set(0.0)
  return B[0].set(B.after(i)[0] + A[i], end=i).sink()

def addmul_kernel(C:UOp, D:UOp, A:UOp, B:UOp) -> UOp:
  i = UOp.range(A.shape[0], 0)
  return UOp.group(C[i].store(A[i] + B[i]), D[i].store(A[i] * B[i])).end(i).sink(arg="addmul")

@pytest.mark.parametrize("device", DEVICES)
def test_custom_kernel_elementwise(device):
  a = f32(4, 6)
  x = Tensor(a, device=device) * 2   # lazy: computed into a buffer of its own first
  out = Tensor.empty(4, 6, device=device)
  r = out.custom_kernel(x, fxn=add_one_kernel)
  assert len(r) == 2 and r[0].uop.op is Ops.AFTER and r[0].shape == (4, 6) and r[0].device == device
  np.testing.assert_allclose(r[0].numpy(), a * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(r[1].numpy(), a * 2, rtol=1e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_custom_kernel_row_sum(device):
  a = f32(7, 33)
  r = Tensor.empty(7, device=device).custom_kernel(Tensor(a, device=device), fxn=row_sum_kernel)[0]
  items, _ = r.schedule()
  assert [si.name for si in items] == ["row_sum"]
  np.testing.assert_allclose(r.numpy(), a.sum(1), rtol=1e-5, atol=1e-5)

@pytest.mark.cpu
def test_custom_kernel_sum_and_multi_output():
  s = Tensor.empty(1).custom_kernel(Tensor([1.0, 2, 3, 4, 5]), fxn=sum_kernel)[0]
  assert s.item() == 15.0
  a, b = f32(8), f32(8, seed=1)
  c, d = Tensor.custom_kernel(Tensor.empty(8), Tensor.empty(8), Tensor(a), Tensor(b), fxn=addmul_kernel)[:2]
  assert kernels(c, d) == 1
  np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)
  np.testing.assert_allclose(d.numpy(), a * b, rtol=1e-6)
  assert kernels(c) == 0   # its kernel ran once: both outputs are realized

@pytest.mark.cpu
def test_custom_kernel_grad_fxn():
  def double(B:UOp, A:UOp) -> UOp:
    i = UOp.range(A.shape[0], 0)
    return B[i].store(A[i] * 2).end(i).sink()
  def grad(g:UOp, call:UOp): return (None, g * 2)
  a = f32(6)
  x = Tensor(a, requires_grad=True)
  y = Tensor.empty(6).custom_kernel(x, fxn=double, grad_fxn=grad)[0]
  (y * y).sum().backward()
  np.testing.assert_allclose(y.numpy(), a * 2, rtol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), 8 * a, rtol=1e-5)

def test_custom_kernel_without_grad_fxn_has_no_gradient():
  x = Tensor(f32(4), requires_grad=True)
  y = Tensor.empty(4).custom_kernel(x, fxn=add_one_kernel)[0]
  with pytest.raises(RuntimeError, match="no gradient for the CALL of a hand-written kernel add_one_4: pass grad_fxn="):
    y.sum().backward()

def test_custom_kernel_missing_end_raises():
  def no_end(B:UOp, A:UOp) -> UOp:
    i = UOp.range(A.shape[0], 3)
    return B[i].store(A[i] + 1).sink(arg="no_end")
  with pytest.raises(RuntimeError, match=r"RANGE \(axis 3, size 5\) of the call body is never closed by an END"):
    Tensor.empty(5).custom_kernel(Tensor(f32(5)), fxn=no_end)

def test_linearize_names_a_range_without_end():
  # an AST lowered directly (no call to check it), with the linear program's SPEC check off: the linearizer itself refuses it
  from tinygrad.codegen import lower_ast
  from tinygrad.schedule.call import hand_written_ast
  P = UOp.placeholder((4,), dtypes.float, 0)
  i = UOp.range(4, 7)
  ast = hand_written_ast(P[i].store(UOp.const(1.0, dtypes.float)).sink(arg="open_loop"))
  with Context(SPEC=0), pytest.raises(RuntimeError, match=r"RANGE \(axis 7, AxisType.WEAK, size 4\) of kernel open_loop is never closed by an END"):
    lower_ast(ast, "CPU")

def test_tensor_names_match_tinygrad():
  for name in ("call", "callify", "custom_kernel", "as_param"): assert callable(getattr(Tensor, name))

def test_custom_kernel_bad_fxn_and_slot():
  with pytest.raises(TypeError, match=r"must return the kernel's SINK \(....sink\(\)\), got int"):
    Tensor.empty(4).custom_kernel(fxn=lambda b: 3)
  with pytest.raises(TypeError, match="got Ops.END"):
    Tensor.empty(4).custom_kernel(fxn=lambda b: b[UOp.range(4, 0)].store(1.0).end(UOp.range(4, 0)))
  with pytest.raises(TypeError, match="a PARAM's slot is an int, got 'x'"):
    Tensor.empty(4).as_param("x")

@pytest.mark.cpu
def test_custom_kernel_in_place_write():
  def inc(A:UOp) -> UOp:
    i = UOp.range(A.shape[0], 0)
    return A[i].store(A[i] + 1).end(i).sink(arg="inc")
  a = f32(5)
  # a lazy argument the kernel writes: computed into a buffer of its own, which other readers of that value don't share
  x = Tensor(a) * 2
  r, y = x.custom_kernel(fxn=inc)[0], x + 10
  Tensor.realize(r, y)
  np.testing.assert_allclose(r.numpy(), a * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(y.numpy(), a * 2 + 10, rtol=1e-6)
  # a realized one is written in place: reading its old contents in the same realize is an error, not a silent new value
  z = Tensor(a).realize()
  r = z.custom_kernel(fxn=inc)[0]
  with pytest.raises(RuntimeError, match=r"kernel inc writes a buffer \(shape \(5,\), dtypes.float\) that the graph also reads as it was before"):
    Tensor.realize(r, z + 1)
  np.testing.assert_allclose(r.numpy(), a + 1, rtol=1e-6)

@pytest.mark.cpu
def test_function_makes_its_own_buffers():
  @function
  def f(x): return x + Tensor.ones(4) * Tensor.full((4,), 3.0)
  a, b = f32(4), f32(4, seed=1)
  r1, r2 = f(Tensor(a)), f(Tensor(b))
  np.testing.assert_allclose(r1.numpy(), a + 3, rtol=1e-6)
  np.testing.assert_allclose(r2.numpy(), b + 3, rtol=1e-6)
  @function
  def g(x): return x + Tensor([1.0, 2.0, 3.0, 4.0])   # data made inside: a device use while tracing (an implicit input on PYTHON)
  with pytest.raises(RuntimeError, match="usage of device|implicit buffer"):
    g(Tensor(a))

def gemm_kernel(C:UOp, A:UOp, B:UOp) -> UOp:
  i, j, k = UOp.range(C.shape[0], 0), UOp.range(C.shape[1], 1), UOp.range(A.shape[1], 2, AxisType.REDUCE)
  C = C[i, j].set(0.0)
  C = C[i, j].set(C.after(k)[i, j] + A[i, k] * B[k, j], end=k)
  return C.end(i, j).sink(arg=KernelInfo("gemm"))   # one END closing both output loops, as 0.14 writes it

@pytest.mark.cpu
def test_custom_kernel_gemm_with_grad_fxn():
  def grad(g:UOp, call:UOp):
    _, a, b = call.src[1:]
    return (None, (Tensor(g) @ Tensor(b).T).uop, (Tensor(a).T @ Tensor(g)).uop)
  an, bn = f32(4, 8), f32(8, 5, seed=1)
  a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
  c = Tensor.custom_kernel(Tensor.empty(4, 5), a, b, fxn=gemm_kernel, grad_fxn=grad)[0]
  (c * c).sum().backward()
  ref = an @ bn
  np.testing.assert_allclose(c.numpy(), ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(a.grad.numpy(), 2 * ref @ bn.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(b.grad.numpy(), an.T @ (2 * ref), rtol=1e-4, atol=1e-4)

@pytest.mark.cpu
def test_function_implicit_realized_graph():
  # a captured tensor whose graph was realized (its node is marked, not a BUFFER) is an implicit input too
  w0 = Tensor(f32(4))
  w = w0 * 3
  keep = w.uop
  w.realize()
  @function
  def g(x): return x + Tensor(keep, device=w.device)
  with pytest.raises(RuntimeError, match=r"has 1 implicit buffer\(s\).*\n  0: dtype=dtypes.float, size=4, device=CPU"):
    g(Tensor(f32(4, seed=1)))
  g2 = function(g.fxn, allow_implicit=True)
  np.testing.assert_allclose(g2(Tensor(f32(4, seed=1))).numpy(), f32(4, seed=1) + f32(4) * 3, rtol=1e-6)
