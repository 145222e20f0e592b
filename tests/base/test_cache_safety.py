# The sqlite disk cache holds plain data only: a row that would run code if it were unpickled is never executed, and a row that does
# not check out against its key (edited, truncated, copied from another key, wrong type) is ignored, so the caller recomputes it.
import hashlib
import json
import os
import pathlib
import pickle
import sqlite3
import pytest
import tinygrad.helpers as helpers
from tinygrad.helpers import diskcache_get, diskcache_put, VERSION

@pytest.fixture
def cachedb(tmp_path, monkeypatch):
  monkeypatch.setattr(helpers, "CACHEDB", str(tmp_path / "cache.db"))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  yield tmp_path / "cache.db"
  if helpers._db_connection is not None: helpers._db_connection.close()

class _RunsCode:
  """Unpickling this creates the file at `path` (what a hostile cache row would do with os.system)."""
  def __init__(self, path:str): self.path = path
  def __reduce__(self): return (os.system, (f"touch {self.path}",))

def _sql(db, stmt:str, *args):
  con = sqlite3.connect(db)
  con.execute(stmt, args)
  con.commit()
  con.close()

def _good_checksum(table:str, key:dict, kind:str, blob:bytes) -> str:
  # the row checksum, computed the way the cache does, for rows that pass the check but hold a malformed value
  head = json.dumps([table, VERSION, kind, helpers._to_plain(sorted(key.items()))]).encode()
  return hashlib.sha256(len(head).to_bytes(8, "little") + head + blob).hexdigest()

def test_loading_never_unpickles(cachedb, monkeypatch):
  diskcache_put("t", "k", {"a": [1, (2, b"x")]})
  def refuse(*args, **kwargs): raise AssertionError("the disk cache unpickled something")
  monkeypatch.setattr(pickle, "loads", refuse)
  monkeypatch.setattr(pickle, "load", refuse)
  monkeypatch.setattr(pickle, "Unpickler", refuse)
  assert diskcache_get("t", "k") == {"a": [1, (2, b"x")]}

@pytest.mark.parametrize("kind", ["pickle", "json", "bytes"])
def test_poisoned_row_is_not_executed(cachedb, tmp_path, kind):
  marker = tmp_path / f"pwned_{kind}"
  diskcache_put("t", "k", b"good")
  # the attacker rewrites the value with a pickle that runs a command when loaded
  _sql(cachedb, f"UPDATE 't_{VERSION}' SET kind=?, val=? WHERE key='k'", kind, pickle.dumps(_RunsCode(str(marker))))
  assert diskcache_get("t", "k") is None
  assert not marker.exists()
  # the caller recomputes and the row is good again
  diskcache_put("t", "k", b"good")
  assert diskcache_get("t", "k") == b"good"

def test_row_copied_from_another_key_is_ignored(cachedb):
  diskcache_put("t", "a", b"value of a")
  diskcache_put("t", "b", b"value of b")
  _sql(cachedb, f"UPDATE 't_{VERSION}' SET (chk, kind, val) = (SELECT chk, kind, val FROM 't_{VERSION}' WHERE key='a') WHERE key='b'")
  assert diskcache_get("t", "a") == b"value of a" and diskcache_get("t", "b") is None

@pytest.mark.parametrize("chk,kind,val", [(None, "bytes", b"x"), ("0"*64, None, b"x"), ("0"*64, "bytes", None), ("0"*64, "json", "text"),
                                          ("0"*64, "bytes", 42), ("0"*64, "bytes", b"truncated")])
def test_malformed_row_is_ignored(cachedb, chk, kind, val):
  diskcache_put("t", "k", b"truncated and then some")
  _sql(cachedb, f"UPDATE 't_{VERSION}' SET chk=?, kind=?, val=? WHERE key='k'", chk, kind, val)
  assert diskcache_get("t", "k") is None

@pytest.mark.parametrize("blob", [b"[[[[" * 100_000, b'["x", []]', b'["d", [[1]]]', b'["b", "zz"]', b'["d", [[["l", []], 1]]]', b"\xff\xfe"])
def test_malformed_value_with_a_valid_checksum_is_ignored(cachedb, blob):
  # a row whose checksum matches but whose JSON is not something diskcache_put writes (deep nesting, unknown tag, unhashable key...)
  diskcache_put("t", "k", [1])
  _sql(cachedb, f"UPDATE 't_{VERSION}' SET chk=?, kind='json', val=? WHERE key='k'", _good_checksum("t", {"key": "k"}, "json", blob), blob)
  assert diskcache_get("t", "k") is None

def test_old_pickle_tables_are_never_read(cachedb, tmp_path):
  marker = tmp_path / "pwned_old"
  _sql(cachedb, f"CREATE TABLE 't_{VERSION - 1}' (key text, val blob, PRIMARY KEY (key))")
  _sql(cachedb, f"INSERT INTO 't_{VERSION - 1}' VALUES ('k', ?)", pickle.dumps(_RunsCode(str(marker))))
  assert diskcache_get("t", "k") is None and not marker.exists()

def test_cache_works_from_several_threads(cachedb):
  import threading
  errors = []
  def work(n:int):
    try:
      for i in range(20):
        diskcache_put("thr", {"n": n, "i": i}, [n, i])
        assert diskcache_get("thr", {"n": n, "i": i}) == [n, i]
    except Exception as e: errors.append(e)
  threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert not errors, errors

# ***** the trust boundary: a cache file others can write is not used *****

def _refused(capsys, monkeypatch) -> str:
  monkeypatch.setattr(helpers, "_db_refused", {})
  assert diskcache_put("t", "k", b"lib") == b"lib"
  assert diskcache_get("t", "k") is None and diskcache_get("t", "k") is None
  err = capsys.readouterr().err
  assert err.count("not using the compile cache") == 1, err   # said once
  return err

@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
@pytest.mark.parametrize("who,mode", [("group", 0o770), ("others", 0o707), ("group and others", 0o777)])
def test_cache_in_a_directory_others_can_write_is_not_used(cachedb, capsys, monkeypatch, who, mode):
  os.chmod(cachedb.parent, mode)
  try: err = _refused(capsys, monkeypatch)
  finally: os.chmod(cachedb.parent, 0o700)
  assert f"{cachedb.parent} is writable by {who} (mode {mode:o})" in err and str(cachedb) in err and "CACHEDB" in err
  assert not cachedb.exists()   # nothing created there either

@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_cache_file_others_can_write_is_not_used(cachedb, capsys, monkeypatch, suffix):
  diskcache_put("t", "old", b"x")
  helpers._db_connection.close()
  monkeypatch.setattr(helpers, "_db_connection", None)
  path = pathlib.Path(str(cachedb) + suffix)
  path.touch()
  os.chmod(path, 0o664)
  assert f"{path} is writable by group (mode 664)" in _refused(capsys, monkeypatch)

@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_cache_owned_by_another_user_is_not_used(cachedb, capsys, monkeypatch):
  uid = os.getuid()
  monkeypatch.setattr(os, "getuid", lambda: uid + 1)   # as if another user ran this process
  assert f"is owned by uid {uid}, not by this user (uid {uid + 1})" in _refused(capsys, monkeypatch)

@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_new_cache_is_private_whatever_the_umask(tmp_path, monkeypatch):
  db = tmp_path / "new" / "cache.db"
  monkeypatch.setattr(helpers, "CACHEDB", str(db))
  monkeypatch.setattr(helpers, "_db_connection", None)
  monkeypatch.setattr(helpers, "_db_tables", set())
  old = os.umask(0)
  try: diskcache_put("t", "k", b"v")
  finally: os.umask(old)
  try:
    assert diskcache_get("t", "k") == b"v"
    assert db.parent.stat().st_mode & 0o777 == 0o700 and db.stat().st_mode & 0o777 == 0o600
    assert helpers.untrusted_cache_reason(str(db)) is None
  finally: helpers._db_connection.close()
