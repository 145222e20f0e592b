# Range splitting (tinygrad/codegen/split_ranges.py): the LOOP range a cat/pad mask compares against constants becomes consecutive
# loops without the compare, upcast or not, with numpy-equal results on CPU and PYTHON.
import sys
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.codegen import lower_ast, full_rewrite_to_sink
from tinygrad.codegen.split_ranges import split_ranges, _cuts
from tinygrad.device import Device, Buffer

CMPS = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)

def rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def lowered(t:Tensor, device:str="CPU"):
  items, _ = t.schedule()
  assert len(items) == 1
  return lower_ast(items[0].ast, device)

def loops(uops) -> list[int]: return [u.src[0].arg for u in uops if u.op is Ops.RANGE]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,m", [(10, 14), (12, 12), (10, 13), (3, 5), (1, 7), (8, 1), (17, 31)])
def test_cat_has_no_compare(device, n, m):
  a, b = rand(n), rand(m, seed=1)
  t = Tensor.cat(Tensor(a, device=device), Tensor(b, device=device))
  k = lowered(t, device)
  assert not [u for u in k.uops if u.op in CMPS], [u.op for u in k.uops]
  # the pieces' loops cover the output: the upcast lanes and the peeled single elements make up the rest
  assert sum(loops(k.uops)) <= n + m
  np.testing.assert_array_equal(t.numpy(), np.concatenate([a, b]))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,pad", [((10,), ((3, 5),)), ((12,), ((4, 4),)), ((13,), ((1, 2),)), ((3, 4), ((1, 2), (2, 2))),
                                       ((5, 7), ((2, 1), (0, 3))), ((6, 8), ((0, 0), (1, 1))), ((2, 3, 5), ((1, 0), (0, 2), (2, 1)))])
def test_pad_has_no_compare(device, shape, pad):
  a = rand(*shape)
  t = Tensor(a, device=device).pad(pad)
  k = lowered(t, device)
  assert not [u for u in k.uops if u.op in CMPS]
  np.testing.assert_array_equal(t.numpy(), np.pad(a, pad))

@pytest.mark.parametrize("device", DEVICES)
def test_cat_of_slices_and_flip(device):
  z, p = rand(21), rand(21, seed=1)
  zt, pt = Tensor(z, device=device), Tensor(p, device=device)
  t = Tensor.cat(zt[:4] - pt[:4], zt[6:].flip(0), (zt[2:9] * 2).pad(((1, 3),)))
  assert not [u for u in lowered(t, device).uops if u.op in CMPS]
  np.testing.assert_allclose(t.numpy(), np.concatenate([z[:4] - p[:4], z[6:][::-1], np.pad(z[2:9] * 2, (1, 3))]), rtol=1e-6)

def test_upcast_pieces_keep_vector_stores():
  # cat(10, 14) upcast by 4: [0, 8) and [12, 24) are vector copies; the lanes 8..11 mix both inputs and fold lane by lane
  t = Tensor.cat(Tensor(rand(10)), Tensor(rand(14, seed=1)))
  k = lowered(t)
  assert loops(k.uops) == [2, 3] and sum(1 for u in k.uops if u.op is Ops.STORE) == 3
  assert all(u.src[0].op is Ops.SHRINK for u in k.uops if u.op is Ops.STORE)
  assert not [u for u in k.uops if u.op in CMPS]   # no lane compares a loop index

def test_cuts():
  r = UOp.range(20, 0, AxisType.LOOP)
  lane = UOp.range(4, 1, AxisType.UPCAST)
  # r < 10: cut at 10; 2 < r: cut at 3; 4r + lane < 10 (lane in [0, 4)): all true below 2, all false from 3
  assert _cuts(r < 10, r, 20) == {10} and _cuts(UOp.const(2) < r, r, 20) == {3}
  assert _cuts(r * 4 + lane < 10, r, 20) == {2, 3}
  # a decreasing index (flip): 19 - r < 5 is false up to 14, true from 15
  assert _cuts(r * -1 + 19 < 5, r, 20) == {15}
  # not affine in r, or outside the range: nothing
  assert _cuts((r // 3) < 2, r, 20) is None and _cuts(r < 30, r, 20) == set()

@pytest.mark.cpu
def test_threaded_kernel_stays_correct():
  # past the threading threshold the range is split over cores first: the pieces are only what the launches agree on
  a, b = rand(70001), rand(5000, seed=1)
  t = Tensor.cat(Tensor(a), Tensor(b))
  np.testing.assert_array_equal(t.numpy(), np.concatenate([a, b]))

@pytest.fixture
def split_reduces(monkeypatch):
  """Small kernels split and tiled as a big conv is (the thresholds at their minimum)."""
  from tinygrad.codegen.opt import heuristic as H
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)
  monkeypatch.setattr(H, "TILE_DOT_MIN_WORK", 1)
  monkeypatch.setattr(H, "GATHER_MIN_WORK", 1)
  monkeypatch.setattr(sys.modules["tinygrad.codegen.split_ranges"], "SPLIT_REDUCE_MIN_WORK", 1)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,cout,kw", [((2, 3, 9, 24), 16, dict(padding=1)), ((1, 4, 7, 38), 32, dict(padding=2)),
                                           ((1, 2, 5, 30), 16, dict(padding=(1, 2))), ((1, 4, 6, 47), 16, dict(padding=1, stride=2)),
                                           ((1, 2, 8, 32), 32, dict(padding=2, dilation=2)), ((1, 4, 5, 48), 32, dict(padding=1, groups=2)),
                                           ((2, 3, 17, 39), 16, dict(padding=(2, 1, 0, 3)))])
def test_conv_split_reduce_kernels(device, shape, cout, kw, split_reduces):
  # (output widths of 3+ blocks of 8 or 16: the tile's lanes) a padded conv's kernel peeled into pieces (each with its own reduce loops,
  # border pieces tiled too): numpy-equal. With groups the output channels are one loop that the input's channel
  # depends on (co // 16): no tile, no split
  from tests.helpers.numpy_ref import np_conv
  groups, pad = kw.get("groups", 1), kw["padding"]
  x, w = rand(*shape), rand(cout, shape[1] // groups, 3, 3, seed=1)
  pads = [(pad, pad)] * 2 if isinstance(pad, int) else [(p, p) for p in pad] if len(pad) == 2 else [(pad[2], pad[3]), (pad[0], pad[1])]
  t = Tensor(x, device=device).conv2d(Tensor(w, device=device), **kw)
  k = lowered(t, device)
  assert (sum(1 for u in k.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM) > 1) == (groups == 1)
  np.testing.assert_allclose(t.numpy(), np_conv(x, w, groups, kw.get("stride", 1), kw.get("dilation", 1), pads), rtol=1e-4, atol=1e-4)

def test_small_reduce_kernels_stay_whole():
  # below SPLIT_REDUCE_MIN_WORK a split would only copy the kernel's code
  x, w = Tensor(rand(1, 4, 6, 24)), Tensor(rand(16, 4, 3, 3, seed=1))
  items, _ = x.conv2d(w, padding=1).schedule()
  ast = items[-1].ast
  from tinygrad.codegen.opt.heuristic import optimize_ast
  opt = optimize_ast(ast, Device["CPU"].renderer)
  assert split_ranges(opt) is opt

def test_skips_kernels_without_compares_or_with_reduce():
  x = Tensor(rand(16))
  items, _ = (x + 1).schedule()
  assert split_ranges(items[0].ast) is items[0].ast
  items, _ = x.pad(((2, 2),)).sum().schedule()
  assert split_ranges(items[-1].ast) is items[-1].ast

def test_pass_in_passes():
  from tinygrad.codegen import PASSES
  names = [p.name for p in PASSES]
  assert names.index("optimize") < names.index("split ranges") < names.index("expand upcast and unroll")
  t = Tensor.cat(Tensor(rand(5)), Tensor(rand(7, seed=1)))
  items, _ = t.schedule()
  sink = full_rewrite_to_sink(items[0].ast, Device["CPU"].renderer)
  assert not [u for u in sink.toposort() if u.op in CMPS]

@pytest.mark.cpu
def test_a_buffer_nothing_reads_stays_an_argument():
  # folding can drop every load of an input (here a mask that is constant false); the kernel still takes the schedule's buffers in
  # slot order, the dropped one as an unused argument
  from tinygrad.dtype import dtypes
  from tinygrad.uop.ops import ParamArg
  from tinygrad.uop.ops import KernelInfo
  out, inp = [UOp(Ops.PARAM, dtypes.float, (UOp.const(8, dtypes.int),), ParamArg(i, dtypes.float)) for i in range(2)]
  r = UOp.range(8, 0, AxisType.LOOP)
  val = UOp.const(False, dtypes.bool).where(inp.index(r).load(), UOp.const(2.0, dtypes.float))
  ast = UOp(Ops.SINK, dtypes.void, (out.index(r).store(val),), KernelInfo("E_8"))
  spec = Device["CPU"].renderer.to_program(lower_ast(ast, "CPU").program_input)
  assert spec.globals == (0, 1) and not [u for u in spec.uops if u.op is Ops.LOAD]
  bufs = [Buffer("CPU", 8, dtypes.float).ensure_allocated(), Buffer("CPU", 8, dtypes.float).copyin(rand(8).data)]
  Device["CPU"].run(spec, bufs)
  np.testing.assert_array_equal(bufs[0].numpy(), np.full(8, 2.0, np.float32))

def _output_stores(k) -> list[UOp]: return [u for u in k.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM]

@pytest.mark.cpu
@pytest.mark.parametrize("shape,cout,kw", [((2, 3, 40, 24), 16, dict(padding=1)), ((2, 2, 36, 40), 32, dict(padding=1)),
                                           ((2, 4, 70, 48), 16, dict(padding=1, stride=2)), ((2, 3, 36, 30), 16, dict(padding=2))])
def test_conv_border_pieces_keep_the_tile(shape, cout, kw, split_reduces):
  # images tall enough that the first and last output rows are under 1/16 of the outputs: those pieces keep the tile too (as loops,
  # one scalar accumulator per output, they took half the time of the 8x64x56x56 conv): every store of the output is a vector store
  from tests.helpers.numpy_ref import np_conv
  x, w = rand(*shape), rand(cout, shape[1], 3, 3, seed=1)
  pad = kw["padding"]
  pads = [(pad, pad)] * 2 if isinstance(pad, int) else [(p, p) for p in pad]
  t = Tensor(x).conv2d(Tensor(w), **kw)
  stores = _output_stores(lowered(t))
  assert len(stores) > 1 and all(st.src[0].op is Ops.SHRINK for st in stores), [st.src[0].op for st in stores]
  np.testing.assert_allclose(t.numpy(), np_conv(x, w, 1, kw.get("stride", 1), 1, pads), rtol=1e-4, atol=1e-4)

def test_big_padded_conv_pieces_all_vector_stores():
  # a big conv (32x16x56x56, 64 out, 3x3, pad 1; with 64 input channels channel_tile takes it) at the real thresholds: 9 pieces (3 row
  # ranges x 3 column ranges), each with the 8x16 tile (16 vector stores of 8 lanes), its first and last rows included. Lowered only
  t = Tensor.empty(32, 16, 56, 56).conv2d(Tensor.empty(64, 16, 3, 3), padding=1)
  stores = _output_stores(lowered(t))
  assert len(stores) == 9 * 16 and all(st.src[0].op is Ops.SHRINK and st.src[0].src[2].arg == 8 for st in stores)

def _conjuncts(g:UOp) -> set[UOp]:
  return set().union(*(_conjuncts(s) for s in g.src)) if g.op is Ops.AND and g.dtype == dtypes.bool else {g}

@pytest.mark.parametrize("device", DEVICES)
def test_pad_of_pad_masks_each_load_once(device):
  # a reduce over a view padded twice: the inner pad's load is gated by both masks, so the outer where(mask, load, 0) is the load
  x = rand(5, 6)
  t = ((Tensor(x, device=device).pad(((1, 1), (2, 0))) * 2).pad(((0, 2), (1, 1))).exp()).sum(axis=0)
  k = lowered(t, device)
  loads = {u for u in k.uops if u.op is Ops.LOAD and len(u.src) == 3}
  assert loads
  redundant = [u for u in k.uops if u.op is Ops.WHERE and u.src[1] in loads and u.src[2] is u.src[1].src[1] and
               _conjuncts(u.src[0]) <= _conjuncts(u.src[1].src[2])]
  assert not redundant
  want = np.exp(np.pad(np.pad(x, ((1, 1), (2, 0))) * 2, ((0, 2), (1, 1)))).sum(axis=0)
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)

# A KV-cache write of a prefill chunk: K and V stacked (the stack axis is a constant loop split in two) over a symbolic number of
# tokens, assigned into cache[:, :, :, start_pos:start_pos+toks]. Each piece needs its own copy of the symbolic `toks` loop inside
# the split one (one loop shared by both pieces was closed twice)
KVH, HD, CTX, CHUNK = 2, 8, 16, 4

def _kv_write(cache:Tensor, k:Tensor, v:Tensor, sp, toks, rope_cat:bool) -> Tensor:
  kk, vv = k[:, :toks], v[:, :toks]
  kr = (kk[..., :HD//2] * 2).cat(kk[..., HD//2:] * 3, dim=-1) if rope_cat else kk * 2
  return cache[:, :, :, sp:sp+toks, :].assign(Tensor.stack(kr.transpose(1, 2), vv.transpose(1, 2))).realize()

def _np_kv_write(cache:np.ndarray, k:np.ndarray, v:np.ndarray, sp:int, toks:int, rope_cat:bool):
  kk, vv = k[:, :toks], v[:, :toks]
  kr = np.concatenate([kk[..., :HD//2] * 2, kk[..., HD//2:] * 3], -1) if rope_cat else kk * 2
  cache[:, :, :, sp:sp+toks] = np.stack([kr.transpose(0, 2, 1, 3), vv.transpose(0, 2, 1, 3)])

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rope_cat", [False, True], ids=["stack", "stack_of_cat"])
def test_stack_over_symbolic_loop_into_cache(device, rope_cat):
  k, v = rand(1, CHUNK, KVH, HD), rand(1, CHUNK, KVH, HD, seed=1)
  cache = Tensor.zeros(2, 1, KVH, CTX, HD, device=device).contiguous().realize()
  sp, toks = UOp.variable("start_pos", 0, CTX - 1).bind(2), UOp.variable("toks", 1, CHUNK).bind(3)
  _kv_write(cache, Tensor(k, device=device), Tensor(v, device=device), sp, toks, rope_cat)
  want = np.zeros((2, 1, KVH, CTX, HD), np.float32)
  _np_kv_write(want, k, v, 2, 3, rope_cat)
  np.testing.assert_array_equal(cache.numpy(), want)

@pytest.mark.cpu
@pytest.mark.parametrize("rope_cat", [False, True], ids=["stack", "stack_of_cat"])
def test_stack_over_symbolic_loop_into_cache_jit(rope_cat):
  # TinyJit captures the kernel once and replays it with other bound start_pos and toks
  from tinygrad import TinyJit
  cache = Tensor.zeros(2, 1, KVH, CTX, HD).contiguous().realize()
  want = np.zeros((2, 1, KVH, CTX, HD), np.float32)
  write = TinyJit(lambda k, v, sp, toks: _kv_write(cache, k, v, sp, toks, rope_cat))
  v_sp, v_toks, sp = UOp.variable("start_pos", 0, CTX - 1), UOp.variable("toks", 1, CHUNK), 0
  for i, n in enumerate((3, 4, 2, 1, 4, 2)):
    k, v = rand(1, CHUNK, KVH, HD, seed=2 * i), rand(1, CHUNK, KVH, HD, seed=2 * i + 1)
    write(Tensor(k), Tensor(v), v_sp.bind(sp), v_toks.bind(n))
    _np_kv_write(want, k, v, sp, n, rope_cat)
    np.testing.assert_array_equal(cache.numpy(), want, err_msg=f"start_pos={sp} toks={n}")
    sp += n
  assert write.captured is not None
