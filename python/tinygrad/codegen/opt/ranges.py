"""A kernel's typed RANGEs: their kind, their position among the kernel's dims, how an Opt's axis counts them, and PADTO (a range
padded to a multiple, gated where it is past its size), which the tensor-core action (tc.py) uses as well as apply_opt (kernel.py)."""
from __future__ import annotations
from tinygrad.uop.ops import UOp, Ops, AxisType, identity_element
from tinygrad.dtype import dtypes
from tinygrad.helpers import round_up
from tinygrad.codegen.opt import Opt

def rtype(r:UOp) -> AxisType: return r.arg[-1]
def range_key(r:UOp) -> tuple[int, ...]:
  """The position of a range among the kernel's dims: its arg without the AxisType, (axis_id, *split path). A split of the range
  with path p makes the parts p+(0,) (outer) and p+(1,) (inner), so they sort where the range was, outer first."""
  return r.arg[:-1]

def ranges_of(ast:UOp, *kinds:AxisType) -> list[UOp]:
  """The RANGEs of an AST (of the given kinds, all without any) in dim order."""
  return sorted([u for u in ast.toposort() if u.op is Ops.RANGE and (not kinds or rtype(u) in kinds)], key=range_key)

def range_size(r:UOp) -> int|None: return r.src[0].arg if r.src[0].op is Ops.CONST else None

# Opt(op, axis, arg) numbers the ranges as tinygrad 0.14 does: by kind first (output loops, launch dims, locals, upcasts, reduces,
# unrolls), then in dim order. UNROLL's axis counts only the reduce ranges, GROUP's only the REDUCE ranges (axes_for).
_AXIS_POS = {AxisType.LOOP: -1, AxisType.THREAD: 0, AxisType.GLOBAL: 0, AxisType.LOCAL: 2, AxisType.GROUP_REDUCE: 2, AxisType.UPCAST: 3,
             AxisType.REDUCE: 4, AxisType.UNROLL: 5}

def opt_ranges(ast:UOp) -> list[UOp]:
  """The ranges in the order an Opt's axis counts them (tinygrad 0.14's): by kind, then in dim order."""
  return sorted(ranges_of(ast), key=lambda r: (_AXIS_POS.get(rtype(r), 6), range_key(r)))

# the axis id of a tensor core's warp (codegen/opt/tc.py): a LOCAL range that sorts before every other, so it is lidx0 and each warp of
# the launch is one instruction's threads
WARP = -1
def is_warp(r:UOp) -> bool: return r.arg[0] == WARP

def range_desc(r:UOp) -> str: return f"{rtype(r).name} range {range_key(r)} of size {range_size(r) if range_size(r) is not None else r.src[0]}"

def padto(ast:UOp, opt:Opt, rng:UOp, need) -> UOp:
  """rng (size n) counts to round_up(n, arg); what reads or writes memory at the extra positions is gated off, and a reduce over rng
  gets its identity there."""
  need(rtype(rng) not in (AxisType.UPCAST, AxisType.UNROLL, AxisType.THREAD), f"{range_desc(rng)}: UPCAST/UNROLL/THREAD ranges can't be padded")
  need(not is_warp(rng), f"{range_desc(rng)} is a tensor core's warp: it can't be padded")
  need((size := range_size(rng)) is not None, f"{range_desc(rng)}: a symbolic size can't be padded")
  need(type(opt.arg) is int and opt.arg >= 2, f"the multiple must be an int >= 2, got {opt.arg!r}")
  need((new := round_up(size, opt.arg)) != size, f"the size {size} of the {range_desc(rng)} is a multiple of {opt.arg} already")  # type: ignore
  need(size > new // 4, f"padding {size} to {new} more than quadruples the work")
  padded = UOp(Ops.RANGE, rng.dtype, (UOp.const(new, rng.dtype),), rng.arg)
  valid = UOp(Ops.CMPLT, dtypes.bool, (padded, UOp.const(size, rng.dtype)))
  def gate(g:UOp|None) -> UOp: return valid if g is None else UOp(Ops.AND, dtypes.bool, (g, valid))
  # built on the original nodes: the substitution replaces a node before its sources, so nested loads get their gates too
  repl: dict[UOp, UOp] = {rng: padded}
  for u in ast.toposort():
    if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op is Ops.INDEX and rng in u.src[0].toposort():
      if u.op is Ops.LOAD: repl[u] = UOp(Ops.LOAD, u.dtype, (u.src[0], u.src[1] if len(u.src) == 3 else UOp.const(0, u.dtype),
                                                               gate(u.src[2] if len(u.src) == 3 else None)))
      else: repl[u] = UOp(Ops.STORE, dtypes.void, (u.src[0], u.src[1], gate(u.src[2] if len(u.src) == 3 else None)))
    elif u.op is Ops.REDUCE and rng in u.src[1:]:
      x = u.src[0]
      repl[u] = u.replace(src=(UOp(Ops.WHERE, x.dtype, (valid, x, UOp.const(identity_element(u.arg[0], x.dtype), x.dtype))), *u.src[1:]))
  return ast.substitute(repl, name="padto")
