"""Opt(CHAIN) (codegen pm_fuse_mulacc _chain): a reduce's unrolled products accumulate as a chain of fused multiply-adds, and the
4 x 32 packed matmul tile with it that a BEAM search starts from (heuristic.py tile_family); numerics against numpy, CPU == PYTHON."""
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, Device
from tinygrad.uop.ops import Ops
from tinygrad.uop.spec import vector_width
from tinygrad.codegen.opt import heuristic as H
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, apply_opts
from tinygrad.codegen.opt.search import lower_candidate
from tinygrad.renderer import Renderer
from tests.helpers.kernels import ast_of, rand

@pytest.fixture
def small_tiles(monkeypatch):
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)   # tile these small kernels too

def _run(ast, opts, bufs, device:str) -> tuple[np.ndarray, tuple]:
  spec = lower_candidate(ast, opts, Device[device].renderer)
  Device[device].run(spec, bufs)
  return bufs[0].numpy(), spec.uops

def _chained(ast):
  return H.hand_coded_optimizations(ast, 2, True, *H.TILE_FAMILY_CHAINED, chain=True)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m,k,n", [(16, 64, 64), (8, 40, 96), (12, 128, 64)])
def test_chained_tile_matches_numpy(device, m, k, n, small_tiles):
  a, b = rand(m, k), rand(k, n, seed=1)
  ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
  opt = _chained(ast)
  # 4 rows x 2 x 16 columns, the column blocks outside, CHAIN then the panel PACK
  assert [o.op for o in opt.arg.applied_opts] == [*[OptOps.UPCAST] * 3, OptOps.SWAP, OptOps.CHAIN, OptOps.PACK]   # too small to thread
  assert [o.arg for o in opt.arg.applied_opts if o.op is OptOps.UPCAST] == [16, 2, 4]
  assert apply_opts(ast, opt.arg.applied_opts) is opt   # the recorded opts rebuild it (what a BEAM worker does)
  out, uops = _run(ast, opt.arg.applied_opts, bufs, device)
  np.testing.assert_allclose(out.reshape(m, n), a @ b, rtol=1e-4, atol=1e-4)
  if device == "CPU": assert any(u.op is Ops.MULACC for u in uops)   # the chained accumulators are fused multiply-adds

@pytest.mark.cpu
@pytest.mark.parametrize("chain", [False, True])
def test_chain_is_a_fused_chain_and_same_bits_on_cpu_and_python(chain, small_tiles):
  a, b = rand(8, 64), rand(64, 64, seed=1)
  outs = []
  for device in ("CPU", "PYTHON"):
    ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
    opts = list(_chained(ast).arg.applied_opts)
    if not chain: opts.remove(Opt(OptOps.CHAIN))
    spec = lower_candidate(ast, opts, Device[device].renderer)
    from tinygrad.codegen import lower_ast
    uops = lower_ast(ast, Device[device].renderer, opts=tuple(opts)).uops
    # chained: every product of the 4 UNROLL lanes is a MULACC lane (4 per accumulator, 4 x 32 accumulators; on CPU vector MULACCs of
    # 16 lanes); unchained: none (an outer product tile stays a multiply and an add)
    widths: dict = {}
    assert sum(vector_width(u, widths) for u in uops if u.op is Ops.MULACC) == (4 * 4 * 32 if chain else 0)
    Device[device].run(spec, bufs)
    outs.append(bufs[0].numpy())
  np.testing.assert_array_equal(outs[0], outs[1])
  np.testing.assert_allclose(outs[0].reshape(8, 64), a @ b, rtol=1e-4, atol=1e-4)

@pytest.mark.cpu
def test_chain_order():
  # the products accumulate left to right, each rounded once: 1 then seven times 2**-24 (each a tie, rounded to even: stays 1). The
  # tree of the scheduler's 4 UNROLL lanes adds the small ones first, so they count: 1 + 3 * 2**-23
  e = 2.0 ** -24
  a, b = np.array([[1.0] + [e] * 7], dtype=np.float32), np.ones((8, 16), dtype=np.float32)   # B's columns: no dot tile
  for device in ("CPU", "PYTHON"):
    ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
    out_tree, _ = _run(ast, (), bufs, device)
    out_chain, _ = _run(ast, (Opt(OptOps.CHAIN),), bufs, device)
    assert (out_tree == np.float32(1 + 3 * 2.0 ** -23)).all() and (out_chain == np.float32(1.0)).all(), (device, out_tree, out_chain)

def test_chain_errors():
  ew, _ = ast_of(Tensor(rand(8, 64), device="PYTHON") + 1)
  with pytest.raises(KernelOptError, match="no UNROLL lanes"): apply_opt(ew, Opt(OptOps.CHAIN))
  a, b = rand(8, 64), rand(64, 32, seed=1)
  up, _ = ast_of(Tensor(a, device="PYTHON").realize() @ Tensor(b, device="PYTHON").realize())   # the scheduler's UNROLL lanes
  twice = apply_opt(up, Opt(OptOps.CHAIN))[0]
  with pytest.raises(KernelOptError, match="applied already"): apply_opt(twice, Opt(OptOps.CHAIN))
  class NoFma(Renderer): fused_mulacc = False
  with pytest.raises(KernelOptError, match="fused_mulacc=False"): apply_opt(up, Opt(OptOps.CHAIN), NoFma())

def test_beam_starts_from_the_chained_tile(small_tiles):
  a, b = rand(16, 64), rand(64, 64, seed=1)
  ast, _ = ast_of(Tensor(a, device="CPU").realize() @ Tensor(b, device="CPU").realize())
  family = H.tile_family(ast, Device["CPU"].renderer)
  assert any(k.arg.applied_opts == _chained(ast).arg.applied_opts for k in family)
  class NoFma(type(Device["CPU"].renderer)): fused_mulacc = False
  assert not any(OptOps.CHAIN in {o.op for o in k.arg.applied_opts} for k in H.tile_family(ast, NoFma()))
