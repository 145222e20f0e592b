# Vectorisation for every size: slice/cat/pad/flip/stride kernels of sizes 1..64 through the upcast/devectorise path (the heuristic's
# upcast, and forced upcasts of every amount that divides a loop) against numpy, on CPU and PYTHON.
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from tests.helpers.devices import DEVICES
from tinygrad import Tensor
from tinygrad.device import Device
from tinygrad.uop.ops import Ops, AxisType
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.kernel import apply_opt, ranges_of, range_size

def rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

# (name, tensor function, numpy function) of one 1-D input of size N (N >= 10)
PATTERNS = [
  ("cat_sub", lambda z, p: Tensor.cat(z[:4] - p[:4], z[6:]), lambda z, p: np.concatenate([z[:4] - p[:4], z[6:]])),
  ("cat_flip_stride", lambda z, p: Tensor.cat(z[:4].flip(0), p[6:], z[::3]), lambda z, p: np.concatenate([z[:4][::-1], p[6:], z[::3]])),
  ("cat_pad", lambda z, p: Tensor.cat(z[:5].pad(((2, 1),)), p[7:] * 2), lambda z, p: np.concatenate([np.pad(z[:5], (2, 1)), p[7:] * 2])),
  ("pad_flip", lambda z, p: (z.flip(0) + p).pad(((3, 2),)), lambda z, p: np.pad(z[::-1] + p, (3, 2))),
  ("stride_pad", lambda z, p: z[1::2].pad(((1, 0),)) * p[: (len(z) + 1) // 2 + 1][: len(z[1::2]) + 1],
   lambda z, p: np.pad(z[1::2], (1, 0)) * p[: (len(z) + 1) // 2 + 1][: len(z[1::2]) + 1]),
  ("cat_rows", lambda z, p: Tensor.cat(z.reshape(1, -1), p.reshape(1, -1), dim=0).T.contiguous(), lambda z, p: np.stack([z, p]).T),
]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,tf,nf", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_slice_cat_patterns_every_n(device, name, tf, nf):
  # one realize per pattern: the 16 kernels (N = 10..25) compile together
  zs, ps = [rand(n, seed=n) for n in range(10, 26)], [rand(n, seed=100 + n) for n in range(10, 26)]
  outs = [tf(Tensor(z, device=device), Tensor(p, device=device)) for z, p in zip(zs, ps)]
  Tensor.realize(*outs)
  for z, p, o in zip(zs, ps, outs): np.testing.assert_allclose(o.numpy(), nf(z, p), rtol=1e-6, err_msg=f"{name} N={len(z)}")

@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_sizes_1_to_64(device):
  xs = [rand(n, seed=n) for n in range(1, 65)]
  outs = [(Tensor(x, device=device).flip(0) * 2 + Tensor(x, device=device)).pad(((1, 2),)) for x in xs]
  Tensor.realize(*outs)
  for x, o in zip(xs, outs): np.testing.assert_allclose(o.numpy(), np.pad(x[::-1] * 2 + x, (1, 2)), rtol=1e-6, err_msg=f"n={len(x)}")

def run_with_upcasts(t:Tensor, upcasts:list[tuple[int, int]], device:str) -> np.ndarray|None:
  """Runs t's last kernel with the forced UPCASTs (range position among the LOOP ranges, amount), no other optimization; None when
  an upcast does not divide its range."""
  items, _ = t.schedule()
  for si in items[:-1]: Device[device].run(Device[device].renderer.to_program(lower_ast(si.ast).uops), si.bufs)
  ast, bufs = items[-1].ast, items[-1].bufs
  for loop, amount in upcasts:
    if not (loops := ranges_of(ast, AxisType.LOOP)): return None
    r = loops[loop % len(loops)]
    if (n := range_size(r)) is None or n % amount != 0 or amount >= n: return None
    ast = apply_opt(ast, Opt(OptOps.UPCAST, ranges_of(ast).index(r), amount))[0]
  uops = lower_ast(ast).uops
  assert not [u for u in uops if u.op is Ops.SHRINK and u.src[2].arg not in (2, 4, 8, 16)]
  Device[device].run(Device[device].renderer.to_program(uops), bufs)
  return bufs[0].numpy()

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("amount", [2, 3, 4, 5, 8])
def test_forced_upcast_of_every_amount(device, amount):
  # an upcast of 3 or 5 has no vector access: its lanes load and store one by one (it made 3-lane SHRINKs the contract rejects)
  ran = 0
  for n in (10, 12, 15, 20, 25, 40):
    z, p = rand(n, seed=n), rand(n, seed=50 + n)
    for name, tf, nf in PATTERNS:
      got = run_with_upcasts(tf(Tensor(z, device=device).realize(), Tensor(p, device=device).realize()), [(-1, amount)], device)
      if got is None: continue
      np.testing.assert_allclose(got.reshape(nf(z, p).shape), nf(z, p), rtol=1e-6, err_msg=f"{name} n={n} upcast {amount}")
      ran += 1
  assert ran >= 2

@st.composite
def programs(draw):
  n = draw(st.integers(1, 64))
  start = draw(st.integers(0, n - 1))
  stop = draw(st.integers(start + 1, n))
  step = draw(st.integers(1, 3))
  return n, slice(start, stop, step), draw(st.booleans()), (draw(st.integers(0, 5)), draw(st.integers(0, 5))), draw(st.integers(0, 2)), \
    [(draw(st.integers(-2, 0)), draw(st.sampled_from([2, 3, 4, 5, 8, 16]))) for _ in range(draw(st.integers(0, 2)))]

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_hypothesis_slice_flip_pad_cat(prog):
  """A random slice (start/stop/step), flip, pad and cat with another slice of a 1..64 vector, or of a (2, n) matrix, with random
  forced upcasts, on PYTHON (no compiler: many programs per second), against numpy."""
  n, sl, flip, pad, rows, upcasts = prog
  x, y = rand(n, seed=n), rand(n, seed=n + 1)
  def build(lib, a, b):
    v = a[sl]
    if flip: v = v.flip(0) if lib is Tensor else v[::-1]
    v = v.pad((pad,)) if lib is Tensor else np.pad(v, pad)
    w = b[: n // 2 + 1] * 2
    out = Tensor.cat(v, w) if lib is Tensor else np.concatenate([v, w])
    if rows and len(out) % 2 == 0: out = out.reshape(2, -1) if rows == 1 else out.reshape(-1, 2)
    return out
  expected = build(np, x, y)
  t = build(Tensor, Tensor(x, device="PYTHON").realize(), Tensor(y, device="PYTHON").realize())
  got = run_with_upcasts(t, upcasts, "PYTHON")
  if got is None: got = t.numpy()
  np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-6)
