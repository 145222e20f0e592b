"""The TC action: Opt(OptOps.TC, axis, (tc_select, tc_opt, use_tensor_cores)) lowers a kernel's matmul-like reduce to a tensor core.

The kernel must have one ADD reduce of a MUL (possibly CAST to the accumulation dtype) whose operands a, b have a TensorCore's dtype_in
and the reduce its dtype_out. The M ranges are the output loops only a reads, N those only b reads, K the REDUCE ranges; `axis` picks
one (N, M, K) triple of them in tinygrad 0.14's order. tc_select: -1 the first of the renderer's tensor cores that fits, else that one;
tc_opt: 0 one REDUCE range only, 1 more (the others stay a loop around the instruction), 2 also pads M, N and K to the instruction's
dims (PADTO; K, the REDUCE range with the scheduler's UNROLL ranges of the reduce, only when a and b are loads: padded elements load
as 0); use_tensor_cores: 1 (tinygrad's 2, the shape without the instruction, is not supported).

What it makes, for the instruction's M x N x K = TM x TN x TK and warp of T threads:
  a LOCAL range of T threads with axis id WARP (-1: it sorts first, so it is lidx0 and the launch's warps are whole), M -> m_o*TM + the
  C layout's row, N -> n_o*TN + its column, where the C layout's index bits are UPCAST ranges (each on the dim it moves: the expander
  makes one store and one accumulator per C element), and the reduce -> REDUCE(INDEX(WMMA(A elements, B elements, zeros), C element),
  k_o, *other reduce ranges): every A and B element is a's and b's expression at the coordinates the layouts give for the thread's lane
  (K flattened as k_o*TK + the layout's k over the reduce's ranges). The accumulators add up the products of each step of k_o.
"""
from __future__ import annotations
import itertools
import math
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops, AxisType
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt.ranges import ranges_of, range_size, range_key, rtype, opt_ranges, padto, WARP

def _rng(size:int, arg:tuple) -> UOp|None: return UOp(Ops.RANGE, dtypes.weakint, (UOp.const(size, dtypes.weakint),), arg) if size > 1 else None
def _or0(r:UOp|None) -> UOp|int: return 0 if r is None else r

def _matmul(ast:UOp, need, k_padded:bool=False) -> tuple[UOp, UOp, UOp]:
  """(the reduce, a, b): the kernel's single ADD reduce of MUL(a, b), through a CAST. k_padded: its K range was padded (PADTO wraps the
  summand in WHERE(valid, x, 0), which a and b, gated loads, make redundant)."""
  reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
  need(len(reds) == 1, f"tensor cores need exactly one reduce, the kernel has {len(reds)}")
  red = reds[0]
  need(red.arg[0] is Ops.ADD, f"tensor cores need a sum, the reduce is {red.arg[0]}")
  x = red.src[0].src[1] if k_padded and red.src[0].op is Ops.WHERE else red.src[0]
  mul = x.src[0] if x.op is Ops.CAST else x
  need(mul.op is Ops.MUL, f"tensor cores need a sum of products, the reduce sums a {mul.op}")
  return red, mul.src[0], mul.src[1]

def _choices(red:UOp, a:UOp, b:UOp) -> list[tuple[UOp, UOp, UOp]]:
  """The (N, M, K) range triples, tinygrad 0.14's order: b's own output ranges, a's, the REDUCE ranges, each by axis id descending."""
  ra, rb = set(ranges_of(a)), set(ranges_of(b))
  def desc(rs) -> list[UOp]: return sorted(rs, key=range_key, reverse=True)
  ns = desc(r for r in rb - ra if rtype(r) is AxisType.LOOP)
  ms = desc(r for r in ra - rb if rtype(r) is AxisType.LOOP)
  ks = desc(r for r in red.src[1:] if rtype(r) is AxisType.REDUCE)
  return list(itertools.product(ns, ms, ks))

def apply_tc(ast:UOp, opt:Opt, ren, need) -> tuple[UOp, UOp|None, UOp|None]:
  """ast with its reduce on a tensor core of ren (see the module doc); returns (ast, the M range the blocks loop over, the N one), a
  range None where its dim is a single block. KernelOptError (through need) when no tensor core fits."""
  tc_select, tc_opt, use_tc = opt.arg
  need(type(tc_select) is int and -1 <= tc_select < len(ren.tensor_cores), f"tc_select {tc_select!r}: {ren!r} has {len(ren.tensor_cores)} "
       "tensor cores (-1: any)")
  need(tc_opt in (0, 1, 2), f"tc_opt must be 0, 1 or 2, got {tc_opt!r}")
  need(use_tc == 1, f"use_tensor_cores must be 1, got {use_tc!r}")
  need(type(opt.axis) is int and opt.axis >= 0, f"the axis must be an int >= 0, got {opt.axis!r}")
  red, a, b = _matmul(ast, need)
  tcs = ren.tensor_cores if tc_select == -1 else [ren.tensor_cores[tc_select]]
  fits = [tc for tc in tcs if a.dtype is tc.dtype_in and b.dtype is tc.dtype_in and red.dtype is tc.dtype_out]
  need(bool(fits), f"no tensor core of {ren!r} multiplies {a.dtype} x {b.dtype} into {red.dtype}")
  if tc_opt == 0: need(len([r for r in red.src[1:] if rtype(r) is AxisType.REDUCE]) == 1, "tc_opt=0 takes a single REDUCE range")
  need(opt.axis < len(choices := _choices(red, a, b)), f"axis {opt.axis}: the kernel has {len(choices)} (N, M, K) range choices")
  n, m, k = choices[opt.axis]  # type: ignore[index]
  tc = fits[0]
  unrolls = [r for r in red.src[1:] if rtype(r) is AxisType.UNROLL]
  sizes = [range_size(r) for r in (n, m, k, *unrolls)]
  need(all(s is not None for s in sizes), "tensor cores need ranges of known sizes")
  TN, TM, TK = tc.dims
  # padding: M and N to the instruction's dims, K (the chosen range, times the unrolls) to a multiple of its K: the padded elements of a
  # and b load as 0, so only plain loads (or their casts) may be padded along K
  pads = [(r, d) for r, d in ((n, TN), (m, TM)) if (range_size(r) or 0) % d]
  if (ksize := prod(sizes[2:])) % TK:  # type: ignore[arg-type]
    need(all((x.src[0] if x.op is Ops.CAST else x).op is Ops.LOAD for x in (a, b)), f"K={ksize} is not a multiple of {TK} and a sum of "
         "products of other values than loads can't be padded")
    pads.append((k, TK // math.gcd(ksize // (range_size(k) or 1), TK)))
  k_padded = False
  for r, d in pads:
    need(tc_opt >= 2, f"{rtype(r).name} range {range_key(r)} of size {range_size(r)} is not a multiple of {d} (tc_opt=2 pads it)")
    ast = padto(ast, Opt(OptOps.PADTO, opt_ranges(ast).index(r), d), r, need)
    n, m, k = (next(x for x in ranges_of(ast) if x.arg == y.arg) for y in (n, m, k))
    red, a, b = _matmul(ast, need, k_padded := k_padded or r.arg == k.arg)
  sizes = [range_size(r) for r in (n, m, k, *unrolls)]
  M, N = range_size(m) or 0, range_size(n) or 0
  # the new ranges: the warp, the blocks of M and N, the steps of K, the C element bits (UPCAST, on the dim each moves)
  warp = UOp(Ops.RANGE, dtypes.weakint, (UOp.const(tc.threads, dtypes.weakint),), (WARP, AxisType.LOCAL))
  m_o, n_o = _rng(M // TM, (*range_key(m), 0, rtype(m))), _rng(N // TN, (*range_key(n), 0, rtype(n)))
  k_o = _rng(prod(sizes[2:]) // TK, (*range_key(k), 0, AxisType.REDUCE))  # type: ignore[arg-type]
  cbits: list[UOp] = []
  for bit in range(tc.elements_per_thread[2].bit_length() - 1):
    dm, dn = (x - y for x, y in zip(tc.coords(2, 0, 1 << bit), tc.coords(2, 0, 0)))
    r = m if dm else n
    cbits.append(UOp(Ops.RANGE, dtypes.weakint, (UOp.const(2, dtypes.weakint),), (*range_key(r), 1 + bit, AxisType.UPCAST)))
  # a's and b's elements where the layouts put them for this lane: K flattened over the reduce's K ranges (the chosen one outermost)
  def k_ranges(kk) -> dict[UOp, UOp]:
    flat, ret = _or0(k_o) * TK + kk, {}
    for r in reversed([k, *unrolls]):
      ret[r] = flat % range_size(r) if r is not k else flat
      flat = flat // range_size(r)
    return ret
  def elems(x:UOp, which:int) -> list[UOp]:
    ret = []
    for i in range(tc.elements_per_thread[which]):
      p, q = (tc.a_layout, tc.b_layout)[which](warp, tc.bits(i, which))
      sub = {m: _or0(m_o) * TM + p, **k_ranges(q)} if which == 0 else {n: _or0(n_o) * TN + q, **k_ranges(p)}
      ret.append(x.substitute(sub, name="tc fragment"))
    return ret
  zeros = [UOp.const(0.0, tc.dtype_out)] * tc.elements_per_thread[2]
  wmma = UOp(Ops.WMMA, tc.dtype_out, (*elems(a, 0), *elems(b, 1), *zeros), tc)
  lane_c = sum((r * (1 << i) for i, r in enumerate(cbits)), UOp.const(0, dtypes.weakint))
  val = UOp(Ops.INDEX, tc.dtype_out, (wmma, lane_c))
  rest = tuple(r for r in (k_o, *(r for r in red.src[1:] if r is not k and r not in unrolls)) if r is not None)
  ret = ast.substitute({red: red.replace(src=(val, *rest)) if rest else val}, name="tc reduce")
  cm, cn = tc.c_layout(warp, cbits)
  ret = ret.substitute({m: _or0(m_o) * TM + cm, n: _or0(n_o) * TN + cn}, name="tc output")
  return ret, m_o, n_o

# ***** after the reduces became accumulators *****

def _acc_into_wmma(grp:UOp) -> UOp|None:
  """The accumulators of a WMMA's C elements, updated together (a GROUP of acc_j = acc_j + INDEX(WMMA(A, B, 0), j) for every j), become
  the instruction's C operand: acc_j = INDEX(WMMA(A, B, acc), j), the hardware's own accumulation (no separate adds)."""
  by_wmma: dict[UOp, dict[int, tuple[UOp, UOp, UOp]]] = {}   # WMMA -> {C element: (its store, the accumulator's load, the lane)}
  for st in grp.src:
    if st.op is not Ops.STORE or len(st.src) != 2 or (add := st.src[1]).op is not Ops.ADD: continue
    ld, x = add.src
    if ld.op is not Ops.LOAD or ld.src[0] is not st.src[0] or x.op is not Ops.INDEX or (w := x.src[0]).op is not Ops.WMMA: continue
    if x.src[1].op is Ops.CONST and all(c.op is Ops.CONST and c.arg == 0 for c in w.src[-w.arg.elements_per_thread[2]:]):
      by_wmma.setdefault(w, {})[x.src[1].arg] = (st, ld, x)
  repl: dict[UOp, UOp] = {}
  for w, elems in by_wmma.items():
    if sorted(elems) != list(range(n := w.arg.elements_per_thread[2])): continue
    fused = w.replace(src=(*w.src[:-n], *(elems[j][1] for j in range(n))))
    repl.update({st: st.replace(src=(st.src[0], x.replace(src=(fused, x.src[1])))) for st, _, x in elems.values()})
  return grp.replace(src=tuple(repl.get(s, s) for s in grp.src)) if repl else None

pm_wmma_acc = PatternMatcher([(UPat(Ops.GROUP, name="grp"), _acc_into_wmma)])
