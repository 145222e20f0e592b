#!/usr/bin/env python3
"""Run one bench script under our tinygrad and under reference tinygrad 0.14, each in a fresh subprocess, and compare.

The bench script must print one JSON object on stdout with a "metrics" dict (name -> number) and optionally a "samples"
dict (name -> list of numbers). Rounds are interleaved (ours/ref, then ref/ours, ...) and samples are pooled over rounds.
Prints the combined JSON result, then a markdown table. The ratio is always "higher is better for ours":
ours/ref for rates (names ending in _per_s), ref/ours for durations (names ending in _s, _ms, _us, _ns), kernel counts (_kernels) and
memory (_bytes).

  python benches/compare.py                                   # bench_core, 1 round, ours = this python
  python benches/compare.py --script bench_core --rounds 3 -- --quick
  python benches/compare.py --ours none                       # reference numbers only
  python benches/compare.py --target 'uop_*=10' --target 'toposort_nodes_per_s=20' --target 'graph_rewrite_*=10' --check
"""
from __future__ import annotations
import argparse
import fnmatch
import json
import os
import pathlib
import statistics
import subprocess
import sys

BENCHES = pathlib.Path(__file__).resolve().parent
DEFAULT_REF = "/tmp/tg-ref/bin/python"
SIDES = ("ours", "ref")

def resolve_script(name:str) -> pathlib.Path:
  for cand in (pathlib.Path(name), BENCHES / name, BENCHES / f"{name}.py"):
    if cand.is_file(): return cand.resolve()
  raise SystemExit(f"compare.py: no bench script {name!r} (looked in . and {BENCHES})")

def side_env(side:str, ref_path:str|None=None) -> dict[str, str]:
  env = dict(os.environ)
  # the reference venv has tinygrad in its own site-packages: never let a PYTHONPATH meant for our package shadow it; on a machine
  # with one python for both (the lent GPU), --ref-path names the folder holding tinygrad 0.14 instead
  if side == "ref":
    env.pop("PYTHONPATH", None)
    if ref_path: env["PYTHONPATH"] = ref_path
  return env

def parse_output(stdout:str) -> dict:
  try: return json.loads(stdout)
  except json.JSONDecodeError: pass
  for line in reversed(stdout.strip().splitlines()):
    if line.startswith("{"):
      try: return json.loads(line)
      except json.JSONDecodeError: continue
  raise ValueError("no JSON object in the output")

def run_once(side:str, python:str, script:pathlib.Path, extra:list[str], timeout:float, ref_path:str|None=None) -> dict:
  cmd = [python, str(script), *extra]
  print(f"[compare] {side}: {' '.join(cmd)}", file=sys.stderr, flush=True)
  try: proc = subprocess.run(cmd, capture_output=True, text=True, env=side_env(side, ref_path), cwd=BENCHES, timeout=timeout)
  except subprocess.TimeoutExpired: raise SystemExit(f"compare.py: {side} run timed out after {timeout}s: {' '.join(cmd)}")
  if proc.returncode != 0:
    raise SystemExit(f"compare.py: {side} run failed (rc={proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-4000:]}")
  try: return parse_output(proc.stdout)
  except ValueError as e: raise SystemExit(f"compare.py: {side}: {e}\nstdout tail:\n{proc.stdout[-2000:]}")

def combine(runs:list[dict]) -> dict[str, float]:
  """Median per metric, over the pooled samples of all rounds (or over the per-round medians when a run has no samples)."""
  pooled: dict[str, list[float]] = {}
  for run in runs:
    samples = run.get("samples", {})
    for name, value in run.get("metrics", {}).items():
      if not isinstance(value, (int, float)): continue
      vals = samples.get(name)
      pooled.setdefault(name, []).extend(vals if isinstance(vals, list) and vals else [value])
  return {name: statistics.median(vals) for name, vals in pooled.items()}

def is_duration(name:str) -> bool:
  """Lower is better: durations (_s, _ms, _us, _ns, not _per_s), kernel counts (_kernels) and memory (_bytes)."""
  return not name.endswith("_per_s") and name.endswith(("_s", "_ms", "_us", "_ns", "_kernels", "_bytes"))

def ratio(name:str, ours:float|None, ref:float|None) -> float|None:
  if ours is None or ref is None or ours <= 0 or ref <= 0: return None
  return ref / ours if is_duration(name) else ours / ref

def parse_targets(specs:list[str]) -> list[tuple[str, float]]:
  ret = []
  for spec in specs:
    pattern, sep, value = spec.rpartition("=")
    if not sep or not pattern: raise SystemExit(f"compare.py: bad --target {spec!r}, expected GLOB=RATIO")
    ret.append((pattern, float(value)))
  return ret

def target_for(name:str, targets:list[tuple[str, float]]) -> float|None:
  found = None
  for pattern, value in targets:  # the last matching --target wins
    if fnmatch.fnmatchcase(name, pattern): found = value
  return found

def fmt(v:float|None) -> str:
  if v is None: return "-"
  a = abs(v)
  if a >= 1e9: return f"{v/1e9:.2f}G"
  if a >= 1e6: return f"{v/1e6:.2f}M"
  if a >= 1e4: return f"{v/1e3:.0f}k"
  if a >= 1e3: return f"{v/1e3:.1f}k"
  return f"{v:.3g}"

def markdown(result:dict) -> str:
  has_targets = any(row["target"] is not None for row in result["rows"])
  head = ["metric", "ours", "tinygrad 0.14", "ratio"] + (["target", "ok"] if has_targets else [])
  lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
  for row in result["rows"]:
    cells = [row["metric"], fmt(row["ours"]), fmt(row["ref"]), "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"]
    if has_targets:
      cells += ["-" if row["target"] is None else f"{row['target']:g}x", {True: "yes", False: "NO", None: "-"}[row["ok"]]]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)

def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog="\n".join(__doc__.split("\n")[1:]))
  p.add_argument("--script", default="bench_core", help="bench script: a path, or a name in benches/ (default bench_core)")
  p.add_argument("--ours", default=sys.executable, help="python with our tinygrad (default: this interpreter); 'none' to skip")
  p.add_argument("--ref", default=DEFAULT_REF, help=f"python with tinygrad 0.14 (default {DEFAULT_REF}); 'none' to skip")
  p.add_argument("--ref-path", default=None, help="PYTHONPATH for the ref side (tinygrad 0.14 installed with pip --target)")
  p.add_argument("--rounds", type=int, default=1, help="interleaved rounds per interpreter (default 1)")
  p.add_argument("--timeout", type=float, default=900, help="seconds per bench run (default 900)")
  p.add_argument("--target", action="append", default=[], metavar="GLOB=RATIO", help="minimum ratio for metrics matching GLOB (repeatable)")
  p.add_argument("--check", action="store_true", help="exit 1 when a --target is missed")
  p.add_argument("--json-out", default=None, help="also write the JSON result to this file")
  p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the bench script, after --")
  args = p.parse_args(argv)
  extra = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
  script = resolve_script(args.script)
  pythons = {side: py for side, py in (("ours", args.ours), ("ref", args.ref)) if py and py.lower() != "none"}
  if not pythons: raise SystemExit("compare.py: both --ours and --ref are 'none'")
  targets = parse_targets(args.target)

  runs: dict[str, list[dict]] = {side: [] for side in pythons}
  for r in range(args.rounds):
    for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
      if side in pythons: runs[side].append(run_once(side, pythons[side], script, extra, args.timeout, args.ref_path))

  for side, expected in (("ours", "ours"), ("ref", "tinygrad")):
    got = {run.get("implementation") for run in runs.get(side, [])} - {None}
    if got and got != {expected}:
      print(f"[compare] WARNING: {side} interpreter reported implementation {sorted(got)}, expected {expected!r}", file=sys.stderr)

  metrics = {side: combine(side_runs) for side, side_runs in runs.items()}
  names = list(dict.fromkeys(name for side in SIDES for name in metrics.get(side, {})))
  rows = []
  for name in names:
    ours, ref = metrics.get("ours", {}).get(name), metrics.get("ref", {}).get(name)
    rat, tgt = ratio(name, ours, ref), target_for(name, targets)
    rows.append({"metric": name, "ours": ours, "ref": ref, "ratio": rat, "target": tgt, "ok": None if tgt is None or rat is None else rat >= tgt})

  info_keys = ("implementation", "tinygrad_version", "tinygrad_path", "python", "repeats", "params")
  result = {
    "script": script.name, "script_args": extra, "rounds": args.rounds,
    "interpreters": {side: {"executable": py, **{k: runs[side][0].get(k) for k in info_keys if k in runs[side][0]}} for side, py in pythons.items()},
    "metrics": metrics, "rows": rows, "runs": runs,
  }
  text = json.dumps(result, indent=1)
  if args.json_out: pathlib.Path(args.json_out).write_text(text + "\n")
  print(text)
  print()
  for side, info in result["interpreters"].items():
    print(f"- {side}: {info.get('implementation')} {info.get('tinygrad_version')} on Python {info.get('python')} ({info['executable']})")
  print(f"- {script.name} {' '.join(extra)}, {args.rounds} round(s), ratio > 1 means ours is faster\n")
  print(markdown(result))
  missed = [row["metric"] for row in rows if row["ok"] is False or (row["target"] is not None and row["ok"] is None)]
  if args.check and missed:
    print(f"\n[compare] targets missed: {', '.join(missed)}", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__":
  sys.exit(main())
