#!/usr/bin/env python3
"""Micro-benchmarks for the UOp core: interning, toposort, PatternMatcher and graph_rewrite.

The same file runs unchanged under tinygrad 0.14 and under our Rust-core tinygrad. It only touches the public API
(UOp(op, dtype, src, arg), UOp.toposort(), UPat, PatternMatcher.rewrite, graph_rewrite, dtypes) and prints one JSON
object to stdout. Every metric is a rate (higher is better), the median over --repeats timed runs.

Fairness rules followed by every workload:
  * graphs are built outside the timed region and kept alive until the timer has stopped, so deallocation is not measured;
  * toposort and graph_rewrite always run on a freshly built graph (unique CONST args per build), so neither a per-node
    toposort cache nor any memoisation of rewrite results can turn a repeat into a cache hit;
  * the cyclic garbage collector is paused inside timed regions (like timeit), unless --gc is given;
  * every PatternMatcher is warmed up once before timing (tinygrad 0.14 compiles UPats lazily on first use).
"""
from __future__ import annotations
import argparse
import gc
import json
import platform
import statistics
import sys
import time

import tinygrad
from tinygrad.uop.ops import UOp, Ops, UPat, PatternMatcher, graph_rewrite
from tinygrad.dtype import dtypes

I = dtypes.int

# ***** fresh integers: CONST args that no UOp in this process has used yet *****

_next_fresh = 1_000_000  # far above the small constants used by the rules and the mesh

def fresh_ints(n:int) -> int:
  """Reserve n never-used integers and return the first one."""
  global _next_fresh
  base, _next_fresh = _next_fresh, _next_fresh + n
  return base

# ***** the benchmark graph: a wide/deep mesh of ADD/MUL, like index math over a few SPECIALs *****

SPECIALS = (("gidx0", 256), ("gidx1", 256), ("lidx0", 16), ("lidx1", 16))
POOL = tuple(range(2, 18))  # shared small constants; never 0 or 1, so x+0 / x*1 / x*0 never match

def build_mesh(width:int, depth:int) -> UOp:
  """SINK over `width` chains of `depth` ADD/MUL nodes. Each node uses its own column of the previous layer plus either another
  column (sharing) or a shared small CONST. Layer 0 is ADD(SPECIAL, fresh CONST), so every call builds a brand-new graph.
  By construction no node has two CONST sources, no node has the same source twice, and no ADD has a CONST operand above layer 0."""
  assert width >= 2 and depth >= 1
  base = fresh_ints(width)
  specials = [UOp(Ops.SPECIAL, I, (UOp(Ops.CONST, I, arg=size),), name) for name, size in SPECIALS]
  pool = [UOp(Ops.CONST, I, arg=v) for v in POOL]
  layer = [UOp(Ops.ADD, I, (specials[j % len(specials)], UOp(Ops.CONST, I, arg=base + j))) for j in range(width)]
  for i in range(1, depth):
    prev, layer, shift = layer, [], 1 + (i * 13) % (width - 1)
    for j in range(width):
      if (i * 31 + j) % 5 == 0: layer.append(UOp(Ops.MUL, I, (prev[j], pool[(i + j) % len(pool)])))
      else: layer.append(UOp(Ops.ADD if (i + j) % 2 else Ops.MUL, I, (prev[j], prev[(j + shift) % width])))
  return UOp(Ops.SINK, dtypes.void, tuple(layer))

# ***** rules: module-level callbacks without closures (tinygrad 0.14 rebuilds callbacks from code + globals) *****

def const_like(x:UOp, v) -> UOp: return UOp(Ops.CONST, x.dtype, arg=v)
def fold_add(a:UOp, b:UOp) -> UOp: return const_like(a, a.arg + b.arg)
def fold_mul(a:UOp, b:UOp) -> UOp: return const_like(a, a.arg * b.arg)
def reassociate_add(x:UOp, c1:UOp, c2:UOp) -> UOp: return UOp(Ops.ADD, x.dtype, (x, fold_add(c1, c2)))
def factor_mul(x:UOp, c:UOp) -> UOp: return UOp(Ops.MUL, x.dtype, (x, const_like(c, c.arg + 1)))
def double(x:UOp) -> UOp: return UOp(Ops.MUL, x.dtype, (x, const_like(x, 2)))
def zero(x:UOp) -> UOp: return const_like(x, 0)
def select(gate:UOp, a:UOp, b:UOp) -> UOp: return a if gate.arg else b
def cast_const(root:UOp, c:UOp) -> UOp: return const_like(root, c.arg)

# a realistic rule set (algebraic identities and constant folding) that matches nothing in build_mesh graphs
nomatch_rules = [
  (UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.CONST, arg=0)]), lambda x: x),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat(Ops.CONST, arg=1)]), lambda x: x),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat(Ops.CONST, arg=0, name="z")]), lambda x, z: z),
  (UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("b"))), fold_add),
  (UPat(Ops.MUL, src=(UPat.cvar("a"), UPat.cvar("b"))), fold_mul),
  (UPat(Ops.ADD, src=[UPat(Ops.ADD, src=[UPat.var("x"), UPat.cvar("c1")]), UPat.cvar("c2")]), reassociate_add),
  (UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.MUL, src=[UPat.var("x"), UPat.cvar("c")])]), factor_mul),
  (UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x"))), double),
  (UPat(Ops.SUB, src=(UPat.var("x"), UPat.var("x"))), zero),
  (UPat(Ops.XOR, src=(UPat.var("x"), UPat.var("x"))), zero),
  (UPat(Ops.MAX, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
  (UPat(Ops.AND, src=[UPat.var("x"), UPat(Ops.CONST, arg=0, name="z")]), lambda x, z: z),
  (UPat(Ops.OR, src=[UPat.var("x"), UPat(Ops.CONST, arg=0)]), lambda x: x),
  (UPat(Ops.CDIV, src=(UPat.var("x"), UPat(Ops.CONST, arg=1))), lambda x: x),
  (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.var("x")), name="root"), lambda root, x: UOp(Ops.CONST, root.dtype, arg=False)),
  (UPat(Ops.WHERE, src=(UPat.cvar("gate"), UPat.var("a"), UPat.var("b"))), select),
  (UPat(Ops.CAST, src=(UPat.cvar("c"),), name="root"), cast_const),
]
pm_nomatch = PatternMatcher(nomatch_rules)

def add_to_sub(x:UOp) -> UOp: return UOp(Ops.SUB, x.dtype, x.src, x.arg)
def mul_to_max(x:UOp) -> UOp: return UOp(Ops.MAX, x.dtype, x.src, x.arg)
def negate_const(c:UOp) -> UOp|None: return UOp(Ops.CONST, c.dtype, arg=-c.arg) if c.arg > 0 else None

# rewrites every ADD, MUL and (positive) CONST; everything else (SPECIAL, SINK) is rebuilt because its sources changed
pm_all = PatternMatcher([
  (UPat(Ops.ADD, name="x"), add_to_sub),
  (UPat(Ops.MUL, name="x"), mul_to_max),
  (UPat(Ops.CONST, name="c"), negate_const),
])

# one small rule for the PatternMatcher.rewrite loop
pm_one = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.CONST, arg=0)]), lambda x: x)])

# ***** timing *****

KEEP_GC = False

def timed(fn, *args, **kwargs):
  """(seconds, result) of one call. The result is returned so that whatever it keeps alive is freed after the timer stopped."""
  gc.collect()
  if not KEEP_GC: gc.disable()
  try:
    t0 = time.perf_counter()
    ret = fn(*args, **kwargs)
    dt = time.perf_counter() - t0
  finally: gc.enable()
  return dt, ret

def create_chain(base:int, n:int, leaf:UOp) -> list[UOp]:
  """3*n UOps: CONST(base+i), ADD(leaf, const), MUL(add, const). All new the first time, all cache hits while the result lives."""
  keep = []
  for i in range(n):
    c = UOp(Ops.CONST, I, arg=base + i)
    a = UOp(Ops.ADD, I, (leaf, c))
    keep.append(UOp(Ops.MUL, I, (a, c)))
  return keep

def toposort_again(sink:UOp, times:int) -> int: return sum(len(sink.toposort()) for _ in range(times))

def rewrite_loop(pm:PatternMatcher, u:UOp, n:int) -> None:
  rw = pm.rewrite
  for _ in range(n): rw(u)

def op_name(op) -> str: return getattr(op, "name", None) or str(op)

def op_counts(sink:UOp) -> dict[str, int]:
  ret: dict[str, int] = {}
  for u in sink.toposort(): ret[op_name(u.op)] = ret.get(op_name(u.op), 0) + 1
  return ret

def check_all_rewritten(before:dict[str, int], out:UOp) -> None:
  after = op_counts(out)
  assert sum(after.values()) == sum(before.values()), f"node count changed: {before} -> {after}"
  ok = after.get(op_name(Ops.SUB), 0) == before[op_name(Ops.ADD)] and after.get(op_name(Ops.MAX), 0) == before[op_name(Ops.MUL)]
  assert ok and op_name(Ops.ADD) not in after and op_name(Ops.MUL) not in after, f"not every node was rewritten: {before} -> {after}"

# ***** the benchmark *****

GROUPS = ("create", "toposort", "rewrite", "pm")

def run(args) -> dict:
  leaf = UOp(Ops.SPECIAL, I, (UOp(Ops.CONST, I, arg=256),), "gidx0")
  zero_node = UOp(Ops.ADD, I, (leaf, UOp(Ops.CONST, I, arg=0)))
  assert pm_one.rewrite(zero_node) is leaf, "pm_one must match its node"

  # warm-up (and correctness checks) on a small graph: compiles every PatternMatcher once, warms the interpreter
  small = build_mesh(min(args.width, 50), min(args.depth, 20))
  small_ops = op_counts(small)
  assert graph_rewrite(small, pm_nomatch) is small, "pm_nomatch must not match anything"
  check_all_rewritten(small_ops, graph_rewrite(small, pm_all))
  check_all_rewritten(small_ops, graph_rewrite(small, pm_all, bottom_up=True))
  rewrite_loop(pm_one, zero_node, 1000)
  create_chain(fresh_ints(1000), 1000, leaf)
  del small

  # node count of a build_mesh graph with these dimensions (all builds have the same structure); checked on the first timed graph
  probe = build_mesh(args.width, args.depth)
  mesh_ops = op_counts(probe)
  nodes = sum(mesh_ops.values())
  del probe

  samples: dict[str, list[float]] = {}
  def add(name:str, value:float): samples.setdefault(name, []).append(value)

  for r in range(args.repeats):
    if "create" in args.only:
      base = fresh_ints(args.new)
      dt, keep = timed(create_chain, base, args.new, leaf)
      add("uop_new_per_s", 3 * args.new / dt)
      dt, again = timed(create_chain, base, args.new, leaf)
      assert again[-1] is keep[-1], "constructing an equal UOp must return the interned one"
      add("uop_cached_per_s", 3 * args.new / dt)
      del keep, again

    if "toposort" in args.only:
      g = build_mesh(args.width, args.depth)
      dt, topo = timed(g.toposort)
      assert len(topo) == nodes, f"toposort returned {len(topo)} nodes, expected {nodes}"
      add("toposort_nodes_per_s", nodes / dt)
      dt, total = timed(toposort_again, g, args.topo_again)
      add("toposort_repeat_nodes_per_s", total / dt)
      del g, topo

    if "rewrite" in args.only:
      g = build_mesh(args.width, args.depth)
      dt, out = timed(graph_rewrite, g, pm_nomatch)
      assert out is g, "graph_rewrite with no matching rule must return its input"
      add("graph_rewrite_nomatch_nodes_per_s", nodes / dt)
      del g, out

      g = build_mesh(args.width, args.depth)
      dt, out = timed(graph_rewrite, g, pm_all)
      if r == 0: check_all_rewritten(mesh_ops, out)
      add("graph_rewrite_all_nodes_per_s", nodes / dt)
      del g, out

      g = build_mesh(args.width, args.depth)
      dt, out = timed(graph_rewrite, g, pm_all, bottom_up=True)
      if r == 0: check_all_rewritten(mesh_ops, out)
      add("graph_rewrite_bottom_up_nodes_per_s", nodes / dt)
      del g, out

    if "pm" in args.only:
      dt, _ = timed(rewrite_loop, pm_one, zero_node, args.calls)
      add("pm_rewrite_calls_per_s", args.calls / dt)

  try:
    from importlib.metadata import version
    dist_version = version("tinygrad")
  except Exception: dist_version = None
  return {
    "script": "bench_core",
    "implementation": "ours" if hasattr(tinygrad, "_core") or "tinygrad._core" in sys.modules else "tinygrad",
    "tinygrad_version": getattr(tinygrad, "__version__", None) or dist_version,
    "tinygrad_path": getattr(tinygrad, "__file__", None),
    "python": platform.python_version(),
    "python_implementation": platform.python_implementation(),
    "machine": platform.machine(),
    "repeats": args.repeats,
    "gc_during_timing": KEEP_GC,
    "params": {"width": args.width, "depth": args.depth, "graph_nodes": nodes, "new_iterations": args.new, "uops_per_create": 3 * args.new,
               "toposort_repeat_calls": args.topo_again, "pm_calls": args.calls, "nomatch_rules": len(nomatch_rules)},
    "graph_ops": mesh_ops,
    "metrics": {k: statistics.median(v) for k, v in samples.items()},
    "samples": samples,
  }

def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--quick", action="store_true", help="small sizes and 3 repeats, for smoke tests")
  p.add_argument("--repeats", type=int, default=None, help="timed runs per metric (default 5, --quick 3)")
  p.add_argument("--width", type=int, default=None, help="mesh width (default 500, --quick 100)")
  p.add_argument("--depth", type=int, default=None, help="mesh depth (default 200, --quick 50); nodes ~= width*depth")
  p.add_argument("--new", type=int, default=None, help="create iterations, 3 UOps each (default 50000, --quick 5000)")
  p.add_argument("--calls", type=int, default=None, help="PatternMatcher.rewrite calls (default 300000, --quick 30000)")
  p.add_argument("--topo-again", type=int, default=3, help="toposort calls on the same graph for toposort_repeat (default 3)")
  p.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}")
  p.add_argument("--gc", action="store_true", help="leave the cyclic garbage collector enabled while timing")
  p.add_argument("--indent", type=int, default=None, help="indent the JSON output")
  args = p.parse_args(argv)
  for name, full, quick in (("repeats", 5, 3), ("width", 500, 100), ("depth", 200, 50), ("new", 50_000, 5_000), ("calls", 300_000, 30_000)):
    if getattr(args, name) is None: setattr(args, name, quick if args.quick else full)
  args.only = [x.strip() for x in args.only.split(",") if x.strip()]
  if bad := [x for x in args.only if x not in GROUPS]: p.error(f"unknown group(s) {bad}, choose from {GROUPS}")
  global KEEP_GC
  KEEP_GC = args.gc
  print(json.dumps(run(args), indent=args.indent))

if __name__ == "__main__":
  main()
