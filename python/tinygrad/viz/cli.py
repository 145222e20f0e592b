"""Text viewer for the rewrite log that TRACK_MATCH_STATS=2 saves at exit.

  python -m tinygrad.viz.cli FILE            one line per graph_rewrite call: name, caller, nodes, matches
  python -m tinygrad.viz.cli FILE -r K       the matches of rewrite K: rule location and time
  python -m tinygrad.viz.cli FILE -r K -m M  match M of rewrite K: the node before and after

The log is JSON lines (see tinygrad.uop.ops.write_rewrite_log): it is read as data and checked line by line, so a file that is not a
rewrite log (a pickle, anything else) is refused with an error and nothing in it runs.
"""
from __future__ import annotations
import argparse
import json
import sys
from dataclasses import dataclass

from tinygrad.uop.ops import REWRITE_LOG_FORMAT

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

def _is_int(x) -> bool: return type(x) is int
def _is_loc(x) -> bool: return type(x) is list and len(x) == 2 and type(x[0]) is str and _is_int(x[1])

def _node(e, n:int) -> Node:
  if not (type(e) is list and len(e) == 6 and e[0] == n and _is_int(e[0]) and type(e[1]) is str and type(e[2]) is str and type(e[3]) is list
          and all(_is_int(s) and 0 <= s < n for s in e[3]) and type(e[4]) is str and (e[5] is None or type(e[5]) is str)):
    raise ValueError("malformed node")
  return Node(*e)

def _rewrite(e, n:int) -> Rewrite:
  def ref(x) -> bool: return _is_int(x) and 0 <= x < n
  if not (type(e) is dict and type(e.get("name")) is str and _is_loc(e.get("location")) and type(e.get("bottom_up")) is bool and
          type(e.get("walk")) is bool and _is_int(e.get("depth")) and ref(e.get("sink")) and (e.get("result") is None or ref(e["result"])) and
          type(e.get("matches")) is list and all(type(m) is list and len(m) == 4 and ref(m[0]) and ref(m[1]) and _is_loc(m[2]) and
                                                 type(m[3]) in (int, float) for m in e["matches"])):
    raise ValueError("malformed rewrite record")
  return Rewrite(e["name"], tuple(e["location"]), e["bottom_up"], e["walk"], e["depth"], e["sink"], e["result"],  # type: ignore[arg-type]
                 [(b, a, (loc[0], loc[1]), float(t)) for b, a, loc, t in e["matches"]])

def read_rewrite_log(path:str) -> tuple[list[Node], list[Rewrite]]:
  """The nodes and rewrite records of a log; RewriteLogError if the file is not one (nothing from the file is executed)."""
  nodes: list[Node] = []
  rewrites: list[Rewrite] = []
  with open(path, "rb") as f:
    head = f.readline(1 << 16)
    try: header = json.loads(head)
    except (ValueError, RecursionError): header = None
    if not isinstance(header, dict) or header.get("format") != REWRITE_LOG_FORMAT:
      raise RewriteLogError(f"{path} is not a tinygrad rewrite log (the file TRACK_MATCH_STATS=2 writes); it starts with {head[:20]!r}")
    if header.get("version") != 1: raise RewriteLogError(f"{path}: rewrite log version {header.get('version')!r} is not supported (expected 1)")
    for lineno, line in enumerate(f, 2):
      try:
        entry = json.loads(line)
        if type(entry) is not dict or len(entry) != 1: raise ValueError("expected one {\"node\": ...} or {\"rewrite\": ...} per line")
        if "node" in entry: nodes.append(_node(entry["node"], len(nodes)))
        elif "rewrite" in entry: rewrites.append(_rewrite(entry["rewrite"], len(nodes)))
        else: raise ValueError(f"unknown entry {next(iter(entry))!r:.30}")
      except (ValueError, RecursionError) as e: raise RewriteLogError(f"{path}:{lineno}: not a valid rewrite log entry ({e})") from None
  return nodes, rewrites

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

def main(argv:list[str]|None=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz.cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("file", help="the rewrites file printed at exit by TRACK_MATCH_STATS=2")
  ap.add_argument("-r", "--rewrite", type=int, help="index of a graph_rewrite call")
  ap.add_argument("-m", "--match", type=int, help="index of a match within that call")
  args = ap.parse_args(argv)
  try: nodes, log = read_rewrite_log(args.file)
  except (RewriteLogError, OSError) as e: ap.error(str(e))
  if args.rewrite is None:
    for i, rec in enumerate(log):
      loc = f"{rec.location[0].split('/')[-1]}:{rec.location[1]}"
      mode = "bottom_up" if rec.bottom_up else "walk" if rec.walk else "top_down"
      print(f"{i:4d} {'  '*rec.depth}{rec.name:30s} {mode:9s} {loc:24s} {len(reachable(nodes, rec.sink)):7d} nodes {len(rec.matches):6d} matches")
    return 0
  if not 0 <= args.rewrite < len(log): ap.error(f"--rewrite must be in [0, {len(log)}), got {args.rewrite}")
  matches = log[args.rewrite].matches
  if args.match is None:
    for j, (before, after, loc, t) in enumerate(matches):
      print(f"{j:5d} {t*1e6:8.2f} us {loc[0].split('/')[-1]}:{loc[1]:<6d} {nodes[before].op} -> {nodes[after].op}")
    return 0
  if not 0 <= args.match < len(matches): ap.error(f"--match must be in [0, {len(matches)}), got {args.match}")
  before, after, loc, t = matches[args.match]
  print(f"rule {loc[0]}:{loc[1]} ({t*1e6:.2f} us)\n--- before\n{render(nodes, before)}\n--- after\n{render(nodes, after)}")
  return 0

if __name__ == "__main__": sys.exit(main())
