# Fixtures every test folder shares: compiled kernels go to a per-session cache database, never the user's.
import pytest
import tinygrad.helpers as helpers

@pytest.fixture(autouse=True, scope="session")
def _session_cachedb(tmp_path_factory):
  mp = pytest.MonkeyPatch()
  mp.setattr(helpers, "CACHEDB", str(tmp_path_factory.mktemp("cache") / "cache.db"))
  mp.setattr(helpers, "_db_connection", None)
  mp.setattr(helpers, "_db_tables", set())
  yield
  if helpers._db_connection is not None: helpers._db_connection.close()
  mp.undo()
