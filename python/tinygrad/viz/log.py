"""Reading rewrite logs (the JSON lines tinygrad.uop.track.write_rewrite_log saves): checked line by line as data, so a file that is not a
rewrite log (a pickle, anything else) is refused with an error and nothing in it runs. Shared by the viewers: viz/cli.py and viz/serve.py."""
from __future__ import annotations
import json
from dataclasses import dataclass, field

from tinygrad.uop.track import REWRITE_LOG_FORMAT, REWRITE_LOG_VERSION

class RewriteLogError(ValueError):
  """The file is not a rewrite log this viewer can read."""

@dataclass
class Node:
  id: int
  op: str
  dtype: str
  src: list[int]
  arg: str
  tag: str|None

@dataclass
class Rewrite:
  name: str
  location: tuple[str, int]
  bottom_up: bool
  walk: bool
  depth: int
  sink: int
  result: int|None
  matches: list[tuple[int, int, tuple[str, int], float]]
  group: int = 0

@dataclass
class Group:
  id: int
  name: str
  kind: str
  source: str|None = None
  linear: list[str]|None = None
  rewrites: list[int] = field(default_factory=list)   # indices into the log's rewrites

@dataclass
class RewriteLog:
  nodes: list[Node]
  rewrites: list[Rewrite]
  groups: list[Group]

def _is_int(x) -> bool: return type(x) is int
def _is_loc(x) -> bool: return type(x) is list and len(x) == 2 and type(x[0]) is str and _is_int(x[1])

def _node(e, n:int) -> Node:
  if not (type(e) is list and len(e) == 6 and e[0] == n and _is_int(e[0]) and type(e[1]) is str and type(e[2]) is str and type(e[3]) is list
          and all(_is_int(s) and 0 <= s < n for s in e[3]) and type(e[4]) is str and (e[5] is None or type(e[5]) is str)):
    raise ValueError("malformed node")
  return Node(*e)

def _group(e, n:int) -> Group:
  if not (type(e) is dict and e.get("id") == n and type(e.get("name")) is str and type(e.get("kind")) is str and
          (e.get("source") is None or type(e["source"]) is str) and
          (e.get("linear") is None or (type(e["linear"]) is list and all(type(x) is str for x in e["linear"])))):
    raise ValueError("malformed group record")
  return Group(e["id"], e["name"], e["kind"], e.get("source"), e.get("linear"))

def _rewrite(e, n:int) -> Rewrite:
  def ref(x) -> bool: return _is_int(x) and 0 <= x < n
  if not (type(e) is dict and type(e.get("name")) is str and _is_loc(e.get("location")) and type(e.get("bottom_up")) is bool and
          type(e.get("walk")) is bool and _is_int(e.get("depth")) and ref(e.get("sink")) and (e.get("result") is None or ref(e["result"])) and
          type(e.get("matches")) is list and all(type(m) is list and len(m) == 4 and ref(m[0]) and ref(m[1]) and _is_loc(m[2]) and
                                                 type(m[3]) in (int, float) for m in e["matches"])):
    raise ValueError("malformed rewrite record")
  return Rewrite(e["name"], tuple(e["location"]), e["bottom_up"], e["walk"], e["depth"], e["sink"], e["result"],  # type: ignore[arg-type]
                 [(b, a, (loc[0], loc[1]), float(t)) for b, a, loc, t in e["matches"]], e.get("group", 0))

def read_log(path:str) -> RewriteLog:
  """The nodes, rewrites and groups of a log (version 1: every rewrite in one group "default"); RewriteLogError if the file is not one
  (nothing from the file is executed)."""
  nodes: list[Node] = []
  rewrites: list[Rewrite] = []
  groups: list[Group] = []
  with open(path, "rb") as f:
    head = f.readline(1 << 16)
    try: header = json.loads(head)
    except (ValueError, RecursionError): header = None
    if not isinstance(header, dict) or header.get("format") != REWRITE_LOG_FORMAT:
      raise RewriteLogError(f"{path} is not a tinygrad rewrite log (the file TRACK_MATCH_STATS=2 writes); it starts with {head[:20]!r}")
    if (version := header.get("version")) not in (1, REWRITE_LOG_VERSION):
      raise RewriteLogError(f"{path}: rewrite log version {version!r} is not supported (expected 1 or {REWRITE_LOG_VERSION})")
    if version == 1: groups.append(Group(0, "default", "other"))
    for lineno, line in enumerate(f, 2):
      try:
        entry = json.loads(line)
        if type(entry) is not dict or len(entry) != 1: raise ValueError("expected one node, group or rewrite entry per line")
        if "node" in entry: nodes.append(_node(entry["node"], len(nodes)))
        elif "group" in entry and version != 1: groups.append(_group(entry["group"], len(groups)))
        elif "rewrite" in entry:
          rec = _rewrite(entry["rewrite"], len(nodes))
          if not 0 <= rec.group < len(groups): raise ValueError(f"rewrite of group {rec.group}, which no earlier line defines")
          groups[rec.group].rewrites.append(len(rewrites))
          rewrites.append(rec)
        else: raise ValueError(f"unknown entry {next(iter(entry))!r:.30}")
      except (ValueError, RecursionError) as e: raise RewriteLogError(f"{path}:{lineno}: not a valid rewrite log entry ({e})") from None
  return RewriteLog(nodes, rewrites, groups)

def read_rewrite_log(path:str) -> tuple[list[Node], list[Rewrite]]:
  """The nodes and rewrite records of a log (read_log without the groups)."""
  log = read_log(path)
  return log.nodes, log.rewrites

def reachable(nodes:list[Node], root:int) -> list[int]:
  """Ids of the nodes under root (root included), sources first."""
  seen, stack = {root}, [root]
  while stack:
    for s in nodes[stack.pop()].src:
      if s not in seen:
        seen.add(s)
        stack.append(s)
  return sorted(seen)   # ids are given sources first

def render(nodes:list[Node], root:int) -> str:
  """One line per node under root, sources first: `%id = op dtype arg=... src=(%a, %b)` (linear in the graph, shared nodes once)."""
  return "\n".join(f"%{n.id} = {n.op} {n.dtype} arg={n.arg}{'' if n.tag is None else f' tag={n.tag}'} src=({', '.join(f'%{s}' for s in n.src)})"
                   for n in (nodes[i] for i in reachable(nodes, root)))

