# The opt-in torch group: every test compares ours with torch (forward and input gradients). CI has no torch, so the whole
# directory skips when it is missing; it is deselected by default (pyproject's addopts) and runs with `pytest -m torch`.
import pytest

def pytest_collection_modifyitems(config, items):
  for item in items:
    if "tests/torch/" in str(item.fspath).replace("\\", "/"): item.add_marker(pytest.mark.torch)
