# Kernel counts, kernel names, generated C and DEBUG output of the Tensor -> schedule -> codegen -> C pipeline.
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import GlobalCounters, Context, ansistrip
from tinygrad.uop.ops import Ops, AxisType
from tinygrad.codegen import lower_ast
from tinygrad.engine.realize import get_spec
from tests.helpers.kernels import accesses, kinds, loop_sizes, register_sizes, vector_accesses

pytestmark = pytest.mark.cpu

def count_kernels(t:Tensor) -> int:
  GlobalCounters.reset()
  t.realize()
  return GlobalCounters.kernel_count

def src_of(t:Tensor) -> list[str]:
  items, _ = t.schedule()
  return [get_spec(si, si.bufs[0].device).src for si in items]

def uops_of(t:Tensor) -> tuple:
  """The linear UOps of the one kernel `t` schedules to, lowered for its device."""
  items, _ = t.schedule()
  assert len(items) == 1
  return get_spec(items[0], items[0].bufs[0].device).uops

@pytest.fixture
def x(): return Tensor(np.arange(16, dtype=np.float32).reshape(4, 4) + 1).realize()

class TestKernelCount:
  def test_elementwise_chain_is_one_kernel(self, x):
    y = x
    for i in range(10): y = (y * 1.01 + 0.5) if i % 2 else (y - 0.25).sqrt()
    assert count_kernels(y) == 1
  def test_chain_of_unary_one_kernel(self, x):
    assert count_kernels(((x + 1) * 2 - 3).sqrt().exp().log().sin().cos().reciprocal()) == 1
  def test_sum_of_product_is_one_kernel(self, x):
    y = Tensor(np.ones((4, 4), dtype=np.float32)).realize()
    t = (x * y).sum()
    assert count_kernels(t) == 1
    assert t.item() == pytest.approx(136.0)
  def test_reduce_then_elementwise_fuses(self, x):
    t = x.sum(1) * 2 + 1
    assert count_kernels(t) == 1
    np.testing.assert_allclose(t.numpy(), (np.arange(16).reshape(4, 4) + 1).sum(1) * 2 + 1)
  def test_softmax_at_most_3(self, x):
    m = x - x.max(1, keepdim=True)
    e = m.exp()
    t = e / e.sum(1, keepdim=True)
    assert count_kernels(t) <= 3
    ref = np.exp(x.numpy() - x.numpy().max(1, keepdims=True))
    np.testing.assert_allclose(t.numpy(), ref / ref.sum(1, keepdims=True), rtol=1e-5)
  def test_expensive_activation_is_not_recomputed_in_the_next_matmul(self):
    # gelu (about 60 ops) feeding a matmul is computed once per element, in its own matmul's kernel (no kernel more), not again for
    # every output column of the next one; a cheap one (relu) still fuses into the consumer
    rng = np.random.default_rng(0)
    a, w1, b1, w2 = (Tensor(rng.standard_normal(s, dtype=np.float32) * 0.5).realize() for s in ((4, 8), (8, 16), (16,), (16, 8)))
    t = (a @ w1 + b1).gelu() @ w2
    items, _ = t.schedule()
    assert len(items) == 2
    exps = [sum(1 for u in si.ast.toposort() if u.op is Ops.EXP2) for si in items]
    assert exps[0] > 0 and exps[1] == 0
    h = a.numpy() @ w1.numpy() + b1.numpy()
    ref = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3))) @ w2.numpy()
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert len((a @ w1 + b1).relu().matmul(w2).schedule()[0]) == 2
  def test_movement_makes_no_copies(self, x):
    t = x.permute(1, 0)[::2].flip(0).pad(((1, 1), (0, 0))).reshape(-1) + 1
    assert count_kernels(t) == 1
  def test_matmul_is_one_kernel(self, x):
    assert count_kernels(x @ x) == 1
  def test_full_plus_full_one_kernel_storing_3(self):
    t = (Tensor.full((10, 10), 1, dtypes.int32, buffer=False) + Tensor.full((10, 10), 2, dtypes.int32, buffer=False)).contiguous()
    uops = uops_of(t)
    # upcast by 4: 25 iterations of one 4-lane store of the constant, nothing loaded
    assert loop_sizes(uops) == [25] and accesses(uops) == {("STORE", 0, 4): 1}
    assert count_kernels(t) == 1
    assert t.numpy().tolist() == [[3] * 10] * 10
  def test_realized_input_no_kernel(self, x):
    assert count_kernels(x) == 0
  def test_cached_program_reused(self, x):
    dev = Device["CPU"]
    (x + 123.5).realize()
    before = dev.compiler.stats["compiled"] + dev.compiler.stats["mem_hits"] + dev.compiler.stats["disk_hits"]
    (x + 123.5).realize()
    after = dev.compiler.stats["compiled"] + dev.compiler.stats["mem_hits"] + dev.compiler.stats["disk_hits"]
    assert after == before

class TestSchedule:
  def test_schedule_is_inspectable(self, x):
    items, outs = (x.sum(1) + 1).schedule()
    assert len(items) == 1
    si = items[0]
    assert si.ast.op is Ops.SINK and si.ast.src[0].op is Ops.STORE
    assert any(u.op is Ops.REDUCE for u in si.ast.toposort())
    assert si.bufs[0].size == 4 and si.bufs[1].size == 16
  def test_kernel_ast_ops(self, x):
    items, _ = (x * 2).sum(0).schedule()
    ops = {u.op for u in items[0].ast.toposort()}
    assert {Ops.SINK, Ops.STORE, Ops.INDEX, Ops.LOAD, Ops.RANGE, Ops.REDUCE, Ops.MUL, Ops.PARAM} <= ops
  def test_linear_uops(self, x):
    items, _ = x.sum(0).schedule()
    uops = lower_ast(items[0].ast).uops
    assert uops[0].op is Ops.SINK and Ops.REDUCE not in {u.op for u in uops}
    opens = [u for u in uops if u.op is Ops.RANGE]
    ends = [u for u in uops if u.op is Ops.END]
    assert len(opens) == len(ends) == 2

class TestNames:
  # the names are the behaviour here: schedule items are named as tinygrad 0.14 names them (DEBUG output, the profiler)
  def test_elementwise_name(self, x):
    assert [si.name for si in (x + 1).schedule()[0]] == ["E_16"]
  def test_reduce_name(self, x):
    assert [si.name for si in x.sum(1).schedule()[0]] == ["r_4_4"]
    # the 16 reduced elements are one loop, unrolled by 4: 4 iterations of 4
    assert [si.name for si in x.sum().schedule()[0]] == ["r_4_4"]
    with Context(NOOPT=1): assert [si.name for si in x.sum().schedule()[0]] == ["r_4_4"]
    assert [si.name for si in Tensor.ones(3, 32, buffer=False).sum(1).schedule()[0]] == ["r_3_8_4"]
    assert [si.name for si in Tensor.ones(3, 7, buffer=False).sum(1).schedule()[0]] == ["r_3_7"]
  def test_permuted_keeps_dims(self, x):
    assert [si.name for si in (x.T + 1).schedule()[0]] == ["E_4_4"]

class TestLoweredKernel:
  """What the CPU kernel of a small program does, read off its linear UOps: loops, accumulators, vector or scalar accesses."""
  def test_elementwise(self):
    a = Tensor([1.0, 2.0, 3.0]).realize()
    uops = uops_of(a * 2 + 1)
    assert loop_sizes(uops) == [3] and register_sizes(uops) == [] and accesses(uops) == {("LOAD", 1, 1): 1, ("STORE", 0, 1): 1}
    np.testing.assert_array_equal((a * 2 + 1).numpy(), [3.0, 5.0, 7.0])
  def test_reduce(self):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = Tensor(x).realize()
    # NOOPT: the reduce is a loop into a register accumulator
    with Context(NOOPT=1):
      uops = uops_of(a.sum(1))
      assert loop_sizes(uops) == [2, 3] and register_sizes(uops) == [1]
      np.testing.assert_array_equal(a.sum(1).numpy(), x.sum(1))
    # optimized: a 3-element reduce is unrolled into straight-line code (3 loads), no accumulator
    uops = uops_of(a.sum(1))
    assert loop_sizes(uops) == [2] and register_sizes(uops) == [] and accesses(uops)[("LOAD", 1, 1)] == 3
    np.testing.assert_array_equal((a + 1).sum(1).numpy(), (x + 1).sum(1))
  def test_unrolled_reduce(self):
    # 64 elements: the scheduler's 16 iterations of 4, too many to unroll fully; the 4 lanes are consecutive: one vector load
    x = np.arange(64, dtype=np.float32)
    uops = uops_of(Tensor(x).realize().sum())
    assert loop_sizes(uops) == [16] and register_sizes(uops) == [1] and vector_accesses(uops) == {("LOAD", 1, 4): 1}
    assert Tensor(x).sum().item() == x.sum()
    # 16 elements: 4 iterations of 4 become straight-line code: 4 vector loads of 4 consecutive lanes, no loop, no accumulator
    a = Tensor(np.ones(16, dtype=np.float32)).realize()
    uops = uops_of(a.sum())
    assert loop_sizes(uops) == [] and register_sizes(uops) == [] and vector_accesses(uops) == {("LOAD", 1, 4): 4}
    assert a.sum().item() == 16.0 and a.max().item() == 1.0 and (a * Tensor.arange(16)).max().item() == 15.0
  def test_permute(self):
    # the transposed read is one scalar load per output, indexed by both loops (no copy, no vector)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    a = Tensor(x).realize()
    uops = uops_of(a.T + 1)
    assert loop_sizes(uops) == [3, 2] and accesses(uops) == {("LOAD", 1, 1): 1, ("STORE", 0, 1): 1}
    np.testing.assert_array_equal((a.T + 1).numpy(), x.T + 1)

class TestDebug:
  def test_debug2_one_line_per_kernel(self, x, capsys):
    capsys.readouterr()
    t = (x.sum(1, keepdim=True) + x).max(0)
    first = t.schedule()[0][0].name
    with Context(DEBUG=2): t.realize()
    lines = [l for l in map(ansistrip, capsys.readouterr().out.splitlines()) if l.startswith("***")]   # (the head is colored on a first run)
    assert len(lines) == 2 and first in lines[0]
  def test_debug4_prints_source(self, x, capsys):
    capsys.readouterr()
    with Context(DEBUG=4): (x * 7.5).realize()
    assert src_of(x * 7.5)[0] in capsys.readouterr().out   # the kernel's whole C source (the spec is cached: the same one)

class TestReduceFusion:
  @pytest.mark.parametrize("name,f,kernels", [
    ("sum_pad", lambda t: t.sum(1).pad(((2, 1),)), 1),
    ("max_flip", lambda t: t.max(0).flip(0) * 2, 1),
    ("sum_reshape_T", lambda t: t.sum(1).reshape(2, 2).T, 1),
    ("pad_sum", lambda t: t.pad(((1, 1), (2, 0))).sum(0), 1),
    ("pad_max", lambda t: t.pad(((1, 1), (2, 0))).max(), 1),
    ("strided_sum", lambda t: t[::2, 1::3].sum(), 1),
    ("expanded_reduce", lambda t: (t.sum(1, keepdim=True).expand(4, 6) * t).sum(), 2),
    ("permuted_reshape_sum", lambda t: t.T.reshape(3, 8).sum(0), 1),
    ("stack_reduces", lambda t: type(t).stack(t.sum(0), t.max(0)), 1),
    ("matmul_sum", lambda t: (t @ t.T).sum(1), 2)])
  def test_fusion(self, name, f, kernels):
    a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    x = Tensor(a).realize()
    out = f(x)
    GlobalCounters.reset()
    got = out.numpy()
    assert GlobalCounters.kernel_count == kernels
    np.testing.assert_allclose(got, f(_NpT(a)).a, rtol=1e-5, atol=1e-5)

class _NpT:
  """Just enough of the Tensor API over numpy to state each case once."""
  def __init__(self, a): self.a = np.asarray(a)
  def sum(self, axis=None, keepdim=False): return _NpT(self.a.sum(axis, keepdims=keepdim))
  def max(self, axis=None, keepdim=False): return _NpT(self.a.max(axis, keepdims=keepdim))
  def pad(self, p): return _NpT(np.pad(self.a, [(0, 0) if x is None else x for x in p]))
  def flip(self, ax): return _NpT(np.flip(self.a, ax))
  def reshape(self, *s): return _NpT(self.a.reshape(*s))
  def expand(self, *s): return _NpT(np.broadcast_to(self.a, s))
  @property
  def T(self): return _NpT(self.a.T)
  def __getitem__(self, i): return _NpT(self.a[i])
  def __mul__(self, o): return _NpT(self.a * (o.a if isinstance(o, _NpT) else o))
  def __matmul__(self, o): return _NpT(self.a @ o.a)
  @staticmethod
  def stack(*xs): return _NpT(np.stack([x.a for x in xs]))

def test_noopt_keeps_nested_loops():
  x = Tensor(np.ones((4, 4), dtype=np.float32)).realize()
  # the scheduler merges the contiguous dims into one loop; NOOPT=1 keeps one per dim
  with Context(NOOPT=1):
    items, _ = (x + 1).schedule()
    assert kinds(items[0].ast) == [(AxisType.LOOP, 4), (AxisType.LOOP, 4)]
  items, _ = (x + 1).schedule()
  assert kinds(items[0].ast) == [(AxisType.LOOP, 16)]

class TestCounters:
  def test_global_counters(self, x):
    GlobalCounters.reset()
    (x * 2 + 1).realize()
    assert GlobalCounters.kernel_count == 1
    assert GlobalCounters.global_ops == 2 * 16           # a MUL and an ADD per element
    assert GlobalCounters.global_mem == 2 * 16 * 4       # read 16 floats, write 16 floats
    assert GlobalCounters.time_sum_s > 0
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0 and GlobalCounters.global_ops == 0
  def test_debug1_summary(self, x, capsys):
    capsys.readouterr()
    with Context(DEBUG=1): (x.sum(1, keepdim=True) + x).max(0).realize()
    assert "ran 2 kernels" in capsys.readouterr().out
  def test_intermediates_freed(self):
    import gc
    gc.collect()
    base = GlobalCounters.mem_used
    a = Tensor(np.ones((100, 100), dtype=np.float32))
    b = (a.sum(1, keepdim=True) + a).max(0)   # the row sums are an intermediate buffer
    b.realize()
    assert GlobalCounters.mem_used - base == (100 * 100 + 100) * 4
    del a, b
    gc.collect()
    assert GlobalCounters.mem_used == base

class TestThread:
  """Kernels with enough work split their outermost output loop over the cores (core_id launches); NOOPT=1 keeps one launch."""
  def test_big_elementwise_is_threaded(self, monkeypatch):
    import tinygrad.codegen.opt.heuristic as opt
    import tinygrad.renderer.cstyle as cstyle
    import tinygrad.engine.realize as realize
    monkeypatch.setattr(realize, "_specs", {})  # specs are cached per (AST, device): these tests change the core count
    monkeypatch.setattr(opt, "THREAD_MAX", 4)
    monkeypatch.setattr(cstyle, "cpu_count", lambda: 4)  # the thread count is ClangRenderer.global_max[0]
    with Context(NUM_CPU_THREADS=4):
      a, b, c = (Tensor(np.random.default_rng(i).standard_normal(1 << 16).astype(np.float32)).realize() for i in range(3))
      items, _ = (a * b + c).schedule()
      spec = get_spec(items[0], "CPU")
      # one loop of 65536 split over 4 cores, then upcast by 4: each core runs 4096 iterations of 4-lane loads and stores
      assert spec.global_size == (4, 1, 1) and spec.core_id is not None and kinds(items[0].ast) == [(AxisType.LOOP, 1 << 16)]
      assert loop_sizes(spec.uops) == [4096] and vector_accesses(spec.uops) == {("LOAD", 1, 4): 1, ("LOAD", 2, 4): 1, ("LOAD", 3, 4): 1,
                                                                                ("STORE", 0, 4): 1}
      np.testing.assert_allclose((a * b + c).numpy(), a.numpy() * b.numpy() + c.numpy(), rtol=1e-6)
  def test_threaded_reduce_over_outer_axis(self, monkeypatch):
    import tinygrad.renderer.cstyle as cstyle
    import tinygrad.engine.realize as realize
    monkeypatch.setattr(realize, "_specs", {})
    monkeypatch.setattr(cstyle, "cpu_count", lambda: 3)  # the thread count is ClangRenderer.global_max[0]
    with Context(NUM_CPU_THREADS=3):
      x = np.random.default_rng(0).standard_normal((600, 700)).astype(np.float32)
      t = Tensor(x).realize()
      items, _ = t.sum(1).schedule()
      assert get_spec(items[0], "CPU").global_size == (3, 1, 1)
      np.testing.assert_allclose(t.sum(1).numpy(), x.sum(1), rtol=1e-4, atol=1e-3)
      np.testing.assert_allclose(t.max(0).numpy(), x.max(0))
  def test_small_or_noopt_not_threaded(self):
    t = Tensor(np.ones((256, 256), np.float32)).realize()
    assert get_spec((t + 1).schedule()[0][0], "CPU").core_id is not None or (__import__("os").cpu_count() or 1) < 2
    assert get_spec((t[:10] + 1).schedule()[0][0], "CPU").core_id is None
    with Context(NOOPT=1):
      spec = get_spec((t * 3).schedule()[0][0], "CPU")
      assert spec.core_id is None and spec.global_size == (1, 1, 1)
      np.testing.assert_array_equal((t * 3).numpy(), np.full((256, 256), 3, np.float32))
  def test_python_device_not_threaded(self):
    t = Tensor(np.arange(1 << 16, dtype=np.int32), device="PYTHON").realize()
    assert get_spec((t + 1).schedule()[0][0], "PYTHON").core_id is None

class TestUpcast:
  """Elementwise kernels compute 4 consecutive outputs per iteration, with 4-lane loads/stores where the accesses are contiguous."""
  @pytest.mark.parametrize("device,a,b", [("CPU", 5, 6), ("PYTHON", 7, 8)])
  def test_seed_example(self, device, a, b):
    # seed 002's full + full (other constants than TestKernelCount's: a realized graph isn't scheduled again)
    t = (Tensor.full((10, 10), a, dtypes.int32, device, buffer=False) + Tensor.full((10, 10), b, dtypes.int32, device, buffer=False)).contiguous()
    items, _ = t.schedule()
    uops = get_spec(items[0], device).uops   # 100 outputs: 25 iterations of a 4-lane store
    assert len(items) == 1 and loop_sizes(uops) == [25] and vector_accesses(uops) == {("STORE", 0, 4): 1}
    assert t.numpy().tolist() == [[a + b] * 10] * 10
    with Context(NOOPT=1):
      t = (Tensor.full((10, 10), a + 10, dtypes.int32, device, buffer=False) +
           Tensor.full((10, 10), b, dtypes.int32, device, buffer=False)).contiguous()
      uops = get_spec(t.schedule()[0][0], device).uops
      assert loop_sizes(uops) == [10, 10] and not vector_accesses(uops)
      assert t.numpy().tolist() == [[a + b + 10] * 10] * 10
  def test_vector_loads_and_scalar_fallback(self):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    a = Tensor(x).realize()
    uops = uops_of(a * 2 + a.T)
    # 8 rows of 2 iterations of 4 columns: a row's 4 elements one vector load and one vector store, the transposed access 4 scalar loads
    assert loop_sizes(uops) == [8, 2] and accesses(uops) == {("LOAD", 1, 4): 1, ("LOAD", 1, 1): 4, ("STORE", 0, 4): 1}
    np.testing.assert_array_equal((a * 2 + a.T).numpy(), x * 2 + x.T)
  def test_not_divisible_or_unsupported_dtype(self):
    x = np.arange(30, dtype=np.float32).reshape(3, 10)
    a = Tensor(x).realize()
    # 10 % 4 != 0: no upcast; the merged dim 30 isn't divisible either
    assert not vector_accesses(uops_of(a.permute(1, 0) + 1))
    np.testing.assert_array_equal((a.permute(1, 0) + 1).numpy(), x.T + 1)
    h = Tensor(np.arange(16, dtype=np.float16)).realize()
    uops = uops_of(h * 2)
    # half has no vector type: upcast (4 iterations of 4 outputs), scalar accesses
    assert loop_sizes(uops) == [4] and accesses(uops) == {("LOAD", 1, 1): 4, ("STORE", 0, 1): 4}
    np.testing.assert_array_equal((h * 2).numpy(), np.arange(16, dtype=np.float16) * 2)
  def test_strided_store_is_grouped(self):
    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    a = Tensor(x).realize()
    t = (a.T + 1).contiguous()   # output (8, 4): innermost dim 4 reads with stride 8
    np.testing.assert_array_equal(t.numpy(), x.T + 1)

def test_two_sums_combined_under_an_expand_are_one_kernel():
  # a + b of two row sums, broadcast back over the rows (batchnorm's backward does this for the mean's gradient): one kernel runs both
  # sums, instead of one kernel each
  rng = np.random.default_rng(0)
  a_np, b_np, c_np = (rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3))
  a, b, c = Tensor(a_np), Tensor(b_np), Tensor(c_np)
  out = ((a.sum(1, keepdim=True) + (b * 2).sum(1, keepdim=True)) * c).sum(0)
  assert len(out.schedule()[0]) == 2
  np.testing.assert_allclose(out.numpy(), ((a_np.sum(1, keepdims=True) + (b_np * 2).sum(1, keepdims=True)) * c_np).sum(0), rtol=1e-5)
  # a sum that something else needs too keeps its own buffer: no kernel is added for the combination
  s = a.sum(1, keepdim=True)
  out2 = (((s + b.sum(1, keepdim=True)) * c).sum(0), (s * c).max(0))
  assert len(out2[0].schedule(out2[1])[0]) == 4
