# UOp.shape (tinygrad/uop/shape.py): the shape of every tensor-level op, None for kernel-level nodes, errors for ill-formed nodes,
# caching on the node, and deep graphs without recursion. No device is used.
import re
import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType

def buf(n=12, dt=dtypes.float, uid=0): return UOp(Ops.BUFFER, dt, (UOp.const(n, dtypes.int),), ParamArg(uid, dt, device="CPU"))
def view(b, shape): return UOp(Ops.RESHAPE, b.dtype, (b,), shape)
def u(op, x, arg=None, dt=None): return UOp(op, dt or x.dtype, (x,), arg)
def raises(*pieces):
  return pytest.raises(RuntimeError, match=".*".join(re.escape(p) for p in pieces))

X = view(buf(), (3, 4))

class TestShapes:
  def test_leaves(self):
    assert buf(7).shape == (7,)
    assert UOp.const(1.5, dtypes.float).shape == () and UOp.const(3).shape == ()

  @pytest.mark.parametrize("op, arg, want", [
    (Ops.RESHAPE, (2, 6), (2, 6)), (Ops.RESHAPE, (12,), (12,)), (Ops.RESHAPE, (1, 3, 1, 4), (1, 3, 1, 4)),
    (Ops.PERMUTE, (1, 0), (4, 3)), (Ops.PAD, ((1, 2), (0, 3)), (6, 7)), (Ops.SHRINK, ((1, 3), (0, 0)), (2, 0)),
    (Ops.FLIP, (True, False), (3, 4)),
  ])
  def test_movement(self, op, arg, want):
    assert u(op, X, arg).shape == want

  def test_expand(self):
    assert u(Ops.EXPAND, view(buf(), (3, 1, 4)), (3, 5, 4)).shape == (3, 5, 4)
    assert u(Ops.EXPAND, view(buf(1), ()), ()).shape == ()

  @pytest.mark.parametrize("axes, want", [((0,), (1, 4)), ((1,), (3, 1)), ((0, 1), (1, 1))])
  def test_reduce_keeps_dims(self, axes, want):
    for op in (Ops.ADD, Ops.MUL, Ops.MAX): assert u(Ops.REDUCE, X, (op, axes)).shape == want

  def test_elementwise(self):
    b = view(buf(uid=1), (3, 4))
    assert UOp(Ops.ADD, dtypes.float, (X, b)).shape == (3, 4)
    assert UOp(Ops.CMPLT, dtypes.bool, (X, b)).shape == (3, 4)
    assert UOp(Ops.SQRT, dtypes.float, (X,)).shape == (3, 4)
    assert UOp(Ops.WHERE, dtypes.float, (UOp(Ops.CMPLT, dtypes.bool, (X, b)), X, b)).shape == (3, 4)
    for op, arg in ((Ops.CAST, dtypes.int), (Ops.BITCAST, dtypes.int)): assert UOp(op, dtypes.int, (X,), arg).shape == (3, 4)
    for op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD): assert u(op, X).shape == (3, 4)
    assert u(Ops.COPY, X, ("CPU", "PYTHON")).shape == (3, 4)
    assert UOp(Ops.ADD, dtypes.float, (UOp.const(1.0, dtypes.float), UOp.const(2.0, dtypes.float))).shape == ()

  def test_a_chain(self):
    s = u(Ops.REDUCE, u(Ops.PERMUTE, X, (1, 0)), (Ops.ADD, (1,)))
    p = u(Ops.PAD, s, ((1, 0), (0, 2)))
    assert (s.shape, p.shape, u(Ops.EXPAND, u(Ops.SHRINK, p, ((0, 5), (1, 2))), (5, 3)).shape) == ((4, 1), (5, 3), (5, 3))

class TestKernelLevel:
  """Index arithmetic and kernel nodes have no shape, and asking never raises."""
  def test_none(self):
    r = UOp.range(8, 0, AxisType.LOOP)
    p = UOp(Ops.PARAM, dtypes.float, (UOp.const(8, dtypes.int),), ParamArg(0, dtypes.float))
    ld = UOp(Ops.LOAD, dtypes.float, (UOp(Ops.INDEX, dtypes.float, (p, r)),))
    v = UOp.variable("n", 1, 10)
    for x in (r, p, ld, r * 4 + 1, (r < 3).where(r, 0), ld * 2.0, r + v, UOp.variable("m", 1, 10, param=True),
              UOp(Ops.REDUCE, dtypes.float, (ld, UOp.range(4, 1, AxisType.REDUCE)), (Ops.ADD,)), UOp(Ops.SHRINK, dtypes.float, (p,), None)):
      assert x.shape is None, x
  def test_variable_is_0d(self):
    # as in tinygrad 0.14: a Variable (bound or not) is a 0-d value, so t * v broadcasts it (symbolic shapes)
    v = UOp.variable("n", 1, 10)
    assert v.shape == () and v.bind(3).shape == () and (v.cast(dtypes.int) + 1).shape == ()

class TestErrors:
  """An ill-formed node raises when its shape is asked for, naming its op, arg and source shapes."""
  @pytest.mark.parametrize("op, arg, pieces", [
    (Ops.RESHAPE, (5,), ("Ops.RESHAPE", "(5,)", "(3, 4)", "12 elements")),
    (Ops.RESHAPE, (3, -4), ("Ops.RESHAPE", "(3, 4)", "ints >= 0")),
    (Ops.EXPAND, (6, 4), ("Ops.EXPAND", "(6, 4)", "(3, 4)", "size 1")),
    (Ops.EXPAND, (3, 4, 1), ("Ops.EXPAND", "(3, 4)", "one int")),
    (Ops.PERMUTE, (0, 0), ("Ops.PERMUTE", "(0, 0)", "(3, 4)", "permutation")),
    (Ops.PAD, ((1, 1),), ("Ops.PAD", "(3, 4)", "pair")),
    (Ops.PAD, ((-1, 0), (0, 0)), ("Ops.PAD", "(3, 4)", ">= 0")),
    (Ops.SHRINK, ((0, 4), (0, 4)), ("Ops.SHRINK", "((0, 4), (0, 4))", "(3, 4)")),
    (Ops.FLIP, (True,), ("Ops.FLIP", "(3, 4)", "one bool")),
    (Ops.REDUCE, (Ops.ADD, (2,)), ("Ops.REDUCE", "(3, 4)", "axes")),
    (Ops.REDUCE, (Ops.ADD, (1, 0)), ("Ops.REDUCE", "(3, 4)", "sorted")),
    (Ops.REDUCE, (Ops.SUB, (0,)), ("Ops.REDUCE", "(3, 4)")),
  ])
  def test_movement_and_reduce(self, op, arg, pieces):
    with raises(*pieces): _ = u(op, X, arg).shape

  def test_elementwise_mismatch(self):
    bad = UOp(Ops.ADD, dtypes.float, (X, view(buf(uid=1), (4, 3))))
    with raises("Ops.ADD", "(3, 4), (4, 3)"): _ = bad.shape
    with raises("Ops.MUL", "(3, 4), ()"): _ = UOp(Ops.MUL, dtypes.float, (X, UOp.const(2.0, dtypes.float))).shape

  def test_error_from_below(self):
    # the bad node is deep in the graph: its error surfaces when a node above asks
    bad = u(Ops.RESHAPE, X, (5,))
    with raises("Ops.RESHAPE", "(5,)"): _ = u(Ops.CONTIGUOUS, u(Ops.FLIP, bad, (True,))).shape

class TestCaching:
  def test_same_tuple_object(self):
    x = u(Ops.PERMUTE, view(buf(24, uid=3), (2, 3, 4)), (2, 0, 1))
    assert x.shape is x.shape and x.__dict__["shape"] is x.shape
    # an equal node built again is the same (interned) node, with the same stored tuple
    assert u(Ops.PERMUTE, view(buf(24, uid=3), (2, 3, 4)), (2, 0, 1)).shape is x.shape

  def test_sources_are_filled(self):
    p = u(Ops.FLIP, u(Ops.PERMUTE, X, (1, 0)), (True, False))
    assert p.shape == (4, 3) and p.src[0].__dict__["shape"] == (4, 3) and X.__dict__["shape"] == (3, 4)

  def test_kernel_none_is_cached(self):
    x = UOp.range(5, 0, AxisType.LOOP) + 1
    assert x.shape is None and "shape" in x.__dict__

  def test_deep_graph_has_no_recursion(self):
    x = X
    for i in range(20000): x = UOp(Ops.ADD if i % 2 else Ops.MUL, dtypes.float, (x, X))
    assert x.shape == (3, 4)
