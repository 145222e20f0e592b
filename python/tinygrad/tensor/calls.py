"""Calls on tensors (tinygrad/uop/call.py; tinygrad/function.py traces a Python function into one): a body over PARAMs applied to
tensors (call), a hand-written kernel run on tensors (custom_kernel), the pending computation of tensors made one unit (callify), and
a tensor's stand-in in a body (as_param)."""
from __future__ import annotations
from typing import Callable, TYPE_CHECKING
from tinygrad.uop.ops import UOp
from tinygrad.schedule.buffers import has_buffer, realized_view
from tinygrad.tensor.common import TensorBase, check_tensors
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor


def data_inputs(root:UOp) -> list[UOp]:
  """The nodes of root's graph that hold data: device BUFFERs, and nodes realized into one (whose graph below is not looked at)."""
  if realized_view(root) is not None: return [root]
  ret: dict[UOp, None] = {}
  # the walk leaves realized nodes out: they are found as the sources of the nodes it keeps
  for u in root.toposort(gate=lambda u: realized_view(u) is None):
    for s in u.src:
      if realized_view(s) is not None: ret[s] = None
    if has_buffer(u): ret[u] = None
  return list(ret)

class CallMixin:
  def as_param(self, slot:int) -> Tensor:
    """A stand-in for a tensor of this shape, dtype and device as the slot-th argument of a call body (see call)."""
    return type(self)(UOp.param(slot, self.dtype, self.shape, self.device), device=self.device)
  def call(self, *lst:Tensor, fxn:Tensor|UOp, grad_fxn:Callable|None=None) -> Tensor:
    """fxn, a body built from as_param(i) stand-ins, computed with (self, *lst) as its arguments (argument i for PARAM slot i).
    Its gradient is the body's, or grad_fxn(gradient, call) (one gradient per argument) when given."""
    args = (self,) + check_tensors("call", lst)
    body = fxn.uop if isinstance(fxn, TensorBase) else fxn
    if not isinstance(body, UOp): raise TypeError(f"call needs fxn=a Tensor or UOp body, got {type(fxn).__name__}")
    return type(self)(body.call(*[t.uop for t in args], grad_fxn=grad_fxn).gettuple(0), device=self.device)
  def custom_kernel(self, *lst:Tensor, fxn:Callable, grad_fxn:Callable|None=None) -> list[Tensor]:
    """Runs a kernel written in UOps: fxn(*placeholders) returns its SINK (loops from UOp.range closed by .end, values stored into
    placeholder[i]), placeholder i standing for tensor i of (self, *lst). Returns those tensors after the kernel ran."""
    args = (self,) + check_tensors("custom_kernel", lst)
    return [type(self)(u, device=t.device) for u, t in zip(UOp.custom_kernel(*[t.uop for t in args], fxn=fxn, grad_fxn=grad_fxn), args)]
  def callify(self, *lst:Tensor) -> Tensor:
    """Makes the pending computation of these tensors one call, scheduled as a unit of its own (precompiled: tinygrad/schedule/call.py):
    each tensor becomes an output of it. Nothing runs. Returns self."""
    tensors = (self,) + check_tensors("callify", lst)
    body = UOp.maketuple(*[t.uop for t in tensors])
    # the buffers the graph reads are the call's arguments (a realized tensor's data is read, never copied into the body)
    inputs = data_inputs(body)
    params = {b: b.param_like(i) for i, b in enumerate(inputs)}
    fret = body.substitute(params).call(*inputs, name="callify", precompile=True)
    for i, t in enumerate(tensors): t.uop = fret.gettuple(i)
    return self
