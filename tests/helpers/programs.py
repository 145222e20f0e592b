# One random Tensor op (drawn by hypothesis) on earlier values, with the same op on their numpy twins: the step random programs
# are made of.
import numpy as np
from hypothesis import strategies as st
from tinygrad import Tensor, dtypes

MAX_NUMEL = 256

def factorizations(n:int) -> list[tuple[int, ...]]:
  """Some shapes with n elements (up to 3 dims)."""
  divs = [d for d in range(1, n + 1) if n % d == 0]
  out = {(n,)}
  for a in divs:
    out.add((a, n // a))
    for b in [d for d in divs if (n // a) % d == 0]: out.add((a, b, n // a // b))
  return sorted(out)

def apply_op(draw, vals:list[tuple[Tensor, np.ndarray]]) -> tuple[Tensor, np.ndarray]:
  t, a = draw(st.sampled_from(vals))
  kind = draw(st.sampled_from(["unary", "binary", "scalar", "reshape", "permute", "flip", "shrink", "pad", "expand", "reduce",
                               "contiguous", "where"]))
  nd = a.ndim
  if kind == "unary":
    op = draw(st.sampled_from(["neg", "relu", "abs", "sin", "sqrt"]))
    if op == "neg": return -t, -a
    if op == "relu": return t.relu(), np.maximum(a, 0)
    if op == "abs": return t.abs(), np.abs(a)
    if op == "sin": return t.sin(), np.sin(a)
    return t.abs().sqrt(), np.sqrt(np.abs(a))
  if kind in ("binary", "where"):
    same = [(u, b) for u, b in vals if b.shape == a.shape]
    u, b = draw(st.sampled_from(same))
    if kind == "where": return (t > u).where(t, u * 0.5), np.where(a > b, a, b * np.float32(0.5))
    op = draw(st.sampled_from(["add", "sub", "mul", "max"]))
    if op == "add": return t + u, a + b
    if op == "sub": return t - u, a - b
    if op == "mul": return t * u, a * b
    return t.maximum(u), np.maximum(a, b)
  if kind == "scalar":
    c = draw(st.sampled_from([0.5, -1.25, 2.0, 3.0]))
    return (t * c + 1.0, a * np.float32(c) + np.float32(1.0))
  if kind == "reshape":
    shape = draw(st.sampled_from(factorizations(a.size))) if a.size else a.shape
    return t.reshape(shape), a.reshape(shape)
  if kind == "permute" and nd >= 2:
    order = draw(st.permutations(list(range(nd))))
    return t.permute(order), a.transpose(order)
  if kind == "flip" and nd >= 1:
    ax = draw(st.integers(0, nd - 1))
    return t.flip(ax), np.flip(a, ax)
  if kind == "shrink" and nd >= 1:
    arg = []
    for s in a.shape:
      lo = draw(st.integers(0, max(s - 1, 0)))
      arg.append((lo, draw(st.integers(lo + 1, s)) if s else 0))
    return t.shrink(tuple(arg)), a[tuple(slice(lo, hi) for lo, hi in arg)]
  if kind == "pad" and nd >= 1 and a.size * 4 <= MAX_NUMEL:
    arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(nd))
    return t.pad(arg), np.pad(a, arg)
  if kind == "expand" and a.size * 3 <= MAX_NUMEL:
    n = draw(st.integers(2, 3))
    pos = draw(st.integers(0, nd))
    shape = a.shape[:pos] + (1,) + a.shape[pos:]
    new = a.shape[:pos] + (n,) + a.shape[pos:]
    return t.reshape(shape).expand(new), np.broadcast_to(a.reshape(shape), new)
  if kind == "reduce" and nd >= 1:
    ax = draw(st.integers(0, nd - 1))
    keep = draw(st.booleans())
    if draw(st.booleans()): return t.sum(ax, keepdim=keep), a.sum(ax, keepdims=keep, dtype=np.float32)
    if a.shape[ax] == 0: return t, a
    return t.max(ax, keepdim=keep), a.max(ax, keepdims=keep)
  if kind == "contiguous": return t.contiguous(), a
  return t + 1.0, a + np.float32(1.0)

SHAPES = [(4,), (3, 5), (2, 3, 4), (8, 8), (1, 6), (16,), (2, 1, 3)]

@st.composite
def program_plans(draw):
  """What a random program starts from: its inputs' shapes (one to three), how many ops it applies, a seed for the inputs' values, and
  hypothesis's data to draw the ops (apply_op) from."""
  shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
  return shapes, draw(st.integers(3, 10)), draw(st.integers(0, 2**31 - 1)), draw(st.data())

def random_inputs(shapes:list[tuple[int, ...]], seed:int, device_of) -> list[tuple[Tensor, np.ndarray]]:
  """A random program's inputs: float32 values in [-2, 2) of these shapes, each a Tensor on device_of() with its numpy twin."""
  rng = np.random.default_rng(seed)
  arrays = [rng.uniform(-2, 2, shape).astype(np.float32) for shape in shapes]
  return [(Tensor(a, device=device_of(), dtype=dtypes.float32), a) for a in arrays]
