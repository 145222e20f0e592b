"""tinygrad.nn: layers (this file), optimizers (nn.optim), weight files and state dicts (nn.state), datasets (nn.datasets).
The layers are tinygrad 0.14's (same constructors, attribute and parameter names, shapes and initialisation, and so torch's state-dict
names), written on the Tensor API. A layer is a plain object holding Tensors; calling it runs the forward. Training vs evaluation
(BatchNorm's statistics) follows Context(TRAINING=...), as in 0.14."""
from __future__ import annotations
import importlib
import math
from tinygrad.tensor import Tensor
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod, make_tuple, flatten, TRAINING
from tinygrad.nn import optim  # noqa: F401

def __getattr__(name:str):
  # nn.state and nn.datasets are imported on first use: they are heavier (file formats, downloads) and most scripts need neither
  if name in ("state", "datasets"): return importlib.import_module(f"tinygrad.nn.{name}")
  raise AttributeError(f"module 'tinygrad.nn' has no attribute {name!r}")

def _check_channels(layer:str, x:Tensor, channels:int) -> None:
  if x.ndim < 2 or x.shape[1] != channels: raise RuntimeError(f"{layer}: expected input of shape (N, {channels}, ...), got {x.shape}")

def _channel_affine(x:Tensor, weight:Tensor|None, bias:Tensor|None) -> Tensor:
  # per-channel scale and shift of (N, C, ...) input
  if weight is None or bias is None: return x
  shape = (1, -1) + (1,) * (x.ndim - 2)
  return x * weight.reshape(shape) + bias.reshape(shape)

class BatchNorm:
  """Batch normalisation over the channel axis (1) of (N, C, ...) input: batch statistics while training (which also update the
  running statistics, with the unbiased variance), the running statistics in evaluation. BatchNorm2d and BatchNorm3d are aliases."""
  def __init__(self, sz:int, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor|None = Tensor.ones(sz) if affine else None
    self.bias: Tensor|None = Tensor.zeros(sz) if affine else None
    # statistics are state, not parameters: an optimizer given them (get_parameters) realizes but never updates them
    self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.long).is_param_(False)
    if track_running_stats: self.running_mean, self.running_var = Tensor.zeros(sz).is_param_(False), Tensor.ones(sz).is_param_(False)

  def calc_stats(self, x:Tensor) -> tuple[Tensor, Tensor]:
    """(mean, biased variance) per channel: the running ones in evaluation, else the batch's."""
    if self.track_running_stats and not TRAINING: return self.running_mean, self.running_var
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean = x.mean(axis=axes)
    # the variance's gradient through the mean is zero, so the mean it centres with is detached (one pass less backwards)
    y = x - mean.detach().reshape((1, -1) + (1,) * (x.ndim - 2))
    return mean, (y * y).mean(axis=axes)

  def __call__(self, x:Tensor) -> Tensor:
    ref = self.weight if self.weight is not None else self.running_mean if self.track_running_stats else None
    if ref is not None: _check_channels("BatchNorm", x, ref.shape[0])
    elif x.ndim < 2: raise RuntimeError(f"BatchNorm: expected input of shape (N, C, ...), got {x.shape}")
    mean, var = self.calc_stats(x)
    if self.track_running_stats and TRAINING:
      n = x.numel() // x.shape[1]
      if n < 2: raise ValueError(f"BatchNorm: expected more than 1 value per channel when training, got input of shape {x.shape}")
      m = self.momentum
      self.running_mean.assign((1 - m) * self.running_mean + m * mean.detach())
      self.running_var.assign((1 - m) * self.running_var + (m * n / (n - 1)) * var.detach())
      self.num_batches_tracked += 1
    return x.batchnorm(self.weight, self.bias, mean, var.add(self.eps).rsqrt())
BatchNorm2d = BatchNorm3d = BatchNorm

class Conv2d:
  """Convolution over any number of spatial dims (the kernel_size's length; an int means 2): weight (out, in/groups, *kernel) and
  bias (out,) uniform in +-1/sqrt(in*prod(kernel)). padding is an int, a tuple, or 'same' (stride 1 only)."""
  def __init__(self, in_channels:int, out_channels:int, kernel_size:int|tuple[int, ...], stride=1, padding:int|tuple[int, ...]|str=0,
               dilation=1, groups=1, bias=True):
    self.kernel_size = make_tuple(kernel_size, 2)
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})")
    if isinstance(padding, str):
      if padding.lower() != "same": raise ValueError(f"Invalid padding string {padding!r}, only 'same' is supported")
      if stride != 1: raise ValueError(f"padding='same' is not supported for strided convolutions (stride={stride})")
      # the total padding d*(k-1) split with the odd one after, as flat (begin, end) pairs from the last dim to the first
      pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
              for d, k in zip(make_tuple(dilation, len(self.kernel_size))[::-1], self.kernel_size[::-1])]
      padding = tuple(flatten(pads))
    self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-bound, high=bound)
    self.bias: Tensor|None = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None

  def __call__(self, x:Tensor) -> Tensor:
    self._check_input(x, self.weight.shape[1] * self.groups)
    return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)

  def _check_input(self, x:Tensor, channels:int) -> None:
    if x.ndim != (n := 2 + len(self.kernel_size)):
      raise RuntimeError(f"{type(self).__name__}: expected {n}-d input (N, {channels}, *spatial), got {x.shape}")
    _check_channels(type(self).__name__, x, channels)

def Conv1d(in_channels:int, out_channels:int, kernel_size:int, stride=1, padding:int|str=0, dilation=1, groups=1, bias=True) -> Conv2d:
  """A Conv2d with one spatial dim: input (N, C, L)."""
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)

class ConvTranspose2d(Conv2d):
  """Transposed convolution (the gradient of a convolution w.r.t. its input): weight (in, out/groups, *kernel)."""
  def __init__(self, in_channels:int, out_channels:int, kernel_size:int|tuple[int, ...], stride=1, padding=0, output_padding=0,
               dilation=1, groups=1, bias=True):
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size, low=-bound, high=bound)
    self.output_padding = output_padding

  def __call__(self, x:Tensor) -> Tensor:
    self._check_input(x, self.weight.shape[0])
    return x.conv_transpose2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding)

def ConvTranspose1d(in_channels:int, out_channels:int, kernel_size:int, stride=1, padding=0, output_padding=0, dilation=1,
                    groups=1, bias=True) -> ConvTranspose2d:
  """A ConvTranspose2d with one spatial dim: input (N, C, L)."""
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)

class Linear:
  """x @ weight.T + bias: weight (out, in) and bias (out,) uniform in +-1/sqrt(in), as torch."""
  def __init__(self, in_features:int, out_features:int, bias=True):
    bound = 1 / math.sqrt(in_features)
    self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound)
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None

  def __call__(self, x:Tensor) -> Tensor:
    if x.ndim == 0 or x.shape[-1] != self.weight.shape[1]:
      raise RuntimeError(f"Linear: input of shape {x.shape} doesn't match in_features={self.weight.shape[1]} (its last dim)")
    return x.linear(self.weight.transpose(), self.bias)

def _group_norm(layer:str, x:Tensor, channels:int, groups:int, eps:float, weight:Tensor|None, bias:Tensor|None) -> Tensor:
  """(N, C, ...) input normalised over each group of C/groups channels and the spatial dims, then the per-channel affine."""
  _check_channels(layer, x, channels)
  return _channel_affine(x.reshape(x.shape[0], groups, -1).layernorm(eps=eps).reshape(x.shape), weight, bias)

class GroupNorm:
  """Normalises (N, C, ...) input over each group of C/num_groups channels (and the spatial dims), then a per-channel affine."""
  def __init__(self, num_groups:int, num_channels:int, eps=1e-5, affine=True):
    if num_channels % num_groups: raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor|None = Tensor.ones(num_channels) if affine else None
    self.bias: Tensor|None = Tensor.zeros(num_channels) if affine else None

  def __call__(self, x:Tensor) -> Tensor:
    return _group_norm("GroupNorm", x, self.num_channels, self.num_groups, self.eps, self.weight, self.bias)

class InstanceNorm:
  """Normalises each channel of each sample of (N, C, ...) input over its spatial dims, then a per-channel affine."""
  def __init__(self, num_features:int, eps:float=1e-5, affine:bool=True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor|None = Tensor.ones(num_features) if affine else None
    self.bias: Tensor|None = Tensor.zeros(num_features) if affine else None

  def __call__(self, x:Tensor) -> Tensor:  # a GroupNorm with a group per channel
    return _group_norm("InstanceNorm", x, self.num_features, self.num_features, self.eps, self.weight, self.bias)

class LayerNorm:
  """Normalises over the last len(normalized_shape) dims, which must equal normalized_shape, then an elementwise affine."""
  def __init__(self, normalized_shape:int|tuple[int, ...], eps:float=1e-5, elementwise_affine:bool=True):
    self.normalized_shape: tuple[int, ...] = make_tuple(normalized_shape, 1)
    self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
    self.weight: Tensor|None = Tensor.ones(self.normalized_shape) if elementwise_affine else None
    self.bias: Tensor|None = Tensor.zeros(self.normalized_shape) if elementwise_affine else None

  def __call__(self, x:Tensor) -> Tensor:
    n = len(self.normalized_shape)
    if x.ndim < n or x.shape[x.ndim - n:] != self.normalized_shape:
      raise RuntimeError(f"{type(self).__name__}: the last dims of the input {x.shape} must be normalized_shape {self.normalized_shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    if self.weight is None or self.bias is None: return x
    return x * self.weight + self.bias

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channel axis of (N, C, H, W) input."""
  def __call__(self, x:Tensor) -> Tensor:
    if x.ndim != 4: raise RuntimeError(f"LayerNorm2d: expected 4-d input (N, C, H, W), got {x.shape}")
    return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class RMSNorm:
  """x / sqrt(mean(x^2 over the last dim) + eps) * weight, computed in float32 and cast back to x's dtype."""
  def __init__(self, dim:int, eps=1e-6, elementwise_affine=True):
    self.eps = eps
    self.weight = Tensor.ones(dim) if elementwise_affine else None

  def _norm(self, x:Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()

  def __call__(self, x:Tensor) -> Tensor:
    if self.weight is not None and (x.ndim == 0 or x.shape[-1] != self.weight.shape[0]):
      raise RuntimeError(f"RMSNorm: the last dim of the input {x.shape} must be {self.weight.shape[0]}")
    x = self._norm(x.float()).cast(x.dtype)
    return x if self.weight is None else x * self.weight

class Embedding:
  """A lookup table: integer idx of any shape -> idx.shape + (embed_size,); weight (vocab_size, embed_size) is glorot uniform."""
  def __init__(self, vocab_size:int, embed_size:int):
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size)

  def __call__(self, idx:Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Expected integer dtype for index in embedding, got {idx.dtype}")
    # a one-hot compare against arange, summed over the vocabulary: no gather op needed, and its gradient is a plain reduce
    hot = Tensor.arange(self.weight.shape[0], device=self.weight.device) == idx.unsqueeze(-1)
    return hot.unsqueeze(-1).where(self.weight, 0).sum(-2, dtype=self.weight.dtype)

class LSTMCell:
  """One LSTM step: (x, (h, c)) -> (h', c'), gates ordered input, forget, cell, output as torch; hc defaults to zeros."""
  def __init__(self, input_size:int, hidden_size:int, bias:bool=True):
    bound = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-bound, high=bound)
    self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-bound, high=bound)
    self.bias_ih: Tensor|None = Tensor.zeros(hidden_size * 4) if bias else None
    self.bias_hh: Tensor|None = Tensor.zeros(hidden_size * 4) if bias else None

  def __call__(self, x:Tensor, hc:tuple[Tensor, Tensor]|None=None) -> tuple[Tensor, Tensor]:
    hidden, inp = self.weight_hh.shape[1], self.weight_ih.shape[1]
    if x.ndim != 2 or x.shape[1] != inp: raise RuntimeError(f"LSTMCell: expected input of shape (batch, {inp}), got {x.shape}")
    if hc is None: hc = (Tensor.zeros(x.shape[0], hidden, dtype=x.dtype, device=x.device, buffer=False),) * 2
    elif any(t.shape != (x.shape[0], hidden) for t in hc):
      raise RuntimeError(f"LSTMCell: h and c must have shape ({x.shape[0]}, {hidden}), got {tuple(t.shape for t in hc)}")
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c

__all__ = ["BatchNorm", "BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Linear", "GroupNorm",
           "InstanceNorm", "LayerNorm", "LayerNorm2d", "RMSNorm", "Embedding", "LSTMCell", "optim"]
