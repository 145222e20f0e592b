# Tests here run kernels on the CPU device (a C compiler is needed: those tests are marked `cpu` and skipped without one) and on the
# PYTHON device (always). Compiled kernels go to a per-session cache database, never the user's.
import os
import pytest
import tinygrad.helpers as helpers

def _have_cc() -> bool:
  from tinygrad.device import CompilerNotFoundError
  from tinygrad.runtime.support.compiler_cpu import find_c_compiler
  try: find_c_compiler()
  except CompilerNotFoundError: return False
  return True
HAVE_CC = _have_cc()

def pytest_collection_modifyitems(config, items):
  skip = pytest.mark.skip(reason="no C compiler found (tried CC, clang, gcc)")
  gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
  if gpu:
    from tinygrad.runtime.ops_cuda import cuda_usable
    if not cuda_usable():
      for item in gpu: item.add_marker(pytest.mark.skip(reason="no usable NVIDIA GPU (cuda-python, driver and GPU needed)"))
  for item in items:
    if item.get_closest_marker("cpu") is not None and not HAVE_CC: item.add_marker(skip)

@pytest.fixture(autouse=True, scope="session")
def _session_cachedb(tmp_path_factory):
  mp = pytest.MonkeyPatch()
  mp.setattr(helpers, "CACHEDB", str(tmp_path_factory.mktemp("cache") / "cache.db"))
  mp.setattr(helpers, "_db_connection", None)
  mp.setattr(helpers, "_db_tables", set())
  yield
  if helpers._db_connection is not None: helpers._db_connection.close()
  mp.undo()

# run a test on both devices; the CPU one needs a compiler. TEST_CUDA=1 adds the CUDA device (a lent GPU: benches/gpu_session.sh
# runs these tests' CUDA cases with `-k CUDA`); it is never set in CI
DEVICES = [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"]
if os.environ.get("TEST_CUDA"): DEVICES.append(pytest.param("CUDA", marks=pytest.mark.gpu))
