# numpy references for sliding windows (pooling, convolution) and convolution, shared by the tests that check them.
import itertools
import numpy as np

def np_out_size(i, k, s, d, pb, pa, ceil):
  """torch's pooling output size (ceil_mode: round up, but no window may start in the right padding)."""
  span = i + pb + pa - d * (k - 1) - 1
  o = (span + (s - 1 if ceil else 0)) // s + 1
  if ceil and (o - 1) * s >= i + pb: o -= 1
  return o

def np_windows(x, k, s, d, pads, ceil=False, fill=0.0):
  """(..., *out, *k) windows of the last len(k) dims of x padded by pads [(before, after)] with fill (and more on the right for ceil),
  with a same-shaped mask of which entries lie inside the regularly padded input."""
  n = len(k)
  sp = x.shape[-n:]
  outs = [np_out_size(i, kk, ss, dd, pb, pa, ceil) for i, kk, ss, dd, (pb, pa) in zip(sp, k, s, d, pads)]
  extra = [max(0, (o - 1) * ss + dd * (kk - 1) + 1 - (i + pb + pa)) for o, i, kk, ss, dd, (pb, pa) in zip(outs, sp, k, s, d, pads)]
  big = np.pad(x, [(0, 0)] * (x.ndim - n) + [(pb, pa + e) for (pb, pa), e in zip(pads, extra)], constant_values=fill)
  inpad = np.pad(np.ones(sp, bool), [(pb, pa + e) for (pb, pa), e in zip(pads, extra)], constant_values=False)
  inreg = np.pad(np.ones([i + pb + pa for i, (pb, pa) in zip(sp, pads)], bool), [(0, e) for e in extra], constant_values=False)
  res = np.zeros(x.shape[:-n] + tuple(outs) + tuple(k), x.dtype)
  m_in, m_reg = np.zeros(tuple(outs) + tuple(k), bool), np.zeros(tuple(outs) + tuple(k), bool)
  for o in itertools.product(*[range(v) for v in outs]):
    for kk in itertools.product(*[range(v) for v in k]):
      pos = tuple(oo * ss + q * dd for oo, ss, q, dd in zip(o, s, kk, d))
      res[(..., *o, *kk)] = big[(..., *pos)]
      m_in[o + kk], m_reg[o + kk] = inpad[pos], inreg[pos]
  return res, m_in, m_reg

def np_conv(x, w, groups=1, stride=1, dilation=1, pads=None):
  n = w.ndim - 2
  s, d = (stride,) * n if isinstance(stride, int) else stride, (dilation,) * n if isinstance(dilation, int) else dilation
  win, _, _ = np_windows(x, w.shape[2:], s, d, pads or [(0, 0)] * n)   # (bs, cin_total, *out, *k)
  bs, cin = x.shape[0], w.shape[1]
  rc = w.shape[0] // groups
  out = np.zeros((bs, w.shape[0]) + win.shape[2:2 + n], np.float64)
  for g in range(groups):
    xs, ws = win[:, g * cin:(g + 1) * cin], w[g * rc:(g + 1) * rc]
    ks = "".join("klmn"[:n])
    out[:, g * rc:(g + 1) * rc] = np.einsum(f"bc{'xyz'[:n]}{ks},oc{ks}->bo{'xyz'[:n]}", xs.astype(np.float64), ws.astype(np.float64))
  return out
