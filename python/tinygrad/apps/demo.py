"""The main job: training a model on real data end to end on CPU, then the Tensor API checked against numpy, then the UOp core.

Run with `python -m tinygrad.apps.demo` (`DEBUG=2` also prints one line per kernel, `DEBUG=4` their C source).

1. Training: a small CNN (conv, batchnorm, relu, max-pool, linear) learns scikit-learn's 8x8 handwritten digits (installed
   with the `[demo]` extra) with AdamW; test accuracy per epoch with a progress bar (>= 97% expected), then the model is saved
   with safe_save, loaded into a fresh model, and the two must predict the same.
2. Linear regression: the normal equations formed with matmuls and solved by conjugate gradient in Tensor ops; the weights and
   R^2 are checked against numpy's least squares, and a batched softmax against numpy's.
3. The core: a UOp graph simplified by a PatternMatcher through graph_rewrite, with per-rule match statistics printed
   at exit (TRACK_MATCH_STATS >= 1).
"""
import gzip
import importlib.util
import os
import pickle
import tempfile
import time
import numpy as np
from tinygrad import Tensor, dtypes, Device, nn
from tinygrad.helpers import TRACK_MATCH_STATS, GlobalCounters, Context, tqdm
from tinygrad.nn.state import safe_save, safe_load, get_state_dict, load_state_dict
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, set_track_match_stats

# ***** 1. training on real data *****

BATCH, EPOCHS, TARGET_ACC = 64, 6, 0.97

def load_digits() -> tuple[np.ndarray, np.ndarray]:
  """The 1797 8x8 digits (pixel values 0-16) and labels that ship inside scikit-learn (the `[demo]` extra). Read from the file
  directly: importing sklearn would pull in scipy for one CSV."""
  if (spec := importlib.util.find_spec("sklearn")) is None or spec.origin is None:
    raise SystemExit("the demo's dataset ships with scikit-learn: pip install '.[demo]' (or pip install scikit-learn)")
  with gzip.open(os.path.join(os.path.dirname(spec.origin), "datasets", "data", "digits.csv.gz"), "rt") as f:
    data = np.loadtxt(f, delimiter=",", dtype=np.float32)
  return data[:, :-1].reshape(-1, 1, 8, 8) / 16.0, data[:, -1].astype(np.int32)

class DigitsCNN:
  """conv 3x3 (16) -> batchnorm -> relu -> conv 3x3 (32) -> relu -> max-pool 2x2 -> linear (10)."""
  def __init__(self):
    self.c1, self.bn, self.c2 = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm(16), nn.Conv2d(16, 32, 3, padding=1)
    self.out = nn.Linear(32 * 4 * 4, 10)
  def __call__(self, x:Tensor) -> Tensor:
    x = self.bn(self.c1(x)).relu()
    x = self.c2(x).relu().max_pool2d(2)
    return self.out(x.flatten(1))

def predict(model:DigitsCNN, X:np.ndarray) -> np.ndarray:
  with Context(TRAINING=0): return model(Tensor(X)).argmax(axis=1).numpy()

def train_digits() -> None:
  X, Y = load_digits()
  perm = np.random.default_rng(0).permutation(len(X))
  n_test = len(X) // 5
  Xte, Yte, Xtr, Ytr = X[perm[:n_test]], Y[perm[:n_test]], X[perm[n_test:]], Y[perm[n_test:]]
  print(f"== 1. training a CNN on the 8x8 digits: {len(Xtr)} train / {len(Xte)} test images ==")
  Tensor.manual_seed(0)
  model = DigitsCNN()
  opt = nn.optim.AdamW(nn.state.get_parameters(model), lr=3e-3)
  rng = np.random.default_rng(1)
  st = time.perf_counter()
  acc = 0.0
  for epoch in range(1, EPOCHS + 1):
    order = rng.permutation(len(Xtr))
    steps = len(Xtr) // BATCH
    with Context(TRAINING=1):
      for i in (bar := tqdm(range(steps), desc=f"epoch {epoch}")):
        idx = order[i * BATCH:(i + 1) * BATCH]
        opt.zero_grad()
        loss = model(Tensor(Xtr[idx])).sparse_categorical_crossentropy(Tensor(Ytr[idx]))
        loss.backward()
        opt.step()
        if i == steps - 1: bar.set_description(f"epoch {epoch} loss {loss.item():.3f}")
    acc = float((predict(model, Xte) == Yte).mean())
    print(f"epoch {epoch}: test accuracy {acc*100:.1f}%  ({time.perf_counter() - st:.1f} s)")
  if acc < TARGET_ACC: raise AssertionError(f"test accuracy {acc*100:.1f}% is below the {TARGET_ACC*100:.0f}% this demo promises")

  # save, load into a fresh model, and check it predicts exactly the same
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "digits.safetensors")
    safe_save(get_state_dict(model), path)
    fresh = DigitsCNN()
    load_state_dict(fresh, safe_load(path), verbose=False)
    same = np.array_equal(predict(fresh, Xte), predict(model, Xte))
    print(f"saved {len(get_state_dict(model))} tensors ({os.path.getsize(path)} bytes) with safe_save; a fresh model loaded from the file "
          f"predicts {'the same' if same else 'DIFFERENTLY'}")
    if not same: raise AssertionError("the reloaded model predicts differently")
  print(f"{GlobalCounters.kernel_count} kernels ran\n")

# ***** 2. the Tensor API against numpy *****

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
  print(f"== 2. linear regression on {Device.DEFAULT} with the Tensor API ==")
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
  check("weights", w.numpy(), sol[1:], 1e-3)
  check("bias", bias.item(), sol[0], 1e-3)
  check("R^2", r2.item(), np_r2, 1e-4)
  print(f"R^2 = {r2.item():.6f}; {kernels} kernels ran in {dt*1e3:.0f} ms (compiling included)\n")

def batched_softmax() -> None:
  print("batched softmax: 256 rows of 1000 logits")
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
  train_digits()
  linear_regression()
  batched_softmax()
  uop_core()
