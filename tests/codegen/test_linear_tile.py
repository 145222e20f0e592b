"""x @ w.T (nn.Linear's forward): the packed register tile over a transposed panel of w, against numpy."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.codegen.opt import OptOps
from tinygrad.codegen.opt import heuristic as H
from tests.helpers.kernels import ast_of, run, rand

pytestmark = pytest.mark.cpu   # kernels compiled by the C compiler

@pytest.mark.parametrize("xs,ws", [((1024, 1024), (1024, 1024)), ((1000, 1000), (1000, 1000)), ((17, 33), (65, 33)),
                                   ((4, 128, 256), (256, 256))])
def test_linear_matches_numpy(xs, ws):
  rng = np.random.default_rng(0)
  x, w = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
  np.testing.assert_allclose((Tensor(x) @ Tensor(w).T).numpy(), x @ w.T, rtol=1e-4, atol=1e-3)

def test_dot_tile_packs_transposed_panel(monkeypatch):
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)   # tile this small kernel too
  monkeypatch.setattr(H, "TILE_DOT_MIN_WORK", 1)
  x, w = rand(16, 32), rand(32, 32, seed=1)
  ast, bufs = ast_of(Tensor(x).realize() @ Tensor(w).realize().T)
  opt = H.hand_coded_optimizations(ast, threads=1)
  assert [o.op for o in opt.arg.applied_opts] == [OptOps.UPCAST, OptOps.UPCAST, OptOps.SWAP, OptOps.PACK]
  np.testing.assert_allclose(run(opt, bufs, "CPU").reshape(16, 32), x @ w.T, rtol=1e-5, atol=1e-5)
