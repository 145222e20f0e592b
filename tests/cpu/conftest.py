# Tests here run kernels on the CPU device (a C compiler is needed: those tests are marked `cpu` and skipped without one) and on the
# PYTHON device (always); the device list is tests/helpers/devices.py's DEVICES.
import pytest
from tests.helpers.devices import HAVE_CC

def pytest_collection_modifyitems(config, items):
  skip = pytest.mark.skip(reason="no C compiler found (tried CC, clang, gcc)")
  gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
  if gpu:
    from tinygrad.runtime.ops_cuda import cuda_usable
    if not cuda_usable():
      for item in gpu: item.add_marker(pytest.mark.skip(reason="no usable NVIDIA GPU (cuda-python, driver and GPU needed)"))
  for item in items:
    if item.get_closest_marker("cpu") is not None and not HAVE_CC: item.add_marker(skip)
