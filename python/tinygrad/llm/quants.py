"""The ggml tensor types as lazy Tensor ops: each type's dequantization turns a uint8 tensor of its packed blocks, shape (blocks, bytes
per block), into the values, shape (blocks, elements per block), with the formulas of llama.cpp's dequantize_row_* (the `gguf` package's
gguf.quants.dequantize computes the same). Being lazy, the ops fuse into the kernel that consumes the weight: `x @ w.T` is one kernel
reading the packed bytes, and no float copy of the weight is ever written."""
from __future__ import annotations
import functools
from dataclasses import dataclass
from typing import Callable
from tinygrad.tensor import Tensor
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import prod
from tinygrad.llm import ggml_tables as _tables
from tinygrad.schedule.knobs import DECODE_UNROLL, MANY_RECOMPUTES

@dataclass(frozen=True)
class GGMLType:
  name: str
  block_elems: int
  block_bytes: int
  dequantize: Callable[[Tensor], Tensor]   # (blocks, block_bytes) uint8 -> (blocks, block_elems)
  native: DType|None = None                # the dtype of a type stored as plain values (its blocks are one element each)
  # x @ the dequantized weight.T computed block by block, where the type's layout lets the block's scale leave the inner sum (one
  # multiply per block, not per element): x (..., n_blocks, block_elems) float32, blocks (out, n_blocks, block_bytes) uint8 ->
  # (..., out) float32. None: the matmul reads `dequantize`'s values
  block_dot: Callable[[Tensor, Tensor], Tensor]|None = None

# ***** field readers: b is a (blocks, bytes per block) uint8 tensor *****

def _f16(b:Tensor, off:int) -> Tensor:
  """The float16 at byte off of each block, as a (blocks, 1) float32 column."""
  return b[:, off:off+2].bitcast(dtypes.float16).cast(dtypes.float32)
def _fields(x:Tensor, width:int) -> Tensor:
  """(..., k) bytes -> (..., 8 // width, k): the width-bit fields of every byte, the lowest bits first (field i of byte j at [i, j])."""
  shifts = Tensor.arange(0, 8, width, dtype=x.dtype, device=x.device).reshape(8 // width, 1)
  return (x.unsqueeze(-2) >> shifts) & ((1 << width) - 1)
def _nibbles(x:Tensor) -> Tensor:
  """(blocks, k) bytes -> (blocks, 2k): the low nibbles of all k bytes, then their high nibbles (ggml's order within a block)."""
  return _fields(x, 4).flatten(-2)
def _f32(x:Tensor) -> Tensor: return x.cast(dtypes.float32)
@functools.lru_cache(None)
def _table(device:str, values:tuple[int, ...]) -> Tensor:
  """A small table of values as a float32 tensor on device, one per device (indexing it by a code tensor folds into a load)."""
  return Tensor(list(values), dtype=dtypes.float32, device=device).realize()

# ***** the 32-element block types *****

def _q4_0_codes(b): return _f32(_nibbles(b[:, 2:]).cast(dtypes.int8) - 8)
def _q4_0(b): return _q4_0_codes(b) * _f16(b, 0)
def _q4_1(b): return _f32(_nibbles(b[:, 4:])) * _f16(b, 0) + _f16(b, 2)
def _q5(b:Tensor, off:int) -> Tensor:
  # bit j of the little-endian 32-bit word at off is the fifth bit of element j
  high = _fields(b[:, off:off+4], 1).transpose(-1, -2).flatten(-2)
  return _nibbles(b[:, off+4:]) | (high << 4)
def _q5_0_codes(b): return _f32(_q5(b, 2).cast(dtypes.int8) - 16)
def _q5_0(b): return _q5_0_codes(b) * _f16(b, 0)
def _q5_1(b): return _f32(_q5(b, 4)) * _f16(b, 0) + _f16(b, 2)
def _q8_0_codes(b): return _f32(b[:, 2:].bitcast(dtypes.int8))
def _q8_0(b): return _q8_0_codes(b) * _f16(b, 0)
def _runs_block_dot(x:Tensor, codes:Tensor, d:Tensor, scales:Tensor|None=None, dmin:Tensor|None=None, mins:Tensor|None=None) -> Tensor:
  """x @ the weight.T for a weight whose block is runs of consecutive values, the values of run r codes * d * scales[r] (- dmin *
  mins[r]): x (..., n_blocks, block_elems), codes (out, n_blocks, runs, run_elems), d and dmin (out, n_blocks), scales and mins (out,
  n_blocks, runs), all float32 (scales None: one run per block, scale d).
  A run's products are added into DECODE_UNROLL lanes (element i into lane i % DECODE_UNROLL), the lanes multiplied by the run's scale,
  summed over the block's runs, multiplied by d, and those summed over the blocks and the lanes: one sum whose unrolled lanes are the
  accumulator's (schedule/knobs.py), with one scale multiply per lane and run instead of per element (d applies once per block and lane,
  so the scheduler sees it used 16 times, not 16 times per run: it stays in the kernel). A run's own sum reduced across lanes before its
  scale would cost more adds than the multiplies saved. A min leaves the inner sum as dmin * mins[r] * (the sum of the run's x): those
  sums of x are computed once (a small kernel reading x only), and the min terms are a second, short sum in the same kernel."""
  out, n_blocks, runs = codes.shape[:3]
  prods = x.reshape(*x.shape[:-2], 1, n_blocks, runs, -1, DECODE_UNROLL) * codes.reshape(out, n_blocks, runs, -1, DECODE_UNROLL)
  run_lanes = [functools.reduce(Tensor.add, [prods[..., r, k, :] for k in range(prods.shape[-2])]) for r in range(runs)]
  lanes = run_lanes[0] if scales is None else functools.reduce(Tensor.add, [rl * scales[..., r:r+1] for r, rl in enumerate(run_lanes)])
  dot = (lanes * d.unsqueeze(-1)).sum((-2, -1))
  if mins is None or dmin is None: return dot
  x_sums = x.reshape(*x.shape[:-2], 1, n_blocks, runs, -1).sum(-1).contiguous()
  # the runs added in the body (not a sum over blocks and runs, whose loop would divide its index into the two)
  return dot - (functools.reduce(Tensor.add, [x_sums[..., r] * mins[..., r] for r in range(runs)]) * dmin).sum(-1)
def _scaled_block_dot(codes:Callable[[Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
  """block_dot of a type whose values are codes(b) times the float16 scale at byte 0 of their block: one run per block."""
  def dot(x:Tensor, blocks:Tensor) -> Tensor:
    out, n_blocks, block_bytes = blocks.shape
    flat = blocks.reshape(out * n_blocks, block_bytes)
    return _runs_block_dot(x, codes(flat).reshape(out, n_blocks, 1, -1), _f16(flat, 0).reshape(out, n_blocks))
  return dot
def _mxfp4(b):
  # the e8m0 exponent as half its power of two, since the e2m1 codes below are doubled to integers: e < 2 is a subnormal float32
  e = b[:, 0:1].cast(dtypes.uint32)
  d = (e < 2).where((e == 0).where(0x00200000, 0x00400000).cast(dtypes.uint32), (e - 1) << 23).bitcast(dtypes.float32)
  return _table(b.device, _tables.KVALUES_MXFP4)[_nibbles(b[:, 1:17]).cast(dtypes.int32)] * d

# ***** the 256-element k-quants *****

def _q2_k(b):
  # 16 runs of 16 elements: a 4-bit scale and a 4-bit min each; 2-bit values, byte l of a 32-byte half holds runs' elements at 32j + l
  scales = b[:, 0:16]
  dl, ml = _f16(b, 80) * _f32(scales & 0xF), _f16(b, 82) * _f32(scales >> 4)
  q = _fields(b[:, 16:80].reshape(-1, 2, 32), 2).reshape(-1, 16, 16)
  return (dl.unsqueeze(-1) * _f32(q) - ml.unsqueeze(-1)).flatten(-2)
def _q3_k(b):
  # 16 six-bit signed scales: low nibbles of bytes 96..103 (then their high nibbles), top two bits from bytes 104..107
  low, high = _nibbles(b[:, 96:104]), _fields(b[:, 104:108], 2).flatten(-2)
  scales = _f32((low | (high << 4)).cast(dtypes.int8) - 32)
  dl = (_f16(b, 108) * scales).unsqueeze(-1)
  ql = _fields(b[:, 32:96].reshape(-1, 2, 32), 2).reshape(-1, 16, 16)
  # bit c of hmask byte l is set when element 32c + l has no -4 offset
  hm = _fields(b[:, 0:32], 1).reshape(-1, 16, 16)
  return (dl * _f32(ql.cast(dtypes.int8) - ((hm ^ 1) << 2).cast(dtypes.int8))).flatten(-2)
def _k_scales(s:Tensor) -> tuple[Tensor, Tensor]:
  """The 8 six-bit scales and mins packed in the 12 bytes of a Q4_K/Q5_K block (uint8)."""
  lo, mid, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  # added, not or-ed: the sum's range is known to be below 64, so a table indexed by it needs no bounds check
  return (lo & 63).cat((hi & 0xF) + (lo >> 6) * 16, dim=-1), (mid & 63).cat((hi >> 4) + (mid >> 6) * 16, dim=-1)
def _q4_k_values(b:Tensor, off:int) -> Tensor:
  # 4 chunks of 32 bytes: their low nibbles are elements [64c, 64c+32), high nibbles [64c+32, 64c+64). Widened before the fields are
  # taken: the C compiler then widens each 16 bytes once and masks/shifts 32-bit lanes (from bytes it widens each nibble's lanes apart)
  return _fields(b[:, off:off+128].reshape(-1, 4, 32).cast(dtypes.uint32), 4).reshape(-1, 8, 32)
# bit c of qh[l] is the fifth bit of element 32c+l
def _q5_k_values(b:Tensor) -> Tensor: return _q4_k_values(b, 48) | (_fields(b[:, 16:48], 1) << 4)
def _qk(b:Tensor, q:Tensor) -> Tensor:
  """Q4_K/Q5_K: 8 runs of 32 values q (blocks, 8, 32), each with its scale and min."""
  sc, mn = (_f32(v) for v in _k_scales(b[:, 4:16]))
  return ((_f16(b, 0) * sc).unsqueeze(-1) * _f32(q) - (_f16(b, 2) * mn).unsqueeze(-1)).flatten(-2)
def _q4_k(b): return _qk(b, _q4_k_values(b, 16))
def _q5_k(b): return _qk(b, _q5_k_values(b))
def _k_block_dot(values:Callable[[Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
  """block_dot of Q4_K/Q5_K, values(b) their (blocks, 8, 32) codes: each 32-element run's scale and min leave its inner sum."""
  def dot(x:Tensor, blocks:Tensor) -> Tensor:
    out, n_blocks, block_bytes = blocks.shape
    flat = blocks.reshape(out * n_blocks, block_bytes)
    # the scales' float values read from a table: a load the C compiler folds into the multiply that broadcasts the scale, where a
    # conversion takes two vector instructions (convert, broadcast) next to the decode's own vector work
    table = _table(blocks.device, tuple(range(64)))
    sc, mn = (table[v.cast(dtypes.int32)] for v in _k_scales(flat[:, 4:16]))
    d, dmin = (_f16(flat, off).reshape(out, n_blocks) for off in (0, 2))
    codes = _f32(values(flat)).reshape(out, n_blocks, 8, 32)
    if not _few_rows(x): return _runs_block_dot(x, codes, d, sc.reshape(out, n_blocks, 8), dmin, mn.reshape(out, n_blocks, 8))
    return _runs_block_dot(x, codes, d, sc.reshape(out, n_blocks, 8)) - _k_min_dot(x, flat[:, 8:16].reshape(out, n_blocks, 8), dmin)
  return dot
def _few_rows(x:Tensor) -> bool:
  """x (..., n_blocks, block_elems) has few rows (a decode step's): a value looked up per row and lane stays in the block_dot's kernel
  (schedule/rangeify.py inline_gather), and per-row tables of its blocks' size are cheap to write."""
  return prod(x.shape[:-2]) * DECODE_UNROLL < MANY_RECOMPUTES
def _k_min_dot(x:Tensor, packed:Tensor, dmin:Tensor) -> Tensor:
  """The min terms of a Q4_K/Q5_K block_dot: the sum over blocks and runs of dmin * mins[r] * (the sum of run r's x), x (..., n_blocks,
  256), packed (out, n_blocks, 8) the bytes holding the mins (4 whose low 6 bits are mins 0..3 and top 2 bits mins 4..7's, then 4 whose
  high nibbles are mins 4..7's low bits), dmin (out, n_blocks). Each byte's share of a block's min terms is looked up in a table of
  256 entries per (block, byte) made from x's run sums (a small kernel reading x only): a load and an add per byte, where decoding
  the mins takes several ops each. The tables are 256 floats per byte of a block: for a few rows of x (_few_rows)."""
  n_blocks = packed.shape[1]
  xs = x.reshape(*x.shape[:-2], n_blocks, 8, 32).sum(-1).contiguous()
  v = Tensor.arange(256, device=x.device)
  low, top, high = _f32(v & 63), _f32((v >> 6) * 16), _f32(v >> 4)
  tables = (xs[..., :4, None] * low + xs[..., 4:, None] * top).cat(xs[..., 4:, None] * high, dim=-2).contiguous()
  out = packed.shape[0]
  tables = tables.reshape(*tables.shape[:-3], 1, n_blocks, 8, 256).expand(*tables.shape[:-3], out, n_blocks, 8, 256)
  index = packed.cast(dtypes.int32).reshape(out, n_blocks, 8, 1).expand(*tables.shape[:-1], 1)
  shares = tables.gather(-1, index)[..., 0]                                       # (..., out, n_blocks, 8)
  # the bytes added in the body (not a sum over blocks and bytes, whose loop would divide its index into the two)
  return (functools.reduce(Tensor.add, [shares[..., r] for r in range(8)]) * dmin).sum(-1)
def _q6_k_runs(b:Tensor) -> tuple[Tensor, Tensor]:
  """Q6_K: (blocks, 16, 16) codes of its 16 runs and their (blocks, 16) int8 scales, as float32 (d, the float16 at 208, scales them)."""
  # per half of 128: low nibbles of its 64 ql bytes, then their high nibbles; two bits from qh byte l for elements 32c + l
  ql = _fields(b[:, 0:128].reshape(-1, 2, 64), 4).reshape(-1, 2, 4, 32)
  qh = _fields(b[:, 128:192].reshape(-1, 2, 32), 2)
  return _f32((ql | (qh << 4)).cast(dtypes.int8) - 32).reshape(-1, 16, 16), _f32(b[:, 192:208].bitcast(dtypes.int8))
def _q6_k(b):
  q, sc = _q6_k_runs(b)
  return ((_f16(b, 208) * sc).unsqueeze(-1) * q).flatten(-2)
def _q6_k_block_dot(x:Tensor, blocks:Tensor) -> Tensor:
  out, n_blocks, block_bytes = blocks.shape
  flat = blocks.reshape(out * n_blocks, block_bytes)
  q, sc = _q6_k_runs(flat)
  if _few_rows(x):
    # the int8 scales' float values read from a table indexed by their bytes (see _k_block_dot). Not for many rows of x: the looked-up
    # scales would get a buffer of their own, where the converted ones stay in the kernel
    sc = _table(blocks.device, tuple(range(128)) + tuple(range(-128, 0)))[flat[:, 192:208].cast(dtypes.int32)]
  return _runs_block_dot(x, q.reshape(out, n_blocks, 16, 16), _f16(flat, 208).reshape(out, n_blocks), sc.reshape(out, n_blocks, 16))

# ***** the i-quants: values from ggml's grids *****

@functools.lru_cache(None)
def _ggml_iq_grid(device:str, grid:tuple[int, ...], grid_shape:tuple[int, int]) -> Tensor:
  """An IQ grid as ggml stores it (ggml-common.h: each entry one word of grid_shape[1] bytes, the first byte lowest) -> a float32
  Tensor of grid_shape on device."""
  if len(grid) != grid_shape[0] or grid_shape[1] not in (4, 8):
    raise ValueError(f"an IQ grid of {len(grid)} words can't be shaped {grid_shape} (words of 4 or 8 bytes)")
  return Tensor([float((w >> (8 * i)) & 0xFF) for w in grid for i in range(grid_shape[1])], device=device).reshape(grid_shape)
def _grid(name:str, device:str) -> Tensor:
  raw = bytes.fromhex("".join(getattr(_tables, name)))
  shape = getattr(_tables, name + "_SHAPE")
  words = tuple(int.from_bytes(raw[i:i+shape[1]], "little") for i in range(0, len(raw), shape[1]))
  return _ggml_iq_grid(device, words, shape)
def _signs(bits:Tensor) -> Tensor: return (bits == 0).where(1.0, -1.0)

def _iq3_xxs(b):
  # per 32 elements, one little-endian word: 4x7 sign bits (made even) and a 4-bit scale on top
  aux = b[:, 66:98].bitcast(dtypes.uint32)                                              # (n, 8)
  db = (_f16(b, 0) * (0.5 + _f32(aux >> 28)) * 0.5).reshape(-1, 8, 1, 1)
  seven = (aux.unsqueeze(-1) >> Tensor.arange(0, 28, 7, dtype=dtypes.uint32, device=b.device)) & 127   # (n, 8, 4)
  # the eighth sign bit makes the number of set bits even: it is the parity of the seven stored ones
  parity = seven ^ (seven >> 4)
  parity = parity ^ (parity >> 2)
  signs = _signs(_fields((seven | (((parity ^ (parity >> 1)) & 1) << 7)).cast(dtypes.uint8), 1).transpose(-1, -2))
  grid = _grid("IQ3XXS_GRID", b.device)[b[:, 2:66].cast(dtypes.int32)].reshape(-1, 8, 4, 8)
  return (db * grid * signs).flatten(-3)
def _iq3_s(b):
  idx = b[:, 2:66].reshape(-1, 8, 8).cast(dtypes.int32) | (_fields(b[:, 66:74], 1).transpose(-1, -2).cast(dtypes.int32) << 8)
  sc = _nibbles(b[:, 106:110]).reshape(-1, 2, 4).transpose(-1, -2).flatten(-2)         # group g: nibble g%2 of byte g//2
  db = (_f16(b, 0) * (1 + 2 * _f32(sc))).reshape(-1, 8, 1, 1)
  signs = _signs(_fields(b[:, 74:106].reshape(-1, 8, 4), 1).transpose(-1, -2))          # (n, 8, 4, 8)
  return (db * _grid("IQ3S_GRID", b.device)[idx].reshape(-1, 8, 4, 8) * signs).flatten(-3)
def _iq2_s(b):
  hi = _fields(b[:, 66:74], 2).transpose(-1, -2).cast(dtypes.int32)                    # (n, 8, 4)
  idx = b[:, 2:34].reshape(-1, 8, 4).cast(dtypes.int32) | (hi << 8)
  sc = _fields(b[:, 74:82], 4).transpose(-1, -2)                                        # (n, 8, 2): grid entry l uses nibble l//2
  db = (_f16(b, 0).unsqueeze(-1) * (0.5 + _f32(sc)) * 0.25).reshape(-1, 8, 2, 1, 1)
  signs = _signs(_fields(b[:, 34:66].reshape(-1, 8, 4), 1).transpose(-1, -2)).reshape(-1, 8, 2, 2, 8)
  return (db * _grid("IQ2S_GRID", b.device)[idx].reshape(-1, 8, 2, 2, 8) * signs).flatten(-4)
def _iq4_xs(b):
  # group g's 6-bit scale: nibble g%2 of byte 4 + g//2, over bits 2g, 2g+1 of the little-endian 16-bit word at byte 2
  sl = _nibbles(b[:, 4:8]).reshape(-1, 2, 4).transpose(-1, -2).flatten(-2)
  high = _fields(b[:, 2:4], 2).transpose(-1, -2).flatten(-2)
  dl = _f16(b, 0) * _f32((sl | (high << 4)).cast(dtypes.int8) - 32)                    # (n, 8)
  q = _table(b.device, _tables.KVALUES_IQ4NL)[_fields(b[:, 8:].reshape(-1, 8, 16), 4).flatten(-2).cast(dtypes.int32)]
  return (dl.unsqueeze(-1) * q).flatten(-2)
def _q1_0(b):
  # one bit per element (least significant first): +d for 1, -d for 0; float16 as llama.cpp computes it
  bits = _fields(b[:, 2:18], 1).transpose(-1, -2).flatten(-2)
  return b[:, 0:2].bitcast(dtypes.float16) * (bits.cast(dtypes.float16) * 2 - 1)

def _native(name:str, dt:DType) -> GGMLType: return GGMLType(name, 1, dt.itemsize, lambda b: b.bitcast(dt), dt)

# every supported ggml type {ggml type id: GGMLType} (ids from ggml.h)
GGML_TYPES: dict[int, GGMLType] = {
  0: _native("F32", dtypes.float32), 1: _native("F16", dtypes.float16), 30: _native("BF16", dtypes.bfloat16),
  24: _native("I8", dtypes.int8), 25: _native("I16", dtypes.int16), 26: _native("I32", dtypes.int32), 27: _native("I64", dtypes.int64),
  28: _native("F64", dtypes.float64),
  2: GGMLType("Q4_0", 32, 18, _q4_0, block_dot=_scaled_block_dot(_q4_0_codes)), 3: GGMLType("Q4_1", 32, 20, _q4_1),
  6: GGMLType("Q5_0", 32, 22, _q5_0, block_dot=_scaled_block_dot(_q5_0_codes)), 7: GGMLType("Q5_1", 32, 24, _q5_1),
  8: GGMLType("Q8_0", 32, 34, _q8_0, block_dot=_scaled_block_dot(_q8_0_codes)), 39: GGMLType("MXFP4", 32, 17, _mxfp4),
  10: GGMLType("Q2_K", 256, 84, _q2_k), 11: GGMLType("Q3_K", 256, 110, _q3_k),
  12: GGMLType("Q4_K", 256, 144, _q4_k, block_dot=_k_block_dot(lambda b: _q4_k_values(b, 16))),
  13: GGMLType("Q5_K", 256, 176, _q5_k, block_dot=_k_block_dot(_q5_k_values)), 14: GGMLType("Q6_K", 256, 210, _q6_k, block_dot=_q6_k_block_dot),
  18: GGMLType("IQ3_XXS", 256, 98, _iq3_xxs), 21: GGMLType("IQ3_S", 256, 110, _iq3_s), 22: GGMLType("IQ2_S", 256, 82, _iq2_s),
  23: GGMLType("IQ4_XS", 256, 136, _iq4_xs), 41: GGMLType("Q1_0", 128, 18, _q1_0)}

def ggml_type(type_id:int, what:str) -> GGMLType:
  """The GGMLType of a type id; ValueError naming `what` (the tensor) and the supported types otherwise."""
  if (t := GGML_TYPES.get(type_id)) is None:
    supported = ", ".join(f"{t.name} ({k})" for k, t in sorted(GGML_TYPES.items()))
    raise ValueError(f"{what}: GGML type {type_id} is not supported (supported: {supported})")
  return t

def dequantize(blocks:Tensor, type_id:int) -> Tensor:
  """The values of a (blocks, bytes per block) uint8 tensor of ggml type `type_id`, flattened: lazy ops that fuse into their consumer."""
  t = ggml_type(type_id, "dequantize")
  if blocks.dtype is not dtypes.uint8 or blocks.ndim != 2 or blocks.shape[1] != t.block_bytes:
    raise ValueError(f"dequantize {t.name}: needs (blocks, {t.block_bytes}) uint8, got {blocks.shape} {blocks.dtype}")
  return t.dequantize(blocks).flatten()

def block_dot(x:Tensor, blocks:Tensor, type_id:int) -> Tensor:
  """x (..., in) @ the dequantized weight.T for a weight of `type_id` stored as `blocks`, (out, in / block_elems, block_bytes) uint8:
  (..., out) float32, block by block with the type's block_dot where it has one, else over the dequantized values."""
  t = ggml_type(type_id, "block_dot")
  if blocks.dtype is not dtypes.uint8 or blocks.ndim != 3 or blocks.shape[2] != t.block_bytes or x.shape[-1] != blocks.shape[1] * t.block_elems:
    raise ValueError(f"block_dot {t.name}: needs x (..., n) and (out, n/{t.block_elems}, {t.block_bytes}) uint8 blocks, got x {x.shape}, "
                     f"blocks {blocks.shape} {blocks.dtype}")
  x = x.cast(dtypes.float32)
  if t.block_dot is None: return x @ t.dequantize(blocks.reshape(-1, t.block_bytes)).reshape(blocks.shape[0], -1).cast(dtypes.float32).T
  return t.block_dot(x.reshape(*x.shape[:-1], blocks.shape[1], t.block_elems), blocks)

def gather_rows(blocks:Tensor, t:GGMLType, ids:Tensor) -> Tensor:
  """The dequantized rows ids (any shape, int) of a table of quantized type t stored as `blocks`, (rows, row / block_elems, block_bytes) uint8:
  (*ids.shape, row). The blocks are gathered first and only those dequantized: the table's dequantization indexed by ids would be
  planned over the whole table, and a k-quant's block scales, broadcast over their blocks' elements, get a float buffer of every
  block's scale (schedule/rangeify.py recomputed_often), written at every lookup."""
  if blocks.dtype is not dtypes.uint8 or blocks.ndim != 3 or blocks.shape[2] != t.block_bytes:
    raise ValueError(f"gather_rows {t.name}: needs (rows, row/{t.block_elems}, {t.block_bytes}) uint8 blocks, got {blocks.shape} {blocks.dtype}")
  return t.dequantize(blocks[ids].reshape(-1, t.block_bytes)).reshape(*ids.shape, blocks.shape[1] * t.block_elems)

__all__ = ["GGMLType", "GGML_TYPES", "ggml_type", "dequantize", "block_dot", "gather_rows"]
