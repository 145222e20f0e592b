# The rewrite log (TRACK_MATCH_STATS=2) is JSON lines in a fresh private temp file, and its viewer refuses anything else without running it.
import os
import pickle
import stat
import subprocess
import sys
import pytest
import tinygrad
from tinygrad.viz.cli import main
from tinygrad.viz.log import read_rewrite_log, RewriteLogError

SCRIPT = """\
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes
c = lambda v: UOp(Ops.CONST, dtypes.int, arg=v)
pm = PatternMatcher([(UPat(Ops.NEG, src=(UPat.cvar("k"),)), lambda k: c(-k.arg))])
shared = UOp(Ops.ADD, dtypes.int, (c(7), c(8)))
g = UOp(Ops.SINK, dtypes.void, tuple(UOp(Ops.NEG, dtypes.int, (c(i),)) for i in range(3)) + (shared, UOp(Ops.MUL, dtypes.int, (shared, shared))))
graph_rewrite(g, pm, name="negs")
"""

@pytest.fixture(scope="module")
def saved_log(tmp_path_factory) -> str:
  tmp = tmp_path_factory.mktemp("rewrites")
  (tmp / "script.py").write_text(SCRIPT)
  env = {k: v for k, v in os.environ.items() if k not in ("TRACK_MATCH_STATS", "VIZ", "DEBUG")}
  env.update(TRACK_MATCH_STATS="2", TMPDIR=str(tmp), PYTHONPATH=os.path.dirname(os.path.dirname(tinygrad.__file__)))
  proc = subprocess.run([sys.executable, str(tmp / "script.py")], env=env, capture_output=True, text=True, timeout=120, cwd=tmp)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  logs = [p for p in tmp.iterdir() if p.name != "script.py"]
  assert len(logs) == 1 and str(logs[0]) in proc.stdout, proc.stdout
  return str(logs[0])

def test_log_is_a_private_file_with_an_unpredictable_name(saved_log):
  name = os.path.basename(saved_log)
  assert name.startswith("tinygrad-rewrites-") and name.endswith(".jsonl") and len(name) > len("tinygrad-rewrites-.jsonl") + 4
  assert stat.S_IMODE(os.stat(saved_log).st_mode) == 0o600

def test_viewer_reads_the_log(saved_log, capsys):
  nodes, log = read_rewrite_log(saved_log)
  assert [r.name for r in log] == ["negs"] and len(log[0].matches) == 3
  assert main([saved_log]) == 0
  listing = capsys.readouterr().out
  assert "negs" in listing and "3 matches" in listing and " 11 nodes" in listing   # 3 NEG, 3 CONST, ADD of 2 CONSTs (shared: once), MUL, SINK
  assert main([saved_log, "-r", "0"]) == 0
  assert capsys.readouterr().out.count("Ops.NEG -> Ops.CONST") == 3
  assert main([saved_log, "-r", "0", "-m", "0"]) == 0
  out = capsys.readouterr().out
  assert "--- before" in out and "Ops.NEG dtypes.int" in out and "--- after" in out

class _RunsCode:
  def __init__(self, path:str): self.path = path
  def __reduce__(self): return (os.system, (f"touch {self.path}",))

def test_viewer_refuses_a_pickle(tmp_path, capsys):
  evil, marker = tmp_path / "rewrites.pkl", tmp_path / "pwned"
  evil.write_bytes(pickle.dumps([{"name": _RunsCode(str(marker))}]))
  with pytest.raises(SystemExit) as e: main([str(evil)])
  assert e.value.code == 2 and "is not a tinygrad rewrite log" in capsys.readouterr().err
  assert not marker.exists()

@pytest.mark.parametrize("body", [
  b'{"node": [1, "Ops.CONST", "dtypes.int", [], "1", null]}\n',       # ids must count up from 0
  b'{"node": [0, "Ops.CONST", "dtypes.int", [0], "1", null]}\n',      # a source must come before its user
  b'{"rewrite": {"name": "x"}}\n',                                      # missing fields
  b'{"node": [0, "Ops.CONST", "dtypes.int", [], "1", null]}\n{"rewrite": {"name": "x", "location": ["f", 1], "bottom_up": false, '
  b'"walk": false, "depth": 0, "sink": 5, "result": null, "matches": []}}\n',   # a reference to a node that doesn't exist
  b'{"eval": "__import__(\'os\')"}\n',
  b"\x80\x04\x95garbage\n",
])
def test_viewer_refuses_a_malformed_log(tmp_path, body):
  bad = tmp_path / "bad.jsonl"
  bad.write_bytes(b'{"format": "tinygrad-rewrite-log", "version": 1}\n' + body)
  with pytest.raises(RewriteLogError, match=r"bad.jsonl:\d+: not a valid rewrite log entry"): read_rewrite_log(str(bad))

def test_viewer_refuses_another_version(tmp_path):
  (bad := tmp_path / "v3.jsonl").write_text('{"format": "tinygrad-rewrite-log", "version": 3}\n')
  with pytest.raises(RewriteLogError, match="version 3 is not supported"): read_rewrite_log(str(bad))
