"""Codegen: a kernel AST (from tinygrad.schedule) becomes a linear list of UOps for a renderer, then a ProgramSpec.

`full_rewrite_to_sink` runs the list PASSES: each a (name, PatternMatcher or function, ctx factory) entry, a PatternMatcher run by
one graph_rewrite with that name (so TRACK_MATCH_STATS and the rewrite log show it). lower_ast adds the ordering and the SPEC checks.
  optimize      tinygrad/codegen/opt/ shapes the AST for the renderer's capabilities (threading, unrolling, upcasting; on a device
                  with GPU dims workgroups: LOCAL/GROUP; NOOPT=1: off) by splitting its RANGEs into THREAD/LOOP/UPCAST/REDUCE/UNROLL/
                  LOCAL/GROUP_REDUCE ranges; with GPU dims the output LOOP ranges left become GLOBAL ones (launch dims); BEAM=N: the Opts of a
                  search (opt/search.py) instead of the heuristics
  pm_expand       UNROLL and UPCAST ranges -> their lanes (tinygrad/codegen/expander.py): vector loads/stores, per-lane REDUCEs
  group reduces   a REDUCE split over a workgroup (GROUP_REDUCE ranges) -> partials in a local BUFFER, a BARRIER, a final REDUCE
                  (tinygrad/codegen/group_reduce.py); GROUP_REDUCE ranges become LOCAL ones
  pm_safe_ratio   x * (1/(1+x)) (anywhere in a chain of products, distributed over sums that hold 1/(1+x)) -> 1 - 1/(1+x) where
                  x > 1, x/(1+x) elsewhere: no inf * 0 when x overflows (codegen/safe_ratio.py: exp(x)/(1+exp(x)) and its gradient)
  pm_render_forms the one spelling the tensor graph has for each op (tinygrad/mixin/mathtraits.py) back to the ops renderers print
                  directly: x*-1 -> NEG, a+NEG(b) -> SUB, a*RECIPROCAL(b) -> FDIV (before constant folding could turn 1/3 into
                  0.333..., so a/3 rounds once, as written), CMPNE(CMPNE(a, b), True) -> CMPEQ, minimum's max of negations -> a
                  WHERE over CMPLT. Value dtypes only: index arithmetic (weak ints) keeps its form for the symbolic rules.
  pm_decomp       THREEFRY(x, key) (uint64) -> Threefry-2x32 in uint32 ADD/XOR/SHL/SHR (no renderer has a THREEFRY op); float -> int
                  CAST -> a CAST of in-range values and a WHERE for the rest (one meaning on every device: _float_to_int)
  split_ranges    a STORE whose value compares a LOOP range with constants (cat, pad) -> one STORE per piece of the range, consecutive
                  loops in which those comparisons are constants (codegen/split_ranges.py)
  pm_const_fold   ALU/CAST of constants -> the constant (so `full(1) + full(2)` stores 3), and the masks a constant comparison decides
                  (WHERE, gated LOAD, x + -0.0: codegen/split_ranges.py's pm_fold_gates)
  pm_add_specials THREAD/GLOBAL/LOCAL ranges -> SPECIAL launch dims: "core_id" for THREAD, "gidx<i>"/"lidx<i>" for the i-th
                  GLOBAL/LOCAL range by axis id (the renderer contract, tinygrad/renderer/__init__.py); they get no loop and no END
  pm_end_loops    STORE of the SINK -> END(...END(STORE, innermost LOOP range)..., outermost range); the pieces of a split range are
                  consecutive loops inside the loops they share
  pm_reduce       REDUCE(x, *ranges, arg=(op,)) -> a register accumulator slot i:
                    acc = BUFFER(REG); STORE(INDEX(AFTER(acc, *loop ranges), i), identity)
                    in the loop: STORE(INDEX(AFTER(acc, init, *reduce ranges), i), op(LOAD(that), x)), closed by END per range
                    the value: LOAD(INDEX(AFTER(acc, END), i))
                  REDUCEs over the same ranges (an upcast reduce kernel's lanes) share the loop: their updates are one GROUP.
  pm_wmma_acc     a tensor core's accumulators updated by adding its result (codegen/opt/tc.py) -> its C operand instead
  pm_fuse_mulacc  a dot tile's float32/float64 accumulator updates acc + a*b (lanes of a dot product) -> MULACC(a, b, acc) where the
                  renderer computes MULACC fused (Renderer.fused_mulacc: the CPU's vfmadd, the PYTHON device's exact emulation): one
                  instruction and one rounding per lane, the same bits on both. Other a*b+c stay unfused (measured: see _fuse);
                  half/bfloat16 (computed in float and rounded after every op) keep their two roundings. A kernel with Opt(CHAIN):
                  also acc + (a sum of products, the UNROLL lanes' tree) -> a chain of MULACCs over the products in order.
  pm_lower_index  (codegen/index_dtype.py) every weakint UOp (index math, RANGE, SPECIAL, sizes, variables) -> int32, or int64
                  where its bounds need it; FLOORDIV/FLOORMOD -> CDIV/CMOD (shifts/masks by powers of two), exact for negative dividends.
  (renderer)      the target renderer's extra_matcher (its device rules), then its pre_matcher (user rules): Renderer in
                  tinygrad/renderer/__init__.py
  linearize       orders the graph into blocks (PARAMs and BUFFERs first, then the SPECIALs): everything a loop body needs that
                  does not depend on the loop is placed before the RANGE (loop-invariant code motion falls out of this), then the
                  RANGE, the body and its END. Inside a block a value is placed when its first user needs it, the sources in
                  Sethi-Ullman order (a source that runs a loop first), so few values are live at once (codegen/liveness.py).
"""
from __future__ import annotations
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TYPE_CHECKING
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, ParamArg, AxisType, KernelInfo
from tinygrad.uop import GroupOp
from tinygrad.uop.symbolic import pm_fold_values
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import SPEC, BEAM, NOOPT
from tinygrad.schedule import reduce_identity as _identity
from tinygrad.codegen.index_dtype import pm_lower_index
from tinygrad.codegen.split_ranges import split_ranges, pm_fold_gates
from tinygrad.codegen.opt.kernel import open_ranges
from tinygrad.codegen.opt.tc import pm_wmma_acc
from tinygrad.codegen.safe_ratio import pm_safe_ratio
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, LinearKernel

def iconst(v:int) -> UOp: return UOp.const(v)   # weakint: pm_lower_index gives it a width

def _u(op:Ops, a:UOp, b:UOp|int) -> UOp: return UOp(op, a.dtype, (a, b if isinstance(b, UOp) else UOp.const(b, a.dtype)))
def _cast(x:UOp, dt) -> UOp: return UOp(Ops.CAST, dt, (x,), dt)

def _threefry2x32(x:UOp, key:UOp) -> UOp:
  """Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), the 64-bit block and key each
  split into two uint32 words; the result packs the two output words back into a uint64 (word 0 low)."""
  u32, u64 = dtypes.uint32, dtypes.uint64
  x0, x1 = _cast(x, u32), _cast(_u(Ops.SHR, x, 32), u32)
  k0, k1 = _cast(key, u32), _cast(_u(Ops.SHR, key, 32), u32)
  ks = [k1, _u(Ops.XOR, _u(Ops.XOR, k0, k1), 0x1BD11BDA), k0]
  a, b = _u(Ops.ADD, x0, ks[2]), _u(Ops.ADD, x1, ks[0])
  for i in range(5):
    for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
      a = _u(Ops.ADD, a, b)
      b = _u(Ops.XOR, a, _u(Ops.ADD, _u(Ops.SHL, b, r), _u(Ops.SHR, b, 32 - r)))
    a, b = _u(Ops.ADD, a, ks[i % 3]), _u(Ops.ADD, _u(Ops.ADD, b, ks[(i + 1) % 3]), i + 1)
  return _u(Ops.OR, _u(Ops.SHL, _cast(b, u64), 32), _cast(a, u64))

def _neg(m:UOp) -> UOp|None:
  if m.dtype in dtypes.weaks or m.dtype is dtypes.bool: return None
  for x, c in (m.src, m.src[::-1]):
    if c.op is Ops.CONST and c.arg == -1: return UOp(Ops.NEG, m.dtype, (x,))
  return None

def _min(m:UOp, a:UOp, b:UOp) -> UOp:
  """b < a ? b : a, and for floats (b < a || b != b) ? b : a so a NaN on either side is the result, as MAX renders."""
  take_b = UOp(Ops.CMPLT, dtypes.bool, (b, a))
  if dtypes.is_float(m.dtype): take_b = UOp(Ops.OR, dtypes.bool, (take_b, UOp(Ops.CMPNE, dtypes.bool, (b, b))))
  return UOp(Ops.WHERE, m.dtype, (take_b, b, a))

pm_render_forms = PatternMatcher([
  (UPat(Ops.MUL, name="m"), _neg),
  (UPat(Ops.ADD, src=[UPat.var("a"), UPat(Ops.NEG, src=(UPat.var("b"),))], name="s"), lambda s, a, b: UOp(Ops.SUB, s.dtype, (a, b))),
  (UPat(Ops.MUL, src=[UPat.var("a"), UPat(Ops.RECIPROCAL, src=(UPat.var("b"),))], name="m"), lambda m, a, b: UOp(Ops.FDIV, m.dtype, (a, b))),
  (UPat(Ops.CMPNE, src=[UPat(Ops.CMPNE, src=(UPat.var("a"), UPat.var("b"))), UPat.const(True)]), lambda a, b: UOp(Ops.CMPEQ, dtypes.bool, (a, b))),
  # minimum: -max(-a, -b) (floats) and k^max(k^a, k^b) (ints, k the dtype's min+max) are b<a ? b : a (or b!=b for floats: NaN propagates), bit for bit
  (UPat(Ops.NEG, src=(UPat(Ops.MAX, src=[UPat(Ops.NEG, src=(UPat.var("a"),)), UPat(Ops.NEG, src=(UPat.var("b"),))]),), name="m"), _min),
  (UPat(Ops.XOR, src=[UPat(Ops.MAX, src=[UPat(Ops.XOR, src=[UPat.var("a"), UPat.cvar("k")]), UPat(Ops.XOR, src=[UPat.var("b"), UPat.cvar("k")])]),
                      UPat.cvar("k")], name="m"), lambda m, a, b, k: _min(m, a, b) if k.arg == m.dtype.min + m.dtype.max else None),
])

def _fits(x:UOp, dt) -> UOp:
  """x (float32 or float64) truncates to a value of the int dtype dt (32 or 64 bits): lo < x < hi, NaN fails. The bounds are powers of
  two or one off, exact in float64; for int64 the low bound is -2**63 itself (x >= -2**63: -2**63-1 rounds to it)."""
  lt = lambda a, b: UOp(Ops.CMPLT, dtypes.bool, (a, b))
  if dtypes.is_unsigned(dt): lo = lt(UOp.const(-1.0, x.dtype), x)
  elif dt.bitsize == 64: lo = UOp(Ops.CMPNE, dtypes.bool, (lt(x, UOp.const(float(dt.min), x.dtype)), UOp.const(True, dtypes.bool)))
  else: lo = lt(UOp.const(float(dt.min) - 1.0, x.dtype), x)
  return UOp(Ops.AND, dtypes.bool, (lo, lt(x, UOp.const(2.0 ** dt.bitsize if dtypes.is_unsigned(dt) else -float(dt.min), x.dtype))))

def _float_to_int(c:UOp, x:UOp) -> UOp|None:
  """float -> int CAST with one meaning on every device and at every vector width (C leaves out-of-range and NaN undefined, and clang's
  vectorized and scalar conversions disagree): the value truncated toward zero where it fits, else the x86 answer tinygrad 0.14 gives
  on CPU: the dtype's min for int32/int64, its max for uint32/uint64; 8- and 16-bit ints go through int32 and keep its low bits."""
  dt = c.dtype
  if not dtypes.is_float(x.dtype) or not dtypes.is_int(dt) or dt in dtypes.weaks: return None
  if dt.itemsize < 4: return _cast(_cast(x, dtypes.int32), dt)
  # already guarded (this rule's own output): WHERE(fits(v), v, 0)
  if x.op is Ops.WHERE and x.src[2].op is Ops.CONST and x.src[2].arg == 0 and x.src[0] is _fits(x.src[1], dt): return None
  if x.dtype.itemsize < 4: x = _cast(x, dtypes.float32)  # half can't hold the bounds (2**31 is inf in it); float32 holds x exactly
  fits = _fits(x, dt)
  safe = UOp(Ops.WHERE, x.dtype, (fits, x, UOp.const(0.0, x.dtype)))   # only in-range values reach the C conversion
  return UOp(Ops.WHERE, dt, (fits, c.replace(src=(safe,)), UOp.const(dt.max if dtypes.is_unsigned(dt) else dt.min, dt)))

pm_decomp = PatternMatcher([
  (UPat(Ops.THREEFRY, dtype=dtypes.uint64, src=(UPat.var("x"), UPat.var("key"))), _threefry2x32),
  (UPat(Ops.CAST, src=(UPat.var("x"),), name="c"), _float_to_int),
])

# constant folding is the symbolic engine's (uop/symbolic.py), in its form for values: results wrapped/rounded as the device computes
pm_const_fold = pm_fold_values + pm_fold_gates

def _loop_ranges(sink:UOp) -> list[UOp]:
  """The LOOP ranges, outermost first (by axis id, a split's outer part first: tinygrad/codegen/opt/ range_key)."""
  loops = [u for u in sink.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP]
  return sorted(loops, key=lambda r: r.arg[:-1])

def _end_loops(sink:UOp) -> UOp|None:
  if not sink.src or any(s.op is not Ops.STORE for s in sink.src): return None
  # each store is closed by its own LOOP ranges, innermost first; consecutive stores in the same loops (an upcast kernel that could
  # not vectorize its store) are one GROUP, and the pieces of a split range (codegen/split_ranges.py) are consecutive loops inside
  # the loops they share. With one store or all stores in the same loops this is the GROUP in every loop of the kernel.
  items: list[tuple[tuple[UOp, ...], UOp]] = [(tuple(_loop_ranges(st)), st) for st in sink.src]
  while (depth := max(len(rs) for rs, _ in items)) > 0:
    nxt: list[tuple[tuple[UOp, ...], list[UOp]]] = []
    for rs, x in items:
      if nxt and len(rs) == depth and nxt[-1][0] == rs: nxt[-1][1].append(x)
      else: nxt.append((rs, [x]))
    items = [(rs[:-1], UOp(Ops.END, dtypes.void, (xs[0] if len(xs) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(xs)), rs[-1])))
             if len(rs) == depth else (rs, xs[0]) for rs, xs in nxt]
  return sink.replace(src=tuple(x for _, x in items))

pm_end_loops = PatternMatcher([(UPat(Ops.SINK, name="sink"), _end_loops)])

# ***** GPU dims and threads *****

_SPECIAL_PREFIX = {AxisType.GLOBAL: "gidx", AxisType.LOCAL: "lidx"}

def launch_dims(sink:UOp) -> dict[UOp, UOp]:
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

@dataclass
class ReduceContext:
  loop_ranges: list[UOp]
  accs: int = 0

def _combine(op:Ops, a:UOp, b:UOp) -> UOp:
  if a.dtype is dtypes.bool: op = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND}.get(op, Ops.OR)
  return UOp(op, a.dtype, (a, b))

def _vector_width(x:UOp) -> int:
  """The lanes of a reduce's value: a vector reduce (codegen/expander.py, vector_alu) sums ADD/MULs of vector (SHRINK) loads."""
  while x.op in (Ops.ADD, Ops.MUL): x = x.src[0]
  return x.src[0].src[2].arg if x.op is Ops.LOAD and x.src[0].op is Ops.SHRINK else 1

def _acc_slot(red:UOp, acc:UOp, i:int) -> UOp:
  """The accumulator element (or, for a vector reduce, the lanes) that `red` sums into."""
  if (n := _vector_width(red.src[0])) == 1: return UOp(Ops.INDEX, red.dtype, (acc, iconst(i)))
  return UOp(Ops.SHRINK, red.dtype, (acc, iconst(i), UOp.const(n, dtypes.int)))

def _acc_init(red:UOp) -> UOp:
  if (n := _vector_width(red.src[0])) == 1: return _identity(red.arg[0], red.dtype)
  return UOp(Ops.STACK, red.dtype, (_identity(red.arg[0], red.dtype),) * n)

def _lower_reduces(ctx:ReduceContext, sink:UOp) -> UOp|None:
  # REDUCEs over the same ranges (the lanes of an upcast reduce kernel) share one loop, each with its own accumulator slot
  groups: dict[tuple[UOp, ...], list[UOp]] = {}
  for u in sink.toposort():
    if u.op is Ops.REDUCE: groups.setdefault(u.src[1:], []).append(u)
  if not groups: return None
  # the accumulators start again in each iteration of the loops of their store (a kernel whose ranges were split has a store per piece)
  store_loops: dict[UOp, list[UOp]] = {}
  for st in [u for u in sink.toposort() if u.op is Ops.STORE]:
    topo = set(st.toposort())
    store_loops.update({red: [r for r in ctx.loop_ranges if r in topo] for red in topo if red.op is Ops.REDUCE})
  repl: dict[UOp, UOp] = {}
  for ranges, reds in groups.items():
    accs: dict = {}
    for red in reds: accs.setdefault(red.dtype, []).append(red)
    slots: dict[UOp, tuple[UOp, int]] = {}
    for dt, rs in accs.items():
      offs = [0]
      for red in rs: offs.append(offs[-1] + _vector_width(red.src[0]))
      acc = UOp(Ops.BUFFER, dt, (iconst(offs[-1]),), ParamArg(ctx.accs, dt, addrspace=AddrSpace.REG))
      ctx.accs += 1
      for i, red in zip(offs, rs): slots[red] = (acc, i)
    # a reduce nested in another's loop (a staged sum: tinygrad/schedule/rangeify.py) starts again in each iteration of the outer one
    outer = [r for r in open_ranges(reds[0].src[0]) if r not in ranges and r not in ctx.loop_ranges]
    loops = store_loops.get(reds[0], ctx.loop_ranges)
    inits = {red: UOp(Ops.STORE, dtypes.void, (_acc_slot(red, acc.after(*loops, *outer), i), _acc_init(red)))
             for red, (acc, i) in slots.items()}
    bodies = []
    for red in reds:
      acc, i = slots[red]
      idx = _acc_slot(red, acc.after(inits[red], *ranges), i)
      bodies.append(UOp(Ops.STORE, dtypes.void, (idx, _combine(red.arg[0], UOp(Ops.LOAD, red.dtype, (idx,)), red.src[0]))))
    body = bodies[0] if len(bodies) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(bodies))
    for r in reversed(ranges): body = UOp(Ops.END, dtypes.void, (body, r))
    for red in reds:
      acc, i = slots[red]
      repl[red] = UOp(Ops.LOAD, red.dtype, (_acc_slot(red, acc.after(body), i),))
  return sink.substitute(repl, name="reduce to accumulator")

pm_reduce = PatternMatcher([(UPat(Ops.SINK, name="sink"), _lower_reduces)])

# ***** fused multiply-add *****

def _vector_load(u:UOp) -> int:
  """The width of a vector (SHRINK) load, else 0."""
  return u.src[0].src[2].arg if u.op is Ops.LOAD and u.src[0].op is Ops.SHRINK else 0

def _dot_product(a:UOp, b:UOp) -> bool:
  """a*b is a lane of a dot product's lanes (codegen/expander.py, dot): two vector loads of one width (a vector_alu renderer's vector
  reduce) or the same lane of two (elsewhere: one accumulator per lane). An outer-product register tile multiplies different lanes,
  or a lane by a scalar load; those stay unfused."""
  if a.op is Ops.INDEX and b.op is Ops.INDEX:
    return a.src[1].op is Ops.CONST and a.src[1].arg == b.src[1].arg and 0 < _vector_load(a.src[0]) == _vector_load(b.src[0])
  return 0 < _vector_load(a) == _vector_load(b)

def _acc_load(u:UOp) -> bool:
  """u loads a register accumulator (pm_reduce's BUFFER(REG), through its AFTERs)."""
  if u.op is not Ops.LOAD or u.src[0].op not in (Ops.INDEX, Ops.SHRINK): return False
  b = u.src[0].src[0]
  while b.op is Ops.AFTER: b = b.src[0]
  return b.op is Ops.BUFFER and b.arg.addrspace is AddrSpace.REG

@dataclass(frozen=True)
class FuseContext:
  ren: Renderer|None
  chain: bool          # the kernel has Opt(CHAIN)

def _fuse_context(sink:UOp, ren:Renderer|None) -> FuseContext:
  from tinygrad.codegen.opt import OptOps
  return FuseContext(ren, any(o.op is OptOps.CHAIN for o in getattr(sink.arg, "applied_opts", ())))

def _products(t:UOp) -> list[UOp]|None:
  """The MULs summed by an ADD tree, left to right, or None if a leaf is anything else (iterative: the tree of one update is small)."""
  out, stack = [], [t]
  while stack:
    u = stack.pop()
    if u.op is Ops.ADD: stack += [u.src[1], u.src[0]]
    elif u.op is Ops.MUL: out.append(u)
    else: return None
  return out

def _chain(ctx:FuseContext, x:UOp, t:UOp, c:UOp) -> UOp|None:
  # Opt(CHAIN): the sum's products accumulate one by one, fused. Measured (benches/README.md, session 8 matmul): the 4 x 32 packed
  # matmul tile with its 4 UNROLL lanes chained ran 5-13% faster than the 8 x 16 tile (and than itself unchained: its tree spills)
  if not ctx.chain or ctx.ren is None or not ctx.ren.fused_mulacc or not _acc_load(c) or (ms := _products(t)) is None: return None
  for m in ms: c = UOp(Ops.MULACC, x.dtype, (*m.src, c))
  return c

def _fuse(ctx:FuseContext, x:UOp, m:UOp, c:UOp) -> UOp|None:
  # Only a dot tile's accumulator updates, acc += a*b with a*b a lane of a dot product (on a vector_alu renderer one vector
  # multiply-add, elsewhere its lanes: the same updates, so the same bits). Measured on clang 14 / Zen 4 they run 1.3x faster fused;
  # fusing the register tiles of a @ b and of the conv (a vector times a broadcast, packed by clang's SLP vectorizer) made clang spill
  # and run 15% slower, elementwise a*b+c gains nothing (Zen 4 adds on separate pipes), and numpy rounds twice. benches/README.md.
  if ctx.ren is None or not ctx.ren.fused_mulacc or not _acc_load(c) or not _dot_product(*m.src): return None
  return UOp(Ops.MULACC, x.dtype, (*m.src, c))

pm_fuse_mulacc = PatternMatcher([
  (UPat(Ops.ADD, dtype=(dtypes.float32, dtypes.float64), src=[UPat(Ops.MUL, name="m"), UPat.var("c")], name="x"), _fuse),
  (UPat(Ops.ADD, dtype=(dtypes.float32, dtypes.float64), src=[UPat(Ops.ADD, name="t"), UPat.var("c")], name="x"), _chain),
])

# ***** ordering *****

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
  for u in sink.toposort():
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
  for p in sorted([u for u in sink.toposort() if u.op in (Ops.PARAM, Ops.BUFFER)], key=lambda p: (p.op is Ops.BUFFER, p.arg.slot)):
    done.add(p); out.append(p)
  # frames: ("visit", u), ("hoist", (x, r)): visit x if it can go before r opens, ("open", r), ("close", r), ("finish", u)
  stack: list[tuple[str, Any]] = [("visit", s) for s in reversed(sink.src)]
  # launch dims are defined once, at the top level, first
  stack.extend(("visit", sp) for sp in reversed(sorted([u for u in sink.toposort() if u.op is Ops.SPECIAL], key=lambda u: u.arg)))
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

# ***** the whole codegen *****

@dataclass
class LoweredKernel:
  ast: UOp
  sink: UOp                      # after the graph passes
  uops: list[UOp] = field(default_factory=list)
  linear: LinearKernel|None = None  # the uops as checked by SPEC (verify_linear), for the renderer; None under SPEC=0

  @property
  def program_input(self) -> list[UOp]|LinearKernel:
    """What Renderer.to_program takes: the checked kernel when there is one (not checked twice), else the uops."""
    return self.linear if self.linear is not None else self.uops

# (name, PatternMatcher or function sink -> sink, ctx factory (sink, renderer) -> ctx or None): the codegen, in order
Pass = tuple[str, "PatternMatcher|Callable[[UOp, Any], UOp]", "Callable[[UOp, Any], Any]|None"]

def _optimize(ast:UOp, ren:Renderer|None) -> UOp:
  if ast.op is Ops.SINK and isinstance(ast.arg, KernelInfo) and ast.arg.opts_to_apply is not None:
    # the kernel names its optimizations (tinygrad 0.14's KernelInfo.opts_to_apply; () for none): exactly those, no heuristic or search
    from tinygrad.codegen.opt.kernel import apply_opts
    return _launch_dims(apply_opts(ast.replace(arg=replace(ast.arg, opts_to_apply=None)), ast.arg.opts_to_apply, ren), ren)
  if BEAM >= 1 and not NOOPT and ren is not None and ast.op is Ops.SINK:
    from tinygrad.codegen.opt.search import beam_search
    return _launch_dims(beam_search(ast, ren, BEAM.value), ren)
  from tinygrad.codegen.opt.heuristic import optimize_ast
  return optimize_ast(ast, ren)

def _launch_dims(ast:UOp, ren:Renderer|None) -> UOp:
  """An AST with its opts chosen (a search's, or given): on a device with GPU dims its output loops left become launch dims, as
  optimize_ast does after the heuristics."""
  from tinygrad.codegen.opt.kernel import globalize
  return globalize(ast) if ren is not None and ren.has_local else ast

def _expand(ast:UOp, ren:Renderer|None) -> UOp:
  from tinygrad.codegen.expander import pm_expand
  return graph_rewrite(ast, pm_expand, ctx=ren is not None and ren.vector_alu, name="expand upcast and unroll")

def _group_reduces(ast:UOp, ren:Renderer|None) -> UOp:
  from tinygrad.codegen.group_reduce import group_reduces
  return group_reduces(ast, ren)

PASSES: list[Pass] = [
  ("optimize", _optimize, None),
  ("split ranges", split_ranges, None),
  ("expand upcast and unroll", _expand, None),
  ("group reduces", _group_reduces, None),
  ("safe ratios", pm_safe_ratio, None),
  ("render forms", pm_render_forms, None),
  ("decompositions", pm_decomp, None),
  ("constant folding", pm_const_fold, None),
  ("launch dims", pm_add_specials, lambda sink, ren: launch_dims(sink)),
  ("end loops", pm_end_loops, None),
  ("reduce to accumulator", pm_reduce, lambda sink, ren: ReduceContext(_loop_ranges(sink))),
  ("tensor core accumulators", pm_wmma_acc, None),
  ("fuse multiply-add", pm_fuse_mulacc, _fuse_context),
  ("lower index dtype", pm_lower_index, None),
]

def _renderer_passes(ren:Renderer|None) -> list[Pass]:
  """The target's own rewrites after the codegen: its class's extra_matcher (the device's rules), then its pre_matcher (a user's rules,
  with the renderer as ctx), so a user rule sees the graph exactly as the linearizer will (tinygrad/renderer/__init__.py)."""
  if ren is None: return []
  return ([("renderer", ren.extra_matcher, None)] if ren.extra_matcher is not None else []) + \
         ([("renderer pre_matcher", ren.pre_matcher, lambda sink, r: r)] if ren.pre_matcher is not None else [])

def full_rewrite_to_sink(ast:UOp, ren:Renderer|None=None, passes:list[Pass]|None=None) -> UOp:
  """The kernel AST after every codegen pass (PASSES unless given), ready to linearize. `ren` is the target: its capabilities steer
  the optimizer, and its extra_matcher then its pre_matcher (if any) run last. Without one, the AST is not optimized."""
  sink = ast
  for name, pm, ctx in (PASSES if passes is None else passes) + _renderer_passes(ren):
    if isinstance(pm, PatternMatcher): sink = graph_rewrite(sink, pm, ctx=None if ctx is None else ctx(sink, ren), name=name)
    else: sink = pm(sink, ren)
  return _keep_params(ast, sink)

def _keep_params(ast:UOp, sink:UOp) -> UOp:
  """sink still taking every buffer argument of ast: folding can drop each load of one (the piece of a split cat that reads none of
  it), but the kernel's arguments are the schedule's buffers in slot order, so a buffer nothing reads stays an unused argument."""
  if sink.op is not Ops.SINK: return sink
  params = [u for u in ast.toposort() if u.op is Ops.PARAM]
  if not params or len(have := {u.arg for u in sink.toposort() if u.op is Ops.PARAM}) == len(params): return sink
  return sink.replace(src=sink.src + tuple(p for p in params if p.arg not in have))

def _renderer(device:str|Renderer|None) -> Renderer|None:
  if device is None or not isinstance(device, str): return device
  from tinygrad.device import Device
  return Device[device].renderer

def lower_ast(ast:UOp, device:str|Renderer|None=None, opts:tuple|None=None) -> LoweredKernel:
  """Lowers a kernel AST; with a device (or its renderer), the optimizations of tinygrad/codegen/opt/ for the renderer's capabilities
  are applied first (not under NOOPT=1; BEAM=N searches for them). `opts`: apply exactly these Opts instead (a BEAM candidate)."""
  if opts is None: sink = full_rewrite_to_sink(ast, _renderer(device))
  else:
    from tinygrad.codegen.opt.kernel import apply_opts
    ren = _renderer(device)
    sink = full_rewrite_to_sink(_launch_dims(apply_opts(ast, opts, ren), ren), ren, [p for p in PASSES if p[0] != "optimize"])
  if SPEC:  # SPEC hook: the lowered kernel (tinygrad/uop/spec.py)
    from tinygrad.uop.spec import type_verify, spec_lowered
    type_verify(sink, spec_lowered, f"lowered kernel {sink.arg.name}")
  uops = linearize(sink)
  linear = None
  if SPEC:  # SPEC hook: the linear program (tinygrad/uop/spec.py)
    from tinygrad.renderer import verify_linear
    linear = verify_linear(uops, f"linear program of {sink.arg.name}")
  return LoweredKernel(ast, sink, uops, linear)

def get_program(ast:UOp, renderer):
  """ProgramSpec for a kernel AST on a renderer."""
  return to_program(ast, renderer).arg

def to_program(ast:UOp, renderer) -> UOp:
  """tinygrad 0.14's entry point for lowering one kernel: the AST (a SINK, KernelInfo in its arg: its opts_to_apply are honored) as a
  PROGRAM UOp for `renderer`: src (the lowered SINK, whose KernelInfo has applied_opts and estimates; a LINEAR of its linear uops; a SOURCE
  whose arg is the rendered code), arg the ProgramSpec (name, global/local size, buffers, estimates) the runtime launches. A PROGRAM is
  returned as it is. Nothing is compiled here: the device compiles a program when it loads it."""
  if ast.op is Ops.PROGRAM: return ast
  if ast.op is not Ops.SINK: raise RuntimeError(f"can't call to_program on {ast.op}: it takes a kernel AST (a SINK) or a PROGRAM")
  k = lower_ast(ast, renderer)
  spec = renderer.to_program(k.program_input)
  sink = k.sink.replace(arg=replace(k.sink.arg, estimates=spec.estimates)) if isinstance(k.sink.arg, KernelInfo) else k.sink
  return UOp(Ops.PROGRAM, dtypes.void, (sink, UOp(Ops.LINEAR, dtypes.void, tuple(k.uops)), UOp(Ops.SOURCE, dtypes.void, (), spec.src)), spec)
