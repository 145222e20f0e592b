# The gradient rules (tinygrad/gradient.py) on tensor-level UOps: what each rule builds, the walk of compute_gradient (paths,
# DETACH, accumulation, deep graphs), and that gradient graphs keep the one-spelling rules. No device is used.
import math
import pytest
from tinygrad.dtype import dtypes
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg
from tinygrad.uop.spec import type_verify, spec_tensor
from tinygrad.gradient import pm_gradient, compute_gradient

def buf(n=12, dt=dtypes.float, uid=0): return UOp(Ops.BUFFER, dt, (UOp.const(n, dtypes.int),), ParamArg(uid, dt, device="CPU"))
def tensor(shape, dt=dtypes.float, uid=0):
  n = math.prod(shape)
  return UOp(Ops.RESHAPE, dt, (buf(n, dt, uid),), shape)

X, Y = tensor((3, 4), uid=1), tensor((3, 4), uid=2)
G = tensor((3, 4), uid=3)   # an incoming gradient

def rule(u:UOp, g:UOp): return pm_gradient.rewrite(u, ctx=g)

class TestRules:
  def test_add_mul(self):
    assert rule(X + Y, G) == (G, G)
    a, b = rule(X * Y, G)
    assert a is Y * G and b is X * G
  def test_no_gradient(self):
    for u in (X < Y, X.ne(Y), X.trunc(), X.bitcast(dtypes.int32)):
      assert rule(u, G if u.dtype is dtypes.float else G.bitcast(u.dtype)) == (None,) * len(u.src)
    xi, yi = tensor((3, 4), dtypes.int32, 4), tensor((3, 4), dtypes.int32, 5)
    for op in (Ops.FLOORDIV, Ops.FLOORMOD, Ops.CDIV, Ops.CMOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR):
      assert rule(UOp(op, dtypes.int32, (xi, yi)), xi) == (None, None)
    assert rule(UOp(Ops.DETACH, dtypes.float, (X,)), G) == (None,)
  def test_where(self):
    c = X < Y
    none, a, b = rule(c.where(X, Y), G)
    assert none is None and a is c.where(G, G.full_like(0)) and b is c.where(G.full_like(0), G)
  def test_unary(self):
    assert rule(X.reciprocal(), G)[0] is -(G * X.reciprocal() * X.reciprocal())
    assert rule(X.sqrt(), G)[0] is G / (X.sqrt() * 2)
    assert rule(X.exp2(), G)[0] is X.exp2() * G * math.log(2)
    assert rule(X.log2(), G)[0] is G / (X * math.log(2))
    assert rule(X.sin(), G)[0] is X.cos() * G
  def test_max(self):
    a, b = rule(X.maximum(Y), G)
    # the larger input takes the gradient, a tie splits it
    half = X.eq(Y).where(G * 0.5, 0.0)
    assert a is (X > Y).where(G, half) and b is (X < Y).where(G, half)
  def test_pow(self):
    a, b = rule(X.pow(Y), G)
    assert a.shape == b.shape == (3, 4) and a.dtype is b.dtype is dtypes.float
  def test_cast(self):
    h = X.cast(dtypes.half)
    assert rule(h, h.src[0].cast(dtypes.half))[0] is X.cast(dtypes.half).cast(dtypes.float)
    assert rule(X.cast(dtypes.int32), G.cast(dtypes.int32)) == (None,)   # no derivative into an int
    xi = tensor((3, 4), dtypes.int32, 4)
    assert rule(xi.cast(dtypes.float), G) == (None,)                       # nor out of one
  @pytest.mark.parametrize("op, arg, inverse", [
    (Ops.RESHAPE, (2, 6), lambda g: g.reshape(3, 4)),
    (Ops.PERMUTE, (1, 0), lambda g: g.permute(1, 0)),
    (Ops.PAD, ((1, 2), (0, 3)), lambda g: g.shrink(((1, 4), (0, 4)))),
    (Ops.SHRINK, ((1, 3), (2, 4)), lambda g: g.pad(((1, 0), (2, 0)))),
    (Ops.FLIP, (True, False), lambda g: g.flip(0)),
  ])
  def test_movement(self, op, arg, inverse):
    u = UOp(op, dtypes.float, (X,), arg)
    g = tensor(u.shape, uid=9)
    assert rule(u, g) == (inverse(g),)
  def test_permute_3d(self):
    x = tensor((2, 3, 4))
    u = x.permute(2, 0, 1)
    g = tensor(u.shape, uid=9)
    (back,) = rule(u, g)
    assert back.shape == x.shape and back.arg == (1, 2, 0)
  def test_expand_sums(self):
    x = tensor((3, 1))
    (back,) = rule(x.expand(3, 4), G)
    assert back is G._rop(Ops.ADD, (1,))
    h = tensor((3, 1), dtypes.half).expand(3, 4)
    (back,) = rule(h, G.cast(dtypes.half))   # half sums in float32 and is cast back
    assert back.dtype is dtypes.half and back.src[0].op is Ops.REDUCE and back.src[0].dtype is dtypes.float
  def test_reduce_sum(self):
    r = X._rop(Ops.ADD, (1,))
    g = tensor((3, 1), uid=9)
    assert rule(r, g) == (g.expand(3, 4),)
  def test_reduce_max_prod(self):
    g = tensor((3, 1), uid=9)
    for op in (Ops.MAX, Ops.MUL):
      (back,) = rule(X._rop(op, (1,)), g)
      assert back.shape == (3, 4) and back.dtype is dtypes.float
  def test_buffers_and_devices(self):
    assert rule(UOp(Ops.CONTIGUOUS, dtypes.float, (X,)), G) == (G,)
    assert rule(UOp(Ops.CONTIGUOUS_BACKWARD, dtypes.float, (X,)), G) == (UOp(Ops.CONTIGUOUS, dtypes.float, (G,)),)
    assert rule(UOp(Ops.COPY, dtypes.float, (X,), ("CPU", "PYTHON")), G) == (UOp(Ops.COPY, dtypes.float, (G,), ("PYTHON", "CPU")),)

def seed(u:UOp) -> UOp: return u.full_like(1.0)

class TestComputeGradient:
  def test_only_paths_to_targets(self):
    z = tensor((3, 4), uid=7)
    loss = ((X * Y).sin() + z.exp2())._rop(Ops.ADD, (0, 1))
    grads = compute_gradient(loss, seed(loss), {X})
    assert X in grads and Y not in grads and z not in grads and z.exp2() not in grads
  def test_accumulates_uses(self):
    loss = (X * X + X)._rop(Ops.ADD, (0, 1))
    g = compute_gradient(loss, seed(loss), {X})[X]
    assert g.op is Ops.ADD   # the three uses are summed
  def test_detach_stops(self):
    d = UOp(Ops.DETACH, dtypes.float, (X,))
    loss = (d * X)._rop(Ops.ADD, (0, 1))
    grads = compute_gradient(loss, seed(loss), {X, d})
    # only the direct use reaches X (no sum of two paths); the DETACH node itself, a target, gets its gradient
    assert grads[X] is d * grads[d * X] and grads[d] is X * grads[d * X]
  def test_unreached_target(self):
    loss = X._rop(Ops.ADD, (0, 1))
    assert Y not in compute_gradient(loss, seed(loss), {Y})
  def test_int_path_is_cut(self):
    loss = X.cast(dtypes.int32).cast(dtypes.float)._rop(Ops.ADD, (0, 1))
    grads = compute_gradient(loss, seed(loss), {X})
    assert X not in grads
  def test_root_is_target(self):
    loss = X._rop(Ops.ADD, (0, 1))
    assert compute_gradient(loss, seed(loss), {loss})[loss] is seed(loss)
  def test_no_rule(self):
    m = UOp(Ops.MULACC, dtypes.float, (X, Y, X))
    with pytest.raises(RuntimeError, match="no gradient rule for Ops.MULACC"): compute_gradient(m, G, {X})
  def test_deep_graph(self):
    # a chain 20k nodes deep: no recursion in the walk (nor in the rules)
    x = tensor((4,))
    y = x
    for i in range(10_000): y = y * 1.5 + 0.5 if i % 2 else y.sin()
    loss = y._rop(Ops.ADD, (0,))
    assert compute_gradient(loss, seed(loss), {x})[x].shape == (4,)
  def test_spelling(self):
    # gradient graphs use the Tensor spellings (no SUB/NEG/FDIV/CMPEQ): the tensor spec accepts them
    z = X.maximum(Y).reciprocal().sqrt().log2().exp2().sin() * X.pow(Y) + (X < Y).where(X, Y)
    loss = (z._rop(Ops.MAX, (1,)) + z._rop(Ops.MUL, (1,)) + z.pad(((1, 1), (0, 0))).shrink(((0, 3), (0, 4))).flip(0)
            .permute(1, 0).reshape(2, 6)._rop(Ops.ADD, (0,)).reshape(6, 1)._rop(Ops.ADD, (0, 1)).reshape(1, 1).expand(3, 1))._rop(Ops.ADD, (0, 1))
    grads = compute_gradient(loss, seed(loss), {X, Y})
    type_verify(UOp(Ops.SINK, dtypes.void, (grads[X], grads[Y])), spec_tensor, "gradient graph")
    assert all(u.op not in (Ops.SUB, Ops.NEG, Ops.FDIV, Ops.CMPEQ) for u in UOp(Ops.SINK, dtypes.void, (grads[X], grads[Y])).toposort())
