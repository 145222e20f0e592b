# Conformance tests for graph_rewrite: traversal order, fixed points, bottom_up, walk, bpm, BottomUpGate, ctx, endless rewrites, deep graphs
# and exceptions raised in callbacks.
import collections
import contextlib
import importlib.util
import inspect
import os
import signal
import traceback
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, BottomUpGate
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import dtypes

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")
THIS_FILE = os.path.basename(__file__)

def c(v, tag=None): return UOp(Ops.CONST, dtypes.int, arg=v, tag=tag)
def add(a, b): return UOp(Ops.ADD, dtypes.int, (a, b))
def mul(a, b): return UOp(Ops.MUL, dtypes.int, (a, b))
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))
def var(n): return UOp(Ops.SPECIAL, dtypes.int, arg=n)
def sink(*s): return UOp(Ops.SINK, dtypes.void, s)
def negs(x, n):
  for _ in range(n): x = neg(x)
  return x

@contextlib.contextmanager
def time_limit(seconds:int):
  """fail instead of hanging; the alarm fires while Python code (a callback) runs"""
  def handler(signum, frame): raise TimeoutError(f"graph_rewrite did not finish within {seconds}s")
  old = signal.signal(signal.SIGALRM, handler)
  signal.alarm(seconds)
  try: yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)

# ***** module-level callbacks (the reference does not accept closures) *****

_LOG: list = []
def _fold_add(a, b): return c(a.arg + b.arg)
def _fold_mul(a, b): return c(a.arg * b.arg)
def _fold_neg(a): return c(-a.arg)
def _double_neg(x): return x
def _add_zero(x): return x
def _mul_zero(x): return c(0)
def _dec(k): return c(k.arg - 1) if k.arg > 0 else None
def _expand_var(v): return add(c(1), c(2)) if v.arg == "v" else None
def _log_none(x):
  _LOG.append(x)
  return None
def _log_ctx(ctx, x):
  ctx.append(x)
  return None
def _ctx_const(ctx, x): return c(ctx[x.arg]) if x.arg in ctx else None
def _neg_neg_to_var(x): return var("nn")
def _gate_stop(x):
  if x.tag == "stop": raise BottomUpGate()
  return None
def _bump_small(k): return c(k.arg + 100) if k.arg < 100 else None
def _inc(k): return c(k.arg + 1)
def _swap_ab(x): return var("B") if x.arg == "A" else var("A") if x.arg == "B" else None
def _boom(x):
  if x.arg == 13: raise ValueError("boom thirteen")
  return None
def _boom_key(x): return {}["missing"] if x.arg == 13 else None

fold = PatternMatcher([
  (UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("b"))), _fold_add),
  (UPat(Ops.MUL, src=(UPat.cvar("a"), UPat.cvar("b"))), _fold_mul),
  (UPat(Ops.NEG, src=(UPat.cvar("a"),)), _fold_neg),
])
double_neg = PatternMatcher([(UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), _double_neg)])
dec = PatternMatcher([(UPat(Ops.CONST, name="k"), _dec)])
log_all = PatternMatcher([(UPat(GroupOp.All, name="x"), _log_none)])

class TestDefault:
  def test_no_match_is_identity(self):
    g = add(neg(c(1)), var("x"))
    assert graph_rewrite(g, PatternMatcher([(UPat(Ops.MUL, name="x"), _mul_zero)])) is g

  def test_constant_folding_bottom_to_top(self):
    g = add(mul(c(2), c(3)), neg(add(c(1), c(1))))
    assert graph_rewrite(g, fold) is c(4)
    assert graph_rewrite(sink(g, add(c(5), c(5))), fold) is sink(c(4), c(10))

  def test_parent_rebuilt_and_rewritten(self):
    pm = PatternMatcher([
      (UPat(Ops.MUL, src=(UPat(), UPat.const(0)), name="x"), _mul_zero),
      (UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), _add_zero),
    ])
    x = var("x")
    assert graph_rewrite(sink(add(x, mul(var("y"), c(0)))), pm) is sink(x)

  def test_fixed_point_on_node(self):
    assert graph_rewrite(sink(c(3)), dec) is sink(c(0))
    assert graph_rewrite(add(c(2), neg(c(4))), dec) is add(c(0), neg(c(0)))

  def test_fixed_point_through_new_subgraph(self):
    # the replacement's children are rewritten too
    pm = PatternMatcher([(UPat(Ops.SPECIAL, name="v"), _expand_var)]) + fold
    assert graph_rewrite(sink(neg(var("v"))), pm) is sink(c(-3))

  def test_double_neg(self):
    a = var("a")
    for n in range(8): assert graph_rewrite(negs(a, n), double_neg) is negs(a, n % 2)

  def test_children_before_parents(self):
    g = sink(add(neg(c(1)), mul(c(2), neg(c(1)))), c(2))
    _LOG.clear()
    assert graph_rewrite(g, log_all) is g
    assert set(_LOG) == set(g.toposort())
    pos = {u: i for i, u in enumerate(_LOG)}
    for u in _LOG:
      for s in u.src: assert pos[s] < pos[u]

  def test_each_node_once(self):
    shared = add(c(1), c(2))
    g = sink(mul(shared, shared), neg(shared), add(neg(shared), shared))
    _LOG.clear()
    graph_rewrite(g, log_all)
    assert len(_LOG) == len(set(_LOG)) == len(g.toposort())

  def test_each_node_once_with_rewrites(self):
    pm = log_all + fold
    shared = add(c(1), c(2))
    g = sink(mul(shared, shared), neg(shared), add(neg(shared), shared))
    _LOG.clear()
    assert graph_rewrite(g, pm) is sink(c(9), c(-3), c(0))
    counts = collections.Counter(_LOG)
    assert max(counts.values()) == 1
    # originals and the folded intermediates were all visited
    assert shared in counts and c(3) in counts and neg(c(3)) in counts

  def test_shared_result_is_shared(self):
    shared = neg(neg(var("a")))
    out = graph_rewrite(sink(add(shared, c(1)), mul(shared, c(2))), double_neg)
    assert out is sink(add(var("a"), c(1)), mul(var("a"), c(2)))
    assert out.src[0].src[0] is out.src[1].src[0]

  def test_rebuild_keeps_arg_and_tag(self):
    g = UOp(Ops.ADD, dtypes.int, (neg(neg(var("a"))), c(1)), arg="keep", tag="t")
    out = graph_rewrite(g, double_neg)
    assert out is UOp(Ops.ADD, dtypes.int, (var("a"), c(1)), arg="keep", tag="t")

  def test_ctx(self):
    g = sink(add(var("p"), var("q")), var("r"))
    log: list = []
    graph_rewrite(g, PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _log_ctx)]), ctx=log)
    assert sorted(x.arg for x in log) == ["p", "q", "r"]
    out = graph_rewrite(g, PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _ctx_const)]), ctx={"p": 5, "r": 7})
    assert out is sink(add(c(5), var("q")), c(7))
    out = graph_rewrite(g, PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _ctx_const)]) + fold, {"p": 5, "q": 6})
    assert out is sink(c(11), var("r"))

  def test_name_accepted(self):
    assert graph_rewrite(add(c(1), c(2)), fold, name="my rewrite") is c(3)

  def test_input_unchanged(self):
    g = add(mul(c(2), c(3)), c(1))
    before = list(g.toposort())
    graph_rewrite(g, fold)
    assert list(g.toposort()) == before and g is add(mul(c(2), c(3)), c(1))

class TestBottomUp:
  def test_parent_before_children(self):
    pm = PatternMatcher([(UPat(Ops.NEG, src=(UPat(Ops.NEG),), name="x"), _neg_neg_to_var)]) + fold
    g = neg(neg(c(1)))
    assert graph_rewrite(g, pm) is c(1)  # inner NEG folds first
    assert graph_rewrite(g, pm, bottom_up=True) is var("nn")  # outer NEG(NEG) matches first

  def test_order_parents_first(self):
    g = sink(add(neg(c(1)), mul(c(2), neg(c(1)))), c(2))
    _LOG.clear()
    assert graph_rewrite(g, log_all, bottom_up=True) is g
    assert set(_LOG) == set(g.toposort()) and _LOG[0] is g
    # every node is seen after the parent that led to it (a shared node can come before its other parents)
    pos = {u: i for i, u in enumerate(_LOG)}
    for u in _LOG[1:]: assert any(pos[p] < pos[u] for p in _LOG if u in p.src)

  def test_fixed_point(self):
    assert graph_rewrite(sink(c(3), neg(c(2))), dec, bottom_up=True) is sink(c(0), neg(c(0)))
    a = var("a")
    for n in range(8): assert graph_rewrite(negs(a, n), double_neg, bottom_up=True) is negs(a, n % 2)

  def test_rebuilt_parent_revisited(self):
    # after children change, the rebuilt parent is matched again
    g = add(c(1), neg(neg(c(2))))
    assert graph_rewrite(g, double_neg + fold, bottom_up=True) is c(3)

  def test_each_node_once(self):
    shared = add(c(1), c(2))
    g = sink(mul(shared, shared), neg(shared), add(neg(shared), shared))
    _LOG.clear()
    graph_rewrite(g, log_all, bottom_up=True)
    assert len(_LOG) == len(set(_LOG)) == len(g.toposort())

  def test_bottom_up_gate(self):
    pm = PatternMatcher([(UPat(Ops.NEG, name="x"), _gate_stop), (UPat(Ops.CONST, name="k"), _bump_small)])
    stop = UOp(Ops.NEG, dtypes.int, (c(1),), tag="stop")
    g = add(stop, neg(c(2)))
    assert graph_rewrite(g, pm, bottom_up=True) is add(stop, neg(c(102)))
    assert graph_rewrite(sink(stop), pm, bottom_up=True) is sink(stop)
    assert graph_rewrite(sink(neg(c(1))), pm, bottom_up=True) is sink(neg(c(101)))

  def test_bpm_with_pm(self):
    # bpm runs before the children, pm after them
    bpm = PatternMatcher([(UPat(Ops.NEG, src=(UPat(Ops.NEG),), name="x"), _neg_neg_to_var)])
    g = sink(neg(neg(c(1))), add(c(1), c(2)))
    assert graph_rewrite(g, fold, bpm=bpm) is sink(var("nn"), c(3))
    assert graph_rewrite(g, fold) is sink(c(1), c(3))

class TestWalk:
  def test_single_pass(self):
    assert graph_rewrite(sink(c(3)), dec, walk=True) is sink(c(2))
    assert graph_rewrite(sink(c(3), neg(c(0))), dec, walk=True) is sink(c(2), neg(c(0)))

  def test_replacement_not_revisited(self):
    pm = PatternMatcher([(UPat(Ops.SPECIAL, name="v"), _expand_var)]) + fold
    assert graph_rewrite(sink(var("v")), pm, walk=True) is sink(add(c(1), c(2)))
    assert graph_rewrite(sink(var("v")), pm) is sink(c(3))

  def test_children_first(self):
    # rebuilt parents are matched once, after their children
    g = add(mul(c(2), c(3)), neg(add(c(1), c(1))))
    assert graph_rewrite(g, fold, walk=True) is c(4)

  def test_bottom_up_walk_no_descent_into_replacement(self):
    a = var("a")
    assert graph_rewrite(negs(a, 5), double_neg, bottom_up=True, walk=True) is negs(a, 3)
    assert graph_rewrite(sink(negs(a, 2), negs(a, 3)), double_neg, bottom_up=True, walk=True) is sink(a, neg(a))

  def test_each_node_once(self):
    shared = add(c(1), c(2))
    g = sink(mul(shared, shared), neg(shared), add(neg(shared), shared))
    for bu in (False, True):
      _LOG.clear()
      graph_rewrite(g, log_all, walk=True, bottom_up=bu)
      assert len(_LOG) == len(set(_LOG)) == len(g.toposort())

  def test_ctx(self):
    out = graph_rewrite(sink(var("p"), var("q")), PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _ctx_const)]), ctx={"p": 1}, walk=True)
    assert out is sink(c(1), var("q"))

# ***** endless rewrites *****

class TestEndless:
  def test_growing_constant_raises(self):
    pm = PatternMatcher([(UPat(Ops.CONST, name="k"), _inc)])
    with time_limit(60), pytest.raises(RuntimeError):
      graph_rewrite(sink(c(0)), pm)

  @pytest.mark.parametrize("bottom_up", [False, True])
  def test_cycle_raises(self, bottom_up):
    pm = PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _swap_ab)])
    with time_limit(60), pytest.raises(RuntimeError):
      graph_rewrite(sink(var("A")), pm, bottom_up=bottom_up)

  @ours_only
  def test_growing_constant_bottom_up_raises(self):
    # the reference loops forever here
    pm = PatternMatcher([(UPat(Ops.CONST, name="k"), _inc)])
    with time_limit(60), pytest.raises(RuntimeError):
      graph_rewrite(sink(c(0)), pm, bottom_up=True)

  @ours_only
  @pytest.mark.parametrize("bottom_up", [False, True])
  def test_message_names_rule(self, bottom_up):
    line = inspect.currentframe().f_lineno + 1
    pm = PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _swap_ab)])
    with time_limit(60), pytest.raises(RuntimeError) as ei:
      graph_rewrite(sink(var("A")), pm, bottom_up=bottom_up)
    assert f"{THIS_FILE}:{line}" in str(ei.value) + "\n".join(getattr(ei.value, "__notes__", []))
    line = inspect.currentframe().f_lineno + 1
    pm = PatternMatcher([(UPat(Ops.CONST, name="k"), _inc)])
    with time_limit(60), pytest.raises(RuntimeError) as ei:
      graph_rewrite(sink(c(0)), pm, bottom_up=bottom_up)
    assert f"{THIS_FILE}:{line}" in str(ei.value) + "\n".join(getattr(ei.value, "__notes__", []))

  @ours_only
  @pytest.mark.parametrize("bottom_up", [False, True])
  @pytest.mark.parametrize("grow", ["deeper", "wider", "bigger_arg"])
  def test_growth_detected_fast(self, grow, bottom_up):
    # rules that never reach a fixed point because every replacement brings new nodes to rewrite: before the limits on
    # nested replacements and produced nodes these ran for 40-90s and took 4-8 GB
    import resource
    import time
    line = inspect.currentframe().f_lineno + 1
    pm = PatternMatcher([(UPat(Ops.CONST, name="k") if grow != "wider" else UPat(Ops.SPECIAL, name="k"), _GROW[grow])])
    root = sink(var("w") if grow == "wider" else c(0))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    st = time.perf_counter()
    with time_limit(60), pytest.raises(RuntimeError, match="endless rewrite") as ei:
      graph_rewrite(root, pm, bottom_up=bottom_up)
    assert time.perf_counter() - st < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 512 * 1024  # KiB
    assert f"{THIS_FILE}:{line}" in str(ei.value)

  @ours_only
  def test_legit_large_expansion_is_not_growth(self):
    # one rule expanding a single node into 300,000 new nodes is a big rewrite, not an endless one
    out = graph_rewrite(sink(var("big")), PatternMatcher([(UPat(Ops.SPECIAL, arg="big"), _expand)]))
    assert len(out.src[0].src) == 300_000

  def test_usable_after_endless(self):
    pm = PatternMatcher([(UPat(Ops.SPECIAL, name="x"), _swap_ab)])
    with time_limit(60), pytest.raises(RuntimeError):
      graph_rewrite(sink(var("A")), pm)
    assert graph_rewrite(add(c(1), c(2)), fold) is c(3)

def _deeper(k): return add(c(k.arg + 1), var("z"))
def _wider(k): return add(var(k.arg + "a"), var(k.arg + "b"))
def _bigger_arg(k): return c((k.arg,))
_GROW = {"deeper": _deeper, "wider": _wider, "bigger_arg": _bigger_arg}
def _expand(): return UOp(Ops.SINK, dtypes.void, tuple(c(10**9 + i) for i in range(300_000)))

# ***** deep graphs *****

DEPTH = 100_000

class TestDeep:
  @pytest.mark.parametrize("kw", [{}, {"bottom_up": True}, {"walk": True}])
  def test_deep_double_neg(self, kw):
    g = negs(var("a"), DEPTH + 1)
    assert graph_rewrite(g, double_neg, **kw) is neg(var("a"))

  def test_deep_bottom_up_walk(self):
    g = negs(var("a"), DEPTH + 1)
    assert graph_rewrite(g, double_neg, bottom_up=True, walk=True) is negs(var("a"), DEPTH - 1)

  @pytest.mark.parametrize("kw", [{}, {"bottom_up": True}, {"walk": True}])
  def test_deep_fold(self, kw):
    g = c(0)
    for i in range(DEPTH): g = add(g, c(1))
    assert graph_rewrite(g, fold, **kw) is c(DEPTH)

  def test_deep_no_match(self):
    g = negs(var("a"), DEPTH)
    assert graph_rewrite(g, fold) is g

# ***** exceptions in callbacks *****

def _notes_and_msg(e:BaseException) -> str: return str(e) + "\n" + "\n".join(getattr(e, "__notes__", []))

class TestCallbackExceptions:
  @pytest.mark.parametrize("kw", [{}, {"bottom_up": True}, {"walk": True}])
  def test_type_and_traceback(self, kw):
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom)])
    with pytest.raises(ValueError, match="boom thirteen") as ei:
      graph_rewrite(sink(add(c(1), neg(c(13)))), pm, **kw)
    assert type(ei.value) is ValueError
    assert "_boom" in [f.name for f in traceback.extract_tb(ei.tb)]

  def test_key_error_type_kept(self):
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom_key)])
    with pytest.raises(KeyError) as ei:
      graph_rewrite(sink(c(13)), pm)
    assert type(ei.value) is KeyError
    assert "_boom_key" in [f.name for f in traceback.extract_tb(ei.tb)]

  def test_rewrite_direct(self):
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom)])
    with pytest.raises(ValueError, match="boom thirteen") as ei:
      pm.rewrite(c(13))
    assert "_boom" in [f.name for f in traceback.extract_tb(ei.tb)]

  def test_usable_after_exception(self):
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom)]) + fold
    with pytest.raises(ValueError):
      graph_rewrite(add(c(13), c(1)), pm)
    assert graph_rewrite(add(c(11), c(1)), pm) is c(12)

  @ours_only
  @pytest.mark.parametrize("kw", [{}, {"bottom_up": True}, {"walk": True}])
  def test_location_in_notes(self, kw):
    line = inspect.currentframe().f_lineno + 1
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom)])
    with pytest.raises(ValueError) as ei:
      graph_rewrite(sink(c(13)), pm, **kw)
    assert f"{THIS_FILE}:{line}" in _notes_and_msg(ei.value)

  @ours_only
  def test_location_in_notes_direct(self):
    line = inspect.currentframe().f_lineno + 1
    pm = PatternMatcher([(UPat(Ops.CONST, name="x"), _boom)])
    with pytest.raises(ValueError) as ei:
      pm.rewrite(c(13))
    assert f"{THIS_FILE}:{line}" in _notes_and_msg(ei.value)
