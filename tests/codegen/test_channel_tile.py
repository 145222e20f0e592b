"""Convs as GEMMs on the CPU: codegen/opt/heuristic.py channel_tile (output channels as the vector lanes, their weights packed, an image
row's pixels broadcast), and register tiles whose sums stay vector accumulators under an epilogue that is not lane-wise (a conv's bias,
batchnorm and relu: codegen/expander.py). Numerics against numpy on shapes that no tile divides evenly."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import AxisType
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt import heuristic as H
from tinygrad.codegen.opt import Opt, OptOps
from tests.helpers.devices import DEVICES
from tests.helpers.kernels import ast_of, run, kinds, rand, accesses, vector_accesses
from tests.helpers.numpy_ref import np_conv

U = AxisType.UPCAST

@pytest.fixture
def small_convs(monkeypatch):
  monkeypatch.setattr(H, "GATHER_MIN_WORK", 1)   # tile these small convs as a big one is

def _relu_conv(x:Tensor, w:Tensor, b:Tensor, **kw) -> Tensor: return (x.conv2d(w, **kw) + b.reshape(1, -1, 1, 1)).relu()

def _np_relu_conv(x, w, b, stride=1, padding=0) -> np.ndarray:
  return np.maximum(np_conv(x, w, 1, stride, 1, [(padding, padding)] * 2) + b.reshape(1, -1, 1, 1), 0)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,cout,kw,lanes", [((2, 128, 7, 7), 32, dict(padding=1), 7), ((1, 64, 10, 10), 48, dict(padding=1), 5),
                                                 ((1, 32, 19, 19), 32, dict(padding=1, stride=2), 5), ((1, 40, 12, 12), 32, dict(), 5)])
def test_small_image_conv_is_a_channel_tile(device, shape, cout, kw, lanes, small_convs):
  # 16 output channels x a row's pixels per step (7 of a 7x7 image, 5 of a 10-wide row), the weights' panel packed with the
  # channels innermost; bias and relu after it. Numerics against numpy (the first call also on PYTHON, whose lanes are scalars)
  x, w, b = rand(*shape), rand(cout, shape[1], 3, 3, seed=1), rand(cout, seed=2)
  ast, bufs = ast_of(_relu_conv(Tensor(x, device=device).realize(), Tensor(w, device=device).realize(), Tensor(b, device=device).realize(), **kw))
  opt = H.hand_coded_optimizations(ast, threads=2)
  ups = sorted(s for k, s in kinds(opt) if k is U)
  assert ups == sorted([16, lanes]) and opt.arg.applied_opts[-1].op is OptOps.PACK
  want = _np_relu_conv(x, w, b, kw.get("stride", 1), kw.get("padding", 0))
  np.testing.assert_allclose(run(opt, bufs, device).reshape(want.shape), want, rtol=1e-4, atol=1e-4)

@pytest.mark.cpu
@pytest.mark.parametrize("cin,side,pixels", [(256, 7, 7), (64, 16, 8), (64, 32, 8)])
def test_channel_tile_is_vector_multiply_adds(cin, side, pixels):
  # each reduce step: one 16-lane load of packed weights and a 16-lane accumulator per pixel, the panel copied once per 16 channels
  # (the padded input's loads stay scalar: the kernel isn't peeled into pieces, each of which would copy the panel again). Also where
  # the pixels' lanes are a vector width (8 of a 16-wide row): the channels' lanes are still the vector, each pixel a broadcast
  x, w = Tensor(rand(1, cin, side, side)).realize(), Tensor(rand(64, cin, 3, 3, seed=1)).realize()
  ast, bufs = ast_of(x.conv2d(w, padding=1).relu())
  opt = H.hand_coded_optimizations(ast, threads=1)
  assert sorted(s for k, s in kinds(opt) if k is U) == sorted([16, pixels])
  uops = lower_ast(opt, "CPU").uops
  vec = vector_accesses(uops)
  assert vec[("LOAD", "reg", 16)] >= 1 and vec[("STORE", "reg", 16)] >= pixels
  assert sum(n for (op, slot, _), n in accesses(uops).items() if op == "STORE" and slot == "reg") - vec[("STORE", "reg", 16)] <= 1
  want = np.maximum(np_conv(x.numpy(), w.numpy(), 1, 1, 1, [(1, 1)] * 2), 0)
  np.testing.assert_allclose(run(opt, bufs, "CPU").reshape(want.shape), want, rtol=1e-4, atol=1e-4)

def test_few_input_channels_keep_the_gather_tile():
  # a stem conv (3 input channels of a 7x7 window: 147 per output) is below CHANNEL_MIN_REDUCE
  ast, _ = ast_of(Tensor.empty(1, 3, 224, 224).conv2d(Tensor.empty(64, 3, 7, 7), stride=2, padding=3))
  assert all(o.op is not OptOps.PACK for o in H.hand_coded_optimizations(ast, threads=2).arg.applied_opts)

@pytest.mark.cpu
def test_register_tile_sums_stay_vectors_under_relu():
  # a conv's 4 columns x 4 channels tile keeps its vector accumulators with a bias and relu after it (they were 16 scalar lanes);
  # the same bits as the PYTHON device's scalar lanes, and numpy's values
  x, w, b = rand(1, 8, 10, 10), rand(64, 8, 3, 3, seed=1), rand(64, seed=2)
  def acc_vectors(t:Tensor) -> int:
    ast, _ = ast_of(t)
    uops = lower_ast(H.hand_coded_optimizations(ast, threads=2), "CPU").uops
    return sum(n for (op, slot, _), n in vector_accesses(uops).items() if op == "STORE" and slot == "reg")
  xt, wt, bt = (Tensor(a).realize() for a in (x, w, b))
  plain = acc_vectors(xt.conv2d(wt))
  assert plain > 0 and acc_vectors(_relu_conv(xt, wt, bt)) == plain
  got = _relu_conv(xt, wt, bt).numpy()
  np.testing.assert_allclose(got, _np_relu_conv(x, w, b), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(got, _relu_conv(Tensor(x, device="PYTHON"), Tensor(w, device="PYTHON"), Tensor(b, device="PYTHON")).numpy())

def test_opt_names_for_the_channel_tile():
  # the opts as BEAM and apply_opts replay them: the channel upcast, the pixel upcast, the PACK of the weight panel
  ast, _ = ast_of(Tensor.empty(1, 128, 14, 14).conv2d(Tensor.empty(128, 128, 3, 3), padding=1))
  opts = H.hand_coded_optimizations(ast, threads=1).arg.applied_opts
  assert opts == (Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 2, 7), Opt(OptOps.PACK, 0, 0))

def test_stem_padded_for_a_max_pool_is_a_channel_tile():
  # ResNet's stem (3 channels, 7x7, stride 2) computed onto the max-pool's padded 114-wide grid: gather_tile would get 2 lanes there
  x, w, m, s = Tensor.empty(1, 3, 224, 224), Tensor.empty(64, 3, 7, 7), Tensor.empty(64), Tensor.empty(64)
  (si,) = [si for si in x.conv2d(w, stride=2, padding=3).batchnorm(None, None, m, s).relu().pad((1, 1, 1, 1), value=float("-inf"))
           .schedule()[0] if si.ast.op.name == "SINK"]
  opt = H.hand_coded_optimizations(si.ast, threads=2)
  assert sorted(s for k, s in kinds(opt) if k is U) == [6, 16] and opt.arg.applied_opts[-1].op is OptOps.PACK

def test_matmuls_are_not_channel_tiles():
  # a @ b and x @ w.T of channel_tile's size (below the register tile's) have no sliding window: their tiles are the 4x4 upcast and
  # dot_tile's (no packed rows)
  for out in (Tensor.empty(128, 256) @ Tensor.empty(256, 256), Tensor.empty(128, 256) @ Tensor.empty(256, 256).T):
    ast, _ = ast_of(out)
    opt = H.hand_coded_optimizations(ast, threads=2)
    assert sorted(s for k, s in kinds(opt) if k is U) == [4, 4] and all(o.op is not OptOps.PACK for o in opt.arg.applied_opts)

@pytest.mark.cpu
def test_fused_shortcut_conv_keeps_vector_accumulators():
  # a ResNet block's second conv with its 1x1 stride-2 shortcut conv fused in (the shortcut's sum unrolled by 4 with its weights read
  # 4 at a time): both sums stay 16-lane vector accumulators, one per pixel (they were 16 x 7 scalar lanes each), numerics as numpy's
  y, w, x, ws = rand(1, 32, 14, 14), rand(32, 32, 3, 3, seed=1), rand(1, 16, 28, 28, seed=2), rand(32, 16, 1, 1, seed=3)
  yt, wt, xt, wst = (Tensor(a).realize() for a in (y, w, x, ws))
  ast, bufs = ast_of((yt.conv2d(wt, padding=1) + xt.conv2d(wst, stride=2)).relu())
  opt = H.hand_coded_optimizations(ast, threads=1)
  assert sorted(s for k, s in kinds(opt) if k is U) == [7, 16]
  uops = lower_ast(opt, "CPU").uops
  vec = vector_accesses(uops)
  assert vec[("STORE", "reg", 16)] >= 2 * 7
  assert sum(n for (op, slot, _), n in accesses(uops).items() if op == "STORE" and slot == "reg") - vec[("STORE", "reg", 16)] <= 2
  want = np.maximum(np_conv(y, w, 1, 1, 1, [(1, 1)] * 2) + np_conv(x, ws, 1, 2, 1, [(0, 0)] * 2), 0)
  np.testing.assert_allclose(run(opt, bufs, "CPU").reshape(want.shape), want, rtol=1e-4, atol=1e-4)
