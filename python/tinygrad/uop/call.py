"""Calls in the UOp graph: tinygrad 0.14's FUNCTION/CALL/PARAM/TUPLE/GETTUPLE, and the sugar for writing a kernel by hand.

Tensor-level forms (built by tinygrad/function.py and the Tensor methods call/custom_kernel/callify/as_param):
  PARAM     src: (STACK of the shape's sizes,)   arg: ParamArg(slot, dtype, device=...)   the slot-th argument of a call body
  FUNCTION  src: (TUPLE(*outputs), *args)         arg: CallInfo                           a body over PARAMs applied to args;
            GETTUPLE(FUNCTION, i) is its i-th output. The scheduler inlines it (PARAM slot i -> args[i]), or with
            CallInfo.precompile schedules the body as a unit of its own (tinygrad/schedule/call.py)
  CALL      src: (SINK, *args)                    arg: CallInfo                           an opaque body: a kernel written by hand
            over placeholders (PARAM slot i stands for args[i]); AFTER(args[i], CALL) is args[i] once the kernel ran
Kernel-writing sugar (0.14's API): placeholder/placeholder_like (a flat PARAM of a kernel, reshaped), `buf[i, j]` (INDEX of a view;
its value is a load), store, end (closes RANGEs), set (store + end + after), group, sink.
"""
from __future__ import annotations
import dataclasses
from typing import Any, Callable
from tinygrad.uop import Ops
from tinygrad.uop.base import UOp, ParamArg, AxisType, graph_rewrite, PatternMatcher, BottomUpGate
from tinygrad.uop.upat import UPat
from tinygrad.uop.sint import sint
from tinygrad.dtype import DType, dtypes, AddrSpace, PyConst
from tinygrad.helpers import argfix, prod

__all__ = ["CallInfo", "open_ranges_of", "graph_device", "is_const_graph", "body_params", "substitute_outside_calls", "OPAQUE_CALL_BODIES"]

@dataclasses.dataclass(frozen=True)
class CallInfo:
  """The arg of FUNCTION/CALL: the gradient function (None: the gradient of the body), a name, and whether the body (and the backward
  call autograd builds) is scheduled as a unit of its own (precompile) instead of inlined into the caller's graph."""
  grad_fxn: Callable|None = None
  name: str|None = None
  precompile: bool = False
  precompile_backward: bool = False
  aux: Any = None
  def __repr__(self):
    return f"CallInfo({None if self.grad_fxn is None else id(self.grad_fxn)}, {self.name!r}, {self.precompile}, {self.precompile_backward})"

# whether UOp.call ever built a FUNCTION/CALL: until then no graph holds one, and the scheduler skips looking for them
calls_built = False

# bodies that compute no values of their own (a kernel): CALL; anything else is a FUNCTION of a TUPLE of values
OPAQUE_CALL_BODIES = frozenset({Ops.SINK, Ops.PROGRAM, Ops.LINEAR, Ops.COPY, Ops.CUSTOM_FUNCTION})

def open_ranges_of(root:UOp) -> list[UOp]:
  """The RANGEs root depends on that no END (or kernel REDUCE) on the way closes: a kernel's loops left open."""
  open_: dict[UOp, frozenset[UOp]] = {}
  for u in root.toposort():
    rs = frozenset().union(*(open_[s] for s in u.src)) if u.src else frozenset()
    if u.op is Ops.RANGE: rs = rs | {u}
    elif u.op is Ops.END or (u.op is Ops.REDUCE and len(u.arg) == 1): rs = rs - set(u.src[1:])
    open_[u] = rs
  return sorted(open_[root], key=lambda r: r.arg)

def graph_device(u:UOp) -> str|tuple[str, ...]|None:
  """The device a tensor-level node lives on: that of the nearest COPY (its destination), BUFFER or PARAM below it."""
  stack, seen = [u], set()
  while stack:
    if (x := stack.pop()) in seen: continue
    seen.add(x)
    if x.op is Ops.COPY: return x.arg[1]
    if x.op in (Ops.BUFFER, Ops.PARAM) and isinstance(x.arg, ParamArg) and x.arg.device is not None: return x.arg.device
    stack.extend(reversed(x.src))
  return None

def is_const_graph(u:UOp) -> bool:
  """A graph of Python values only (no buffer, argument or copy below): it has no device, and a call body keeps it inline."""
  return not any(x.op in (Ops.BUFFER, Ops.PARAM, Ops.COPY) for x in u.toposort())

def _shape_src(shape:tuple[sint, ...]) -> UOp:
  # a symbolic size (an int expression of Variables) stays itself: the PARAM's shape is that expression (uop/shape.py reads it back)
  return UOp(Ops.STACK, dtypes.int if shape else dtypes.void, tuple(s if isinstance(s, UOp) else UOp.const(s, dtypes.int) for s in shape))

class _UOpCalls:
  # ** tuples and groups **
  def maketuple(*srcs:UOp) -> UOp: return UOp(Ops.TUPLE, dtypes.void, srcs)
  def gettuple(self:UOp, idx:int) -> UOp:
    if (self.src[0] if self.op is Ops.FUNCTION else self).op is not Ops.TUPLE: raise TypeError(f"gettuple needs a FUNCTION or TUPLE, got {self.op}")
    return UOp(Ops.GETTUPLE, None, (self,), idx)
  def group(*srcs:UOp|None) -> UOp:
    if len(srcs) == 1 and isinstance(srcs[0], UOp): return srcs[0]
    return UOp(Ops.GROUP, dtypes.void, tuple(x for x in srcs if x is not None))

  # ** writing a kernel by hand **
  def end(self:UOp, *ranges:UOp) -> UOp:
    """Closes the loops of `ranges` (listed as they were opened, outermost first) around self (a STORE, a GROUP of them, or an END)."""
    return UOp(Ops.END, dtypes.void, (self,) + ranges) if ranges else self
  def set(self:UOp, val:UOp|PyConst, end:UOp|tuple[UOp, ...]|list[UOp]=()) -> UOp:
    """self (an INDEX of a buffer) := val, closing the loops `end`; the buffer as it is after the store."""
    if self.op is not Ops.INDEX: raise TypeError(f"set needs an INDEX of a buffer (buf[i]), got {self.op}")
    return self.src[0].after(self.store(val).end(*argfix(end)))
  def __getitem__(self:UOp, idx) -> UOp:
    """buf[i, j]: the element of a kernel buffer (a placeholder, or a view of one) at these indices (ints or index UOps)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    base = self
    while base.op in (Ops.AFTER, Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK, Ops.EXPAND, Ops.FLIP): base = base.src[0]
    if base.op not in (Ops.PARAM, Ops.BUFFER) or not isinstance(base.arg, ParamArg) or base.arg.device is not None or \
       base.arg.addrspace is AddrSpace.ALU:
      raise TypeError(f"indexing a UOp is for the buffers of a hand-written kernel (placeholders), not a {self.op} over {base.op}")
    if bad := [i for i in idx if not isinstance(i, (int, UOp))]: raise TypeError(f"kernel buffer indices must be ints or UOps, got {bad[0]!r}")
    return self.index(*idx)
  @staticmethod
  def placeholder(shape:tuple[int, ...], dtype:DType, slot:int, addrspace:AddrSpace=AddrSpace.GLOBAL) -> UOp:
    """A buffer of a hand-written kernel: the slot-th argument (GLOBAL: a PARAM of this shape without a device; the scheduler makes it
    the flat PARAM kernels take) or a LOCAL/REG scratch BUFFER, reshaped to shape."""
    shape, n = tuple(shape), prod(shape)
    if addrspace is AddrSpace.GLOBAL: return UOp.param(slot, dtype, shape)
    if addrspace not in (AddrSpace.LOCAL, AddrSpace.REG): raise ValueError(f"a placeholder lives in GLOBAL, LOCAL or REG memory, not {addrspace}")
    ret = UOp(Ops.BUFFER, dtype, (UOp.const(n),), ParamArg(slot, dtype, addrspace=addrspace))
    return ret if shape == (n,) else ret.reshape(shape)
  def placeholder_like(self:UOp, slot:int, addrspace:AddrSpace=AddrSpace.GLOBAL) -> UOp:
    return UOp.placeholder(self.shape, self.dtype, slot, addrspace)

  # ** call bodies and their arguments **
  @staticmethod
  def param(slot:int, dtype:DType, shape:tuple[int, ...]|None=None, device=None, vmin_vmax:tuple[PyConst, PyConst]|None=None,
            multiple_of:int|None=None, name:str|None=None, addrspace:AddrSpace=AddrSpace.GLOBAL, axis:int|None=None, volatile:bool=False) -> UOp:
    """The slot-th argument of a call body, with a shape (a tensor-level node) unless shape is None."""
    if dtype in dtypes.weaks: raise RuntimeError(f"cannot create param for weak dtype {dtype}")
    if not isinstance(slot, int) or isinstance(slot, bool): raise TypeError(f"a PARAM's slot is an int, got {slot!r}")
    src = UOp(Ops.NOOP) if shape is None else _shape_src(tuple(shape))
    return UOp(Ops.PARAM, dtype, (src,), ParamArg(slot, dtype, vmin_vmax, multiple_of, name, addrspace, axis, device, volatile))
  def param_like(self:UOp, slot:int) -> UOp:
    """The PARAM that stands for self as the slot-th argument of a call body (a Variable stays a Variable, as a kernel argument)."""
    if self.is_bound_var or self.is_variable:
      b = self.src[0] if self.op is Ops.AFTER else self
      return UOp(Ops.PARAM, b.dtype, b.src, dataclasses.replace(b.arg, slot=slot, name=f"p{slot}"))
    return UOp.param(slot, self.dtype, self.shape, graph_device(self))
  def call(self:UOp, *srcs:UOp, ret_dtype:DType|None=None, grad_fxn:Callable|None=None, name:str|None=None, precompile:bool=False,
           precompile_backward:bool=False, aux:Any=None) -> UOp:
    """self (a body over PARAMs) applied to srcs: a CALL of an opaque body (a kernel's SINK), else a FUNCTION of TUPLE(self)."""
    global calls_built
    calls_built = True
    if ret_dtype is not None: return UOp(Ops.CALL, ret_dtype, (self,) + srcs)
    if leaking := [r for r in open_ranges_of(self) if r.arg[-1] is not AxisType.DEVICE]:
      raise RuntimeError(f"RANGE {', '.join(f'(axis {r.arg[0]}, size {r.src[0].arg if r.src[0].op is Ops.CONST else r.src[0]})' for r in leaking)} "
                         f"of {name or 'the call body'} is never closed by an END: close every loop (.end(range)) before .sink()")
    info = CallInfo(grad_fxn, name, precompile, precompile_backward, aux)
    if self.op in OPAQUE_CALL_BODIES: return UOp(Ops.CALL, dtypes.void, (self,) + srcs, info)
    return UOp(Ops.FUNCTION, dtypes.void, (self if self.op is Ops.TUPLE else UOp.maketuple(self),) + srcs, info)
  def custom_kernel(*srcs:UOp, fxn:Callable, grad_fxn:Callable|None=None) -> list[UOp]:
    """fxn(*placeholders) (a hand-written kernel's SINK, placeholder i standing for srcs[i]) run on srcs: each src after the kernel."""
    if not isinstance(sink := fxn(*[s.placeholder_like(i) for i, s in enumerate(srcs)]), UOp) or sink.op is not Ops.SINK:
      raise TypeError(f"custom_kernel's fxn must return the kernel's SINK (....sink()), got {getattr(sink, 'op', type(sink).__name__)}")
    kernel = sink.call(*srcs, grad_fxn=grad_fxn)
    return [s.after(kernel) for s in srcs]

def _gather(ctx:list[UOp], p:UOp) -> None:
  if p.arg.slot >= 0 and p.arg.addrspace is not AddrSpace.ALU: ctx.append(p)

def _args_only(ctx, f:UOp):
  # a call inside the body: its own body is another scope, only its arguments belong to this one
  for a in f.src[1:]: graph_rewrite(a, pm_gather_params, ctx=ctx, bottom_up=True, walk=True, name="gather params")
  raise BottomUpGate()

pm_gather_params = PatternMatcher([
  (UPat(Ops.PARAM, name="p"), _gather),
  (UPat((Ops.FUNCTION, Ops.CALL), name="f"), _args_only),
])

def body_params(body:UOp) -> list[UOp]:
  """The PARAMs of a call body (not those of the calls inside it), by slot."""
  found: list[UOp] = []
  graph_rewrite(body, pm_gather_params, ctx=found, bottom_up=True, walk=True, name="gather params")
  return sorted(set(found), key=lambda p: p.arg.slot)

def _subst_args(ctx:dict[UOp, UOp], f:UOp) -> UOp:
  if (r := ctx.get(f)) is not None: return r
  # a call: only its arguments are in this scope (the engine reads an unchanged node as no match and would walk into the body)
  if (new := f.replace(src=(f.src[0],) + tuple(substitute_outside_calls(a, ctx) for a in f.src[1:]))) is f: raise BottomUpGate()
  return new

pm_subst_outside_calls = PatternMatcher([
  (UPat((Ops.FUNCTION, Ops.CALL), name="f"), _subst_args),
  (UPat(tuple(Ops), name="x"), lambda ctx, x: ctx.get(x)),
])

def substitute_outside_calls(root:UOp, mapping:dict[UOp, UOp]) -> UOp:
  """root with the nodes of mapping replaced (replacements are final), except inside the bodies of the calls in it (their own scope:
  their PARAMs may be equal nodes to this body's)."""
  return graph_rewrite(root, pm_subst_outside_calls, ctx=mapping, bottom_up=True, walk=True, name="substitute params")
