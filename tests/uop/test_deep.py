# Hardening: patterns and graphs 100,000 levels deep go through everything the API offers without crashing the core.
# Each scenario runs in a subprocess, so a native stack overflow (SIGSEGV) fails its test instead of killing pytest.
import importlib.util
import subprocess
import sys
import textwrap
import pytest

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="the reference recurses natively on deep patterns")

PRELUDE = """
import pickle, sys, weakref
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops
from tinygrad.dtype import dtypes
DEPTH = 100_000
x = UOp(Ops.SPECIAL, dtypes.int, arg="x")
one = UOp(Ops.CONST, dtypes.int, arg=1)
def chain(n):
  u = x
  for _ in range(n): u = UOp(Ops.ADD, dtypes.int, (u, one))
  return u
"""

def run(body:str, timeout:int=60) -> str:
  p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body) + "\nprint('done')"], capture_output=True, text=True, timeout=timeout)
  assert p.returncode == 0, f"exit code {p.returncode}\n{p.stderr[-3000:]}"
  assert p.stdout.strip().endswith("done"), p.stdout[-2000:]
  return p.stdout

@ours_only
class TestDeepUPat:
  def test_build_compile_drop(self):
    # the reproducer: 10,000 levels crashed PatternMatcher, 50,000 crashed the drop
    run("""
    class Marker: pass
    m = Marker()
    p = UPat(arg=m)
    for _ in range(DEPTH): p = UPat(Ops.ADD, src=(p, UPat()))
    pm = PatternMatcher([(p, lambda: None)])
    assert len(pm) == 1 and "Ops.ADD" in repr(p)
    r = weakref.ref(m)
    del pm, p, m
    assert r() is None  # the whole pattern was freed
    """)

  def test_match_and_rewrite_with_deep_pattern(self):
    run("""
    p = UPat.var("leaf")
    for _ in range(DEPTH): p = UPat(Ops.ADD, src=(p, UPat(Ops.CONST, arg=1)))
    pm = PatternMatcher([(p, lambda leaf: leaf.replace(arg="matched"))])
    u = chain(DEPTH)
    assert pm.rewrite(u) is UOp(Ops.SPECIAL, dtypes.int, arg="matched")
    assert pm.rewrite(chain(DEPTH - 1)) is None  # one level short: no match
    # in a graph rewrite every node of the chain would try the deep pattern (quadratic): match at a SINK on top only
    pm = PatternMatcher([(UPat(Ops.SINK, src=(p,)), lambda leaf: leaf.replace(arg="matched"))])
    for kw in ({}, {"bottom_up": True}):
      assert graph_rewrite(u.sink(), pm, **kw) is UOp(Ops.SPECIAL, dtypes.int, arg="matched")
    """)

  def test_deep_alternations_permutations_and_repeats(self):
    run("""
    p = UPat.var("leaf")
    for i in range(DEPTH):
      if i % 3 == 0: p = UPat.any(UPat(Ops.MUL, src=(p, UPat())), UPat(Ops.ADD, src=[UPat(Ops.CONST, arg=1), p]))
      elif i % 3 == 1: p = UPat(Ops.ADD, src=[p, UPat(Ops.CONST)])
      else: p = UPat(Ops.ADD, src=(p, UPat(Ops.CONST, arg=1)))
    assert PatternMatcher([(p, lambda leaf: leaf)]).rewrite(chain(DEPTH)) is x
    q = UPat(Ops.SPECIAL, name="v")
    for _ in range(DEPTH): q = UPat(Ops.ADD, src=q)  # src=UPat: every source matches
    u = x
    for _ in range(DEPTH): u = UOp(Ops.ADD, dtypes.int, (u,))
    assert PatternMatcher([(q, lambda v: v.replace(arg="y"))]).rewrite(u) is x.replace(arg="y")
    """)

  def test_shared_subpatterns_compile_once(self):
    # a pattern DAG whose tree would have 2**200 nodes
    run("""
    p = UPat(Ops.SPECIAL, name="s")
    for _ in range(200): p = UPat(Ops.ADD, src=(p, p))
    pm = PatternMatcher([(p, lambda s: s)])
    assert pm.rewrite(x) is None
    """)

  def test_pickle_is_a_clear_error_or_round_trip(self):
    run("""
    p = UPat()
    for _ in range(DEPTH): p = UPat(Ops.ADD, src=(p, UPat()))
    try: q = pickle.loads(pickle.dumps(p))
    except RecursionError: pass
    else: assert repr(q) == repr(p)
    """)

@ours_only
class TestDeepUOp:
  def test_everything_on_a_deep_graph(self):
    run("""
    u = chain(DEPTH)
    assert len(u.toposort()) == DEPTH + 2
    assert pickle.loads(pickle.dumps(u)) is u
    r = repr(u)
    assert str(u) == r and len(r) < 300 * DEPTH, len(r)
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat(Ops.CONST, arg=1))), lambda a: a)])
    for kw in ({}, {"bottom_up": True}, {"walk": True}):
      out = graph_rewrite(u, pm, **kw)
      assert out is (x if not kw.get("walk") else out) and len(out.toposort()) <= DEPTH + 2
    y = UOp(Ops.SPECIAL, dtypes.int, arg="y")
    assert u.substitute({x: y}) is chain(DEPTH).substitute({x: y})
    assert u.substitute({x: y}).toposort().__contains__(y)
    refs = [weakref.ref(n) for n in list(u.toposort())[::1000]]
    del u, out
    assert all(w() is None or w() is x or w() is one for w in refs)
    """)

  def test_deeply_nested_args_intern_and_compare(self):
    run("""
    def nest(n):
      a = ("leaf", 1.5)
      for i in range(n): a = (a, i % 3)
      return a
    u = UOp(Ops.NOOP, dtypes.int, arg=nest(DEPTH))
    assert UOp(Ops.NOOP, dtypes.int, arg=nest(DEPTH)) is u
    assert UOp(Ops.NOOP, dtypes.int, arg=nest(DEPTH - 1)) is not u
    v = UOp(Ops.NOOP, dtypes.int, arg=(nest(DEPTH), -0.0))
    assert v is not UOp(Ops.NOOP, dtypes.int, arg=(nest(DEPTH), 0.0))  # -0.0 and 0.0 stay apart at any depth
    r = weakref.ref(u)
    del u
    assert r() is None
    """)

  def test_deep_repr_defines_every_reference(self):
    out = run("""
    import re
    u = chain(150)
    r = repr(u)
    used, defined = set(re.findall(r"\\bx(\\d+)(?!:=)\\b", r)), set(re.findall(r"\\bx(\\d+):=", r))
    assert used <= defined, used - defined
    print(max(len(line) - len(line.lstrip()) for line in r.splitlines()))
    """)
    assert int(out.split()[0]) <= 2 * 64 + 2  # indentation stops growing at REPR_MAX_DEPTH levels
