"""Signal processing: DFT, STFT, window functions, MelWeightMatrix. Transforms are products with cosine/sine matrices (Tensor ops);
complex values are a trailing axis of (real, imaginary), as ONNX stores them."""
from __future__ import annotations
import numpy as np
from tinygrad.tensor import Tensor
from tinygrad.nn.onnx.registry import onnx_op
from tinygrad.nn.onnx.model import dtype_from_onnx
from tinygrad.nn.onnx.ops.common import to_python

def _scalar(t) -> float|int|None:
  v = to_python(t)
  while isinstance(v, list): v = v[0]
  return v

def _window(size:Tensor, output_datatype:int, periodic:int, coeffs:tuple[float, ...]) -> Tensor:
  n = int(_scalar(size))
  denom = n if periodic else n - 1
  k = np.arange(n, dtype=np.float64)
  w = sum(c * np.cos(2 * np.pi * j * k / denom) * (-1) ** j for j, c in enumerate(coeffs))
  return Tensor(w).cast(dtype_from_onnx(output_datatype))

onnx_op("HannWindow", 17)(lambda size, output_datatype=1, periodic=1: _window(size, output_datatype, periodic, (0.5, 0.5)))
onnx_op("HammingWindow", 17)(lambda size, output_datatype=1, periodic=1: _window(size, output_datatype, periodic, (25 / 46, 21 / 46)))
onnx_op("BlackmanWindow", 17)(lambda size, output_datatype=1, periodic=1: _window(size, output_datatype, periodic, (0.42, 0.5, 0.08)))

def _dft_last(re:Tensor, im:Tensor|None, n:int, inverse:bool, onesided:bool) -> tuple[Tensor, Tensor]:
  """The DFT over the last axis of (re, im), length n (padded or cut), as two matrix products."""
  m = re.shape[-1]
  if inverse and onesided:
    # the input holds bins 0..n//2 of a Hermitian spectrum: bin k > n//2 is the conjugate of bin n-k
    full = n // 2 + 1
    cut = tuple((0, s) for s in re.shape[:-1]) + ((0, min(m, full)),)
    mirror = list(range(n - full, 0, -1))
    re = re.shrink(cut)
    im = im.shrink(cut) if im is not None else Tensor.zeros_like(re)
    if mirror: re, im = re.cat(re[..., mirror], dim=-1), im.cat(-im[..., mirror], dim=-1)
    m = re.shape[-1]
  if m != n:
    def fit(t:Tensor) -> Tensor:
      return t.shrink(tuple((0, s) for s in t.shape[:-1]) + ((0, n),)) if m > n else t.pad(((0, 0),) * (t.ndim - 1) + ((0, n - m),))
    re, im = fit(re), fit(im) if im is not None else None
  k = np.arange(n)
  angle = 2 * np.pi * np.outer(k, k) / n
  sign = 1.0 if inverse else -1.0
  cos, sin = Tensor(np.cos(angle)).cast(re.dtype), Tensor(sign * np.sin(angle)).cast(re.dtype)
  out_re, out_im = re @ cos, re @ sin
  if im is not None: out_re, out_im = out_re - im @ sin, out_im + im @ cos
  if inverse: out_re, out_im = out_re / n, out_im / n
  if onesided and not inverse:
    keep = tuple((0, s) for s in out_re.shape[:-1]) + ((0, n // 2 + 1),)
    out_re, out_im = out_re.shrink(keep), out_im.shrink(keep)
  return out_re, out_im

def _dft(x:Tensor, dft_length:int|None, axis:int, inverse:int, onesided:int) -> Tensor:
  axis = axis % x.ndim
  if axis == x.ndim - 1: raise ValueError("DFT: axis can't be the last (complex) axis")
  re, im = x[..., 0], (x[..., 1] if x.shape[-1] == 2 else None)
  re, im = re.transpose(axis, -1), im.transpose(axis, -1) if im is not None else None
  n = dft_length if dft_length is not None else (2 * (re.shape[-1] - 1) if inverse and onesided else re.shape[-1])
  out_re, out_im = _dft_last(re, im, n, bool(inverse), bool(onesided))
  # an inverse of a one-sided spectrum is a real signal
  if inverse and onesided: return out_re.transpose(axis, -1).unsqueeze(-1)
  return Tensor.stack(out_re.transpose(axis, -1), out_im.transpose(axis, -1), dim=-1)

@onnx_op("DFT", 17)
def DFT_17(x:Tensor, dft_length:Tensor|None=None, axis:int=1, inverse:int=0, onesided:int=0) -> Tensor:
  return _dft(x, int(_scalar(dft_length)) if dft_length is not None else None, axis, inverse, onesided)

@onnx_op("DFT", 20)
def DFT(x:Tensor, dft_length:Tensor|None=None, axis:Tensor|None=None, inverse:int=0, onesided:int=0) -> Tensor:
  return _dft(x, int(_scalar(dft_length)) if dft_length is not None else None, int(_scalar(axis)) if axis is not None else -2, inverse, onesided)

@onnx_op("STFT", 17)
def STFT(signal:Tensor, frame_step:Tensor, window:Tensor|None=None, frame_length:Tensor|None=None, onesided:int=1) -> Tensor:
  step = int(_scalar(frame_step))
  length = int(_scalar(frame_length)) if frame_length is not None else window.shape[0]
  n_frames = (signal.shape[1] - length) // step + 1
  frames = Tensor.stack(*[signal[:, f * step:f * step + length] for f in range(n_frames)], dim=1)   # (batch, frames, length, 1|2)
  if window is not None: frames = frames * window.cast(frames.dtype).reshape(1, 1, length, 1)
  return _dft(frames, length, 2, 0, onesided)

@onnx_op("MelWeightMatrix", 17)
def MelWeightMatrix(num_mel_bins:Tensor, dft_length:Tensor, sample_rate:Tensor, lower_edge_hertz:Tensor, upper_edge_hertz:Tensor,
                    output_datatype:int=1) -> Tensor:
  # a constant of its scalar inputs: triangular filters between mel-spaced edges, computed on the host
  n_mel, n_dft, rate = int(_scalar(num_mel_bins)), int(_scalar(dft_length)), int(_scalar(sample_rate))
  lo, hi = float(_scalar(lower_edge_hertz)), float(_scalar(upper_edge_hertz))
  def to_mel(f:float) -> float: return 2595 * np.log10(1 + f / 700)
  edges = np.arange(n_mel + 2) * (to_mel(hi) - to_mel(lo)) / (n_mel + 2) + to_mel(lo)
  bins = (((n_dft + 1) * (700 * (10 ** (edges / 2595) - 1))) // rate).astype(int)
  out = np.zeros((n_dft // 2 + 1, n_mel))
  for i in range(n_mel):
    left, center, right = bins[i], bins[i + 1], bins[i + 2]
    if center == left: out[center, i] = 1
    else: out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
    if right > center: out[center:right, i] = (right - np.arange(center, right)) / (right - center)
  return Tensor(out).cast(dtype_from_onnx(output_datatype))

