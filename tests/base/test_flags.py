"""Every environment flag in tinygrad.helpers does something: it is read outside its definition, or it is one of tinygrad 0.14's flags
for features this project lacks (INERT_FLAGS), which stay importable and say they do nothing when set."""
import ast
import os
import pathlib
import subprocess
import sys
import pytest
import tinygrad.helpers as helpers

PKG = pathlib.Path(helpers.__file__).parent

def _flags() -> dict[str, str]:
  out = {}
  for node in ast.parse(pathlib.Path(helpers.__file__).read_text()).body:
    if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.Call)):
      values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
      targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else [node.targets[0]]
      for t, v in zip(targets, values):
        if isinstance(v, ast.Call) and getattr(v.func, "id", "") in ("ContextVar", "_DEV"): out[t.id] = ast.unparse(v.args[0])
  return out

_TREES = [(p, list(ast.walk(ast.parse(p.read_text())))) for p in PKG.rglob("*.py")]

def _reads(name:str) -> int:
  n = 0
  for p, nodes in _TREES:
    for node in nodes:
      if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load): n += 1
      elif isinstance(node, ast.alias) and node.name == name and p.name != "helpers.py": n += 1
  return n

def test_flags_found():
  assert {"DEBUG", "BEAM", "NOOPT", "WINO"} <= set(_flags())

@pytest.mark.parametrize("name", sorted(_flags()))
def test_flag_is_read_or_inert(name:str):
  inert = {v.key for v in helpers.INERT_FLAGS}
  if getattr(helpers, name).key in inert: return
  # a name's own definition and the inert table don't count as reads
  assert _reads(name) > 0, f"{name} is defined in helpers.py but nothing reads it: delete it or make it work"

def test_inert_flag_in_environment_says_so():
  env = {**os.environ, "WINO": "1"}
  r = subprocess.run([sys.executable, "-W", "always", "-c", "import tinygrad"], env=env, capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  assert "WINO=1 has no effect" in r.stderr
