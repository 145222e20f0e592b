# SPEC=1 on real programs: every stage (tensor graph, kernel AST, lowered kernel, linear program) of elementwise, reduce, movement
# and matmul programs passes the written spec (tinygrad/uop/spec.py), and a corrupted stage raises naming that stage.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp
import tinygrad.uop.spec as spec
import tinygrad.schedule as schedule
import tinygrad.renderer as renderer
import tinygrad.codegen.lower as codegen_lower
import tinygrad.engine.realize as realize

pytestmark = pytest.mark.cpu

STAGES = ("tensor graph", "kernel AST", "lowered kernel", "linear program")

@pytest.fixture
def checked(monkeypatch):
  """Records the stage of every spec check the pipeline makes (the hooks import the verifiers at call time), with a fresh schedule
  and compile cache so every graph is scheduled and every kernel lowered again (an earlier test may have built the same graph)."""
  seen: list[str] = []
  tv, vl = spec.type_verify, renderer.verify_linear
  def type_verify(u, s, stage):
    seen.append(stage)
    return tv(u, s, stage)
  def verify_linear(uops, stage):  # the linear program: the renderer's contract (its walk and spec_linear)
    seen.append(stage)
    return vl(uops, stage)
  monkeypatch.setattr(spec, "type_verify", type_verify)
  monkeypatch.setattr(renderer, "verify_linear", verify_linear)
  monkeypatch.setattr(realize, "_specs", {})
  monkeypatch.setattr(schedule, "schedule_cache", type(schedule.schedule_cache)())
  return seen

def run(t:Tensor, seen:list[str]) -> np.ndarray:
  with Context(SPEC=1): ret = t.numpy()
  for st in STAGES: assert any(s.startswith(st) for s in seen), f"stage {st!r} was not checked, saw {seen}"
  return ret

@pytest.fixture
def x(): return np.arange(24, dtype=np.float32).reshape(4, 6) / 7 - 1

class TestRealProgramsPass:
  def test_elementwise(self, checked, x):
    t = Tensor(x)
    got = run(((t * t * 2 + 1).sqrt().exp2() - t.sin()).maximum(0.5) / 3, checked)
    np.testing.assert_allclose(got, np.maximum(np.exp2(np.sqrt(x * x * 2 + 1)) - np.sin(x), 0.5) / 3, rtol=1e-5)

  def test_mixed_dtypes_and_where(self, checked, x):
    t = Tensor(x)
    i = Tensor(np.arange(24, dtype=np.int32).reshape(4, 6))
    got = run((i * 3 - 10 < 3).where(t, i.cast(dtypes.float16)) + (i ^ 3).cast(dtypes.float32) + i.cast(dtypes.uint8).bitcast(dtypes.int8), checked)
    ii = np.arange(24, dtype=np.int32).reshape(4, 6)
    ref = np.where(ii * 3 - 10 < 3, x, ii.astype(np.float16)) + (ii ^ 3).astype(np.float32) + ii.astype(np.uint8).view(np.int8)
    np.testing.assert_allclose(got, ref, rtol=1e-3)

  def test_bool_ops(self, checked, x):
    t = Tensor(x)
    got = run(((t > 0) & (t < 1)) | (t == 0), checked)
    np.testing.assert_equal(got, ((x > 0) & (x < 1)) | (x == 0))

  def test_reduce(self, checked, x):
    t = Tensor(x)
    got = run(t.sum(1) + t.max(0)[:4] - t.mean(), checked)
    np.testing.assert_allclose(got, x.sum(1) + x.max(0)[:4] - x.mean(), rtol=1e-5, atol=1e-6)

  def test_int_and_bool_reduce(self, checked):
    a = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    t = Tensor(a)
    np.testing.assert_equal(run(t.sum(0) * t.prod(1).max() + (t > 0).sum(), checked), a.sum(0) * a.prod(1).max() + (a > 0).sum())

  def test_movement(self, checked, x):
    t = Tensor(x)
    got = run(t.permute(1, 0).flip(0).pad(((1, 2), (0, 1)))[::2, 1:].reshape(-1).expand(2, -1) + 1, checked)
    ref = np.pad(x.T[::-1], ((1, 2), (0, 1)))[::2, 1:].reshape(-1)[None].repeat(2, 0) + 1
    np.testing.assert_allclose(got, ref)

  def test_cat_stack(self, checked, x):
    t = Tensor(x)
    np.testing.assert_allclose(run(Tensor.stack(t, t * 2).cat(t[None], dim=0), checked), np.concatenate([np.stack([x, x * 2]), x[None]]))

  def test_matmul(self, checked):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    np.testing.assert_allclose(run(Tensor(a) @ Tensor(b), checked), a @ b, rtol=1e-5, atol=1e-5)

  def test_softmax(self, checked, x):
    t = Tensor(x)
    m = t - t.max(1, keepdim=True)
    e = m.exp()
    got = run(e / e.sum(1, keepdim=True), checked)
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got, ref / ref.sum(1, keepdims=True), rtol=1e-5)

  def test_spec_0_checks_nothing(self, checked, x):
    with Context(SPEC=0): Tensor(x).add(1).sum().numpy()
    assert checked == []

# ***** corrupted stages raise, naming the stage *****

class TestCorruptedStagesRaise:
  def test_tensor_graph(self, checked, x):
    t = Tensor(x)
    bad = Tensor(UOp(Ops.ADD, dtypes.float, (t.uop, t.cast(dtypes.int32).uop)))  # operands of two dtypes
    with Context(SPEC=1), pytest.raises(RuntimeError, match=r"SPEC: the tensor graph is invalid at UOp \d+: Ops.ADD dtypes.float"):
      bad.realize()

  def test_kernel_ast(self, checked, x, monkeypatch):
    build = schedule.best_kernel
    def corrupt(*args):
      ast, ctx = build(*args)
      st = ast.src[0]
      return ast.replace(src=(st.replace(src=(st.src[0], st.src[1].cast(dtypes.int32))),)), ctx  # stores an int into a float buffer
    monkeypatch.setattr(schedule, "best_kernel", corrupt)
    with Context(SPEC=1), pytest.raises(RuntimeError, match=r"SPEC: the kernel AST of E_\w+ is invalid at UOp \d+: Ops.STORE dtypes.void"):
      (Tensor(x) + 1).realize()

  def test_lowered_kernel(self, checked, x, monkeypatch):
    # the REDUCE is never lowered to an accumulator: the pass is left out of the codegen's list
    monkeypatch.setattr(codegen_lower, "PASSES", [p for p in codegen_lower.PASSES if p.name != "reduce to accumulator"])
    # NOOPT: the 6-element reduce would otherwise be unrolled away before lowering
    msg = r"SPEC: the lowered kernel r_\w+ is invalid at UOp \d+: Ops.REDUCE .*matches no rule"
    with Context(SPEC=1, NOOPT=1), pytest.raises(RuntimeError, match=msg):
      Tensor(x).sum(1).realize()

  def test_linear_program(self, checked, x, monkeypatch):
    linearize = codegen_lower.linearize
    def swapped(sink):
      uops = linearize(sink)
      i = next(i for i, u in enumerate(uops) if u.op is Ops.LOAD)
      uops[i - 1], uops[i] = uops[i], uops[i - 1]  # a LOAD before its INDEX
      return uops
    monkeypatch.setattr(codegen_lower, "linearize", swapped)
    with Context(SPEC=1), pytest.raises(RuntimeError, match=r"SPEC: the linear program of E_\w+ is invalid: uop \d+ \(Ops.LOAD"):
      (Tensor(x) * 3).realize()

  def test_linear_program_dtypes(self, checked, x, monkeypatch):
    linearize = codegen_lower.linearize
    def retyped(sink):  # the float MUL claims to be an int: only the dtype rules of spec_linear can see that
      muls = [u for u in sink.toposort() if u.op is Ops.MUL and u.dtype is dtypes.float]
      return linearize(sink.substitute({u: u.replace(dtype=dtypes.int32) for u in muls}))
    monkeypatch.setattr(codegen_lower, "linearize", retyped)
    with Context(SPEC=1), pytest.raises(RuntimeError, match=r"SPEC: the linear program of E_\w+ is invalid: uop \d+ \(Ops.MUL, dtypes.int\)"):
      (Tensor(x) * 3).realize()
