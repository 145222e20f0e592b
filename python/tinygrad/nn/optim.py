"""tinygrad.nn.optim: the optimizers of tinygrad 0.14. SGD and Muon are LARS without the trust ratio; Adam and AdamW are LAMB without
it. An optimizer's state (momentum, moments, lr) are Tensors on its device, updated with assign; step() realizes the whole update."""
from __future__ import annotations
import itertools
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes, least_upper_dtype, to_dtype
from tinygrad.helpers import dedup, flatten, getenv, FUSE_OPTIM, TRAINING

class Optimizer:
  """Base class: holds the parameters to update (tensors with is_param; others given, such as BatchNorm's running statistics, are
  buffers, realized with each step), lr as a 1-element Tensor, and the update rule (_step) subclasses define."""
  def __init__(self, params:list[Tensor], lr:float, device=None, fused=FUSE_OPTIM):
    if lr < 0: raise ValueError(f"Invalid learning rate: {lr}")
    self.params: list[Tensor] = dedup([x for x in params if x.is_param])
    if not self.params: raise ValueError("optimizer got an empty parameter list (no tensor with is_param)")
    self.buffers: list[Tensor] = dedup([x for x in params if not x.is_param])
    self.device = device or self.params[0].device
    self.param_dtype = to_dtype(getenv("OPTIM_DTYPE", "float32"))
    self.fused = fused
    # lr is a Tensor so a schedule can change it in place (opt.lr.assign(...)) without a new kernel; at least float32
    self.lr = Tensor(lr if getenv("CONST_LR") else [lr], device=self.device, dtype=least_upper_dtype(dtypes.default_float, dtypes.float32))
    # fused: the parameters are updated as one flat vector, params[i] at [pos_params[i], pos_params[i+1])
    if self.fused: self.pos_params = list(itertools.accumulate(self.params, lambda n, t: n + t.numel(), initial=0))

  def _new_optim_param(self) -> list[Tensor]:
    """One zero state tensor per parameter (one flat one when fused), in param_dtype on the optimizer's device."""
    if self.fused: return [Tensor.zeros(self.pos_params[-1], dtype=self.param_dtype, device=self.device).is_param_(False)]
    return [Tensor.zeros(t.shape, dtype=self.param_dtype, device=self.device).is_param_(False) for t in self.params]

  def zero_grad(self) -> None:
    """Forgets the parameters' gradients (the next backward() sets them anew)."""
    for t in self.params: t.grad = None

  def step(self) -> None:
    """One optimization step: updates every parameter from its .grad, in one realize."""
    Tensor.realize(*self.schedule_step())

  def _grads(self) -> list[Tensor]:
    if missing := [i for i, t in enumerate(self.params) if t.grad is None]:
      raise RuntimeError(f"{type(self).__name__}.step: parameter(s) {missing} (shapes {[self.params[i].shape for i in missing]}) have no "
                         "gradient: call loss.backward() first, and don't give the optimizer tensors the loss does not depend on")
    return [t.grad for t in self.params]  # type: ignore[misc]

  def schedule_step(self) -> list[Tensor]:
    """Assigns the new values to the parameters (and the optimizer state) and returns the tensors to realize to finish the step."""
    if not TRAINING:
      raise RuntimeError(f"TRAINING={TRAINING.value}: the optimizer updates parameters only while training; "
                         "wrap the training step in Context(TRAINING=1)")
    grads = self._grads()
    if self.fused:
      flat, extra = self._step([Tensor.cat(*[t.flatten() for t in self.params])], [Tensor.cat(*[g.contiguous().flatten() for g in grads])])
      updates = [flat[0][a:b].reshape(t.shape) for a, b, t in zip(self.pos_params, self.pos_params[1:], self.params)]
    else:
      updates, extra = self._step(self.params, grads)
      # lr is a 1-element tensor: a 0-d parameter's update comes back as shape (1,)
      updates = [u if u.shape == t.shape else u.reshape(t.shape) for t, u in zip(self.params, updates)]
    new = [self._apply_update(t, u) for t, u in zip(self.params, updates)]
    # the writes are lazy: the scheduler runs every read of a parameter's old value (a gradient reads the layers above it)
    # before the write that replaces it, all in the one realize of step()
    for t, n in zip(self.params, new): t.assign(n)
    return extra + self.params + self.buffers

  def _step(self, params:list[Tensor], grads:list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """The updates to subtract from params, and the state tensors to realize with them."""
    raise NotImplementedError(f"{type(self).__name__} defines no update rule (_step)")
  def _apply_update(self, t:Tensor, up:Tensor) -> Tensor: return t.detach() - up.to(t.device)

class OptimizerGroup(Optimizer):
  """Several optimizers (each over its own parameters) stepped as one: one realize for all their updates."""
  def __init__(self, *optimizers:Optimizer):  # pylint: disable=super-init-not-called
    self.optimizers = optimizers
    self.params, self.buffers = flatten([o.params for o in optimizers]), flatten([o.buffers for o in optimizers])
  def __getitem__(self, i:int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]

def SGD(params:list[Tensor], lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False, device=None, fused=FUSE_OPTIM):
  """SGD with optional momentum (nesterov), and weight decay added to the gradient. classic=True scales by lr before the momentum
  buffer (b = m*b + lr*g), the default after it (b = m*b + g, as torch)."""
  return LARS(params, lr, momentum, weight_decay, 0, None, nesterov, classic=classic, pre_wd=True, tcoef=0.0, device=device, fused=fused)

def Muon(params:list[Tensor], lr=0.001, momentum=0.95, weight_decay=0.1, ns_steps=5, ns_coefficients=(3.4445, -4.775, 2.0315),
         nesterov=True, device=None, fused=FUSE_OPTIM):
  """SGD whose (momentum) update is orthogonalised by ns_steps Newton-Schulz iterations (each parameter as a matrix of its first dim
  by the rest), with weight decay lr*wd*param applied after the momentum."""
  if fused: raise ValueError("Muon orthogonalises each parameter's update as a matrix, so it can't be fused (FUSE_OPTIM)")
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0,
              device=device, fused=fused)

class LARS(Optimizer):
  """Layer-wise adaptive rate scaling: SGD whose step for each parameter is scaled by the trust ratio
  tcoef*|w| / (|g| + wd*|w|) (1 where a norm is zero). With tcoef=0 it is SGD, with ns_coefficients Muon."""
  def __init__(self, params:list[Tensor], lr=0.001, momentum=0.9, weight_decay=1e-4, ns_steps=0, ns_coefficients=None,
               nesterov=False, classic=True, pre_wd=True, tcoef=0.001, device=None, fused=FUSE_OPTIM):
    if momentum < 0: raise ValueError(f"Invalid momentum value: {momentum}")
    if weight_decay < 0: raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    super().__init__(params, lr, device, fused)
    self.momentum, self.wd, self.ns_steps, self.ns_coefficients = momentum, weight_decay, ns_steps, ns_coefficients
    self.nesterov, self.classic, self.pre_wd, self.tcoef = nesterov, classic, pre_wd, tcoef
    self.b = self._new_optim_param() if momentum else []

  def _step(self, params:list[Tensor], grads:list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    ret = []
    for i, (t, g) in enumerate(zip(params, grads)):
      # the rule runs where the optimizer's state and lr live; _apply_update brings the update back to the parameter's device
      w = t.detach().to(self.device)
      if g.device != self.device: g = g.contiguous().to(self.device)
      if self.tcoef != 0:
        wn, gn = w.square().sum().sqrt(), g.square().sum().sqrt()
        r: Tensor|float = (wn > 0).where((gn > 0).where(self.tcoef * wn / (gn + self.wd * wn), 1.0), 1.0)
      else: r = 1.0
      if self.pre_wd and self.wd > 0: g = g + self.wd * w
      if self.classic: g = g * r * self.lr
      if self.momentum:
        # the buffer starts at zero, so the first step needs no special case
        self.b[i].assign((self.momentum * self.b[i] + g).cast(self.b[i].dtype))
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      if self.ns_coefficients: g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients).reshape(g.shape)
      if not self.classic: g = g * r * self.lr
      if not self.pre_wd and self.wd > 0: g = g + self.wd * self.lr * w
      ret.append(g.cast(t.dtype))
    return ret, self.b

def AdamW(params:list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, device=None, fused=FUSE_OPTIM):
  """Adam with decoupled weight decay: the step adds weight_decay*param to the Adam direction."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device, fused=fused)

def Adam(params:list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, device=None, fused=FUSE_OPTIM):
  """Adam: lr * m_hat / (sqrt(v_hat) + eps) with bias-corrected first and second moments."""
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True, device=device, fused=fused)

class LAMB(Optimizer):
  """LAMB: the AdamW direction u = m_hat/(sqrt(v_hat)+eps) + wd*param, scaled per parameter by the trust ratio |param|/|u| (1 where
  a norm is zero); adam=True leaves the ratio out (AdamW)."""
  def __init__(self, params:list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False, device=None, fused=FUSE_OPTIM):
    if weight_decay < 0: raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if not 0.0 <= b1 < 1.0 or not 0.0 <= b2 < 1.0: raise ValueError(f"Invalid betas: b1={b1}, b2={b2} (each in [0, 1))")
    super().__init__(params, lr, device, fused)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    # b1**t and b2**t for the bias correction, kept as tensors so every step runs the same kernels
    self.b1_t, self.b2_t = (Tensor.ones((1,), dtype=dtypes.float32, device=self.device).is_param_(False) for _ in range(2))
    self.m, self.v = self._new_optim_param(), self._new_optim_param()

  def _step(self, params:list[Tensor], grads:list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    ret = []
    self.b1_t *= self.b1
    self.b2_t *= self.b2
    for i, (t, g) in enumerate(zip(params, grads)):
      m, v = self.m[i], self.v[i]
      if g.device != m.device: g = g.contiguous().to(m.device)
      m.assign((self.b1 * m + (1.0 - self.b1) * g).cast(m.dtype))
      v.assign((self.b2 * v + (1.0 - self.b2) * (g * g)).cast(v.dtype))
      up = (m / (1.0 - self.b1_t)) / ((v / (1.0 - self.b2_t)).sqrt() + self.eps) + self.wd * t.detach().to(m.device)
      if not self.adam:
        wn, un = t.detach().to(m.device).square().sum().sqrt(), up.square().sum().sqrt()
        r: Tensor|float = (wn > 0).where((un > 0).where(wn / un, 1.0), 1.0)
      else: r = 1.0
      ret.append((self.lr * r * up).cast(t.dtype))
    return ret, [self.b1_t, self.b2_t] + self.m + self.v

__all__ = ["Optimizer", "OptimizerGroup", "SGD", "Muon", "LARS", "AdamW", "Adam", "LAMB"]
