# VIZ=1 / TRACK_MATCH_STATS=2 record every graph_rewrite in groups (a schedule, each kernel's lowering) and save them at exit.
import json
import pytest
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad import _core
from tinygrad.uop import track
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, set_track_match_stats, rewrite_group
from tinygrad.viz.log import read_log
from tests.helpers.viz_run import TRAIN_STEP, run_recorded

COUNTS = TRAIN_STEP + """
import json
from collections import Counter
from tinygrad import _core
from tinygrad.uop import track
rule, recorded = Counter(), Counter()
for upat, matches, *_ in _core.match_stats(): rule[repr(tuple(upat.location))] += matches
for g in track.track_groups:
  for r in g.rewrites:
    for *_, loc, _t in r.matches: recorded[repr(tuple(loc))] += 1
print("COUNTS", json.dumps([rule, recorded]))
"""

@pytest.mark.cpu
def test_training_step_is_recorded_by_group(tmp_path):
  out, files = run_recorded(tmp_path, COUNTS, VIZ="1")
  assert "view with: python -m tinygrad.viz.serve" in out   # not a terminal: saved, not served
  rule, recorded = json.loads(out.split("COUNTS ")[1].splitlines()[0])
  # each rule that fired inside graph_rewrite has all its matches recorded (rules only applied one node at a time, as the spec
  # checker's and the renderer's are, match outside any graph_rewrite and are in the statistics alone)
  assert len(recorded) > 20 and all(rule[loc] == n for loc, n in recorded.items())
  log = read_log(files["rewrites"])
  assert sum(len(r.matches) for r in log.rewrites) == sum(recorded.values()) > 1000
  kinds = [g.kind for g in log.groups]
  assert kinds.count("schedule") >= 2 and kinds.count("kernel") >= 10
  kernel_groups = [g for g in log.groups if g.kind == "kernel"]
  for g in kernel_groups:
    assert g.source and f"void {g.name}(" in g.source and g.linear and g.rewrites   # named as DEBUG=2 names the kernel
  # the kernels' codegen passes are recorded by name in their group
  names = {log.rewrites[r].name for g in kernel_groups for r in g.rewrites}
  assert len(names) >= 5
  # the profile: every kernel launch on the CPU row, and the compiles
  trace = json.load(open(files["profile"]))
  devices = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
  kernels = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"]
  assert {devices[e["pid"]] for e in kernels} == {"CPU"} and len(kernels) >= len(kernel_groups)
  assert any(e["cat"] == "compile" for e in trace["traceEvents"] if e["ph"] == "X")

@pytest.mark.cpu
def test_profile_only(tmp_path):
  out, files = run_recorded(tmp_path, TRAIN_STEP, PROFILE="1")
  assert "profile" in files and "rewrites" not in files
  out, files = run_recorded(tmp_path, TRAIN_STEP, VIZ="-1")
  assert "profile" in files and "rewrites" not in files and "view with: python -m tinygrad.viz.serve --profile" in out

def test_nothing_recorded_when_off():
  assert track.TRACK_MATCH_STATS.value < 2
  n_groups, n_rewrites = len(track.track_groups), len(track.track_rewrites_log)
  (Tensor([1.0, 2.0]) * 3).sum().realize()
  assert (len(track.track_groups), len(track.track_rewrites_log)) == (n_groups, n_rewrites)
  calls = []
  @rewrite_group(name=lambda x, ret: f"named {ret}")
  def f(x):
    calls.append(x)
    return x + 1
  assert f(1) == 2 and calls == [1] and len(track.track_groups) == n_groups

pm = PatternMatcher([(UPat(Ops.NEG, src=(UPat.cvar("k"),)), lambda k: UOp.const(k.dtype, -k.arg))])
def negs(n:int) -> UOp:
  from tinygrad.dtype import dtypes
  return UOp.sink(*[UOp(Ops.NEG, dtypes.int, (UOp.const(dtypes.int, 1000 + i),)) for i in range(n)])

def test_rewrite_group_names_and_the_cap(capsys):
  @rewrite_group(name=lambda g, ret: f"negated {len(ret.src)}")
  def run(g): return graph_rewrite(g, pm, name="negs")
  set_track_match_stats(2)
  try:
    start = len(track.track_groups)
    run(negs(3))
    assert track.track_groups[start].name == "negated 3" and len(track.track_groups[start].rewrites[0].matches) == 3
    limit = track._recorded["matches"] + 30
    with Context(VIZ_MAX_MATCHES=limit):
      for i in range(10): run(negs(10 + i))
    assert "VIZ: recording capped at" in capsys.readouterr().out
    assert track._dropped["groups"] > 0 and not track.track_groups[start].rewrites   # the oldest went first
    assert track.track_groups[-1].rewrites and track._recorded["matches"] <= limit
  finally: set_track_match_stats(0)

def test_rule_statistics_still_count():
  before = sum(r[1] for r in _core.match_stats())
  set_track_match_stats(2)
  try: graph_rewrite(negs(4), pm)
  finally: set_track_match_stats(0)
  assert sum(r[1] for r in _core.match_stats()) - before in (0, 4)   # a matcher built while untracked is not counted; tracked ones count each

def test_profile_events_are_capped(capsys):
  from tinygrad.helpers import cpu_events, profile_event
  saved = list(cpu_events)
  try:
    cpu_events.clear()
    with Context(PROFILE_MAX_EVENTS=10):
      for i in range(25): profile_event("CPU", f"k{i}", "kernel", i, i + 1)
    assert len(cpu_events) <= 10 and cpu_events[-1].name == "k24" and "dropping the oldest half" in capsys.readouterr().out
  finally: cpu_events[:] = saved
