# The exact C the renderer writes for small kernels: readable names (ridx, val, alu, acc), the kernel name, const inputs, and clang's
# unrolling turned off for the loop around a long loop (it would only copy the inner loop). The C text is the behaviour under test here
# (the kernels are hand-built with the names given); tests elsewhere check what kernels do, not how they are spelled.
from tests.helpers.linear_kernels import add_kernel, sum_kernel, var_kernel
from tinygrad.renderer.cstyle import ClangRenderer

def test_golden_elementwise():
  assert ClangRenderer().render(add_kernel(100)) == """\
void E_100(float* restrict data0_100, const float* restrict data1_100, const float* restrict data2_100) {
  for (int ridx0 = 0; ridx0 < 100; ridx0++) {
    float val0 = data1_100[ridx0];
    float val1 = data2_100[ridx0];
    data0_100[ridx0] = val0+val1;
  }
}
"""

def test_golden_reduce():
  assert ClangRenderer().render(sum_kernel(4, 25)) == """\
void r_4_25(float* restrict data0_4, const float* restrict data1_100) {
  float acc0[1];
  #pragma clang loop unroll(disable)
  for (int ridx0 = 0; ridx0 < 4; ridx0++) {
    acc0[0] = 0.0f;
    for (int ridx1 = 0; ridx1 < 25; ridx1++) {
      float val0 = data1_100[(ridx0*25)+ridx1];
      acc0[0] = acc0[0]+val0;
    }
    data0_4[ridx0] = acc0[0];
  }
}
"""

def test_golden_variables():
  assert ClangRenderer().render(var_kernel(), name="E_n_2") == """\
void E_n_2(float* restrict data0_10, const float* restrict data1_10, const int m, const int n) {
  for (int ridx0 = 0; ridx0 < n; ridx0++) {
    float val0 = data1_10[ridx0];
    data0_10[ridx0] = (val0*2.0f)+((float)m);
  }
}
"""

def test_nested_max_names_its_operands():
  # MAX renders as `(a<b||b!=b)?b:a`: inlining its operands would write them more than once, and a chain of n MAX ops would grow as 2**n
  from tests.helpers.linear_kernels import Linear
  from tinygrad.dtype import dtypes
  from tinygrad.renderer.cstyle import ClangRenderer
  k = Linear()
  src, out = k.param(1, dtypes.float, 16), k.param(0, dtypes.float, 1)
  m = k.load(src, 0)
  for i in range(1, 13): m = k.add(m.maximum(k.load(src, i)))
  code = ClangRenderer().render(k.sink("max_chain", k.store(out, 0, m)))
  assert len(code) < 2000, code
  assert all(code.count(f"data1_16[{i}]") == 1 for i in range(13)), code

def test_rendered_kernels_compile_without_warnings():
  # clang warns about `a|b?x:y` (MAX's NaN test), once per MAX: dozens of warnings per kernel cost compile time, so none may be left
  import subprocess
  import pytest
  from tests.helpers.linear_kernels import Linear
  from tinygrad.dtype import dtypes
  from tinygrad.runtime.support.compiler_cpu import ClangCompiler, find_c_compiler
  try: cc = find_c_compiler()
  except Exception: pytest.skip("no C compiler")
  k = Linear()
  src, out = k.param(1, dtypes.float, 16), k.param(0, dtypes.float, 1)
  m = k.load(src, 0)
  for i in range(1, 4): m = k.add(m.maximum(k.load(src, i)))
  code = ClangRenderer().render(k.sink("max_chain", k.store(out, 0, m)))
  proc = subprocess.run(cc + ["-c", "-Werror"] + ClangCompiler.flags + ["-x", "c", "-", "-o", "/dev/null"], input=code.encode(), capture_output=True)
  assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode() + code
