# The operations written once in tinygrad/mixin: Tensor and UOp build the identical (interned: `is`) UOp for every shared op,
# with the same argument checks, and the graphs they build are valid tensor graphs of one spelling per op. No kernel runs.
import math
import re
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, ParamArg, AxisType
from tinygrad.uop.spec import spec_tensor, type_verify

_uid = iter(range(10**6))
def tensor_uop(shape, dt=dtypes.float):
  """A fresh tensor-level input: a BUFFER viewed as shape (never allocated: nothing here runs)."""
  n = math.prod(shape)
  b = UOp(Ops.BUFFER, dt, (UOp.const(n, dtypes.int),), ParamArg(next(_uid), dt, device="PYTHON"))
  return b if shape == (n,) else UOp(Ops.RESHAPE, dt, (b,), shape)
def T(u): return Tensor(u, device="PYTHON")

# op name -> f(x, y) usable on both Tensors and UOps (x, y of one shape and dtype; Python values where the op takes them)
BINARY = {
  "add": lambda x, y: x + y, "radd_const": lambda x, y: 2 + x, "add_const": lambda x, y: x + 1.5, "sub": lambda x, y: x - y,
  "rsub_const": lambda x, y: 3 - x, "sub_const": lambda x, y: x - 1, "mul": lambda x, y: x * y, "mul_const": lambda x, y: x * 3,
  "div": lambda x, y: x / y, "div_const": lambda x, y: x / 4, "rdiv_const": lambda x, y: 1 / x, "neg": lambda x, y: -x,
  "pow": lambda x, y: x ** y, "pow_const": lambda x, y: x ** 2, "mod_const": lambda x, y: x % 3, "floordiv": lambda x, y: x // y,
  "fmod": lambda x, y: x.fmod(y), "square": lambda x, y: x.square(), "maximum": lambda x, y: x.maximum(y), "minimum": lambda x, y: x.minimum(y),
  "maximum_const": lambda x, y: x.maximum(0), "clamp": lambda x, y: x.clamp(-1, 1), "relu": lambda x, y: x.relu(), "abs": lambda x, y: x.abs(),
  "eq": lambda x, y: x.eq(y), "eq_const": lambda x, y: x.eq(1), "ne": lambda x, y: x.ne(y), "lt": lambda x, y: x < y, "gt": lambda x, y: x > y,
  "ge": lambda x, y: x >= y, "le_const": lambda x, y: x <= 2, "rlt_const": lambda x, y: 2 < x, "logical_not": lambda x, y: x.logical_not(),
  "where": lambda x, y: (x < y).where(x, y), "where_consts": lambda x, y: (x < y).where(1, 2.5), "where_left_const": lambda x, y: (x < y).where(0, y),
  "where_right_const": lambda x, y: (x > 0).where(x, -1), "where_bools": lambda x, y: (x < y).where(True, False),
  "cast": lambda x, y: x.cast(dtypes.half), "cast_same": lambda x, y: x.cast(x.dtype),
}
FLOAT_UNARY = {"sqrt": lambda x: x.sqrt(), "exp": lambda x: x.exp(), "exp2": lambda x: x.exp2(), "log": lambda x: x.log(), "log2": lambda x: x.log2(),
               "sin": lambda x: x.sin(), "cos": lambda x: x.cos(), "reciprocal": lambda x: x.reciprocal(), "trunc": lambda x: x.trunc(),
               "floor": lambda x: x.floor(), "ceil": lambda x: x.ceil()}
INT_ONLY = {"and": lambda x, y: x & y, "or_const": lambda x, y: x | 6, "xor": lambda x, y: x ^ y, "invert": lambda x, y: ~x,
            "lshift": lambda x, y: x << 2, "rshift": lambda x, y: x >> y, "floordiv_const": lambda x, y: x // 3, "mod": lambda x, y: x % y,
            "div_trunc": lambda x, y: x.div(y, rounding_mode="trunc"), "div_floor": lambda x, y: x.div(y, rounding_mode="floor")}
MOVEMENT = {
  "reshape": lambda x: x.reshape(4, 6), "reshape_infer": lambda x: x.reshape(-1, 3), "reshape_same": lambda x: x.reshape(2, 3, 4),
  "expand": lambda x: x.reshape(2, 1, 3, 4).expand(2, 5, 3, 4), "expand_new_dims": lambda x: x.expand(7, 2, 3, 4),
  "expand_minus1": lambda x: x.shrink((None, (0, 1), None)).expand(-1, 3, -1),
  "permute": lambda x: x.permute(2, 0, 1), "permute_neg": lambda x: x.permute(-1, -3, -2),
  "pad": lambda x: x.pad(((1, 0), None, (2, 1))), "pad_torch": lambda x: x.pad((1, 2)),
  "pad_value": lambda x: x.pad(((0, 1), (1, 1), (0, 0)), value=2.5), "pad_negative": lambda x: x.pad(((-1, 1), (0, 0), (1, -2))),
  "shrink": lambda x: x.shrink(((0, 1), None, (1, 3))), "flip": lambda x: x.flip(0, 2), "flip_neg": lambda x: x.flip(-1),
  "transpose": lambda x: x.transpose(), "transpose_dims": lambda x: x.transpose(0, 2), "T": lambda x: x.T,
  "flatten": lambda x: x.flatten(), "flatten_part": lambda x: x.flatten(1), "squeeze": lambda x: x.shrink((None, (1, 2), None)).squeeze(),
  "squeeze_dim": lambda x: x.shrink(((1, 2), None, None)).squeeze(0), "unsqueeze": lambda x: x.unsqueeze(1),
  "unsqueeze_end": lambda x: x.unsqueeze(-1),
}
REDUCE = {
  "sum": lambda x: x.sum(), "sum_axis": lambda x: x.sum(1), "sum_axes_keepdim": lambda x: x.sum((0, 2), keepdim=True),
  "sum_dtype": lambda x: x.sum(-1, dtype=dtypes.float64), "prod": lambda x: x.prod(0), "max": lambda x: x.max(axis=2),
  "min": lambda x: x.min(), "min_keepdim": lambda x: x.min(1, keepdim=True), "mean": lambda x: x.mean(), "mean_axis": lambda x: x.mean(axis=(0, 1)),
}

def _gather(u):
  """For a UOp: itself; for a tuple of results: the UOps."""
  return u.uop if isinstance(u, Tensor) else u

def check_same(f, *us):
  """f over Tensors and f over UOps make the very same node, a valid tensor graph."""
  want = _gather(f(*[T(u) for u in us]))
  got = f(*us)
  assert got is want, f"\nTensor built:\n{want}\nUOp built:\n{got}"
  type_verify(UOp(Ops.SINK, dtypes.void, (got,)), spec_tensor, "tensor graph")
  return got

def cases(names, dts, keep=lambda name, dt: True):
  return [pytest.param(n, dt, id=f"{n}-{dt.name}") for n in names for dt in dts if keep(n, dt)]

@pytest.mark.parametrize("name, dt", cases(BINARY, [dtypes.float, dtypes.half, dtypes.int32, dtypes.uint8, dtypes.int64],
                                           lambda n, dt: dtypes.is_float(dt) or not n.startswith("pow")))
def test_binary(name, dt):
  check_same(BINARY[name], tensor_uop((3, 4), dt), tensor_uop((3, 4), dt))

@pytest.mark.parametrize("shape", [(3, 4), (), (1,)], ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_shapes(name, shape):
  check_same(BINARY[name], tensor_uop(shape), tensor_uop(shape))

@pytest.mark.parametrize("name, dt", cases(FLOAT_UNARY, [dtypes.float, dtypes.int32, dtypes.bool],
                                           lambda n, dt: dtypes.is_float(dt) or n not in ("trunc", "floor", "ceil")))
def test_float_unary(name, dt):
  check_same(FLOAT_UNARY[name], tensor_uop((5,), dt))

@pytest.mark.parametrize("name, dt", cases(INT_ONLY, [dtypes.int32, dtypes.uint8, dtypes.uint64, dtypes.bool],
                                           lambda n, dt: dt is not dtypes.bool or n in ("and", "or_const", "xor", "invert")))
def test_int_only(name, dt):
  check_same(INT_ONLY[name], tensor_uop((2, 3), dt), tensor_uop((2, 3), dt))

@pytest.mark.parametrize("name", ["add", "mul", "eq", "ne", "lt", "ge", "maximum", "minimum", "logical_not", "where", "where_bools", "and", "xor",
                                  "invert"])
def test_bool_operands(name):
  check_same({**BINARY, **INT_ONLY}[name], tensor_uop((4,), dtypes.bool), tensor_uop((4,), dtypes.bool))

def test_mixed_dtypes_promote():
  check_same(lambda x, y: x + y, tensor_uop((3,), dtypes.int32), tensor_uop((3,), dtypes.float))
  check_same(lambda x, y: x * y, tensor_uop((3,), dtypes.uint8), tensor_uop((3,), dtypes.int8))
  check_same(lambda x, y: x < y, tensor_uop((3,), dtypes.bool), tensor_uop((3,), dtypes.half))
  check_same(lambda x: x + 2.5, tensor_uop((3,), dtypes.int32))
  check_same(lambda x: x * True, tensor_uop((3,), dtypes.bool))
  check_same(lambda x: x - True, tensor_uop((3,), dtypes.int8))

@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(name):
  check_same(MOVEMENT[name], tensor_uop((2, 3, 4)))

@pytest.mark.parametrize("dt", [dtypes.float, dtypes.half, dtypes.int32, dtypes.bool], ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce(name, dt):
  check_same(REDUCE[name], tensor_uop((2, 3, 4), dt))

def test_reduce_0d():
  for f in REDUCE.values(): check_same(lambda x, f=f: f(x.reshape(2, 3, 4)), tensor_uop((24,)))
  check_same(lambda x: x.sum(), tensor_uop((1,)).reshape(()))

def test_composite():
  # UOps don't broadcast each other's shapes (Tensor does): written with explicit expands, both build the same graph
  def softmax(x): return (e := (x - x.max(axis=1, keepdim=True).expand(x.shape)).exp()) / e.sum(axis=1, keepdim=True).expand(x.shape)
  def mlp(x, w): return (x.unsqueeze(-1).expand(4, 8, 5) * w.unsqueeze(0).expand(4, 8, 5)).sum(1).relu().mean()
  check_same(softmax, tensor_uop((4, 8)))
  check_same(mlp, tensor_uop((4, 8)), tensor_uop((8, 5)))

# ***** one spelling per op *****

def test_spellings():
  x, y = tensor_uop((3,)), tensor_uop((3,))
  neg1 = x.full_like(-1)
  assert (x - y) is UOp(Ops.ADD, dtypes.float, (x, UOp(Ops.MUL, dtypes.float, (y, neg1))))
  assert -x is UOp(Ops.MUL, dtypes.float, (x, neg1))
  assert x / y is UOp(Ops.MUL, dtypes.float, (x, UOp(Ops.RECIPROCAL, dtypes.float, (y,))))
  ne = UOp(Ops.CMPNE, dtypes.bool, (x, y))
  assert x.eq(y) is UOp(Ops.CMPNE, dtypes.bool, (ne, ne.full_like(True)))
  b = tensor_uop((3,), dtypes.bool)
  assert (b + b).op is Ops.OR and (b * b).op is Ops.AND and (-b).op is Ops.CMPNE
  # the tensor graph has none of the other spellings: the spec rejects them
  for op in (Ops.SUB, Ops.FDIV):
    with pytest.raises(RuntimeError, match=f"{op} dtypes.float"): type_verify(UOp(op, dtypes.float, (x, y)), spec_tensor, "tensor graph")
  with pytest.raises(RuntimeError, match="Ops.NEG"): type_verify(UOp(Ops.NEG, dtypes.float, (x,)), spec_tensor, "tensor graph")
  with pytest.raises(RuntimeError, match="Ops.CMPEQ"): type_verify(UOp(Ops.CMPEQ, dtypes.bool, (x, y)), spec_tensor, "tensor graph")

def test_python_constants_follow_the_operand():
  # tensor-level: committed to the dtype Tensor picks and broadcast; 0-d: committed, no movement
  x = tensor_uop((2, 3), dtypes.int32)
  c = (x * 2).src[1]
  assert c.op is Ops.EXPAND and c.arg == (2, 3) and c.src[0].op is Ops.RESHAPE and c.src[0].src[0] is UOp.const(2, dtypes.int32)
  assert (x + 2.5).dtype is dtypes.float and (x + 2.5).src[0].op is Ops.CAST
  z = UOp.const(2.0, dtypes.float)
  assert (z * 3).src[1] is UOp.const(3.0, dtypes.float)
  # kernel level (no shape) and weak operands: tinygrad 0.14's weak CONSTs, unchanged
  r = UOp.range(4, 0, AxisType.LOOP)
  assert (r * 2).src[1] is UOp.const(2) and (r.cast(dtypes.int) + 1).src[1] is UOp.const(1)
  ld = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (UOp(Ops.PARAM, dtypes.float, (), ParamArg(0, dtypes.float)), r)),))
  assert (ld * 2).src[1] is UOp.const(2.0, dtypes.weakfloat) and (-ld).src[1] is UOp.const(-1.0, dtypes.weakfloat)
  # two UOps are never broadcast to each other (that is Tensor's): the node is ill-formed and says so when asked
  with pytest.raises(RuntimeError, match=re.escape("(2, 3), (3,)")): _ = (x + tensor_uop((3,), dtypes.int32)).shape

def test_patterns_keep_their_form():
  # UPat shares the operators but neither casts nor broadcasts: x*1, where and the bool rules still match what they matched
  def matches(pat, u): return PatternMatcher([(pat, lambda **kw: True)]).rewrite(u) is True
  r = UOp.range(4, 0, AxisType.LOOP)
  x = UPat.var("x")
  assert matches(x - 1, r - 1) and matches(x * -1, -r) and matches(x // 2, r // 2)
  assert matches(UPat.var("c").where(x, 0), (r < 2).where(r, 0)) and matches(UPat.var("c").where(x, 0), UOp.const(True).where(r, 0))
  b = r < 2
  assert matches(UPat.var("b", dtypes.bool).logical_not(), b.logical_not()) and matches(UPat.var("b", dtypes.bool) | x, b | (r < 3))

# ***** the same argument checks and errors *****

ERRORS = [
  (lambda x: x.reshape(5, 5), ValueError, r"\(2, 3, 4\).*\(5, 5\)"), (lambda x: x.reshape(-1, -1), RuntimeError, "only one dimension"),
  (lambda x: x.reshape(5, -1), ValueError, r"\(2, 3, 4\).*\(5, -1\)"), (lambda x: x.expand(3, 3, 4), RuntimeError, r"\(2, 3, 4\).*\(3, 3, 4\)"),
  (lambda x: x.expand(3, 4), RuntimeError, "fewer dims"), (lambda x: x.permute(0, 0, 1), RuntimeError, r"\(0, 0, 1\).*\(2, 3, 4\)"),
  (lambda x: x.permute(0, 1, 3), IndexError, r"dimension 3.*\(2, 3, 4\)"), (lambda x: x.pad((1, 2, 3)), ValueError, r"\(2, 3, 4\)"),
  (lambda x: x.pad(((1, 1),)), ValueError, r"\(2, 3, 4\)"), (lambda x: x.shrink(((0, 3), None, None)), ValueError, r"\(2, 3, 4\)"),
  (lambda x: x.shrink(((0, 1),)), ValueError, r"\(2, 3, 4\)"), (lambda x: x.flip(3), IndexError, r"\(2, 3, 4\)"),
  (lambda x: x.sum(3), IndexError, r"\(2, 3, 4\)"), (lambda x: x.squeeze(-4), IndexError, r"\(2, 3, 4\)"),
  (lambda x: x.unsqueeze(5), IndexError, r"\(2, 3, 4\)"), (lambda x: x.cast(dtypes.bool) - True, RuntimeError, "subtraction of bool"),
  (lambda x: x & 1, RuntimeError, "needs int or bool"), (lambda x: ~x, RuntimeError, "bitwise_not"), (lambda x: x << 1, RuntimeError, "needs int"),
  (lambda x: x + "a", TypeError, "can't use str"), (lambda x: x.div(2, rounding_mode="up"), RuntimeError, "rounding_mode"),
]

@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_same_errors(i):
  f, exc, msg = ERRORS[i]
  x = tensor_uop((2, 3, 4))
  with pytest.raises(exc, match=msg) as e1: f(T(x))
  with pytest.raises(exc, match=msg) as e2: f(x)
  assert str(e1.value) == str(e2.value)
