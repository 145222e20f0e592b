"""Explicit fused multiply-add (codegen pm_fuse_mulacc, Renderer.fused_mulacc): the CPU's kernels compute float32/float64 a*b+c with
fmaf/fma (one rounding, vfmadd where the CPU has FMA) while -ffp-contract=off keeps the C compiler from fusing anything else, and the
PYTHON device computes the same bits; half/bfloat16 (computed in float, rounded after every op) are not fused."""
import platform
import subprocess
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.codegen import lower_ast
from tinygrad.uop.ops import Ops
from tinygrad.dtype import fma32
from tinygrad.runtime.support.compiler_cpu import ClangCompiler, find_c_compiler
from tests.helpers.kernels import ast_of, rand

pytestmark = pytest.mark.cpu

def source(t:Tensor, device:str="CPU") -> str:
  ast, _ = ast_of(t)
  return Device[device].renderer.to_program(lower_ast(ast, device).program_input).src

def both(fn) -> tuple[np.ndarray, np.ndarray]:
  return fn("CPU"), fn("PYTHON")

def test_scalar_tiles_unfused():
  # the register tile of a @ b (scalar accumulators that clang packs into vectors) stays a separate multiply and add: faster here
  a, b = Tensor(rand(32, 48)).realize(), Tensor(rand(48, 40, seed=1)).realize()
  items, _ = (a @ b).schedule()
  assert not any(u.op is Ops.MULACC for u in lower_ast(items[0].ast, "CPU").uops)

def test_dot_tile_vector_fma():
  # x @ w.T: the dot tile's float4 accumulators, updated by a vector fused multiply-add
  x, w = Tensor(rand(32, 64)).realize(), Tensor(rand(48, 64, seed=1)).realize()
  src = source(x @ w.T)   # pinned C text: the renderer's spelling of a vector fma (a helper over the x86 intrinsic) is the subject
  assert "static inline float4 tg_fma_float4(" in src and "= tg_fma_float4(" in src and "__builtin_ia32_vfmaddps(a, b, c)" in src

def test_double_and_half():
  a, b = Tensor(rand(16, 32)).cast(dtypes.float64).realize(), Tensor(rand(24, 32, seed=1)).cast(dtypes.float64).realize()
  assert "__builtin_fma(" in source(a @ b.T)   # its lanes: the float64 dot tile keeps scalar accumulators
  h, g = Tensor(rand(16, 32)).cast(dtypes.half).realize(), Tensor(rand(24, 32, seed=1)).cast(dtypes.half).realize()
  assert "fma" not in source(h @ g.T)

@pytest.mark.parametrize("shape_a, shape_b, trans", [((33, 47), (47, 29), False), ((32, 64), (48, 64), True), ((8, 300), (300, 24), False)])
def test_matmul_cpu_python_bit_exact(shape_a, shape_b, trans):
  a, b = rand(*shape_a), rand(*shape_b, seed=1)
  def run(dev):
    w = Tensor(b, device=dev)
    return (Tensor(a, device=dev) @ (w.T if trans else w)).numpy()
  cpu, py = both(run)
  np.testing.assert_array_equal(cpu, py)
  np.testing.assert_allclose(cpu, a @ (b.T if trans else b), rtol=1e-5, atol=1e-5)

def test_conv_cpu_python_bit_exact():
  x, w = rand(2, 8, 10, 10), rand(8, 8, 3, 3, seed=1)
  cpu, py = both(lambda dev: Tensor(x, device=dev).conv2d(Tensor(w, device=dev), padding=1).numpy())
  np.testing.assert_array_equal(cpu, py)

def test_float64_cpu_python_bit_exact():
  a, b = rand(12, 20).astype(np.float64), rand(20, 9, seed=1).astype(np.float64)
  cpu, py = both(lambda dev: (Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy())
  np.testing.assert_array_equal(cpu, py)

def halfway(n:int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """n float32 triples whose a*b+c is a hair off a float32 halfway point: rounding the float64 sum again would go the wrong way."""
  rng = np.random.default_rng(0)
  i = rng.integers(1, 181, n)
  mant, scale = rng.integers(0, 2 ** 23, n) | 1, rng.integers(-20, 20, n)
  c = (1 + mant * 2.0 ** -23) * 2.0 ** scale
  a, b = (1 + i * 2.0 ** -23) * rng.choice([-1, 1], n), (1 - i * 2.0 ** -23) * 2.0 ** (scale - 24)
  return a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)

def test_dot_tile_fused_exactly():
  # x @ w.T with K = 64: the dot tile's lane 0 accumulates x[0]*w[0] = c (exact), then c + x[4]*w[4] = c + a*b fused; the other lanes
  # and the later steps add 0, so the diagonal is fma(a, b, c), on the halfway triples where rounding twice differs
  a, b, c = halfway(64)
  want = np.array([fma32(float(p), float(q), float(r)) for p, q, r in zip(a, b, c)], np.float32)
  assert (want != a * b + c).sum() > 20
  X, W = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
  X[:, 0], X[:, 4], W[:, 0], W[:, 4] = c, a, 1, b
  assert "= tg_fma_float4(" in source(Tensor(X).realize() @ Tensor(W).realize().T)
  cpu, py = both(lambda dev: (Tensor(X, device=dev) @ Tensor(W, device=dev).T).numpy())
  np.testing.assert_array_equal(cpu, py)
  np.testing.assert_array_equal(np.diag(cpu), want)

def test_elementwise_unfused():
  a, b, c = halfway(256)
  cpu, py = both(lambda dev: (Tensor(a, device=dev) * Tensor(b, device=dev) + Tensor(c, device=dev)).numpy())
  np.testing.assert_array_equal(cpu, a * b + c)   # as numpy: two roundings
  np.testing.assert_array_equal(py, a * b + c)

@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or "fma" not in open("/proc/cpuinfo").read().split(),
                    reason="an x86-64 CPU with FMA")
def test_asm_has_vfmadd():
  x, w = Tensor(rand(32, 64)).realize(), Tensor(rand(48, 64, seed=1)).realize()
  src = source(x @ w.T)
  asm = subprocess.run(find_c_compiler() + [f for f in ClangCompiler.flags if f != "-fPIC"] + ["-S", "-x", "c", "-", "-o", "-"],
                       input=src.encode(), capture_output=True, check=True).stdout.decode()
  assert "vfmadd" in asm and "call" not in asm   # one instruction per vector multiply-add, no libm call
