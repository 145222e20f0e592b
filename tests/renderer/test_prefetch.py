# A CPU kernel's loop that streams through a big buffer prefetches it ahead (ClangRenderer; schedule/knobs.py PREFETCH_*): which loads
# of real kernels get a prefetch, read off the C the renderer writes, and the stride analysis on hand-built index expressions.
import re
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.codegen import render_kernel
from tinygrad.renderer.cstyle import ClangRenderer, _step
from tinygrad.schedule.knobs import PREFETCH_BYTES
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, AxisType
from tests.helpers.kernels import ast_of, rand

def c_source(t:Tensor) -> str: return render_kernel(ast_of(t)[0], ClangRenderer())[1].src
def prefetches(src:str) -> list[str]: return re.findall(r"__builtin_prefetch\(\(const char\*\)\((\w+)\+.*\)\+(\d+)\);", src)
def buf_name(src:str, n:int) -> str: return re.search(rf"\b(data\d+_{n})\b", src).group(1)

def test_gemv_prefetches_the_big_weight_once_per_loop():
  # x @ w.T with w 4096 x 1024 float32 (16 MiB): the weight streams, x (4 KiB) stays in cache
  x, w = Tensor(rand(1, 1024)), Tensor(rand(4096, 1024, seed=1))
  src = c_source(x @ w.T)
  assert prefetches(src) == [(buf_name(src, 4096 * 1024), str(PREFETCH_BYTES))]

def test_quantized_gemv_prefetches_its_blocks():
  # a Q8_0 weight's bytes (34 per block of 32): the loop walks them a block per step
  from tinygrad.llm.quants import block_dot
  blocks = Tensor(np.random.default_rng(0).integers(0, 256, (2048, 32, 34), dtype=np.uint8))
  src = c_source(block_dot(Tensor(rand(1, 1024)), blocks, 8))
  assert [b for b, _ in prefetches(src)] == [buf_name(src, 2048 * 32 * 34)]

def test_small_buffers_get_no_prefetch():
  assert prefetches(c_source(Tensor(rand(1, 64)) @ Tensor(rand(64, 64, seed=1)).T)) == []

def test_long_strides_get_no_prefetch():
  # the sum over rows reads a 4 KiB row further each step: prefetching 2 KiB ahead would fetch lines the loop never reads
  src = c_source(Tensor(rand(4096, 1024)).sum(axis=0))
  assert prefetches(src) == []

@pytest.mark.cpu
def test_prefetched_gemv_matches_numpy():
  x, w = rand(3, 1024), rand(4096, 1024, seed=1)
  np.testing.assert_allclose((Tensor(x) @ Tensor(w).T).numpy(), x @ w.T, rtol=1e-4, atol=1e-4)

# ***** the stride of an index in a loop *****

R = UOp(Ops.RANGE, dtypes.int, (UOp.const(64, dtypes.int),), (0, AxisType.LOOP))
R2 = UOp(Ops.RANGE, dtypes.int, (UOp.const(8, dtypes.int),), (1, AxisType.LOOP))
def c(v): return UOp.const(v, dtypes.int)
def alu(op, a, b): return UOp(op, dtypes.int, (a, b))

@pytest.mark.parametrize("idx, step", [
  (R, 1), (alu(Ops.MUL, R, c(34)), 34), (alu(Ops.ADD, alu(Ops.MUL, R2, c(2176)), alu(Ops.ADD, alu(Ops.MUL, R, c(34)), c(2))), 34),
  (alu(Ops.SHL, R, c(4)), 16), (alu(Ops.MUL, R2, c(100)), 0), (UOp(Ops.CAST, dtypes.int64, (alu(Ops.MUL, R, c(3)),)), 3),
  (alu(Ops.ADD, R, R), 2), (alu(Ops.CDIV, R, c(2)), None), (alu(Ops.MUL, R, R2), None)])
def test_step(idx, step):
  assert _step(idx, R) == step
