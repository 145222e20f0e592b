# The UOp opcode enum and the named groups of opcodes that rewrite rules match on.
# The Rust core (tinygrad._core) indexes a table by Ops value, so values must stay the contiguous integers 1..len(Ops), below 256.
from enum import Enum, EnumType, IntEnum, auto
from tinygrad import _core

__all__ = ["FastEnum", "Ops", "GroupOp", "auto"]

class FastEnumType(EnumType):
  """The metaclass of FastEnum: an EnumType whose class attribute lookups (`Ops.ADD`) take `type`'s direct path.

  CPython 3.11's EnumType defines __getattr__, which sends every `Ops.ADD` through a method wrapper (benches/README.md, Design measurements);
  `_core.fast_class_getattr` gives this metaclass a slot that only falls back to __getattr__ when the plain lookup fails.
  """
_core.fast_class_getattr(FastEnumType)

class FastEnum(IntEnum, metaclass=FastEnumType):
  """An IntEnum (cheap hashing and comparison) that still prints as `Cls.NAME`.

  auto() continues numbering after every FastEnum subclass defined so far, so values never collide between
  subclasses (an ISA enum defined after Ops starts where Ops ends). Members pickle by name, so a pickle survives renumbering.
  """
  def __str__(self): return Enum.__str__(self)
  def __repr__(self): return Enum.__str__(self)
  def __reduce_ex__(self, protocol): return getattr, (self.__class__, self._name_)
  @staticmethod
  def _generate_next_value_(name, start, count, last_values):
    taken = [0, *last_values, *(max(sub) for sub in FastEnum.__subclasses__() if len(sub))]
    return max(taken) + 1

# Member ORDER matters: toposort breaks ties by Ops value, so this order must match tinygrad 0.14 exactly.
class Ops(FastEnum):
  # -- defines / special --
  SPECIAL = auto()   # a GPU launch dimension (global/local index)
  BUFFER = auto()    # storage in global, local or register memory, chosen by its addrspace

  # -- structural ops that render to nothing --
  NOOP = auto(); REWRITE_ERROR = auto()
  PARAM = auto(); FUNCTION = auto(); CALL = auto()
  # compiler products: a linearized program, its source text and its compiled binary
  PROGRAM = auto(); LINEAR = auto(); SOURCE = auto(); BINARY = auto()
  # SINK roots a graph, AFTER orders src[0] after src[1:], GROUP merges without computing
  SINK = auto(); AFTER = auto(); GROUP = auto()
  STACK = auto()
  TUPLE = auto(); GETTUPLE = auto()
  GETADDR = auto()

  # -- memory --
  INDEX = auto(); SHRINK = auto()
  LOAD = auto(); STORE = auto()

  # -- math --
  WMMA = auto()
  # unary
  CAST = auto(); BITCAST = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto()
  SQRT = auto(); RECIPROCAL = auto(); NEG = auto(); TRUNC = auto()
  # binary
  ADD = auto(); MUL = auto(); SHL = auto(); SHR = auto(); CDIV = auto(); MAX = auto(); CMOD = auto()
  CMPLT = auto(); CMPNE = auto(); CMPEQ = auto()
  XOR = auto(); OR = auto(); AND = auto()
  THREEFRY = auto(); SUB = auto(); FDIV = auto(); POW = auto()
  FLOORDIV = auto(); FLOORMOD = auto()
  # ternary
  WHERE = auto(); MULACC = auto()

  # -- control flow, constants, raw code --
  BARRIER = auto(); RANGE = auto(); IF = auto(); END = auto(); ENDIF = auto()
  CONST = auto()
  CUSTOM = auto(); CUSTOMI = auto()   # CUSTOMI renders inline
  INS = auto()                        # one machine instruction

  # -- tensor-graph-only ops (never reach a program) --
  CONTIGUOUS = auto(); CONTIGUOUS_BACKWARD = auto(); DETACH = auto()
  STAGE = auto(); COPY = auto(); MSELECT = auto(); MSTACK = auto(); CUSTOM_FUNCTION = auto()
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); FLIP = auto()
  UNSHARD = auto()
  REDUCE = auto(); ALLREDUCE = auto()

  # -- pattern compiler IR --
  PYLITERAL = auto()

# These are plain (mutable) sets on purpose: callers combine them with set.union(GroupOp.X, ...), which rejects frozensets.
class GroupOp:
  Unary = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.NEG, Ops.TRUNC}
  Binary = {Ops.ADD, Ops.MUL, Ops.SHL, Ops.SHR, Ops.CDIV, Ops.MAX, Ops.CMOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
            Ops.XOR, Ops.OR, Ops.AND, Ops.THREEFRY, Ops.SUB, Ops.FDIV, Ops.POW, Ops.FLOORDIV, Ops.FLOORMOD}
  Ternary = {Ops.WHERE, Ops.MULACC}
  ALU = Unary | Binary | Ternary
  Broadcastable = Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}

  Defines = {Ops.PARAM, Ops.BUFFER}
  Irreducible = {Ops.CONST, Ops.SPECIAL, Ops.RANGE, Ops.PARAM, Ops.GETADDR}
  Movement = {Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}

  # f(a,b) == f(b,a)
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.XOR, Ops.AND, Ops.OR}
  # f(f(a,b),c) == f(a,f(b,c))
  Associative = {Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.MAX}
  # f(x,x) == x
  Idempotent = {Ops.OR, Ops.AND, Ops.MAX}
  # ops allowed as the arg of REDUCE/ALLREDUCE
  Reduce = {Ops.ADD, Ops.MUL, Ops.MAX}
  # ops whose result is bool whatever the input dtype
  Comparison = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}

  All = set(Ops)
