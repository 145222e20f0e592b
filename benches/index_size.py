"""Index arithmetic size per kernel: how many ALU ops of each compiled kernel compute memory addresses or load/store gates.

Used as a pytest plugin it records every kernel the tests compile; run it on two checkouts and compare:

  PYTHONPATH=<tree>/python python -m pytest -q -p no:xdist -p benches.index_size -m cpu --index-size-out /tmp/after.json
  python benches/index_size.py /tmp/before.json /tmp/after.json     # per-kernel and total comparison

A kernel is identified by its test, its name and its position among that test's compiled kernels; the compile cache is cleared
before each test so that every test lowers its own kernels.
"""
from __future__ import annotations
import json
import sys

def index_ops(uops) -> int:
  """ALU ops (in the linear program) that an address (INDEX/SHRINK operand) or a gate (LOAD/STORE 3rd src) depends on."""
  from tinygrad.uop.ops import Ops, GroupOp
  roots = [u.src[1] for u in uops if u.op in (Ops.INDEX, Ops.SHRINK) and len(u.src) > 1]
  roots += [u.src[2] for u in uops if u.op in (Ops.LOAD, Ops.STORE) and len(u.src) == 3]
  seen, stack = set(), list(roots)
  while stack:
    x = stack.pop()
    if x in seen or x.op not in GroupOp.ALU: continue
    seen.add(x)
    stack.extend(x.src)
  return len(seen)

_records: dict[str, list] = {}
_current = ["?"]

def pytest_addoption(parser): parser.addoption("--index-size-out", default="/tmp/index_size.json")

def pytest_configure(config):
  import tinygrad.engine.realize as realize
  orig = realize.lower_ast
  def lower_ast(ast, device=None):
    k = orig(ast, device)
    _records.setdefault(_current[0], []).append([ast.arg.name, index_ops(k.uops)])
    return k
  realize.lower_ast = lower_ast

def pytest_runtest_setup(item):
  import tinygrad.engine.realize as realize
  realize._specs.clear()
  _current[0] = item.nodeid

def pytest_unconfigure(config):
  with open(config.getoption("--index-size-out"), "w") as f: json.dump(_records, f, indent=0)

def compare(before_path:str, after_path:str) -> None:
  # tests are matched by their id from "tests/" on (the two checkouts may live in different directories)
  def load(path:str) -> dict:
    with open(path) as f: return {k[k.split("::")[0].rfind("tests/"):]: v for k, v in json.load(f).items()}
  before, after = load(before_path), load(after_path)
  tb = ta = n = 0
  larger, smaller, other = [], 0, 0
  for test, ks in after.items():
    if test not in before: continue
    kb = before[test]
    if [k[0] for k in kb] != [k[0] for k in ks]:   # another kernel structure: compared in the totals of that test only
      other += 1
      continue
    for (name, b), (_, a) in zip(kb, ks):
      n, tb, ta = n + 1, tb + b, ta + a
      if a > b: larger.append((test, name, b, a))
      elif a < b: smaller += 1
  print(f"tests compared: {len(set(before) & set(after))}")
  print(f"kernels compared: {n} (tests with other kernel names/counts: {other})")
  print(f"index ops total: before {tb}, after {ta}; kernels smaller after: {smaller}, larger after: {len(larger)}")
  for t, name, b, a in larger: print(f"  larger: {t} {name}: {b} -> {a}")

if __name__ == "__main__": compare(sys.argv[1], sys.argv[2])
