# Conformance tests for UPat matching and PatternMatcher.rewrite.
# Callbacks are module-level functions (the reference rejects closures); they communicate through module-level containers that are mutated,
# never rebound, because the reference copies the referenced globals when it compiles a rule.
import importlib.util
import functools
import inspect
import os
import pytest
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import dtypes

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")

def c(v, dt=dtypes.int, tag=None): return UOp(Ops.CONST, dt, arg=v, tag=tag)
def add(a, b, dt=dtypes.int): return UOp(Ops.ADD, dt, (a, b))
def mul(a, b): return UOp(Ops.MUL, dtypes.int, (a, b))
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))
def var(n): return UOp(Ops.SPECIAL, dtypes.int, arg=n)
def sink(*s): return UOp(Ops.SINK, dtypes.void, s)

_SEEN: list = []
_CALLS: list = []
DONE = UOp(Ops.SPECIAL, dtypes.int, arg="matched")

def _record(**kw):
  _SEEN.append(kw)
  return None

def _done(**kw): return DONE

def all_matches(pat:UPat, u:UOp) -> list[dict]:
  """every capture dict the callback is called with (the callback returns None, so every match is enumerated)"""
  _SEEN.clear()
  assert PatternMatcher([(pat, _record)]).rewrite(u) is None
  return list(_SEEN)

def match_set(pat:UPat, u:UOp) -> set[frozenset]: return {frozenset(m.items()) for m in all_matches(pat, u)}
def fs(**kw) -> frozenset: return frozenset(kw.items())
def matches(pat:UPat, u:UOp) -> bool:
  ret = PatternMatcher([(pat, _done)]).rewrite(u)
  assert ret is None or ret is DONE
  return ret is DONE

# ***** UPat fields *****

class TestOpAndDtype:
  def test_single_op(self):
    p = UPat(Ops.ADD)
    assert matches(p, add(c(1), c(2)))
    assert not matches(p, mul(c(1), c(2)))

  @pytest.mark.parametrize("ops", [(Ops.ADD, Ops.MUL), {Ops.ADD, Ops.MUL}])
  def test_op_collection(self, ops):
    p = UPat(ops)
    assert matches(p, add(c(1), c(2)))
    assert matches(p, mul(c(1), c(2)))
    assert not matches(p, neg(c(1)))
    assert not matches(p, c(1))

  def test_groupop(self):
    p = UPat(GroupOp.Binary, name="x")
    for op in (Ops.ADD, Ops.MUL, Ops.MAX):
      u = UOp(op, dtypes.int, (c(1), c(2)))
      assert match_set(p, u) == {fs(x=u)}
    assert not matches(p, neg(c(1)))

  def test_single_dtype(self):
    p = UPat(Ops.CONST, dtypes.int)
    assert matches(p, c(1))
    assert not matches(p, c(1.0, dtypes.float))

  @pytest.mark.parametrize("dts", [(dtypes.int, dtypes.float), {dtypes.int, dtypes.float}])
  def test_dtype_collection(self, dts):
    p = UPat(Ops.CONST, dts)
    assert matches(p, c(1))
    assert matches(p, c(1.0, dtypes.float))
    assert not matches(p, c(True, dtypes.bool))

  def test_dtype_none_matches_any(self):
    p = UPat(Ops.CONST)
    assert matches(p, c(1)) and matches(p, c(1.0, dtypes.float)) and matches(p, c(True, dtypes.bool))

  def test_dtype_in_src(self):
    p = UPat(Ops.ADD, src=(UPat(dtype=dtypes.float), UPat()))
    assert matches(p, add(c(1.0, dtypes.float), c(2)))
    assert not matches(p, add(c(1), c(2.0, dtypes.float)))

class TestArg:
  def test_arg_equality(self):
    p = UPat(Ops.CONST, arg=3)
    assert matches(p, c(3))
    assert not matches(p, c(4))

  def test_arg_identity_vs_equality(self):
    # the same int or str object is equal to itself; a NaN float is not, even when it is the very same object
    nan = float("nan")
    assert matches(UPat(Ops.CONST, arg=10**30), c(10**30)) and matches(UPat(Ops.SPECIAL, arg="g"), var("g"))
    assert not matches(UPat(Ops.CONST, dtypes.float, arg=nan), c(nan, dtypes.float))

  def test_arg_none_is_wildcard(self):
    p = UPat(Ops.CONST)
    assert matches(p, c(3)) and matches(p, c("x"))

  def test_arg_compares_with_eq(self):
    # == semantics: 3 == 3.0, 1 == True
    assert matches(UPat(Ops.CONST, arg=3), c(3.0, dtypes.float))
    assert matches(UPat(Ops.CONST, arg=1), c(True, dtypes.bool))
    assert not matches(UPat(Ops.CONST, arg=1), c(1.5, dtypes.float))

  def test_tuple_and_str_args(self):
    assert matches(UPat(Ops.NOOP, arg=(1, "a")), UOp(Ops.NOOP, arg=(1, "a")))
    assert not matches(UPat(Ops.NOOP, arg=(1, "a")), UOp(Ops.NOOP, arg=(1, "b")))
    assert matches(UPat(Ops.SPECIAL, arg="gidx"), var("gidx"))
    assert not matches(UPat(Ops.SPECIAL, arg="gidx"), var("lidx"))

  def test_dtype_arg(self):
    p = UPat(Ops.CAST, arg=dtypes.float)
    assert matches(p, UOp(Ops.CAST, dtypes.float, (c(1),), arg=dtypes.float))
    assert not matches(p, UOp(Ops.CAST, dtypes.int, (c(1),), arg=dtypes.int))

class TestTag:
  def test_tag(self):
    p = UPat(Ops.CONST, tag="t")
    assert matches(p, c(1, tag="t"))
    assert not matches(p, c(1))
    assert not matches(p, c(1, tag="u"))
    assert matches(UPat(Ops.CONST), c(1, tag="t"))

class TestSrc:
  def test_tuple_in_order(self):
    p = UPat(Ops.ADD, src=(UPat(Ops.CONST, arg=1), UPat(Ops.CONST, arg=2)))
    assert matches(p, add(c(1), c(2)))
    assert not matches(p, add(c(2), c(1)))

  def test_tuple_length_must_be_equal(self):
    p = UPat(Ops.SINK, src=(UPat(Ops.CONST), UPat(Ops.CONST)))
    assert matches(p, sink(c(1), c(2)))
    assert not matches(p, sink(c(1)))
    assert not matches(p, sink(c(1), c(2), c(3)))

  def test_empty_tuple_means_no_children(self):
    p = UPat(Ops.SINK, src=())
    assert matches(p, sink())
    assert not matches(p, sink(c(1)))

  def test_allow_any_len_prefix(self):
    p = UPat(Ops.SINK, src=(UPat(Ops.CONST, arg=1), UPat(Ops.CONST, arg=2)), allow_any_len=True)
    assert matches(p, sink(c(1), c(2)))
    assert matches(p, sink(c(1), c(2), c(3), neg(c(4))))
    assert not matches(p, sink(c(1)))
    assert not matches(p, sink(c(2), c(1), c(3)))
    assert not matches(p, sink(c(3), c(1), c(2)))

  def test_list_any_permutation(self):
    p = UPat(Ops.ADD, src=[UPat(Ops.CONST, name="k"), UPat(Ops.NEG, name="n")])
    a, b = c(1), neg(c(2))
    assert match_set(p, add(a, b)) == {fs(k=a, n=b)}
    assert match_set(p, add(b, a)) == {fs(k=a, n=b)}
    assert not matches(p, add(a, c(3)))

  def test_list_enumerates_all_assignments(self):
    p = UPat(Ops.ADD, src=[UPat.var("a"), UPat.var("b")])
    x, y = c(1), c(2)
    assert match_set(p, add(x, y)) == {fs(a=x, b=y), fs(a=y, b=x)}

  def test_list_three(self):
    p = UPat(Ops.SINK, src=[UPat(Ops.CONST, arg=1), UPat(Ops.CONST, arg=2), UPat(Ops.NEG)])
    for s in [(c(1), c(2), neg(c(0))), (neg(c(0)), c(2), c(1)), (c(2), neg(c(0)), c(1))]:
      assert matches(p, sink(*s))
    assert not matches(p, sink(c(1), c(1), neg(c(0))))
    assert not matches(p, sink(c(1), c(2)))

  def test_list_length_must_be_equal(self):
    p = UPat(Ops.SINK, src=[UPat(Ops.CONST), UPat(Ops.NEG)])
    assert not matches(p, sink(c(1), neg(c(1)), c(2)))
    assert not matches(p, sink(c(1)))

  def test_single_upat_every_child(self):
    p = UPat(Ops.SINK, src=UPat(Ops.CONST))
    assert matches(p, sink(c(1)))
    assert matches(p, sink(c(1), c(2), c(3)))
    assert not matches(p, sink(c(1), neg(c(2)), c(3)))
    assert not matches(p, sink(neg(c(2))))

  def test_single_upat_with_name_binds_same_node(self):
    p = UPat(Ops.SINK, src=UPat(Ops.CONST, name="x"))
    assert match_set(p, sink(c(1), c(1))) == {fs(x=c(1))}
    assert not matches(p, sink(c(1), c(2)))

  def test_none_src_unchecked(self):
    p = UPat(Ops.SINK)
    assert matches(p, sink()) and matches(p, sink(c(1))) and matches(p, sink(neg(c(1)), c(2), c(3)))

  def test_nested(self):
    p = UPat(Ops.NEG, src=(UPat(Ops.ADD, src=(UPat(Ops.CONST, arg=1), UPat(Ops.NEG, src=(UPat(Ops.CONST),))),),))
    assert matches(p, neg(add(c(1), neg(c(5)))))
    assert not matches(p, neg(add(c(1), neg(neg(c(5))))))
    assert not matches(p, neg(add(c(2), neg(c(5)))))

class TestNames:
  def test_captures_passed_as_kwargs(self):
    p = UPat(Ops.ADD, name="root", src=(UPat(Ops.CONST, name="lhs"), UPat(name="rhs")))
    a, b = c(1), neg(c(2))
    u = add(a, b)
    assert all_matches(p, u) == [{"root": u, "lhs": a, "rhs": b}]

  def test_repeated_name_same_uop(self):
    p = UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x")))
    a = c(1)
    assert match_set(p, add(a, a)) == {fs(x=a)}
    assert not matches(p, add(a, c(2)))

  def test_repeated_name_across_depth(self):
    p = UPat(Ops.ADD, src=(UPat.var("x"), UPat(Ops.NEG, src=(UPat.var("x"),))))
    a = c(1)
    assert matches(p, add(a, neg(a)))
    assert not matches(p, add(a, neg(c(2))))

  def test_repeated_name_with_root(self):
    # the root name can't equal any child: a node isn't its own descendant
    p = UPat(Ops.NEG, name="x", src=(UPat(name="x"),))
    assert not matches(p, neg(c(1)))

  def test_repeated_name_in_permutation(self):
    p = UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.NEG, src=(UPat.var("x"),))])
    a = c(1)
    assert matches(p, add(neg(a), a))
    assert matches(p, add(a, neg(a)))
    assert not matches(p, add(neg(c(2)), a))

  def test_unnamed_not_captured(self):
    p = UPat(Ops.ADD, src=(UPat(Ops.CONST), UPat(name="y")))
    assert all_matches(p, add(c(1), c(2))) == [{"y": c(2)}]

class TestConstructors:
  def test_var(self):
    p = UPat(Ops.NEG, src=(UPat.var("v"),))
    assert all_matches(p, neg(c(1))) == [{"v": c(1)}]
    assert all_matches(p, neg(neg(c(1)))) == [{"v": neg(c(1))}]
    pd = UPat(Ops.NEG, src=(UPat.var("v", dtypes.float),))
    assert not matches(pd, neg(c(1)))
    assert matches(pd, UOp(Ops.NEG, dtypes.float, (c(1.0, dtypes.float),)))

  def test_var_no_name(self):
    p = UPat(Ops.NEG, src=(UPat.var(),))
    assert all_matches(p, neg(c(1))) == [{}]

  def test_cvar(self):
    p = UPat(Ops.NEG, src=(UPat.cvar("k"),))
    assert all_matches(p, neg(c(7))) == [{"k": c(7)}]
    assert not matches(p, neg(neg(c(7))))
    pd = UPat(Ops.NEG, src=(UPat.cvar("k", dtypes.int),))
    assert matches(pd, neg(c(7)))
    assert not matches(pd, neg(c(7.0, dtypes.float)))

  def test_const(self):
    p = UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0)))
    assert matches(p, add(c(5), c(0)))
    assert not matches(p, add(c(5), c(1)))
    assert not matches(p, add(c(5), neg(c(0))))
    pd = UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0, dtypes.float)))
    assert not matches(pd, add(c(5), c(0)))
    assert matches(pd, add(c(5), c(0.0, dtypes.float)))

  def test_const_dtype_tuple(self):
    p = UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(2, (dtypes.int, dtypes.float))))
    assert matches(p, add(c(5), c(2))) and matches(p, add(c(5), c(2.0, dtypes.float)))
    assert not matches(p, add(c(5), c(True, dtypes.bool)))

  def test_any(self):
    p = UPat(Ops.NEG, src=(UPat.any(UPat(Ops.CONST, name="k"), UPat(Ops.ADD, name="a")),))
    assert all_matches(p, neg(c(1))) == [{"k": c(1)}]
    assert all_matches(p, neg(add(c(1), c(2)))) == [{"a": add(c(1), c(2))}]
    assert not matches(p, neg(neg(c(1))))

  def test_any_enumerates_each_alternative(self):
    p = UPat(Ops.NEG, src=(UPat.any(UPat(Ops.CONST, name="k"), UPat(dtype=dtypes.int, name="i")),))
    assert match_set(p, neg(c(1))) == {fs(k=c(1)), fs(i=c(1))}

  def test_is_any_kwarg(self):
    p = UPat(Ops.NEG, src=(UPat(src=(UPat(Ops.CONST), UPat(Ops.ADD)), is_any=True),))
    assert matches(p, neg(c(1))) and matches(p, neg(add(c(1), c(2))))
    assert not matches(p, neg(neg(c(1))))

  def test_custom_early_reject_accepted(self):
    p = UPat(Ops.ADD, src=(UPat(Ops.CONST), UPat(Ops.NEG)), custom_early_reject={Ops.CONST})
    assert matches(p, add(c(1), neg(c(2))))

class TestLocation:
  def test_location_is_constructing_line(self):
    p, line = UPat(Ops.ADD), inspect.currentframe().f_lineno
    fn, ln = p.location
    assert ln == line
    assert os.path.basename(fn) == "test_upat.py" and os.path.samefile(fn, __file__)

  def test_location_of_helpers(self):
    p1, line1 = UPat.const(12345), inspect.currentframe().f_lineno
    p2, line2 = UPat.any(UPat(Ops.ADD), UPat(Ops.MUL)), inspect.currentframe().f_lineno
    p3, line3 = UPat.var("location_test_unique_name"), inspect.currentframe().f_lineno
    for p, line in [(p1, line1), (p2, line2), (p3, line3)]:
      assert p.location[1] == line and os.path.basename(p.location[0]) == "test_upat.py"

  def test_explicit_location(self):
    p = UPat(Ops.ADD, location=("somefile.py", 99))
    assert p.location == ("somefile.py", 99)

class TestBadUPat:
  def test_unknown_kwarg(self):
    with pytest.raises(TypeError, match="bogus_kw"):
      UPat(Ops.ADD, bogus_kw=1)

  @ours_only
  def test_str_op(self):
    with pytest.raises((TypeError, ValueError), match="op"):
      UPat(op="ADD")

  @ours_only
  def test_bad_dtype(self):
    with pytest.raises((TypeError, ValueError), match="dtype"):
      UPat(Ops.ADD, dtype="int")

# ***** PatternMatcher.rewrite *****

R1, R2, R3 = var("r1"), var("r2"), var("r3")
def _r1(**kw): return R1
def _r2(**kw): return R2
def _none(**kw): return None
def _self(x): return x
def _call_log(x):
  _CALLS.append(x)
  return None
def _with_ctx(ctx, x):
  ctx.append(x)
  return R1
def _ctx_passthrough(ctx, x): return ctx
def _raise_if_called(**kw): raise AssertionError("rule for another op was tried")

class TestPatternMatcher:
  def test_no_match_returns_none(self):
    pm = PatternMatcher([(UPat(Ops.MUL), _r1)])
    assert pm.rewrite(add(c(1), c(2))) is None
    assert pm.rewrite(c(1)) is None

  def test_first_rule_wins(self):
    pm = PatternMatcher([(UPat(Ops.ADD), _r1), (UPat(Ops.ADD), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R1
    pm = PatternMatcher([(UPat(Ops.ADD), _r2), (UPat(Ops.ADD), _r1)])
    assert pm.rewrite(add(c(1), c(2))) is R2

  def test_none_falls_through(self):
    pm = PatternMatcher([(UPat(Ops.ADD), _none), (UPat(Ops.ADD), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R2

  def test_self_falls_through(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), _self), (UPat(Ops.ADD), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R2
    assert PatternMatcher([(UPat(Ops.ADD, name="x"), _self)]).rewrite(add(c(1), c(2))) is None

  def test_non_matching_rule_skipped(self):
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat(Ops.NEG), UPat())), _r1), (UPat(Ops.ADD), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R2
    assert pm.rewrite(add(neg(c(1)), c(2))) is R1

  def test_only_rules_for_op_are_tried(self):
    pm = PatternMatcher([(UPat(Ops.MUL), _raise_if_called), (UPat((Ops.SINK, Ops.NEG)), _raise_if_called), (UPat(Ops.ADD), _r1)])
    assert pm.rewrite(add(c(1), c(2))) is R1

  def test_rule_for_several_ops(self):
    pm = PatternMatcher([(UPat((Ops.ADD, Ops.MUL)), _r1), (UPat(Ops.MUL), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R1 and pm.rewrite(mul(c(1), c(2))) is R1

  def test_next_match_of_same_rule_after_none(self):
    # the callback is tried on further matches of the same rule when it returns None
    p = UPat(Ops.ADD, src=[UPat(Ops.CONST, name="a"), UPat(name="b")])
    pm = PatternMatcher([(p, _pick_a_is_two)])
    assert pm.rewrite(add(c(1), c(2))) is R1
    assert pm.rewrite(add(c(2), c(1))) is R1
    assert pm.rewrite(add(c(3), c(1))) is None

  def test_ctx(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), _with_ctx)])
    log: list = []
    u = add(c(1), c(2))
    assert pm.rewrite(u, ctx=log) is R1
    assert log == [u]

  def test_ctx_default_none(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), _ctx_passthrough), (UPat(Ops.ADD), _r2)])
    assert pm.rewrite(add(c(1), c(2))) is R2
    assert pm.rewrite(add(c(1), c(2)), ctx=R3) is R3
    assert pm.rewrite(add(c(1), c(2)), R3) is R3

  def test_ctx_not_passed_when_not_declared(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), _call_log)])
    _CALLS.clear()
    u = add(c(1), c(2))
    assert pm.rewrite(u, ctx="ignored") is None
    assert _CALLS == [u]

  def test_lambda_callbacks(self):
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), lambda x: x)])
    assert pm.rewrite(add(c(5), c(0))) is c(5)
    assert pm.rewrite(add(c(5), c(1))) is None

  def test_add_composes_in_order(self):
    pm1 = PatternMatcher([(UPat(Ops.ADD), _none), (UPat(Ops.MUL), _r1)])
    pm2 = PatternMatcher([(UPat(Ops.ADD), _r2), (UPat(Ops.MUL), _r2), (UPat(Ops.NEG), _r2)])
    pm = pm1 + pm2
    assert pm.rewrite(add(c(1), c(2))) is R2
    assert pm.rewrite(mul(c(1), c(2))) is R1
    assert pm.rewrite(neg(c(1))) is R2
    assert (pm2 + pm1).rewrite(mul(c(1), c(2))) is R2
    # operands unchanged
    assert pm1.rewrite(add(c(1), c(2))) is None and pm2.rewrite(mul(c(1), c(2))) is R2

  def test_patterns_attribute(self):
    p1, p2 = UPat(Ops.ADD), UPat(Ops.MUL)
    pm = PatternMatcher([(p1, _r1), (p2, _r2)])
    assert [p for p, _ in pm.patterns] == [p1, p2]
    assert [p for p, _ in (pm + pm).patterns] == [p1, p2, p1, p2]

  def test_exception_propagates(self):
    pm = PatternMatcher([(UPat(Ops.ADD), _raise_if_called)])
    with pytest.raises(AssertionError, match="another op"):
      pm.rewrite(add(c(1), c(2)))

  @ours_only
  def test_closure_callbacks(self):
    seen = []
    def cb(x):
      seen.append(x)
      return R3 if len(seen) == 1 else None
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), cb)])
    u = add(c(1), c(2))
    assert pm.rewrite(u) is R3
    assert pm.rewrite(u) is None
    assert seen == [u, u]
    offset = 10
    pm2 = PatternMatcher([(UPat(Ops.CONST, name="x"), lambda x: c(x.arg + offset) if x.arg < offset else None)])
    assert pm2.rewrite(c(1)) is c(11) and pm2.rewrite(c(11)) is None

def _pick_a_is_two(a, b): return R1 if a.arg == 2 else None

# ***** callback parameters: plain functions are planned from their code object, everything else through inspect *****

def _cb_default(x, y=R1): _CALLS.append(("default", x, y))
def _cb_unused_default(x, flag=7): _CALLS.append(("unused", x, flag))
def _cb_kwonly(x, *, ctx=None): _CALLS.append(("kwonly", x, ctx))
def _cb_varargs(x, *rest): _CALLS.append(("varargs", x, rest))
def _cb_varkw(x, **kw): _CALLS.append(("varkw", x, kw))
def _cb_ctx_first(ctx, x): _CALLS.append(("ctx_first", ctx, x))
def _cb_ctx_first_y(x, y): _CALLS.append(("xy", x, y))
def _cb_posonly(x, /, ctx): _CALLS.append(("posonly", x, ctx))
def _cb_wrapped_target(*args): _CALLS.append(("wrapped", args))
@functools.wraps(_cb_default)
def _cb_wrapped(*args, **kw): return _cb_wrapped_target(*args, **kw)

@ours_only
class TestCallbackParameters:
  @pytest.mark.parametrize("fxn, expect", [
    (_cb_default, lambda u, ctx: ("default", u, R1)),
    (_cb_unused_default, lambda u, ctx: ("unused", u, 7)),
    (_cb_kwonly, lambda u, ctx: ("kwonly", u, ctx)),
    (_cb_varargs, lambda u, ctx: ("varargs", u, ())),
    (_cb_varkw, lambda u, ctx: ("varkw", u, {})),
    (_cb_ctx_first, lambda u, ctx: ("ctx_first", ctx, u)),
    (_cb_posonly, lambda u, ctx: ("posonly", u, ctx)),
    (_cb_wrapped, lambda u, ctx: ("wrapped", (u, R1))),  # planned from the signature it wraps
    (functools.partial(_cb_default, y=R2), lambda u, ctx: ("default", u, R2)),
  ])
  def test_call_shapes(self, fxn, expect):
    u = add(c(1), c(2))
    _CALLS.clear()
    assert PatternMatcher([(UPat(Ops.ADD, name="x"), fxn)]).rewrite(u, ctx="the ctx") is None
    assert _CALLS == [expect(u, "the ctx")]

  def test_required_parameter_not_captured(self):
    # `y` is neither captured nor defaulted, so the callback is called with keywords and Python names the problem
    with pytest.raises(TypeError, match="y"):
      PatternMatcher([(UPat(Ops.ADD, name="x"), _cb_ctx_first_y)]).rewrite(add(c(1), c(2)))
