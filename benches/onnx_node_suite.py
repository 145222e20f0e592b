#!/usr/bin/env python3
"""The onnx package's backend node tests (tests/onnx/node_cases.py: run_case, the check tests/onnx/test_node_suite.py makes) run against
ours and against tinygrad 0.14's OnnxRunner, each side in its own process, every case under a timeout.

  python benches/onnx_node_suite.py [--sides ours,tinygrad] [-k SUBSTRING] [--timeout 60]
Sides: ours is this interpreter with this repository's package; tinygrad is tinygrad 0.14 installed in --tinygrad-python's venv
(with onnx==1.23.2 there), run from a directory outside this checkout. A side's worker prints one line per case; a worker that dies
(a crash, or a case past its timeout) is restarted after that case, which counts as an error. Every result is appended to --results
(JSON lines) as it comes, and cases already there are not run again, so an interrupted run resumes; --budget bounds each side's time
(cases left over count as not_run). Prints one JSON object, the last line:
{side: {"passed": n, "failed": n, "not_run": n, "errors": {first line of the error: count}}}."""
from __future__ import annotations
import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]

def worker(names:list[str], side:str) -> None:
  """Run the named cases one by one, printing `name<TAB>ok` or `name<TAB>first error line`."""
  sys.path.insert(0, str(REPO / "tests" / "onnx"))
  import node_cases
  import warnings
  warnings.simplefilter("ignore")
  if side == "tinygrad": os.environ.setdefault("DEV", "CPU")
  from tinygrad.nn.onnx import OnnxRunner
  cases = node_cases.load_cases()
  for name in names:
    print(f"{name}\tstart", flush=True)
    try:
      node_cases.run_case(cases[name], OnnxRunner)
      status = "ok"
    except Exception as e:  # noqa: BLE001 (every failure is a result here)
      first = (str(e).strip().splitlines() or [""])[0]
      status = f"{type(e).__name__}: {first}"[:200]
    print(f"{name}\t{status}", flush=True)

def run_side(side:str, names:list[str], args:argparse.Namespace, results:dict[str, str], record) -> dict[str, str]:
  """{case: "ok" or its error}, restarting the worker after a case that crashed it or ran past the timeout."""
  import time
  deadline = time.monotonic() + args.budget
  python = sys.executable if side == "ours" else args.tinygrad_python
  env = dict(os.environ)
  if side == "ours": env["PYTHONPATH"] = str(REPO / "python")
  else: env.pop("PYTHONPATH", None)
  todo = [n for n in names if n not in results]
  while todo and time.monotonic() < deadline:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f: json.dump(todo, f)
    cmd = [python, str(pathlib.Path(__file__).resolve()), "--worker", side, "--names", f.name]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tempfile.gettempdir())
    current = None
    try:
      import selectors
      sel = selectors.DefaultSelector()
      sel.register(proc.stdout, selectors.EVENT_READ)
      while True:
        if time.monotonic() > deadline: break
        if not sel.select(timeout=args.timeout):
          record(side, current or todo[0], f"timeout: over {args.timeout} s")
          proc.kill()
          break
        line = proc.stdout.readline()
        if not line:
          if current is not None: record(side, current, f"crash: the worker exited with {proc.wait()}")
          break
        name, _, status = line.rstrip("\n").partition("\t")
        if status == "start": current = name
        else: record(side, name, status); current = None
    finally:
      proc.kill()
      proc.wait()
      os.unlink(f.name)
    todo = [n for n in todo if n not in results]
    print(f"{side}: {len(results)}/{len(names)} cases run", file=sys.stderr, flush=True)
  return results

def summary(results:dict[str, str], names:list[str]) -> dict:
  got = [results[n] for n in names if n in results]
  errors = collections.Counter(s for s in got if s != "ok")
  return {"passed": got.count("ok"), "failed": sum(errors.values()), "not_run": len(names) - len(got), "errors": dict(errors.most_common())}

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--sides", default="ours,tinygrad")
  ap.add_argument("-k", default="", help="only the cases whose name contains this")
  ap.add_argument("--timeout", type=float, default=60.0, help="seconds one case may take")
  ap.add_argument("--tinygrad-python", default="/work/tg014/bin/python")
  ap.add_argument("--results", default=os.path.join(tempfile.gettempdir(), "onnx_node_suite.jsonl"),
                  help="every case's result, one JSON line each; cases already there are not run again")
  ap.add_argument("--fresh", action="store_true", help="forget the results of earlier runs")
  ap.add_argument("--budget", type=float, default=float("inf"), help="seconds each side may take in all")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  ap.add_argument("--names", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(json.loads(pathlib.Path(args.names).read_text()), args.worker)
  sys.path.insert(0, str(REPO / "tests" / "onnx"))
  import node_cases
  names = sorted(n for n in node_cases.load_cases() if args.k in n)
  results_file = pathlib.Path(args.results)
  if args.fresh: results_file.unlink(missing_ok=True)
  per_case: dict[str, dict[str, str]] = collections.defaultdict(dict)
  if results_file.exists():
    for line in results_file.read_text().splitlines():
      if line.strip(): r = json.loads(line); per_case[r["side"]][r["case"]] = r["status"]
  with results_file.open("a") as f:
    def record(side:str, case:str, status:str) -> None:
      per_case[side][case] = status
      f.write(json.dumps({"side": side, "case": case, "status": status}) + "\n")
      f.flush()
    for side in args.sides.split(","): run_side(side, names, args, per_case[side], record)
  print(json.dumps({side: summary(per_case[side], names) for side in args.sides.split(",")}))

if __name__ == "__main__": main()
