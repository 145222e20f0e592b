"""Cutting a tensor graph into kernel ASTs with graph rewrites (no recursion in Python: graphs of any depth schedule).

1. Which nodes get a buffer (`plan_buffers`, one pass over the graph in reverse toposort order, parents first): every target,
   CONTIGUOUS and COPY, the source of a COPY, and every REDUCE that is not on the elementwise path from its kernel's output (one
   reached through an EXPAND, or inside another reduce: a reduce there would be recomputed for every element). Each of them is
   the root of one kernel (a COPY is a copy item, not a kernel). So is every AFTER(storage, STORE(view, value)) of Tensor.assign,
   whose buffer is its storage's: its kernel computes value at the indices of view and stores it where view puts each element in
   the buffer (a PAD in view gates the store), so an elementwise or reduce value is written in place, with no copy. Where value
   reads that buffer at another element than the one written (a.assign(a.flip(0))), value gets a buffer of its own first.
   Also: an elementwise value recomputed for every element of a large EXPAND that reads many buffers (MAX_FUSED_READS, MIN_RECOMPUTE),
   or, in a reduce's loop, that owns a reduce (no kernel more); a big reduce on the elementwise path of two kernels (MIN_SHARED_REDUCE);
   and an elementwise value of two or more reduces nothing else uses, needed under an EXPAND or in another reduce (one kernel runs
   them all). A reduce that counts a condition on the index (arange) or selects one element of a one-hot (a gather) gets no buffer:
   it folds into a closed form where it is used (reduce_fold.py); one of the latter that does not fold gets its buffer after all.
   Each reason is a named rule of BUFFER_RULES; DEBUG=5 prints every root and the rule that placed it (on a schedule cache miss).
2. One kernel per root (`build_kernel`): its value at the output ranges is the node INDEX(root, valid, *idx, arg="at"), "root at
   index idx, where valid holds", and `pm_index` (run bottom up, so a node is rewritten before anything below it is visited) pushes
   that node down the graph: movement ops become index arithmetic (a PAD adds to valid and a WHERE), ALU ops and casts distribute,
   a REDUCE opens new REDUCE ranges, and a node with a buffer (an input BUFFER, a realized node, another kernel's root) becomes a
   LOAD of a PARAM at the flat index. Indices are weakint UOps simplified by uop/symbolic.py.
   A value needed at more than MAX_INDEX_USES distinct indices of one kernel gets a buffer of its own instead (x + x.flip(0),
   repeated, would otherwise grow the kernel exponentially).
3. The kernels are ordered, dependencies first (`order_items`, an iterative post-order walk from the targets). A buffer that an
   AFTER writes has versions: its contents before the schedule (read through the BUFFER or a realized node), then one per AFTER
   (read through that AFTER). A kernel runs after the kernels whose results it reads (read after write), a write after the write of
   the version it overwrites, and after every kernel reading that version (write after read).

Loops: the output dims become one loop (and a reduce's dims one loop) when the index arithmetic then costs no more divisions than
nested loops do; NOOPT=1 keeps one loop per dim. A reduce of 4k elements (k >= 2) runs k iterations of REDUCE_UNROLL=4 elements, combined
as a tree.

The numbers these steps compare against (MAX_FUSED_READS, REDUCE_STAGE, ...) are tuning knobs, documented in schedule/knobs.py.
"""
from __future__ import annotations
from dataclasses import dataclass, field, replace
from enum import Enum, auto
from typing import Callable, NamedTuple
import itertools
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, GroupOp, ParamArg, AxisType, KernelInfo, BottomUpGate, ssimplify
from tinygrad.uop.ops import identity_element
from tinygrad.uop.symbolic import symbolic
from tinygrad.dtype import dtypes, strong_dtype, DType
from tinygrad.helpers import prod, strides_for_shape, NOOPT, NUM_CPU_THREADS, DEBUG
from tinygrad.schedule.buffers import new_buffer, as_buffer
from tinygrad.schedule.reduce_fold import fold_reduces
from tinygrad.schedule.knobs import MAX_INDEX_USES, REDUCE_UNROLL, REDUCE_STAGE, STAGE_BITS, STAGE_LANES, SPLIT_MIN, SPLIT_MAX_OUT, STREAM_CORES
from tinygrad.schedule.knobs import MAX_FUSED_READS, MAX_FUSED_OPS, MIN_RECOMPUTE, MAX_RECOMPUTED_OPS, MIN_RECOMPUTED_SIZE, MANY_RECOMPUTES
from tinygrad.schedule.knobs import MIN_SHARED_REDUCE, DECODE_UNROLL

AT = "at"            # the arg of INDEX(x, valid, *idx): the value of tensor-graph node x at index idx

# ***** index arithmetic *****
# Sizes are ints or, with symbolic shapes, int expressions of Variables (UOps): `_sym(s)` tells them apart, `_not1(s)` is "s may be
# more than 1" (a symbolic size always keeps its dim), and a buffer holds the most elements its Variables allow (max_size).

def _sym(s) -> bool: return isinstance(s, UOp)
def _not1(s) -> bool: return _sym(s) or s != 1

def max_size(shape:tuple) -> int:
  """The elements of a buffer for shape: prod(shape), or its largest value over the Variables' ranges when it is symbolic."""
  return n if isinstance(n := ssimplify(prod(shape)), int) else int(n.vmax)

def _u(x) -> UOp: return x if isinstance(x, UOp) else UOp.const(x)

_TRUE = UOp.const(True)

def simp(*xs:UOp|int) -> tuple[UOp, ...]:
  """Index expressions (weakint) simplified by the symbolic rules, in one graph_rewrite."""
  return graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(x if isinstance(x, UOp) else UOp.const(x) for x in xs)), symbolic, name="index").src

def scaled_sum(idx, strides) -> UOp:
  """sum(i * st), each sum i distributed term by term: (a + x//4)*4 + x%4 then meets its recombination rule as a*4 + x."""
  return sum((t * st for i, st in zip(idx, strides) for t in i.split_uop(Ops.ADD)), UOp.const(0))

def flat_index(idx:tuple[UOp, ...], shape:tuple[int, ...]) -> UOp:
  """The row-major flat position of idx in shape (simplified)."""
  return simp(scaled_sum([i for i, s in zip(idx, shape) if _not1(s)], [st for s, st in zip(shape, strides_for_shape(shape)) if _not1(s)]))[0]

def unflatten(flat:UOp, shape:tuple[int, ...]) -> tuple[UOp, ...]:
  return simp(*_unflatten(flat, shape))

def _unflatten(flat:UOp, shape:tuple[int, ...]) -> list[UOp|int]:
  # the outermost dim needs no `% s`: where the index is valid (inside every PAD around it) flat < prod(shape), and elsewhere the
  # load it feeds is gated off
  outer = next((d for d, s in enumerate(shape) if _not1(s)), None)
  return [0 if not _not1(s) else flat // st if d == outer else (flat // st) % s for d, (s, st) in enumerate(zip(shape, strides_for_shape(shape)))]

def at(x:UOp, valid:UOp, idx) -> UOp: return UOp(Ops.INDEX, x.dtype, (x, valid, *idx), AT)

# ***** 1. which nodes get a buffer *****

def _counts(u:UOp) -> bool:
  """u (a REDUCE) sums a condition (a cast bool, or a select of a constant and 0): the form schedule/reduce_fold.py folds."""
  x = u.src[0]
  if u.arg[0] is not Ops.ADD: return False
  if x.op is Ops.CAST: return x.src[0].dtype is dtypes.bool
  return x.op is Ops.WHERE and x.src[1].op is Ops.CONST and x.src[2].op is Ops.CONST and x.src[2].arg == 0

def _const(x:UOp) -> UOp|None:
  """The CONST a tensor-level constant is (Tensor.full: a CONST reshaped and expanded), or None."""
  while x.op in (Ops.RESHAPE, Ops.EXPAND): x = x.src[0]
  return x if x.op is Ops.CONST else None

def _invariant(x:UOp, axes:tuple[int, ...]) -> bool:
  """x is the same along `axes` (broadcast along them by its EXPAND, or a constant)."""
  return _const(x) is not None or (x.op is Ops.EXPAND and all(x.src[0].shape[a] == 1 for a in axes))

def _selects(u:UOp, reads:dict[UOp, frozenset[UOp]]) -> bool:
  """u (a REDUCE) sums a one-hot selection, maybe scaled: where(e == f(k), v, 0) or (e == f(k)) * v over k, with f(k) a function of
  the index alone (an arange), times factors the same for every k. reduce_fold.py folds such a sum into a load of v at e (a gather),
  so it can be computed where it is used (cross-entropy's pick of the label's log-probability, and its backward)."""
  if u.arg[0] is not Ops.ADD: return False
  x = u.src[0]
  while x.op is Ops.MUL and (rest := [s for s in x.src if not _invariant(s, u.arg[1])]) and len(rest) == 1: x = rest[0]
  return (ne := _one_hot_mask(x)) is not None and _index_compare(ne, reads)

def _one_hot_mask(x:UOp) -> UOp|None:
  """The `e != f(k)` of x = where(e == f(k), v, 0) or (e == f(k)) * v, maybe cast to a wider dtype (a half tensor's sum is in float),
  or None."""
  if x.op is Ops.CAST and x.src[0].dtype is not dtypes.bool: x = x.src[0]
  if x.op is Ops.WHERE and (z := _const(x.src[2])) is not None and z.arg == 0: eq = x.src[0]
  elif x.op is Ops.MUL and (m := next((s for s in x.src if s.op is Ops.CAST and s.src[0].dtype is dtypes.bool), None)) is not None:
    eq = m.src[0]
  else: return None
  while eq.op in (Ops.RESHAPE, Ops.EXPAND): eq = eq.src[0]   # the mask broadcast over the gathered rows' elements (x @ w[idx])
  return eq.src[0] if eq.op is Ops.CMPNE and (t := _const(eq.src[1])) is not None and t.arg is True else None

_READS_MEMORY = {Ops.BUFFER, Ops.PARAM, Ops.AFTER, Ops.COPY, Ops.CONTIGUOUS}

def _one_hot_sum(src:UOp) -> bool:
  """src, the value of a sum, is where(e == f(k), v, 0) with f(k) a function of the index alone (it reads no memory): a gather. Only one
  element is not 0, so the sum needs no stages for accuracy, and as one loop reduce_fold.py turns it into a load of v at e (a staged sum
  would not fold: a half table's row gather read the whole table)."""
  if (ne := _one_hot_mask(src)) is None or ne.op is not Ops.CMPNE: return False
  return any(not any(n.op in _READS_MEMORY for n in side.toposort()) for side in ne.src)

def _index_compare(u:UOp, reads:dict[UOp, frozenset[UOp]]) -> bool:
  """u is `e != f(k)` with f(k) a function of the index alone (an arange): the two ops of a one-hot mask `e == f(k)` are u and a
  `!= True` of it. Such a mask summed against values over k folds into a load at e (reduce_fold.py), so neither op is worth a buffer:
  X[idx] with X (60000, 784) and 128 indices would otherwise write a 128 x 60000 mask and sum over all 60000 rows for every output."""
  if u.op is Ops.CMPNE and (t := _const(u.src[1])) is not None and t.arg is True: u = u.src[0]
  return u.op is Ops.CMPNE and any(not reads[s] for s in u.src)

def _gather_index(ctx:PlanContext, u:UOp) -> bool:
  """u, an EXPAND, broadcasts a gather's index against the table's arange and nothing else: the one-hot folds into one load at the index
  (reduce_fold.py), so the index is computed once per gathered element, not once per table entry (a k-quant's 6-bit scales looked up
  in a table of their float values were given a buffer of indices, written at every step)."""
  return bool(users := ctx.users.get(u)) and all(_index_compare(w, ctx.reads) for w in users)

def buffers_read(topo:list[UOp], is_realized) -> tuple[dict[UOp, frozenset[UOp]], dict[UOp, frozenset[UOp]]]:
  """({node: the buffers it reads}, {node: the reduces it owns}), in one pass, children first. Buffers are inputs, realized nodes,
  reduces, CONTIGUOUS/COPY/AFTER (nodes with a buffer of their own), counted up to MAX_FUSED_READS + 1. The reduces a node owns (up to
  2) are those it reaches without an EXPAND or another reduce, through nodes used by nothing else: the loops it runs itself when it is
  a kernel's root, which no other kernel needs."""
  reads: dict[UOp, frozenset[UOp]] = {}
  tops: dict[UOp, frozenset[UOp]] = {}
  users: dict[UOp, int] = {}
  for u in topo:
    for s in set(u.src): users[s] = users.get(s, 0) + 1
  def of(s:UOp) -> frozenset[UOp]:   # a realized node is not in topo (the walk stops above it)
    if (r := reads.get(s)) is None: r = reads[s] = frozenset((s,)) if is_realized(s) else frozenset()
    return r
  for u in topo:
    if u.op in (Ops.BUFFER, Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER) or is_realized(u): reads[u] = frozenset((u,))
    else:
      r = frozenset().union(*(of(s) for s in u.src))
      # a reduce has a buffer, except one that counts a condition on the index alone (Tensor.arange) or selects one element (a
      # gather): folded where it is used
      if u.op is Ops.REDUCE and (r or not _counts(u)) and not (r and _selects(u, reads)):
        r = frozenset((u,))
        tops[u] = r
      elif u.op not in (Ops.EXPAND, Ops.REDUCE) and (t := frozenset().union(*(tops.get(s, frozenset()) for s in u.src if users[s] == 1))):
        tops[u] = t if len(t) <= 2 else frozenset(list(t)[:2])
      reads[u] = r if len(r) <= MAX_FUSED_READS + 1 else frozenset(list(r)[:MAX_FUSED_READS + 1])
  return reads, tops

def alu_ops(topo:list[UOp], reads:dict[UOp, frozenset[UOp]]) -> dict[UOp, frozenset[UOp]]:
  """The ALU ops each node computes itself (stopping at nodes with a buffer and at reduces), counted up to MAX_FUSED_OPS + 1."""
  ops: dict[UOp, frozenset[UOp]] = {}
  empty: frozenset[UOp] = frozenset()
  for u in topo:
    if u.op is Ops.REDUCE or reads.get(u) == {u}: ops[u] = empty
    else:
      r = frozenset().union(*(ops.get(s, empty) for s in u.src))
      if u.op in GroupOp.ALU: r = r | {u}
      ops[u] = r if len(r) <= MAX_FUSED_OPS + 1 else frozenset(list(r)[:MAX_FUSED_OPS + 1])
  return ops

def _owns_a_reduce(u:UOp, reads:frozenset[UOp], ops:frozenset[UOp], users:dict[UOp, list[UOp]]) -> bool:
  """A reduce u reads is used only on the way to u (through u's own ops and movement ops other than EXPAND): with a buffer, u's kernel
  runs that reduce, which has a buffer of its own otherwise (no kernel more). relu(x @ w + b) owns none (the backward reads x @ w + b)."""
  for r in reads:
    if r.op is not Ops.REDUCE: continue
    todo, seen, ok = [r], {r}, True
    while todo and ok:
      for v in users.get(todo.pop(), ()):
        if v is u or v in seen: continue
        if not (ok := v in ops or (v.op in GroupOp.Movement and v.op is not Ops.EXPAND)): break
        seen.add(v)
        todo.append(v)
    if ok: return True
  return False

@dataclass(frozen=True)
class BufferPlan:
  roots: dict[UOp, str]   # {kernel root: device of its buffer}
  inline: frozenset[UOp]  # reduces computed where they are used on the assumption that they fold (see _selects); a kernel gives one
                          # that does not fold a buffer of its own
  why: dict[UOp, str] = field(default_factory=dict)   # {root or inline reduce: the rule that placed it} ("target", "copy_source" or a
                                                      # BUFFER_RULES name)

class Decision(Enum):
  ROOT = auto()    # the node gets a buffer: it is the root of a kernel
  INLINE = auto()  # the node is computed where it is used (BufferPlan.inline)

@dataclass
class PlanContext:
  """What the placement rules read. reads, ops, tops and users are facts of the graph, known before the walk; top, expanded and home
  describe a node's users, filled in by the walk before it reaches the node (users first)."""
  reads: dict[UOp, frozenset[UOp]]   # the buffers each node reads (buffers_read)
  ops: dict[UOp, frozenset[UOp]]     # the ALU ops each node computes itself (alu_ops)
  tops: dict[UOp, frozenset[UOp]]    # the reduces each node owns (buffers_read)
  users: dict[UOp, list[UOp]]
  top: dict[UOp, bool] = field(default_factory=dict)            # reached from its kernel's root only through elementwise/movement ops
                                                                # without an EXPAND (absent: True)
  expanded: dict[UOp, int] = field(default_factory=dict)        # times a node is computed per element of its kernel (the EXPANDs
                                                                # between it and the root; the most over its users; absent: 1)
  home: dict[UOp, UOp|None] = field(default_factory=dict)       # the root of the kernel computing a top node (None: the kernels of two
                                                                # or more roots compute it)
  def is_top(self, u:UOp) -> bool: return self.top.get(u, True)
  def times(self, u:UOp) -> int: return self.expanded.get(u, 1)
  def reads_memory(self, u:UOp) -> bool: return any(self.reads[s] for s in u.src)

# The placement rules, one per reason a node gets a buffer (or is inlined), each a predicate over a node that no earlier decision made a
# root. A rule applies to the ops it names; the first rule that holds decides.

def inline_gather(ctx:PlanContext, u:UOp) -> bool:
  """A reduce off its kernel's elementwise path (under an EXPAND, or inside another reduce) that selects one element of a one-hot (a
  gather, see _selects) is computed where it is used: its sum folds into a load there (reduce_fold.py). A kernel gives one that does not
  fold a buffer of its own after all. Not one recomputed MANY_RECOMPUTES times or more per element (an embedding feeding a matmul): its
  one-hot summand, recomputed as often over the whole table, would get the buffer (recomputed_often: with a quantized table, a float copy
  of it written at every step); as a root (nested_reduce) it is one small kernel whose sum folds into loads all the same."""
  return not ctx.is_top(u) and ctx.reads_memory(u) and u not in ctx.tops and ctx.times(u) < MANY_RECOMPUTES

def explicit_buffer(ctx:PlanContext, u:UOp) -> bool:
  """CONTIGUOUS asks for a buffer, a COPY is a copy item into one, and an AFTER (Tensor.assign) writes into its storage's."""
  return True

def nested_reduce(ctx:PlanContext, u:UOp) -> bool:
  """A reduce off its kernel's elementwise path (reached through an EXPAND, or inside another reduce) would be recomputed for every
  element that uses it: it is computed once, into a buffer. Not a reduce that counts a condition on the index alone (Tensor.arange): it
  folds into a closed form where it is used."""
  return not ctx.is_top(u) and (ctx.reads_memory(u) or not _counts(u))

def shared_big_reduce(ctx:PlanContext, u:UOp) -> bool:
  """A reduce on the elementwise path of two or more kernels would run in each of them: one over MIN_SHARED_REDUCE elements per output
  or more is computed once, into a buffer (AdamW's m and v updates both need the weight gradient: the matmul ran twice)."""
  return ctx.home.get(u, u) is None and ctx.reads_memory(u) and max_size(u.src[0].shape) >= MIN_SHARED_REDUCE * max_size(u.shape)

def _views_used(ctx:PlanContext, u:UOp) -> int:
  """How many different views of u (u itself, or u through a chain of movement ops) non-movement ops read."""
  views, todo, seen = set(), [u], {u}
  while todo:
    v = todo.pop()
    for w in ctx.users.get(v, []):
      if w.op in GroupOp.Movement:
        if w not in seen: seen.add(w), todo.append(w)
      else: views.add(v)
  return len(views)

def big_reduce_read_twice(ctx:PlanContext, u:UOp) -> bool:
  """A reduce on its kernel's elementwise path read through two or more views (a rotary embedding pairs element i with i + d/2 of a
  matmul's output) would run once per view for every element: one over MIN_SHARED_REDUCE elements per output or more is computed once,
  into a buffer."""
  return ctx.is_top(u) and ctx.reads_memory(u) and max_size(u.src[0].shape) >= MIN_SHARED_REDUCE * max_size(u.shape) and \
    _views_used(ctx, u) >= 2

def _recomputed(ctx:PlanContext, u:UOp) -> bool:
  """u, an elementwise value, is computed again for at least MIN_RECOMPUTE elements per element of its kernel (under a large EXPAND),
  and is not part of a one-hot mask (which folds where it is summed, see _index_compare)."""
  return ctx.times(u) >= MIN_RECOMPUTE and not _index_compare(u, ctx.reads)

def recomputed_many_reads(ctx:PlanContext, u:UOp) -> bool:
  """A recomputed value reading more than MAX_FUSED_READS buffers gets one of its own: a batchnorm feeding a conv reads five, and
  recomputed for every tap and output channel it cost more than the conv."""
  return len(ctx.reads[u]) > MAX_FUSED_READS and _recomputed(ctx, u)

def recomputed_many_ops(ctx:PlanContext, u:UOp) -> bool:
  """A recomputed value of more than MAX_FUSED_OPS ALU ops gets a buffer (gelu feeding a matmul; on top of a reduce, as after a linear
  layer, it becomes that reduce's kernel: no kernel more)."""
  return len(ctx.ops[u]) > MAX_FUSED_OPS and _recomputed(ctx, u)

def recomputed_often(ctx:PlanContext, u:UOp) -> bool:
  """A value of MIN_RECOMPUTED_SIZE elements or more that reads memory, recomputed MANY_RECOMPUTES times or more per element, whose
  recomputed ALU ops in all reach MAX_RECOMPUTED_OPS, gets a buffer: a relu's gradient feeding a conv's weight gradient is computed
  again for every input channel and tap. Smaller values (a batchnorm's per-channel statistics) and values recomputed less often
  (attention's probabilities in p @ v) stay fused."""
  n = ctx.times(u)
  return _recomputed(ctx, u) and bool(ctx.reads[u]) and max_size(u.shape) >= MIN_RECOMPUTED_SIZE and n >= MANY_RECOMPUTES and \
    n * len(ctx.ops[u]) * max_size(u.shape) >= MAX_RECOMPUTED_OPS

def owns_reduce_in_loop(ctx:PlanContext, u:UOp) -> bool:
  """A recomputed value inside a reduce's loop that reads two buffers or more, takes two ALU ops or more and owns a reduce (see
  _owns_a_reduce) gets a buffer: the kernel of the reduce it owns computes it, no kernel more (relu's backward in the weight gradient's
  matmul: its compares and loads ran once per multiply-add)."""
  return _recomputed(ctx, u) and not ctx.is_top(u) and len(ctx.reads[u]) >= 2 and len(ctx.ops[u]) >= 2 and \
    _owns_a_reduce(u, ctx.reads[u], ctx.ops[u], ctx.users)

def reduces_joined(ctx:PlanContext, u:UOp) -> bool:
  """An elementwise value of two or more reduces that nothing else uses, needed under an EXPAND or in another reduce, is one kernel
  running those reduces (each would have a buffer of its own otherwise): batchnorm's backward adds two sums for the gradient of the
  mean."""
  return not ctx.is_top(u) and len(ctx.tops.get(u, ())) >= 2

class BufferRule(NamedTuple):
  name: str
  ops: frozenset[Ops]   # the ops it applies to
  holds: Callable[[PlanContext, UOp], bool]
  decision: Decision

BUFFER_RULES: tuple[BufferRule, ...] = tuple(BufferRule(f.__name__, frozenset(o), f, d) for f, o, d in (
  (inline_gather, {Ops.REDUCE}, Decision.INLINE),
  (explicit_buffer, {Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER}, Decision.ROOT),
  (nested_reduce, {Ops.REDUCE}, Decision.ROOT),
  (shared_big_reduce, {Ops.REDUCE}, Decision.ROOT),
  (big_reduce_read_twice, {Ops.REDUCE}, Decision.ROOT),
  (recomputed_many_reads, GroupOp.Elementwise, Decision.ROOT),
  (recomputed_many_ops, GroupOp.Elementwise, Decision.ROOT),
  (recomputed_often, GroupOp.Elementwise, Decision.ROOT),
  (owns_reduce_in_loop, GroupOp.Elementwise, Decision.ROOT),
  (reduces_joined, GroupOp.Elementwise, Decision.ROOT),
))
_RULES_BY_OP: dict[Ops, tuple[BufferRule, ...]] = {op: tuple(r for r in BUFFER_RULES if op in r.ops) for op in Ops}

def plan_buffers(targets:dict[UOp, str], is_realized) -> BufferPlan:
  """The kernel roots for the graph under the targets ({target: device}, the targets without a buffer yet).
  is_realized(u): u already has a buffer (the walk stops there)."""
  roots = dict(targets)
  why = dict.fromkeys(targets, "target")
  inline: set[UOp] = set()
  dev: dict[UOp, str] = {}
  reached = set(roots)
  topo = UOp(Ops.SINK, dtypes.void, tuple(roots)).toposort(gate=lambda n: not is_realized(n))
  reads, tops = buffers_read(topo, is_realized)
  users: dict[UOp, list[UOp]] = {}
  for u in topo:
    for s in dict.fromkeys(u.src): users.setdefault(s, []).append(u)
  ctx = PlanContext(reads, alu_ops(topo, reads), tops, users)
  top, expanded, home = ctx.top, ctx.expanded, ctx.home
  # The rules decide each node; the walk (users first) carries what they read down from the roots: whether a node is on its kernel's
  # elementwise path, how often it is recomputed, which kernel computes it and on which device. That depends on the decisions already
  # made above the node, which a table of rules per node cannot express.
  for u in reversed(topo):
    if u not in reached or u.op is Ops.BUFFER: continue
    if u not in roots and (rule := next((r for r in _RULES_BY_OP[u.op] if r.holds(ctx, u)), None)) is not None:
      if rule.decision is Decision.INLINE: inline.add(u)
      else: roots[u] = dev[u]
      why[u] = rule.name
    if u in roots and prod(u.shape) == 0: continue   # an empty buffer: nothing to compute
    if u.op is Ops.REDUCE and any(u.src[0].shape[a] == 0 for a in u.arg[1]): continue  # a reduce of nothing is a constant
    # the source of a COPY gets a buffer unless it is a whole buffer already (a decision about the COPY's source, made at the COPY)
    if u.op is Ops.COPY and ((b := as_buffer(u.src[0])) is None or b.src[0].arg != prod(u.shape)) and u.src[0] not in roots:
      roots[u.src[0]], why[u.src[0]] = u.arg[0], "copy_source"
    is_top = top.get(u, True)
    child_top = (u in roots or is_top) and u.op not in (Ops.EXPAND, Ops.REDUCE)
    child_expanded = (1 if u in roots else expanded.get(u, 1)) * \
      (max_size(u.shape) // max(1, max_size(u.src[0].shape)) if u.op is Ops.EXPAND and not _gather_index(ctx, u) else 1)
    child_dev = u.arg[0] if u.op is Ops.COPY else roots.get(u) or dev[u]
    child_home = u if u in roots else home.get(u)
    for s in u.src:
      reached.add(s)
      top[s] = top.get(s, True) and child_top
      if child_top: home[s] = child_home if home.get(s, child_home) is child_home else None
      expanded[s] = max(expanded.get(s, 1), child_expanded)
      dev.setdefault(s, child_dev)
  if DEBUG >= 5:
    for u, reason in why.items(): print(f"buffer plan: {reason:22s} {u.op} {u.shape} {roots.get(u, 'inline')}")
  return BufferPlan(roots, frozenset(inline), why)

# ***** 2. one kernel: pushing "the value at an index" down the graph *****

@dataclass
class KernelContext:
  root: UOp
  out: UOp                                  # its BUFFER
  bufs: dict[UOp, UOp]                      # node -> BUFFER holding it (this schedule's roots; input BUFFERs are their own)
  realized_buffer: object                   # u -> BUFFER of an already realized node, or None
  merge_reduce: bool
  memo: dict                                # index arithmetic already simplified in this schedule
  params: dict[UOp, UOp] = field(default_factory=dict)   # BUFFER -> PARAM, in slot order
  axis: itertools.count = field(default_factory=itertools.count)
  uses: dict[UOp, int] = field(default_factory=dict)
  extra: dict[UOp, UOp] = field(default_factory=dict)    # nodes this kernel gave a buffer (MAX_INDEX_USES) -> BUFFER
  reads: dict[UOp, None] = field(default_factory=dict)   # the nodes it loads (a BUFFER, a realized node, a root), in load order
  inline: frozenset[UOp] = frozenset()                   # BufferPlan.inline
  reduce_of: dict[UOp, UOp] = field(default_factory=dict)  # REDUCE range -> the tensor-graph REDUCE it sums for
  unfolded: list[UOp] = field(default_factory=list)       # the reduces of `inline` this kernel still loops over (no closed form)
  hazard: bool = False                                    # an AFTER's value reads the storage at another element than it writes
  out_merge_possible: bool = False
  reduce_merge_possible: bool = False

  def param(self, buf:UOp) -> UOp:
    if (p := self.params.get(buf)) is None:
      self.params[buf] = p = UOp(Ops.PARAM, buf.dtype, (UOp.const(buf.src[0].arg, dtypes.int),), ParamArg(len(self.params), buf.dtype))
    return p

  def load(self, buf:UOp, flat:UOp, valid:UOp) -> UOp:
    index = UOp(Ops.INDEX, buf.dtype, (self.param(buf), flat))
    if valid is _TRUE: return UOp(Ops.LOAD, buf.dtype, (index,))
    return UOp(Ops.LOAD, buf.dtype, (index, UOp.const(False if buf.dtype is dtypes.bool else buf.dtype.const(0), buf.dtype), valid))

def _from_buffer(ctx:KernelContext, x:UOp) -> UOp|None:
  u, valid, idx = x.src[0], x.src[1], x.src[2:]
  if u.op is Ops.BUFFER:
    ctx.reads[u] = None
    return ctx.load(u, idx[0], valid)
  if u is ctx.root: return None
  if (b := ctx.bufs.get(u)) is None and (b := ctx.extra.get(u)) is None and (b := ctx.realized_buffer(u)) is None:
    if u.op not in GroupOp.ALU: return None
    # a value needed at many different indices (x + x.flip(0), repeated) is computed once into a buffer instead of recomputed for
    # each: without this, the kernel grows exponentially with the depth of such a graph
    if (n := ctx.uses.get(u, 0) + 1) <= MAX_INDEX_USES:
      ctx.uses[u] = n
      return None
    ctx.extra[u] = b = new_buffer(ctx.out.arg.device, max_size(u.shape), u.dtype)
  if (flat := ctx.memo.get(key := (idx, u.shape))) is None: flat = ctx.memo[key] = flat_index(*key)
  ctx.reads[u] = None
  return ctx.load(b, flat, valid)

def _elementwise(x:UOp, u:UOp) -> UOp: return UOp(u.op, u.dtype, tuple(at(s, x.src[1], x.src[2:]) for s in u.src), u.arg)

def _reshape(ctx:KernelContext, x:UOp, u:UOp) -> UOp:
  # the same reshape of the same index recurs (a reshape/permute pattern repeated down a chain): simplified once per schedule
  if (new := ctx.memo.get(key := (x.src[2:], u.src[0].shape, u.arg))) is None: new = ctx.memo[key] = _reshape_index(*key)
  return at(u.src[0], x.src[1], new)

def _reshape_index(idx:tuple[UOp, ...], in_shape:tuple[int, ...], out_shape:tuple[int, ...]) -> tuple[UOp, ...]:
  if any(_sym(s) for s in in_shape + out_shape):
    # symbolic sizes: a reshape that only adds or drops dims of 1 keeps each index; anything else goes through the flat index
    ins, outs = [d for d, s in enumerate(in_shape) if _not1(s)], [(i, s) for i, s in zip(idx, out_shape) if _not1(s)]
    if len(ins) == len(outs) and all(in_shape[d] is s for d, (_, s) in zip(ins, outs)):
      new = [UOp.const(0)] * len(in_shape)
      for d, (i, _) in zip(ins, outs): new[d] = i
      return tuple(new)
    return unflatten(flat_index(idx, out_shape), in_shape)
  if 0 in in_shape: return unflatten(flat_index(idx, out_shape), in_shape)
  # the dims that are not 1 fall into groups of equal size on both sides (a split, a merge, or the same dim): a dim kept as it is
  # keeps its index, the others are recomputed within their group only, all in one simplification
  new = [UOp.const(0)] * len(in_shape)
  ins = [d for d, s in enumerate(in_shape) if s != 1]
  outs = [(i, s) for i, s in zip(idx, out_shape) if s != 1]
  exprs, dims, a, b = [], [], 0, 0
  while a < len(ins):
    gi, go = [ins[a]], [outs[b]]
    pi, po, a, b = in_shape[ins[a]], outs[b][1], a + 1, b + 1
    while pi != po:
      if pi < po: gi, pi, a = gi + [ins[a]], pi * in_shape[ins[a]], a + 1
      else: go, po, b = go + [outs[b]], po * outs[b][1], b + 1
    if len(gi) == 1 and len(go) == 1:
      new[gi[0]] = go[0][0]
      continue
    flat = scaled_sum([i for i, _ in go], strides_for_shape(tuple(s for _, s in go)))
    exprs.extend(_unflatten(flat, tuple(in_shape[d] for d in gi)))
    dims.extend(gi)
  for d, e in zip(dims, simp(*exprs) if exprs else ()): new[d] = e
  return tuple(new)

def _expand(x:UOp, u:UOp) -> UOp:
  return at(u.src[0], x.src[1], tuple(UOp.const(0) if s == 1 else i for s, i in zip(u.src[0].shape, x.src[2:])))

def _permute(x:UOp, u:UOp) -> UOp:
  new = [UOp.const(0)] * len(u.arg)
  for i, p in enumerate(u.arg): new[p] = x.src[2 + i]
  return at(u.src[0], x.src[1], new)

def _shrink(x:UOp, u:UOp) -> UOp: return at(u.src[0], x.src[1], simp(*[i + b if _sym(b) or b else i for i, (b, _) in zip(x.src[2:], u.arg)]))

def _flip(x:UOp, u:UOp) -> UOp:
  return at(u.src[0], x.src[1], simp(*[(s - 1) - i if f else i for i, s, f in zip(x.src[2:], u.src[0].shape, u.arg)]))

def _pad(x:UOp, u:UOp) -> UOp:
  xs, idx = u.src[0].shape, x.src[2:]
  new = simp(*[i - b if _sym(b) or b else i for i, (b, _) in zip(idx, u.arg)])
  conds = [c for i, s, (b, a) in zip(idx, xs, u.arg) if _sym(b) or _sym(a) or b or a for c in (_u(b - 1) < i, i < b + s)]
  cond = simp(_and(conds))[0] if conds else _TRUE
  if cond.op is Ops.CONST and cond.arg is True: return at(u.src[0], x.src[1], new)
  zero = UOp.const(False if u.dtype is dtypes.bool else u.dtype.const(0), u.dtype)
  if cond.op is Ops.CONST: return zero
  valid = cond if x.src[1] is _TRUE else simp(x.src[1] & cond)[0]
  return UOp(Ops.WHERE, u.dtype, (cond, at(u.src[0], valid, new), zero))

def _and(conds:list[UOp]) -> UOp:
  ret = conds[0]
  for c in conds[1:]: ret = ret & c
  return ret

def _reduce(ctx:KernelContext, x:UOp, u:UOp) -> UOp:
  (rop, axes), src, valid = u.arg, u.src[0], x.src[1]
  in_shape, idx = src.shape, list(x.src[2:])
  if any(in_shape[a] == 0 for a in axes): return UOp.const(identity_element(rop, u.dtype), u.dtype)
  for a in axes:
    if in_shape[a] == 1: idx[a] = UOp.const(0)
  if not (red := [a for a in axes if _not1(in_shape[a])]): return at(src, valid, idx)
  if len(red) > 1 and rop is Ops.ADD and dtypes.is_float(u.dtype) and _splits(u, total := ssimplify(prod(in_shape[a] for a in red))) \
     and _stored_values(ctx, src):
    # a big sum of stored values over several dims: the same sum over one flat dim (the buffer's elements in order where it is
    # contiguous), a staged sum with vector lanes in one kernel (see _stored_values)
    keep = [a for a in range(len(in_shape)) if a not in red]
    flat = src.permute(tuple(keep + red)) if keep + red != list(range(len(in_shape))) else src
    flat = flat.reshape(tuple(in_shape[a] for a in keep) + (total,))
    return at(flat._rop(Ops.ADD, (len(keep),)), valid, tuple(idx[a] for a in keep) + (UOp.const(0),))
  if len(red) > 1: ctx.reduce_merge_possible = True
  if (ctx.merge_reduce and len(red) > 1) or len(red) == 1:
    sub = tuple(in_shape[a] for a in red)
    total = ssimplify(prod(sub))
    if _sym(total):
      # a symbolic length: one loop to the Variable's value (no unroll or stages: they need a known length)
      r = UOp.range(total, next(ctx.axis), AxisType.REDUCE)
      ctx.reduce_of[r] = u
      for a, v in zip(red, unflatten(r, sub)): idx[a] = v
      return UOp(Ops.REDUCE, u.dtype, (at(src, valid, tuple(idx)), r), (rop,))
    if rop is Ops.ADD and dtypes.is_float(u.dtype) and total > REDUCE_STAGE and not _one_hot_sum(src):
      if _splits(u, total) and not _stored_values(ctx, src): return _split_reduce(ctx, u, src, valid, idx, red)
      return _staged_reduce(ctx, u, src, valid, idx, red, sub)
    # REDUCE_UNROLL consecutive elements per iteration: an inner UNROLL range the codegen expands into lanes combined as a tree before they
    # meet the accumulator (more ILP, and the C compiler can vectorize the loads)
    unroll = next((n for n in (_reduce_unroll(src), REDUCE_UNROLL) if not NOOPT and total % n == 0 and total >= 2 * n), 1)
    r = UOp.range(total // unroll, next(ctx.axis), AxisType.REDUCE)
    ctx.reduce_of[r] = u
    ranges = [r] if unroll == 1 else [r, UOp.range(unroll, next(ctx.axis), AxisType.UNROLL)]
    for a, v in zip(red, unflatten(r if unroll == 1 else r * unroll + ranges[1], sub)): idx[a] = v
    return UOp(Ops.REDUCE, u.dtype, (at(src, valid, tuple(idx)), *ranges), (rop,))
  ranges = []
  for a in red:
    ranges.append(r := UOp.range(in_shape[a], next(ctx.axis), AxisType.REDUCE))
    ctx.reduce_of[r] = u
    idx[a] = r
  if not (rop is Ops.ADD and dtypes.is_float(u.dtype) and max_size(tuple(in_shape[a] for a in red)) > REDUCE_STAGE):
    return UOp(Ops.REDUCE, u.dtype, (at(src, valid, idx), *ranges), (rop,))
  # a large float sum over separate dims: nested REDUCEs, the last dims innermost, each level over at most 2**STAGE_BITS elements as
  # _staged_reduce's (accuracy): inner dims whose product fits share a level (one accumulator for a conv's 20 x 20 taps, not two)
  levels: list[list[int]] = []   # positions in red, innermost level first
  for i in reversed(range(len(red))):
    if levels and max_size(tuple(in_shape[red[j]] for j in [i] + levels[-1])) <= 1 << STAGE_BITS: levels[-1].insert(0, i)
    else: levels.append([i])
  ret = at(src, valid, idx)
  for level in levels: ret = UOp(Ops.REDUCE, u.dtype, (ret, *(ranges[i] for i in level)), (rop,))
  return ret

def _ranges(x:UOp) -> set[UOp]: return {r for r in x.toposort() if r.op is Ops.RANGE}

def _lift_gate(red:UOp, a:UOp, ld:UOp) -> UOp|None:
  """sum(a * (g ? w[i] : 0)) -> g ? sum(a * w[i]) : 0 where the gate g tests none of the sum's ranges and none that the address i
  moves with: a padded view of a reduce (a max-pool's padding around a conv) pushes its mask into every load of the sum, and a
  conv's weight gated by the output position can't be packed or read as a vector. Its address is one the ungated positions read."""
  g, alt = ld.src[2], ld.src[1]
  if alt.op is not Ops.CONST or alt.arg != 0 or (gr := _ranges(g)) & (set(red.src[1:]) | _ranges(ld.src[0])): return None
  body = red.src[0].replace(src=tuple(ld.replace(src=ld.src[:1]) if s is ld else s for s in red.src[0].src))
  return g.where(red.replace(src=(body, *red.src[1:])), UOp.const(red.dtype.const(0), red.dtype)) if gr else None

# after the value is pushed down: the reduce-invariant gates of a sum's factors lifted out of the sum
pm_lift_gates = PatternMatcher([
  (UPat(Ops.REDUCE, arg=(Ops.ADD,), src=(UPat(Ops.MUL, src=[UPat.var("a"), UPat(Ops.LOAD, src=(UPat(), UPat(), UPat()), name="ld")]),),
        allow_any_len=True, name="red"), _lift_gate),
])

def _decodes_narrow_values(src:UOp) -> bool:
  """Whether src computes floats from packed values narrower than them (an int8/int16 cast to float, bytes bitcast to a half, a half or
  bfloat16 cast to float): a quantized or 16-bit weight's values, read at memory speed only with wide loads."""
  return any(n.op in (Ops.CAST, Ops.BITCAST) and dtypes.is_float(n.dtype) and n.src[0].dtype.itemsize < n.dtype.itemsize and
             (dtypes.is_int(n.src[0].dtype) or n.src[0].dtype in (dtypes.half, dtypes.bfloat16)) for n in src.toposort())

def _reduce_unroll(src:UOp) -> int:
  """Elements per loop iteration of a sum of src: DECODE_UNROLL for narrower stored values decoded to floats, else REDUCE_UNROLL."""
  return DECODE_UNROLL if _decodes_narrow_values(src) else REDUCE_UNROLL

def _splits(u:UOp, total) -> bool:
  """Whether a float sum of total elements into u is big enough, with few enough results, for _split_reduce."""
  return not _sym(total) and total >= SPLIT_MIN.value and max_size(u.shape) <= SPLIT_MAX_OUT and not NOOPT

def _stored_values(ctx:KernelContext, src:UOp) -> bool:
  """Whether src is a buffer's elements as they are (through movement ops and casts). Summing those only reads memory, which one core
  does about as fast as all of them, so such a sum stays one kernel: the split's partials kernel, its threads and the second launch
  only add time (benches/README.md, Design measurements). A sum of computed values splits, for the cores' arithmetic; so does every big
  sum on a machine with more cores than STREAM_CORES, where one core gets a smaller share of the memory's bandwidth (STREAM_CORES is
  as far as this has been measured)."""
  if NUM_CPU_THREADS.value > STREAM_CORES: return False
  while not (src.op is Ops.BUFFER or src in ctx.bufs or src in ctx.extra or ctx.realized_buffer(src) is not None):
    if src.op not in GroupOp.Movement and src.op not in (Ops.CAST, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD): return False
    src = src.src[0]
  return True

def _split_reduce(ctx:KernelContext, u:UOp, src:UOp, valid:UOp, idx:list, red:list[int]) -> UOp:
  """A big float sum with few results: the outermost level of _staged_reduce becomes a kernel of its own, P partial sums of consecutive
  blocks of the elements (a tensor-graph node with a buffer, built like any root: its output loop can run on every core, and its blocks
  are staged sums again), and this kernel sums the P partials. The levels, and so the accuracy, are those of the staged sum."""
  keep = [a for a in range(len(src.shape)) if a not in red]
  total, keep_shape = prod(src.shape[a] for a in red), tuple(src.shape[a] for a in keep)
  levels = -(-(total - 1).bit_length() // STAGE_BITS)
  chunk = 1 << (-(-(total - 1).bit_length() // levels) * (levels - 1))
  parts = -(-total // chunk)
  flat = src.permute(tuple(keep + red)) if keep + red != list(range(len(src.shape))) else src
  flat = flat.reshape(keep_shape + (total,))
  if parts * chunk != total: flat = flat.pad(((0, 0),) * len(keep) + ((0, parts * chunk - total),))   # zeros add nothing
  part = flat.reshape(keep_shape + (parts, chunk))._rop(Ops.ADD, (len(keep) + 1,))
  # one buffer per schedule for the partials, shared by the loop structures best_kernel tries
  if (b := ctx.memo.get(key := ("split reduce", part))) is None: b = ctx.memo[key] = new_buffer(ctx.out.arg.device, prod(part.shape), part.dtype)
  ctx.extra[part] = b
  unroll = REDUCE_UNROLL if parts % REDUCE_UNROLL == 0 and parts >= 2 * REDUCE_UNROLL else 1
  ranges = [UOp.range(parts // unroll, next(ctx.axis), AxisType.REDUCE)]
  ctx.reduce_of[ranges[0]] = u
  if unroll > 1: ranges.append(UOp.range(unroll, next(ctx.axis), AxisType.UNROLL))
  i = ranges[0] if unroll == 1 else ranges[0] * unroll + ranges[1]
  return UOp(Ops.REDUCE, u.dtype, (at(part, valid, tuple(idx[a] for a in keep) + (i, UOp.const(0))), *ranges), (Ops.ADD,))

def _staged_reduce(ctx:KernelContext, u:UOp, src:UOp, valid:UOp, idx:list, red:list[int], sub:tuple[int, ...]) -> UOp:
  """A float sum of n > REDUCE_STAGE elements as nested REDUCEs in the kernel, each level over at most about 2**STAGE_BITS
  elements: the innermost sums consecutive blocks in their own accumulators, each outer level sums the sums of the level inside.
  One long accumulation loses about n*eps; L levels about L*n**(1/L)*eps (numpy's pairwise summation in practice) for one add per
  block."""
  total = prod(sub)
  levels = -(-(total - 1).bit_length() // STAGE_BITS)
  bits = -(-(total - 1).bit_length() // levels)
  sizes = [-(-total // (1 << (bits * (levels - 1))))] + [1 << bits] * (levels - 1)   # outermost first; a power of two inside
  # the innermost level keeps STAGE_LANES accumulators, one per lane of consecutive elements (REDUCE(REDUCE(x, r), lanes): the lanes are
  # summed after the loop), which the C compiler turns into vector loads and adds: one long dependency chain of scalar adds otherwise
  # bounds a big sum below memory speed
  unroll = 1 if NOOPT else STAGE_LANES
  rngs = [UOp.range(s if i < levels - 1 else s // unroll, next(ctx.axis), AxisType.REDUCE) for i, s in enumerate(sizes)]
  for r, s in zip(rngs, sizes):
    ctx.reduce_of[r] = u
  inner = [rngs[-1]] if unroll == 1 else [rngs[-1], UOp.range(unroll, next(ctx.axis), AxisType.UNROLL)]
  flat = inner[0] if unroll == 1 else inner[0] * unroll + inner[1]
  for r, stride in zip(rngs[:-1], [1 << (bits * (levels - 1 - i)) for i in range(levels - 1)]): flat = flat + r * stride
  for a, v in zip(red, unflatten(flat, sub)): idx[a] = v
  if prod(sizes) == total: x = at(src, valid, tuple(idx))
  else:
    # the last block runs past the end: its extra elements add 0
    cond = simp(flat < total)[0]
    x = UOp(Ops.WHERE, u.dtype, (cond, at(src, cond if valid is _TRUE else simp(valid & cond)[0], tuple(idx)), UOp.const(u.dtype.const(0), u.dtype)))
  # each lane sums its own elements through every level (REDUCE(REDUCE(REDUCE(x, r_inner), r_outer...), lanes)): the lanes are vector
  # registers the outer levels add to lane by lane, and only the last level's sums meet in a tree (adding the 16 lanes after each inner
  # block costs a horizontal sum, ~20 shuffles and adds, per 16 vector loads). The chains are as long as before: accuracy is unchanged
  x = UOp(Ops.REDUCE, u.dtype, (x, inner[0]), (Ops.ADD,))
  for r in reversed(rngs[:-1]): x = UOp(Ops.REDUCE, u.dtype, (x, r), (Ops.ADD,))
  if unroll > 1: x = UOp(Ops.REDUCE, u.dtype, (x, inner[1]), (Ops.ADD,))
  return x

def _value_dtype(u:UOp) -> DType:
  """The dtype a weak value computes in: the default int/float it is stored as, int64 for an int whose range the default int can't
  hold (a Variable declared past int32, as Tensor(2**40) is int64) or that is computed from such an int (v // 2**20: its value fits,
  but v must not be cut before the division)."""
  dt = strong_dtype(u.dtype)
  if u.dtype is dtypes.weakint and (not (dt.min <= u.vmin and u.vmax <= dt.max) or
                                    any(s.dtype is dtypes.weakint and _value_dtype(s) is dtypes.int64 for s in u.src)): return dtypes.int64
  return dt

def _commit_weak(x:UOp, u:UOp) -> UOp:
  # a weak node (an expression of Python values, Tensor(3) + 0.5) computes in the default int/float, the dtype it is stored as
  dt = _value_dtype(u)
  arg = dt if u.op is Ops.CAST else dt.const(u.arg) if u.op is Ops.CONST else u.arg
  # an int64 op's weak int operands that compute in the default int (the 1 of v + 1) are committed on their own: widen them
  src = tuple(s.cast(dt) if u.op in GroupOp.ALU and s.dtype is dtypes.weakint and _value_dtype(s) is not dt else s for s in u.src)
  return at(UOp(u.op, dt, src, arg), x.src[1], x.src[2:])

def _at(ops) -> UPat: return UPat(Ops.INDEX, arg=AT, src=(UPat(ops, name="u"),), allow_any_len=True, name="x")

pm_index = PatternMatcher([
  # a Variable (t * v): its value, the same at every index (the kernel's int argument; committed to int by the codegen)
  (UPat(Ops.INDEX, arg=AT, src=(UPat(Ops.BUFFER, name="u"),), allow_any_len=True),
   lambda u: u.cast(_value_dtype(u)) if u.is_variable else None),
  (UPat(Ops.INDEX, arg=AT, name="x"), _from_buffer),      # first: input BUFFERs, realized nodes and other kernels' roots are loaded
  (UPat(Ops.INDEX, arg=AT, src=(UPat(dtype=tuple(dtypes.weaks), name="u"),), allow_any_len=True, name="x"), _commit_weak),
  (_at(Ops.CONST), lambda x, u: u),
  (_at(tuple(GroupOp.ALU) + (Ops.CAST, Ops.BITCAST)), _elementwise),
  (_at(Ops.RESHAPE), _reshape),
  (_at(Ops.EXPAND), _expand),
  (_at(Ops.PERMUTE), _permute),
  (_at(Ops.SHRINK), _shrink),
  (_at(Ops.FLIP), _flip),
  (_at(Ops.PAD), _pad),
  (_at(Ops.REDUCE), _reduce),
  (_at(Ops.CONTIGUOUS), lambda x, u: at(u.src[0], x.src[1], x.src[2:])),   # the kernel's root (elsewhere it has a buffer)
  # autograd's markers (tinygrad/gradient.py) are the identity on values
  (_at((Ops.DETACH, Ops.CONTIGUOUS_BACKWARD)), lambda x, u: at(u.src[0], x.src[1], x.src[2:])),
])

def _gate(ctx:KernelContext, x:UOp) -> None:
  # the walk stops at nodes this kernel loads from a buffer: the graph below them belongs to other kernels (or was realized)
  if x is not ctx.root and (x.op is Ops.BUFFER or x in ctx.bufs or ctx.realized_buffer(x) is not None): raise BottomUpGate()

# run before a node's sources are visited
pm_kernel_region = PatternMatcher([(UPat(tuple(GroupOp.Movement) + tuple(GroupOp.ALU) + (Ops.REDUCE, Ops.CONTIGUOUS, Ops.COPY, Ops.BUFFER,
                                         Ops.CAST, Ops.BITCAST, Ops.AFTER), name="x"), _gate)])

def _no_buffer(u:UOp) -> None: return None

def build_kernel(root:UOp, out:UOp, bufs:dict[UOp, UOp], realized_buffer, merge_out:bool, merge_reduce:bool,
                 memo:dict|None=None, inline:frozenset[UOp]=frozenset()) -> tuple[UOp|None, KernelContext]:
  """The kernel AST computing root into the BUFFER out. With merge_out (merge_reduce) the output (reduced) dims are one loop,
  split again by index arithmetic where a buffer needs that. For an AFTER root: the kernel writing its value into its storage
  (None when there is nothing to write: the view holds no element of the storage, or the value is what it holds; ctx.hazard when
  the write can't be in place). ctx.unfolded lists the reduces of `inline` it computes with a loop."""
  ctx = KernelContext(root, out, bufs, realized_buffer, merge_reduce, {} if memo is None else memo, inline=inline)
  write = root.src[1] if root.op is Ops.AFTER else None
  shape = root.shape if write is None else write.src[1].shape
  ctx.param(out)
  dims = [s for s in shape if _not1(s)]
  if merge_out and len(dims) > 1:
    idx = unflatten(UOp.range(prod(dims), next(ctx.axis), AxisType.LOOP), shape)
  else: idx = tuple(UOp.const(0) if not _not1(s) else UOp.range(s, next(ctx.axis), AxisType.LOOP) for s in shape)
  ctx.out_merge_possible = len(dims) > 1
  # children first: the kernel's region of the tensor graph is walked (not below its loads, pm_kernel_region), then the value at the
  # output index is pushed down it; the rewrite engine's limits on nested replacements grow with the region walked
  if write is None:
    value = graph_rewrite(at(root, _TRUE, idx), pm_index, ctx=ctx, bpm=pm_kernel_region, name="schedule: value at index")
  else:
    # the value and where the view puts it, both at the output index: the view, pushed down to its storage, is a load of the
    # element it sees there (gated where a PAD has none), whose index and gate the store takes. The view is pushed down on its own,
    # seeing no buffer but the storage's: a node of it may have another buffer (the source of a copy of the old value, or a view
    # realized before), which the value may read but the store must not go to. Its context shares the kernel's params and loop axes.
    value = graph_rewrite(at(write.src[1], _TRUE, idx), pm_index, ctx=ctx, bpm=pm_kernel_region, name="schedule: value at index")
    view_ctx = replace(ctx, bufs={root.src[0]: out}, realized_buffer=_no_buffer)
    seen = graph_rewrite(at(write.src[0], _TRUE, idx), pm_index, ctx=view_ctx, bpm=pm_kernel_region, name="schedule: view at index")
  if ctx.reduce_of:
    value = graph_rewrite(fold_reduces(value), pm_lift_gates, name="schedule: lift gates out of sums")
    left = value.toposort()
    ctx.unfolded = list(dict.fromkeys(x for r, x in ctx.reduce_of.items() if r in left and x in inline and x is not root))
  if write is None: store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out.dtype, (ctx.params[out], flat_index(idx, shape))), value))
  elif (store := _store_through(ctx, value, seen)) is None: return None, ctx
  ast = UOp(Ops.SINK, dtypes.void, (store,))
  ast = ast.replace(arg=KernelInfo(kernel_name(ast)))
  # the kernel takes each Variable as an int argument (a PARAM of the ALU addrspace), given its value at launch
  if vs := [u for u in ast.toposort() if u.is_variable]: ast = ast.substitute({v: UOp(Ops.PARAM, v.dtype, v.src, v.arg) for v in vs})
  return ast, ctx

def kernel_name(ast:UOp) -> str:
  """"r_" (a kernel with a reduce loop) or "E_", then the sizes of its loops in dim order ("E_1" without any); a symbolic size as its
  expression with every other character than letters and digits an underscore."""
  rngs = sorted([u for u in ast.toposort() if u.op is Ops.RANGE], key=lambda r: r.arg[:-1])
  kind = "r" if any(r.arg[-1] in (AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP_REDUCE) for r in rngs) else "E"
  sizes = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else "".join(c if c.isalnum() else "_" for c in r.src[0].render()) for r in rngs]
  return "_".join([kind] + (sizes or ["1"]))

def _store_through(ctx:KernelContext, value:UOp, seen:UOp) -> UOp|None:
  if not (loads := [u for u in seen.toposort() if u.op is Ops.LOAD]): return None   # the view is all padding
  index = loads[0].src[0]
  # storing back what the view already holds (t[i] += 1 writes t[i], then __setitem__ stores that view into itself): no kernel
  if value.op is Ops.LOAD and value.src[0] is index and value.src[2:] in ((), loads[0].src[2:]): return None
  # in place only if the value reads the written buffer at the written element (a kernel splits its loop across threads and lanes)
  ctx.hazard = any(u.op is Ops.INDEX and u.src[0] is index.src[0] and u is not index for u in value.toposort())
  return UOp(Ops.STORE, dtypes.void, (index, value) + loads[0].src[2:])

def divmods(ast:UOp) -> int: return sum(1 for x in ast.toposort() if x.op in (Ops.FLOORDIV, Ops.FLOORMOD))

def best_kernel(root:UOp, out:UOp, bufs:dict[UOp, UOp], realized_buffer, memo:dict|None=None,
                inline:frozenset[UOp]=frozenset()) -> tuple[UOp|None, KernelContext]:
  """The loop structure with the fewest divisions (index arithmetic), the most merged one on a tie."""
  best: tuple[int, UOp, KernelContext]|None = None
  built: set[tuple[bool, bool]] = set()
  for mo, mr in ((False, False),) if NOOPT else ((True, True), (True, False), (False, True), (False, False)):
    # a candidate that merges nothing more than one already built gives the same AST
    if best is not None and (mo and best[2].out_merge_possible, mr and best[2].reduce_merge_possible) in built: continue
    ast, ctx = build_kernel(root, out, bufs, realized_buffer, mo, mr, memo, inline)
    if ast is None or ctx.hazard or ctx.unfolded: return ast, ctx
    built.add((mo and ctx.out_merge_possible, mr and ctx.reduce_merge_possible))
    n = divmods(ast)
    if best is None or n < best[0]: best = (n, ast, ctx)
    if best[0] == 0: break
  assert best is not None
  return best[1], best[2]

# ***** 3. run order *****

class WriteCycle(RuntimeError):
  """Kernels that can't be ordered: `cycle`, the roots on a cycle of must-run-before edges (every such cycle passes a write)."""
  def __init__(self, msg:str, cycle:list[UOp]):
    super().__init__(msg)
    self.cycle = cycle

def order_items(first:list[UOp], deps:dict[UOp, list[UOp]]) -> list[UOp]:
  """Post-order over the items (keyed by their kernel's root; deps: root -> the roots whose items must run before) from the roots in
  `first`, then the rest in deps' order, without recursion. A cycle (two writes of one buffer that each must come first) raises
  WriteCycle."""
  state: dict[UOp, bool] = {}   # False: on the walk's current path, True: placed
  path: list[UOp] = []          # the walk's current path, in order
  order: list[UOp] = []
  for k0 in itertools.chain(first, deps):
    if k0 in state or k0 not in deps: continue
    stack = [(k0, False)]
    while stack:
      k, expanded = stack.pop()
      if expanded:
        state[k] = True
        order.append(k)
        path.pop()
        continue
      if (st := state.get(k)) is not None:
        if st: continue
        raise WriteCycle(f"can't order the kernels of one schedule: the kernel of {k.op} (shape {k.shape}) would have to run both "
                         "before and after an assign to a buffer (the graph reads that buffer's contents both from before the write and "
                         "after it); realize the earlier read, or the assign, first", path[path.index(k):])
      state[k] = False
      path.append(k)
      stack.append((k, True))
      stack.extend((d, False) for d in reversed(deps[k]) if d in deps and not state.get(d, False))
  return order
