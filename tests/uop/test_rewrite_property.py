# Property tests: PatternMatcher and graph_rewrite on random small DAGs and random UPats, compared against the pure-Python models below.
#
# The matcher model implements the UPat semantics: op/dtype sets, arg ==, consistent name binding, tuple src (in order, equal length or
# prefix with allow_any_len), list src (any permutation), single-UPat src (every child), None src (unchecked) and UPat.any alternation.
# The graph_rewrite models follow the fixed-point rewrite (children first; bottom_up: node first, then children) and the single-pass walk.
#
# Random rules only use replacements that are smaller in a recursive path ordering (CONST_v < SPECIAL < NEG < ADD < MUL < MAX,
# CONST_v ordered by v), so every rewrite sequence terminates: a child of the node, a constant, CONST(v-1), or a node headed by a lower op
# whose sources are children of the node or constants.
import itertools
import types
from dataclasses import dataclass, replace
from typing import Any
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

LEAF_OPS = (Ops.CONST, Ops.SPECIAL)
INNER_OPS = (Ops.NEG, Ops.ADD, Ops.MUL, Ops.MAX)
ARITY = {Ops.NEG: 1, Ops.ADD: 2, Ops.MUL: 2, Ops.MAX: 2}
NAMES = ("x", "y", "z")

# ***** random structures, decoded from hypothesis bytes *****
# Drawing one byte string and decoding it is much cheaper than composing strategies, and it still shrinks well: an exhausted or zeroed
# stream always decodes to the simplest choice.

class Chooser:
  def __init__(self, data:bytes): self.data, self.i = data, 0
  def int(self, n:int) -> int:
    if self.i >= len(self.data): return 0
    self.i += 1
    return self.data[self.i - 1] % n
  def pick(self, seq): return seq[self.int(len(seq))]
  def bool(self) -> bool: return self.int(2) == 1

def make_dag(ch:Chooser, with_sink:bool, dts=(dtypes.int,)) -> list[UOp]:
  """all nodes of a random DAG, children before parents"""
  nodes: list[UOp] = []
  for _ in range(1 + ch.int(4)):
    dt = ch.pick(dts)
    if ch.bool(): nodes.append(UOp(Ops.SPECIAL, dt, arg=ch.pick("ab")))
    else: nodes.append(UOp(Ops.CONST, dt, arg=ch.int(4)))
  for _ in range(ch.int(10)):
    op = ch.pick(INNER_OPS + ((Ops.SINK,) if with_sink else ()))
    n = ARITY.get(op) or 1 + ch.int(3)
    # prefer recent nodes so graphs get deep
    src = tuple(nodes[len(nodes) - 1 - min(ch.int(8), len(nodes) - 1)] for _ in range(n))
    nodes.append(UOp(op, dtypes.void if op is Ops.SINK else ch.pick(dts), src))
  return list(dict.fromkeys(nodes))

# ***** random patterns and the model matcher *****

@dataclass(frozen=True, eq=False)
class P:
  ops: tuple|None = None
  op_form: str = "single"        # single, tuple, set
  dts: tuple|None = None
  dt_form: str = "single"
  arg: Any = None
  name: str|None = None
  src_kind: str = "none"         # none, tuple, list, repeat, any
  src: Any = None                # tuple[P, ...] or P
  allow_any_len: bool = False

def is_trivial(p:P) -> bool:
  """a pattern that checks nothing at all"""
  return p.ops is None and p.dts is None and p.arg is None and p.name is None and \
    (p.src_kind == "none" or (p.src_kind == "tuple" and len(p.src) == 0 and p.allow_any_len))

def build(p:P) -> UPat:
  if p.src_kind == "any": return UPat.any(*[build(s) for s in p.src])
  op = None if p.ops is None else p.ops[0] if p.op_form == "single" else tuple(p.ops) if p.op_form == "tuple" else set(p.ops)
  dt = None if p.dts is None else p.dts[0] if p.dt_form == "single" else tuple(p.dts) if p.dt_form == "tuple" else set(p.dts)
  src = None if p.src_kind == "none" else build(p.src) if p.src_kind == "repeat" else \
    tuple(build(s) for s in p.src) if p.src_kind == "tuple" else [build(s) for s in p.src]
  return UPat(op, dt, src, p.arg, p.name, allow_any_len=p.allow_any_len)

def model_match(p:P, u:UOp, store:dict) -> list[dict]:
  """every consistent binding of the names in p when matching u, extending store"""
  if p.src_kind == "any": return [m for alt in p.src for m in model_match(alt, u, store)]
  if p.ops is not None and u.op not in p.ops: return []
  if p.dts is not None and u.dtype not in p.dts: return []
  if p.arg is not None and not (p.arg == u.arg): return []
  if p.name is not None:
    if p.name in store and store[p.name] is not u: return []
    store = {**store, p.name: u}
  if p.src_kind == "none": return [store]
  if p.src_kind == "repeat": orders, pats_len = [itertools.repeat(p.src, len(u.src))], len(u.src)
  else:
    pats_len = len(p.src)
    if len(u.src) < pats_len or (not p.allow_any_len and len(u.src) != pats_len): return []
    orders = [p.src] if p.src_kind == "tuple" else list(itertools.permutations(p.src))
  ret = []
  for order in orders:
    stores = [store]
    for child, sp in zip(u.src[:pats_len], order): stores = [m for s in stores for m in model_match(sp, child, s)]
    ret.extend(stores)
  return ret

def make_pat(ch:Chooser, depth:int, ops_pool:tuple, names:tuple, target:UOp|None=None, root_name:str|None=None, root:bool=False) -> P:
  """a random pattern; with a target node it is built to (mostly) match that node, so matches are common"""
  if target is not None and ch.int(8) == 7: target = None  # drift off the target: this part of the pattern is random
  if not root and depth > 0 and ch.int(7) == 6:
    alts = [make_pat(ch, depth - 1, ops_pool, names, target if i == 0 else None) for i in range(1 + ch.int(3))]
    alts = alts[ch.int(len(alts)):] + alts[:ch.int(len(alts))] if len(alts) > 1 else alts
    # the reference's UPat compiler crashes (AssertionError) on an alternative that checks nothing, e.g. UPat.any(UPat(), ...)
    return P(src_kind="any", src=tuple(replace(a, ops=(Ops.CONST,)) if is_trivial(a) else a for a in alts))
  kinds = ["none", "tuple", "tuple", "list", "repeat"]
  if target is not None and len(target.src) == 0: kinds = ["none", "tuple"]
  src_kind = "none" if depth == 0 else ch.pick(kinds)
  if depth == 0 and ch.int(5) == 4: src_kind = "tuple"  # src=() only matches leaves
  # a top-level single-UPat src is only used on ops that always have children (see the report on early reject)
  pool = tuple(o for o in ops_pool if o not in LEAF_OPS) if root and src_kind == "repeat" else ops_pool
  ops = None
  if root or ch.int(3) != 0:
    opset = {ch.pick(pool) for _ in range(ch.int(3) if target is not None else 1 + ch.int(3))}
    if target is not None and target.op in pool: opset.add(target.op)
    ops = tuple(sorted(opset or {ch.pick(pool)}, key=lambda o: o.value))
  op_form = ch.pick(["single", "tuple", "set"] if ops is not None and len(ops) == 1 else ["tuple", "set"])
  dts = None
  if ch.int(4) == 3:
    dts = tuple(dict.fromkeys(([target.dtype] if target is not None else []) + [ch.pick([dtypes.int, dtypes.float]) for _ in range(ch.int(2))]))
    if not dts: dts = (dtypes.int,)
  dt_form = ch.pick(["single", "tuple", "set"] if dts is not None and len(dts) == 1 else ["tuple", "set"])
  arg = None
  if ch.int(4) == 3: arg = target.arg if target is not None and target.arg is not None else ch.pick([0, 1, 2, 3, "a", "b"])
  name = root_name if root else ch.pick((None,) + names)
  src, allow_any_len = None, False
  tsrc = target.src if target is not None else ()
  def child(i:int) -> P: return make_pat(ch, depth - 1, ops_pool, names, tsrc[i] if i < len(tsrc) else None)
  if src_kind == "repeat": src = child(ch.int(len(tsrc)) if tsrc else 0)
  elif src_kind in ("tuple", "list"):
    allow_any_len = ch.bool()
    n = len(tsrc) if target is not None else ch.int(4)
    if target is not None and allow_any_len: n = ch.int(len(tsrc) + 1)
    if src_kind == "list" and n == 0: n = 1
    kids = [child(i) for i in range(n)]
    if src_kind == "list" and len(kids) > 1:
      r = ch.int(len(kids))
      kids = kids[r:] + kids[:r]
    src = tuple(kids)
  return P(ops, op_form, dts, dt_form, arg, name, src_kind, src, allow_any_len)

# ***** callbacks: module-level, no closures; per-rule behaviour lives in the default arguments *****

_SEEN: list = []
_INV: list = []

def _record(**kw):
  _SEEN.append(kw)
  return None

RANK = {Ops.NEG: 1, Ops.ADD: 2, Ops.MUL: 3, Ops.MAX: 4}
BY_RANK = {2: Ops.ADD, 3: Ops.MUL}
N_KINDS = 6

def action(kind:int, k:int, x:UOp) -> UOp|None:
  """the replacement for x; it only depends on x so the order in which matches are enumerated doesn't matter"""
  if kind == 0: return None
  if kind == 1: return x
  if kind == 2: return x.src[k % len(x.src)] if len(x.src) else None
  if kind == 3:
    if x.op is Ops.CONST: return UOp(Ops.CONST, x.dtype, arg=x.arg - 1) if x.arg > 0 else None
    return UOp(Ops.CONST, x.dtype, arg=k)
  if kind == 4:
    if (r := RANK.get(x.op)) is None: return None
    if r == 1: return UOp(Ops.CONST, x.dtype, arg=k)
    if r == 2: return UOp(Ops.NEG, x.dtype, (x.src[k % 2],))
    return UOp(BY_RANK[r - 1], x.dtype, (x.src[1], UOp(Ops.CONST, x.dtype, arg=k)))
  return None if (x.op.value + len(x.src) + k) % 2 else action(3, k, x)

def _cb_template(x, _kind=0, _k=0, _aid=0, **kw):
  _INV.append((_aid, x))
  return action(_kind, _k, x)

def make_cb(aid:int, kind:int, k:int):
  return types.FunctionType(_cb_template.__code__, _cb_template.__globals__, f"rule_cb_{aid}", (kind, k, aid))

@dataclass(frozen=True)
class Rule:
  pat: P
  kind: int
  k: int

def make_rules(ch:Chooser, ops_pool:tuple, nodes:list[UOp], max_size=4) -> list[Rule]:
  def pat() -> P:
    # broad rules (an op set, nothing else) also match the nodes that rewrites create, so rewrite chains happen
    if ch.int(3) == 2: return P(tuple(sorted({ch.pick(ops_pool) for _ in range(1 + ch.int(3))}, key=lambda o: o.value)), "tuple", name="x")
    return make_pat(ch, 2, ops_pool, ("y", "z"), ch.pick(nodes), root_name="x", root=True)
  return [Rule(pat(), ch.int(N_KINDS), ch.int(4)) for _ in range(1 + ch.int(max_size))]

def real_pm(rules:list[Rule], aid_base:int=0, split:int|None=None) -> PatternMatcher:
  entries = [(build(r.pat), make_cb(aid_base + i, r.kind, r.k)) for i, r in enumerate(rules)]
  if split is None: return PatternMatcher(entries)
  return PatternMatcher(entries[:split]) + PatternMatcher(entries[split:])

class ModelPM:
  def __init__(self, rules:list[Rule], aid_base:int=0): self.rules, self.aid_base = rules, aid_base
  def rewrite(self, u:UOp, inv:set) -> UOp|None:
    for i, r in enumerate(self.rules):
      if u.op not in r.pat.ops or not model_match(r.pat, u, {}): continue
      inv.add((self.aid_base + i, u))
      if (ret := action(r.kind, r.k, u)) is not None and ret is not u: return ret
    return None

# ***** graph_rewrite models *****

def model_unified(root:UOp, pm:ModelPM|None, bpm:ModelPM|None, inv:set) -> UOp:
  replace: dict[UOp, UOp] = {}
  bpm_cache: dict[UOp, UOp|None] = {}
  def bpm_rw(x:UOp) -> UOp|None:
    if x not in bpm_cache: bpm_cache[x] = bpm.rewrite(x, inv)
    return bpm_cache[x]
  def rw(n:UOp) -> UOp:
    if n in replace: return replace[n]
    cur = n
    if bpm is not None:
      while (r := bpm_rw(cur)) is not None: cur = r
    new_src = tuple(rw(s) for s in cur.src)
    if all(a is b for a, b in zip(new_src, cur.src)):
      res = cur if pm is None or (r := pm.rewrite(cur, inv)) is None else rw(r)
    else: res = rw(UOp(cur.op, cur.dtype, new_src, cur.arg, cur.tag))
    replace[n] = res
    return res
  return rw(root)

def model_walk(root:UOp, pm:ModelPM|None, bpm:ModelPM|None, inv:set) -> UOp:
  replace: dict[UOp, UOp] = {}
  bpm_cache: dict[UOp, UOp|None] = {}
  def rw(n:UOp) -> UOp:
    if n in replace: return replace[n]
    if bpm is not None:
      if n not in bpm_cache: bpm_cache[n] = bpm.rewrite(n, inv)
      if (r := bpm_cache[n]) is not None:
        replace[n] = r
        return r
    new_src = tuple(rw(s) for s in n.src)
    new_n = n if all(a is b for a, b in zip(new_src, n.src)) else UOp(n.op, n.dtype, new_src, n.arg, n.tag)
    if pm is not None and (r := pm.rewrite(new_n, inv)) is not None: new_n = r
    replace[n] = new_n
    return new_n
  return rw(root)

# ***** the properties *****

MATCH_OPS = LEAF_OPS + INNER_OPS + (Ops.SINK,)

# fixed-size byte strings: hypothesis's short default strings would mostly decode to trivial structures
DAG_BYTES, PAT_BYTES = st.binary(min_size=48, max_size=48), st.binary(min_size=160, max_size=160)

class TestMatchProperty:
  @SETTINGS
  @given(dag=DAG_BYTES, pat=PAT_BYTES)
  def test_match_sets(self, dag, pat):
    nodes = make_dag(Chooser(dag), with_sink=True, dts=(dtypes.int, dtypes.float))
    ch = Chooser(pat)
    p = make_pat(ch, 3, MATCH_OPS, NAMES, ch.pick(nodes), root_name=ch.pick((None,) + NAMES), root=True)
    pm = PatternMatcher([(build(p), _record)])
    for u in nodes:
      _SEEN.clear()
      assert pm.rewrite(u) is None
      got = {frozenset(m.items()) for m in _SEEN}
      want = {frozenset(m.items()) for m in model_match(p, u, {})} if u.op in p.ops else set()
      assert got == want, f"pattern {p}\non {u}"

  @SETTINGS
  @given(dag=DAG_BYTES, pat=PAT_BYTES)
  def test_rewrite_first_rule_wins(self, dag, pat):
    nodes = make_dag(Chooser(dag), with_sink=True, dts=(dtypes.int, dtypes.float))
    ch = Chooser(pat)
    rules = make_rules(ch, MATCH_OPS, nodes, max_size=5)
    split = ch.int(len(rules) + 2)
    pm, model = real_pm(rules, split=None if split > len(rules) else split), ModelPM(rules)
    for u in nodes:
      _INV.clear()
      inv: set = set()
      got, want = pm.rewrite(u), model.rewrite(u, inv)
      assert got is want, f"rules {rules}\non {u}"
      assert set(_INV) == inv

MODES = ["default", "bottom_up", "walk", "walk_bottom_up", "bpm", "walk_bpm"]
GRAPH_OPS = LEAF_OPS + INNER_OPS

class TestGraphRewriteProperty:
  @SETTINGS
  @given(dag=DAG_BYTES, pat=PAT_BYTES)
  def test_graph_rewrite_matches_model(self, dag, pat):
    nodes = make_dag(Chooser(dag), with_sink=False)
    ch = Chooser(pat)
    rules, brules = make_rules(ch, GRAPH_OPS, nodes), make_rules(ch, GRAPH_OPS, nodes, max_size=3)
    pm, mpm = real_pm(rules), ModelPM(rules)
    bpm, mbpm = real_pm(brules, aid_base=100), ModelPM(brules, aid_base=100)
    for root in dict.fromkeys([UOp(Ops.SINK, dtypes.void, tuple(nodes[-3:])), nodes[-1], ch.pick(nodes)]):
      for mode in MODES:
        inv: set = set()
        _INV.clear()
        if mode == "default": got, want = graph_rewrite(root, pm), model_unified(root, mpm, None, inv)
        elif mode == "bottom_up": got, want = graph_rewrite(root, pm, bottom_up=True), model_unified(root, None, mpm, inv)
        elif mode == "walk": got, want = graph_rewrite(root, pm, walk=True), model_walk(root, mpm, None, inv)
        elif mode == "walk_bottom_up": got, want = graph_rewrite(root, pm, bottom_up=True, walk=True), model_walk(root, None, mpm, inv)
        elif mode == "bpm": got, want = graph_rewrite(root, pm, bpm=bpm), model_unified(root, mpm, mbpm, inv)
        else: got, want = graph_rewrite(root, pm, bpm=bpm, walk=True), model_walk(root, mpm, mbpm, inv)
        assert got is want, f"mode {mode}\nrules {rules}\nbrules {brules}\nroot {root}\ngot {got}\nwant {want}"
        # the same (rule, node) pairs were tried
        assert set(_INV) == inv, f"mode {mode}\nrules {rules}\nbrules {brules}\nroot {root}"

  @SETTINGS
  @given(dag=DAG_BYTES, pat=PAT_BYTES)
  def test_fixed_point_is_stable(self, dag, pat):
    # after a default rewrite no rule rewrites any node of the result any more
    nodes = make_dag(Chooser(dag), with_sink=False)
    rules = make_rules(Chooser(pat), GRAPH_OPS, nodes)
    pm, model = real_pm(rules), ModelPM(rules)
    out = graph_rewrite(nodes[-1], pm)
    for u in out.toposort(): assert model.rewrite(u, set()) is None
    assert graph_rewrite(out, pm) is out

  @SETTINGS
  @given(dag=DAG_BYTES, pat=PAT_BYTES)
  def test_each_node_once_per_call(self, dag, pat):
    # one rule whose pattern matches every node exactly once; it logs and defers to the random rules after it
    nodes = make_dag(Chooser(dag), with_sink=False)
    rules = make_rules(Chooser(pat), GRAPH_OPS, nodes)
    pm = PatternMatcher([(UPat(GRAPH_OPS, name="x"), make_cb(999, 0, 0))]) + real_pm(rules)
    for kw in ({}, {"bottom_up": True}):
      _INV.clear()
      graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(nodes[-3:])), pm, **kw)
      logged = [u for aid, u in _INV if aid == 999]
      assert len(logged) == len(set(logged))

@pytest.mark.parametrize("src_kind", ["tuple", "list"])
def test_model_matcher_sanity(src_kind):
  # the model itself must be able to fail: a wrong-order tuple doesn't match, a list does
  a, b = UOp(Ops.CONST, dtypes.int, arg=1), UOp(Ops.SPECIAL, dtypes.int, arg="a")
  u = UOp(Ops.ADD, dtypes.int, (a, b))
  p = P((Ops.ADD,), src_kind=src_kind, src=(P((Ops.SPECIAL,), name="s"), P((Ops.CONST,), name="k")))
  want = [] if src_kind == "tuple" else [{"s": b, "k": a}]
  assert model_match(p, u, {}) == want
  _SEEN.clear()
  PatternMatcher([(build(p), _record)]).rewrite(u)
  assert _SEEN == want
