"""The CPU heuristic's register tiles (codegen/opt/heuristic.py register_tile) and the loop swap (Opt SWAP) and packing (Opt PACK) they use:
the shapes they make and their numerics against numpy on every device."""
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor
from tinygrad.uop.ops import AxisType, Ops
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt import heuristic as H
from tinygrad.codegen.opt import kernel as K
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opts
from tests.helpers.kernels import ast_of, run, kinds, rand
from tinygrad.codegen import split_ranges as S


L, R, T, U, N = AxisType.LOOP, AxisType.REDUCE, AxisType.THREAD, AxisType.UPCAST, AxisType.UNROLL

@pytest.fixture
def small_tiles(monkeypatch):
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)   # tile these small kernels too
  monkeypatch.setattr(H, "TILE_DOT_MIN_WORK", 1)

@pytest.mark.parametrize("device", DEVICES)
def test_matmul_tile(device, small_tiles):
  a, b = rand(16, 32), rand(32, 32, seed=1)
  ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
  opt = H.hand_coded_optimizations(ast, threads=1)
  # 8 rows x 16 columns per loop step: each B vector (16 lanes) serves 8 rows; the column blocks outside the row blocks, each one's
  # 32 x 16 panel of B packed (the copy's loops: the reduce's 8 x 4, then the 16 columns)
  assert kinds(opt) == [(L, 2), (U, 8), (L, 2), (U, 16), (R, 8), (N, 4), (R, 8), (R, 4), (R, 16)]
  assert opt.arg.applied_opts == (Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.SWAP, 1, 0), Opt(OptOps.PACK, 0, 0))
  np.testing.assert_allclose(run(opt, bufs, device).reshape(16, 32), a @ b, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_matmul_tile_big_panel(device, small_tiles, monkeypatch):
  monkeypatch.setattr(H, "TILE_PANEL_BYTES", 0)   # B "too big for the caches": 32 columns, the column blocks outside the row blocks
  monkeypatch.setattr(K, "PACK_MAX_BYTES", 0)     # where its panels are too big to pack
  a, b = rand(24, 64), rand(64, 64, seed=1)
  ast, bufs = ast_of(Tensor(a, device=device).realize() @ Tensor(b, device=device).realize())
  opt = H.hand_coded_optimizations(ast, threads=1)
  # the loops: 2 column blocks (of 2x16 lanes) outside, 3 row blocks (of 8 lanes) inside
  assert kinds(opt) == [(L, 2), (U, 8), (L, 3), (U, 2), (U, 16), (R, 16), (N, 4)]
  assert opt.arg.applied_opts[-1] == Opt(OptOps.SWAP, 1, 0)
  assert apply_opts(ast, opt.arg.applied_opts) is opt   # the recorded opts rebuild the same kernel (what a BEAM worker does)
  np.testing.assert_allclose(run(opt, bufs, device).reshape(24, 64), a @ b, rtol=1e-5, atol=1e-5)

def _np_conv_pad1(x, w):
  sliding = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
  return np.einsum("nchwij,ocij->nohw", sliding, w)

def assert_vector_input_load(opt):
  uops = lower_ast(opt).uops
  assert [u for u in uops if u.op is Ops.LOAD and u.src[0].op is Ops.SHRINK and u.src[0].src[0].arg.slot == 1], "no vector load of the input"

def conv_tiled(device, x, w, **kw):
  """The conv of x and w as a kernel AST, its buffers, and the AST the heuristics give it on one thread."""
  ast, bufs = ast_of(Tensor(x, device=device).realize().conv2d(Tensor(w, device=device).realize(), **kw))
  return ast, bufs, H.hand_coded_optimizations(ast, threads=1)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width", [24, 48])
def test_conv_peeled_tile(device, width, small_tiles, monkeypatch):
  monkeypatch.setattr(S, "SPLIT_REDUCE_MIN_WORK", 1)
  x, w = rand(1, 4, 6, width), rand(32, 4, 3, 3, seed=1)
  ast, bufs, opt = conv_tiled(device, x, w, padding=1)
  # the padded input's loads are gated only by the border, which split_ranges peels: the interior reads the columns' lanes as vectors,
  # each serving 128 / lanes output channels; the 3x3 window stays a loop (no UNROLL)
  assert [(k, s) for k, s in kinds(opt) if k is U] == ([(U, 16), (U, 8)] if width == 24 else [(U, 8), (U, 16)])
  assert not [o for o in opt.arg.applied_opts if o.op is OptOps.UNROLL]
  assert_vector_input_load(opt)
  np.testing.assert_allclose(run(opt, bufs, device).reshape(1, 32, 6, width), _np_conv_pad1(x, w), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width", [8, 16])
def test_conv_gather_tile(device, width, monkeypatch):
  monkeypatch.setattr(H, "GATHER_MIN_WORK", 1)
  x, w = rand(1, 4, 4, width), rand(32, 4, 3, 3, seed=1)
  ast, bufs, opt = conv_tiled(device, x, w, padding=1)
  # the padded input's loads are gated (no vector load): 8 output columns, each gathered input vector serving 16 output channels;
  # the 3x3 window stays a loop
  assert [(k, s) for k, s in kinds(opt) if k is U] == [(U, 16), (U, 8)] and not [o for o in opt.arg.applied_opts if o.op is OptOps.UNROLL]
  np.testing.assert_allclose(run(opt, bufs, device).reshape(1, 32, 4, width), _np_conv_pad1(x, w), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width", [12, 28])
def test_conv_peeled_tile_4_lanes(device, width, small_tiles, monkeypatch):
  # a row of a multiple of 4 columns but not of 8 (a 28x28 image): 4 columns (float4 loads) x 16 output channels, the same peeled split
  monkeypatch.setattr(S, "SPLIT_REDUCE_MIN_WORK", 1)
  x, w = rand(2, 3, 5, width), rand(32, 3, 3, 3, seed=1)
  ast, bufs, opt = conv_tiled(device, x, w, padding=1)
  assert [(k, s) for k, s in kinds(opt) if k is U] == [(U, 16), (U, 4)] and not [o for o in opt.arg.applied_opts if o.op is OptOps.UNROLL]
  assert apply_opts(ast, opt.arg.applied_opts) is opt
  assert_vector_input_load(opt)
  np.testing.assert_allclose(run(opt, bufs, device).reshape(2, 32, 5, width), _np_conv_pad1(x, w), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,kw,lanes", [((1, 4, 6, 40), dict(padding=1, stride=2), 4), ((1, 2, 9, 56), dict(padding=1, stride=(1, 2)), 4),
                                            ((2, 3, 6, 6), dict(padding=1), 2), ((1, 2, 5, 14), dict(padding=1), 2)])
def test_conv_gather_tile_4_and_2_lanes(device, shape, kw, lanes, monkeypatch):
  # output rows of a multiple of 4 columns but not of 8, longer than image_tile's (a stride-2 conv to 20 or 28 columns): 4 gathered
  # columns x 16 channels; rows of an even number of columns that image_tile doesn't take either (6, 14): 2 columns
  from tests.helpers.numpy_ref import np_conv
  monkeypatch.setattr(H, "GATHER_MIN_WORK", 1)
  x, w = rand(*shape), rand(32, shape[1], 3, 3, seed=1)
  ast, bufs, opt = conv_tiled(device, x, w, **kw)
  assert [(k, s) for k, s in kinds(opt) if k is U] == [(U, 16), (U, lanes)] and not [o for o in opt.arg.applied_opts if o.op is OptOps.UNROLL]
  assert apply_opts(ast, opt.arg.applied_opts) is opt
  pad, stride = kw["padding"], kw.get("stride", 1)
  pads = [(pad, pad)] * 2 if isinstance(pad, int) else [(p, p) for p in pad]
  ref = np_conv(x, w, 1, stride, 1, pads)
  np.testing.assert_allclose(run(opt, bufs, device).reshape(ref.shape), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("threads", [1, 2])
def test_conv_tiles_are_valid_opts(threads, small_tiles, monkeypatch):
  # the conv tiles' choices over widths 4..64, channel counts, strides and paddings: every kernel the heuristic returns is rebuilt by
  # its recorded opts (apply_opts raises KernelOptError on an invalid one), and its upcasts are within the vector widths
  monkeypatch.setattr(H, "GATHER_MIN_WORK", 1)
  seen = set()
  for width in (4, 6, 8, 12, 20, 24, 28, 32, 56, 64):
    for cout, stride, pad in ((16, 1, 1), (32, 2, 1), (8, 1, 2), (48, 1, 0)):
      ast, _ = ast_of(Tensor.empty(2, 3, 7, width).conv2d(Tensor.empty(cout, 3, 3, 3), padding=pad, stride=stride))
      opt = H.hand_coded_optimizations(ast, threads=threads)
      assert apply_opts(ast, opt.arg.applied_opts) is opt
      assert all(s <= 16 for k, s in kinds(opt) if k is U)
      seen.add(tuple(s for k, s in kinds(opt) if k is U))
  assert {(16, 4), (16, 8), (16, 2)} <= seen and len(seen) > 3

def test_small_kernels_keep_the_4x4_upcast():
  ast, _ = ast_of(Tensor(rand(16, 32), device="PYTHON").realize() @ Tensor(rand(32, 32, seed=1), device="PYTHON").realize())
  assert [s for k, s in kinds(H.hand_coded_optimizations(ast, threads=1)) if k is U] == [4, 4]

@pytest.mark.cpu
def test_unpadded_conv_backward_tiles():
  # tinygrad's MNIST conv (5x5, no padding, relu after): its weight gradient and its input gradient's per-tap products each get the
  # inner tap as lanes and a second upcast or unroll of 4 (they were scalar loops, 8x slower than the forward); the forward gets
  # channel_tile's 16 output channels x 5 pixels
  from tests.helpers.numpy_ref import np_conv
  xn, wn = rand(48, 32, 24, 24), rand(32, 32, 5, 5, seed=1)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  x.conv2d(w).relu().sum().backward()
  kernels = [si for si in Tensor.schedule(x.grad, w.grad)[0] if si.ast.op is Ops.SINK]
  lanes = [[s for k, s in kinds(H.hand_coded_optimizations(si.ast, threads=2)) if k in (U, N)] for si in kernels]
  assert lanes[0] == [16, 5] and sum(1 for ls in lanes[1:] if 5 in ls and 4 in ls) == 2, lanes  # the input gradient's products, weight gradient
  y = np_conv(xn, wn, 1, 1, 1, [(0, 0), (0, 0)])
  gy = (y > 0).astype(np.float32)
  wg = np.stack([np.tensordot(gy, xn[:, :, i:i+20, j:j+20], axes=([0, 2, 3], [0, 2, 3])) for i in range(5) for j in range(5)], -1)
  xg = np_conv(gy, wn[:, :, ::-1, ::-1].transpose(1, 0, 2, 3).copy(), 1, 1, 1, [(4, 4), (4, 4)])
  np.testing.assert_allclose(w.grad.numpy(), wg.reshape(32, 32, 5, 5), rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(x.grad.numpy(), xg, rtol=1e-3, atol=1e-3)

@pytest.mark.parametrize("m,k,n", [(128, 768, 768), (64, 768, 768), (256, 256, 256)])
def test_bert_sized_matmuls_get_the_register_tile(m, k, n):
  # from TILE_MIN_WORK multiply-adds (a BERT layer's projections at sequence 128 and below): 8 rows x 16 columns, B's panel packed
  ast, _ = ast_of(Tensor.empty(m, k) @ Tensor.empty(k, n))
  opt = H.hand_coded_optimizations(ast, threads=2)
  assert sorted(s for kind, s in kinds(opt) if kind is U) == [8, 16] and opt.arg.applied_opts[-1].op is OptOps.PACK

def _gelu_linear(x:Tensor, w:Tensor, b:Tensor) -> Tensor:
  h = x @ w + b
  return h * ((h * (1 / np.sqrt(2))).erf() + 1) * 0.5

@pytest.mark.parametrize("device", DEVICES)
def test_tile_with_a_long_epilogue_gets_fewer_rows(device, small_tiles):
  # a linear layer with gelu (erf's polynomials: about 60 ops a lane) after the tile: 8 rows x 16 lanes pass the code-size budget,
  # fewer rows keep the packed tile (it was the 4x4 upcast, 8x slower at 128x768x3072)
  x, w, b = rand(16, 64), rand(64, 64, seed=1), rand(64, seed=2)
  ast, bufs = ast_of(_gelu_linear(*(Tensor(a, device=device).realize() for a in (x, w, b))))
  opt = H.hand_coded_optimizations(ast, threads=1)
  ups = sorted(s for kind, s in kinds(opt) if kind is U)
  assert ups[-1] == 16 and ups[0] in H.TILE_BUDGET_ROWS and opt.arg.applied_opts[-1].op is OptOps.PACK
  h = x @ w + b
  want = h * (np.vectorize(__import__("math").erf)(h / np.sqrt(2)) + 1) * 0.5
  np.testing.assert_allclose(run(opt, bufs, device).reshape(16, 64), want, rtol=1e-4, atol=1e-4)
