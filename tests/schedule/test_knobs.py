# The tuning knobs of scheduling and optimization (tinygrad/schedule/knobs.py): each documented where it is defined, and defined nowhere
# else in the package (the modules that use one import it).
import ast
import pathlib
import re
from tinygrad.schedule import knobs

PKG = pathlib.Path(knobs.__file__).resolve().parents[1]
SOURCE = pathlib.Path(knobs.__file__).read_text()

def _knob_assignments() -> list[tuple[list[str], int]]:
  out = []
  for node in ast.parse(SOURCE).body:
    if isinstance(node, ast.Assign):
      names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
      out.append((names, node.lineno))
  return out

def test_every_knob_says_what_it_trades():
  lines = SOURCE.splitlines()
  for names, lineno in _knob_assignments():
    line, above = lines[lineno - 1], lines[lineno - 2] if lineno >= 2 else ""
    assert "#" in line or above.startswith("#"), f"knob {names} (knobs.py:{lineno}) has no comment saying what it trades off"

def test_knobs_have_one_home():
  names = {n for ns, _ in _knob_assignments() for n in ns}
  assert names, "no knobs found"
  pattern = re.compile(r"^(" + "|".join(sorted(names)) + r")\b[\w, ]*=(?!=)", re.M)
  twice = [f"{p.relative_to(PKG)}: {m.group(0)}" for p in PKG.rglob("*.py") if p.name != "knobs.py" or p.parent.name != "schedule"
           for m in pattern.finditer(p.read_text())]
  assert not twice, f"knobs defined again outside schedule/knobs.py: {twice}"
