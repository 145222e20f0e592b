"""Kernel AST optimizations applied before lowering (NOOPT=1 turns them all off).

  thread   split the outermost output loop of a kernel with enough work over the machine's cores: the loop RANGE r of size N
           becomes core_id*(N/n) + r' with r' of size N/n, where `core_id` is the runtime's thread-index variable (see
           tinygrad/renderer/__init__.py): the kernel is launched n times in parallel, each launch writing its own slice.
           The kernel name splits the dim: E_16777216 -> E_2_8388608.
  unroll   (reduce kernels) a small reduce loop (trip count times the loads of its body at most UNROLL_MAX_LOADS) is replaced
           by its iterations, combined as a tree: straight-line code, and a REDUCE left with no range is just that value. The
           scheduler already splits a reduce of 4k elements into k iterations of 4 (r_3_8_4); this removes the loop when k is
           small. The name keeps the dims (the loop is still a dim of the work).
  upcast   the innermost output loop of size N, N % 4 == 0, runs N/4 times and computes 4 consecutive outputs per iteration:
           r becomes r'*4 + j for j = 0..3. Where the 4 indices of a buffer access are consecutive the 4 loads become one SHRINK
           4-lane load (each lane taken by INDEX(vector, j)) and the 4 stores one SHRINK store of a STACK; otherwise the accesses
           stay scalar (the stores then run as a GROUP). In a reduce kernel each lane is its own REDUCE over the same ranges:
           the codegen runs them in one loop with 4 accumulators (a matmul's B row is then one vector load per k); a reduce
           kernel is only upcast when a load inside its reduce becomes a vector load (not x.sum(axis=1): 4 rows). The name
           splits the upcast output dim: E_100 -> E_25_4, r_64_64_16_4 -> r_64_16_4_16_4.
  upcast_outer  then, in a reduce kernel, the next output loop too, when a load in the reduce does not depend on it: a matmul's
           B vector load serves 4 rows, 16 accumulators (r_64_16_4_16_4 -> r_16_4_16_4_16_4). Its lanes' stores are 4 stores.
           With a single output loop (x.sum(axis=0)) that loop is upcast again: 16 consecutive outputs, so each reduce step reads
           a whole 64-byte line of a row instead of coming back to it 4 times (r_1024_4_1024_4 -> r_256_4_4_1024_4).
Last, every memory index is summed up again (pm_norm_index): the substitutions above leave terms like (r*64)+(0*4)+1.
"""
from __future__ import annotations
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops, AxisType
from tinygrad.renderer import Renderer, mem_root
from tinygrad.codegen import _combine
from tinygrad.dtype import dtypes
from tinygrad.helpers import NOOPT, prod
from tinygrad.schedule import KernelInfo

# ***** index sums (weakint, as the scheduler builds them): what the optimizations below need, kept here until the typed-ranges
# rewrite of this file replaces them *****

def iconst(v:int) -> UOp: return UOp.const(v)

def _terms(u:UOp) -> list[tuple[UOp|None, int]]:
  """u as a sum of (expression, coefficient); expression None is the constant term."""
  out: list[tuple[UOp|None, int]] = []
  stack = [(u, 1)]
  while stack:
    x, k = stack.pop()
    if x.op is Ops.CONST: out.append((None, x.arg * k))
    elif x.op is Ops.ADD: stack.extend(((x.src[1], k), (x.src[0], k)))
    elif x.op is Ops.MUL and x.src[1].op is Ops.CONST: stack.append((x.src[0], k * x.src[1].arg))
    else: out.append((x, k))
  return out

def _from_terms(terms:list[tuple[UOp|None, int]]) -> UOp:
  const, merged = 0, {}
  for x, k in terms:
    if x is None: const += k
    else: merged[x] = merged.get(x, 0) + k
  ret: UOp|None = None
  for x, k in merged.items():
    if k == 0: continue
    t = x if k == 1 else UOp(Ops.MUL, x.dtype, (x, UOp.const(k)))
    ret = t if ret is None else UOp(Ops.ADD, ret.dtype, (ret, t))
  if ret is None: return iconst(const)
  return ret if const == 0 else UOp(Ops.ADD, ret.dtype, (ret, UOp.const(const)))

def iadd(*xs:UOp) -> UOp: return _from_terms([t for x in xs for t in _terms(x)])
def imul(a:UOp, c:int) -> UOp: return _from_terms([(x, k*c) for x, k in _terms(a)])

THREAD_MIN_WORK = 1 << 16     # elements of work (output elements times reduce trip count) before a kernel is threaded
THREAD_MAX = 32               # at most this many launches

def _size(r:UOp) -> int|None: return r.src[0].arg if r.src and r.src[0].op is Ops.CONST else None

def _ranges(ast:UOp, kind:AxisType) -> list[UOp]:
  return sorted([u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[1] is kind], key=lambda r: r.arg[0])

def _rename(ast:UOp, old:int, new:tuple[int, ...], pos:int=0) -> UOp:
  """The kernel name with the dim `old` at position pos (0 is the first dim, -1 the last) split into `new`."""
  parts = ast.arg.name.split("_")
  i = len(parts) - 1 if pos < 0 else pos + 1
  if 0 < i < len(parts) and parts[i] == str(old): parts[i:i+1] = [str(s) for s in new]
  return ast.replace(arg=KernelInfo("_".join(parts)))

def thread(ast:UOp, threads:int) -> UOp:
  loops = _ranges(ast, AxisType.LOOP)
  if threads < 2 or not loops or (n_out := _size(loops[0])) is None: return ast
  sizes = [_size(r) for r in _ranges(ast, AxisType.LOOP) + _ranges(ast, AxisType.REDUCE)]
  if any(s is None for s in sizes) or prod(sizes) < THREAD_MIN_WORK: return ast
  n = next((t for t in range(min(threads, n_out), 1, -1) if n_out % t == 0), 1)
  if n < 2: return ast
  outer = loops[0]
  inner = outer.replace(src=(iconst(n_out // n),) + outer.src[1:])
  core = UOp.variable("core_id", 0, n - 1, outer.dtype, param=True)
  ret = ast.substitute({outer: iadd(imul(core, n_out // n), inner)}, name="thread")
  return _rename(ret, n_out, (n, n_out // n), 0)

UPCAST = 4

def _vector_ok(dt) -> bool:
  """Dtypes with 4-lane vector accesses in every renderer (the C renderer has no vectors of bool or of the emulated half types)."""
  return dt is not dtypes.bool and (dtypes.is_int(dt) or dt in (dtypes.float32, dtypes.float64))

def _lane_offset(a:UOp, b:UOp) -> int|None:
  """b - a when it is a constant (both int index expressions)."""
  diff: dict[UOp|None, int] = {}
  for x, k in _terms(b): diff[x] = diff.get(x, 0) + k
  for x, k in _terms(a): diff[x] = diff.get(x, 0) - k
  if any(k != 0 for x, k in diff.items() if x is not None): return None
  return diff.get(None, 0)

UNROLL_MAX_LOADS = 32  # a reduce loop is unrolled when its trip count times the loads in its body is at most this

def _combine_tree(op:Ops, xs:list[UOp]) -> UOp:
  while len(xs) > 1: xs = [_combine(op, xs[i], xs[i+1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def unroll(ast:UOp) -> UOp:
  repl: dict[UOp, UOp] = {}
  for red in [u for u in ast.toposort() if u.op is Ops.REDUCE]:
    x, ranges = red.src[0], list(red.src[1:])
    loads = max(1, sum(1 for u in x.toposort() if u.op is Ops.LOAD))
    # innermost first: its iterations are the ones the C compiler can pair up (consecutive addresses)
    for r in reversed(red.src[1:]):
      if (n := _size(r)) is None or n * loads > UNROLL_MAX_LOADS: continue
      x = _combine_tree(red.arg[0], [x.substitute({r: iconst(i)}, name="unroll") for i in range(n)])
      ranges.remove(r)
      loads *= n
    if len(ranges) < len(red.src) - 1: repl[red] = red.replace(src=(x, *ranges)) if ranges else x
  return ast.substitute(repl, name="unroll") if repl else ast

def _dependents(topo:list[UOp], x:UOp) -> set[UOp]:
  """The UOps of a toposort that depend on x (x included)."""
  dep = {x}
  for u in topo:
    if any(s in dep for s in u.src): dep.add(u)
  return dep

def upcast(ast:UOp, pos:int) -> UOp:
  """pos: where the innermost output dim is in the kernel name (-1: last, as in E kernels)."""
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or len(ast.src[0].src) != 2 or ast.src[0].src[0].op is not Ops.INDEX: return ast
  loops = _ranges(ast, AxisType.LOOP)
  if not loops or (n := _size(loops[-1])) is None or n % UPCAST != 0: return ast
  inner = loops[-1]
  # a loop of exactly 4 disappears (its one iteration is r' = 0)
  new = iconst(0) if n == UPCAST else inner.replace(src=(iconst(n // UPCAST),) + inner.src[1:])
  store = ast.src[0]
  subs = [store.substitute({inner: iadd(imul(new, UPCAST), iconst(j))}, name="upcast") for j in range(UPCAST)]
  # loads: ungated, from a buffer, whose lane indices are idx, idx+1, ... become one vector load
  repl: list[dict[UOp, UOp]] = [{} for _ in range(UPCAST)]
  topo = store.toposort()
  dep = _dependents(topo, inner)
  reduces, vector_in_reduce = [u for u in topo if u.op is Ops.REDUCE], False
  in_reduce = {x for red in reduces for x in red.src[0].toposort()}
  loads = [u for u in topo if u.op is Ops.LOAD and len(u.src) == 1 and u.src[0].op is Ops.INDEX and u in dep and _vector_ok(u.dtype)]
  # every load's 4 lanes from one substitution per lane (not one per load and lane: compile time)
  lane_loads = [UOp(Ops.SINK, dtypes.void, tuple(loads)).substitute({inner: iadd(imul(new, UPCAST), iconst(j))}).src for j in range(UPCAST)]
  for i, ld in enumerate(loads):
    lanes = [lane_loads[j][i] for j in range(UPCAST)]
    idx0 = lanes[0].src[0].src[1]
    if not all(_lane_offset(idx0, lanes[j].src[0].src[1]) == j for j in range(1, UPCAST)): continue
    vec = UOp(Ops.LOAD, ld.dtype, (UOp(Ops.SHRINK, ld.dtype, (ld.src[0].src[0], idx0, iconst(UPCAST))),))
    for j in range(UPCAST): repl[j][lanes[j]] = UOp(Ops.INDEX, ld.dtype, (vec, iconst(j)))
    vector_in_reduce = vector_in_reduce or ld in in_reduce
  # in a reduce kernel the lanes pay off when they share vector loads in the loop (a matmul's B row); lanes that each read their
  # own row only add memory streams (x.sum(axis=1) got slower)
  if reduces and not vector_in_reduce: return ast
  subs = [st.substitute(r, name="vector loads") if r else st for st, r in zip(subs, repl)]
  idx0, buf = subs[0].src[0].src[1], store.src[0].src[0]
  if _vector_ok(buf.dtype) and all(_lane_offset(idx0, st.src[0].src[1]) == j for j, st in enumerate(subs)):
    vals = [st.src[1] for st in subs]
    stores: tuple[UOp, ...] = (UOp(Ops.STORE, dtypes.void, (UOp(Ops.SHRINK, buf.dtype, (buf, idx0, iconst(UPCAST))),
                                                            UOp(Ops.STACK, buf.dtype, tuple(vals)))),)
  else: stores = tuple(subs)
  return _rename(ast.replace(src=stores), n, (n // UPCAST, UPCAST) if n > UPCAST else (UPCAST,), pos)

def upcast_outer(ast:UOp, pos:int, n_loops:int) -> UOp:
  """pos: where the upcast inner output dim is in the kernel name; n_loops: the output loops before upcast (an inner loop of
  exactly 4 is gone after it)."""
  loops = _ranges(ast, AxisType.LOOP)
  # only after the inner upcast of a reduce kernel (4 REDUCEs, one per lane)
  if not loops or len([u for u in ast.toposort() if u.op is Ops.REDUCE]) != UPCAST: return ast
  if n_loops == 1: out = loops[0]   # x.sum(axis=0): 16 consecutive outputs, each reduce step reads whole 64-byte lines
  else:
    out, pos = loops[-2] if len(loops) == n_loops else loops[-1], pos - 1
    # only with a load in the reduce to share between the lanes
    dep = _dependents(topo := ast.toposort(), out)
    if not any(u.op is Ops.LOAD and u not in dep for red in topo if red.op is Ops.REDUCE for u in red.src[0].toposort()): return ast
  if (n := _size(out)) is None or n % UPCAST != 0: return ast
  new = iconst(0) if n == UPCAST else out.replace(src=(iconst(n // UPCAST),) + out.src[1:])
  stores = tuple(st.substitute({out: iadd(imul(new, UPCAST), iconst(i))}, name="upcast outer") for i in range(UPCAST) for st in ast.src)
  return _rename(ast.replace(src=stores), n, (n // UPCAST, UPCAST) if n > UPCAST else (UPCAST,), pos)

def _norm_index(x:UOp) -> UOp|None:
  # unrolled and upcast indices carry constant terms like (r*64)+(0*4)+1: summed up, the C reads (r*64)+1
  if mem_root(x.src[0]) is None or (idx := _from_terms(_terms(x.src[1]))) is x.src[1]: return None
  return x.replace(src=(x.src[0], idx, *x.src[2:]))

pm_norm_index = PatternMatcher([(UPat((Ops.INDEX, Ops.SHRINK), name="x"), _norm_index)])

def optimize_ast(ast:UOp, ren:Renderer|None=None) -> UOp:
  """The AST shaped for a renderer's declared capabilities: has_threads (and global_max[0], the thread count), supports_float4."""
  if NOOPT or ast.op is not Ops.SINK or ren is None: return ast
  # threading decides on the work before upcasting hides a factor of it; upcast then splits the (threaded) innermost loop
  threaded = False
  if ren.has_threads and ren.global_max:
    threaded = (ret := thread(ast, min(ren.global_max[0], THREAD_MAX))) is not ast
    ast = ret
  # the name lists the output dims (the threaded one as two) and then the reduce dims: the innermost output dim is the last of the
  # first group, in an E kernel simply the last
  reduce = any(u.op is Ops.REDUCE for u in ast.toposort())
  n_loops = len(_ranges(ast, AxisType.LOOP))
  ast = unroll(ast)
  if ren.supports_float4: ast = upcast(ast, n_loops - 1 + threaded if reduce else -1)
  ast = upcast_outer(ast, n_loops - 1 + threaded, n_loops)
  return graph_rewrite(ast, pm_norm_index, name="normalize indices")
