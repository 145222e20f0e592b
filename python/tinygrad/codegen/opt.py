"""Kernel AST optimizations applied before lowering (NOOPT=1 turns them all off).

  thread   split the outermost output loop of a kernel with enough work over the machine's cores: the loop RANGE r of size N
           becomes core_id*(N/n) + r' with r' of size N/n, where `core_id` is the runtime's thread-index variable (see
           tinygrad/renderer/__init__.py): the kernel is launched n times in parallel, each launch writing its own slice.
           The kernel name splits the dim: E_16777216 -> E_2_8388608.
  upcast   (elementwise kernels) the innermost output loop of size N, N % 4 == 0, runs N/4 times and computes 4 consecutive
           outputs per iteration: r becomes r'*4 + j for j = 0..3. Where the 4 indices of a buffer access are consecutive the 4
           loads become one SHRINK 4-lane load (each lane taken by INDEX(vector, j)) and the 4 stores one SHRINK store of a
           STACK; otherwise the accesses stay scalar (the stores then run as a GROUP). The name gets the upcast dim:
           E_100 -> E_25_4.
"""
from __future__ import annotations
import os
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.dtype import dtypes
from tinygrad.helpers import NOOPT, NUM_CPU_THREADS, prod
from tinygrad.schedule import KernelInfo
from tinygrad.schedule.indexing import iconst, iadd, imul, _terms

THREAD_MIN_WORK = 1 << 16     # elements of work (output elements times reduce trip count) before a kernel is threaded
THREAD_MAX = 32               # at most this many launches
THREADED_DEVICES = {"CPU"}    # runtimes that run core_id launches in parallel (PYTHON runs them one after another: no gain)

def _size(r:UOp) -> int|None: return r.src[0].arg if r.src and r.src[0].op is Ops.CONST else None

def _ranges(ast:UOp, kind:AxisType) -> list[UOp]:
  return sorted([u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[1] is kind], key=lambda r: r.arg[0])

def _rename(ast:UOp, old:int, new:tuple[int, ...], last:bool=False) -> UOp:
  """The kernel name with the dim `old` split into `new`: the first output dim (or, with last, the last dim of an E kernel)."""
  parts = ast.arg.name.split("_")
  i = len(parts) - 1 if last else 1
  if len(parts) > 1 and parts[i] == str(old): parts[i:i+1] = [str(s) for s in new]
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
  return _rename(ret, n_out, (n, n_out // n))

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

def upcast(ast:UOp) -> UOp:
  if len(ast.src) != 1 or ast.src[0].op is not Ops.STORE or len(ast.src[0].src) != 2 or ast.src[0].src[0].op is not Ops.INDEX: return ast
  if any(u.op is Ops.REDUCE for u in ast.toposort()): return ast
  loops = _ranges(ast, AxisType.LOOP)
  if not loops or (n := _size(loops[-1])) is None or n % UPCAST != 0: return ast
  inner = loops[-1]
  # a loop of exactly 4 disappears (its one iteration is r' = 0)
  new = iconst(0) if n == UPCAST else inner.replace(src=(iconst(n // UPCAST),) + inner.src[1:])
  store = ast.src[0]
  subs = [store.substitute({inner: iadd(imul(new, UPCAST), iconst(j))}, name="upcast") for j in range(UPCAST)]
  # loads: ungated, from a buffer, whose lane indices are idx, idx+1, ... become one vector load
  repl: list[dict[UOp, UOp]] = [{} for _ in range(UPCAST)]
  for ld in [u for u in store.src[1].toposort() if u.op is Ops.LOAD and len(u.src) == 1 and u.src[0].op is Ops.INDEX and inner in u.backward_slice
             and _vector_ok(u.dtype)]:
    lanes = [ld.substitute({inner: iadd(imul(new, UPCAST), iconst(j))}) for j in range(UPCAST)]
    idx0 = lanes[0].src[0].src[1]
    if not all(_lane_offset(idx0, lanes[j].src[0].src[1]) == j for j in range(1, UPCAST)): continue
    vec = UOp(Ops.LOAD, ld.dtype, (UOp(Ops.SHRINK, ld.dtype, (ld.src[0].src[0], idx0, iconst(UPCAST))),))
    for j in range(UPCAST): repl[j][lanes[j]] = UOp(Ops.INDEX, ld.dtype, (vec, iconst(j)))
  subs = [st.substitute(r, name="vector loads") if r else st for st, r in zip(subs, repl)]
  idx0, buf = subs[0].src[0].src[1], store.src[0].src[0]
  if _vector_ok(buf.dtype) and all(_lane_offset(idx0, st.src[0].src[1]) == j for j, st in enumerate(subs)):
    vals = [st.src[1] for st in subs]
    stores: tuple[UOp, ...] = (UOp(Ops.STORE, dtypes.void, (UOp(Ops.SHRINK, buf.dtype, (buf, idx0, iconst(UPCAST))),
                                                            UOp(Ops.STACK, buf.dtype, tuple(vals)))),)
  else: stores = tuple(subs)
  return _rename(ast.replace(src=stores), n, (n // UPCAST, UPCAST) if n > UPCAST else (UPCAST,), last=True)

def optimize_ast(ast:UOp, device:str|None=None) -> UOp:
  if NOOPT or ast.op is not Ops.SINK or device is None: return ast
  # threading decides on the work before upcasting hides a factor of it; upcast then splits the (threaded) innermost loop
  if device.split(":")[0] in THREADED_DEVICES: ast = thread(ast, min(NUM_CPU_THREADS.value, os.cpu_count() or 1, THREAD_MAX))
  return upcast(ast)
