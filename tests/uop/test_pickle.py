# Conformance tests for pickling UOps, UPats and PatternMatchers, in-process and across a multiprocessing 'spawn' Pool.
import copy
import gc
import importlib.util
import multiprocessing
import pickle
import weakref
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")

def c(v, dt=dtypes.int, tag=None): return UOp(Ops.CONST, dt, arg=v, tag=tag)
def add(a, b): return UOp(Ops.ADD, dtypes.int, (a, b))
def mul(a, b): return UOp(Ops.MUL, dtypes.int, (a, b))
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))
def var(n): return UOp(Ops.SPECIAL, dtypes.int, arg=n)
def sink(*s): return UOp(Ops.SINK, dtypes.void, s)
def roundtrip(x, protocol=pickle.HIGHEST_PROTOCOL): return pickle.loads(pickle.dumps(x, protocol=protocol))

def summary(u:UOp) -> list[tuple]:
  """a process-independent description of a graph: (op name, dtype name, arg, tag, src positions) in toposort order"""
  topo = list(u.toposort())
  pos = {x: i for i, x in enumerate(topo)}
  return [(x.op.name, x.dtype.name, x.arg, x.tag, tuple(pos[s] for s in x.src)) for x in topo]

def sample_graph(k:int=0) -> UOp:
  shared = add(c(k), var(f"v{k}"))
  return sink(mul(shared, shared), neg(shared).rtag("t"), UOp(Ops.CAST, dtypes.float, (shared,), arg=dtypes.float),
              UOp(Ops.NOOP, dtypes.void, arg=(k, "s", None, 2.5)), c(1.5, dtypes.float))

class TestUOpPickle:
  @pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
  def test_roundtrip_is_same_object(self, protocol):
    for u in [c(1), var("x"), add(c(1), c(2)), sample_graph(), c(3, tag="t"), c(2.5, dtypes.float)]:
      assert roundtrip(u, protocol) is u

  def test_containers(self):
    g = sample_graph(1)
    nodes = list(g.toposort())
    assert all(a is b for a, b in zip(roundtrip(nodes), nodes))
    d = roundtrip({u: i for i, u in enumerate(nodes)})
    assert all(d[u] == i for i, u in enumerate(nodes))
    t = roundtrip((g, g.src[0], g))
    assert t[0] is g and t[1] is g.src[0] and t[2] is g

  def test_unpickle_when_original_is_gone(self):
    data = pickle.dumps(sample_graph(7))
    expected = summary(sample_graph(7))
    gc.collect()
    u = pickle.loads(data)
    assert summary(u) == expected
    assert u is sample_graph(7)
    assert pickle.loads(data) is u

  def test_args_and_tags_survive(self):
    u = UOp(Ops.NOOP, dtypes.int, (c(1),), arg=(1, "a", (2.5, None), dtypes.float, Ops.ADD), tag=("t", 1))
    r = roundtrip(u)
    assert r is u
    assert r.arg == (1, "a", (2.5, None), dtypes.float, Ops.ADD) and r.tag == ("t", 1)

  def test_copy_and_deepcopy(self):
    g = sample_graph(2)
    assert copy.copy(g) is g
    assert copy.deepcopy(g) is g
    assert copy.deepcopy([g, g.src[0]])[1] is g.src[0]

  @ours_only
  def test_deep_chain(self):
    # the reference's recursive __reduce__ hits RecursionError here
    x = var("deep")
    for _ in range(100_000): x = neg(x)
    data = pickle.dumps(x)
    assert pickle.loads(data) is x
    r = weakref.ref(x)
    del x
    assert r() is None
    y = pickle.loads(data)
    assert y.op is Ops.NEG and len(y.toposort()) == 100_001

  @ours_only
  def test_special_float_args(self):
    for v in [float("nan"), -0.0, 0.0, float("inf")]:
      u = c(v, dtypes.float)
      assert roundtrip(u) is u
    assert roundtrip(c(-0.0, dtypes.float)) is not c(0.0, dtypes.float)

# ***** UPat / PatternMatcher *****

def _fold_add(a, b): return c(a.arg + b.arg)
def _double_neg(x): return x
def _with_ctx(ctx, x): return c(ctx[x.arg]) if x.arg in ctx else None

def make_pm() -> PatternMatcher:
  return PatternMatcher([
    (UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("b"))), _fold_add),
    (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), _double_neg),
    (UPat(Ops.SPECIAL, name="x"), _with_ctx),
  ])

class TestPatternPickle:
  def test_upat_roundtrip(self):
    p = UPat(Ops.ADD, dtypes.int, src=[UPat.cvar("a"), UPat.var("b")], name="root")
    r = roundtrip(p)
    assert r.location == p.location
    u = add(var("q"), c(2))
    pm, rpm = PatternMatcher([(p, _fold_add_named)]), PatternMatcher([(r, _fold_add_named)])
    assert pm.rewrite(u) is rpm.rewrite(u) is var("q2")

  def test_pattern_matcher_roundtrip(self):
    pm = make_pm()
    pm2 = roundtrip(pm)
    assert len(pm2.patterns) == 3
    assert [p.location for p, _ in pm2.patterns] == [p.location for p, _ in pm.patterns]
    g = sink(neg(neg(add(c(1), c(2)))), var("z"), var("w"))
    expected = sink(c(3), c(9), var("w"))
    assert graph_rewrite(g, pm, ctx={"z": 9}) is expected
    assert graph_rewrite(g, pm2, ctx={"z": 9}) is expected
    assert pm2.rewrite(add(c(4), c(5))) is c(9)

  def test_pattern_matcher_sum_roundtrip(self):
    pm = make_pm() + PatternMatcher([(UPat(Ops.MUL, name="x"), _mul_to_var)])
    pm2 = roundtrip(pm)
    assert pm2.rewrite(mul(c(1), c(2))) is var("was_mul")
    assert pm2.rewrite(add(c(1), c(2))) is c(3)

def _fold_add_named(root, a, b): return var(f"{b.arg}{a.arg}")
def _mul_to_var(x): return var("was_mul")

# ***** across processes *****

def _worker_build(k:int) -> UOp: return sample_graph(k)
def _worker_describe(u:UOp) -> tuple[UOp, list[tuple]]: return u, summary(u)
def _worker_rewrite(args) -> UOp:
  pm, g, ctx = args
  return graph_rewrite(g, pm, ctx=ctx)
def _worker_chain(n:int) -> UOp:
  x = var("chain")
  for _ in range(n): x = neg(x)
  return x

TIMEOUT = 60  # a crashed worker makes Pool wait forever; fail instead

@pytest.fixture(scope="module")
def spawn_pool():
  with multiprocessing.get_context("spawn").Pool(2) as pool: yield pool

class TestSpawnPool:
  def test_build_in_worker(self, spawn_pool):
    got = spawn_pool.map_async(_worker_build, range(4)).get(TIMEOUT)
    for k, u in enumerate(got):
      assert u is sample_graph(k)
      assert summary(u) == summary(sample_graph(k))

  def test_send_and_receive(self, spawn_pool):
    graphs = [sample_graph(k) for k in range(10, 14)] + [c(1), neg(neg(var("x")))]
    for g, (back, desc) in zip(graphs, spawn_pool.map_async(_worker_describe, graphs).get(TIMEOUT)):
      assert back is g
      assert desc == summary(g)

  def test_rewrite_in_worker(self, spawn_pool):
    g = sink(neg(neg(add(c(1), c(2)))), var("z"))
    out = spawn_pool.map_async(_worker_rewrite, [(make_pm(), g, {"z": 4}), (make_pm(), g, {})]).get(TIMEOUT)
    assert out[0] is sink(c(3), c(4))
    assert out[1] is sink(c(3), var("z"))

  def test_chain_from_worker(self, spawn_pool):
    x = spawn_pool.apply_async(_worker_chain, (1000,)).get(TIMEOUT)
    assert x is _worker_chain(1000)
