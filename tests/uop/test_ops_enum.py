# Ops must list the same members in the same order as tinygrad 0.14 (toposort order depends on it), with the values 1..N
# that the Rust core indexes its tables by.
import gc
import pickle
from enum import IntEnum
import pytest
from tinygrad.uop import Ops, GroupOp, FastEnum, auto

EXPECTED_ORDER = """SPECIAL BUFFER NOOP REWRITE_ERROR PARAM FUNCTION CALL PROGRAM LINEAR SOURCE BINARY SINK AFTER GROUP STACK TUPLE GETTUPLE GETADDR
INDEX SHRINK LOAD STORE WMMA CAST BITCAST EXP2 LOG2 SIN SQRT RECIPROCAL NEG TRUNC ADD MUL SHL SHR CDIV MAX CMOD CMPLT CMPNE CMPEQ XOR OR AND THREEFRY
SUB FDIV POW FLOORDIV FLOORMOD WHERE MULACC BARRIER RANGE IF END ENDIF CONST CUSTOM CUSTOMI INS CONTIGUOUS CONTIGUOUS_BACKWARD DETACH STAGE COPY
MSELECT MSTACK CUSTOM_FUNCTION RESHAPE PERMUTE EXPAND PAD FLIP UNSHARD REDUCE ALLREDUCE PYLITERAL""".split()

def names(s): return {o.name for o in s}

class TestOps:
  def test_order(self):
    assert [o.name for o in Ops] == EXPECTED_ORDER

  def test_values_contiguous(self):
    assert [o.value for o in Ops] == list(range(1, len(Ops) + 1))
    assert len(Ops) < 256
    assert all(Ops(i).value == i for i in range(1, len(Ops) + 1))

  def test_int_enum(self):
    assert issubclass(Ops, IntEnum) and isinstance(Ops.ADD, int)
    assert Ops.ADD == 33 and hash(Ops.ADD) == hash(33) and Ops.SPECIAL < Ops.ADD < Ops.PYLITERAL
    assert sorted([Ops.CONST, Ops.SINK, Ops.ADD]) == [Ops.SINK, Ops.ADD, Ops.CONST]

  def test_str_repr(self):
    assert str(Ops.ADD) == repr(Ops.ADD) == f"{Ops.ADD}" == "Ops.ADD"
    assert str([Ops.ADD, Ops.MUL]) == "[Ops.ADD, Ops.MUL]"
    assert Ops.CONTIGUOUS_BACKWARD.name == "CONTIGUOUS_BACKWARD" and Ops["WHERE"] is Ops.WHERE

  def test_pickle_by_name(self):
    for op in Ops:
      for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(op, protocol=proto)
        assert pickle.loads(data) is op
        assert op.name.encode() in data

  def test_fastenum_numbering_continues(self):
    class Extra(FastEnum):
      FIRST = auto(); SECOND = auto()
    assert Extra.FIRST.value == len(Ops) + 1 and Extra.SECOND.value == len(Ops) + 2
    assert repr(Extra.SECOND) == "Extra.SECOND"
    # drop the test enum so FastEnum subclasses defined later number as they would without it
    del Extra
    gc.collect()
    assert all(sub.__name__ != "Extra" for sub in FastEnum.__subclasses__())

class TestGroupOp:
  def test_groups(self):
    assert names(GroupOp.Unary) == {"EXP2", "LOG2", "SIN", "SQRT", "RECIPROCAL", "NEG", "TRUNC"}
    assert names(GroupOp.Binary) == {"ADD", "MUL", "SHL", "SHR", "CDIV", "MAX", "CMOD", "CMPLT", "CMPNE", "CMPEQ", "XOR", "OR", "AND", "THREEFRY",
                                     "SUB", "FDIV", "POW", "FLOORDIV", "FLOORMOD"}
    assert names(GroupOp.Ternary) == {"WHERE", "MULACC"}
    assert names(GroupOp.Defines) == {"PARAM", "BUFFER"}
    assert names(GroupOp.Irreducible) == {"CONST", "SPECIAL", "RANGE", "PARAM", "GETADDR"}
    assert names(GroupOp.Movement) == {"RESHAPE", "EXPAND", "PERMUTE", "PAD", "SHRINK", "FLIP"}
    assert names(GroupOp.Commutative) == {"ADD", "MUL", "MAX", "CMPNE", "CMPEQ", "XOR", "AND", "OR"}
    assert names(GroupOp.Associative) == {"ADD", "MUL", "AND", "OR", "MAX"}
    assert names(GroupOp.Idempotent) == {"OR", "AND", "MAX"}
    assert names(GroupOp.Reduce) == {"ADD", "MUL", "MAX"}
    assert names(GroupOp.Comparison) == {"CMPLT", "CMPNE", "CMPEQ"}

  def test_derived_groups(self):
    assert GroupOp.ALU == GroupOp.Unary | GroupOp.Binary | GroupOp.Ternary
    assert GroupOp.Broadcastable == GroupOp.Binary | GroupOp.Ternary
    assert GroupOp.Elementwise == GroupOp.ALU | {Ops.CAST, Ops.BITCAST}
    assert GroupOp.All == set(Ops)
    assert GroupOp.Commutative <= GroupOp.Binary and GroupOp.Associative <= GroupOp.Commutative and GroupOp.Comparison <= GroupOp.Binary

  @pytest.mark.parametrize("name", ["Unary", "Binary", "Ternary", "ALU", "Broadcastable", "Elementwise", "Defines", "Irreducible", "Movement",
                                    "Commutative", "Associative", "Idempotent", "Reduce", "Comparison", "All"])
  def test_groups_are_sets(self, name):
    # callers combine groups with set.union(...), which only accepts real sets
    group = getattr(GroupOp, name)
    assert type(group) is set and all(isinstance(o, Ops) for o in group)
    assert set.union(group, GroupOp.Unary) >= group

class TestFastClassGetattr:
  # FastEnum's metaclass looks class attributes up through type's own slot (tinygrad._core.fast_class_getattr);
  # everything EnumType.__getattr__ answered must still be answered the same way.
  def test_members_and_inherited_attributes(self):
    from enum import EnumType
    assert isinstance(Ops, EnumType) and Ops.ADD is Ops["ADD"] is Ops(Ops.ADD.value)
    assert Ops.__members__["MUL"] is Ops.MUL and Ops._member_map_["CONST"] is Ops.CONST
    assert Ops.__str__ is FastEnum.__str__ and Ops.from_bytes(b"\x01", "little") == 1

  def test_missing_attribute(self):
    assert not hasattr(Ops, "NOT_AN_OP")
    with pytest.raises(AttributeError, match="NOT_AN_OP"): Ops.NOT_AN_OP
    with pytest.raises(AttributeError): Ops.__not_a_dunder__

  def test_metaclass_getattr_override_still_wins(self):
    class Meta(type(Ops)):
      def __getattr__(cls, name): return f"fallback {name}"
    class E(FastEnum, metaclass=Meta):
      A = auto()
    assert E.A.name == "A" and E.missing == "fallback missing"

  def test_rejects_other_types(self):
    from tinygrad import _core
    with pytest.raises(TypeError): _core.fast_class_getattr(int)
    with pytest.raises(TypeError): _core.fast_class_getattr(type)
