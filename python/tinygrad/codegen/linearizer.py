"""The linearizer: the kernel graph in an order the renderer contract accepts (tinygrad/renderer/__init__.py), blocks first (PARAMs and
BUFFERs, then the SPECIALs): everything a loop body needs that does not depend on the loop is placed before the RANGE (loop-invariant
code motion falls out of this), then the RANGE, the body and its END. Inside a block a value is placed when its first user needs it, the
sources in Sethi-Ullman order (a source that runs a loop first), so few values are live at once (codegen/liveness.py).
A walk, not a table: an order is a property of the whole graph, not a rewrite of one node.
"""
from __future__ import annotations
from typing import Any
from tinygrad.uop.ops import UOp, Ops
from tinygrad.uop import GroupOp
from tinygrad.dtype import dtypes


# ops whose sources may be computed in any order (values, and a store's address and value)
_REORDERED = GroupOp.ALU | {Ops.STORE, Ops.LOAD, Ops.INDEX, Ops.SHRINK, Ops.STACK, Ops.CAST, Ops.BITCAST}
# nodes that hold no computed value (literals, arguments, loop counters)
_PLACED = {Ops.CONST, Ops.PARAM, Ops.BUFFER, Ops.RANGE, Ops.SPECIAL}
_LOOP_NEED = 1 << 30   # the need of a loop's END: more than any straight-line value's

def linearize(sink:UOp) -> list[UOp]:
  """The graph under sink in an order the renderer contract accepts (see tinygrad/renderer/__init__.py). An explicit stack instead of
  recursion: a kernel can be an elementwise chain thousands of ops deep."""
  out: list[UOp] = [UOp(Ops.SINK, dtypes.void, (), sink.arg)]
  done: set[UOp] = set()
  open_ranges: set[UOp] = set()
  # the RANGEs each node depends on (a node without a new one shares its source's set: memory stays linear in a deep chain)
  ranges: dict[UOp, frozenset[UOp]] = {}
  empty: frozenset[UOp] = frozenset()
  # the order a value's sources are computed in (Sethi-Ullman): the source that needs the most values live first, so fewer results
  # wait for the others; a source that runs a loop (a reduce's result) before any, so nothing computed before it is live across it
  need: dict[UOp, int] = {}
  topo = sink.toposort()
  for u in topo:
    rs = [ranges[s] | {s} if s.op is Ops.RANGE else ranges[s] for s in u.src]
    ranges[u] = empty if not rs else rs[0] if all(r is rs[0] or r <= rs[0] for r in rs) else frozenset().union(*rs)
    # what comes after a loop does not run inside it: an END closes its range (so a whole loop, e.g. the partial reduce of a grouped
    # reduce before its barrier, can be placed before another loop opens)
    if u.op is Ops.END and u.src[1] in ranges[u]: ranges[u] = ranges[u] - {u.src[1]}
    if (op := u.op) in _PLACED or not (src := u.src): need[u] = 0
    elif op is Ops.END: need[u] = _LOOP_NEED
    elif len(src) == 1: need[u] = need[src[0]] or 1
    elif len(src) == 2: need[u] = a + 1 if (a := need[src[0]]) == (b := need[src[1]]) else a if a > b else b
    else: need[u] = max([1] + [n + i for i, n in enumerate(sorted([need[s] for s in src], reverse=True)) if n])
  def ready(x:UOp, r:UOp) -> bool:
    # x can be placed before RANGE r opens: it doesn't need r, and every loop it needs is already open
    return x.op is not Ops.RANGE and r not in ranges[x] and ranges[x] <= open_ranges
  for p in sorted([u for u in topo if u.op in (Ops.PARAM, Ops.BUFFER)], key=lambda p: (p.op is Ops.BUFFER, p.arg.slot)):
    done.add(p); out.append(p)
  # frames: ("visit", u), ("hoist", (x, r)): visit x if it can go before r opens, ("open", r), ("close", r), ("finish", u)
  stack: list[tuple[str, Any]] = [("visit", s) for s in reversed(sink.src)]
  # launch dims are defined once, at the top level, first
  stack.extend(("visit", sp) for sp in reversed(sorted([u for u in topo if u.op is Ops.SPECIAL], key=lambda u: u.arg)))
  while stack:
    kind, u = stack.pop()
    if kind == "visit":
      if u in done or u.op is Ops.CONST: continue
      # a loop opens only where its END is (above): one reached otherwise would render with unbalanced braces
      if u.op is Ops.RANGE:
        raise RuntimeError(f"RANGE (axis {u.arg[0]}, {u.arg[-1]}, size {u.src[0].arg if u.src[0].op is Ops.CONST else u.src[0]}) of kernel "
                           f"{getattr(sink.arg, 'name', sink.arg)} is never closed by an END")
      stack.append(("finish", u))
      if u.op is Ops.END:
        body, r = u.src[0], u.src[1]
        stack.extend([("close", r), ("visit", body), ("open", r)])
        stack.extend(("hoist", (x, r)) for x in reversed(list(body.toposort())))
      elif len(src := u.src) == 2 and u.op in _REORDERED and need[src[1]] > need[src[0]]:
        stack.extend((("visit", src[0]), ("visit", src[1])))
      elif len(src) > 2 and u.op in _REORDERED: stack.extend(("visit", s) for s in sorted(reversed(src), key=need.__getitem__))
      else: stack.extend(("visit", s) for s in reversed(src))
    elif kind == "hoist":
      x, r = u
      if x not in done and x.op is not Ops.CONST and ready(x, r): stack.append(("visit", x))
    elif kind == "open":
      done.add(u); out.append(u); open_ranges.add(u)
    elif kind == "close": open_ranges.discard(u)
    elif u not in done:
      done.add(u)
      out.append(u)
  return out

