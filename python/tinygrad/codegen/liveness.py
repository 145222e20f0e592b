"""Live values of a linear kernel: how many computed values a renderer must hold at once (registers, or C variables the compiler must
keep), the measure the linearizer's order keeps small (tinygrad/codegen/linearizer.py).

A value is a UOp with a non-void dtype that the renderer computes: not a literal (CONST), an argument or array (PARAM, BUFFER), a
launch index or loop counter (SPECIAL, RANGE), or an address (INDEX/SHRINK into memory, AFTER); a lane of a vector (INDEX of a
value) is one. It is live from its position to its last use, and a use inside a loop that does not contain the definition keeps it
live to that loop's END (every iteration reads it).
"""
from __future__ import annotations
from typing import Sequence
from tinygrad.uop.ops import UOp, Ops
from tinygrad.dtype import dtypes
from tinygrad.renderer import mem_root

_NOT_VALUES = {Ops.CONST, Ops.PARAM, Ops.BUFFER, Ops.SPECIAL, Ops.RANGE, Ops.AFTER, Ops.SINK}

def is_value(u:UOp) -> bool:
  if u.dtype is dtypes.void or u.op in _NOT_VALUES: return False
  return u.op not in (Ops.INDEX, Ops.SHRINK) or mem_root(u.src[0]) is None

def live_intervals(uops:Sequence[UOp]) -> dict[UOp, tuple[int, int]]:
  """value -> (its position, the position where it dies) for the values used after their definition."""
  pos = {u: i for i, u in enumerate(uops)}
  end_of = {u.src[1]: i for i, u in enumerate(uops) if u.op is Ops.END}
  # the loops open at each position, outermost first (a RANGE is open from the next position to its END)
  depth: list[int] = []
  opened: list[UOp] = []
  loops_at: list[tuple[UOp, ...]] = []
  for u in uops:
    if u.op is Ops.END and opened: opened.pop()
    loops_at.append(tuple(opened))
    depth.append(len(opened))
    if u.op is Ops.RANGE: opened.append(u)
  ret: dict[UOp, tuple[int, int]] = {}
  for j, u in enumerate(uops):
    for s in u.src:
      if (i := pos.get(s)) is None or not is_value(s): continue
      # the loops open at the use and not at the definition share a prefix with the definition's: the first other one is the outermost
      d = depth[i]
      end = end_of.get(loops_at[j][d], j) if depth[j] > d and loops_at[j][:d] == loops_at[i] else j
      ret[s] = (i, max(ret.get(s, (i, i))[1], end))
  return ret

def peak_live(uops:Sequence[UOp]) -> int:
  """The most values live at one position of the linear kernel uops."""
  delta = [0] * (len(uops) + 1)
  for start, end in live_intervals(uops).values():
    delta[start] += 1
    delta[end] -= 1
  cur = peak = 0
  for d in delta:
    cur += d
    peak = max(peak, cur)
  return peak
