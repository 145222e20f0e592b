"""Autograd: backward, gradient, detach and the parameters' gradients (the rules are in tinygrad/gradient.py).

As in tinygrad 0.14, backward() fills `.grad` of every live float tensor whose UOp is in the loss's graph (parameters, inputs and
intermediates alike), so the Tensor class keeps a weak set of all tensors (`track`). Two kinds are left out: tensors with
requires_grad=False (an opt-out, as in torch) and pure constants (Tensor(2.0), Tensor.full(..., buffer=False): their UOps are
interned, so the same node also stands for every equal constant the graph uses internally, and 0.14 gives them no device and no
gradient either). Tensor.full/zeros/ones (buffer=True, the default) are a buffer of their own, with a gradient like any tensor.
"""
from __future__ import annotations
import weakref
from typing import TYPE_CHECKING
from tinygrad.uop.ops import UOp, Ops
from tinygrad.dtype import dtypes
from tinygrad.gradient import compute_gradient
from tinygrad.schedule.buffers import realized_view
from tinygrad.tensor.common import TensorBase, check_tensors
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

# every live Tensor, weakly: a dead tensor's ref removes itself (set.discard is the callback, no Python frame runs). Tensor._new,
# the hot path, inlines track as live_add(weakref.ref(t, forget)), saving a Python call per tensor
_tensors: set[weakref.ref] = set()
live_add, forget = _tensors.add, _tensors.discard

def live_tensors() -> list[Tensor]:
  """Every Tensor alive now (backward looks for the ones in the loss's graph; the JIT for the buffers they hold)."""
  return [t for r in list(_tensors) if (t := r()) is not None]
def track(t:Tensor) -> None: live_add(weakref.ref(t, forget))

_MOVE_ONLY = (Ops.RESHAPE, Ops.EXPAND)
def _is_const(u:UOp) -> bool:
  while u.op in _MOVE_ONLY: u = u.src[0]
  return u.op is Ops.CONST

def _check_float(what:str, ts) -> None:
  if bad := [t.dtype for t in ts if not dtypes.is_float(t.dtype) or t.dtype in dtypes.weaks]:
    weak = " (a constant of Python values: Tensor(2.0, requires_grad=True) or Tensor.full((), 2.0) is a parameter)" if \
      any(d in dtypes.weaks for d in bad) else ""
    raise RuntimeError(f"only float Tensors have gradient: {what} got {', '.join(map(str, bad))}{weak}")

class AutogradMixin:
  # set by the constructor: the gradient backward() accumulated (None until then), and whether an optimizer should update this tensor
  # (a buffer such as a running mean is_param_(False)); requires_grad=False keeps backward() off this tensor
  grad: Tensor|None
  is_param: bool
  requires_grad: bool|None

  def detach(self) -> Tensor:
    """The same values, cut from the graph: no gradient flows through it."""
    return self._new(UOp(Ops.DETACH, self.dtype, (self.uop,)))
  def contiguous_backward(self) -> Tensor:
    """The same values; the gradient flowing back through it is made contiguous (realized in a buffer of its own)."""
    return self._new(UOp(Ops.CONTIGUOUS_BACKWARD, self.dtype, (self.uop,)))
  def is_param_(self, is_param:bool=True) -> Tensor:
    self.is_param = is_param
    return self
  def requires_grad_(self, requires_grad:bool=True) -> Tensor:
    """requires_grad=False keeps backward() from filling this tensor's .grad (gradient() and the flow through it are unchanged)."""
    if requires_grad and not dtypes.is_float(self.dtype): raise RuntimeError(f"only float Tensors can require gradients, got {self.dtype}")
    self.requires_grad = requires_grad
    return self

  def gradient(self, *targets:Tensor, gradient:Tensor|None=None) -> list[Tensor]:
    """The gradients of self with respect to targets (zeros for a target self does not depend on). Without `gradient` self must
    be a scalar (the seed is 1); with it, the seed is `gradient`, of self's shape."""
    targets = check_tensors("gradient", targets)
    seed = self._grad_seed(gradient)
    _check_float("gradient", (self,) + targets)
    return self._gradients(targets, _GraphNodes(self.uop.toposort()), seed)

  def backward(self, gradient:Tensor|None=None) -> Tensor:
    """Adds the gradient of self to `.grad` of every float tensor in its graph (see the module docstring); self must be a scalar
    unless `gradient` is given. Returns self."""
    seed = self._grad_seed(gradient)
    _check_float("backward", (self,))
    node = _GraphNodes(self.uop.toposort())
    live = live_tensors()
    tensors = [t for t in live if t.requires_grad is not False and dtypes.is_float(t.dtype) and not _is_const(t.uop) and node(t) is not None]
    for t, g in zip(tensors, self._gradients(tuple(tensors), node, seed)):
      if t.grad is None: t.grad = g
      elif t.grad.shape != t.shape: raise RuntimeError(f"can't accumulate a gradient of shape {t.shape} into .grad of shape {t.grad.shape}")
      else: t.grad.uop = (t.grad + g.cast(t.grad.dtype)).uop   # in place: whoever holds .grad (an optimizer) sees the sum
    return self

  def _grad_seed(self, gradient) -> UOp:
    if gradient is None:
      if self.shape != (): raise RuntimeError(f"a gradient can be implied only for a scalar, got shape {self.shape}: pass gradient=")
      return self.uop.full_like(1.0)
    if not isinstance(gradient, TensorBase): raise TypeError(f"gradient must be a Tensor, got {type(gradient).__name__}")
    if gradient.shape != self.shape: raise RuntimeError(f"gradient has shape {gradient.shape}, the tensor has shape {self.shape}")
    self._same_device(gradient)
    return gradient.uop.cast(self.dtype)

  def _gradients(self, targets:tuple[Tensor, ...], node:_GraphNodes, seed:UOp) -> list[Tensor]:
    nodes = [node(t) for t in targets]
    grads = compute_gradient(self.uop, seed, {n for n in nodes if n is not None})
    return [t._new(g) if n is not None and (g := grads.get(n)) is not None else t._new(t.uop.full_like(0)) for t, n in zip(targets, nodes)]

class _GraphNodes:
  """The node of a graph that tensor t is: t.uop itself, or the node realized into t's buffer after the graph was built (found
  through the realized marks, looked up once per graph and only when some tensor needs it)."""
  def __init__(self, topo:dict[UOp, None]): self.topo, self.views = topo, None
  def __call__(self, t:Tensor) -> UOp|None:
    if (u := t.uop) in self.topo: return u
    if u.op is not Ops.BUFFER and not (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER): return None
    if self.views is None: self.views = {v: n for n in self.topo if (v := realized_view(n)) is not None}
    return self.views.get(u)

__all__ = ["AutogradMixin", "track", "live_add", "forget"]
