"""The scheduler: cuts a tensor graph into kernels.

`create_schedule(targets)` returns an ordered list of ScheduleItems. Each kernel's AST is
  SINK(STORE(INDEX(PARAM 0, out_idx), value), arg=KernelInfo)
where `value` is built from LOAD(INDEX(PARAM i, idx)) (gated by `valid` where a PAD makes the index invalid), CONST, CAST and ALU
ops, and REDUCE(x, *reduce_ranges, arg=(op,)). Indices are weakint expressions over RANGE UOps (AxisType.LOOP for the output,
AxisType.REDUCE for reductions, an inner AxisType.UNROLL of 4 in a long reduce): movement ops never make kernels, they become
index arithmetic here.

Inspecting a schedule from Python (nothing runs until asked):
  Tensor.schedule(*others)          -> ([ScheduleItem, ...] in run order, {tensor uop: BUFFER}); the tensors are left unchanged.
  Tensor.schedule_linear(*others)   -> tinygrad 0.14's LINEAR UOp: src = one CALL(kernel AST, *BUFFER UOps) per item, in run order;
  Tensor.linear_with_vars(*others)  -> (that LINEAR, var_vals) (var_vals: {name: value} of the bound Variables). Both point the tensors
                                       at their output buffers, as tinygrad does; tinygrad.engine.realize.run_linear(linear) fills them.
  ScheduleItem.call() / ScheduleItem.from_call(call) convert between the two forms.

A write of Tensor.assign (AFTER(storage, STORE(view, value)) in the tensor graph) is a kernel whose output buffer is its storage's
(bufs[0], which it may also read: value is written in place); the kernels are ordered so that every read of a buffer's old contents
runs before the write that replaces them. The AFTERs a schedule writes are in its {uop: BUFFER} map too, and count as realized once
their tensors are bound to it.

Symbolic shapes: a bound Variable (Variable("n", 1, 64).bind(5)) in a shape or a value is scheduled unbound (strip_binds): its value
goes to var_vals, the kernel takes the Variable as an int argument at launch, buffers hold the most elements its range allows, and the
schedule cache's key is the same graph for every value.

A COPY (Tensor.to) is not a kernel: its ScheduleItem has the AST COPY(arg=KernelInfo("copy ...")) and bufs [dst, src], the source
realized (on its own device) into a buffer first.

Calls (tinygrad/function.py, Tensor.custom_kernel/callify) are resolved first (tinygrad/schedule/call.py): function bodies are inlined,
precompiled ones and hand-written kernels are items of their own before the rest.

How the graph is cut into kernels and lowered (graph rewrites, no recursion): tinygrad/schedule/rangeify.py. Buffers and which
nodes are realized: tinygrad/schedule/buffers.py.
"""
from __future__ import annotations
from collections import OrderedDict
from dataclasses import dataclass
import threading
import time
from tinygrad.uop.ops import UOp, Ops, GroupOp, live_binds, KernelInfo, rewrite_group
from tinygrad.dtype import dtypes, DType, strong_dtype
from tinygrad.helpers import prod, NOOPT, SPEC, SCACHE, NUM_CPU_THREADS, DEBUG
from tinygrad.schedule.buffers import new_buffer, buffer_of, has_buffer, as_buffer, viewed_buffer, realized_view, next_buffer_id, storage_buffer, \
  pending_write
from tinygrad.schedule.buffers import buffer_view
from tinygrad.schedule.item import ScheduleItem, schedule_to_linear
from tinygrad.schedule.multi import lower_multi, mstack, any_sharded
from tinygrad.schedule.allreduce import schedule_collectives
from tinygrad.schedule.call import has_calls, schedule_calls
from tinygrad.schedule.knobs import SCHEDULE_CACHE_SIZE, SPLIT_MIN
from tinygrad.schedule.rangeify import kernel_name, plan_buffers, best_kernel, order_items, WriteCycle, max_size

__all__ = ["ScheduleItem", "create_schedule", "create_schedule_with_vars", "schedule_to_linear", "kernel_name", "max_size"]

# ***** the scheduler *****

def _is_realized(u:UOp) -> bool: return u.op is Ops.BUFFER or realized_view(u) is not None

def _realized_buffer(u:UOp) -> UOp|None: return as_buffer(u) if realized_view(u) is not None else None

def reshaped_source(t:UOp) -> UOp:
  """t without the reshapes on top of it that are not realized yet: a reshape keeps the elements in their order, so a reshaped target
  can be its source's buffer seen with the target's shape, with no kernel of its own to copy it (shapes of ints, sources on a device)."""
  while t.op is Ops.RESHAPE and realized_view(t) is None and (s := t.src[0]).device is not None and \
      all(isinstance(d, int) for d in t.shape + s.shape):
    if realized_view(s) is not None and as_buffer(s) is None: break   # a realized part of a bigger buffer: the reshape copies it
    t = s
  return t

def _copy_item(u:UOp, out:UOp, bufs:dict[UOp, UOp]) -> tuple[ScheduleItem, UOp]:
  src, (src_dev, dst_dev) = u.src[0], u.arg
  if not isinstance(n := prod(u.shape), int): raise NotImplementedError(f"a copy of a symbolic shape {u.shape} between devices is not supported")
  sb, read = (b, b) if (b := as_buffer(src)) is not None and b.src[0].arg == n else (bufs[src], src)
  ast = UOp(Ops.COPY, u.dtype, (), KernelInfo(f"copy {n * u.dtype.itemsize:8d}, {dst_dev} <- {src_dev}"))
  return ScheduleItem(ast, [buffer_of(out), buffer_of(sb)], [u], [out, sb]), read

def _build_items(roots:dict[UOp, str], bufs:dict[UOp, UOp], buffered:set[UOp], memo:dict,
                 inline:frozenset[UOp]) -> tuple[dict[UOp, ScheduleItem], dict[UOp, list[UOp]], dict[UOp, UOp]]:
  """The kernel (or copy) of every root, from a worklist: a kernel may give a value a buffer of its own (MAX_INDEX_USES, an assign's
  value that must not be computed in place, a reduce of `inline` that did not fold), which then needs its kernel too. Returns
  (items, the nodes each item reads, bufs)."""
  items: dict[UOp, ScheduleItem] = {}
  reads: dict[UOp, list[UOp]] = {}
  work = list(roots)
  while work:
    u = work.pop()
    out = bufs[u]
    if prod(u.shape) == 0: continue
    if u.op is Ops.COPY:
      items[u], read = _copy_item(u, out, bufs)
      reads[u] = [read]
      continue
    ast, ctx = best_kernel(u, out, bufs, _realized_buffer, memo, inline)
    if ctx.unfolded:
      # a reduce planned to fold where it is used did not: it is computed once into a buffer, and this kernel loads it
      for x in ctx.unfolded:
        bufs[x] = new_buffer(out.arg.device, max_size(x.shape), x.dtype)
        work.append(x)
      ast, ctx = best_kernel(u, out, bufs, _realized_buffer, memo, inline)
    if ctx.hazard or (u in buffered and ast is not None):
      # the value reads the buffer it overwrites at other elements (a.assign(a.flip(0))), or must not be computed in place: it is
      # computed into a buffer first
      v = u.src[1].src[1]
      if v not in bufs:
        bufs[v] = new_buffer(out.arg.device, max_size(v.shape), v.dtype)
        work.append(v)
      ast, ctx = best_kernel(u, out, bufs, _realized_buffer, memo, inline)
    for x, b in ctx.extra.items():
      if x not in bufs:
        bufs[x] = b
        work.append(x)
    if ast is None: continue   # an assign with nothing to write (see build_kernel)
    params = list(ctx.params)
    items[u] = ScheduleItem(ast, [buffer_of(b) for b in params], [u], params)
    reads[u] = list(ctx.reads)
  return items, reads, bufs

def _create_schedule(targets:list[UOp], devices:list[str], calls:bool=True) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """The kernels that compute `targets` (tensor-graph UOps) on `devices` (one each), in run order, and {target: BUFFER}. calls=False:
  the graph has no (unrealized) calls left."""
  if calls and has_calls(targets):   # functions and hand-written kernels (schedule/call.py): their items first, then the graph reading them
    pre, inner, ret = schedule_calls(targets, devices, _create_schedule_cached)   # (targets are unbound already)
    sched, inner_ret = _create_schedule(inner, devices, calls=False)
    ret.update(inner_ret)
    ret.update({t: inner_ret[n] for t, n in zip(targets, inner) if n in inner_ret})
    return pre + sched, ret
  if SPEC:  # SPEC hook: the tensor graph (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_tensor
    # the part of the graph this schedule computes: what was realized before was checked then (and may hold calls, resolved then)
    todo_graph = UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort(gate=lambda u: realized_view(u) is None)
    type_verify([u for u in todo_graph if realized_view(u) is None], spec_tensor, "tensor graph")
  ret: dict[UOp, UOp] = {}
  todo: dict[UOp, str] = {}
  first: dict[UOp, UOp] = {}   # target -> its kernel's root
  # a reshaped target whose source gets a buffer anyway (a copy, what a target copies, another target) is that buffer seen with its
  # shape; one whose source would be inlined keeps its own kernel, shaped as the target (the codegen's heuristics see that shape)
  sources = [reshaped_source(t) for t in targets]
  kept = set(targets) | {s.src[0] for s in sources if s.op is Ops.COPY}
  for t, d, src in zip(targets, devices, sources):
    if src is not t and src.op is not Ops.COPY and src not in kept and as_buffer(src) is None and pending_write(src) is None:
      src = t
    if (b := as_buffer(src)) is not None and prod(t.shape) == b.src[0].arg: ret[t] = b
    elif (b := viewed_buffer(t)) is not None: ret[t] = b   # a realized tensor of a symbolic shape: a prefix of its buffer
    else:
      # a tensor that was assigned is its storage once the write has run: no buffer of its own
      todo.setdefault(w := src if (p := pending_write(src)) is None else p, d)
      first[t] = w
  plan = plan_buffers(todo, _is_realized)
  roots = plan.roots
  # an AFTER (Tensor.assign) writes into its storage's buffer
  bufs = {u: storage_buffer(u) if u.op is Ops.AFTER else new_buffer(d, max_size(u.shape), strong_dtype(u.dtype)) for u, d in roots.items()}
  for t, w in first.items(): ret[t] = bufs[w]
  for u in roots:
    if u.op is Ops.AFTER: ret[u] = bufs[u]   # realized once the schedule runs (the tensors' _bind_buffers marks it)
  # two writes whose values each read the other's storage before its write (an optimizer updating a weight and a bias, each
  # gradient reading both) can't both be in place: such a write's value is computed into a buffer of its own first, then stored
  buffered: set[UOp] = set()
  memo: dict = {}
  while True:
    items, reads, kbufs = _build_items(roots, dict(bufs), buffered, memo, plan.inline)
    try: order = order_items(list(first.values()), _dependencies(items, reads, kbufs))
    except WriteCycle as e:
      if (w := next((k for k in e.cycle if k.op is Ops.AFTER and k not in buffered), None)) is None: raise
      buffered.add(w)
      continue
    break
  sched = [items[u] for u in order]
  if SPEC:  # SPEC hook: each kernel AST (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_kernel
    for si in sched: type_verify(si.ast, spec_kernel, f"kernel AST of {si.name}")
  return sched, ret

def _dependencies(items:dict[UOp, ScheduleItem], reads:dict[UOp, list[UOp]], bufs:dict[UOp, UOp]) -> dict[UOp, list[UOp]]:
  """{root: the roots whose items run before its item}. A read names the version of a buffer it sees: a root of this schedule (its
  kernel's result, or the buffer after that AFTER's write), or a BUFFER as it was before the schedule (read directly or through a
  realized node)."""
  def version(n:UOp) -> UOp|None:
    while n.op is Ops.AFTER and n in bufs and n not in items: n = n.src[0]   # a write with nothing to write leaves the version it was on
    return n if n in bufs else as_buffer(n)
  readers: dict[UOp, list[UOp]] = {}
  deps: dict[UOp, list[UOp]] = {}
  for u, rs in reads.items():
    deps[u] = [v for n in rs if (v := version(n)) in items]   # read after write
    for n in rs:
      if (v := version(n)) is not None: readers.setdefault(v, []).append(u)
  writers: dict[UOp, UOp] = {}
  for u in items:
    if u.op is not Ops.AFTER: continue
    base = version(u.src[0])
    if (other := writers.setdefault(base, u)) is not u:
      raise RuntimeError(f"two assigns in one schedule overwrite the same contents of one buffer (through views of shapes "
                         f"{other.src[1].src[0].shape} and {u.src[1].src[0].shape}): neither sees the other's write; realize one first")
    # a write comes after the write of the version it overwrites, and after every other kernel reading that version
    deps[u] = deps[u] + ([base] if base in items else []) + [r for r in readers.get(base, []) if r is not u]
  return deps

# ***** the schedule cache *****
# Scheduling a graph (lowering it to kernel ASTs through index arithmetic, trying several loop structures) costs far more than running
# small kernels, and programs build the same graph again and again on other buffers (each step of a loop). A schedule depends only on
# the graph's structure, on which of its nodes are already realized, and on the buffers' devices, sizes and dtypes, not on which
# buffers they are: the key is the graph with realized nodes replaced by their buffer views and every BUFFER by a numbered placeholder.
# A hit reuses the kernel ASTs with this call's input buffers and fresh output and intermediate buffers. SCACHE=0 turns it off.
# The plan also depends on the settings the scheduler reads: each one is part of the key (PLAN_SETTINGS). SPEC only checks the plan
# and SCACHE only decides whether the cache is used; neither changes what is planned.

# NOOPT: no reduce splitting; NUM_CPU_THREADS: whether a sum of stored values splits; SPLIT_MIN (REDUCEOP_SPLIT_THRESHOLD): which sums split
PLAN_SETTINGS = (NOOPT, NUM_CPU_THREADS, SPLIT_MIN)
schedule_cache: OrderedDict[UOp, _CachedSchedule] = OrderedDict()

@dataclass(frozen=True)
class _CachedSchedule:
  items: list[tuple[UOp, list[tuple[bool, int]], list[UOp]]]   # (ast, buffer roles: (created?, index), normalized outputs)
  created: list[tuple[str, int, DType]]                         # (device, size, dtype) of each buffer the schedule makes
  ret: list[tuple[bool, int]]                                   # the role of each target's buffer
  writes: list[tuple[UOp, tuple[bool, int]]]                    # each AFTER (normalized) and the role of the buffer it writes

def _normalize_into(root:UOp, norm:dict[UOp, UOp], inputs:list[UOp]) -> UOp:
  # module level, not a closure: a recursive closure is a reference cycle that would keep `norm` (and the graph) alive until a GC pass.
  # A realized node stands for its buffer view (the walk does not enter the graph below it); the recursion is one view deep.
  if (v := realized_view(root)) is not None: return norm.setdefault(root, _normalize_into(v, norm, inputs))
  for u in root.toposort(gate=lambda n: n not in norm and realized_view(n) is None):
    if u in norm: continue
    if has_buffer(u):   # a device buffer (not a Variable, which stays itself)
      norm[u] = UOp(Ops.BUFFER, u.dtype, u.src, ("input", len(inputs), getattr(u.arg, "device", None)))
      inputs.append(u)
      continue
    for s in u.src:
      if s not in norm: norm[s] = _normalize_into(s, norm, inputs)   # a realized node the walk stopped at
    # a copy under another tag, never the node itself: a key holding tensor-graph nodes would keep them (and, through the realized
    # marks, their buffers) alive
    norm[u] = UOp(u.op, u.dtype, tuple(norm[x] for x in u.src), u.arg, ("scache", u.tag))
  return norm[root]

def _normalize(targets:list[UOp], devices:list[str]) -> tuple[UOp, list[UOp], dict[UOp, UOp]]:
  """(the cache key, the graph's BUFFERs in placeholder order, {original node: normalized node})."""
  norm: dict[UOp, UOp] = {}
  inputs: list[UOp] = []
  key = UOp(Ops.SINK, dtypes.void, tuple(_normalize_into(t, norm, inputs) for t in targets),
            (tuple(devices), *(v.value for v in PLAN_SETTINGS)))
  return key, inputs, norm

# one schedule at a time: the cache is an LRU shared by every thread, and a schedule recognizes the buffers it made by their numbers
# (first_new below), which another thread's schedule must not interleave with
_schedule_lock = threading.RLock()

def create_schedule(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """The kernels that compute `targets` (tensor-graph UOps) on `devices` (one each), in run order, and {target: BUFFER}. A graph with
  bound Variables needs their values to run: use create_schedule_with_vars."""
  items, ret, _ = create_schedule_with_vars(targets, devices)
  return items, ret

@rewrite_group(lambda targets, devices, ret: f"schedule {len(ret[0])} kernel{'s' if len(ret[0]) != 1 else ''}", kind="schedule")
def create_schedule_with_vars(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]:
  """create_schedule, and the values of the graph's bound Variables ({name: value}), which its kernels take at launch. The kernels
  (and the schedule cache's key) see the Variables unbound, so the same graph with other values reuses them."""
  if not any_sharded(): return _schedule_with_vars(targets, devices)
  # sharded tensors (schedule/multi.py): each device's part is scheduled as a tensor of its own; a sharded target gets an MSTACK of its
  # shards' buffers, each seen with its shard's shape
  flat, flat_devices, groups = lower_multi(targets, devices)
  # device collectives (schedule/allreduce.py) run as items of their own first; the rest of the graph reads their results' buffers
  pre, rest, pre_ret, pre_vals = schedule_collectives(flat, flat_devices, _schedule_with_vars)
  items, rest_ret, var_vals = _schedule_with_vars(rest, flat_devices)
  flat_ret = {**pre_ret, **rest_ret, **{f: rest_ret[r] for f, r in zip(flat, rest)}}
  ret = {u: b for u, b in flat_ret.items() if u not in flat and u not in rest}
  for t, d, (axis, idx) in zip(targets, devices, groups):
    if not isinstance(d, tuple): ret[t] = flat_ret[flat[idx[0]]]
    else: ret[t] = mstack([buffer_view(flat_ret[flat[i]], flat[i].shape) for i in idx], axis)
  return pre + items, ret, {**pre_vals, **var_vals}

def _schedule_with_vars(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]:
  stripped, var_vals, original = strip_binds(targets)
  with _schedule_lock: items, ret = _create_schedule_cached(stripped, devices)
  if original: ret = {original.get(u, u): b for u, b in ret.items()}
  return items, ret, var_vals

# ***** bound Variables *****
# A bound Variable (Variable.bind(5): AFTER(var, STORE(var, 5))) is in a tensor graph as a value (t * v) and inside the args of movement
# ops (shapes, shrink and pad amounts). Scheduling works on the graph with every bound Variable replaced by its Variable, and the values
# go to the kernels at launch: the graph for a KV cache of length 5 is the graph for length 6.

def unbind_arg(arg, var_vals:dict[str, int], memo:dict[UOp, UOp]):
  if isinstance(arg, UOp):
    if (ret := memo.get(arg)) is None:
      ret, vals = arg.unbind_all()
      memo[arg] = ret
      for v, val in vals.items(): _record(var_vals, v, val)
    return ret
  if isinstance(arg, tuple): return tuple(unbind_arg(a, var_vals, memo) for a in arg)
  return arg

def _record(var_vals:dict[str, int], v:UOp, val:int) -> None:
  if (old := var_vals.setdefault(v.expr, val)) != val:
    raise ValueError(f"Variable {v.expr!r} is bound to two values in one schedule: {old} and {val}")

def _has_uop(arg) -> bool:
  # a movement arg: a tuple of sizes, or of (start, end) pairs
  for a in arg:
    if type(a) is tuple:
      if type(a[0]) is not int or type(a[1]) is not int: return True
    elif type(a) is not int: return True
  return False

def strip_binds(targets:list[UOp]) -> tuple[list[UOp], dict[str, int], dict[UOp, UOp]]:
  """(targets with their bound Variables unbound, {name: value}, {stripped node: original node} for the nodes that changed). Only bound
  Variables made by Variable.bind are looked for, and only while one is alive (uop.ops.live_binds)."""
  if not live_binds: return targets, {}, {}
  new: dict[UOp, UOp] = {}
  var_vals: dict[str, int] = {}
  memo: dict[UOp, UOp] = {}
  for u in UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort(gate=lambda n: realized_view(n) is None):
    op = u.op
    if op is Ops.AFTER and u.is_bound_var:
      v, val = u.unbind()
      _record(var_vals, v, val)
      new[u] = v
      continue
    if (rv := realized_view(u)) is not None:
      # a realized node of a symbolic shape is a symbolic view of its buffer
      if rv.op is not Ops.BUFFER and any(_has_uop(x.arg) for x in (rv, *rv.src) if x.op in _SYMBOLIC_ARG):
        new[u] = _strip_view(rv, var_vals, memo)
      continue
    arg = unbind_arg(u.arg, var_vals, memo) if op in _SYMBOLIC_ARG and _has_uop(u.arg) else u.arg
    if op is Ops.SHRINK and arg is not u.arg: _check_shrink(u, arg, var_vals, memo)
    if arg is not u.arg or (new and any(s in new for s in u.src)):
      new[u] = UOp(op, u.dtype, tuple(new.get(s, s) for s in u.src), arg, u.tag)
  if not new: return targets, var_vals, {}
  return [new.get(t, t) for t in targets], var_vals, {n: u for u, n in new.items()}

_SYMBOLIC_ARG = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PAD, Ops.SHRINK})

def _check_shrink(u:UOp, arg:tuple, var_vals:dict[str, int], memo:dict[UOp, UOp]) -> None:
  # a symbolic shrink can't be checked when it is built (a Variable's range may reach past the dim): with this schedule's values it can,
  # before a kernel reads past the end of a buffer (the unbound expressions are the same nodes every step: their evaluators are cached)
  def val(x) -> int: return x if isinstance(x, int) else x.sym_infer(var_vals)
  for d, ((b, e), n) in enumerate(zip(arg, unbind_arg(u.src[0].shape, var_vals, memo))):
    if not 0 <= val(b) <= val(e) <= val(n):
      raise IndexError(f"the slice [{val(b)}:{val(e)}] of dim {d} is out of range for its size {val(n)} with {var_vals}")

def _strip_view(view:UOp, var_vals:dict[str, int], memo:dict[UOp, UOp]) -> UOp:
  # a chain of movement ops over a BUFFER
  chain = []
  while view.op in GroupOp.Movement:
    chain.append(view)
    view = view.src[0]
  for m in reversed(chain): view = UOp(m.op, m.dtype, (view,), unbind_arg(m.arg, var_vals, memo), m.tag)
  return view

def _print_scheduled(n:int, st:float, how:str) -> None:
  # DEBUG=1 says whether each schedule of more than one kernel was planned or replayed from the cache (a decode step under a warm JIT
  # schedules nothing; before its capture it hits the cache)
  if DEBUG >= 1 and n > 1: print(f"scheduled {n} kernels in {(time.perf_counter() - st) * 1e3:.2f} ms | {how}")

def _create_schedule_cached(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  st = time.perf_counter()
  if not SCACHE:
    items, ret = _create_schedule(targets, devices)
    _print_scheduled(len(items), st, "schedule cache off")
    return items, ret
  key, inputs, norm = _normalize(targets, devices)
  if (hit := schedule_cache.get(key)) is not None:
    schedule_cache.move_to_end(key)
    made = [new_buffer(*spec) for spec in hit.created]
    original = {n: u for u, n in norm.items()}
    def buf(role:tuple[bool, int]) -> UOp: return made[role[1]] if role[0] else inputs[role[1]]
    items = []
    for ast, roles, outs in hit.items:
      bl = [buf(r) for r in roles]
      items.append(ScheduleItem(ast, [buffer_of(b) for b in bl], [original[o] for o in outs if o in original], bl))
    ret = {t: buf(r) for t, r in zip(targets, hit.ret)}
    for n, r in hit.writes: ret[original[n]] = buf(r)
    _print_scheduled(len(items), st, "schedule cache hit")
    return items, ret
  first_new = next_buffer_id()   # BUFFERs numbered from here on are made by this schedule
  items, ret = _create_schedule(targets, devices)
  index = {b: i for i, b in enumerate(inputs)}
  created: dict[UOp, int] = {}
  def role(b:UOp) -> tuple[bool, int]|None:
    if b in index: return (False, index[b])
    if b.arg.slot < first_new: return None   # a buffer the key does not describe: don't cache this schedule
    return (True, created.setdefault(b, len(created)))
  roles = [[role(b) for b in si.buf_uops] for si in items]
  ret_roles = [role(ret[t]) for t in targets]
  writes = [(norm[u], role(b)) for u, b in ret.items() if u.op is Ops.AFTER and u in norm]
  if all(r is not None for rs in roles + [ret_roles, [r for _, r in writes]] for r in rs):
    schedule_cache[key] = _CachedSchedule([(si.ast, rs, [norm[o] for o in si.outputs if o in norm]) for si, rs in zip(items, roles)],  # type: ignore[misc]
                                           [(buffer_of(b).device, buffer_of(b).size, buffer_of(b).dtype) for b in created], ret_roles,  # type: ignore[arg-type]
                                           writes)  # type: ignore[arg-type]
    if len(schedule_cache) > SCHEDULE_CACHE_SIZE: schedule_cache.popitem(last=False)
  _print_scheduled(len(items), st, "schedule cache miss")
  return items, ret
