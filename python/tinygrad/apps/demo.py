"""The main job: real work end to end on CPU with the Tensor API, then a look at the UOp core underneath.

Run with `python -m tinygrad.apps.demo` (`DEBUG=2` also prints one line per kernel, `DEBUG=4` their C source).

1. Linear regression: numpy makes a noisy data set, the Tensor API standardizes it, forms the normal equations with
   matmuls and solves them with conjugate gradient written in Tensor ops (lazy graphs -> scheduler -> codegen -> C ->
   clang -> run). The weights and R^2 are checked against numpy's least squares.
2. A batched computation: row-wise softmax of a 256x1000 batch, checked against numpy.
3. The core: a UOp graph simplified by a PatternMatcher through graph_rewrite, with per-rule match statistics printed
   at exit (TRACK_MATCH_STATS >= 1).
"""
import pickle
import time
import numpy as np
from tinygrad import Tensor, dtypes, Device
from tinygrad.helpers import TRACK_MATCH_STATS, GlobalCounters
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, set_track_match_stats

N_SAMPLES, N_FEATURES, CG_ITERS = 4096, 8, 9

def check(name:str, ours, ref, tol:float) -> float:
  err = float(np.max(np.abs(np.asarray(ours, dtype=np.float64) - np.asarray(ref, dtype=np.float64))))
  scale = max(1.0, float(np.max(np.abs(ref))))
  if not err <= tol * scale: raise AssertionError(f"{name}: max |tinygrad - numpy| = {err:.3g} > {tol:g} x {scale:.3g}")
  print(f"  {name}: max |tinygrad - numpy| = {err:.2e}  OK")
  return err

def conjugate_gradient(A:Tensor, b:Tensor, iters:int) -> tuple[Tensor, list[float]]:
  """Solves A x = b for a symmetric positive definite A with Tensor ops only; realizes the state once per iteration."""
  x = Tensor.zeros(b.shape[0], dtype=b.dtype, device=b.device).contiguous()
  r = b.contiguous()
  p, rr = r, (r * r).sum()
  Tensor.realize(x, r, rr)
  norms = []
  for _ in range(iters):
    Ap = (A * p.reshape(1, -1)).sum(axis=1)   # a matrix-vector product written as broadcast + reduce: one kernel
    alpha = rr / (p * Ap).sum()
    x, r = x + alpha * p, r - alpha * Ap
    rr_new = (r * r).sum()
    p, rr = r + (rr_new / rr) * p, rr_new
    Tensor.realize(x, r, p, rr)
    norms.append(float(rr.item()) ** 0.5)
  return x, norms

def linear_regression() -> None:
  print(f"== 1. linear regression on {Device.DEFAULT} with the Tensor API ==")
  rng = np.random.default_rng(4)
  X = (rng.standard_normal((N_SAMPLES, N_FEATURES)) * rng.uniform(0.5, 20, N_FEATURES) + rng.uniform(-5, 5, N_FEATURES)).astype(np.float32)
  w_true, b_true = rng.uniform(-2, 2, N_FEATURES).astype(np.float32), np.float32(0.5)
  y = (X @ w_true + b_true + rng.standard_normal(N_SAMPLES) * 0.1).astype(np.float32)
  print(f"data: X {N_SAMPLES}x{N_FEATURES} float32 (features on different scales), y = X @ w + {b_true} + noise(0.1)")
  GlobalCounters.reset()
  st = time.perf_counter()

  x, t = Tensor(X), Tensor(y)
  # standardize the features (a mean and a variance per column: reductions over axis 0), then add a bias column
  mu = x.mean(axis=0)
  sd = ((x - mu) * (x - mu)).mean(axis=0).sqrt()
  xs = Tensor.cat(Tensor.ones(N_SAMPLES, 1), (x - mu) / sd, dim=1)
  # the normal equations (X^T X) w = X^T y, both sides with matmuls, realized together
  A, b = xs.T @ xs, xs.T @ t
  Tensor.realize(A, b)
  sym = "symmetric" if np.allclose(A.numpy(), A.numpy().T) else "NOT symmetric"
  print(f"normal equations: A = Xs.T @ Xs {A.shape}, b = Xs.T @ y {b.shape}; A is {sym}")
  ws, norms = conjugate_gradient(A, b, CG_ITERS)
  print(f"conjugate gradient, {CG_ITERS} iterations: |r| = " + ", ".join(f"{v:.1e}" for v in norms[:4]) + f", ... {norms[-1]:.1e}")
  # back to the original units: w = ws[1:] / sd, bias = ws[0] - sum(w * mu)
  w = ws[1:] / sd
  bias = ws[0] - (w * mu).sum()
  pred = x @ w + bias
  resid = t - pred
  r2 = 1 - (resid * resid).sum() / ((t - t.mean()) * (t - t.mean())).sum()
  Tensor.realize(w, bias, r2)
  dt = time.perf_counter() - st
  kernels = GlobalCounters.kernel_count

  # the same fit with numpy (float64 least squares) as the reference
  Xb = np.concatenate([np.ones((N_SAMPLES, 1)), X.astype(np.float64)], axis=1)
  sol = np.linalg.lstsq(Xb, y.astype(np.float64), rcond=None)[0]
  np_r2 = 1 - np.sum((y - Xb @ sol) ** 2) / np.sum((y - y.mean()) ** 2)
  print("  feature   true    tinygrad     numpy")
  for i in range(N_FEATURES): print(f"  w[{i}]  {w_true[i]:8.4f}  {w.numpy()[i]:10.5f}  {sol[i+1]:10.5f}")
  print(f"  bias    {b_true:8.4f}  {bias.item():10.5f}  {sol[0]:10.5f}")
  check("weights", w.numpy(), sol[1:], 1e-3)
  check("bias", bias.item(), sol[0], 1e-3)
  check("R^2", r2.item(), np_r2, 1e-4)
  print(f"R^2 = {r2.item():.6f}; {kernels} kernels ran in {dt*1e3:.0f} ms (compiling included)\n")

def batched_softmax() -> None:
  print("== 2. batched softmax: 256 rows of 1000 logits ==")
  logits = np.random.default_rng(1).standard_normal((256, 1000)).astype(np.float32) * 4
  GlobalCounters.reset()
  x = Tensor(logits)
  e = (x - x.max(axis=1, keepdim=True)).exp()
  sm = e / e.sum(axis=1, keepdim=True)
  out = sm.numpy()
  ref = np.exp(logits - logits.max(axis=1, keepdims=True))
  ref /= ref.sum(axis=1, keepdims=True)
  print(f"{GlobalCounters.kernel_count} kernels; rows sum to 1 within {np.max(np.abs(out.sum(axis=1) - 1)):.1e}")
  check("softmax", out, ref, 1e-5)
  print()

# ***** 3. the UOp core *****

def const(v:int) -> UOp: return UOp(Ops.CONST, dtypes.int, arg=v)
def alu(op:Ops, *src:UOp) -> UOp: return UOp(op, dtypes.int, src)

def fold(op, a, b):
  return const({Ops.ADD: a.arg + b.arg, Ops.MUL: a.arg * b.arg}[op.op])

def make_simplifier() -> PatternMatcher:
  """A small algebraic simplifier: constant folding and identities, written as rules over the UOp IR."""
  return PatternMatcher([
    (UPat((Ops.ADD, Ops.MUL), src=(UPat.cvar("a"), UPat.cvar("b")), name="op"), fold),
    (UPat(Ops.ADD, src=[UPat.var("x"), UPat.const(0)]), lambda x: x),
    (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(1)]), lambda x: x),
    (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(0).named("z")]), lambda x, z: z),
    (UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x"))), lambda x: alu(Ops.MUL, x, const(2))),
  ])

def index_expression(n:int) -> UOp:
  """((gidx*1 + 0) * (2*8) + lidx*(3+1)) for n lanes, with a shared subexpression: the kind of graph codegen produces."""
  gidx, lidx = UOp(Ops.SPECIAL, dtypes.int, arg="gidx0"), UOp(Ops.SPECIAL, dtypes.int, arg="lidx0")
  base = alu(Ops.ADD, alu(Ops.MUL, alu(Ops.ADD, alu(Ops.MUL, gidx, const(1)), const(0)), alu(Ops.MUL, const(2), const(8))),
             alu(Ops.MUL, lidx, alu(Ops.ADD, const(3), const(1))))
  return UOp(Ops.SINK, dtypes.void, tuple(alu(Ops.ADD, base, alu(Ops.ADD, const(i), const(0))) for i in range(n)))

def uop_core() -> None:
  print("== 3. the core: a UOp graph simplified by graph_rewrite ==")
  # before the rules are built, so they are tracked (the pipeline's own rules were built earlier, untracked unless the
  # environment sets TRACK_MATCH_STATS)
  small = index_expression(1)
  print(f"before: {small.src[0].render(simplify=False)}   ({len(small.toposort())} nodes)")
  set_track_match_stats(max(int(TRACK_MATCH_STATS.value), 1))
  simplifier = make_simplifier()
  out_small = graph_rewrite(small, simplifier)
  print(f"after:  {out_small.src[0].render(simplify=False)}   ({len(out_small.toposort())} nodes)")

  big = index_expression(20_000)
  st = time.perf_counter()
  out = graph_rewrite(big, simplifier, name="simplify 20k lanes")
  dt = time.perf_counter() - st
  n_before, n_after = len(big.toposort()), len(out.toposort())
  print(f"rewrote {n_before} nodes into {n_after} in {dt*1e3:.1f} ms ({n_before/dt/1e6:.2f}M nodes/s)")
  assert pickle.loads(pickle.dumps(out)) is out, "pickling must round-trip to the interned node"
  print("pickle round-trip returns the same interned node\n\nper-rule match statistics (TRACK_MATCH_STATS=1):")

if __name__ == "__main__":
  linear_regression()
  batched_softmax()
  uop_core()
