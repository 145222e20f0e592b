"""Scheduling calls (tinygrad/uop/call.py): FUNCTION bodies are inlined, precompiled FUNCTIONs and CALLs of hand-written kernels run
as units of their own before the rest of the graph.

  inline      FUNCTION(TUPLE(*outputs), *args) without CallInfo.precompile: GETTUPLE(FUNCTION, i) becomes outputs[i] with PARAM slot j
              replaced by args[j] (innermost calls first), so a function's body fuses with its caller like any other graph
  precompile  a precompiled FUNCTION's arguments are realized into buffers, then its body (PARAMs replaced by those buffers) is a
              schedule of its own through the schedule cache: the same body on other buffers of the same shapes reuses its kernels
              and schedule; GETTUPLE(FUNCTION, i) is then the buffer of output i
  kernel      CALL(SINK, *args): the arguments are realized into buffers (a lazy one into a buffer of its own), the SINK (written over
              placeholders, tinygrad/uop/call.py) becomes a kernel AST (hand_written_ast) run on them, and AFTER(args[i], CALL) is
              args[i]'s buffer once it ran
The calls run before the kernels of the rest of the graph (which read their results); a call's arguments are computed first. A kernel
writing into an argument that the rest of the graph also reads as it was before is an error (that read would run after the kernel).
"""
from __future__ import annotations
from typing import Callable
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, GroupOp, BottomUpGate, ParamArg, KernelInfo, after_root
from tinygrad.uop import call as uop_call
from tinygrad.uop.call import body_params, substitute_outside_calls, graph_device
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod, strides_for_shape
from tinygrad.schedule.item import ScheduleItem
from tinygrad.schedule.buffers import as_buffer, buffer_view, buffer_of, realized_view

__all__ = ["has_calls", "schedule_calls", "hand_written_ast", "inline_functions"]

def _not_realized(u:UOp) -> bool: return realized_view(u) is None

_CALL_OPS = frozenset({Ops.FUNCTION, Ops.CALL})
def has_calls(targets:list[UOp]) -> bool:
  """Whether a FUNCTION or CALL is in targets' graph (one below a realized node too: schedule_calls then finds nothing to do)."""
  return uop_call.calls_built and not _CALL_OPS.isdisjoint(u.op for u in UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort())

# ***** inlining *****

def bind_params(c:UOp) -> dict[UOp, UOp]:
  """{PARAM of c's body: the argument it stands for}; an argument whose shape or dtype is not its PARAM's is a TypeError (as 0.14)."""
  args = c.src[1:]
  ret: dict[UOp, UOp] = {}
  for p in body_params(c.src[0]):
    if p.arg.slot >= len(args): raise TypeError(f"call {c.arg.name or ''} has PARAM slot {p.arg.slot} but only {len(args)} args")
    a = args[p.arg.slot]
    if p.shape is not None and p.shape != a.shape: raise TypeError(f"arg {p.arg.slot} shape mismatch: expected {p.shape}, got {a.shape}")
    if p.dtype != a.dtype: raise TypeError(f"arg {p.arg.slot} dtype mismatch: expected {p.dtype}, got {a.dtype}")
    ret[p] = a
  return ret

def _inline(c:UOp) -> UOp|None:
  if c.arg.precompile: return None
  return substitute_outside_calls(c.src[0], bind_params(c))

def _gate_realized(x:UOp) -> None:
  if realized_view(x) is not None: raise BottomUpGate()   # the graph below a realized node is not scheduled again

pm_inline = PatternMatcher([
  (UPat(Ops.FUNCTION, name="c"), _inline),
  (UPat(Ops.GETTUPLE, src=(UPat(Ops.TUPLE, name="t"),), name="g"), lambda g, t: t.src[g.arg]),
])
pm_skip_realized = PatternMatcher([(UPat(tuple(Ops), name="x"), _gate_realized)])

def inline_functions(sink:UOp) -> UOp: return graph_rewrite(sink, pm_inline, bpm=pm_skip_realized, name="inline functions")

# ***** hand-written kernels *****

def _flat_index(ix:UOp) -> UOp|None:
  """INDEX(view, *idx) of a placeholder seen through movement ops and AFTERs -> INDEX(placeholder.after(*deps), flat index)."""
  x, idx, deps = ix.src[0], list(ix.src[1:]), []
  while x.op not in (Ops.PARAM, Ops.BUFFER):
    if x.op is Ops.AFTER:
      deps.extend(x.src[1:])
      x = x.src[0]
      continue
    src_shape, shape = after_root(x.src[0]).shape, after_root(x).shape
    if len(idx) != len(shape): raise IndexError(f"{len(idx)} indices into a kernel buffer view of shape {shape}")
    if x.op is Ops.RESHAPE:
      flat = sum((i * st for i, st in zip(idx, strides_for_shape(shape))), UOp.const(0))
      idx = [UOp.const(0) if s == 1 else flat // st % s if d else flat // st
             for d, (s, st) in enumerate(zip(src_shape, strides_for_shape(src_shape)))]
    elif x.op is Ops.PERMUTE:
      new: list = [None] * len(idx)
      for i, p in enumerate(x.arg): new[p] = idx[i]
      idx = new
    elif x.op is Ops.SHRINK: idx = [i + b for i, (b, _) in zip(idx, x.arg)]
    elif x.op is Ops.FLIP: idx = [(s - 1 - i) if f else i for i, s, f in zip(idx, src_shape, x.arg)]
    elif x.op is Ops.EXPAND: idx = [UOp.const(0) if s == 1 else i for i, s in zip(idx, src_shape)]
    else: raise TypeError(f"a hand-written kernel can index a buffer through RESHAPE/PERMUTE/SHRINK/FLIP/EXPAND views, not {x.op}")
    x = x.src[0]
  shape = x.shape if x.shape is not None else (x.src[0].arg,)   # a placeholder, or a flat kernel buffer
  if len(idx) != len(shape): raise IndexError(f"{len(idx)} indices into a kernel buffer of shape {shape}")
  flat = sum((i * st for i, st in zip(idx, strides_for_shape(shape))), UOp.const(0)) if len(idx) > 1 else idx[0]
  return UOp(Ops.INDEX, ix.dtype, (x.after(*deps), flat.simplify()))

def _load_values(u:UOp) -> UOp|None:
  # an INDEX read as a value is a load of it; a STORE's address and an INDEX's buffer are not values
  start = 1 if u.op in (Ops.STORE, Ops.INDEX) else 0
  srcs = tuple(UOp(Ops.LOAD, s.dtype, (s,)) if i >= start and s.op is Ops.INDEX else s for i, s in enumerate(u.src))
  return u.replace(src=srcs) if any(a is not b for a, b in zip(srcs, u.src)) else None   # (== on UOps builds a comparison)

def _sink_effects(s:UOp) -> UOp|None:
  # SINK(buf.after(END(...))), as 0.14's kernels end: the kernel is the stores and loops the buffer is ordered after
  if not any(x.op is Ops.AFTER for x in s.src): return None
  return s.replace(src=tuple(e for x in s.src for e in (x.src[1:] if x.op is Ops.AFTER else (x,)) if e.op is not Ops.RANGE))

def _end_each(e:UOp) -> UOp|None:
  # END(x, i, j) closes the loops i and j, opened in that order: j inside i, END(END(x, j), i) (the codegen's END closes one loop)
  if len(e.src) <= 2: return None
  body = e.src[0]
  for r in reversed(e.src[1:]): body = UOp(Ops.END, dtypes.void, (body, r))
  return body

def _end_effects(e:UOp, a:UOp) -> UOp:
  # buf.after(stores).end(i): the loop closes around the stores the buffer is ordered after
  effects = tuple(x for x in a.src[1:] if x.op is not Ops.RANGE)
  new = e.replace(src=(effects[0] if len(effects) == 1 else UOp(Ops.GROUP, dtypes.void, effects),) + e.src[1:])
  return new if (split := _end_each(new)) is None else split

pm_hand_written = PatternMatcher([
  (UPat(Ops.SINK, name="s"), _sink_effects),
  (UPat(Ops.END, src=(UPat((Ops.STORE, Ops.GROUP, Ops.END)),), allow_any_len=True, name="e"), _end_each),
  (UPat(Ops.END, src=(UPat(Ops.AFTER, name="a"),), allow_any_len=True, name="e"), _end_effects),
  (UPat(Ops.INDEX, name="ix"), _flat_index),
  (UPat(tuple(GroupOp.ALU) + (Ops.CAST, Ops.BITCAST, Ops.STORE, Ops.INDEX, Ops.STACK), name="u"), _load_values),
])

def _flat_param(p:UOp) -> UOp|None:
  # a placeholder (a PARAM with a shape and no device) -> the flat PARAM(CONST size) of a kernel
  if p.src[0].op is not Ops.STACK or p.arg.device is not None or p.shape is None: return None
  return UOp(Ops.PARAM, p.dtype, (UOp.const(prod(p.shape), dtypes.int),), ParamArg(p.arg.slot, p.dtype))
pm_flat_params = PatternMatcher([(UPat(Ops.PARAM, name="p"), _flat_param)])

def hand_written_ast(sink:UOp) -> UOp:
  """A hand-written kernel's SINK as a kernel AST the codegen takes: buffer views indexed at their flat position, values loaded,
  placeholders the flat PARAMs of a kernel."""
  # one pass, sources first: each rule sees its node once (a flat INDEX it made is final)
  ast = graph_rewrite(graph_rewrite(sink, pm_hand_written, walk=True, name="hand-written kernel"), pm_flat_params, name="kernel params")
  # the kernel's name: the SINK's KernelInfo, or a str
  if isinstance(ast.arg, KernelInfo): return ast
  return ast.replace(arg=KernelInfo("custom" if ast.arg is None else str(getattr(ast.arg, "name", ast.arg))))

# ***** the calls of a schedule *****

def _exact_buffer(u:UOp) -> UOp|None:
  return b if (b := as_buffer(u)) is not None and u.shape is not None and b.src[0].arg == prod(u.shape) else None

Schedule = Callable[[list[UOp], list[str]], tuple[list, dict[UOp, UOp]]]

def _buffers_for(args:tuple[UOp, ...], device:str, schedule:Schedule, items:list, ret:dict[UOp, UOp], done:dict[UOp, UOp],
                 written:set[int]) -> list[UOp]:
  """A BUFFER for each argument: its own, or one a schedule of the others computes it into (that schedule goes into items). The graph
  reads a computed argument from its buffer from then on, unless the call writes it (args[i] for i in written)."""
  if need := list(dict.fromkeys(a for a in args if _exact_buffer(a) is None)):
    sub, sret = schedule(need, [device] * len(need))
    items.extend(sub)
    keep = {a for i, a in enumerate(args) if i in written}
    ret.update({n: b for n, b in sret.items() if n not in keep})
    done.update({n: buffer_view(b, n.shape) for n, b in sret.items() if n.shape is not None and n not in keep})
    return [b if (b := _exact_buffer(a)) is not None else sret[a] for a in args]
  return [_exact_buffer(a) for a in args]  # type: ignore[misc]

def written_slots(ast:UOp) -> set[int]:
  """The PARAM slots a kernel AST stores to."""
  ret = set()
  for u in ast.toposort():
    if u.op is not Ops.STORE: continue
    if (b := after_root(u.src[0].src[0])).op is Ops.PARAM: ret.add(b.arg.slot)
  return ret

def _check_no_stale_reads(sink:UOp, c:UOp, written:list[UOp]) -> None:
  # a kernel writes these buffers in place: nothing else in the graph may read what they held before (it would run after the kernel)
  for u in sink.toposort(gate=_not_realized):
    if u is c or u in c.src[1:] or (u.op is Ops.AFTER and u.src[1:] == (c,)): continue   # the call, its arguments (views) and results
    for s in u.src:
      if (b := as_buffer(s)) is not None and b in written:
        raise RuntimeError(f"kernel {getattr(c.src[0].arg, 'name', c.src[0].arg)} writes a buffer (shape {s.shape}, {s.dtype}) that the graph also "
                           f"reads as it was before the kernel ({u.op} reads it): realize that read first, or use the kernel's result")

def schedule_calls(targets:list[UOp], devices:list[str], schedule:Schedule) -> tuple[list, list[UOp], dict[UOp, UOp]]:
  """(the items of the calls in targets' graph, in run order; targets with every call replaced by the buffers of its results; {node:
  BUFFER} for the calls' results and the arguments computed for them). `schedule` schedules a list of targets (create_schedule)."""
  sink = UOp(Ops.SINK, dtypes.void, tuple(targets))
  if _CALL_OPS.isdisjoint(u.op for u in sink.toposort(gate=_not_realized)): return [], targets, {}   # only realized ones
  sink = inline_functions(sink)
  items: list = []
  ret: dict[UOp, UOp] = {}
  # calls in order, innermost first: the first one in toposort has no call below it
  while (c := next((u for u in sink.toposort(gate=_not_realized) if u.op in (Ops.FUNCTION, Ops.CALL)), None)) is not None:
    device = graph_device(c) or devices[0]
    done: dict[UOp, UOp] = {}
    if c.op is Ops.CALL:
      if c.src[0].op is not Ops.SINK: raise NotImplementedError(f"a CALL of a {c.src[0].op} body can't be scheduled (only a kernel's SINK)")
      written = written_slots(ast := hand_written_ast(c.src[0]))
      bufs = _buffers_for(c.src[1:], device, schedule, items, ret, done, written)
      _check_no_stale_reads(sink, c, [b for i, b in enumerate(bufs) if i in written and _exact_buffer(c.src[1 + i]) is not None])
      items.append(ScheduleItem(ast, [buffer_of(b) for b in bufs], [], bufs))
      results = {a.after(c): b for a, b in zip(c.src[1:], bufs)}
    else:
      bufs = _buffers_for(c.src[1:], device, schedule, items, ret, done, set())
      mapping = {p: buffer_view(bufs[p.arg.slot], a.shape) for p, a in bind_params(c).items()}
      outs = list(substitute_outside_calls(c.src[0], mapping).src)
      sub, sret = schedule(outs, [device] * len(outs))
      items.extend(sub)
      results = {c.gettuple(i): sret[o] for i, o in enumerate(outs)}
    # every result: a hand-written kernel's arguments after it ran are realized now (as an assign is: running it again would write
    # again); a precompiled function's outputs are values of its arguments, which a later write may change, so only targets are bound
    ret.update(results)
    done.update({u: buffer_view(b, u.shape) for u, b in results.items()})
    sink = inline_functions(substitute_outside_calls(sink, done))
  return items, list(sink.src), ret
