"""Losses: binary and categorical cross-entropy, negative log likelihood. Class labels pick their column through an
arange comparison (a one-hot mask), so no gather is needed."""
from __future__ import annotations
from typing import TYPE_CHECKING, Literal
from tinygrad.dtype import dtypes
from tinygrad.tensor.common import check_tensors
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

ReductionStr = Literal["mean", "sum", "none"]

class LossMixin:
  def _do_reduction(self, reduction:ReductionStr="mean") -> Tensor:
    if reduction == "none": return self
    if reduction == "sum": return self.sum()
    if reduction == "mean": return self.mean()
    raise ValueError(f"reduction={reduction!r} must be one of ('mean', 'sum', 'none')")
  def _label_mask(self, labels:Tensor, n:int, dim:int) -> Tensor:
    """labels == class for every class, the classes laid along dim of the result (labels gets a new dim there)."""
    if not dtypes.is_int(labels.dtype): raise TypeError(f"class labels must be an int tensor, got {labels.dtype}")
    d = labels._norm_axis(dim, extra=1)
    return labels.unsqueeze(d) == type(self).arange(n, device=labels.device, dtype=labels.dtype).reshape((n,) + (1,) * (labels.ndim - d))
  def _log_sigmoid(self) -> Tensor:
    # log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)): no overflow for large |x|
    return self.minimum(0) - ((-self.abs()).exp() + 1).log()

  def binary_crossentropy(self, Y:Tensor, reduction:ReductionStr="mean") -> Tensor:
    """-(Y*log(self) + (1-Y)*log(1-self)) for probabilities self; each log is clamped at -100 as torch does (so 0 and 1 give a finite loss)."""
    self._check_same_shape("binary_crossentropy", Y)
    return (-Y * self.log().maximum(-100) - (1 - Y) * (1 - self).log().maximum(-100))._do_reduction(reduction)
  def binary_crossentropy_logits(self, Y:Tensor, reduction:ReductionStr="mean", pos_weight:Tensor|None=None) -> Tensor:
    """binary_crossentropy of sigmoid(self), computed stably from the logits; pos_weight scales the positive term."""
    self._check_same_shape("binary_crossentropy_logits", Y)
    if pos_weight is not None: check_tensors("binary_crossentropy_logits", [pos_weight])
    pos = Y * self._log_sigmoid()
    if pos_weight is not None: pos = pos_weight * pos
    return (-(pos + (1 - Y) * (-self)._log_sigmoid()))._do_reduction(reduction)
  def _check_same_shape(self, what:str, Y:Tensor) -> None:
    check_tensors(what, [Y])
    if self.shape != Y.shape: raise RuntimeError(f"{what}: target shape {Y.shape} must match input shape {self.shape}")
  def sparse_categorical_crossentropy(self, Y:Tensor, ignore_index:int=-1, label_smoothing=0.0, reduction:ReductionStr="mean") -> Tensor:
    """Cross-entropy of logits self (classes on the LAST axis) against int labels Y (self's shape without it). Labels equal to
    ignore_index add nothing and aren't counted by the mean (with the default -1, nothing is ignored, as in tinygrad)."""
    check_tensors("sparse_categorical_crossentropy", [Y])
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0.0, 1.0], got {label_smoothing}")
    if self.ndim == 0 or Y.shape != self.shape[:-1]:
      raise RuntimeError(f"sparse_categorical_crossentropy: labels shape {Y.shape} must be the logits shape {self.shape} without its last dim")
    self._same_device(Y)
    log_probs, hit = self.log_softmax(), self._label_mask(Y, self.shape[-1], -1)
    if ignore_index == -1: keep, count = None, Y.numel()   # nothing ignored: the mean's count is known (no kernel to count it)
    else: keep, hit = Y.ne(ignore_index), hit & Y.ne(ignore_index).unsqueeze(-1)
    unreduced = hit.where(log_probs, 0).sum(-1)
    if label_smoothing:
      smooth = log_probs.mean(-1)
      unreduced = (1 - label_smoothing) * unreduced + label_smoothing * (smooth if keep is None else keep.where(smooth, 0))
    if reduction != "mean": return -unreduced._do_reduction(reduction)
    return -unreduced.sum() / (count if keep is None else keep.sum())
  def cross_entropy(self, Y:Tensor, reduction:ReductionStr="mean", label_smoothing:float=0.0) -> Tensor:
    """Cross-entropy of logits self (classes on axis 1, or 0 for a 1-d input) against class probabilities Y of self's shape or
    int labels of self's shape without the class axis."""
    check_tensors("cross_entropy", [Y])
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0.0, 1.0], got {label_smoothing}")
    if self.ndim == 0: raise RuntimeError(f"cross_entropy needs at least 1-d logits, got shape {self.shape}")
    cdim, n = (0 if self.ndim == 1 else 1), self.shape[0 if self.ndim == 1 else 1]
    if self.shape != Y.shape:
      if self.shape[:cdim] + self.shape[cdim + 1:] != Y.shape:
        raise RuntimeError(f"cross_entropy: target shape {Y.shape} must be the input shape {self.shape} or it without dim {cdim}")
      Y = self._label_mask(Y, n, cdim).cast(self.dtype)
    Y = (1 - label_smoothing) * Y + label_smoothing / n
    return -(self.log_softmax(cdim) * Y).sum(cdim)._do_reduction(reduction)
  def nll_loss(self, Y:Tensor, weight:Tensor|None=None, ignore_index:int|None=None, reduction:ReductionStr="mean") -> Tensor:
    """-self[n, Y[n]] (times weight[Y[n]]) for log-probabilities self (N, C, ...) and int labels Y (N, ...); the mean divides by
    the total weight of the labels that are not ignore_index."""
    check_tensors("nll_loss", [Y] + ([weight] if weight is not None else []))
    if self.ndim < 1 or Y.shape != (self.shape[:1] + self.shape[2:] if self.ndim > 1 else ()):
      raise RuntimeError(f"nll_loss: target shape {Y.shape} must be the input shape {self.shape} without dim 1")
    cdim = 1 if self.ndim > 1 else 0
    n = self.shape[cdim]
    if weight is not None and weight.shape != (n,): raise RuntimeError(f"nll_loss: weight shape {weight.shape} must be ({n},)")
    w = Y._full(1, self.dtype) if weight is None else self._label_mask(Y, n, -1).where(weight, 0).sum(-1)
    if ignore_index is not None: w = w * Y.ne(ignore_index)
    nll = -self._label_mask(Y, n, cdim).where(self, 0).sum(cdim) * w
    if reduction != "mean": return nll._do_reduction(reduction)
    # unweighted and nothing ignored: the total weight is the label count (no kernel to sum ones)
    return nll.sum() / (Y.numel() if weight is None and ignore_index is None else w.sum())

__all__ = ["LossMixin"]
