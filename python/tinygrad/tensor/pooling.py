"""Sliding-window ops: pooling and convolutions, over any number of trailing spatial dims. All are built on _pool, which lays
every window out as extra dims with movement ops only (no gather): a conv is then a broadcast multiply and a sum."""
from __future__ import annotations
from typing import TYPE_CHECKING, Sequence
from tinygrad.dtype import DTypeLike, dtypes
from tinygrad.helpers import prod, make_tuple, flatten, ceildiv, flat_to_grouped, resolve_pool_pads
from tinygrad.tensor.common import check_tensors
from tinygrad.uop import Ops
from tinygrad.uop.ops import smax, identity_element
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

def _window_args(what:str, k_:tuple[int, ...], **args) -> dict[str, tuple[int, ...]]:
  """Each of args (stride, dilation, ...) as one positive int per spatial dim (ValueError naming it otherwise)."""
  ret = {}
  for name, v in args.items():
    t = make_tuple(v, len(k_))
    if len(t) != len(k_) or not all(isinstance(x, int) and x >= (0 if name == "output_padding" else 1) for x in t):
      raise ValueError(f"{what}: {name} must be {'a non-negative' if name == 'output_padding' else 'a positive'} int or {len(k_)} of them "
                       f"(for kernel {k_}), got {v!r}")
    ret[name] = t
  return ret

def _pads(what:str, padding, k_:tuple[int, ...], d_:tuple[int, ...]) -> list[tuple[int, int]]:
  """(before, after) per spatial dim from an int, one per dim, two per dim (torch order: last dim first), 'valid' or 'same'."""
  if isinstance(padding, str):
    if padding == "valid": return [(0, 0)] * len(k_)
    # 'same' (stride 1): the total d*(k-1) split with the odd one after, as torch does
    if padding == "same": return [((t := d * (k - 1)) // 2, t - t // 2) for k, d in zip(k_, d_)]
    raise ValueError(f"{what}: padding string must be 'valid' or 'same', got {padding!r}")
  if not (isinstance(padding, int) or (isinstance(padding, (tuple, list)) and all(isinstance(p, int) for p in padding))):
    raise TypeError(f"{what}: padding must be an int, a sequence of ints or 'valid'/'same', got {padding!r}")
  return list(flat_to_grouped(resolve_pool_pads(padding, len(k_))))

class PoolingMixin:
  def _pool(self, k_:tuple[int, ...], stride:int|tuple[int, ...]=1, dilation:int|tuple[int, ...]=1) -> Tensor:
    """The windows of the last len(k_) dims: (*batch, *spatial) -> (*batch, *out, *k_). Each dim is repeated enough times that,
    read as a (k, i*f+d) grid, row j starts at offset j*d: the dilation becomes a shrink, the stride a reshape and a shrink."""
    nb, n = self.ndim - len(k_), len(k_)
    if nb < 0: raise RuntimeError(f"can't pool a tensor of shape {self.shape} with a {n}-d kernel {k_}")
    s_, d_ = make_tuple(stride, n), make_tuple(dilation, n)
    i_, batch = self.shape[nb:], self.shape[:nb]
    if any(d * (k - 1) + 1 > i for k, d, i in zip(k_, d_, i_)):
      raise RuntimeError(f"kernel size {k_} (dilation {d_}) is larger than the (padded) input size {i_} of shape {self.shape}")
    o_ = [ceildiv(i - d * (k - 1), s) for i, d, k, s in zip(i_, d_, k_, s_)]
    f_ = [smax(1, ceildiv(o * s - d, i)) for o, s, i, d in zip(o_, s_, i_, d_)]   # enough length for the strided reads
    rows = [i * f + d for i, f, d in zip(i_, f_, d_)]
    reps = [ceildiv(k * r, i) for k, r, i in zip(k_, rows, i_)]
    x = self.reshape(*batch, *flatten((1, i) for i in i_)).expand(*batch, *flatten(zip(reps, i_))).reshape(*batch, *[r * i for r, i in zip(reps, i_)])
    x = x.shrink(tuple([None] * nb + [(0, k * r) for k, r in zip(k_, rows)])).reshape(*batch, *flatten(zip(k_, rows)))
    x = x.shrink(tuple([None] * nb + flatten(((0, k), (0, o * s)) for k, o, s in zip(k_, o_, s_))))
    x = x.reshape(*batch, *flatten((k, o, s) for k, o, s in zip(k_, o_, s_)))
    x = x.shrink(tuple([None] * nb + flatten(((0, k), (0, o), (0, 1)) for k, o in zip(k_, o_)))).reshape(*batch, *flatten(zip(k_, o_)))
    return x.permute(*range(nb), *[nb + 2 * j + 1 for j in range(n)], *[nb + 2 * j for j in range(n)])
  def _pad_spatial(self, pads:Sequence[tuple[int, int]], value:float=0.0) -> Tensor:
    return self.pad(tuple([None] * (self.ndim - len(pads)) + list(pads)), value=value)
  def _ceil_pads(self, pads:list[tuple[int, int]], k_, s_, d_) -> list[tuple[int, int]]:
    """ceil_mode's pads: extra padding after each dim so the output size rounds up, except that a window may not start in the
    padding after the input (torch's rule)."""
    ret = []
    for (b, a), i, k, s, d in zip(pads, self.shape[-len(k_):], k_, s_, d_):
      o = ceildiv(i + b + a - d * (k - 1) - 1, s) + 1
      if s * (o - 1) >= i + b: o -= 1
      ret.append((b, s * (o - 1) + d * (k - 1) + 1 - i - b))
    return ret
  def _pool_setup(self, what:str, kernel_size, stride, dilation, padding):
    k_ = make_tuple(kernel_size, 2)
    if not k_ or not all(isinstance(k, int) and k > 0 for k in k_):
      raise ValueError(f"{what}: kernel_size must be positive ints, got {kernel_size!r}")
    if self.ndim < len(k_): raise RuntimeError(f"{what}: a {len(k_)}-d kernel {k_} needs an input of at least {len(k_)} dims, got {self.shape}")
    a = _window_args(what, k_, stride=stride if stride is not None else k_, dilation=dilation)
    return k_, a["stride"], a["dilation"], _pads(what, padding, k_, a["dilation"])

  # ***** pooling *****
  def avg_pool2d(self, kernel_size:tuple[int, ...]=(2, 2), stride=None, dilation=1, padding:int|tuple[int, ...]=0,
                 ceil_mode:bool=False, count_include_pad:bool=True) -> Tensor:
    """Mean over each window of the last len(kernel_size) dims. The divisor counts padding (count_include_pad) but never the
    extra padding of ceil_mode, as in torch."""
    k_, s_, d_, pads = self._pool_setup("avg_pool2d", kernel_size, stride, dilation, padding)
    axes = tuple(range(-len(k_), 0))
    cpads = self._ceil_pads(pads, k_, s_, d_) if ceil_mode else pads
    total = self._pad_spatial(cpads)._pool(k_, s_, d_).sum(axes)
    if count_include_pad and not ceil_mode: return total / prod(k_)
    # the divisor: ones over the input (and its regular padding when counted), zeros in the rest
    sp = self.shape[-len(k_):]
    ones = type(self).ones(*sp, device=self.device, dtype=dtypes.default_float, buffer=False)
    if count_include_pad: ones, extra = ones._pad_spatial(pads, 1.0), [(0, ca - a) for (_, a), (_, ca) in zip(pads, cpads)]
    else: extra = cpads
    return total / ones._pad_spatial(extra)._pool(k_, s_, d_).sum(axes)
  def max_pool2d(self, kernel_size:tuple[int, ...]=(2, 2), stride=None, dilation=1, padding:int|tuple[int, ...]=0,
                 ceil_mode:bool=False, return_indices:bool=False) -> Tensor|tuple[Tensor, Tensor]:
    """Max over each window of the last len(kernel_size) dims; with return_indices also the flat index into the spatial dims of
    the first max of each window (int32, as tinygrad)."""
    k_, s_, d_, pads = self._pool_setup("max_pool2d", kernel_size, stride, dilation, padding)
    if ceil_mode: pads = self._ceil_pads(pads, k_, s_, d_)
    axes = tuple(range(-len(k_), 0))
    windows = self._pad_spatial(pads, identity_element(Ops.MAX, self.dtype))._pool(k_, s_, d_)
    out = windows.max(axes)
    if not return_indices: return out
    sp = self.shape[-len(k_):]
    pos = type(self).arange(prod(sp), device=self.device, dtype=dtypes.int32).reshape(sp)._pad_spatial(pads, prod(sp))._pool(k_, s_, d_)
    idx = (windows == out.reshape(out.shape + (1,) * len(k_))).where(pos, prod(sp)).min(axes)
    return out, idx
  def max_unpool2d(self, indices:Tensor, kernel_size:tuple[int, ...]=(2, 2), stride=None, dilation=1, padding:int|tuple[int, ...]=0,
                   output_size=None) -> Tensor:
    """Writes each value of self at its flat spatial index (from max_pool2d's return_indices) into zeros of the unpooled size."""
    check_tensors("max_unpool2d", [indices])
    if self.ndim < 3: raise RuntimeError(f"max_unpool2d needs (batch, channels, *spatial), got {self.shape}")
    if indices.shape != self.shape: raise RuntimeError(f"max_unpool2d: indices shape {indices.shape} must match input shape {self.shape}")
    bs, c, *sp = self.shape
    if output_size is None:
      k_, s_, d_, pads = self._pool_setup("max_unpool2d", make_tuple(kernel_size, len(sp)), stride, dilation, padding)
      output_size = tuple((i - 1) * s - b - a + d * (k - 1) + 1 for i, k, d, s, (b, a) in zip(sp, k_, d_, s_, pads))
    else: output_size = tuple(output_size)[-len(sp):]
    n = prod(output_size)
    hit = indices.reshape(bs, c, 1, -1) == type(self).arange(n, device=self.device, dtype=indices.dtype).reshape(n, 1)
    # overlapping windows can pick one index twice (with the same value): write it once, as torch does, not their sum
    picked = hit.where(self.reshape(bs, c, 1, -1), identity_element(Ops.MAX, self.dtype)).max(3)
    return hit.max(3).where(picked, 0).reshape(bs, c, *output_size)

  # ***** convolutions *****
  def conv2d(self, weight:Tensor, bias:Tensor|None=None, groups=1, stride=1, dilation=1, padding:int|Sequence[int]=0,
             dtype:DTypeLike|None=None) -> Tensor:
    """Cross-correlation of self (bs, groups*cin, *spatial) with weight (cout, cin, *kernel), any number of spatial dims; padding
    may be negative (a crop), 'valid' or 'same'. dtype is the accumulation dtype."""
    check_tensors("conv2d", [weight] + ([bias] if bias is not None else []))
    if self.ndim < 3 or weight.ndim != self.ndim:
      raise RuntimeError(f"conv2d: input {self.shape} and weight {weight.shape} need the same number (>= 3) of dims")
    (bs, cin_), (cout, cin), HW = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if not isinstance(groups, int) or groups < 1: raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
    if groups * cin != cin_ or cout % groups:
      raise RuntimeError(f"conv2d: input {self.shape} doesn't match weight {weight.shape} with groups={groups} (input channels {cin_} "
                         f"must be groups*{cin}={groups * cin}, output channels {cout} a multiple of groups)")
    if bias is not None and bias.shape != (cout,): raise RuntimeError(f"conv2d: bias shape {bias.shape} must be ({cout},) for weight {weight.shape}")
    a = _window_args("conv2d", HW, stride=stride, dilation=dilation)
    if padding == "same" and any(s > 1 for s in a["stride"]): raise RuntimeError(f"conv2d: padding='same' needs stride 1, got {stride}")
    x = self._pad_spatial(_pads("conv2d", padding, HW, a["dilation"]))._pool(HW, a["stride"], a["dilation"])
    rcout, oyx, n = cout // groups, x.shape[2:-len(HW)], len(HW)
    # (bs, groups, rcout, *out, cin, *kernel): every output channel sees its group's input windows
    x = x.reshape(bs, groups, cin, 1, *oyx, *HW).expand(bs, groups, cin, rcout, *oyx, *HW)
    x = x.permute(0, 1, 3, *[4 + i for i in range(len(oyx))], 2, *[4 + len(oyx) + i for i in range(n)])
    ret = (x * weight.reshape(1, groups, rcout, *[1] * len(oyx), cin, *HW)).sum([-1 - i for i in range(1 + n)], keepdim=True, dtype=dtype)
    ret = ret.reshape(bs, cout, *oyx)
    return ret if bias is None else ret + bias.reshape(1, -1, *[1] * n)
  def conv_transpose2d(self, weight:Tensor, bias:Tensor|None=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0) -> Tensor:
    """The gradient of conv2d w.r.t. its input as a layer: weight is (cin, cout/groups, *kernel). Written as a conv2d of the input
    with stride-1 zeros between its elements, the kernel flipped and its in/out channels swapped per group."""
    check_tensors("conv_transpose2d", [weight] + ([bias] if bias is not None else []))
    if self.ndim < 3 or weight.ndim != self.ndim:
      raise RuntimeError(f"conv_transpose2d: input {self.shape} and weight {weight.shape} need the same number (>= 3) of dims")
    HW, cin = weight.shape[2:], weight.shape[0]
    if not isinstance(groups, int) or groups < 1 or cin % groups or self.shape[1] != cin:
      raise RuntimeError(f"conv_transpose2d: input {self.shape} doesn't match weight {weight.shape} with groups={groups}")
    a = _window_args("conv_transpose2d", HW, stride=stride, dilation=dilation, output_padding=output_padding)
    s_, d_, op_ = a["stride"], a["dilation"], a["output_padding"]
    w = weight.reshape(groups, cin // groups, *weight.shape[1:]).transpose(1, 2).flip(*range(3, weight.ndim + 1))
    w = w.reshape(groups * weight.shape[1], cin // groups, *HW)
    x = self
    if any(s > 1 for s in s_):
      # (i) -> (i, 1) -> (i, s) with zeros -> (i*s) -> drop the s-1 trailing zeros
      sp = x.shape[2:]
      x = x.reshape(*x.shape[:2], *flatten((i, 1) for i in sp)).pad(tuple([None, None] + flatten((None, (0, s - 1)) for s in s_)))
      x = x.reshape(*x.shape[:2], *[i * s for i, s in zip(sp, s_)]).shrink(tuple([None, None] + [(0, i * s - (s - 1)) for i, s in zip(sp, s_)]))
    pads = _pads("conv_transpose2d", padding, HW, d_)
    cpad = [((k - 1) * d - b, (k - 1) * d - e + o) for k, d, (b, e), o in zip(HW, d_, pads, op_)]
    return x.conv2d(w, bias=bias, groups=groups, dilation=d_, padding=flatten(reversed(cpad)))

  # ***** image ops: on CPU, tinygrad computes them as plain conv2d/dot (the image layout only matters on GPUs with IMAGE) *****
  def image_conv2d(self, weight:Tensor, bias:Tensor|None=None, groups=1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
    """conv2d restricted to 2 spatial dims (an image is (bs, channels, height, width))."""
    check_tensors("image_conv2d", [weight])
    if self.ndim != 4 or weight.ndim != 4: raise RuntimeError(f"image_conv2d needs 4-d input and weight, got {self.shape} and {weight.shape}")
    return self.conv2d(weight, bias, groups, stride, dilation, padding, dtype)
  def image_dot(self, w:Tensor, dtype:DTypeLike|None=None) -> Tensor:
    """dot (tinygrad computes it as a 1x1 image_conv2d, which gives the same values)."""
    check_tensors("image_dot", [w])
    if self.ndim == 0 or w.ndim == 0: raise RuntimeError(f"image_dot needs at least 1-d tensors, got {self.shape} and {w.shape}")
    if self.shape[-1] != w.shape[-min(w.ndim, 2)]: raise RuntimeError(f"cannot image_dot {self.shape} and {w.shape}")
    return self.dot(w, dtype=dtype)

__all__ = ["PoolingMixin"]
