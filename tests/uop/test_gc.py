# Conformance tests for memory management: the interning cache holds no strong references, acyclic graphs are freed by refcounting alone,
# cycles through Python attributes are collected by the gc, and building and dropping many graphs keeps RSS flat.
import contextlib
import gc
import importlib.util
import os
import time
import weakref
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")

def c(v, dt=dtypes.int): return UOp(Ops.CONST, dt, arg=v)
def add(a, b): return UOp(Ops.ADD, dtypes.int, (a, b))
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))
def var(n): return UOp(Ops.SPECIAL, dtypes.int, arg=n)
def sink(*s): return UOp(Ops.SINK, dtypes.void, s)

@contextlib.contextmanager
def gc_disabled():
  was = gc.isenabled()
  gc.disable()
  try: yield
  finally:
    if was: gc.enable()

def rss_bytes() -> int:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

class TestRefcounting:
  def test_created_and_freed_nodes_leave_no_allocation_behind(self):
    # a node's instance dict is created on first use; none may be allocated (and leaked) with the node
    import sys
    def churn(n, base):
      for i in range(n): c(base + i)
    churn(1000, 10**12)
    gc.collect()
    before = sys.getallocatedblocks()
    churn(20000, 2 * 10**12)
    gc.collect()
    assert sys.getallocatedblocks() - before < 1000

  def test_instance_dict_freed_with_node(self):
    # pyo3 0.28 emptied a dying node's __dict__ but kept a reference to it: every node whose cached properties were
    # used leaked its dict
    import sys
    u = UOp(Ops.CONST, dtypes.int, arg=987_654_321) + 1
    _ = u.vmin
    d = u.__dict__
    held = sys.getrefcount(d)
    del u
    assert sys.getrefcount(d) == held - 1

  def test_instance_dict_is_created_on_first_use(self):
    u = c(10**12 + 7)
    assert u.__dict__ == {}
    u.note = 1
    assert u.__dict__ == {"note": 1} and u.note == 1

  def test_leaf_freed_on_del(self):
    with gc_disabled():
      u = var("gc_leaf")
      r = weakref.ref(u)
      del u
      assert r() is None

  def test_graph_freed_on_del(self):
    with gc_disabled():
      g = sink(add(neg(var("gc_a")), c(123456)), neg(var("gc_a")))
      refs = [weakref.ref(x) for x in g.toposort()]
      assert all(r() is not None for r in refs)
      del g
      assert all(r() is None for r in refs)

  def test_children_kept_alive_by_parent(self):
    with gc_disabled():
      child = var("gc_child")
      parent = neg(child)
      rc = weakref.ref(child)
      del child
      assert rc() is not None and parent.src[0] is rc()
      del parent
      assert rc() is None

  def test_outside_reference_keeps_subgraph(self):
    with gc_disabled():
      keep = add(var("gc_k"), c(98765))
      g = neg(neg(keep))
      rg, rk = weakref.ref(g), weakref.ref(keep)
      del g
      assert rg() is None and rk() is keep
      assert neg(neg(keep)).src[0].src[0] is keep

  def test_recreate_after_death(self):
    with gc_disabled():
      u = UOp(Ops.NOOP, dtypes.int, arg=("gc_recreate", 1))
      r = weakref.ref(u)
      u.marker = "old"
      del u
      assert r() is None
      v = UOp(Ops.NOOP, dtypes.int, arg=("gc_recreate", 1))
      assert v.arg == ("gc_recreate", 1) and v.op is Ops.NOOP
      assert not hasattr(v, "marker")  # a fresh node, not a resurrected one
      assert r() is None

  def test_arg_and_tag_released_with_node(self):
    class Key:
      def __init__(self, v): self.v = v
      def __eq__(self, o): return type(o) is Key and o.v == self.v
      def __hash__(self): return hash(self.v)
    with gc_disabled():
      a, t = Key("gc_arg"), Key("gc_tag")
      ra, rt = weakref.ref(a), weakref.ref(t)
      u = UOp(Ops.NOOP, dtypes.int, arg=a, tag=t)
      del a, t
      assert ra() is not None and rt() is not None and u.arg.v == "gc_arg"  # the node holds its arg and tag
      del u
      assert ra() is None and rt() is None

  def test_weak_key_dictionary_entry_removed(self):
    with gc_disabled():
      d: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
      u = var("gc_wkd")
      d[u] = "x"
      assert len(d) == 1
      del u
      assert len(d) == 0

  def test_deep_chain_freed(self):
    with gc_disabled():
      x = var("gc_chain")
      for _ in range(1_000_000): x = neg(x)
      r = weakref.ref(x)
      del x
      assert r() is None
    # the cache is usable afterwards and the chain is really gone
    assert neg(var("gc_chain")).src[0] is var("gc_chain")

class TestNotGcTracked:
  # UOps form DAGs and are freed by reference counting alone; they are not tracked by the cyclic GC, which would walk
  # every live node on each collection (see UOp's docs). A cycle through a node's attributes is therefore not collected.
  @ours_only
  def test_uops_are_not_gc_tracked(self):
    u = neg(var("gc_untracked"))
    assert not gc.is_tracked(u)

  def test_cached_properties_do_not_keep_nodes_alive(self):
    with gc_disabled():
      g = add(neg(var("gc_cached")), c(123_457))
      assert len(g.backward_slice) == 3
      refs = [weakref.ref(x) for x in g.toposort()]
      del g
      assert all(r() is None for r in refs)

class TestRewriteDoesNotLeak:
  def test_intermediates_freed(self):
    with gc_disabled():
      # constants no other test uses, so nothing else keeps them alive
      g = sink(*[add(c(7_000_000 + i), c(7_100_000 + i)) for i in range(50)])
      out = graph_rewrite(g, pm_fold)
      assert out is sink(*[c(14_100_000 + 2 * i) for i in range(50)])
      refs = [weakref.ref(x) for x in g.toposort()] + [weakref.ref(x) for x in out.toposort()]
      del g, out
      assert all(r() is None for r in refs)

  def test_ctx_not_retained(self):
    class Ctx(dict): pass
    with gc_disabled():
      ctx = Ctx(z=5)
      rc = weakref.ref(ctx)
      out = graph_rewrite(sink(var("z")), pm_ctx, ctx=ctx)
      assert out is sink(c(5))
      del ctx
      assert rc() is None

def _fold(a, b): return c(a.arg + b.arg)
def _from_ctx(ctx, x): return c(ctx[x.arg]) if x.arg in ctx else None
pm_fold = PatternMatcher([(UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("b"))), _fold)])
pm_ctx = PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _from_ctx)])

class TestRSS:
  @pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
  def test_million_small_graphs_rss_flat(self):
    # one million graphs of fresh nodes; if the cache kept nodes or entries alive this would grow by well over 100MB
    # NOTE: takes ~10s on the reference implementation
    n = 1_000_000
    for i in range(50_000): add(c(i), c(i))
    gc.collect()
    before = rss_bytes()
    st = time.perf_counter()
    for i in range(n): add(c(i), c(i))
    elapsed = time.perf_counter() - st
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 32 * 1024 * 1024, f"RSS grew by {grown / 1e6:.1f} MB over {n} graphs"
    if IS_OURS: assert elapsed < 20, f"{n} graphs took {elapsed:.1f}s"

  @pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
  @pytest.mark.parametrize("use,n", [(lambda u: u.vmin, 60_000), (lambda u: (u.vmin, u.vmax), 60_000),
                                     (lambda u: u.simplify(), 20_000), (lambda u: u.render(), 20_000)])
  def test_nodes_with_cached_properties_rss_flat(self, use, n):
    # each new node gets an instance dict holding its cached properties; a leaked dict was ~250 bytes per node
    x = UOp.variable("gc_rss_x", 0, 100)
    for i in range(2000): use(x * 2 + (10**9 + i))
    gc.collect()
    before = rss_bytes()
    for i in range(n): use(x * 2 + (2 * 10**9 + i))
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 3 * 1024 * 1024, f"RSS grew by {grown / 1e6:.1f} MB over {n} nodes with cached properties"
