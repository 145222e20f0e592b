"""Hashing tensors on the device: keccak (SHA-3 and tinygrad's shake_128 form) over the last axis, and hash (tinygrad 0.14's 16-byte
content hash: a tree of keccaks over 1 MiB chunks)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod, ceildiv
if TYPE_CHECKING: from tinygrad.tensor.core import Tensor

# rate (bytes absorbed per block) and domain-separation byte of each named configuration; the digest is (200 - rate) // 2 bytes
KECCAK_CFGS = {"sha3_224": (144, 6), "sha3_256": (136, 6), "shake_128": (168, 31)}
# rotation of lane (x, y), stored at x + 5*y (the Keccak reference's rho offsets)
_RHO = [0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14]
# pi moves lane (x, y) to (y, 2x + 3y): the source lane of each destination x' + 5*y' is x = 3*(y' - 3x') mod 5, y = x'
_PI_SRC = [(3 * (yd - 3 * xd)) % 5 + 5 * xd for yd in range(5) for xd in range(5)]
_IOTA = [0x1, 0x8082, 0x800000000000808a, 0x8000000080008000, 0x808b, 0x80000001, 0x8000000080008081, 0x8000000000008009, 0x8a, 0x88,
         0x80008009, 0x8000000a, 0x8000808b, 0x800000000000008b, 0x8000000000008089, 0x8000000000008003, 0x8000000000008002,
         0x8000000000000080, 0x800a, 0x800000008000000a, 0x8000000080008081, 0x8000000000008080, 0x80000001, 0x8000000080008008]

def _roll_x(t:Tensor, k:int) -> Tensor:
  """t[..., (x + k) % 5] along the last axis (size 5)."""
  k %= 5
  return t if k == 0 else t[..., k:].cat(t[..., :k], dim=-1)

def _rotl(t:Tensor, r:Tensor) -> Tensor:
  # (64 - r) & 63 keeps every shift below 64 (a shift by 64 is undefined in C); r == 0 gives t | t
  return (t << r) | (t >> ((64 - r) & 63))

def _keccak_f(state:Tensor) -> Tensor:
  """Keccak-f[1600]: 24 rounds over a (batch, 5, 5) uint64 state, lane (x, y) at [:, y, x]."""
  tensor = type(state)
  rho = tensor(_RHO, device=state.device, dtype=dtypes.uint64).reshape(5, 5)
  for rc in _IOTA:
    c = state[:, 0] ^ state[:, 1] ^ state[:, 2] ^ state[:, 3] ^ state[:, 4]                  # theta: column parities (batch, 5)
    d = _roll_x(c, -1) ^ _rotl(_roll_x(c, 1), tensor(1, device=state.device, dtype=dtypes.uint64))
    b = _rotl(state ^ d.unsqueeze(1), rho).reshape(-1, 25)                                  # rho
    b = tensor.stack(*[b[:, i] for i in _PI_SRC], dim=1).reshape(-1, 5, 5)                # pi
    state = b ^ (~_roll_x(b, 1) & _roll_x(b, 2))                                            # chi
    state = state ^ tensor([rc] + [0] * 24, device=state.device, dtype=dtypes.uint64).reshape(5, 5)   # iota
    # one kernel per round: fused, 24 rounds make one expression too large to compile; the round constant comes from a buffer, so
    # every round is the same kernel (compiled once)
    state = state.contiguous()
  return state

def _as_bytes(t:Tensor) -> Tensor:
  """The bytes of t's elements (little-endian) along a new last axis, flattened into it: shape (*t.shape[:-1], t.shape[-1]*itemsize)."""
  if t.dtype.itemsize == 1: return t.bitcast(dtypes.uint8) if t.dtype is not dtypes.uint8 else t
  u = t.bitcast({2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[t.dtype.itemsize])
  shifts = type(t)([8 * i for i in range(t.dtype.itemsize)], device=t.device, dtype=u.dtype)
  return ((u.unsqueeze(-1) >> shifts) & 0xff).cast(dtypes.uint8).flatten(-2)

class HashingMixin:
  def keccak(self:Tensor, cfg:str|tuple[int, int]="sha3_256") -> Tensor:
    """Keccak of the bytes along the last axis ("sha3_224", "sha3_256", "shake_128" with a (200-rate)//2-byte digest as tinygrad's,
    or (rate, domain byte)): uint8 of shape (*self.shape[:-1], digest bytes). sha3_* match hashlib."""
    if isinstance(cfg, str):
      if cfg not in KECCAK_CFGS: raise ValueError(f"keccak cfg must be one of {sorted(KECCAK_CFGS)} or (rate, dsbyte), got {cfg!r}")
      rate, dsbyte = KECCAK_CFGS[cfg]
    else: rate, dsbyte = cfg
    if not 0 < rate < 200 or rate % 8: raise ValueError(f"keccak rate must be a multiple of 8 in (0, 200), got {rate}")
    if self.ndim == 0: raise RuntimeError("keccak hashes along the last axis: it needs at least one dimension")
    if self.dtype in dtypes.weaks: raise RuntimeError(f"keccak needs a concrete dtype, got {self.dtype}")
    data = _as_bytes(self).reshape(prod(self.shape[:-1]), -1)
    bs, n = data.shape
    # pad: the domain byte after the message, 0x80 in the last byte of the last block (one byte holds both when it is the last)
    nblocks = n // rate + 1
    pad = [0] * (nblocks * rate - n)
    pad[0] ^= dsbyte
    pad[-1] ^= 0x80
    data = data.cat(type(self)(pad, device=self.device, dtype=dtypes.uint8).reshape(1, -1).expand(bs, len(pad)), dim=1)
    words = data.reshape(bs, nblocks, rate // 8, 8).cast(dtypes.uint64)
    words = (words << type(self)([8 * i for i in range(8)], device=self.device, dtype=dtypes.uint64)).sum(-1, dtype=dtypes.uint64)
    words = words.pad(((0, 0), (0, 0), (0, 25 - rate // 8)))
    state = type(self).zeros(bs, 5, 5, device=self.device, dtype=dtypes.uint64, buffer=False)
    for k in range(nblocks): state = _keccak_f(state ^ words[:, k].reshape(bs, 5, 5))
    obytes = (200 - rate) // 2
    out = _as_bytes(state.reshape(bs, 25))[:, :obytes]
    return out.reshape(*self.shape[:-1], obytes)
  def hash(self:Tensor) -> Tensor:
    """tinygrad 0.14's 16-byte hash of the tensor's bytes: shake_128 keccaks over 4 KiB rows of 1 MiB chunks, then over their digests,
    level by level until one chunk is left."""
    data = _as_bytes(self.flatten())
    chunks = ceildiv(data.shape[0], 2 ** 20)
    while chunks > 1:
      data = _hash_1mb(data.pad(((0, chunks * 2 ** 20 - data.shape[0]),)).reshape(chunks, 2 ** 20)).flatten()
      chunks = ceildiv(chunks, 65536)
    return _hash_1mb(data.pad(((0, 2 ** 20 - data.shape[0]),)).unsqueeze(0)).flatten()[:16]

def _hash_1mb(t:Tensor) -> Tensor:
  return t.reshape(-1, 4096).keccak("shake_128").reshape(t.shape[0], -1).keccak("shake_128")

__all__ = ["HashingMixin"]
