# Reduce kernel optimizations (tinygrad/codegen/opt/): small reduce loops unrolled, the innermost output loop of a reduce kernel
# upcast by 4 (4 accumulators, vector loads). Numerics against numpy on both devices, and the lowered kernel's loops and accesses.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops
from tinygrad.helpers import Context
from tinygrad.engine.realize import get_spec
from tests.helpers.kernels import loop_sizes, register_sizes, vector_accesses, accesses

pytestmark = pytest.mark.cpu

DEVICES = ["CPU", "PYTHON"]

@pytest.fixture
def single_core(monkeypatch):
  """No threading (its core count differs between machines): the lowered kernels are the same everywhere."""
  import tinygrad.engine.realize as realize
  monkeypatch.setattr(realize, "_specs", {})  # specs are cached per (AST, device)
  with Context(NUM_CPU_THREADS=1): yield

def rand(shape, dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.issubdtype(dtype, np.integer): return rng.integers(-8, 8, size=shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)

def spec_of(t:Tensor, device:str="CPU"):
  items, _ = t.schedule()
  assert len(items) == 1
  return get_spec(items[0], device)

# (M, K) @ (K, N): sizes divisible by 4 or not, 1-sized dims, reduce sizes that are unrolled fully or kept as a loop
# (8, 40, 8) and (12, 36, 16) keep their reduce loop and are upcast in both output dims (16 accumulators)
MATMUL_SHAPES = [(64, 64, 64), (4, 4, 8), (5, 7, 3), (1, 16, 1), (3, 1, 8), (17, 33, 12), (8, 64, 128), (2, 100, 4), (6, 9, 20), (8, 40, 8),
                 (12, 36, 16), (4, 44, 4)]

class TestMatmulNumerics:
  # the PYTHON device interprets every op: its shapes stay small
  @pytest.mark.parametrize("device,m,k,n", [(d, *s) for d in DEVICES for s in MATMUL_SHAPES if d == "CPU" or s[0] * s[1] * s[2] <= 40000])
  def test_float32(self, device, m, k, n):
    a, b = rand((m, k)), rand((k, n), seed=1)
    np.testing.assert_allclose((Tensor(a, device=device) @ Tensor(b, device=device)).numpy(), a @ b, rtol=1e-5, atol=1e-4)

  @pytest.mark.parametrize("device", DEVICES)
  @pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
  def test_other_dtypes(self, device, dtype):
    a, b = rand((12, 20), dtype), rand((20, 8), dtype, seed=1)
    got = (Tensor(a, device=device) @ Tensor(b, device=device)).numpy()
    assert got.dtype == dtype
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)

  @pytest.mark.parametrize("device", DEVICES)
  def test_non_contiguous_inputs(self, device):
    a, b = rand((16, 24)), rand((32, 16), seed=1)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    np.testing.assert_allclose((ta.T @ tb.T).numpy(), a.T @ b.T, rtol=1e-5, atol=1e-4)            # both transposed
    np.testing.assert_allclose((ta[::2] @ tb[:24:, ::2].flip(1)).numpy(), a[::2] @ b[:24, ::2][:, ::-1], rtol=1e-5, atol=1e-4)
    pa = ta.pad(((0, 0), (2, 2)))                                                                  # zeros in the reduce
    np.testing.assert_allclose((pa @ tb[:28]).numpy(), np.pad(a, ((0, 0), (2, 2))) @ b[:28], rtol=1e-5, atol=1e-4)

  @pytest.mark.parametrize("device", DEVICES)
  def test_batched_and_fused(self, device):
    a, b = rand((3, 8, 40)), rand((3, 40, 16), seed=1)
    got = ((Tensor(a, device=device) @ Tensor(b, device=device)).relu() * 2 + 1).numpy()
    np.testing.assert_allclose(got, np.maximum(a @ b, 0) * 2 + 1, rtol=1e-5, atol=1e-4)

class TestReduceNumerics:
  @pytest.mark.parametrize("device", DEVICES)
  @pytest.mark.parametrize("axis", [0, 1, 2, (0, 2), (1, 2), (0, 1), None])
  @pytest.mark.parametrize("op", ["sum", "max", "min"])
  def test_axes(self, device, axis, op):
    x = rand((6, 8, 12))
    got = getattr(Tensor(x, device=device), op)(axis=axis).numpy()
    np.testing.assert_allclose(got, getattr(x, op)(axis=axis), rtol=1e-5, atol=1e-5)

  @pytest.mark.parametrize("device", DEVICES)
  @pytest.mark.parametrize("shape", [(16,), (3, 7), (7, 3), (4, 16), (16, 4), (1, 8), (8, 1), (5, 64), (64, 12), (2, 3, 1, 4), (48, 32), (36, 8),
                                     (40, 4, 16)])
  def test_int_and_float_shapes(self, device, shape):
    for dtype in (np.int32, np.float32):
      x = rand(shape, dtype)
      t = Tensor(x, device=device)
      np.testing.assert_allclose(t.sum(axis=0).numpy(), x.sum(axis=0), rtol=1e-5, atol=1e-5)
      np.testing.assert_array_equal(t.max(axis=-1).numpy(), x.max(axis=-1))
      np.testing.assert_array_equal(t.min(axis=0).numpy(), x.min(axis=0))

  @pytest.mark.parametrize("device", DEVICES)
  def test_bool_and_prod(self, device):
    x = rand((4, 12), np.int32)
    t = Tensor(x, device=device)
    # bool reduces combine with OR/AND
    np.testing.assert_array_equal((t > 3).max(axis=1).numpy(), (x > 3).any(axis=1))
    np.testing.assert_array_equal((t > -7).min(axis=0).numpy(), (x > -7).all(axis=0))
    np.testing.assert_array_equal((t > 3)._reduce(Ops.ADD, (1,)).numpy(), (x > 3).any(axis=1))
    np.testing.assert_array_equal(Tensor(x[:, :5] % 3 + 1, device=device).prod(axis=1).numpy(), (x[:, :5] % 3 + 1).prod(axis=1))

  def test_noopt_same_result(self):
    a, b = rand((17, 33)), rand((33, 12), seed=1)
    want = (Tensor(a) @ Tensor(b)).numpy()
    with Context(NOOPT=1): np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), want, rtol=1e-5, atol=1e-5)

class TestLoweredKernel:
  """The optimized kernel's loops, accumulators and vector accesses, read off its linear UOps (not its name or C spelling)."""
  def test_matmul_upcast(self, single_core):
    a, b = Tensor(rand((64, 64))).realize(), Tensor(rand((64, 64), seed=1)).realize()
    uops = spec_of(a @ b).uops
    # the output column loop (64) runs 16 times computing 4 columns, the row loop (64) 16 times computing 4 rows: 16
    # accumulators. Per reduce step (the scheduler's 4 lanes): B's 4 rows as 4 vector loads shared by the 4 output rows, A's 4 rows
    # one vector load each; each output row's 4 results are one vector store, and its 4 accumulators one vector (zeroed, updated each
    # step)
    assert loop_sizes(uops) == [16, 16, 16] and register_sizes(uops) == [16]
    assert vector_accesses(uops) == {("LOAD", 1, 4): 4, ("LOAD", 2, 4): 4, ("STORE", 0, 4): 4, ("LOAD", "reg", 4): 8, ("STORE", "reg", 4): 8}
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-4)
    with Context(NOOPT=1):
      uops = spec_of(a @ b).uops
      assert loop_sizes(uops) == [64, 64, 64] and register_sizes(uops) == [1] and not vector_accesses(uops)

  @pytest.mark.parametrize("half", [dtypes.float16, dtypes.bfloat16])
  def test_half_weight_gemv_lanes(self, single_core, half):
    # x @ w.T with w a stored float16/bfloat16 tensor cast to float (a GGUF F16 weight): 16 elements a reduce step, the 16 halves one
    # vector load of their bits (converted lane by lane, one vector cast) next to x's, one 16-lane vector accumulator (read and written
    # as a vector: zeroed, updated each step)
    xs, ws = rand((1, 512)), rand((8, 512), seed=1)
    x, w = Tensor(xs).realize(), Tensor(ws).cast(half).realize()
    out = x @ w.float().T
    uops = spec_of(out).uops
    assert loop_sizes(uops) == [8, 32] and register_sizes(uops) == [16]
    assert vector_accesses(uops) == {("LOAD", 1, 16): 1, ("LOAD", 2, 16): 1, ("LOAD", "reg", 16): 1, ("STORE", "reg", 16): 2}
    wf = w.float().numpy()
    assert wf.dtype == np.float32 and np.abs(wf - ws).max() < 0.02
    np.testing.assert_allclose(out.numpy(), xs.astype(np.float64) @ wf.astype(np.float64).T, rtol=1e-5, atol=1e-4)
    # the conversion is exact on every class of half: each row one special value (the rest zeros) in a different lane, summed with ones
    if half is dtypes.float16:
      special = np.array([0.0, -0.0, 6e-8, -6e-8, 1e-5, 65504.0, -65504.0, np.inf, -np.inf, np.nan, 1.0, 2049.0], np.float16)
      wsp = np.zeros((len(special), 512), np.float16)
      wsp[np.arange(len(special)), np.arange(len(special)) * 37] = special
      got = (Tensor(np.ones((1, 512), np.float32)).realize() @ Tensor(wsp).realize().float().T).numpy()
      np.testing.assert_array_equal(got[0], special.astype(np.float32) + 0.0)

  @pytest.mark.parametrize("half", [dtypes.float16, dtypes.bfloat16])
  def test_two_half_weight_gemvs_in_one_kernel(self, single_core, half):
    # silu(x @ wg.T) * (x @ wu.T), a feed-forward's gate and up over F16 weights in one kernel: each sum keeps one vector accumulator.
    # With one scalar accumulator per lane the C compiler paired lanes of the two sums into 2-wide shuffles: 6x slower than one GEMV
    xs, gs, us = rand((1, 256)), rand((16, 256), seed=1), rand((16, 256), seed=2)
    x, wg, wu = Tensor(xs).realize(), Tensor(gs).cast(half).realize(), Tensor(us).cast(half).realize()
    out = (x @ wg.float().T).silu() * (x @ wu.float().T)
    uops = spec_of(out).uops
    assert register_sizes(uops) == [16, 16]
    assert vector_accesses(uops) == {("LOAD", 1, 16): 2, ("LOAD", 2, 16): 1, ("LOAD", 3, 16): 1, ("LOAD", "reg", 16): 2, ("STORE", "reg", 16): 4}
    g, u = xs.astype(np.float64) @ wg.float().numpy().T, xs.astype(np.float64) @ wu.float().numpy().T
    np.testing.assert_allclose(out.numpy(), g / (1 + np.exp(-g)) * u, rtol=1e-5, atol=1e-5)

  def test_symbolic_rows_are_threaded(self, monkeypatch):
    # x[:toks] @ w.T, a prefill chunk's rows a bound Variable: the cores split the weight's rows (the first loop of a known size); the
    # rows' loop alone (its size unknown) kept the kernel on one core
    import tinygrad.engine.realize as realize
    from tinygrad import UOp
    monkeypatch.setattr(realize, "_specs", {})
    xs, ws = rand((32, 1024)), rand((1024, 1024), seed=1)
    x, w, toks = Tensor(xs).realize(), Tensor(ws).realize(), UOp.variable("toks", 1, 32)
    with Context(NUM_CPU_THREADS=2):
      uops = spec_of(x[:toks.bind(5)] @ w.T).uops
      assert [u.arg for u in uops if u.op is Ops.SPECIAL] == ["core_id"]
      out = (x[:toks.bind(5)] @ w.T).pad(((0, 32 - toks.bind(5)), None)).contiguous()[:5].numpy()
    np.testing.assert_allclose(out, xs[:5].astype(np.float64) @ ws.astype(np.float64).T, rtol=1e-4, atol=1e-4)

  def test_decoded_weight_rows_tile(self, single_core):
    # x @ decode(w).T, w int8 values times a half scale per 32 (a Q8_0-like weight), 32 rows of x: the rows are upcast by 4, so each
    # decoded weight element serves 4 rows (4 x 16 lane accumulators) instead of being decoded again for every row
    rng = np.random.default_rng(0)
    xs, q = rand((32, 1024)), rng.integers(-128, 128, (64, 1024)).astype(np.int8)
    sc = rng.random((64, 32)).astype(np.float16)
    x, wq, s = Tensor(xs).realize(), Tensor(q).realize(), Tensor(sc).realize()
    w = (wq.reshape(64, 32, 32).cast(dtypes.float32) * s.cast(dtypes.float32).unsqueeze(-1)).reshape(64, 1024)
    uops = spec_of(x @ w.T).uops
    assert loop_sizes(uops) == [8, 64, 64] and register_sizes(uops) == [64]
    wf = (q.reshape(64, 32, 32).astype(np.float64) * sc.astype(np.float64)[..., None]).reshape(64, 1024)
    np.testing.assert_allclose((x @ w.T).numpy(), xs.astype(np.float64) @ wf.T, rtol=1e-5, atol=1e-3)

  def test_batched_matmul_upcast(self, single_core):
    a, b = Tensor(rand((3, 8, 64))).realize(), Tensor(rand((3, 64, 12), seed=1)).realize()
    uops = spec_of(a @ b).uops
    # per batch: 8 rows as 2 loops of 4 upcast rows, 12 columns as 3 loops of 4 upcast columns, the reduce 16 steps of 4 lanes
    assert loop_sizes(uops) == [3, 2, 3, 16] and register_sizes(uops) == [16]
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-4)

  def test_python_device_upcast(self):
    a, b = Tensor(rand((8, 16)), device="PYTHON").realize(), Tensor(rand((16, 8), seed=1), device="PYTHON").realize()
    uops = spec_of(a @ b, "PYTHON").uops
    # the PYTHON device upcasts as CPU does: 4 output columns a vector store, the reduce of 16 fully unrolled
    assert loop_sizes(uops) == [8, 2] and vector_accesses(uops)[("STORE", 0, 4)] == 1
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)

  def test_small_matmul_fully_unrolled(self, single_core):
    # a reduce of 16: the scheduler's 4 iterations of 4 are unrolled too, no loop and no accumulator are left for it
    a, b = Tensor(rand((4, 16))).realize(), Tensor(rand((16, 8), seed=1)).realize()
    uops = spec_of(a @ b).uops
    assert loop_sizes(uops) == [4, 2] and register_sizes(uops) == [] and vector_accesses(uops)[("LOAD", 2, 4)] == 16
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    with Context(NOOPT=1): assert len(loop_sizes(spec_of(a @ b).uops)) == 3

  def test_row_sum_not_upcast(self, single_core):
    # x.sum(axis=1): the 4 lanes would read 4 different rows, no load is shared as a vector: no upcast. The scheduler's 4 reduce
    # lanes read consecutive elements: one vector load
    x = Tensor(rand((64, 64))).realize()
    uops = spec_of(x.sum(axis=1)).uops
    assert loop_sizes(uops) == [64, 16] and register_sizes(uops) == [1] and vector_accesses(uops) == {("LOAD", 1, 4): 1}
    # x.sum(axis=0): the lanes read 4 consecutive columns, and with no other output loop 16 columns (a 64-byte line of each row)
    uops = spec_of(x.sum(axis=0)).uops
    assert loop_sizes(uops) == [4, 16] and register_sizes(uops) == [16] and vector_accesses(uops)[("LOAD", 1, 4)] == 16
    np.testing.assert_allclose(x.sum(axis=1).numpy(), x.numpy().sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.sum(axis=0).numpy(), x.numpy().sum(axis=0), rtol=1e-5, atol=1e-5)

  def test_dot_tile_vector_accumulators(self, single_core):
    # x @ w.T: both operands read along the reduce's 4 lanes. A 4x4 tile of dot products, each one 4-lane accumulator (16 vector
    # multiply-adds a step, no scalar lanes for clang to pair up: set to 0, loaded and stored in the loop), its lanes summed once after
    # the loop, read as the accumulator's elements; the op count counts every lane of a vector op
    x, w = Tensor(rand((32, 64))).realize(), Tensor(rand((48, 64), seed=1)).realize()
    spec = spec_of(x @ w.T)
    assert loop_sizes(spec.uops) == [8, 12, 16] and register_sizes(spec.uops) == [64]
    acc = accesses(spec.uops)
    assert acc[("LOAD", "reg", 4)] == 16 and acc[("STORE", "reg", 4)] == 32   # the 16 accumulators: set, then updated in the loop
    assert acc[("LOAD", "reg", 1)] == 64                                      # and each lane read once after it
    # an update reads its accumulator where it adds to it, never through a named copy of the vector
    assert not [ln for ln in spec.src.splitlines() if ln.strip().startswith("float4 ") and "*((float4*)(acc" in ln]
    assert spec.estimates.ops == 2 * 32 * 48 * 64 + 3 * 32 * 48  # and 3 adds of each output's lanes
    np.testing.assert_allclose((x @ w.T).numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-4)

  def test_inner_dim_of_4(self, single_core):
    # the output column loop of exactly 4 disappears in the upcast; the row loop is not upcast (no load shared by the rows)
    x = Tensor(rand((64, 40, 4))).realize()
    uops = spec_of(x.sum(axis=1)).uops
    assert loop_sizes(uops) == [64, 10] and register_sizes(uops) == [4]
    np.testing.assert_allclose(x.sum(axis=1).numpy(), x.numpy().sum(axis=1), rtol=1e-5, atol=1e-5)
    # a matmul with 4 output columns: its row loop is upcast, B's row still shared
    a, b = Tensor(rand((16, 40))).realize(), Tensor(rand((40, 4), seed=1)).realize()
    uops = spec_of(a @ b).uops
    assert loop_sizes(uops) == [4, 10] and register_sizes(uops) == [16]
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-4)

  def test_unroll_small_reduce(self, single_core):
    x = Tensor(rand((3, 7))).realize()
    uops = spec_of(x.max(axis=1)).uops
    assert loop_sizes(uops) == [3] and register_sizes(uops) == []   # the reduce of 7 unrolled: no loop, no accumulator
    with Context(NOOPT=1): assert loop_sizes(spec_of(x.max(axis=1)).uops) == [3, 7]
    np.testing.assert_array_equal(x.max(axis=1).numpy(), x.numpy().max(axis=1))

  def test_half_matmul_vector_loads_only_in_the_sum(self, single_core):
    # half values have no vector type of their own: the only vector load is the sum's 16 consecutive halves of a's row, as a vector
    # of their bits (packed_vector_loads); b's strided column stays scalar and the kernel is not upcast
    a, b = Tensor(rand((8, 32), np.float16)).realize(), Tensor(rand((32, 8), np.float16, seed=1)).realize()
    assert vector_accesses(spec_of(a @ b).uops) == {("LOAD", 1, 16): 1}
    np.testing.assert_allclose((a @ b).numpy(), a.numpy().astype(np.float32) @ b.numpy().astype(np.float32), rtol=2e-2, atol=5e-2)

  def test_dtype_of_matmul(self):
    a = Tensor(rand((4, 8), np.int32)).realize()
    assert (a @ a.T).dtype == dtypes.int32
