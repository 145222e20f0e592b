#!/usr/bin/env python3
"""Benchmark of the symbolic engine: simplify() over a fixed-seed corpus of random index expressions.

The same file runs unchanged under tinygrad 0.14 and under our Rust-core tinygrad. It only uses the public API (tinygrad.Variable,
Python operators on UOps, UOp.simplify, toposort, render, variables, vmin/vmax) and prints one JSON object to stdout.

The corpus: `--n` (default 2000) expressions over 1-3 Variables drawn from a pool with loop-like bounds, built with `+ * // % < &`
in the shapes index math takes (`(g*16+l)//4%4`, `(a*4+b)//4 < 3 & ...`) plus random trees. It is rebuilt for every timed
repeat with the repeat number in the Variable names, so every repeat simplifies brand-new nodes: no cache (interning, per-node
properties, memoised rules) can turn a repeat into a cache hit. The structure, and so every node count, is the same in every repeat.

Metrics: exprs_per_s (simplify calls per second, median over repeats; higher is better), nodes_before / nodes_after (sum over the
corpus of the node count of each expression before / after simplify; lower after is better; the ratio column of compare.py is
ours/ref for these, so <= 1.00x is the goal for nodes_after), folded_to_const (expressions that simplified to a single CONST).

  python benches/bench_symbolic.py                  # full corpus, 5 repeats
  python benches/bench_symbolic.py --quick          # 300 expressions, 2 repeats
  python benches/bench_symbolic.py --fuzz 100000    # long correctness run: check simplify against the original on random inputs
  python benches/bench_symbolic.py --dump           # every corpus expression and its simplified form, to diff two implementations
"""
from __future__ import annotations
import argparse
import gc
import json
import platform
import random
import statistics
import sys
import time

import tinygrad
from tinygrad import Variable

# ***** the corpus *****

# (min, max) bounds of the Variable pool: loop indices [0, n-1] and a few symbolic sizes [1, n]
BOUNDS = ((0, 1), (0, 2), (0, 3), (0, 7), (0, 15), (0, 31), (0, 63), (0, 255), (1, 8), (1, 64), (0, 1023), (2, 9))
DIVISORS = (2, 2, 3, 4, 4, 8, 16, 5, 6, 32)
MULS = (2, 3, 4, 4, 8, 16, 32, 64, 5, -1, 1)

class Gen:
  """Random expression builder; every call only uses the public operator API."""
  def __init__(self, rng:random.Random, tag:str):
    self.rng, self.tag = rng, tag

  def variables(self) -> list:
    r = self.rng
    return [Variable(f"{n}{self.tag}", *r.choice(BOUNDS)) for n in r.sample(("gidx0", "gidx1", "lidx0", "lidx1", "ridx0", "ridx1"), r.randint(1, 3))]

  def leaf(self, vs:list):
    r = self.rng
    return r.choice(vs) if r.random() < 0.85 else r.randint(0, 12)

  def term(self, vs:list, depth:int):
    """A random integer tree."""
    r = self.rng
    if depth <= 0: return self.leaf(vs)
    k = r.random()
    def sub():
      x = self.term(vs, depth-1)
      return x if not isinstance(x, int) else r.choice(vs)
    if k < 0.25: return sub() + self.term(vs, depth-1)
    if k < 0.35: return sub() + r.randint(-8, 16)
    if k < 0.55: return sub() * r.choice(MULS)
    if k < 0.70: return sub() // r.choice(DIVISORS)
    if k < 0.85: return sub() % r.choice(DIVISORS)
    if k < 0.90: return sub() & r.choice((1, 3, 7, 15))
    return self.index(vs)

  def index(self, vs:list):
    """A linear combination of the variables with a // and a % on top, the shape of unrolled and reshaped index math."""
    r = self.rng
    x = vs[0] * r.choice((1, 2, 4, 8, 16, 3, 12))
    for v in vs[1:]: x = x + v * r.choice((1, 1, 2, 4, 8, 3))
    if r.random() < 0.4: x = x + r.randint(-4, 8)
    d = r.choice(DIVISORS)
    if r.random() < 0.5: x = x // d
    if r.random() < 0.6: x = x % r.choice(DIVISORS)
    if r.random() < 0.3: x = x * r.choice((2, 4, 16)) + vs[-1] % r.choice((2, 4))
    return x

  def cond(self, vs:list):
    r = self.rng
    x = self.term(vs, r.randint(1, 3))
    if isinstance(x, int): x = r.choice(vs)
    if r.random() < 0.75: return x < r.randint(-2, 40)
    return x < self.term(vs, 1)

  def expr(self):
    vs = self.variables()
    r = self.rng
    k = r.random()
    if k < 0.35: e = self.index(vs)
    elif k < 0.75: e = self.term(vs, r.randint(2, 4))
    elif k < 0.9: e = self.cond(vs) & self.cond(vs)
    else: e = self.cond(vs)
    return e if not isinstance(e, int) else vs[0] + e

def make_corpus(seed:int, n:int, tag:str) -> list:
  g = Gen(random.Random(seed), tag)
  return [g.expr() for _ in range(n)]

def node_count(e) -> int: return len(e.toposort())

# ***** timing *****

def simplify_all(corpus:list) -> list: return [e.simplify() for e in corpus]

def timed(fn, *args):
  gc.collect()
  gc.disable()
  try:
    t0 = time.perf_counter()
    ret = fn(*args)
    dt = time.perf_counter() - t0
  finally: gc.enable()
  return dt, ret

def run(args) -> dict:
  # warm-up on a separate small corpus: compiles lazily built matchers and warms the interpreter
  simplify_all(make_corpus(args.seed + 999, 50, "_warm"))
  samples: dict[str, list[float]] = {}
  counts: dict[str, int] = {}
  for r in range(args.repeats):
    corpus = make_corpus(args.seed, args.n, f"_r{r}")
    dt, out = timed(simplify_all, corpus)
    samples.setdefault("exprs_per_s", []).append(len(corpus) / dt)
    samples.setdefault("mean_simplify_us", []).append(dt / len(corpus) * 1e6)
    if r == 0:
      counts["nodes_before"] = sum(node_count(e) for e in corpus)
      counts["nodes_after"] = sum(node_count(e) for e in out)
      counts["folded_to_const"] = sum(len(e.src) == 0 and type(e.arg).__name__ in ("int", "bool", "float", "ConstFloat") for e in out)
    del corpus, out
  try:
    from importlib.metadata import version
    dist_version = version("tinygrad")
  except Exception: dist_version = None
  metrics: dict[str, float] = {k: statistics.median(v) for k, v in samples.items()}
  metrics.update(counts)
  return {
    "script": "bench_symbolic",
    "implementation": "ours" if "tinygrad._core" in sys.modules else "tinygrad",
    "tinygrad_version": getattr(tinygrad, "__version__", None) or dist_version,
    "tinygrad_path": getattr(tinygrad, "__file__", None),
    "python": platform.python_version(),
    "repeats": args.repeats,
    "params": {"n": args.n, "seed": args.seed},
    "metrics": metrics,
    "samples": samples,
  }

# ***** long fuzz mode *****

def _cdiv(a:int, b:int) -> int: return abs(a)//abs(b)*(1 if (a < 0) == (b < 0) else -1)
_EVAL = {"ADD": lambda a, b: a+b, "MUL": lambda a, b: a*b, "FLOORDIV": lambda a, b: a//b, "FLOORMOD": lambda a, b: a % b,
         "CDIV": _cdiv, "CMOD": lambda a, b: a - _cdiv(a, b)*b, "CMPLT": lambda a, b: a < b, "CMPNE": lambda a, b: a != b,
         "CMPEQ": lambda a, b: a == b, "AND": lambda a, b: a & b, "OR": lambda a, b: a | b, "XOR": lambda a, b: a ^ b,
         "MAX": max, "SHL": lambda a, b: a << b, "SHR": lambda a, b: a >> b, "NEG": lambda a: -a, "WHERE": lambda c, t, f: t if c else f}

def evaluate(e, vals:dict[str, int]):
  """The value of e with Python semantics, by walking the graph (independent of simplify, sym_infer and the renderers)."""
  cache: dict = {}
  for u in e.toposort():
    name = u.op.name
    if name == "CONST": v = u.arg
    elif name in ("BUFFER", "PARAM"): v = vals[u.arg.name]
    elif name == "AFTER": v = cache[u.src[0]]
    elif name in ("STACK", "STORE"): v = None
    elif name == "CAST": v = bool(cache[u.src[0]]) if u.dtype.name == "bool" else int(cache[u.src[0]])
    else: v = _EVAL[name](*[cache[x] for x in u.src])
    cache[u] = v
  return cache[e]

def fuzz(args) -> int:
  """For args.fuzz expressions, checks on random in-range inputs that simplify(e) evaluates like e and that both values lie in
  [vmin, vmax]. Prints a JSON summary; returns the number of failing expressions."""
  rng = random.Random(args.seed)
  mismatches, checked, points, t0 = 0, 0, 0, time.perf_counter()
  batch = 0
  while checked < args.fuzz:
    corpus = make_corpus(args.seed * 7919 + batch, min(1000, args.fuzz - checked), f"_f{batch}")
    batch += 1
    for e in corpus:
      s = e.simplify()
      vs = {v.arg.name: v for v in e.variables()}
      for _ in range(args.fuzz_points):
        vals = {name: rng.randint(v.vmin, v.vmax) for name, v in vs.items()}
        a, b = evaluate(e, vals), evaluate(s, vals)
        points += 1
        if a != b or not (e.vmin <= a <= e.vmax) or not (s.vmin <= b <= s.vmax):
          mismatches += 1
          if mismatches <= 10:
            print(f"MISMATCH at {vals}: {e.render(simplify=False)} = {a} in [{e.vmin}, {e.vmax}], simplified {s.render(simplify=False)} = {b} "
                  f"in [{s.vmin}, {s.vmax}]", file=sys.stderr)
          break
      checked += 1
    del corpus
  print(json.dumps({"fuzz_expressions": checked, "points_checked": points, "mismatches": mismatches, "seed": args.seed,
                    "seconds": round(time.perf_counter() - t0, 1), "implementation": "ours" if "tinygrad._core" in sys.modules else "tinygrad"}))
  return mismatches

def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--n", type=int, default=None, help="expressions in the corpus (default 2000, --quick 300)")
  p.add_argument("--repeats", type=int, default=None, help="timed runs (default 5, --quick 2)")
  p.add_argument("--seed", type=int, default=1337)
  p.add_argument("--quick", action="store_true")
  p.add_argument("--fuzz", type=int, default=0, help="instead of timing: check this many random expressions for mismatches")
  p.add_argument("--fuzz-points", type=int, default=8, help="random assignments checked per expression in --fuzz mode")
  p.add_argument("--dump", action="store_true", help="instead of timing: print `expression => simplified` for every corpus expression")
  p.add_argument("--indent", type=int, default=None)
  args = p.parse_args(argv)
  if args.n is None: args.n = 300 if args.quick else 2000
  if args.repeats is None: args.repeats = 2 if args.quick else 5
  if args.fuzz: return 1 if fuzz(args) else 0
  if args.dump:
    for e in make_corpus(args.seed, args.n, ""): print(f"{e.render(simplify=False)} => {e.simplify().render(simplify=False)}")
    return 0
  print(json.dumps(run(args), indent=args.indent))
  return 0

if __name__ == "__main__":
  sys.exit(main())
