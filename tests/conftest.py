# The one conftest. Tests are grouped by pipeline stage (tests/<stage>/ as python/tinygrad/<stage>/); what a test needs beyond Python is
# a marker, set by its module (`pytestmark`) or its parameter (tests/helpers/devices.py's DEVICES), and acted on here:
#   cpu    a C compiler: skipped without one
#   gpu    an NVIDIA GPU: skipped without a usable one (cuda-python, driver and GPU)
#   torch  compares with torch: deselected unless `-m torch` (pyproject's addopts); its modules skip without torch installed
#   mpi    runs `mpirun -n 2`: skipped without mpirun on PATH or mpi4py installed
# Compiled kernels go to a per-session cache database, never the user's.
import importlib.util
import shutil
import pytest
import tinygrad.helpers as helpers
from tests.helpers.devices import HAVE_CC

def pytest_collection_modifyitems(config, items):
  no_cc = pytest.mark.skip(reason="no C compiler found (tried CC, clang, gcc)")
  gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
  if gpu:
    from tinygrad.runtime.ops_cuda import cuda_usable
    if not cuda_usable():
      for item in gpu: item.add_marker(pytest.mark.skip(reason="no usable NVIDIA GPU (cuda-python, driver and GPU needed)"))
  if not (shutil.which("mpirun") and importlib.util.find_spec("mpi4py")):
    no_mpi = pytest.mark.skip(reason="no MPI: needs mpirun (apt-get install openmpi-bin) and mpi4py (pip install mpi4py)")
    for item in items:
      if item.get_closest_marker("mpi") is not None: item.add_marker(no_mpi)
  if not HAVE_CC:
    for item in items:
      if item.get_closest_marker("cpu") is not None: item.add_marker(no_cc)

@pytest.fixture(autouse=True, scope="session")
def _session_cachedb(tmp_path_factory):
  mp = pytest.MonkeyPatch()
  mp.setattr(helpers, "CACHEDB", str(tmp_path_factory.mktemp("cache") / "cache.db"))
  mp.setattr(helpers, "_db_connection", None)
  mp.setattr(helpers, "_db_tables", set())
  yield
  if helpers._db_connection is not None: helpers._db_connection.close()
  mp.undo()
