"""Launch dims: THREAD/GLOBAL/LOCAL ranges -> SPECIAL launch dims: "core_id" for THREAD, "gidx<i>"/"lidx<i>" for the i-th GLOBAL/LOCAL
range by axis id (the renderer contract, tinygrad/renderer/__init__.py); they get no loop and no END."""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, AxisType

_SPECIAL_PREFIX = {AxisType.GLOBAL: "gidx", AxisType.LOCAL: "lidx"}

def launch_dims(sink:UOp, ren=None) -> dict[UOp, UOp]:
  """RANGE -> SPECIAL for the ranges that become launch dimensions instead of loops."""
  ret: dict[UOp, UOp] = {}
  ranges = sorted([u for u in sink.toposort() if u.op is Ops.RANGE and u.arg[-1] in (AxisType.THREAD, *_SPECIAL_PREFIX)], key=lambda r: r.arg)
  if len(threads := [r for r in ranges if r.arg[-1] is AxisType.THREAD]) > 1:
    raise ValueError(f"kernel {getattr(sink.arg, 'name', sink.arg)} has {len(threads)} THREAD ranges, at most one is launched")
  for kind, prefix in _SPECIAL_PREFIX.items():
    if len(rs := [r for r in ranges if r.arg[-1] is kind]) > 3:
      raise ValueError(f"kernel {getattr(sink.arg, 'name', sink.arg)} has {len(rs)} {kind} ranges, more than the 3 launch dims")
    ret.update({r: UOp(Ops.SPECIAL, r.dtype, (r.src[0],), f"{prefix}{i}") for i, r in enumerate(rs)})
  ret.update({r: UOp(Ops.SPECIAL, r.dtype, (r.src[0],), "core_id") for r in threads})
  return ret

pm_add_specials = PatternMatcher([(UPat(Ops.RANGE, name="r"), lambda ctx, r: ctx.get(r))])
