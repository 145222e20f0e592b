# Tensor cores without a GPU: DEV=PYTHON::sm_80 gives the PYTHON device CUDA's tensor cores, emulated (the warp's fragments gathered in
# local memory between barriers, tinygrad/renderer/tc.py), so kernels lowered with Opt(TC) run with the same fragment layout as
# mma.sync.m16n8k16 and are checked against numpy: fp16/bf16 inputs, fp32 accumulation, with the opts the heuristics add after TC,
# padding of M, N and K (tc_opt=2), several K steps, an epilogue, and through the Tensor API.
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import Context
from tinygrad.uop import Ops
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opts
import tinygrad.engine.realize as realize

DEV = "PYTHON::sm_80"
NP = {dtypes.half: np.float16, dtypes.bfloat16: None}

@pytest.fixture(autouse=True)
def _emulated_cuda():
  with Context(DEV=DEV): yield

def _inputs(m:int, k:int, n:int, dt, seed:int=0):
  """Random A (m, k) and B (k, n) that dt holds exactly, as float32 arrays and as Tensors of dt."""
  rng = np.random.default_rng(seed)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  ta, tb = Tensor(a).cast(dt).realize(), Tensor(b).cast(dt).realize()
  return ta.float().numpy(), tb.float().numpy(), ta, tb   # the values dt rounded them to

def _run(t:Tensor, opts:list[Opt]):
  """Realizes t's last kernel with exactly `opts` (the kernels before it as usual); the ProgramSpec and the output as numpy."""
  items, _ = t.schedule()
  for si in items[:-1]: realize.run_schedule([si])
  ren = Device["PYTHON"].renderer
  spec = get_program(apply_opts(items[-1].ast, opts, ren), ren)
  Device["PYTHON"].run(spec, items[-1].bufs)
  return spec, items[-1].bufs[0].numpy()

def _tol(k:int) -> dict: return {"rtol": 1e-5, "atol": 1e-5 * k}   # float32 sums of exact products, in another order

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
@pytest.mark.parametrize("m,k,n,opts", [
  (16, 16, 8, []),                                                     # one instruction
  (32, 48, 16, []),                                                    # three K steps, 2 x 2 blocks
  (64, 32, 48, [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UPCAST, 1, 3)]),   # each warp 2 M blocks x 3 N blocks
  (32, 32, 64, [Opt(OptOps.LOCAL, 1, 2), Opt(OptOps.UNROLL, 0, 2)]),    # 2 warps a workgroup, 2 K steps per loop iteration
])
def test_tc_matmul(dt, m, k, n, opts):
  a, b, ta, tb = _inputs(m, k, n, dt)
  spec, out = _run(ta.matmul(tb, dtype=dtypes.float), [Opt(OptOps.TC, 0, (-1, 0, 1)), *opts])
  assert any(u.op is Ops.WMMA and u.arg.dtype_in is dt for u in spec.uops)
  assert spec.local_size[0] % 32 == 0
  np.testing.assert_allclose(out.reshape(m, n), a @ b, **_tol(k))

@pytest.mark.parametrize("m,k,n", [(24, 32, 12), (32, 40, 16), (20, 6, 12)])
def test_tc_opt_2_pads(m, k, n):
  a, b, ta, tb = _inputs(m, k, n, dtypes.half, seed=1)
  spec, out = _run(ta.matmul(tb, dtype=dtypes.float), [Opt(OptOps.TC, 0, (-1, 2, 1))])
  assert any(u.op is Ops.WMMA for u in spec.uops)
  np.testing.assert_allclose(out.reshape(m, n), a @ b, **_tol(k))

def test_tc_batched_matmul_with_an_epilogue():
  # a batch dim outside the instruction, the half result of (x @ w + bias).relu(): the epilogue reads at the C layout's coordinates
  rng = np.random.default_rng(2)
  x = rng.standard_normal((2, 16, 32)).astype(np.float16)
  w = rng.standard_normal((32, 16)).astype(np.float16)
  bias = rng.standard_normal(16).astype(np.float16)
  t = ((Tensor(x) @ Tensor(w)) + Tensor(bias)).relu()
  spec, out = _run(t, [Opt(OptOps.TC, 0, (-1, 0, 1))])
  assert any(u.op is Ops.WMMA for u in spec.uops)
  want = np.maximum(x.astype(np.float32) @ w.astype(np.float32) + bias.astype(np.float32), 0)
  np.testing.assert_allclose(out.reshape(2, 16, 16).astype(np.float32), want, rtol=2e-3, atol=2e-2)

@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_heuristics_use_tensor_cores_through_the_tensor_api(dt):
  a, b, ta, tb = _inputs(64, 64, 64, dt, seed=3)
  before = set(realize._specs)
  out = ta.matmul(tb, dtype=dtypes.float).numpy()
  new = [s for key, s in realize._specs.items() if key not in before]
  assert any(s.applied_opts and s.applied_opts[0].op is OptOps.TC for s in new)
  np.testing.assert_allclose(out, a @ b, **_tol(64))
  # the default half/bf16 result (sum in float32, rounded to dt once)
  np.testing.assert_allclose((ta @ tb).float().numpy(), a @ b, rtol=1e-2, atol=1e-1)

def test_no_tensor_cores_without_the_arch():
  with Context(DEV="PYTHON"): assert Device["PYTHON"].renderer.tensor_cores == [] and not Device["PYTHON"].renderer.has_local
  ren = Device["PYTHON"].renderer
  assert [tc.dtype_in for tc in ren.tensor_cores] == [dtypes.half, dtypes.bfloat16] and ren.has_local and ren.has_shared

def test_beam_with_tensor_core_candidates():
  # BEAM's TC candidates of a half matmul (the actions on the unoptimized kernel) go through its compile path (worker processes), and a
  # search, which starts from the heuristics' TC kernel, keeps a right one
  import tinygrad.codegen.opt.search as search
  a, b, ta, tb = _inputs(16, 32, 16, dtypes.half, seed=4)
  t = ta.matmul(tb, dtype=dtypes.float)
  ast, ren = t.schedule()[0][-1].ast, Device["PYTHON"].renderer
  tcs = [(o,) for o in search.kernel_actions(ast, ren) if o.op is OptOps.TC]
  compiled = search._compile_all(ast, tcs, ren)
  assert tcs and len(compiled) == len(tcs) and all("_wmma(" in spec.src for spec, _, _ in compiled.values())
  with Context(BEAM=2, IGNORE_BEAM_CACHE=1): out = t.numpy()
  np.testing.assert_allclose(out, a @ b, **_tol(32))

def test_half_linear_backward_on_tensor_cores():
  # the forward matmul and both gradient matmuls of a half layer go on tensor cores (their half results: tolerances of half)
  rng = np.random.default_rng(5)
  x, w = rng.standard_normal((32, 64)).astype(np.float16), rng.standard_normal((64, 48)).astype(np.float16)
  tx, tw = Tensor(x).requires_grad_(), Tensor(w).requires_grad_()
  before = set(realize._specs)
  with Context(TRAINING=1):
    (tx @ tw).relu().sum().backward()
  gx, gw = tx.grad.float().numpy(), tw.grad.float().numpy()
  assert sum(1 for key, s in realize._specs.items() if key not in before and s.applied_opts and s.applied_opts[0].op is OptOps.TC) >= 2
  mask = ((x.astype(np.float32) @ w.astype(np.float32)) > 0).astype(np.float32)
  np.testing.assert_allclose(gx, mask @ w.astype(np.float32).T, rtol=1e-2, atol=2e-2)
  np.testing.assert_allclose(gw, x.astype(np.float32).T @ mask, rtol=1e-2, atol=2e-2)
