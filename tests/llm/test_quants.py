# tinygrad.llm.quants: every ggml type's lazy dequantization against the `gguf` package's gguf.quants.dequantize (llama.cpp's formulas),
# and weights that stay quantized: a matmul, an embedding lookup and a per-token expert gather over packed blocks are each one kernel
# reading the packed bytes (no float copy of the weight is written), with numpy's result of the oracle's dequantized weight.
import pathlib
import re
import subprocess
import tempfile
import numpy as np
import pytest
from tinygrad import Tensor, dtypes, GlobalCounters
from tinygrad.llm.quants import GGML_TYPES, dequantize, ggml_type, block_dot, gather_rows
from tinygrad.engine.realize import get_spec
from tinygrad.runtime.support.compiler_cpu import ClangCompiler
from tests.helpers.ggml_blocks import TYPE_IDS, random_blocks

pytestmark = pytest.mark.cpu
gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q, quants  # noqa: E402

# every type the oracle dequantizes (Q1_0 it does not: see test_q1_0)
ORACLE_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "IQ2_S",
                "IQ3_S", "IQ4_XS", "IQ3_XXS"]

def _oracle(blocks:np.ndarray, name:str) -> np.ndarray:
  return quants.dequantize(blocks.reshape(-1), Q(TYPE_IDS[name])).reshape(-1).astype(np.float32)

def _ours(blocks:np.ndarray, name:str) -> np.ndarray:
  return dequantize(Tensor(blocks), TYPE_IDS[name]).cast(dtypes.float32).numpy()

CASES = {
  "random": {},
  "all_zero": {"fill": 0, "scales": (0.0, 0.0), "exponents": (0, 0)},
  "max_bits": {"fill": 0xFF, "scales": (65504.0, 65504.0), "exponents": (254, 254)},   # every code at its largest, the largest scales
  "negative_scales": {"scales": (-4.0, -0.25)},
  "every_exponent": {"exponents": (0, 255)},                                          # MXFP4's e8m0 scale, both subnormal ones included
}

@pytest.mark.parametrize("name,case", [(n, c) for n in ORACLE_TYPES for c in CASES if c != "every_exponent" or n == "MXFP4"])
def test_dequantize_matches_gguf(name, case):
  t = GGML_TYPES[TYPE_IDS[name]]
  n = 256 if case == "every_exponent" else 6
  blocks = random_blocks(name, n * (1 if t.native is None else 64), seed=TYPE_IDS[name], **CASES[case])
  if case == "every_exponent": blocks[:, 0] = np.arange(n) % 256
  np.testing.assert_array_equal(_ours(blocks, name), _oracle(blocks, name))

def test_q1_0():
  # 128 elements per block: a float16 scale, then one bit per element (least significant first): +d for 1, -d for 0, in float16
  b = np.zeros((2, 18), np.uint8)
  b[:, 0:2] = np.array([0.5, -2.0], np.float16).view(np.uint8).reshape(2, 2)
  b[0, 2], b[1, 17] = 0b101, 0x80
  out = dequantize(Tensor(b), TYPE_IDS["Q1_0"]).numpy()
  exp = np.concatenate([np.full(128, -0.5), np.full(128, 2.0)]).astype(np.float16)
  exp[0], exp[2], exp[255] = 0.5, 0.5, -2.0
  assert out.dtype == np.float16
  np.testing.assert_array_equal(out, exp)

def _weight(name:str, rows:int, cols:int, seed:int=0) -> tuple[Tensor, np.ndarray]:
  """A (rows, cols) weight of type `name` as gguf_load gives it (lazy ops over a realized buffer of the stored bytes: native types as
  their dtype, quantized ones as uint8 blocks), and the oracle's float64 values."""
  t = GGML_TYPES[TYPE_IDS[name]]
  blocks = random_blocks(name, rows * cols // t.block_elems, seed=seed)
  if t.native is not None: w = Tensor(blocks).bitcast(t.native).contiguous().realize().reshape(rows, cols)
  else: w = dequantize(Tensor(blocks).realize(), TYPE_IDS[name]).reshape(rows, cols)
  return w, _oracle(blocks, name).astype(np.float64).reshape(rows, cols)

def _close(out:np.ndarray, x:np.ndarray, w:np.ndarray, eq:str):
  """out is float32 math of the exact result: off by at most a few float32 roundings of the magnitudes summed."""
  ref, mag = np.einsum(eq, x.astype(np.float64), w), np.einsum(eq, np.abs(x.astype(np.float64)), np.abs(w))
  assert np.all(np.abs(out - ref) <= 1e-5 * mag + 1e-30), np.abs(out - ref).max()

def _one_kernel(fn) -> Tensor:
  GlobalCounters.reset()
  out = fn().realize()
  assert GlobalCounters.kernel_count == 1, f"{GlobalCounters.kernel_count} kernels"
  return out

@pytest.mark.parametrize("name", ORACLE_TYPES)
def test_matmul_reads_packed_blocks_in_one_kernel(name):
  rows, cols = 16, 512
  w, ref = _weight(name, rows, cols)
  x = Tensor(np.random.default_rng(1).standard_normal((3, cols)).astype(np.float32)).realize()
  out = _one_kernel(lambda: x @ w.T.cast(dtypes.float32))
  _close(out.numpy(), x.numpy(), ref, "bk,nk->bn")
  # the kernel reads the stored bytes (and x), never the floats of a dequantized copy
  stored = rows * cols // GGML_TYPES[TYPE_IDS[name]].block_elems * GGML_TYPES[TYPE_IDS[name]].block_bytes
  assert GlobalCounters.global_mem <= stored + x.nbytes() + out.nbytes() + 32 * 1024   # the IQ grids are the slack

@pytest.mark.parametrize("name", ["F16", "Q8_0", "Q4_K", "Q6_K", "MXFP4"])
def test_embedding_rows_in_one_kernel(name):
  w, ref = _weight(name, 64, 256)
  ids = Tensor([5, 0, 63, 5], dtype=dtypes.int32).realize()
  out = _one_kernel(lambda: w[ids].cast(dtypes.float32))
  np.testing.assert_allclose(out.numpy(), ref[[5, 0, 63, 5]], rtol=0, atol=0)

@pytest.mark.parametrize("name", ["F16", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4"])
def test_experts_gathered_per_token_in_one_kernel(name):
  # a mixture of experts: each token's top-k experts' weights gathered from the (experts, rows, cols) tensor and applied in one kernel
  experts, rows, cols = 6, 16, 256
  w, ref = _weight(name, experts * rows, cols)
  w, ref = w.reshape(experts, rows, cols), ref.reshape(experts, rows, cols)
  sel = np.array([[4, 1], [0, 4], [5, 2]], np.int32)    # (tokens, k)
  x = np.random.default_rng(2).standard_normal((3, 1, cols)).astype(np.float32)
  xt, st = Tensor(x).realize(), Tensor(sel).realize()
  out = _one_kernel(lambda: (xt.unsqueeze(1) @ w[st].transpose(-1, -2).cast(dtypes.float32)))   # (tokens, k, 1, rows)
  for tok in range(3):
    for j in range(2): _close(out.numpy()[tok, j, 0], x[tok, 0], ref[sel[tok, j]], "k,nk->n")

BLOCK_DOT_TYPES = ["Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K"]

def _block_dot_case(name:str, rows:int, cols:int, seed:int, **blocks_kw) -> tuple[np.ndarray, Tensor, np.ndarray]:
  """(the packed blocks, as a realized (rows, cols / block_elems, block_bytes) Tensor too, the oracle's float64 (rows, cols) weight)."""
  t = GGML_TYPES[TYPE_IDS[name]]
  blocks_np = random_blocks(name, rows * cols // t.block_elems, seed=seed, **blocks_kw)
  ref = _oracle(blocks_np, name).astype(np.float64).reshape(rows, cols)
  return blocks_np, Tensor(blocks_np).realize().reshape(rows, cols // t.block_elems, t.block_bytes), ref

@pytest.mark.parametrize("name", BLOCK_DOT_TYPES)
def test_block_dot_reads_packed_blocks_in_one_kernel(name):
  # x @ w.T with the block (or run) scale out of the inner sum, for one row (decode) and a chunk of rows (prefill): one kernel reading
  # the stored bytes, numpy's result of the oracle's dequantized weight. Q4_K and Q5_K's mins multiply the sums of x's runs, computed
  # once by a small kernel of their own that reads x only
  assert GGML_TYPES[TYPE_IDS[name]].block_dot is not None
  rows, cols = 16, 512
  blocks_np, blocks, ref = _block_dot_case(name, rows, cols, seed=3)
  for shape in [(1, cols), (2, 5, cols)]:
    x = Tensor(np.random.default_rng(4).standard_normal(shape).astype(np.float32)).realize()
    GlobalCounters.reset()
    out = block_dot(x, blocks, TYPE_IDS[name]).realize()
    kq, decode = name in ("Q4_K", "Q5_K"), len(shape) == 2
    x_sums = x.nbytes() // 32 if kq else 0
    # a k-quant's run scales are looked up in a table of their float values (64 six-bit values; Q6_K's 256 int8 bytes for a few rows
    # of x). For several rows of x Q4_K/Q5_K's looked-up scales, used again for each row and lane, are gathered once into a buffer of
    # their own (a small kernel reading the blocks' scale bytes): the block's scales as floats, written and read. For a few rows their
    # mins are looked up in tables made from x's run sums (a small kernel of its own: 256 floats per byte of each of x's blocks)
    table, runs, scale_bytes = {"Q4_K": (64, 8, 12), "Q5_K": (64, 8, 12), "Q6_K": (256 if decode else 0, 0, 0)}.get(name, (0, 0, 0))
    n_blocks = rows * cols // 256
    scales = n_blocks * runs * 4 if not decode else 0
    min_tables = x.nbytes() // 256 * 8 * 256 if kq and decode else 0
    assert GlobalCounters.kernel_count == 1 + (x_sums > 0) + (scales > 0) + (min_tables > 0), f"{GlobalCounters.kernel_count} kernels"
    assert out.shape == (*shape[:-1], rows)
    _close(out.numpy().reshape(-1, rows), x.numpy().reshape(-1, cols), ref, "bk,nk->bn")
    # the stored bytes once, x once per kernel reading it, x's run sums and the min tables written and read, the scales' table by each
    # kernel that looks scales up; never a float copy of the weight
    assert GlobalCounters.global_mem <= blocks_np.nbytes + x.nbytes() * (1 + (x_sums > 0)) + out.nbytes() + x_sums * 2 + \
      min_tables * 2 + table * 4 * (1 + (scales > 0)) + (scales * 2 + n_blocks * scale_bytes if scales else 0), GlobalCounters.global_mem

def test_q8_0_decode_gemv_compiles_to_wide_vectors_and_one_scale_load():
  # the decode GEMV of a Q8_0 weight is compute-bound on a CPU core unless its inner step is short: the block's float16 scale is one
  # 16-bit load (not two byte loads shifted together: the renderer writes buf[i+1] as pointer arithmetic, which -fwrapv leaves
  # combinable), and its 16 lanes are one 512-bit vector where the CPU has AVX-512 (clang splits them in two by default)
  _, blocks, _ = _block_dot_case("Q8_0", 256, 512, seed=5)
  x = Tensor(np.random.default_rng(6).standard_normal((1, 512)).astype(np.float32)).realize()
  (si,) = [si for si in block_dot(x, blocks, TYPE_IDS["Q8_0"]).schedule()[0] if si.ast.op.name != "COPY"]
  src = get_spec(si, "CPU").src
  assert "TG_WIDE_VECTORS\nvoid " in src and re.search(r"\(data\d+_\d+\+\w+\)\[1\]", src), src
  compiler = ClangCompiler()
  if "clang" not in compiler.argv[0]: return   # gcc neither merges the two byte loads nor reads the attribute (the source is the same)
  with tempfile.NamedTemporaryFile(suffix=".so") as f:
    f.write(compiler.compile(src))
    f.flush()
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f.name], capture_output=True, text=True, check=True).stdout
  # one 16-bit load: a zero-extending move, a word insert, a half-to-float conversion from memory, or AVX512-FP16's vmovsh
  assert re.search(r"(movzwl|vpinsrw\s+\$0x0,|vcvtph2ps|vmovsh)\s+-?(0x[0-9a-f]+)?\(", asm), "the float16 scale is not read with one 16-bit load"
  cpuinfo = pathlib.Path("/proc/cpuinfo")
  assert ("zmm" in asm) == (cpuinfo.exists() and "avx512f" in cpuinfo.read_text().split()), "512-bit vectors exactly where the CPU has them"

@pytest.mark.parametrize("name", ["Q4_K", "Q5_K", "Q6_K"])
@pytest.mark.parametrize("x_shape", [(1,), (3,), (2, 1)])
def test_k_block_dot_matches_dequantized_matmul(name, x_shape):
  # several 256-element blocks per row, each run with its own scale (and min): every run's terms land in the right output
  _, blocks, ref = _block_dot_case(name, 24, 512, seed=TYPE_IDS[name])
  x = np.random.default_rng(5).standard_normal((*x_shape, 512)).astype(np.float32)
  out = block_dot(Tensor(x), blocks, TYPE_IDS[name]).numpy()
  assert out.shape == (*x_shape, 24)
  _close(out.reshape(-1, 24), x.reshape(-1, 512), ref, "bk,nk->bn")

@pytest.mark.parametrize("name", ["Q4_K", "Q5_K", "Q6_K"])
@pytest.mark.parametrize("case", ["max_bits", "negative_scales", "all_zero"])
def test_k_block_dot_edge_blocks(name, case):
  # every code and six-bit scale at its largest with the largest float16 d, negative d and dmin, and all-zero blocks
  _, blocks, ref = _block_dot_case(name, 8, 256, seed=TYPE_IDS[name], **CASES[case])
  x = np.random.default_rng(5).standard_normal((2, 256)).astype(np.float32)
  _close(block_dot(Tensor(x), blocks, TYPE_IDS[name]).numpy(), x, ref, "bk,nk->bn")

@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "Q6_K"])
def test_gather_rows_of_a_big_table(name):
  # a token embedding lookup: the rows' blocks are gathered and only they are dequantized; a table of 16384 k-quant blocks dequantized
  # and then indexed got a float buffer of all its block scales (64 KiB and more written and read at every lookup)
  t = GGML_TYPES[TYPE_IDS[name]]
  rows, cols = 16384, 256
  blocks_np, blocks, ref = _block_dot_case(name, rows, cols, seed=6)
  ids = Tensor([[7, rows - 1, 7]], dtype=dtypes.int32).realize()
  GlobalCounters.reset()
  out = gather_rows(blocks, t, ids).cast(dtypes.float32).realize()
  # traffic of the order of the rows' bytes (a k-quant's gathered into a small buffer first, its scale bytes read again per run), never
  # the table's scales as floats (Q4_K: 200 KB)
  row_bytes = cols // t.block_elems * t.block_bytes
  assert GlobalCounters.global_mem <= 10 * 3 * row_bytes + ids.nbytes() + out.nbytes(), GlobalCounters.global_mem
  np.testing.assert_array_equal(out.numpy()[0], ref[[7, rows - 1, 7]].astype(np.float32))

def test_bad_input():
  with pytest.raises(ValueError, match=r"tensor 'w': GGML type 99 is not supported \(supported: .*Q4_K \(12\).*MXFP4 \(39\)"):
    ggml_type(99, "tensor 'w'")
  with pytest.raises(ValueError, match=r"Q8_0: needs \(blocks, 34\) uint8, got \(2, 33\)"): dequantize(Tensor(np.zeros((2, 33), np.uint8)), 8)
  with pytest.raises(ValueError, match=r"Q8_0: needs \(blocks, 34\) uint8, got \(2, 34\) dtypes\.char"):
    dequantize(Tensor(np.zeros((2, 34), np.int8)), 8)
  with pytest.raises(ValueError, match=r"gather_rows Q4_K: needs \(rows, row/256, 144\) uint8 blocks, got \(4, 144\)"):
    gather_rows(Tensor(np.zeros((4, 144), np.uint8)), GGML_TYPES[12], Tensor([0]))
  with pytest.raises(ValueError, match=r"block_dot Q8_0: needs x \(\.\.\., n\) and \(out, n/32, 34\) uint8 blocks, got x \(1, 48\), "
                                       r"blocks \(4, 2, 34\)"):
    block_dot(Tensor.zeros(1, 48), Tensor(np.zeros((4, 2, 34), np.uint8)), 8)
