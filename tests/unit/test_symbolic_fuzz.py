# Proof by fuzzing: random expression trees over 1-3 Variables with random bounds. For every checked assignment of the Variables:
#  - simplify(e) evaluates to the value of e (an independent Python evaluator of the graph, not sym_infer);
#  - every node of e and of simplify(e) lies in its [vmin, vmax];
#  - (ours) the C rendering of simplify(e), evaluated with C semantics (truncating / and %), gives the same value, and so does
#    the same C compiled by a C compiler.
# Example counts are bounded so the file runs in seconds. Long runs: SYMBOLIC_FUZZ_SEEDED=100000 (this file, test_fuzz_seeded) and
# `python benches/bench_symbolic.py --fuzz 100000` (the benchmark's index corpus).
import importlib.util
import itertools
import os
import random
import re
import shutil
import subprocess
import tempfile
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

# ***** a C expression evaluator: C precedence, / and % truncate, comparisons give 0/1 *****

_TOKEN = re.compile(r"\s*(?:(\d+)(?:LL)?|([A-Za-z_]\w*)|(<<|>>|<=|>=|==|!=|[-+*/%<>&|^?:(),]))")
_C_TYPES = {"long", "int", "_Bool", "unsigned", "char", "short"}
_C_BINARY = [("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"), ("*", "/", "%")]
_C_OPS = {"|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b, "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
          "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
          "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "/": cdiv, "%": lambda a, b: a - cdiv(a, b)*b}
_C_FUNCS = {"tg_floordiv": lambda a, b: a//b, "tg_floormod": lambda a, b: a % b, "tg_max": max}

def c_eval(src:str, env:dict[str, int]) -> int:
  toks, pos = [], 0
  while pos < len(src):
    m = _TOKEN.match(src, pos)
    assert m is not None and m.end() > pos, f"bad C at {src[pos:]!r}"
    toks.append(m.group(1) or m.group(2) or m.group(3))
    pos = m.end()
  i = 0
  def peek(): return toks[i] if i < len(toks) else None
  def take(expect=None):
    nonlocal i
    t = toks[i]
    assert expect is None or t == expect, f"expected {expect} got {t} in {src}"
    i += 1
    return t
  def ternary() -> int:
    c = binary(0)
    if peek() == "?":
      take("?")
      t = ternary()
      take(":")
      f = ternary()
      return t if c else f
    return c
  def binary(level:int) -> int:
    if level == len(_C_BINARY): return unary()
    v = binary(level+1)
    while peek() in _C_BINARY[level]:
      op = take()
      v = _C_OPS[op](v, binary(level+1))
    return v
  def unary() -> int:
    if peek() == "-":
      take()
      return -unary()
    if peek() == "(":
      take("(")
      if peek() in _C_TYPES:  # a cast
        names = []
        while peek() != ")": names.append(take())
        take(")")
        v = unary()
        return int(bool(v)) if names == ["_Bool"] else v
      v = ternary()
      take(")")
      return v
    t = take()
    if t.isdigit(): return int(t)
    if t in _C_FUNCS:
      take("(")
      a = ternary()
      take(",")
      b = ternary()
      take(")")
      return _C_FUNCS[t](a, b)
    return env[t]
  v = ternary()
  assert i == len(toks), f"trailing tokens in {src}"
  return v

def test_c_eval():
  assert c_eval("(-7/2)", {}) == -3 and c_eval("(-7%2)", {}) == -1
  assert c_eval("tg_floordiv(-7, 2)", {}) == -4 and c_eval("tg_floormod(-7, 2)", {}) == 1
  assert c_eval("(a<3)?(a*2):(-1LL)", {"a": 2}) == 4 and c_eval("((_Bool)(a))", {"a": 5}) == 1 and c_eval("1+2*3<<1", {}) == 14

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

def check(e:UOp, vs:list[UOp], rng:random.Random, c:bool=IS_OURS) -> None:
  s = e.simplify()
  assert s.simplify() is s, f"simplify is not a fixed point: {s.render(simplify=False)}"
  csrc = None
  if c:
    from tinygrad.uop.render import render_c
    csrc = render_c(s)
  for vals in assignments(vs, rng):
    ve, vsimp = evaluate(e, vals), evaluate(s, vals)
    assert ve[e] == vsimp[s], f"{e.render(simplify=False)} = {ve[e]} but simplified {s.render(simplify=False)} = {vsimp[s]} at {vals}"
    for vals_of in (ve, vsimp):
      for u, v in vals_of.items():
        assert u.vmin <= v <= u.vmax, f"{u.render(simplify=False)} = {v} outside [{u.vmin}, {u.vmax}] at {vals}"
    if csrc is not None:
      assert c_eval(csrc, vals) == int(ve[e]), f"C {csrc} != {ve[e]} at {vals} (from {e.render(simplify=False)})"

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

# ***** the C rendering compiled by a C compiler *****

CC = shutil.which(os.getenv("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")

@ours_only
@pytest.mark.cpu
@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_compiled_c():
  from tinygrad.uop.render import render_c, C_PREAMBLE
  rng = random.Random(99)
  cases = []
  for _ in range(150):
    e, vs = Builder(rng.randint, tag="_c").expr()
    s = e.simplify()
    for vals in assignments(vs, rng, limit=8): cases.append((render_c(s), vals, int(evaluate(e, vals)[e])))
  names = sorted({k for _, vals, _ in cases for k in vals})
  body = [C_PREAMBLE, "#include <stdio.h>", "int main(void) {", f"  long long {', '.join(names)};"]
  for src, vals, _ in cases:
    body.append("  " + " ".join(f"{k} = {v}LL;" for k, v in vals.items()) + f' printf("%lld\\n", (long long)({src}));')
  body.append("  return 0;\n}")
  with tempfile.TemporaryDirectory() as tmp:
    with open(f"{tmp}/t.c", "w") as f: f.write("\n".join(body))
    subprocess.run([CC, "-O1", "-w", "-o", f"{tmp}/t", f"{tmp}/t.c"], check=True, capture_output=True)
    out = subprocess.run([f"{tmp}/t"], check=True, capture_output=True, text=True).stdout.split()
  assert len(out) == len(cases)
  for (src, vals, want), got in zip(cases, out): assert int(got) == want, f"{src} at {vals}: C gives {got}, expected {want}"
