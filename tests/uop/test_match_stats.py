# Conformance tests for TRACK_MATCH_STATS (read from the environment at import), run in subprocesses.
# The reference prints the table only when PRINT_MATCH_STATS=1 is set too, so the shared tests set it; ours prints it without.
import importlib.util
import os
import re
import subprocess
import sys
import time
import pytest
import tinygrad

IS_OURS = importlib.util.find_spec("tinygrad._core") is not None
ours_only = pytest.mark.skipif(not IS_OURS, reason="intentional difference from reference tinygrad")

SCRIPT = """\
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite
from tinygrad.uop import Ops
from tinygrad.dtype import dtypes
def c(v): return UOp(Ops.CONST, dtypes.int, arg=v)
def neg(a): return UOp(Ops.NEG, dtypes.int, (a,))
def fold_even(k): return c(-k.arg) if k.arg % 2 == 0 else None
def never(x): return None
def inc_small(k): return c(k.arg + 1) if k.arg < 3 else None
pm = PatternMatcher([
  (UPat(Ops.NEG, src=(UPat.cvar("k"),)), fold_even),  # RULE_FOLD
  (UPat(Ops.NEG, name="x"), never),  # RULE_NEVER
  (UPat(Ops.MUL, name="x"), never),  # RULE_UNUSED
])
pm2 = PatternMatcher([(UPat(Ops.CONST, name="k"), inc_small)])  # RULE_INC
g = UOp(Ops.SINK, dtypes.void, tuple(neg(c(i)) for i in range(1, 11)))
out = graph_rewrite(g, pm)
expected = UOp(Ops.SINK, dtypes.void, tuple(c(-i) if i % 2 == 0 else neg(c(i)) for i in range(1, 11)))
print("MARK_DONE", out is expected, flush=True)
print("MARK_INC", graph_rewrite(UOp(Ops.SINK, dtypes.void, (c(0),)), pm2) is UOp(Ops.SINK, dtypes.void, (c(3),)), flush=True)
"""
RULE_LINES = {tag: i + 1 for i, line in enumerate(SCRIPT.splitlines()) for tag in ("RULE_FOLD", "RULE_NEVER", "RULE_UNUSED", "RULE_INC")
              if f"# {tag}" in line}
# the reference sorts the table by ascending total time: the slowest rule is printed last, just above TOTAL
SLOWEST_LAST = not IS_OURS  # the issue asks for the slowest rule first; the reference prints it last
STAT_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s+--\s+([\d.]+)\s*/\s*([\d.]+)\s*ms\s+--\s+(\S+):(\d+)\s+(.*)$")
TOTAL_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s+--\s+([\d.]+)\s*/\s*([\d.]+)\s*ms\s+--\s+TOTAL\s*$")
RULES_RE = re.compile(r"^\s*(\d+) rules, (\d+) matched once\s*$")

def run_script(tmp_path, **env_vars) -> tuple[str, float]:
  script = tmp_path / "stats_script.py"
  script.write_text(SCRIPT)
  env = {k: v for k, v in os.environ.items() if k not in ("TRACK_MATCH_STATS", "PRINT_MATCH_STATS", "VIZ", "DEBUG", "PROFILE")}
  pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tinygrad.__file__)))
  env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
  env["TMPDIR"] = str(tmp_path)
  env.update({k: str(v) for k, v in env_vars.items()})
  start = time.time()
  proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0, out
  assert "MARK_DONE True" in out and "MARK_INC True" in out, out
  return out, start

def stat_lines(out:str) -> dict[str, tuple]:
  """rule lines of our script, keyed by the RULE_ tag"""
  ret = {}
  for line in out.splitlines():
    if (m := STAT_RE.match(line)) and m.group(5).endswith("stats_script.py"):
      tag = next(t for t, ln in RULE_LINES.items() if ln == int(m.group(6)))
      assert tag not in ret, f"rule printed twice: {line}"
      assert f"# {tag}" in m.group(7), f"rule source line missing: {line}"
      ret[tag] = (int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4)))
  return ret

def check_table(out:str):
  stats = stat_lines(out)
  # RULE_FOLD is attempted on the ten NEG nodes and matches the five even ones; RULE_NEVER is tried on the five odd ones
  assert stats["RULE_FOLD"][:2] == (5, 10), out
  assert stats["RULE_NEVER"][:2] == (0, 5), out
  # RULE_INC: c(0)->c(1)->c(2)->c(3), then c(3) doesn't match
  assert stats["RULE_INC"][:2] == (3, 4), out
  for m, a, mt, tt in stats.values(): assert m <= a and mt <= tt
  lines = out.splitlines()
  # the table is sorted by total time
  totals = [float(m.group(4)) for line in lines if (m := STAT_RE.match(line))]
  assert totals == sorted(totals, reverse=not SLOWEST_LAST), out
  total = [TOTAL_RE.match(line) for line in lines if TOTAL_RE.match(line)]
  assert len(total) == 1, out
  assert int(total[0].group(1)) >= 8 and int(total[0].group(2)) >= 19
  rules = [RULES_RE.match(line) for line in lines if RULES_RE.match(line)]
  assert len(rules) == 1, out
  n, matched = int(rules[0].group(1)), int(rules[0].group(2))
  assert n >= 3 and 2 <= matched <= n
  # order: the table comes after the program's own output, TOTAL after the rule lines, then the rules count
  idx_done = next(i for i, line in enumerate(lines) if "MARK_INC" in line)
  idx_rules = [i for i, line in enumerate(lines) if (m := STAT_RE.match(line)) and m.group(5).endswith("stats_script.py")]
  idx_total = next(i for i, line in enumerate(lines) if TOTAL_RE.match(line))
  idx_count = next(i for i, line in enumerate(lines) if RULES_RE.match(line))
  assert idx_done < min(idx_rules) and max(idx_rules) < idx_total < idx_count

def rule_ident_lines(lines:list[str], tag:str) -> list[str]:
  return [line for line in lines if f"# {tag}" in line or f"stats_script.py:{RULE_LINES[tag]}" in line]

class TestMatchStats:
  def test_off_prints_nothing(self, tmp_path):
    out, _ = run_script(tmp_path)
    assert "TOTAL" not in out and "matched once" not in out
    assert not stat_lines(out)
    assert out.strip().splitlines() == ["MARK_DONE True", "MARK_INC True"]

  def test_level1_table(self, tmp_path):
    out, _ = run_script(tmp_path, TRACK_MATCH_STATS=1, PRINT_MATCH_STATS=1)
    check_table(out)
    lines = out.splitlines()
    idx_done = next(i for i, line in enumerate(lines) if "MARK_DONE" in line)
    # level 1 doesn't print matches as they happen
    assert not rule_ident_lines(lines[:idx_done], "RULE_FOLD")

  @ours_only
  def test_level1_table_without_print_match_stats(self, tmp_path):
    out, _ = run_script(tmp_path, TRACK_MATCH_STATS=1)
    check_table(out)

  def test_level2_saves_file(self, tmp_path):
    out, start = run_script(tmp_path, TRACK_MATCH_STATS=2, PRINT_MATCH_STATS=1)
    check_table(out)
    paths = [tok.rstrip(".,;:'\"") for tok in out.split()]
    saved = [p for p in paths if os.path.isabs(p) and os.path.isfile(p) and os.path.getmtime(p) >= start - 1 and not p.endswith("stats_script.py")]
    assert saved, f"no saved rewrite file path printed:\n{out}"
    assert all(os.path.getsize(p) > 0 for p in saved)

  def test_level3_prints_each_match(self, tmp_path):
    out, _ = run_script(tmp_path, TRACK_MATCH_STATS=3, PRINT_MATCH_STATS=1)
    check_table(out)
    lines = out.splitlines()
    idx_done = next(i for i, line in enumerate(lines) if "MARK_DONE" in line)
    idx_inc = next(i for i, line in enumerate(lines) if "MARK_INC" in line)
    fold = rule_ident_lines(lines[:idx_done], "RULE_FOLD")
    assert len(fold) == 5, out
    assert all(re.search(r"\d+\.\d+\s*(us|ms|s)\b", line) for line in fold), out
    assert not rule_ident_lines(lines[:idx_done], "RULE_NEVER")
    assert len(rule_ident_lines(lines[idx_done:idx_inc], "RULE_INC")) == 3, out
