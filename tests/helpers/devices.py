# The devices numerics tests run on: CPU needs a C compiler (tests marked `cpu` skip without one, tests/conftest.py), PYTHON
# always runs. TEST_CUDA=1 adds the CUDA device, marked `gpu` (a lent GPU: benches/gpu_session.sh runs these cases with `-m gpu`);
# it is never set in CI.
import os
import pytest

def _have_cc() -> bool:
  from tinygrad.device import CompilerNotFoundError
  from tinygrad.runtime.support.compiler_cpu import find_c_compiler
  try: find_c_compiler()
  except CompilerNotFoundError: return False
  return True
HAVE_CC = _have_cc()

DEVICES = [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"]
if os.environ.get("TEST_CUDA"): DEVICES.append(pytest.param("CUDA", marks=pytest.mark.gpu))
