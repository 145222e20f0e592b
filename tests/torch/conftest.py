# The opt-in torch group: every test compares ours with torch (forward and input gradients). CI has no torch, so the whole
# directory skips when it is missing; it is deselected by default (pyproject's addopts) and runs with `pytest -m torch`.
import pytest

def pytest_collection_modifyitems(config, items):
  for item in items:
    if "tests/torch/" in str(item.fspath).replace("\\", "/"): item.add_marker(pytest.mark.torch)

@pytest.fixture(autouse=True, scope="session")
def _session_cachedb(tmp_path_factory):
  # compiled kernels go to a per-session cache database, never the user's (as tests/cpu)
  import tinygrad.helpers as helpers
  mp = pytest.MonkeyPatch()
  mp.setattr(helpers, "CACHEDB", str(tmp_path_factory.mktemp("cache") / "cache.db"))
  mp.setattr(helpers, "_db_connection", None)
  mp.setattr(helpers, "_db_tables", set())
  yield
  if helpers._db_connection is not None: helpers._db_connection.close()
  mp.undo()
