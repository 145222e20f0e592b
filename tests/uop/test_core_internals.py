# Tests for mechanisms of the Rust core that the public API relies on: per-node scratch slots shared by nested and
# concurrent traversals, and the vectorcall constructor's argument handling.
import sys
import threading
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes

I = dtypes.int
def c(v): return UOp(Ops.CONST, I, arg=v)
def add(a, b): return UOp(Ops.ADD, I, (a, b))
def mul(a, b): return UOp(Ops.MUL, I, (a, b))
def var(n): return UOp(Ops.SPECIAL, I, arg=n)

def chain(n, leaf):
  x = leaf
  for i in range(n): x = add(mul(x, c(1)), c(i))
  return x

def evaluate(u, env):
  vals = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.SPECIAL: vals[n] = env[n.arg]
    elif n.op is Ops.ADD: vals[n] = vals[n.src[0]] + vals[n.src[1]]
    elif n.op is Ops.MUL: vals[n] = vals[n.src[0]] * vals[n.src[1]]
    else: raise AssertionError(n.op)
  return vals[u]

drop_mul_one = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("x"), UPat(Ops.CONST, arg=1))), lambda x: x)])

class TestNestedTraversals:
  def test_nested_graph_rewrite_over_shared_nodes(self):
    # every outer callback runs an inner graph_rewrite (and a toposort) over the whole shared graph
    x = var("x")
    g = chain(200, x)
    seen: dict = {}
    def outer(ctx, n):
      seen[n] = seen.get(n, 0) + 1
      assert graph_rewrite(g, drop_mul_one) is not None
      assert len(g.toposort()) > 0
      return None
    pm = PatternMatcher([(UPat(Ops.ADD, name="n"), outer)]) + drop_mul_one
    out = graph_rewrite(g, pm, ctx=seen)
    assert all(v == 1 for v in seen.values()), "the outer rewrite saw a node twice"
    assert not any(u.op is Ops.MUL for u in out.toposort())
    assert evaluate(out, {"x": 3}) == evaluate(g, {"x": 3})
    assert out is graph_rewrite(g, drop_mul_one)

  def test_toposort_inside_gate(self):
    g = chain(50, var("y"))
    inner_lengths = []
    def gate(n):
      inner_lengths.append(len(n.toposort()))
      return True
    order = list(g.toposort(gate=gate))
    assert order == list(g.toposort()) and len(order) == len(set(order))
    assert max(inner_lengths) == len(order)

  def test_threads_rewriting_shared_graphs(self):
    x = var("t")
    graphs = [chain(300, x) for _ in range(2)]
    expected = [graph_rewrite(g, drop_mul_one) for g in graphs]
    def yielding(x):
      sys.setswitchinterval(1e-6)
      return x
    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("x"), UPat(Ops.CONST, arg=1))), yielding)])
    results, errors = [None] * 8, []
    def work(i):
      try: results[i] = graph_rewrite(graphs[i % 2], pm)
      except Exception as e: errors.append(e)
    old = sys.getswitchinterval()
    try:
      threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
      for t in threads: t.start()
      for t in threads: t.join()
    finally: sys.setswitchinterval(old)
    assert not errors
    assert all(r is expected[i % 2] for i, r in enumerate(results))

class TestConstructorArguments:
  def test_keywords_and_positionals_mix(self):
    a = UOp(Ops.CONST, I, (), 5)
    assert UOp(Ops.CONST, dtype=I, arg=5) is a and UOp(op=Ops.CONST, dtype=I, src=(), arg=5, tag=None) is a

  @pytest.mark.parametrize("call, message", [
    (lambda: UOp(Ops.CONST, I, (), 1, None, None, 7), "at most 6 arguments"),
    (lambda: UOp(Ops.CONST, I, arg=1, bogus=2), "unexpected keyword argument 'bogus'"),
    (lambda: UOp(Ops.CONST, I, (), 1, arg=2), "multiple values for argument 'arg'"),
    (lambda: UOp(dtype=I), "missing required argument 'op'"),
  ])
  def test_bad_arguments(self, call, message):
    with pytest.raises(TypeError, match=message): call()
