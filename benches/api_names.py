"""The public names of Tensor and their signatures, as JSON; or (with --ref PYTHON) the diff of ours against another interpreter's
tinygrad: names it has that we lack, names we add, and names whose signatures differ.

  PYTHONPATH=python python benches/api_names.py                          # JSON of this interpreter's Tensor
  PYTHONPATH=python python benches/api_names.py --ref /tmp/tg-ref/bin/python  # diff against tinygrad 0.14
"""
import argparse
import inspect
import json
import os
import subprocess

def _kind(obj) -> str:
  # staticmethod, classmethod and plain function are not told apart: callers can't see it (and 0.14 wraps some static creators as
  # plain functions in the class dict)
  if isinstance(obj, property): return "property"
  return "callable" if callable(obj) or isinstance(obj, (staticmethod, classmethod)) else "attribute"

def _params(fn) -> list[str] | None:
  """The parameters as `name=default` strings (annotations left out: spelled differently by each side), None if not inspectable."""
  try: sig = inspect.signature(fn)
  except (TypeError, ValueError): return None
  ret = []
  for p in sig.parameters.values():
    if p.name in ("self", "cls"): continue
    name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
    if p.kind is p.KEYWORD_ONLY and not any(q.startswith("*") and not q.startswith("**") for q in ret): ret.append("*")
    ret.append(name if p.default is p.empty else f"{name}={p.default!r}")
  return ret

def tensor_names() -> dict[str, dict]:
  from tinygrad import Tensor
  ret = {}
  for name in sorted(n for n in dir(Tensor) if not n.startswith("_")):
    static = inspect.getattr_static(Tensor, name)
    ret[name] = {"kind": _kind(static), "params": _params(getattr(Tensor, name)) if _kind(static) != "property" else None}
  return ret

def diff(ours:dict[str, dict], ref:dict[str, dict]) -> dict[str, list]:
  sigs = []
  for n in sorted(ours.keys() & ref.keys()):
    if ours[n] != ref[n]: sigs.append({"name": n, "ours": ours[n], "ref": ref[n]})
  return {"missing": sorted(ref.keys() - ours.keys()), "extra": sorted(ours.keys() - ref.keys()), "signature": sigs}

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--ref", help="python interpreter of the reference tinygrad to diff against")
  args = ap.parse_args()
  ours = tensor_names()
  if args.ref is None:
    print(json.dumps(ours, indent=1))
    return
  # the reference runs this same file in its own interpreter, without our package on its path
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  out = subprocess.run([args.ref, os.path.abspath(__file__)], env=env, capture_output=True, text=True, check=True, cwd="/")
  d = diff(ours, json.loads(out.stdout))
  print(json.dumps({"ours": len(ours), "ref": len(json.loads(out.stdout)), "missing_count": len(d["missing"]),
                    "extra_count": len(d["extra"]), "signature_count": len(d["signature"]), **d}, indent=1))

if __name__ == "__main__": main()
