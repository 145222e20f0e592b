"""Opt(PACK) (codegen/opt/kernel.py _pack): a load's panel copied into a contiguous per-thread array in a loop, and the CPU heuristic's
matmul tile that packs B's column panels; numerics against numpy for odd, non-square and batched shapes."""
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor
from tinygrad.uop.ops import Ops, AxisType
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt import heuristic as H
from tinygrad.codegen.opt import kernel as K
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, apply_opts, pack_candidates, ranges_of
from tests.helpers.kernels import ast_of, run, rand

@pytest.fixture
def small_tiles(monkeypatch):
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)   # tile (and pack) these small kernels too
  monkeypatch.setattr(H, "TILE_DOT_MIN_WORK", 1)

def _packed(opt) -> bool: return any(o.op is OptOps.PACK for o in opt.arg.applied_opts)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m,k,n", [(16, 40, 48), (32, 33, 32), (48, 96, 32), (16, 64, 64)])
def test_heuristic_packs_matmul(device, m, k, n, small_tiles):
  a, b = rand(m, k), rand(k, n, seed=1)
  ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
  opt = H.hand_coded_optimizations(ast, threads=2)
  assert _packed(opt) and opt.arg.applied_opts[-2].op is OptOps.SWAP
  np.testing.assert_allclose(run(opt, bufs, device).reshape(m, n), a @ b, rtol=1e-4, atol=1e-4)
  assert apply_opts(ast, opt.arg.applied_opts) is opt   # the recorded opts rebuild it (what a BEAM worker does)

def test_copy_loop_order():
  # B's panel (K rows of 16 columns, rows a row of B apart) is copied row by row: the copy's loops by decreasing address stride
  a, b = rand(8, 64), rand(64, 32, seed=1)
  ast, _ = ast_of(Tensor(a, device="PYTHON").realize() @ Tensor(b, device="PYTHON").realize())
  up = apply_opts(ast, [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.PACK, 1, 1)])
  buf = next(u for u in up.toposort() if u.op is Ops.BUFFER)
  assert buf.arg.name == "pack" and buf.src[0].arg == 64 * 16
  copy = [r for r in ranges_of(up) if r not in ranges_of(ast) and r.arg[-1] is AxisType.REDUCE and len(r.arg) == 2]
  assert [r.src[0].arg for r in copy] == [16, 4, 16]   # the reduce's 16 x 4 (scheduler unroll), then the 16 columns
  src = lower_ast(up).uops
  assert sum(1 for u in src if u.op is Ops.END) == 3 + 3   # the copy's three loops; the output's two and the reduce's

def test_candidates():
  a, b = rand(8, 64), rand(64, 32, seed=1)
  ast, _ = ast_of(Tensor(a, device="PYTHON").realize() @ Tensor(b, device="PYTHON").realize())
  rows, cols = ranges_of(ast, AxisType.LOOP)
  # in the row loop only A's load is the same for every column; in the column loop (innermost) both
  assert [ld.src[0].src[0].arg.slot for ld in pack_candidates(ast, rows)] == [1]
  assert [ld.src[0].src[0].arg.slot for ld in pack_candidates(ast, cols)] == [1, 2]

def test_panel_size_limit(monkeypatch):
  a, b = rand(8, 64), rand(64, 32, seed=1)
  ast, _ = ast_of(Tensor(a, device="PYTHON").realize() @ Tensor(b, device="PYTHON").realize())
  monkeypatch.setattr(K, "PACK_MAX_BYTES", 64 * 4 - 1)
  with pytest.raises(KernelOptError, match="a panel of 256 bytes, more than 255"): apply_opt(ast, Opt(OptOps.PACK, 0, 0))

@pytest.mark.cpu
@pytest.mark.parametrize("shape_a,shape_b", [((1000, 1000), (1000, 1000)), ((1023, 1023), (1023, 1023)), ((2047, 64), (64, 2047)),
                                             ((96, 1024), (1024, 2000)), ((3, 160, 512), (3, 512, 96))])
def test_matmul_sizes_cpu(shape_a, shape_b, small_tiles):
  # odd, non-square and batched matmuls with the heuristics on the CPU device (a packed tile where the sizes allow one)
  a, b = rand(*shape_a), rand(*shape_b, seed=1)
  got = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
  np.testing.assert_allclose(got, a @ b, rtol=1e-3, atol=1e-3)
