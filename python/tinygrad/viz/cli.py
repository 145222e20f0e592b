"""Text viewer for the rewrite log that TRACK_MATCH_STATS=2 saves at exit.

  python -m tinygrad.viz.cli FILE            one line per graph_rewrite call: name, caller, nodes, matches
  python -m tinygrad.viz.cli FILE -r K       the matches of rewrite K: rule location and time
  python -m tinygrad.viz.cli FILE -r K -m M  match M of rewrite K: the node before and after
"""
import argparse
import pickle
import sys

def main(argv:list[str]|None=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz.cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("file", help="the rewrites file printed at exit by TRACK_MATCH_STATS=2")
  ap.add_argument("-r", "--rewrite", type=int, help="index of a graph_rewrite call")
  ap.add_argument("-m", "--match", type=int, help="index of a match within that call")
  args = ap.parse_args(argv)
  with open(args.file, "rb") as f: log = pickle.load(f)
  if args.rewrite is None:
    for i, rec in enumerate(log):
      loc = f"{rec['location'][0].split('/')[-1]}:{rec['location'][1]}"
      mode = "bottom_up" if rec["bottom_up"] else "walk" if rec["walk"] else "top_down"
      nodes = len(rec["sink"].toposort())
      print(f"{i:4d} {'  '*rec['depth']}{rec['name']:30s} {mode:9s} {loc:24s} {nodes:7d} nodes {len(rec['matches']):6d} matches")
    return 0
  if not 0 <= args.rewrite < len(log): ap.error(f"--rewrite must be in [0, {len(log)}), got {args.rewrite}")
  matches = log[args.rewrite]["matches"]
  if args.match is None:
    for j, (before, after, loc, t) in enumerate(matches):
      print(f"{j:5d} {t*1e6:8.2f} us {loc[0].split('/')[-1]}:{loc[1]:<6d} {before.op} -> {after.op}")
    return 0
  if not 0 <= args.match < len(matches): ap.error(f"--match must be in [0, {len(matches)}), got {args.match}")
  before, after, loc, t = matches[args.match]
  print(f"rule {loc[0]}:{loc[1]} ({t*1e6:.2f} us)\n--- before\n{before}\n--- after\n{after}")
  return 0

if __name__ == "__main__": sys.exit(main())
