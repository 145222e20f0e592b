"""The main job, for now: build a UOp graph, simplify it with a PatternMatcher, and show what the rules did.

Run with `python -m tinygrad.apps.demo`. Match statistics are on (TRACK_MATCH_STATS >= 1) so the per-rule table prints
at exit.
"""
import pickle
import time
from tinygrad import dtypes
from tinygrad.helpers import TRACK_MATCH_STATS
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, set_track_match_stats

# before the rules are built, so they are tracked
set_track_match_stats(max(int(TRACK_MATCH_STATS.value), 1))

def const(v:int) -> UOp: return UOp(Ops.CONST, dtypes.int, arg=v)
def alu(op:Ops, *src:UOp) -> UOp: return UOp(op, dtypes.int, src)

def fold(op, a, b):
  return const({Ops.ADD: a.arg + b.arg, Ops.MUL: a.arg * b.arg}[op.op])

# a small algebraic simplifier: constant folding and identities, written as rules over the UOp IR
simplifier = PatternMatcher([
  (UPat((Ops.ADD, Ops.MUL), src=(UPat.cvar("a"), UPat.cvar("b")), name="op"), fold),
  (UPat(Ops.ADD, src=[UPat.var("x"), UPat.const(0)]), lambda x: x),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(1)]), lambda x: x),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(0).named("z")]), lambda x, z: z),
  (UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x"))), lambda x: alu(Ops.MUL, x, const(2))),
])

def index_expression(n:int) -> UOp:
  """((gidx*1 + 0) * (2*8) + lidx*(3+1)) for n lanes, with a shared subexpression: the kind of graph codegen produces."""
  gidx, lidx = UOp(Ops.SPECIAL, dtypes.int, arg="gidx0"), UOp(Ops.SPECIAL, dtypes.int, arg="lidx0")
  base = alu(Ops.ADD, alu(Ops.MUL, alu(Ops.ADD, alu(Ops.MUL, gidx, const(1)), const(0)), alu(Ops.MUL, const(2), const(8))),
             alu(Ops.MUL, lidx, alu(Ops.ADD, const(3), const(1))))
  return UOp(Ops.SINK, dtypes.void, tuple(alu(Ops.ADD, base, alu(Ops.ADD, const(i), const(0))) for i in range(n)))

if __name__ == "__main__":
  small = index_expression(2)
  print("before:")
  print(small)
  print("\nafter:")
  print(graph_rewrite(small, simplifier))

  big = index_expression(20_000)
  st = time.perf_counter()
  out = graph_rewrite(big, simplifier, name="simplify 20k lanes")
  dt = time.perf_counter() - st
  n_before, n_after = len(big.toposort()), len(out.toposort())
  print(f"\nrewrote {n_before} nodes into {n_after} in {dt*1e3:.1f} ms ({n_before/dt/1e6:.2f}M nodes/s)")
  assert pickle.loads(pickle.dumps(out)) is out, "pickling must round-trip to the interned node"
  print("pickle round-trip returns the same interned node\n\nper-rule match statistics (TRACK_MATCH_STATS=1):")
