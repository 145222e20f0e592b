"""What the scripts that test_distributed.py runs under mpirun share: each check is a function run once on every rank, its outcome
("ok" or the traceback) kept by name, and every rank's outcomes written to OUTDIR/rank<r>.json at the end."""
import json
import traceback

results: dict[str, str] = {}

def check(name:str):
  def deco(fn):
    try:
      fn()
      results[name] = "ok"
    except Exception:
      results[name] = traceback.format_exc()
    return fn
  return deco

def write_results(outdir:str, rank:int, size:int) -> None:
  with open(f"{outdir}/rank{rank}.json", "w") as f: json.dump({"size": size, "results": results}, f)
