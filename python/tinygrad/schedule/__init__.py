"""The scheduler: cuts a tensor graph into kernels.

`create_schedule(targets)` returns an ordered list of ScheduleItems. Each kernel's AST is
  SINK(STORE(INDEX(PARAM 0, out_idx), value), arg=KernelInfo)
where `value` is built from LOAD(INDEX(PARAM i, idx)) (gated by `valid` where a PAD makes the index invalid), CONST, CAST and ALU
ops, and REDUCE(x, *reduce_ranges, arg=(op,)). Indices are int expressions over RANGE UOps (AxisType.LOOP for the output,
AxisType.REDUCE for reductions, an inner AxisType.UNROLL of 4 in a long reduce): movement ops never make kernels, they become
index arithmetic here.

Inspecting a schedule from Python (nothing runs until asked):
  Tensor.schedule(*others)          -> ([ScheduleItem, ...] in run order, {tensor uop: BUFFER}); the tensors are left unchanged.
  Tensor.schedule_linear(*others)   -> tinygrad 0.14's LINEAR UOp: src = one CALL(kernel AST, *BUFFER UOps) per item, in run order;
  Tensor.linear_with_vars(*others)  -> (that LINEAR, var_vals) (var_vals is {}: no symbolic variables yet). Both point the tensors
                                       at their output buffers, as tinygrad does; tinygrad.engine.realize.run_linear(linear) fills them.
  ScheduleItem.call() / ScheduleItem.from_call(call) convert between the two forms.

A COPY (Tensor.to) is not a kernel: its ScheduleItem has the AST COPY(arg=KernelInfo("copy ...")) and bufs [dst, src], the source
realized (on its own device) into a buffer first.

Kernel boundaries: every target, every CONTIGUOUS, every COPY, and every REDUCE that is not on the elementwise path from the kernel output
(one reached through an EXPAND, or inside another reduce) is realized into its own buffer, and so is an elementwise value needed
at more than MAX_INDEX_USES different indices of one kernel.

Loops: the output dims become one loop (and a reduce's dims one loop) when the index arithmetic then costs no more divisions than
nested loops do; NOOPT=1 keeps one loop per dim.
"""
from __future__ import annotations
from collections import OrderedDict
from dataclasses import dataclass, field
import itertools
import threading
import weakref
from tinygrad.uop.ops import UOp, Ops, GroupOp, ParamArg, AxisType
from tinygrad.dtype import dtypes, DType
from tinygrad.helpers import prod, NOOPT, SPEC, SCACHE
from tinygrad.device import Buffer
from tinygrad.schedule.shape import shape_of
from tinygrad.schedule.indexing import IDX, iconst, iadd, imul, idiv, imod, ilt, ige, band

# ***** realized buffers *****

_buffer_ids = itertools.count()
# BUFFER UOp -> the device Buffer behind it (alive while the UOp is)
buffers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# a tensor-graph UOp that was realized -> RESHAPE(BUFFER) of its contents, so other graphs holding it reuse the result
realized: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

def new_buffer(device:str, size:int, dtype:DType) -> UOp:
  """A fresh BUFFER UOp backed by an (unallocated) device Buffer."""
  u = UOp(Ops.BUFFER, dtype, (UOp.const(size, IDX),), ParamArg(next(_buffer_ids), dtype, device=device))
  buffers[u] = Buffer(device, size, dtype)
  return u

def buffer_view(buf:UOp, shape:tuple[int, ...]) -> UOp:
  return buf if shape == shape_of(buf) else UOp(Ops.RESHAPE, buf.dtype, (buf,), tuple(shape))

def as_buffer(u:UOp) -> UOp|None:
  """The BUFFER u is a plain contiguous view of, or None."""
  if u in realized: u = realized[u]
  if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER: u = u.src[0]
  return u if u.op is Ops.BUFFER else None

# ***** schedule items *****

@dataclass(frozen=True)
class KernelInfo:
  name: str
  opts: tuple = ()   # the optimizations applied to the kernel (tinygrad/codegen/opt.py's Opt), in order
  def __repr__(self): return f"KernelInfo({self.name!r}{f', opts={self.opts!r}' if self.opts else ''})"

@dataclass
class ScheduleItem:
  """One kernel (or one copy, ast.op is COPY): its AST and its buffers in PARAM slot order (bufs[0] is the output); buf_uops are the
  BUFFER UOps behind bufs."""
  ast: UOp
  bufs: list[Buffer]
  outputs: list[UOp] = field(default_factory=list)
  buf_uops: list[UOp] = field(default_factory=list)
  @property
  def name(self) -> str: return self.ast.arg.name
  def call(self) -> UOp:
    """This item as tinygrad 0.14's CALL UOp: src (ast, *BUFFER UOps)."""
    return UOp(Ops.CALL, dtypes.void, (self.ast, *self.buf_uops))
  @staticmethod
  def from_call(call:UOp) -> ScheduleItem:
    if call.op is not Ops.CALL or not call.src: raise ValueError(f"expected a CALL UOp of a schedule, got {call.op}")
    return ScheduleItem(call.src[0], [buffers[b] for b in call.src[1:]], buf_uops=list(call.src[1:]))

def schedule_to_linear(items:list[ScheduleItem]) -> UOp:
  """A schedule as tinygrad 0.14's LINEAR UOp: one CALL per item, in run order (engine.realize.run_linear runs it)."""
  return UOp(Ops.LINEAR, dtypes.void, tuple(si.call() for si in items))

# ***** lowering a tensor graph to a kernel AST *****

MAX_INDEX_USES = 16  # distinct indices of one value in a kernel before it gets a buffer (an UNROLL range's lanes count once)
UNROLL = 4      # reduce elements per loop iteration (a power of two)

def reduce_identity(op:Ops, dt:DType) -> UOp:
  """The value a reduce starts from (and the result of reducing nothing)."""
  if op is Ops.ADD: return UOp.const(dt.const(0) if dt is not dtypes.bool else False, dt)
  if op is Ops.MUL: return UOp.const(dt.const(1) if dt is not dtypes.bool else True, dt)
  if op is Ops.MAX: return UOp.const(dt.min if dt is not dtypes.bool else False, dt)
  raise ValueError(f"no identity for reduce op {op}")

class _KernelBuilder:
  def __init__(self, scheduler:_Scheduler, root:UOp, out:UOp, merge_out:bool=False, merge_reduce:bool=False):
    self.sch, self.root, self.out, self.merge_out, self.merge_reduce = scheduler, root, out, merge_out, merge_reduce
    self.params: dict[UOp, UOp] = {}           # BUFFER -> PARAM
    self.param_list: list[UOp] = []
    self.axis = itertools.count()
    self.cache: dict[tuple, UOp] = {}
    self.reduce_dims: list[int] = []
    self.index_uses: dict[UOp, set] = {}

  def param(self, buf:UOp) -> UOp:
    if (p := self.params.get(buf)) is None:
      slot = len(self.params)
      self.params[buf] = p = UOp(Ops.PARAM, buf.dtype, (UOp.const(buf.src[0].arg, IDX),), ParamArg(slot, buf.dtype))
      self.param_list.append(buf)
    return p

  def build(self) -> UOp:
    """The kernel AST. With merge_out (merge_reduce), the output (reduced) dims are one loop, split by index arithmetic where a
    buffer needs that."""
    shape = shape_of(self.root)
    self.param(self.out)
    if self.merge_out and len(dims := [s for s in shape if s != 1]) > 1:
      r = UOp.range(prod(dims), next(self.axis), AxisType.LOOP, dtype=IDX)
      idx = tuple(iconst(0) if s == 1 else imod(idiv(r, st), s) for s, st in zip(shape, strides_for(shape)))
      self.out_dims = [prod(dims)]
    else:
      idx = tuple(iconst(0) if s == 1 else UOp.range(s, next(self.axis), AxisType.LOOP, dtype=IDX) for s in shape)
      self.out_dims = [s for s in shape if s != 1]
    self.merge_possible = len([s for s in shape if s != 1]) > 1   # else every candidate builds the same AST
    value = self.lower(self.root, idx, None, top=True)
    store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, self.out.dtype, (self.params[self.out], flat_index(idx, shape))), value))
    kind = "r" if self.reduce_dims else "E"
    name = "_".join([kind] + [str(s) for s in (self.out_dims or ([] if self.reduce_dims else [1]))] + [str(s) for s in self.reduce_dims])
    return UOp(Ops.SINK, dtypes.void, (store,), KernelInfo(name))

  def load(self, buf:UOp, i:UOp, valid:UOp|None) -> UOp:
    index = UOp(Ops.INDEX, buf.dtype, (self.param(buf), i))
    if valid is None: return UOp(Ops.LOAD, buf.dtype, (index,))
    return UOp(Ops.LOAD, buf.dtype, (index, UOp.const(0, buf.dtype) if buf.dtype is not dtypes.bool else UOp.const(False), valid))

  def lower(self, u:UOp, idx:tuple[UOp, ...], valid:UOp|None, top:bool=False, in_reduce:bool=False) -> UOp:
    key = (u, idx, valid, top, in_reduce)
    if (ret := self.cache.get(key)) is None:
      # a value needed at many different indices (x + x.flip(0), repeated) is computed once into a buffer instead of recomputed
      # for each: without this, the kernel grows exponentially with the depth of such a graph
      seen = self.index_uses.setdefault(u, set())
      seen.add((idx, valid))
      if len(seen) > MAX_INDEX_USES and u is not self.root and u.op in GroupOp.ALU:
        ret = self.load(self.sch.realize(u, self.out.arg.device), flat_index(idx, shape_of(u)), valid)
      else: ret = self._lower(u, idx, valid, top, in_reduce)
      self.cache[key] = ret
    return ret

  def _lower(self, u:UOp, idx:tuple[UOp, ...], valid:UOp|None, top:bool, in_reduce:bool) -> UOp:
    if u is not self.root and (buf := self.sch.buffer_for(u)) is not None:
      return self.load(buf, flat_index(idx, shape_of(u)), valid)
    op = u.op
    if op is Ops.BUFFER: return self.load(u, idx[0], valid)
    if op is Ops.CONST: return UOp.const(u.arg, u.dtype)
    if op is Ops.COPY: return self.load(self.sch.realize(u, u.arg[1]), flat_index(idx, shape_of(u)), valid)
    if op is Ops.CONTIGUOUS:
      if u is self.root: return self.lower(u.src[0], idx, valid, top, in_reduce)
      return self.load(self.sch.realize(u, self.out.arg.device), flat_index(idx, shape_of(u)), valid)
    if op is Ops.REDUCE:
      if u is not self.root and (not top or in_reduce):
        return self.load(self.sch.realize(u, self.out.arg.device), flat_index(idx, shape_of(u)), valid)
      rop, axes = u.arg
      in_shape = shape_of(u.src[0])
      if any(in_shape[a] == 0 for a in axes): return reduce_identity(rop, u.dtype)
      ranges, new_idx = [], list(idx)
      red = [a for a in axes if in_shape[a] != 1]
      if len(red) > 1: self.merge_possible = True
      for a in axes:
        if in_shape[a] == 1: new_idx[a] = iconst(0)
      if (self.merge_reduce and len(red) > 1) or len(red) == 1:
        sub = tuple(in_shape[a] for a in red)
        total = prod(sub)
        # unroll: UNROLL consecutive elements per iteration, combined as a tree before they meet the accumulator (more ILP, and
        # the C compiler can vectorize the loads)
        # the inner UNROLL range is expanded into its lanes by codegen (tinygrad/codegen/expander.py)
        unroll = UNROLL if not NOOPT and total % UNROLL == 0 and total >= 2 * UNROLL else 1
        ranges.append(r := UOp.range(total // unroll, next(self.axis), AxisType.REDUCE, dtype=IDX))
        self.reduce_dims.extend([total // unroll, unroll] if unroll > 1 else [total])
        if unroll > 1: ranges.append(ru := UOp.range(unroll, next(self.axis), AxisType.UNROLL, dtype=IDX))
        pos = iadd(imul(r, unroll), ru) if unroll > 1 else r
        for a, sz, st in zip(red, sub, strides_for(sub)): new_idx[a] = imod(idiv(pos, st), sz)
        return UOp(Ops.REDUCE, u.dtype, (self.lower(u.src[0], tuple(new_idx), valid, top=False, in_reduce=True), *ranges), (rop,))
      for a in red:
        ranges.append(r := UOp.range(in_shape[a], next(self.axis), AxisType.REDUCE, dtype=IDX))
        self.reduce_dims.append(in_shape[a])
        new_idx[a] = r
      x = self.lower(u.src[0], tuple(new_idx), valid, top=False, in_reduce=True)
      if not ranges: return x
      return UOp(Ops.REDUCE, u.dtype, (x, *ranges), (rop,))
    if op in GroupOp.ALU or op in (Ops.CAST, Ops.BITCAST):
      return UOp(op, u.dtype, tuple(self.lower(s, idx, valid, top, in_reduce) for s in u.src), u.arg)
    # movement ops: index arithmetic. Below an EXPAND a reduce would be recomputed for every copy, so it gets its own kernel.
    x, top = u.src[0], top and op is not Ops.EXPAND
    xs = shape_of(x)
    if op is Ops.RESHAPE:
      flat = flat_index(idx, shape_of(u))
      strides = strides_for(xs)
      new = tuple(iconst(0) if s == 1 else imod(idiv(flat, st), s) for s, st in zip(xs, strides))
      return self.lower(x, new, valid, top, in_reduce)
    if op is Ops.EXPAND: return self.lower(x, tuple(iconst(0) if s == 1 else i for s, i in zip(xs, idx)), valid, top, in_reduce)
    if op is Ops.PERMUTE:
      new_l: list[UOp] = [iconst(0)] * len(xs)
      for i, p in enumerate(u.arg): new_l[p] = idx[i]
      return self.lower(x, tuple(new_l), valid, top, in_reduce)
    if op is Ops.SHRINK: return self.lower(x, tuple(iadd(i, iconst(b)) if b else i for i, (b, _) in zip(idx, u.arg)), valid, top, in_reduce)
    if op is Ops.FLIP: return self.lower(x, tuple(iadd(iconst(s-1), imul(i, -1)) if f else i for i, s, f in zip(idx, xs, u.arg)), valid, top,
                                         in_reduce)
    if op is Ops.PAD:
      cond, new = None, []
      for i, s, (b, _) in zip(idx, xs, u.arg):
        cond = band(cond, band(ige(i, b), ilt(i, b + s)))
        new.append(iadd(i, iconst(-b)) if b else i)
      if cond is None: return self.lower(x, tuple(new), valid, top, in_reduce)
      inner = self.lower(x, tuple(new), band(valid, cond), top, in_reduce)
      return UOp(Ops.WHERE, u.dtype, (cond, inner, UOp.const(u.dtype.const(0) if u.dtype is not dtypes.bool else False, u.dtype)))
    raise RuntimeError(f"the scheduler can't lower {op}")

def strides_for(shape:tuple[int, ...]) -> tuple[int, ...]:
  ret, acc = [], 1
  for s in reversed(shape):
    ret.append(acc)
    acc *= s
  return tuple(reversed(ret))

def flat_index(idx:tuple[UOp, ...], shape:tuple[int, ...]) -> UOp:
  return iadd(iconst(0), *[imul(i, st) for i, s, st in zip(idx, shape, strides_for(shape)) if s != 1])

# ***** the scheduler *****

class _Scheduler:
  def __init__(self):
    self.items: list[ScheduleItem] = []
    self.local: dict[UOp, UOp] = {}   # intermediates realized by this schedule

  def buffer_for(self, u:UOp) -> UOp|None:
    if (b := self.local.get(u)) is not None: return b
    if (v := realized.get(u)) is not None: return as_buffer(v)
    return None

  def realize(self, u:UOp, device:str) -> UOp:
    """Makes (once) the kernel computing u on device into a new buffer; returns that BUFFER."""
    if (b := self.buffer_for(u)) is not None: return b
    if u.op is Ops.COPY: return self.copy(u)
    shape = shape_of(u)
    out = new_buffer(device, prod(shape), u.dtype)
    self.local[u] = out
    if prod(shape) == 0: return out
    # one loop over the output (and one over the reduced dims) instead of nested ones, unless that costs index arithmetic (a
    # permuted or padded input): the candidate with the fewest divisions wins, the most merged on a tie
    best = None
    for mo, mr in ((False, False),) if NOOPT else ((True, True), (True, False), (False, True), (False, False)):
      kb = _KernelBuilder(self, u, out, mo, mr)
      ast = kb.build()
      if best is None or _divmods(ast) < best[0]: best = (_divmods(ast), kb, ast)
      if not kb.merge_possible: break
    _, kb, ast = best
    self.items.append(ScheduleItem(ast, [buffers[b] for b in kb.param_list], [u], list(kb.param_list)))
    return out

  def copy(self, u:UOp) -> UOp:
    """A COPY: its source as a whole buffer on the source device (realized there unless it already is one), then a copy item."""
    src, (src_dev, dst_dev) = u.src[0], u.arg
    n = prod(shape_of(u))
    out = new_buffer(dst_dev, n, u.dtype)
    self.local[u] = out
    if n == 0: return out
    sb = b if (b := as_buffer(src)) is not None and b.src[0].arg == n else self.realize(src, src_dev)
    ast = UOp(Ops.COPY, u.dtype, (), KernelInfo(f"copy {n * u.dtype.itemsize:8d}, {dst_dev} <- {src_dev}"))
    self.items.append(ScheduleItem(ast, [buffers[out], buffers[sb]], [u], [out, sb]))
    return out

def _divmods(ast:UOp) -> int: return sum(1 for x in ast.toposort() if x.op in (Ops.CDIV, Ops.CMOD))

def _create_schedule(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """The kernels that compute `targets` (tensor-graph UOps) on `devices` (one each), in run order, and {target: BUFFER}."""
  if SPEC:  # SPEC hook: the tensor graph (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_tensor
    type_verify(UOp(Ops.SINK, dtypes.void, tuple(targets)), spec_tensor, "tensor graph")
  sch = _Scheduler()
  ret = {}
  for t, d in zip(targets, devices):
    if (b := as_buffer(t)) is not None and prod(shape_of(t)) == b.src[0].arg: ret[t] = b
    else: ret[t] = sch.realize(t, d)
  # a candidate loop structure that was not chosen may have realized an intermediate nobody reads: drop those kernels
  needed = {id(buffers[b]) for b in ret.values()}
  items = []
  for si in reversed(sch.items):
    if id(si.bufs[0]) in needed:
      items.append(si)
      needed.update(id(b) for b in si.bufs[1:])
  if SPEC:  # SPEC hook: each kernel AST (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_kernel
    for si in items: type_verify(si.ast, spec_kernel, f"kernel AST of {si.name}")
  return items[::-1], ret

# ***** the schedule cache *****
# Scheduling a graph (lowering it to kernel ASTs through index arithmetic, trying several loop structures) costs far more than running
# small kernels, and programs build the same graph again and again on other buffers (each step of a loop). A schedule depends only on
# the graph's structure, on which of its nodes are already realized, and on the buffers' devices, sizes and dtypes, not on which
# buffers they are: the key is the graph with realized nodes replaced by their buffer views and every BUFFER by a numbered placeholder.
# A hit reuses the kernel ASTs with this call's input buffers and fresh output and intermediate buffers. SCACHE=0 turns it off.

SCHEDULE_CACHE_SIZE = 1024
_schedule_cache: OrderedDict[UOp, _CachedSchedule] = OrderedDict()

@dataclass(frozen=True)
class _CachedSchedule:
  items: list[tuple[UOp, list[tuple[bool, int]], list[UOp]]]   # (ast, buffer roles: (created?, index), normalized outputs)
  created: list[tuple[str, int, DType]]                         # (device, size, dtype) of each buffer the schedule makes
  ret: list[tuple[bool, int]]                                   # the role of each target's buffer

def _normalize_into(root:UOp, norm:dict[UOp, UOp], inputs:list[UOp]) -> UOp:
  # module level, not a closure: a recursive closure is a reference cycle that would keep `norm` (and the graph) alive until a GC pass
  for u in root.toposort():
    if u in norm: continue
    if u.op is Ops.BUFFER and u in buffers:   # a device buffer (not a Variable, which stays itself)
      norm[u] = UOp(Ops.BUFFER, u.dtype, u.src, ("input", len(inputs), getattr(u.arg, "device", None)))
      inputs.append(u)
    elif (v := realized.get(u)) is not None: norm[u] = _normalize_into(v, norm, inputs)
    # a copy under another tag, never the node itself: a key holding tensor-graph nodes would keep them (and, through `realized`,
    # their buffers) alive
    else: norm[u] = UOp(u.op, u.dtype, tuple(norm[x] for x in u.src), u.arg, ("scache", u.tag))
  return norm[root]

def _normalize(targets:list[UOp], devices:list[str]) -> tuple[UOp, list[UOp], dict[UOp, UOp]]:
  """(the cache key, the graph's BUFFERs in placeholder order, {original node: normalized node})."""
  norm: dict[UOp, UOp] = {}
  inputs: list[UOp] = []
  key = UOp(Ops.SINK, dtypes.void, tuple(_normalize_into(t, norm, inputs) for t in targets), (tuple(devices), NOOPT.value))
  return key, inputs, norm

# one schedule at a time: the cache is an LRU shared by every thread, and a schedule recognizes the buffers it made by their numbers
# (first_new below), which another thread's schedule must not interleave with
_schedule_lock = threading.RLock()

def create_schedule(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """The kernels that compute `targets` (tensor-graph UOps) on `devices` (one each), in run order, and {target: BUFFER}."""
  with _schedule_lock: return _create_schedule_cached(targets, devices)

def _create_schedule_cached(targets:list[UOp], devices:list[str]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  if not SCACHE: return _create_schedule(targets, devices)
  key, inputs, norm = _normalize(targets, devices)
  if (hit := _schedule_cache.get(key)) is not None:
    _schedule_cache.move_to_end(key)
    made = [new_buffer(*spec) for spec in hit.created]
    original = {n: u for u, n in norm.items()}
    def buf(role:tuple[bool, int]) -> UOp: return made[role[1]] if role[0] else inputs[role[1]]
    items = []
    for ast, roles, outs in hit.items:
      bl = [buf(r) for r in roles]
      items.append(ScheduleItem(ast, [buffers[b] for b in bl], [original[o] for o in outs if o in original], bl))
    return items, {t: buf(r) for t, r in zip(targets, hit.ret)}
  first_new = next(_buffer_ids)   # BUFFERs numbered from here on are made by this schedule
  items, ret = _create_schedule(targets, devices)
  index = {b: i for i, b in enumerate(inputs)}
  created: dict[UOp, int] = {}
  def role(b:UOp) -> tuple[bool, int]|None:
    if b in index: return (False, index[b])
    if b.arg.slot < first_new: return None   # a buffer the key does not describe: don't cache this schedule
    return (True, created.setdefault(b, len(created)))
  roles = [[role(b) for b in si.buf_uops] for si in items]
  ret_roles = [role(ret[t]) for t in targets]
  if all(r is not None for rs in roles + [ret_roles] for r in rs):
    _schedule_cache[key] = _CachedSchedule([(si.ast, rs, [norm[o] for o in si.outputs if o in norm]) for si, rs in zip(items, roles)],  # type: ignore[misc]
                                           [(buffers[b].device, buffers[b].size, buffers[b].dtype) for b in created], ret_roles)  # type: ignore[arg-type]
    if len(_schedule_cache) > SCHEDULE_CACHE_SIZE: _schedule_cache.popitem(last=False)
  return items, ret
