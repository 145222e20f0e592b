# Proof by fuzzing: random expression trees over 1-3 Variables with random bounds. For every checked assignment of the Variables:
#  - simplify(e) evaluates to the value of e (an independent Python evaluator of the graph, not sym_infer);
#  - every node of e and of simplify(e) lies in its [vmin, vmax];
#  - (ours) simplify(e) lowered into a kernel for a device (the codegen's lowering of // and %, then the PYTHON renderer, or the C
#    renderer and a C compiler) computes the same value.
# Example counts are bounded so the file runs in seconds. Long runs: SYMBOLIC_FUZZ_SEEDED=100000 (this file, test_fuzz_seeded) and
# `python benches/bench_symbolic.py --fuzz 100000` (the benchmark's index corpus).
import importlib.util
import itertools
import os
import random
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from tinygrad import Variable, dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")
FUZZ = settings(max_examples=int(os.getenv("SYMBOLIC_FUZZ_EXAMPLES", "300")), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ***** an evaluator with Python semantics, independent of the engine *****

def cdiv(a:int, b:int) -> int: return abs(a)//abs(b)*(1 if (a < 0) == (b < 0) else -1)
_EVAL = {Ops.ADD: lambda a, b: a+b, Ops.MUL: lambda a, b: a*b, Ops.FLOORDIV: lambda a, b: a//b, Ops.FLOORMOD: lambda a, b: a % b,
         Ops.CDIV: cdiv, Ops.CMOD: lambda a, b: a - cdiv(a, b)*b, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
         Ops.CMPEQ: lambda a, b: a == b, Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
         Ops.MAX: max, Ops.SHL: lambda a, b: a << b, Ops.SHR: lambda a, b: a >> b, Ops.WHERE: lambda c, t, f: t if c else f}

def evaluate(e:UOp, vals:dict[str, int]) -> dict[UOp, int|bool]:
  out: dict = {}
  for u in e.toposort():
    if u.op is Ops.CONST: out[u] = u.arg
    elif u.op is Ops.BUFFER: out[u] = vals[u.arg.name]
    elif u.op is Ops.STACK: continue
    elif u.op is Ops.CAST: out[u] = bool(out[u.src[0]]) if u.dtype is dtypes.bool else int(out[u.src[0]])
    else: out[u] = _EVAL[u.op](*[out[s] for s in u.src])
  return out

# ***** expressions lowered into a kernel and run on a device *****

def run_lowered(device:str, exprs:list[UOp], assignments:list[dict[str, int]]) -> list[list[int]]:
  """out[i] = exprs[i] (as int64) in one kernel through the whole codegen, run once per assignment of the Variables."""
  from tinygrad.device import Device, Buffer
  from tinygrad.codegen import get_program
  from tinygrad.uop.ops import ParamArg, KernelInfo
  out = UOp(Ops.PARAM, dtypes.int64, (UOp.const(len(exprs), dtypes.int),), ParamArg(0, dtypes.int64))
  ast = UOp(Ops.SINK, dtypes.void, tuple(out.index(UOp.const(i, dtypes.int)).store(e.cast(dtypes.int64)) for i, e in enumerate(exprs)),
            KernelInfo("exprs"))
  # the kernel takes each Variable as an int argument, as the scheduler passes them
  ast = ast.substitute({v: UOp(Ops.PARAM, v.dtype, v.src, v.arg) for e in exprs for v in e.variables() if v.op is Ops.BUFFER})
  spec = get_program(ast, Device[device].renderer)
  ret = []
  for vals in assignments:
    buf = Buffer(device, len(exprs), dtypes.int64).ensure_allocated()
    Device[device].run(spec, [buf], {k: v for k, v in vals.items() if k in spec.var_names})
    ret.append([int(v) for v in buf.numpy()])
  return ret

def check_lowered(device:str, cases:list[tuple[UOp, UOp, list[dict[str, int]]]], batch:int=25) -> None:
  """Each (e, simplify(e), assignments) case: the simplified expression run on the device equals e evaluated in Python. A kernel
  computes `batch` cases at once, each with Variables of its own (the same name has other bounds in another case)."""
  for b in range(0, len(cases), batch):
    chunk = cases[b:b + batch]
    exprs = [s.substitute({v: Variable(f"{v.arg.name}_{i}", v.vmin, v.vmax) for v in s.variables()}) for i, (_, s, _) in enumerate(chunk)]
    rows = max(len(assigns) for _, _, assigns in chunk)
    # launch r gives each case its r-th assignment (its last one again when it has fewer)
    launches = [{f"{k}_{i}": v for i, (_, _, assigns) in enumerate(chunk) for k, v in assigns[min(r, len(assigns) - 1)].items()}
                for r in range(rows)]
    got = run_lowered(device, exprs, launches)
    for r in range(rows):
      for i, (e, s, assigns) in enumerate(chunk):
        if r >= len(assigns): continue
        want = int(evaluate(e, assigns[r])[e])
        assert got[r][i] == want, f"{s.render(simplify=False)} on {device} at {assigns[r]}: {got[r][i]}, expected {want}"

# ***** random expressions *****

class Builder:
  """Builds a random expression from a source of choices (hypothesis data or random.Random)."""
  def __init__(self, integer, tag:str=""):
    self.integer, self.tag = integer, tag  # integer(lo, hi) -> int in [lo, hi]
  def choice(self, seq): return seq[self.integer(0, len(seq)-1)]
  def variables(self) -> list[UOp]:
    ret = []
    for i in range(self.integer(1, 3)):
      lo = self.choice((0, 0, 0, 1, 2, -1, -5, -20, 7))
      ret.append(Variable(f"v{i}{self.tag}", lo, lo + self.choice((0, 1, 2, 3, 5, 7, 15, 16, 31, 40))))
    return ret
  def leaf(self, vs):
    return self.choice(vs) if self.integer(0, 4) else UOp.const(self.integer(-10, 20))
  def term(self, vs, depth:int) -> UOp:
    if depth <= 0: return self.leaf(vs)
    a = self.term(vs, depth-1)
    k = self.integer(0, 15)
    if k == 0: return a + self.term(vs, depth-1)
    if k == 1: return a - self.term(vs, depth-1)
    if k == 2: return a + self.integer(-8, 16)
    if k == 3: return a * self.choice((2, 3, 4, 8, 16, -1, -2, 0, 1, 5))
    if k == 4: return a * self.term(vs, depth-1)
    if k in (5, 6): return a // self.divisor(vs)
    if k in (7, 8): return a % self.divisor(vs)
    if k == 9: return a.div(self.choice((2, 3, 4, -3, 7)), rounding_mode="trunc")
    if k == 10: return a.fmod(self.choice((2, 3, 4, -3, 7)))
    if k == 11: return a.maximum(self.term(vs, depth-1))
    if k == 12: return a.minimum(self.term(vs, depth-1))
    if k == 13: return self.cond(vs, depth-1).where(a, self.term(vs, depth-1))
    if k == 14: return a & self.choice((1, 3, 7, 15, 255))
    return self.index(vs)
  def divisor(self, vs):
    pos = [v for v in vs if v.vmin > 0]
    if pos and self.integer(0, 3) == 0: return self.choice(pos)
    return UOp.const(self.choice((2, 3, 4, 8, 16, 5, 6, -2, -3, -4, 1)))
  def index(self, vs):
    x = vs[0] * self.choice((1, 2, 4, 8, 16, 3))
    for v in vs[1:]: x = x + v * self.choice((1, 2, 4, 3))
    if self.integer(0, 1): x = x + self.integer(-4, 8)
    if self.integer(0, 1): x = x // self.choice((2, 4, 8, 3, 16))
    if self.integer(0, 1): x = x % self.choice((2, 4, 8, 3, 5))
    return x
  def cond(self, vs, depth:int) -> UOp:
    a = self.term(vs, depth)
    k = self.integer(0, 6)
    if k == 0: return a < self.integer(-10, 40)
    if k == 1: return a < self.term(vs, max(depth-1, 0))
    if k == 2: return a.ne(self.integer(-3, 8))
    if k == 3: return a.eq(self.term(vs, max(depth-1, 0)))
    if k == 4: return a >= self.integer(-5, 20)
    if k == 5: return (a < self.integer(0, 30)) & self.cond(vs, max(depth-1, 0))
    return (a < self.integer(0, 30)) | self.cond(vs, max(depth-1, 0))
  def expr(self) -> tuple[UOp, list[UOp]]:
    vs = self.variables()
    e = self.term(vs, self.integer(1, 4)) if self.integer(0, 3) else self.cond(vs, self.integer(1, 3))
    return e, vs

def assignments(vs:list[UOp], rng:random.Random, limit:int=64) -> list[dict[str, int]]:
  ranges = [range(v.vmin, v.vmax+1) for v in vs]
  total = 1
  for rr in ranges: total *= len(rr)
  if total <= limit: return [dict(zip([v.arg.name for v in vs], p)) for p in itertools.product(*ranges)]
  return [{v.arg.name: rng.randint(v.vmin, v.vmax) for v in vs} for _ in range(limit // 2)]

def check(e:UOp, vs:list[UOp], rng:random.Random) -> None:
  s = e.simplify()
  assert s.simplify() is s, f"simplify is not a fixed point: {s.render(simplify=False)}"
  for vals in assignments(vs, rng):
    ve, vsimp = evaluate(e, vals), evaluate(s, vals)
    assert ve[e] == vsimp[s], f"{e.render(simplify=False)} = {ve[e]} but simplified {s.render(simplify=False)} = {vsimp[s]} at {vals}"
    for vals_of in (ve, vsimp):
      for u, v in vals_of.items():
        assert u.vmin <= v <= u.vmax, f"{u.render(simplify=False)} = {v} outside [{u.vmin}, {u.vmax}] at {vals}"

@FUZZ
@given(st.data())
def test_fuzz_simplify(data):
  b = Builder(lambda lo, hi: data.draw(st.integers(lo, hi)))
  e, vs = b.expr()
  check(e, vs, random.Random(data.draw(st.integers(0, 2**32))))

@FUZZ
@given(st.data())
def test_fuzz_index_expressions(data):
  # the linear index form with // and % on top, the shape the codegen produces most
  b = Builder(lambda lo, hi: data.draw(st.integers(lo, hi)))
  vs = b.variables()
  check(b.index(vs), vs, random.Random(data.draw(st.integers(0, 2**32))))

def test_fuzz_seeded():
  # a fixed corpus (no hypothesis), so a regression shows up as the same expression every run; SYMBOLIC_FUZZ_SEEDED=100000 is a long run
  rng = random.Random(int(os.getenv("SYMBOLIC_FUZZ_SEED", "1234")))
  for _ in range(int(os.getenv("SYMBOLIC_FUZZ_SEEDED", "300"))):
    e, vs = Builder(rng.randint, tag="_s").expr()
    check(e, vs, rng)

# ***** simplified expressions lowered for the devices *****

def _lowered_cases(tag:str, count:int, seed:int) -> list:
  rng, cases = random.Random(seed), []
  for _ in range(count):
    e, vs = Builder(rng.randint, tag=tag).expr()
    cases.append((e, e.simplify(), assignments(vs, rng, limit=8)))
  return cases

# the forms index math takes: floor division and modulo of possibly negative values, truncating division, picks and maxima
x, n, lidx = Variable("x", 0, 100), Variable("n", -50, 50), Variable("lidx0", 0, 3)
FORMS = [x*4 + lidx, (x*4 + lidx)//4, n//4, n % 4, n - 1, (x < 5).where(lidx, 3), x.maximum(lidx), n.div(3, rounding_mode="trunc"),
         n.fmod(3), (n*3 + 7)//-5, n % -4]

@ours_only
def test_forms_on_python_device():
  check_lowered("PYTHON", [(e, e.simplify(), [{"x": xv, "n": nv, "lidx0": lv} for xv, nv, lv in [(3, -7, 2), (50, 9, 1), (0, -50, 0), (100, 50, 3)]])
                           for e in FORMS])

@ours_only
def test_lowered_on_python_device():
  check_lowered("PYTHON", _lowered_cases("_p", 100, 7))

@ours_only
@pytest.mark.cpu
def test_compiled_c():
  from tinygrad.runtime.support.compiler_cpu import find_c_compiler
  from tinygrad.device import CompilerNotFoundError
  try: find_c_compiler()
  except CompilerNotFoundError: pytest.skip("no C compiler")
  check_lowered("CPU", _lowered_cases("_c", 150, 99))
