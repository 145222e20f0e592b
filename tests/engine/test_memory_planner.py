# The memory planner on real schedules (issue 13 items 5 and 7): every schedule Tensor.realize runs is planned; a checker computes
# each buffer's lifetime from the planned schedule and fails if two buffers live at the same time share a byte; results equal the
# unplanned run (NO_MEMORY_PLANNER=1); the MLP training step's peak memory is at most tinygrad 0.14's.
import gc
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context, GlobalCounters
import tinygrad.tensor.core as core
from benches.bench_train import MODELS as TRAIN_MODELS
from tests.helpers.devices import DEVICES
from tests.helpers.memory import check_no_live_overlap
from tests.helpers.programs import apply_op

# ***** the checker (tests/helpers/memory.py) *****

def test_checker_catches_overlap():
  from tinygrad.device import Buffer
  class Item:
    def __init__(self, bufs): self.bufs = bufs
  arena = Buffer("PYTHON", 64, dtypes.uint8)
  a, b, c = arena.view(4, dtypes.float32, 0), arena.view(4, dtypes.float32, 16), arena.view(4, dtypes.float32, 0)
  assert check_no_live_overlap([Item([a]), Item([b, a]), Item([c, b])]) == 3   # a and c share bytes but never live at once
  with pytest.raises(AssertionError, match="live at once"): check_no_live_overlap([Item([a]), Item([c, a]), Item([b, c])])
  assert check_no_live_overlap([Item([b, arena.view(4, dtypes.float32, 32)])]) == 2   # next to each other
  with pytest.raises(AssertionError, match="live at once"): check_no_live_overlap([Item([b, arena.view(4, dtypes.float32, 31)])])
  with pytest.raises(AssertionError, match="live at once"): check_no_live_overlap([Item([arena]), Item([a])])

@pytest.fixture
def planned(monkeypatch):
  """The schedules Tensor.realize runs (after planning), in order."""
  seen: list[list] = []
  run = core.run_schedule
  def record(items, var_vals=None):
    seen.append(list(items))
    return run(items, var_vals)
  monkeypatch.setattr(core, "run_schedule", record)
  return seen

# ***** models: benches/bench_train.py's steps (the CNN at batch 16) and a small GPT-2 block as in benches/bench_models.py *****

TRAIN: dict = {}
exec(compile(TRAIN_MODELS, "<bench_train models>", "exec"), TRAIN)

def train(name:str, steps:int, batch:int|None=None):
  """Trains bench_train's model `name` (seed 0, AdamW) for `steps` steps: (losses, the parameters after, the step)."""
  step = TRAIN["make"](name, "AdamW", batch)
  losses = [step() for _ in range(steps)]
  return losses, [p.numpy() for p in step.params], step

def gpt2_block():
  """A GPT-2 block (layernorm, causal attention, gelu MLP, residuals) at T=16, D=32, 4 heads, forward and backward: the output and
  the weights' gradients."""
  Tensor.manual_seed(1)
  T, D, H = 16, 32, 4
  x = Tensor.randn(1, T, D)
  w_qkv, w_o, w_fc, w_pr = ws = [(Tensor.randn(*s) * 0.1).realize() for s in ((D, 3 * D), (D, D), (D, 4 * D), (4 * D, D))]
  for w in ws: w.requires_grad = True
  q, k, v = (x.layernorm() @ w_qkv).split(D, dim=-1)
  q, k, v = [t.reshape(1, T, H, D // H).transpose(1, 2) for t in (q, k, v)]
  h = x + q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(1, T, D) @ w_o
  out = h + (h.layernorm() @ w_fc).gelu() @ w_pr
  out.sum().backward()
  grads = [w.grad for w in (w_qkv, w_o, w_fc, w_pr)]
  Tensor.realize(out, *grads)
  return [out.numpy()] + [g.numpy() for g in grads]

MODELS = {
  "mlp": lambda: train("mlp", 2)[:2],
  "cnn": lambda: train("cnn", 2, batch=16)[:2],
  "gpt2": lambda: (gpt2_block(), []),
}

@pytest.mark.cpu
@pytest.mark.parametrize("model", list(MODELS))
def test_planned_models_never_overlap_and_match_unplanned(model, planned):
  out, params = MODELS[model]()
  views = [check_no_live_overlap(items) for items in planned]
  assert sum(views) > 0, f"the {model} schedules planned nothing: the checker checked nothing"
  with Context(NO_MEMORY_PLANNER=1):
    n = len(planned)
    ref_out, ref_params = MODELS[model]()
    assert all(check_no_live_overlap(items) == 0 for items in planned[n:])   # and the switch works
  for a, b in zip(out + params, ref_out + ref_params): np.testing.assert_array_equal(a, b)

# ***** peak memory of the MLP training step *****

# tinygrad 0.14.0's peak of GlobalCounters.mem_used during a warm MLP training step (benches/bench_train.py's: 784-512-512-10, batch
# 128, AdamW lr=1e-3, seed 0), counted from before the model is made. Measured with `benches/compare.py --script bench_memory.py`
# (metric mlp_adamw_peak_bytes; it wraps Buffer.allocate to record the highest mem_used, 0.14 having no peak counter): 12,312,740
# bytes, of which 8,438,436 stay allocated between steps (weights, Adam's moments and step counter). Its first step peaks at 14,991,840.
TINYGRAD_014_MLP_ADAMW_PEAK = 12_312_740

@pytest.mark.cpu
def test_mlp_step_peak_memory_at_most_tinygrad_014():
  gc.collect()
  start = GlobalCounters.mem_used
  _, _, step = train("mlp", 2)
  def peak(off:int) -> int:
    with Context(NO_MEMORY_PLANNER=off):
      step()   # warm: the schedules and kernels of a planned (or unplanned) step are cached
      GlobalCounters.reset()
      step()
    return GlobalCounters.max_mem_used - start
  planned_peak, unplanned_peak = peak(0), peak(1)
  assert planned_peak <= TINYGRAD_014_MLP_ADAMW_PEAK, f"peak {planned_peak} bytes, tinygrad 0.14: {TINYGRAD_014_MLP_ADAMW_PEAK}"
  assert planned_peak < unplanned_peak

@pytest.mark.cpu
def test_chain_intermediates_share_memory():
  # ten layers one after another: each activation is needed only by the next layer, so two buffers' worth of memory serve them all
  Tensor.manual_seed(0)
  x = Tensor.randn(64, 256).realize()
  ws = [(Tensor.randn(256, 256) * 0.05).realize() for _ in range(10)]
  def forward():
    h = x
    for w in ws: h = (h @ w).relu().contiguous()
    return h.sum(1)
  gc.collect()
  act = 64 * 256 * 4
  for off in (1, 0):
    with Context(NO_MEMORY_PLANNER=off):
      forward().realize()
      base = GlobalCounters.mem_used
      GlobalCounters.reset()
      out = forward().realize()
      grown = GlobalCounters.max_mem_used - base
      if off: assert grown >= 9 * act   # unplanned: every activation stays until the realize returns
      else: assert grown <= 2 * act + 64 * 4
  h = x.numpy()
  for w in ws: h = np.maximum(h @ w.numpy(), 0)
  np.testing.assert_allclose(out.numpy(), h.sum(1), rtol=1e-4, atol=1e-4)

@pytest.mark.cpu
def test_inputs_outputs_and_assign_targets_keep_their_buffers(planned):
  from tinygrad.schedule.buffers import buffer_of, as_buffer
  rng = np.random.default_rng(0)
  wn, xn = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
  w, x, e = Tensor(wn).realize(), Tensor(xn).realize(), Tensor.empty(64, 64)   # e: an input no kernel ever wrote
  h = (x @ w).relu().contiguous()
  h = (h * 2).contiguous()
  h = (h + 1).contiguous()
  s = h.sum(0)
  w.assign(w - 0.01 * h)
  planned.clear()
  Tensor.realize(w, s, (e.abs() > -1).sum())
  items, = planned
  assert check_no_live_overlap(items) > 0
  kept = {buffer_of(as_buffer(t.uop)) for t in (w, x, e, s)}
  used = {b for si in items for b in si.bufs}
  assert kept <= used and all(b._base is None for b in kept)
  hn = (np.maximum(xn @ wn, 0) * 2 + 1).astype(np.float32)
  np.testing.assert_allclose(s.numpy(), hn.sum(0), rtol=1e-4)
  np.testing.assert_allclose(w.numpy(), wn - np.float32(0.01) * hn, rtol=1e-4, atol=1e-5)

# ***** random small graphs *****

@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(shapes=st.lists(st.sampled_from([(64,), (8, 16), (4, 4, 8), (16, 16), (2, 8, 6)]), min_size=1, max_size=3),
       n_ops=st.integers(4, 12), n_outs=st.integers(1, 2), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_random_graphs_planned(device, shapes, n_ops, n_outs, seed, data, planned):
  """Random programs of elementwise, movement and reduce ops, with only their last values realized: the values between (the reduces
  and contiguous ones among them) are intermediates the planner places. No two live buffers overlap, results match numpy."""
  rng = np.random.default_rng(seed)
  vals = []
  for shape in shapes:
    a = rng.uniform(-2, 2, shape).astype(np.float32)
    vals.append((Tensor(a, device=device, dtype=dtypes.float32), a))
  for _ in range(n_ops):
    t, a = apply_op(data.draw, vals[-2:])   # on the latest values: a long chain, whose early links die before its end
    vals.append((t.contiguous(), a) if data.draw(st.integers(0, 3)) else (t, a))   # more kernel boundaries, more intermediates
  planned.clear()
  outs = vals[-n_outs:]
  Tensor.realize(*[t for t, _ in outs])
  for items in planned: check_no_live_overlap(items)
  for t, a in outs: np.testing.assert_allclose(t.numpy(), a, rtol=1e-4, atol=1e-4)
