"""Text viewer for the rewrite log that TRACK_MATCH_STATS=2 saves at exit.

  python -m tinygrad.viz.cli FILE            the groups (schedules, kernels), each with one line per graph_rewrite call: name, caller,
                                             nodes, matches
  python -m tinygrad.viz.cli FILE -g G       group G's rewrites, then its kernel source and linear UOps
  python -m tinygrad.viz.cli FILE -r K       the matches of rewrite K: rule location and time
  python -m tinygrad.viz.cli FILE -r K -m M  match M of rewrite K: the node before and after

The log is JSON lines (tinygrad.uop.track.write_rewrite_log; read by tinygrad.viz.log, which runs nothing from the file).
"""
from __future__ import annotations
import argparse
import sys

from tinygrad.viz.log import RewriteLogError, read_log, reachable, render

def main(argv:list[str]|None=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz.cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("file", help="the rewrites file printed at exit by TRACK_MATCH_STATS=2")
  ap.add_argument("-g", "--group", type=int, help="index of a group (a schedule, a kernel)")
  ap.add_argument("-r", "--rewrite", type=int, help="index of a graph_rewrite call")
  ap.add_argument("-m", "--match", type=int, help="index of a match within that call")
  args = ap.parse_args(argv)
  try: rlog = read_log(args.file)
  except (RewriteLogError, OSError) as e: ap.error(str(e))
  nodes, log = rlog.nodes, rlog.rewrites
  if args.group is not None and not 0 <= args.group < len(rlog.groups): ap.error(f"--group must be in [0, {len(rlog.groups)}), got {args.group}")
  if args.rewrite is None:
    if not rlog.groups: print("this program ran no graph rewrites")
    for g in rlog.groups if args.group is None else [rlog.groups[args.group]]:
      print(f"group {g.id}: {g.name} ({g.kind}, {len(g.rewrites)} rewrites)")
      for i in g.rewrites:
        rec = log[i]
        loc = f"{rec.location[0].split('/')[-1]}:{rec.location[1]}"
        mode = "bottom_up" if rec.bottom_up else "walk" if rec.walk else "top_down"
        print(f"{i:4d} {'  '*rec.depth}{rec.name:30s} {mode:9s} {loc:24s} {len(reachable(nodes, rec.sink)):7d} nodes {len(rec.matches):6d} matches")
      if args.group is not None and g.source is not None: print("--- source\n" + g.source + "\n--- linear\n" + "\n".join(g.linear or []))
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
