"""Reverse-mode autodiff over the tensor graph: one rule per tensor-level op, and the walk that chains them.

`pm_gradient` maps a node to the gradients of its sources: each rule is called with ctx = the gradient of the node (a UOp of the
node's shape and dtype) and returns a tuple with one entry per source, None where no gradient flows (comparisons, int ops, a
WHERE's condition, a movement op has only one source). Gradients are built with the same mixin methods (tinygrad/mixin) the Tensor
API uses, so they obey the spelling rules of mathtraits.py and fuse with the forward graph in the scheduler.

`compute_gradient(root, root_grad, targets)` walks the nodes on a path from root to a target in reverse topological order (every
consumer of a node before the node) and sums the gradients each node receives. DETACH stops the walk; ints and bools get no gradient
(a cast from a float to them cuts the path, as in torch). A call (tinygrad/uop/call.py) collects its outputs' gradients (GETTUPLE) into
a TUPLE and hands its arguments the gradients of its body, computed by a backward call (_call_gradient), or its grad_fxn's.
"""
from __future__ import annotations
import dataclasses
import math
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher
from tinygrad.uop.call import body_params, substitute_outside_calls, is_const_graph
from tinygrad.dtype import dtypes
from tinygrad.helpers import argsort

__all__ = ["pm_gradient", "compute_gradient"]

_LN2 = math.log(2)

def _reduce_axes(ret:UOp) -> tuple[int, ...]: return ret.arg[1]

def _max_gradient(ctx:UOp, ret:UOp, x:UOp) -> tuple[UOp]:
  # the gradient is shared equally between the elements equal to the max (as tinygrad does)
  shape, axes = x.shape, _reduce_axes(ret)
  hit = x.eq(ret.expand(shape)).cast(ctx.dtype)
  return (hit * hit.sum(axes, keepdim=True).reciprocal().expand(shape) * ctx.expand(shape),)

def _prod_gradient(ctx:UOp, ret:UOp, x:UOp) -> tuple[UOp]:
  # d prod / d x_i is the product of the others: prod / x_i where x_i != 0; where x_i is the only zero, the product of the others; 0
  # where another element is zero too
  shape, axes = x.shape, _reduce_axes(ret)
  zero = x.eq(0)
  nonzero_x = zero.where(1.0, x)
  zeros = zero.cast(dtypes.int32).sum(axes, keepdim=True)
  others_if_lone_zero = zeros.eq(1).where(nonzero_x.prod(axes, keepdim=True), 0.0).expand(shape)
  return (ctx.expand(shape) * zero.where(others_if_lone_zero, ret.expand(shape) * nonzero_x.reciprocal()),)

# the tensor-level REDUCE keeps the reduced dims as 1: its gradient expands back
_REDUCE_GRADIENT = {
  Ops.ADD: lambda ctx, ret, x: (ctx.expand(x.shape),),
  Ops.MAX: _max_gradient,
  Ops.MUL: _prod_gradient,
}

def _expand_gradient(ctx:UOp, ret:UOp, x:UOp) -> tuple[UOp]:
  # summed over the expanded dims (in the accumulation dtype of sum: half sums in float32)
  # an expanded dim is a 1 that became another size, also a symbolic one (summing over it is right when that size is 1 too): decided
  # without asking whether n != 1
  expanded = tuple(i for i, (a, b) in enumerate(zip(x.shape, ret.shape)) if type(a) is int and a == 1 and not (type(b) is int and b == 1))
  return (ctx.sum(expanded, keepdim=True),)

def _cast_gradient(ctx:UOp, ret:UOp, x:UOp) -> tuple[UOp|None]:
  # only between floats: a cast to an int or bool has no derivative, a cast from one starts no path
  return (ctx.cast(x.dtype) if dtypes.is_float(x.dtype) and dtypes.is_float(ret.dtype) else None,)

def _pow_gradient(ctx:UOp, ret:UOp, b:UOp, e:UOp) -> tuple[UOp, UOp]:
  # d/db: e*b**(e-1), 0 where e == 0 (also at b == 0, where the formula is 0*inf); d/de: b**e*ln(b), at b == 0 0 for e >= 0 and -inf
  # for e < 0 (torch's limits)
  db = e.eq(0).where(0.0, e * b.pow(e - 1))
  de = b.eq(0).where((e < 0).where(-math.inf, 0.0), ret * b.log2() * _LN2)
  return (ctx * db, ctx * de)

def _max_binary_gradient(ctx:UOp, x:UOp, y:UOp) -> tuple[UOp, UOp]:
  # the larger input takes the gradient; equal inputs take half each (as tinygrad does)
  half = x.eq(y).where(ctx * 0.5, 0.0)
  return ((x > y).where(ctx, half), (x < y).where(ctx, half))

def _where_gradient(ctx:UOp, c:UOp) -> tuple[None, UOp, UOp]:
  zero = ctx.full_like(0)
  return (None, c.where(ctx, zero), c.where(zero, ctx))

def _none(ret:UOp) -> tuple[None, ...]: return (None,) * len(ret.src)

# ops through which no gradient flows: comparisons, integer and bit ops, TRUNC (zero almost everywhere), BITCAST, DETACH
_NO_GRADIENT = (Ops.CMPLT, Ops.CMPNE, Ops.TRUNC, Ops.FLOORDIV, Ops.FLOORMOD, Ops.CDIV, Ops.CMOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR,
                Ops.THREEFRY, Ops.BITCAST, Ops.DETACH)

def _assign_gradient(ctx:UOp, storage:UOp, st:UOp) -> tuple[UOp|None, UOp]:
  # AFTER(storage, STORE(view, value)) of Tensor.assign: the written value takes the gradient seen through the view it was written
  # through; the old contents keep it where the view did not write (none where it wrote all of them)
  ops, v = [], st.src[0]
  while v is not storage:   # the view: a chain of movement ops (and DETACH) over the storage
    ops.append(v)
    v = v.src[0]
  old = None
  if any(u.op is not Ops.RESHAPE for u in ops):
    written = compute_gradient(st.src[0], st.src[0]._full(1.0, ctx.dtype), {storage})[storage]   # 1 on the elements the view wrote
    old = written.ne(0).where(ctx._full(0.0, ctx.dtype), ctx)
  for u in reversed(ops): ctx = UOp(u.op, ctx.dtype, (ctx,), u.arg)
  return (old, ctx)

def _noop() -> UOp: return UOp(Ops.NOOP)

def _after_call_gradient(ctx:UOp, d:UOp, k:UOp) -> tuple[UOp, UOp]:
  # AFTER(args[i], CALL) of a hand-written kernel: the call gets the gradient of its output i (a TUPLE, NOOP for the others)
  i = k.src.index(d) - 1
  return (ctx, UOp.maketuple(*(ctx if j == i else _noop() for j in range(len(k.src) - 1))))

def _mstack_gradient(ctx:UOp, ret:UOp) -> tuple[UOp|None, ...]:
  # a sharded value (tinygrad/schedule/multi.py): each shard's gradient is its part of the whole gradient, on its device; the shards of a
  # copy per device are one value, whose gradient goes to the first copy alone (the gradient of the value it was copied from, once)
  devices = ret.device
  def on(g:UOp, i:int) -> UOp: return UOp(Ops.COPY, g.dtype, (g,), (devices, devices[i]))
  if ret.arg is None: return (on(ctx, 0),) + (None,) * (len(ret.src) - 1)
  out, off = [], 0
  for i, s in enumerate(ret.src):
    n = s.shape[ret.arg]
    out.append(on(ctx.shrink(tuple((off, off + n) if a == ret.arg else None for a in range(len(ret.shape)))), i))
    off += n
  return tuple(out)

pm_gradient = PatternMatcher([
  # elementwise
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx)),
  (UPat(Ops.MUL, src=(UPat.var("x"), UPat.var("y"))), lambda ctx, x, y: (y * ctx, x * ctx)),
  (UPat(Ops.MAX, src=(UPat.var("x"), UPat.var("y"))), _max_binary_gradient),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat(), UPat())), _where_gradient),
  (UPat(Ops.RECIPROCAL, name="ret"), lambda ctx, ret: (-(ctx * ret * ret),)),
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (ctx / (ret * 2),)),
  (UPat(Ops.SIN, src=(UPat.var("x"),)), lambda ctx, x: (x.cos() * ctx,)),
  (UPat(Ops.LOG2, src=(UPat.var("x"),)), lambda ctx, x: (ctx / (x * _LN2),)),
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (ret * ctx * _LN2,)),
  (UPat(Ops.POW, src=(UPat.var("b"), UPat.var("e")), name="ret"), _pow_gradient),
  (UPat(Ops.CAST, src=(UPat.var("x"),), name="ret"), _cast_gradient),
  (UPat(_NO_GRADIENT, name="ret"), _none),
  # movement: the inverse movement of the gradient
  (UPat(Ops.RESHAPE, src=(UPat.var("x"),)), lambda ctx, x: (ctx.reshape(x.shape),)),
  (UPat(Ops.EXPAND, src=(UPat.var("x"),), name="ret"), _expand_gradient),
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(argsort(ret.arg)),)),
  (UPat(Ops.PAD, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: (ctx.shrink(tuple((b, b + s) for s, (b, _) in zip(x.shape, ret.arg))),)),
  (UPat(Ops.SHRINK, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: (ctx.pad(tuple((b, s - e) for s, (b, e) in zip(x.shape, ret.arg))),)),
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (ctx.flip(tuple(i for i, f in enumerate(ret.arg) if f)),)),
  # reductions: sum, max, prod (_REDUCE_GRADIENT)
  (UPat(Ops.REDUCE, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: _REDUCE_GRADIENT[ret.arg[0]](ctx, ret, x)),
  # buffers and devices
  (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx,)),
  (UPat(Ops.CONTIGUOUS_BACKWARD), lambda ctx: (UOp(Ops.CONTIGUOUS, ctx.dtype, (ctx,)),)),
  (UPat(Ops.COPY, name="ret"), lambda ctx, ret: (UOp(Ops.COPY, ctx.dtype, (ctx,), (ret.arg[1], ret.arg[0])),)),
  (UPat(Ops.MSTACK, name="ret"), _mstack_gradient),
  (UPat(Ops.AFTER, src=(UPat.var("storage"), UPat(Ops.STORE, name="st"))), _assign_gradient),
  (UPat(Ops.STORE, src=(UPat(), UPat())), lambda ctx: (None, ctx)),
  # calls (tinygrad/uop/call.py; FUNCTION and CALL themselves are _call_gradient's): a TUPLE's gradient is one per output (NOOP: none)
  (UPat(Ops.TUPLE), lambda ctx: tuple(None if g.op is Ops.NOOP else g for g in ctx.src)),
  (UPat(Ops.AFTER, src=(UPat.var("d"), UPat(Ops.CALL, name="k"))), _after_call_gradient),
])

def _compact_params(body:UOp, args:tuple[UOp, ...]) -> tuple[UOp, tuple[UOp, ...]]:
  """body over only the PARAMs it uses, renumbered from 0, and the arguments they stand for."""
  used = body_params(body)
  renumber = {p: p.replace(arg=dataclasses.replace(p.arg, slot=j)) for j, p in enumerate(used)}
  return substitute_outside_calls(body, renumber), tuple(args[p.arg.slot] for p in used)

def _call_gradient(ctx:UOp, k:UOp, needed:set[int]) -> tuple[UOp|None, ...]:
  """The gradients of a FUNCTION/CALL's sources (None for its body) from ctx, the TUPLE of its outputs' gradients: grad_fxn's, or a
  backward call over (args, output gradients[, forward outputs when precompiled]) computing the body's gradient for the needed args."""
  body, args = k.src[0], k.src[1:]
  if k.arg.grad_fxn is not None:
    real = [g for g in (ctx.src if ctx.op is Ops.TUPLE else (ctx,)) if g.op is not Ops.NOOP]
    ret = k.arg.grad_fxn(*real, call=k) if len(real) > 1 else k.arg.grad_fxn(real[0], k)
    if len(ret := tuple(ret)) != len(args):
      raise RuntimeError(f"grad_fxn of {k.arg.name or k.op} returned {len(ret)} gradients for {len(args)} arguments")
    return (None,) + ret
  if body.op is not Ops.TUPLE:
    raise RuntimeError(f"no gradient for the CALL of a hand-written kernel {getattr(body.arg, 'name', '')}: pass grad_fxn= to compute it")
  params = {p.arg.slot: p for p in body_params(body)}
  # a gradient that is a constant stays in the backward body; the others are its arguments after the forward's
  grad_args = ctx.src
  root = UOp.maketuple(*(g if g.op is Ops.NOOP or is_const_graph(g) else g.param_like(len(args) + i) for i, g in enumerate(grad_args)))
  grads = compute_gradient(body, root, set(params.values()))
  # a precompiled forward's outputs are arguments of the backward call: computed once, not again inside it
  fwd_subs = {o: o.param_like(len(args) + len(grad_args) + i) for i, o in enumerate(body.src)} if k.arg.precompile else {}
  fwd_outs = tuple(k.gettuple(i) for i in range(len(body.src))) if k.arg.precompile else ()
  wanted = [(i, grads[p]) for i in sorted(needed) if (p := params.get(i)) is not None and p in grads]
  if not wanted: return (None,) * len(k.src)
  bwd_body = substitute_outside_calls(UOp.maketuple(*(g for _, g in wanted)), fwd_subs)
  bwd_body, bwd_args = _compact_params(bwd_body, (*args, *grad_args, *fwd_outs))
  bwd = bwd_body.call(*bwd_args, name=(k.arg.name or "") + "_backward", precompile=k.arg.precompile_backward)
  at = {i: j for j, (i, _) in enumerate(wanted)}
  return (None,) + tuple(bwd.gettuple(at[i]) if i in at else None for i in range(len(args)))

def _add_grads(a:UOp, b:UOp) -> UOp:
  if a.op is not Ops.TUPLE: return a + b
  return UOp.maketuple(*(y if x.op is Ops.NOOP else x if y.op is Ops.NOOP else x + y for x, y in zip(a.src, b.src)))

def compute_gradient(root:UOp, root_grad:UOp, targets:set[UOp]|frozenset[UOp]) -> dict[UOp, UOp]:
  """The gradient of root (seeded with root_grad, root's shape) with respect to each node on a path from root to a target:
  {node: gradient}. Targets not reached are absent (no path, or only through DETACH or an int/bool value)."""
  topo = root.toposort()
  # which nodes lead to a target (sources come first in topo); nothing flows through DETACH
  on_path: dict[UOp, bool] = {}
  for u in topo: on_path[u] = u in targets or (u.op is not Ops.DETACH and any(on_path[s] for s in u.src))
  grads: dict[UOp, UOp] = {root: root_grad} if on_path[root] else {}
  for u in reversed(topo):
    if (g := grads.get(u)) is None or not any(on_path[s] for s in u.src): continue
    if u.op is Ops.GETTUPLE:
      # output u.arg of a call: its gradient goes into the call's TUPLE of output gradients (every GETTUPLE comes before the call)
      k, n = u.src[0], len(u.src[0].src[0].src)
      grads[k] = _add_grads(grads.get(k, UOp.maketuple(*[_noop()] * n)), UOp.maketuple(*(g if i == u.arg else _noop() for i in range(n))))
      continue
    if u.op in (Ops.FUNCTION, Ops.CALL): lgrads = _call_gradient(g, u, {i for i, a in enumerate(u.src[1:]) if on_path[a]})
    elif (lgrads := pm_gradient.rewrite(u, ctx=g)) is None: raise RuntimeError(f"no gradient rule for {u.op} (shape {u.shape}, {u.dtype})")
    for s, sg in zip(u.src, lgrads):
      if sg is None or not on_path[s]: continue
      if sg.shape != s.shape or sg.dtype is not (s.dtype if s.op is not Ops.STORE else s.src[1].dtype):   # a STORE's is its value's
        raise RuntimeError(f"the gradient rule of {u.op} gave {sg.shape} {sg.dtype} for a source of {s.shape} {s.dtype}")
      grads[s] = sg if (prev := grads.get(s)) is None else _add_grads(prev, sg)
  return grads
