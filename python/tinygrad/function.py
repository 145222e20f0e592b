"""function: a Python function over Tensors traced into one reusable call (tinygrad 0.14's `from tinygrad import function`).

    @function                       # or @function(precompile=True, precompile_backward=True, allow_implicit=True, grad_fxn=...)
    def layer(x:Tensor, w:Tensor) -> Tensor: return (x @ w).relu()

Calling `layer(a, b)` runs the Python function on a and b lazily (nothing is computed: device use, as .numpy() or .realize(), raises
inside it), then makes the graph it returned a body over PARAMs: the tensors passed in (positionally, by keyword, or inside
lists/tuples/dicts/objects) become PARAM slot 0, 1, ... and the result is GETTUPLE(FUNCTION(TUPLE(body), *inputs), i) per returned
tensor (tinygrad/uop/call.py). The body depends only on the inputs' shapes, dtypes and devices, so a second call on other tensors of the
same kind builds the very same body (UOps are interned): its schedule and kernels are reused, nothing is scheduled or compiled again.

- Buffers the function reads without taking them as arguments (a tensor captured from the enclosing scope, or data it makes, as
  Tensor([1, 2])) are implicit inputs: a RuntimeError naming them unless allow_implicit=True, which makes them extra arguments after
  the explicit ones. A captured tensor whose write has not run yet (a Tensor.zeros KV cache made before the first call) is one as it
  is after that write, which runs once, before the call. A buffer it makes without data (Tensor.empty, zeros/ones/full) is its own:
  a new one each call. Random numbers (Tensor.rand, ...) draw on the host counter, a device use: pass them in as arguments.
- A function may write into an argument (a.assign(...), a[...] = ..., AFTER(a's storage, STORE(view, x))): the argument's storage
  is then an argument of the call too (not an implicit one), and the write lands in the caller's tensor.
- Gradients flow through a call (tinygrad/gradient.py): the gradient of the body with respect to its PARAMs, as a backward call over
  (inputs, output gradients), or grad_fxn(*output gradients, call) returning one gradient (or None) per input when given.
- The scheduler inlines a body into the caller's graph (it fuses like any other graph). With precompile=True the body is scheduled as
  a unit of its own instead (tinygrad/schedule/call.py): its inputs are realized, its kernels are the same for every call of the same
  shapes (the schedule cache hands them out without scheduling again), and nothing outside fuses into them; precompile_backward=True
  does the same for the backward call autograd builds.
- Bound Variables (a position passed as Variable.bind(n), or a symbolic length in an input's shape) stay in the body as they are in
  the caller's graph, as they would without function: the scheduler unbinds them everywhere before it looks in the schedule cache
  (tinygrad/schedule/__init__.py), so a precompiled body is scheduled once for every value and its kernels take the values at launch.
  (tinygrad 0.14 makes each one a PARAM of the body instead; the effect, one schedule for all values, is the same.)
"""
from __future__ import annotations
import functools
import time
from typing import Callable, Generic, TypeVar, cast, overload
from tinygrad.helpers import Context, DEBUG, getenv, prod
from tinygrad.uop.ops import UOp, Ops
from tinygrad.uop.call import graph_device, is_const_graph
from tinygrad.tensor import Tensor
from tinygrad.tensor.calls import data_inputs
from tinygrad.schedule.buffers import realized_view, next_buffer_id, storage_buffer, as_buffer
from tinygrad.tensor.creation import unallocated
from tinygrad.nn.state import get_state_dict

__all__ = ["function"]

ReturnType = TypeVar("ReturnType")

def _pending_outside_writes(body:UOp, first_new:int) -> list[UOp]:
  """The writes (AFTER) into buffers made before the trace (ids below first_new) that body reads, that have not run and that don't
  depend on the body's arguments (PARAMs): the outermost ones, each once."""
  def is_one(u:UOp) -> bool:
    return u.op is Ops.AFTER and not u.is_bound_var and realized_view(u) is None and (b := storage_buffer(u)) is not None and \
      b.arg.slot < first_new and not u.op_in_backward_slice_with_self(Ops.PARAM)
  found: dict[UOp, None] = {}
  # (a hand-written walk: the search stops at the writes it finds, which a rewrite table can't say; the body's root is a TUPLE)
  for u in body.toposort(gate=lambda u: realized_view(u) is None and not is_one(u)):
    for s in u.src:
      if is_one(s): found[s] = None
  return list(found)

class _function(Generic[ReturnType]):
  depth = 0   # nesting of traces (DEBUG output indents by it)
  def __init__(self, fxn:Callable[..., ReturnType], *, precompile:bool, precompile_backward:bool, allow_implicit:bool, grad_fxn:Callable|None):
    self.fxn, self.precompile, self.precompile_backward, self.allow_implicit, self.grad_fxn = \
      fxn, precompile, precompile_backward, allow_implicit, grad_fxn
    functools.update_wrapper(self, fxn)
  # a method decorated with @function gets its instance as its first argument
  def __get__(self, obj, objtype=None): return functools.partial(self.__call__, obj) if obj is not None else self

  def __call__(self, *args, **kwargs) -> ReturnType:
    st = time.perf_counter()
    name = getattr(self.fxn, "__qualname__", None) or type(self.fxn).__qualname__
    tensors = list(get_state_dict((args, kwargs), tensor_type=Tensor).values())
    # the inputs, each once (the first occurrence gives the slot); a constant of Python values (Tensor(2.0)) stays in the body
    inputs: list[UOp] = list(dict.fromkeys(t.uop for t in tensors if not is_const_graph(t.uop)))
    # trace: the function only builds a graph; using a device (realizing) inside it is an error, as in 0.14
    first_new = next_buffer_id()
    with Context(ALLOW_DEVICE_USAGE=getenv("DEVICE_IN_FUNCTION_BUG", 0)):
      _function.depth += 1
      try: ret = self.fxn(*args, **kwargs)
      finally: _function.depth -= 1
    if isinstance(ret, Tensor): outs: tuple[Tensor, ...] = (ret,)
    elif isinstance(ret, tuple) and ret and all(isinstance(x, Tensor) for x in ret): outs = ret
    else: raise RuntimeError(f"function return type {type(ret)} not supported")
    body = UOp.maketuple(*[t.uop for t in outs]).substitute({x: x.param_like(i) for i, x in enumerate(inputs)})
    # the implicit inputs, arguments after the explicit ones. First a write made outside that has not run yet (a Tensor.zeros KV cache,
    # an assign of the caller's): an argument as it is after the write, so that it runs once before the call and counts as done,
    # instead of running again inside the body at every call
    pending = _pending_outside_writes(body, first_new)
    body = body.substitute({x: x.param_like(len(inputs) + i) for i, x in enumerate(pending)})
    # then what is left that holds data. A buffer the trace made and never filled (Tensor.empty, and full/zeros/ones, which assign into
    # one) is the body's own scratch, not an input
    rest = [u for u in data_inputs(body) if u not in inputs and not (u.op is Ops.BUFFER and u.arg.slot > first_new and u in unallocated)]
    # the storage of an explicit argument, there when the function writes into that argument (an assign: AFTER(storage, STORE(view)))
    storages = {b for x in inputs if x.op is Ops.RESHAPE and (b := as_buffer(x)) is not None}
    implicit = pending + [u for u in rest if u not in storages]
    if implicit and not self.allow_implicit:
      desc = "\n  ".join(f"{i}: dtype={u.dtype}, size={prod(u.shape)}, device={graph_device(v if (v := realized_view(u)) is not None else u)}"
                          for i, u in enumerate(implicit))
      raise RuntimeError(f"function {name} has {len(implicit)} implicit buffer(s), but allow_implicit=False\n  {desc}")
    body = body.substitute({x: x.param_like(len(inputs) + len(pending) + i) for i, x in enumerate(rest)})
    fret = body.call(*inputs, *pending, *rest, grad_fxn=self.grad_fxn, name=name, precompile=self.precompile,
                     precompile_backward=self.precompile_backward)
    if DEBUG >= 2: print("  " * _function.depth + f"function {(time.perf_counter() - st) * 1000:8.2f} ms: {name}")
    results = tuple(Tensor(fret.gettuple(i), device=t.device) for i, t in enumerate(outs))
    return cast(ReturnType, results if isinstance(ret, tuple) else results[0])

# both @function and @function(precompile=True) spellings
@overload
def function(fxn:Callable[..., ReturnType], *, precompile:bool=False, precompile_backward:bool=False, allow_implicit:bool=False,
             grad_fxn:Callable|None=None) -> _function[ReturnType]: ...
@overload
def function(fxn:None=None, *, precompile:bool=False, precompile_backward:bool=False, allow_implicit:bool=False,
             grad_fxn:Callable|None=None) -> Callable[[Callable[..., ReturnType]], _function[ReturnType]]: ...
def function(fxn=None, *, precompile:bool=False, precompile_backward:bool=False, allow_implicit:bool=False, grad_fxn:Callable|None=None):
  """Traces fxn into a reusable call (see the module docstring)."""
  def make(f:Callable) -> _function:
    return _function(f, precompile=precompile, precompile_backward=precompile_backward, allow_implicit=allow_implicit, grad_fxn=grad_fxn)
  return make if fxn is None else make(fxn)
