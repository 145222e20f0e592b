# Conformance tests for the UOp node: interning, fields, bad input, methods and repr.
# NOTE: UOp overloads `!=` (it builds a CMPNE node) and `bool()` (it evaluates), so these tests compare nodes with `is` / `==` only.
import functools
import importlib.util
import math
import weakref
import pytest
from tinygrad.uop.ops import UOp
from tinygrad.uop import Ops, GroupOp
from tinygrad.dtype import dtypes, DType

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")

def c(v, dt=dtypes.int, tag=None): return UOp(Ops.CONST, dt, arg=v, tag=tag)
def add(a, b): return UOp(Ops.ADD, dtypes.int, (a, b))
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))

# ***** fields and interning *****

class TestFields:
  def test_fields(self):
    a, b = c(1), c(2)
    u = UOp(Ops.ADD, dtypes.int, (a, b), arg="x", tag="t")
    assert u.op is Ops.ADD
    assert u.dtype == dtypes.int and isinstance(u.dtype, DType)
    assert isinstance(u.src, tuple) and len(u.src) == 2 and u.src[0] is a and u.src[1] is b
    assert u.arg == "x" and u.tag == "t"

  def test_keyword_construction(self):
    a = c(1)
    u = UOp(op=Ops.NEG, dtype=dtypes.int, src=(a,), arg=None, tag=None)
    assert u is neg(a)

  def test_defaults(self):
    u = UOp(Ops.NOOP)
    assert u.dtype == dtypes.void and u.src == () and u.arg is None and u.tag is None
    s = UOp(Ops.SINK, src=(c(1),))
    assert s.dtype == dtypes.void and s.arg is None and s.tag is None

  def test_src_is_tuple_of_uops(self):
    u = add(c(1), c(2))
    assert all(isinstance(s, UOp) for s in u.src)
    assert type(u.src) is tuple

class TestInterning:
  def test_same_fields_same_object(self):
    assert c(1) is c(1)
    assert add(c(1), c(2)) is add(c(1), c(2))
    assert UOp(Ops.SPECIAL, dtypes.int, arg="a", tag="t") is UOp(Ops.SPECIAL, dtypes.int, arg="a", tag="t")

  def test_eq_is_identity(self):
    a, b = c(1), c(2)
    assert a == c(1) and not (a == b)
    assert hash(a) == hash(c(1))
    assert not (a == 1) and not (a == "CONST")
    d = {a: "a", b: "b"}
    assert d[c(1)] == "a" and d[c(2)] == "b"
    assert len({a, c(1), b, c(2)}) == 2

  @pytest.mark.parametrize("other", [
    lambda: UOp(Ops.CONST, dtypes.float, arg=1),
    lambda: UOp(Ops.CONST, dtypes.int, arg=2),
    lambda: UOp(Ops.CONST, dtypes.int, arg=1, tag="t"),
    lambda: UOp(Ops.SPECIAL, dtypes.int, arg=1),
    lambda: UOp(Ops.CONST, dtypes.int, src=(UOp(Ops.NOOP),), arg=1),
  ])
  def test_each_field_distinguishes(self, other):
    assert other() is not c(1)
    assert other() is other()

  def test_src_order_matters(self):
    a, b = c(1), c(2)
    assert add(a, b) is not add(b, a)
    assert add(a, b).src == (a, b) and add(b, a).src == (b, a)

  def test_src_identity_not_structure(self):
    # srcs are compared by node identity; a structurally equal src is the same node anyway because of interning
    x = neg(neg(c(5)))
    y = neg(neg(c(5)))
    assert x is y and x.src[0] is y.src[0]

  def test_tuple_args_interned_by_value(self):
    t1, t2 = tuple([1, "a", (2, 3)]), tuple([1, "a", (2, 3)])
    assert t1 is not t2
    assert UOp(Ops.NOOP, dtypes.void, arg=t1) is UOp(Ops.NOOP, dtypes.void, arg=t2)
    assert UOp(Ops.NOOP, dtypes.void, arg=(1, 2)) is not UOp(Ops.NOOP, dtypes.void, arg=(2, 1))
    assert UOp(Ops.NOOP, dtypes.void, arg=(1, 2)) is not UOp(Ops.NOOP, dtypes.void, arg=(1, 2, 3))

  def test_string_args_interned_by_value(self):
    s1 = "".join(["ab", "cd"])
    s2 = "".join(["a", "bcd"])
    assert s1 is not s2
    assert UOp(Ops.SPECIAL, dtypes.int, arg=s1) is UOp(Ops.SPECIAL, dtypes.int, arg=s2)

  def test_none_vs_false_arg(self):
    assert UOp(Ops.NOOP, arg=None) is not UOp(Ops.NOOP, arg=False)

  def test_dtype_and_op_args(self):
    # DTypes and Ops are common args (CAST, REDUCE); they must be hashable and intern by value
    assert UOp(Ops.CAST, dtypes.float, (c(1),), arg=dtypes.float) is UOp(Ops.CAST, dtypes.float, (c(1),), arg=dtypes.float)
    assert UOp(Ops.NOOP, arg=(Ops.ADD, 0)) is UOp(Ops.NOOP, arg=(Ops.ADD, 0))
    assert UOp(Ops.NOOP, arg=(Ops.ADD, 0)) is not UOp(Ops.NOOP, arg=(Ops.MUL, 0))

  def test_hashable_object_args(self):
    class Key:
      def __init__(self, v): self.v = v
      def __eq__(self, o): return isinstance(o, Key) and o.v == self.v
      def __hash__(self): return hash(self.v)
    assert UOp(Ops.NOOP, arg=Key(3)) is UOp(Ops.NOOP, arg=Key(3))
    assert UOp(Ops.NOOP, arg=Key(3)) is not UOp(Ops.NOOP, arg=Key(4))
    assert UOp(Ops.NOOP, arg=Key(3)).arg.v == 3

  def test_equal_but_distinct_arg_objects(self):
    # equal values held by different objects: big ints, strings built at run time, tuples mixing them with objects whose
    # __eq__ is Python code
    class Key:
      def __init__(self, v): self.v = v
      def __eq__(self, o): return isinstance(o, Key) and o.v == self.v
      def __hash__(self): return hash(self.v)
    big = 10**30
    assert UOp(Ops.NOOP, arg=big) is UOp(Ops.NOOP, arg=int(str(big)))
    assert UOp(Ops.NOOP, arg="".join(["ab", "c"])) is UOp(Ops.NOOP, arg="abc")
    assert UOp(Ops.NOOP, arg=(big, Key(1))) is UOp(Ops.NOOP, arg=(int(str(big)), Key(1)))
    assert UOp(Ops.NOOP, arg=(big, Key(1))) is not UOp(Ops.NOOP, arg=(big, Key(2)))
    assert UOp(Ops.NOOP, arg=(1, "x"), tag=Key(5)) is UOp(Ops.NOOP, arg=(1, "x"), tag=Key(5))

  def test_frozenset_arg(self):
    assert UOp(Ops.NOOP, arg=frozenset({1, 2})) is UOp(Ops.NOOP, arg=frozenset({2, 1}))

  def test_many_distinct_nodes(self):
    nodes = [c(i) for i in range(2000)]
    assert len(set(map(id, nodes))) == 2000
    assert all(c(i) is nodes[i] for i in range(2000))

  @ours_only
  def test_int_float_bool_args_are_distinct(self):
    # ours: args intern by (type, value); the reference's dict lookup merges 1, 1.0 and True
    i, f, b = c(1), c(1.0), c(True)
    assert i is not f and f is not b and i is not b
    assert type(i.arg) is int and type(f.arg) is float and type(b.arg) is bool
    assert c(0) is not c(False) and c(0) is not c(0.0)

  @ours_only
  def test_negative_zero_is_distinct(self):
    pz, nz = c(0.0, dtypes.float), c(-0.0, dtypes.float)
    assert pz is not nz
    assert math.copysign(1.0, pz.arg) == 1.0 and math.copysign(1.0, nz.arg) == -1.0
    assert c(-0.0, dtypes.float) is nz

  @ours_only
  def test_nan_interns_to_one_node(self):
    n1, n2 = float("nan"), float("nan")
    assert n1 is not n2
    a, b = c(n1, dtypes.float), c(n2, dtypes.float)
    assert a is b and math.isnan(a.arg)
    assert c(math.nan, dtypes.float) is a
    assert c(-math.nan, dtypes.float) is a
    assert c(float("inf"), dtypes.float) is not a

  @ours_only
  def test_tuple_args_elementwise_rule(self):
    assert UOp(Ops.NOOP, arg=(1, 2.0)) is not UOp(Ops.NOOP, arg=(1.0, 2))
    assert UOp(Ops.NOOP, arg=(1, True)) is not UOp(Ops.NOOP, arg=(1, 1))
    assert UOp(Ops.NOOP, arg=(0.0,)) is not UOp(Ops.NOOP, arg=(-0.0,))
    assert UOp(Ops.NOOP, arg=((float("nan"),), 1)) is UOp(Ops.NOOP, arg=((float("nan"),), 1))
    assert UOp(Ops.NOOP, arg=((1,),)) is not UOp(Ops.NOOP, arg=((1.0,),))

  @ours_only
  def test_tags_follow_arg_rule(self):
    a = c(1)
    assert a.rtag(1) is not a.rtag(1.0) and a.rtag(1) is not a.rtag(True) and a.rtag(1.0) is not a.rtag(True)
    assert a.rtag(0.0) is not a.rtag(-0.0)
    assert a.rtag(float("nan")) is a.rtag(float("nan"))
    assert a.rtag(None) is a and a.rtag(False) is not a and a.rtag(0) is not a.rtag(False)

# ***** bad input *****

class TestBadInput:
  def test_unhashable_arg(self):
    with pytest.raises(TypeError):
      UOp(Ops.NOOP, arg=[1, 2])
    with pytest.raises(TypeError):
      UOp(Ops.NOOP, arg=(1, [2]))
    with pytest.raises(TypeError):
      UOp(Ops.NOOP, arg={"a": 1})

  def test_unhashable_tag(self):
    with pytest.raises(TypeError):
      UOp(Ops.NOOP, tag=[1])

  @ours_only
  def test_unhashable_arg_message(self):
    with pytest.raises(TypeError, match="arg"):
      UOp(Ops.NOOP, arg=[1, 2])

  @ours_only
  def test_non_uop_in_src(self):
    with pytest.raises(TypeError, match="src") as ei:
      UOp(Ops.ADD, dtypes.int, (c(1), 3))
    assert "3" in str(ei.value)
    with pytest.raises(TypeError, match="src") as ei:
      UOp(Ops.NEG, dtypes.int, ("not_a_uop",))
    assert "not_a_uop" in str(ei.value)

  @ours_only
  def test_src_must_be_a_sequence_of_uops(self):
    with pytest.raises(TypeError, match="src"):
      UOp(Ops.NEG, dtypes.int, 5)
    with pytest.raises(TypeError, match="src"):
      UOp(Ops.NEG, dtypes.int, (None,))

  @ours_only
  def test_bad_op(self):
    with pytest.raises(TypeError, match="op"):
      UOp("ADD", dtypes.int)
    with pytest.raises(TypeError, match="op"):
      UOp(3, dtypes.int)

  @ours_only
  def test_bad_dtype(self):
    with pytest.raises(TypeError, match="dtype"):
      UOp(Ops.CONST, "int", arg=1)
    with pytest.raises(TypeError, match="dtype"):
      UOp(Ops.CONST, int, arg=1)

  @ours_only
  def test_replace_bad_field(self):
    with pytest.raises(TypeError, match="bogus"):
      c(1).replace(bogus=1)

  @ours_only
  def test_replace_bad_values(self):
    with pytest.raises(TypeError, match="src"):
      c(1).replace(src=(1,))
    with pytest.raises(TypeError, match="arg"):
      c(1).replace(arg=[1])

  def test_failed_construction_leaves_cache_clean(self):
    with pytest.raises(TypeError):
      UOp(Ops.NOOP, dtypes.int, arg=[1])
    u = UOp(Ops.NOOP, dtypes.int, arg=(1,))
    assert u.arg == (1,) and UOp(Ops.NOOP, dtypes.int, arg=(1,)) is u

# ***** methods *****

class TestReplace:
  def test_replace_fields(self):
    a, b = c(1), c(2)
    u = add(a, b)
    assert u.replace(op=Ops.MUL) is UOp(Ops.MUL, dtypes.int, (a, b))
    assert u.replace(dtype=dtypes.float) is UOp(Ops.ADD, dtypes.float, (a, b))
    assert u.replace(src=(b, a)) is add(b, a)
    assert u.replace(arg=7) is UOp(Ops.ADD, dtypes.int, (a, b), arg=7)
    assert u.replace(tag="t") is UOp(Ops.ADD, dtypes.int, (a, b), tag="t")

  def test_replace_keeps_tag(self):
    u = c(1, tag="keep")
    r = u.replace(arg=2)
    assert r.tag == "keep" and r.arg == 2 and r is c(2, tag="keep")
    assert u.replace(tag=None) is c(1)

  def test_replace_nothing_is_identity(self):
    u = add(c(1), c(2))
    assert u.replace() is u
    assert u.replace(op=Ops.ADD, arg=None) is u

  def test_replace_multiple(self):
    u = c(1)
    assert u.replace(op=Ops.SPECIAL, arg="a", tag=1) is UOp(Ops.SPECIAL, dtypes.int, arg="a", tag=1)

  def test_rtag(self):
    u = c(3)
    assert u.rtag().tag is True
    assert u.rtag("x").tag == "x" and u.rtag("x") is c(3, tag="x")
    assert u.rtag().arg == 3 and u.rtag().op is Ops.CONST
    assert u.rtag(None) is u

class TestToposort:
  def test_order_children_before_parents(self):
    a, b = c(1), c(2)
    s = add(a, b)
    n = neg(s)
    m = UOp(Ops.MUL, dtypes.int, (n, a))
    topo = m.toposort()
    assert isinstance(topo, dict)
    assert list(topo) == [a, b, s, n, m]
    assert all(v is None for v in topo.values())

  def test_src_order(self):
    a, b = c(1), c(2)
    assert list(add(b, a).toposort()) == [b, a, add(b, a)]
    assert list(add(a, b).toposort()) == [a, b, add(a, b)]

  def test_shared_node_appears_once(self):
    a = c(1)
    s = add(a, a)
    m = UOp(Ops.MUL, dtypes.int, (s, s))
    assert list(m.toposort()) == [a, s, m]

  def test_every_parent_after_children(self):
    leaves = [c(i) for i in range(5)]
    nodes = list(leaves)
    for i in range(30): nodes.append(add(nodes[(i * 7) % len(nodes)], nodes[(i * 3 + 1) % len(nodes)]))
    root = UOp(Ops.SINK, dtypes.void, tuple(nodes[-5:]))
    topo = list(root.toposort())
    pos = {u: i for i, u in enumerate(topo)}
    assert len(pos) == len(topo)
    assert topo[-1] is root
    for u in topo:
      for s in u.src: assert pos[s] < pos[u]

  def test_gate(self):
    a, b = c(1), c(2)
    n = neg(a)
    s = add(n, b)
    # a gated-out node is neither included nor descended into
    topo = s.toposort(gate=lambda x: x.op is not Ops.NEG)
    assert list(topo) == [b, s]
    assert list(s.toposort(gate=lambda x: True)) == [a, n, b, s]

  def test_deep_chain_one_million(self):
    x = c(0)
    for _ in range(1_000_000): x = neg(x)
    topo = x.toposort()
    assert len(topo) == 1_000_001
    it = iter(topo)
    assert next(it) is c(0)
    assert next(iter(reversed(topo))) is x

class TestBackwardSlice:
  def test_backward_slice(self):
    a, b = c(1), c(2)
    s = add(a, b)
    n = neg(s)
    bs = n.backward_slice
    assert isinstance(bs, dict)
    assert set(bs) == {a, b, s} and n not in bs
    assert list(bs) == [a, b, s]

  def test_backward_slice_with_self(self):
    a, b = c(1), c(2)
    s = add(a, b)
    bs = s.backward_slice_with_self
    assert set(bs) == {a, b, s}
    assert list(bs)[0] is s

  def test_leaf(self):
    assert len(c(1).backward_slice) == 0
    assert list(c(1).backward_slice_with_self) == [c(1)]

class TestSinkAndSubstitute:
  def test_sink(self):
    a, b, d = c(1), c(2), c(3)
    s = a.sink(b, d)
    assert s.op is Ops.SINK and s.dtype == dtypes.void and s.src == (a, b, d)
    assert a.sink().src == (a,)
    assert s is UOp(Ops.SINK, dtypes.void, (a, b, d))

  def test_substitute(self):
    a, b, x = c(1), c(2), UOp(Ops.SPECIAL, dtypes.int, arg="x")
    s = add(neg(a), b)
    r = s.substitute({a: x})
    assert r is add(neg(x), b)
    assert s is add(neg(a), b)  # input untouched

  def test_substitute_shared_and_multiple(self):
    a, b = c(1), c(2)
    x, y = UOp(Ops.SPECIAL, dtypes.int, arg="x"), UOp(Ops.SPECIAL, dtypes.int, arg="y")
    s = UOp(Ops.MUL, dtypes.int, (add(a, b), add(a, a)))
    assert s.substitute({a: x, b: y}) is UOp(Ops.MUL, dtypes.int, (add(x, y), add(x, x)))

  def test_substitute_inner_node(self):
    a, b = c(1), c(2)
    inner = add(a, b)
    s = neg(neg(inner))
    assert s.substitute({inner: c(9)}) is neg(neg(c(9)))
    assert s.substitute({neg(inner): a}) is neg(a)

  def test_substitute_noop(self):
    s = add(c(1), c(2))
    assert s.substitute({}) is s
    assert s.substitute({c(5): c(6)}) is s
    assert s.substitute({c(1): c(1)}) is s

  def test_substitute_root(self):
    s = add(c(1), c(2))
    assert s.substitute({s: c(3)}) is c(3)

class TestPythonSide:
  def test_weakref_and_dict_key(self):
    u = UOp(Ops.SPECIAL, dtypes.int, arg="weakref_target")
    r = weakref.ref(u)
    assert r() is u
    d = weakref.WeakKeyDictionary()
    d[u] = 1
    assert d[u] == 1
    wv = weakref.WeakValueDictionary()
    wv["k"] = u
    assert wv["k"] is u

  def test_instance_attributes(self):
    u = UOp(Ops.SPECIAL, dtypes.int, arg="attr_target")
    u.my_attr = 42
    assert u.my_attr == 42
    assert UOp(Ops.SPECIAL, dtypes.int, arg="attr_target").my_attr == 42  # same interned object
    assert "my_attr" in u.__dict__
    u.__dict__["other"] = "x"
    assert u.other == "x"
    assert not hasattr(c(12345), "my_attr")

  def test_methods_attached_to_class(self):
    def double_arg(self): return self.arg * 2
    UOp._test_double_arg = double_arg
    try:
      assert c(21)._test_double_arg() == 42
    finally:
      del UOp._test_double_arg
    assert not hasattr(c(21), "_test_double_arg")

  def test_property_attached_to_class(self):
    UOp._test_nsrc = property(lambda self: len(self.src))
    try:
      assert add(c(1), c(2))._test_nsrc == 2
    finally:
      del UOp._test_nsrc

  def test_cached_property_attached_to_class(self):
    calls = []
    def f(self):
      calls.append(self)
      return len(self.toposort())
    cp = functools.cached_property(f)
    UOp._test_cached_size = cp
    cp.__set_name__(UOp, "_test_cached_size")
    try:
      u = neg(add(c(101), c(102)))
      assert u._test_cached_size == 4
      assert u._test_cached_size == 4
      assert calls == [u]
      assert u.__dict__["_test_cached_size"] == 4
    finally:
      del UOp._test_cached_size

  def test_isinstance(self):
    assert isinstance(c(1), UOp)
    assert type(c(1)) is UOp

  def test_groupop_membership(self):
    assert Ops.ADD in GroupOp.Binary and Ops.NEG in GroupOp.Unary and Ops.WHERE in GroupOp.Ternary
    assert Ops.ADD in GroupOp.ALU and set(Ops) == GroupOp.All

# ***** repr *****

# golden strings produced by the reference implementation
C1, C2 = "UOp(Ops.CONST, dtypes.int, arg=1, src=())", "UOp(Ops.CONST, dtypes.int, arg=2, src=())"

class TestRepr:
  def test_simple(self):
    assert repr(add(c(1), c(2))) == f"UOp(Ops.ADD, dtypes.int, arg=None, src=(\n  {C1},\n  {C2},))"

  def test_leaf(self):
    assert repr(c(1)) == C1
    assert repr(UOp(Ops.SINK)) == "UOp(Ops.SINK, dtypes.void, arg=None, src=())"

  def test_nested(self):
    assert repr(neg(neg(c(1)))) == \
      f"UOp(Ops.NEG, dtypes.int, arg=None, src=(\n  UOp(Ops.NEG, dtypes.int, arg=None, src=(\n    {C1},)),))"

  def test_shared_subtree(self):
    s = add(c(1), c(2))
    assert repr(UOp(Ops.MUL, dtypes.int, (s, s))) == ("UOp(Ops.MUL, dtypes.int, arg=None, src=(\n"
      f"  x0:=UOp(Ops.ADD, dtypes.int, arg=None, src=(\n    {C1},\n    {C2},)),\n  x0,))")

  def test_shared_numbering(self):
    s = add(c(1), c(2))
    u = UOp(Ops.SINK, dtypes.void, (UOp(Ops.MUL, dtypes.int, (s, s)), s, c(1)))
    assert repr(u) == ("UOp(Ops.SINK, dtypes.void, arg=None, src=(\n"
      "  UOp(Ops.MUL, dtypes.int, arg=None, src=(\n"
      "    x1:=UOp(Ops.ADD, dtypes.int, arg=None, src=(\n"
      "      x2:=UOp(Ops.CONST, dtypes.int, arg=1, src=()),\n"
      "      UOp(Ops.CONST, dtypes.int, arg=2, src=()),)),\n"
      "    x1,)),\n"
      "  x1,\n"
      "  x2,))")

  def test_shared_nested_in_shared(self):
    k = c(3)
    n = neg(k)
    a = add(n, k)
    u = UOp(Ops.SINK, dtypes.void, (UOp(Ops.MAX, dtypes.int, (a, n)), a))
    assert repr(u) == ("UOp(Ops.SINK, dtypes.void, arg=None, src=(\n"
      "  UOp(Ops.MAX, dtypes.int, arg=None, src=(\n"
      "    x1:=UOp(Ops.ADD, dtypes.int, arg=None, src=(\n"
      "      x2:=UOp(Ops.NEG, dtypes.int, arg=None, src=(\n"
      "        x3:=UOp(Ops.CONST, dtypes.int, arg=3, src=()),)),\n"
      "      x3,)),\n"
      "    x2,)),\n"
      "  x1,))")

  def test_args_and_tags(self):
    assert repr(UOp(Ops.SPECIAL, dtypes.int, arg="gidx0", tag="t")) == "UOp(Ops.SPECIAL, dtypes.int, arg='gidx0', tag=t, src=())"
    assert repr(c(1.5, dtypes.float).rtag()) == "UOp(Ops.CONST, dtypes.float, arg=1.5, tag=True, src=())"
    assert repr(UOp(Ops.NOOP, dtypes.bool, arg=(1, "a", None))) == "UOp(Ops.NOOP, dtypes.bool, arg=(1, 'a', None), src=())"

  def test_mixed_dtypes(self):
    u = UOp(Ops.WHERE, dtypes.float, (UOp(Ops.CMPLT, dtypes.bool, (c(1), c(2))), c(0.5, dtypes.float), c(-0.0, dtypes.float)))
    assert repr(u) == ("UOp(Ops.WHERE, dtypes.float, arg=None, src=(\n"
      "  UOp(Ops.CMPLT, dtypes.bool, arg=None, src=(\n"
      f"    {C1},\n"
      f"    {C2},)),\n"
      "  UOp(Ops.CONST, dtypes.float, arg=0.5, src=()),\n"
      "  UOp(Ops.CONST, dtypes.float, arg=-0.0, src=()),))")

  def test_repr_in_containers(self):
    assert repr([c(1)]) == f"[{C1}]"
    assert str(c(1)) == C1
