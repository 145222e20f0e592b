"""Recording of graph rewrites for TRACK_MATCH_STATS and VIZ: per-rule statistics, and (level >= 2) every graph_rewrite call with each
match, grouped by what called it (a schedule, one kernel's lowering, a TinyJit capture), saved at exit as the rewrite log that
tinygrad.viz reads (python -m tinygrad.viz.serve / tinygrad.viz.cli).

The Rust core calls `track_event` at each rewrite's begin, match and end while the level is >= 2; `rewrite_group` opens the group the
rewrites go to. Nothing here runs when tracking is off but one level test per group.
"""
from __future__ import annotations
import atexit
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from tinygrad import _core
from tinygrad.helpers import TRACK_MATCH_STATS, VIZ, ContextVar, TracingKey, getenv, printable, save_profile

REWRITE_LOG_FORMAT = "tinygrad-rewrite-log"   # the header line of every log (read by tinygrad.viz.log)
REWRITE_LOG_VERSION = 2
VIZ_MAX_MATCHES = ContextVar("VIZ_MAX_MATCHES", 2_000_000)   # recorded matches kept at most (the oldest groups go first)

@dataclass
class TrackedGraphRewrite:
  """One graph_rewrite call: where it was called, its input and output, and each match (node, replacement, rule location, seconds)."""
  loc: tuple[str, int]
  sink: Any
  matches: list[tuple[Any, Any, tuple[str, int], float]]
  name: str
  depth: int
  bottom_up: bool
  walk: bool
  group: int = 0
  result: Any = None

@dataclass
class TrackGroup:
  """What a group of rewrites belongs to: a schedule, one kernel (named as DEBUG=2 names it, with its rendered source and linear UOps
  once rendered), a TinyJit capture, or "other"."""
  name: str
  kind: str
  source: str|None = None
  linear: list[str]|None = None
  rewrites: list[TrackedGraphRewrite] = field(default_factory=list)

# tinygrad 0.14's names: one key and one list of rewrites per group
tracked_keys: list[TracingKey] = []
tracked_ctxs: list[list[TrackedGraphRewrite]] = []
track_groups: list[TrackGroup] = []
active_group: list[int] = []
active_rewrites: list[TrackedGraphRewrite] = []
track_rewrites_log: list[TrackedGraphRewrite] = []   # every recorded rewrite in call order, across groups
_dropped = {"groups": 0}

def open_group(name:str, kind:str) -> int:
  track_groups.append(g := TrackGroup(name, kind))
  tracked_keys.append(TracingKey(name))
  tracked_ctxs.append(g.rewrites)
  return len(track_groups) - 1

def current_group() -> int:
  if active_group: return active_group[-1]
  if not track_groups or track_groups[-1].kind != "other": open_group("other", "other")
  return len(track_groups) - 1

@contextlib.contextmanager
def tracking_group(name:str, kind:str) -> Iterator[int|None]:
  """The rewrites inside the block go to a new group (its index is yielded; None when not recording)."""
  if TRACK_MATCH_STATS.value < 2:
    yield None
    return
  active_group.append(gi := open_group(name, kind))
  try: yield gi
  finally: active_group.pop()

def rewrite_group(name:str|Callable[..., str]|bool=True, kind:str="other"):
  """Decorator (tinygrad 0.14's name): the rewrites of the call go to a group of their own. `name` is the group's name, or a function
  of the call's arguments and `ret=` (its result) that names it once the call returns."""
  def decorator(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      if TRACK_MATCH_STATS.value < 2: return fn(*args, **kwargs)
      with tracking_group(name if isinstance(name, str) else fn.__name__, kind) as gi: ret = fn(*args, **kwargs)
      if callable(name) and gi is not None: rename_group(gi, name(*args, **kwargs, ret=ret))
      return ret
    return wrapper
  return decorator

def rename_group(gi:int, name:str) -> None:
  track_groups[gi].name = name
  tracked_keys[gi] = TracingKey(name)

def attach_kernel(gi:int|None, name:str, source:str, uops:list) -> None:
  """The kernel a group lowered: its name (as DEBUG=2 prints it), rendered source and linear UOps (one line each)."""
  if gi is None: return
  rename_group(gi, name)
  index = {u: i for i, u in enumerate(uops)}
  def ref(x) -> str: return str(index[x]) if x in index else f"{x.op.name}({x.argstr()})"
  track_groups[gi].source = source
  track_groups[gi].linear = [f"{i:4d} {str(u.op):20s} {str(u.dtype):20s} {u.argstr()} src=({', '.join(ref(x) for x in u.src)})"
                             for i, u in enumerate(uops)]

def track_event(event:str, *args) -> None:
  if event == "begin":
    sink, name, bottom_up, walk = args
    frm = sys._getframe(1)
    rec = TrackedGraphRewrite((frm.f_code.co_filename, frm.f_lineno), sink, [], name or "graph_rewrite", len(active_rewrites), bottom_up, walk,
                              current_group())
    track_groups[rec.group].rewrites.append(rec)
    _recorded["matches"] += 1
    track_rewrites_log.append(rec)
    active_rewrites.append(rec)
  elif event == "end":
    if active_rewrites: active_rewrites.pop().result = args[0]
    if not active_rewrites: _cap()
  elif event == "match":
    before, after, upat, seconds = args
    if active_rewrites:
      active_rewrites[-1].matches.append((before, after, upat.location, seconds))
      _recorded["matches"] += 1
    if TRACK_MATCH_STATS.value >= 3:
      print(f"{seconds*1e6:7.2f} us -- {upat.location[0].split('/')[-1]}:{upat.location[1]}", printable(upat.location))

_recorded = {"matches": 0}   # matches and rewrite calls held now
def _cap() -> None:
  """Past VIZ_MAX_MATCHES recorded matches the oldest groups are dropped (never an open one), so a long program can't run out of memory."""
  limit = VIZ_MAX_MATCHES.value
  if _recorded["matches"] <= limit: return
  keep_from = min(active_group) if active_group else len(track_groups) - 1
  dropped = 0
  for g in track_groups[:keep_from]:
    if _recorded["matches"] <= limit // 2: break
    if not g.rewrites: continue
    n = sum(len(r.matches) + 1 for r in g.rewrites)
    _recorded["matches"] -= n
    for r in g.rewrites: r.group = -1
    g.rewrites.clear()
    dropped += 1
  if dropped:
    track_rewrites_log[:] = [r for r in track_rewrites_log if r.group >= 0]
    if _dropped["groups"] == 0: print(f"VIZ: recording capped at {limit} matches (VIZ_MAX_MATCHES), dropping the oldest groups")
    _dropped["groups"] += dropped

def match_stats_table() -> list[str]:
  """The per-rule statistics as printed at exit: slowest rule first, then the total."""
  rows = sorted(_core.match_stats(), key=lambda r: r[4], reverse=True)
  lines, tot = [], [0, 0, 0.0, 0.0]
  for upat, matches, attempts, match_s, total_s in rows:
    tot = [tot[0]+matches, tot[1]+attempts, tot[2]+match_s, tot[3]+total_s]
    if attempts == 0: continue
    loc = f"{upat.location[0].split('/')[-1]}:{upat.location[1]}"
    lines.append(f"{matches:6d} / {attempts:7d} -- {match_s*1000:9.2f} / {total_s*1000:9.2f} ms -- {loc:20s} {printable(upat.location)}")
  lines.append(f"{tot[0]:6d} / {tot[1]:7d} -- {tot[2]*1000:9.2f} / {tot[3]*1000:9.2f} ms -- TOTAL")
  lines.append(f"{len(rows)} rules, {sum(r[1] > 0 for r in rows)} matched once")
  return lines

def write_rewrite_log(f, groups:list[TrackGroup]|None=None) -> None:
  """The rewrite log as JSON lines (text only, so reading it back runs nothing from the file): a header; then per group the nodes its
  rewrites name that no earlier line gave ({"node": [id, op, dtype, [source ids], arg, tag]}, sources first), the group
  ({"group": {...}}) and its rewrites ({"rewrite": {...}} naming nodes by id). Groups that recorded nothing are left out."""
  ids: dict[Any, int] = {}
  def node_id(root) -> int:
    # iterative, and it stops at nodes already written: each node costs once however many matches share it
    stack = [(root, False)]
    while stack:
      u, srcs_done = stack.pop()
      if u in ids: continue
      if srcs_done:
        ids[u] = len(ids)
        f.write(json.dumps({"node": [ids[u], str(u.op), str(u.dtype), [ids[x] for x in u.src], u.argstr(),
                                     None if u.tag is None else repr(u.tag)]}) + "\n")
      else: stack.extend([(u, True)] + [(x, False) for x in u.src if x not in ids])
    return ids[root]
  f.write(json.dumps({"format": REWRITE_LOG_FORMAT, "version": REWRITE_LOG_VERSION}) + "\n")
  gid = 0
  for g in track_groups if groups is None else groups:
    if not g.rewrites and g.source is None: continue
    recs = [{"group": gid, "name": str(r.name), "location": [str(r.loc[0]), int(r.loc[1])], "bottom_up": bool(r.bottom_up), "walk": bool(r.walk),
             "depth": int(r.depth), "sink": node_id(r.sink), "result": None if r.result is None else node_id(r.result),
             "matches": [[node_id(b), node_id(a), [str(loc[0]), int(loc[1])], float(t)] for b, a, loc, t in r.matches]} for r in g.rewrites]
    f.write(json.dumps({"group": {"id": gid, "name": g.name, "kind": g.kind, "source": g.source, "linear": g.linear}}) + "\n")
    for rec in recs: f.write(json.dumps({"rewrite": rec}) + "\n")
    gid += 1

def save_rewrite_log() -> str:
  # a fresh file with an unpredictable name (created 0600), never a fixed path another user could have planted in /tmp
  fd, fn = tempfile.mkstemp(prefix="tinygrad-rewrites-", suffix=".jsonl")
  with os.fdopen(fd, "w") as f: write_rewrite_log(f)
  return fn

def _at_exit() -> None:
  rewrites = profile = None
  if TRACK_MATCH_STATS.value >= 2:
    rewrites = save_rewrite_log()
    dropped = f" ({_dropped['groups']} oldest groups dropped: VIZ_MAX_MATCHES)" if _dropped["groups"] else ""
    print(f"rewrote {len(track_rewrites_log)} graphs and matched {sum(len(r.matches) for r in track_rewrites_log)} times, saved to {rewrites}"
          + dropped)
  if TRACK_MATCH_STATS.value and not VIZ.value:
    for line in match_stats_table(): print(line)
  profile = save_profile()
  if not (rewrites or profile): return
  args = (["--rewrites", rewrites] if rewrites else []) + (["--profile", profile] if profile else [])
  if VIZ.value and (sys.stdout.isatty() or getenv("VIZ_SERVE", 0)):
    sys.stdout.flush()
    env = {**os.environ, "VIZ": "0", "PROFILE": "0", "TRACK_MATCH_STATS": "0"}
    try: subprocess.call([sys.executable, "-m", "tinygrad.viz.serve", *args], env=env)
    except KeyboardInterrupt: pass
  elif rewrites or VIZ.value: print("view with: python -m tinygrad.viz.serve " + " ".join(args) + (f"  (or python -m tinygrad.viz.cli {rewrites})"
                                                                                                  if rewrites else ""))

_exit_report_registered = False
def set_track_match_stats(level:int) -> None:
  """Sets TRACK_MATCH_STATS at run time (it is read from the environment at import). Rules of PatternMatchers built
  afterwards are tracked, and with level >= 1 the table prints at exit."""
  global _exit_report_registered
  TRACK_MATCH_STATS.value = level
  _core.set_track_level(int(level))
  if not _exit_report_registered:
    atexit.register(_at_exit)
    _exit_report_registered = True
