"""BEAM search (BEAM=N): a kernel's Opts found by compiling and timing candidates instead of chosen by the heuristics.

Round 0 times the unoptimized kernel and the hand-coded heuristics' choice (so the search never ends worse than the default), and for a
kernel the heuristics give a packed register tile, the family of tiles around it (heuristic.py tile_family: other row counts, and the
tile unpacked). Each later round extends every kept candidate by every action of `actions` (invalid ones raise KernelOptError and are
skipped, as are actions adding lanes past the caps and kernels seen before), compiles the new candidates in worker processes
(PARALLEL= of them, spawned), times each compiled one on the device in this process (on scratch buffers, a few interleaved runs, the
minimum; one far slower than the best so far is dropped after its first run) and keeps the N fastest. The search stops when a round
brings no improvement. The result (its list of Opts) is cached on disk by the kernel's AST, device and N (CACHELEVEL=0: no cache;
IGNORE_BEAM_CACHE=1: search again).

Workers get only plain picklable data: the kernel AST, a batch of candidates' lists of Opts, the renderer (which pickles as its class
and Target), the compiler's class and a snapshot of the ContextVars; they lower and render each candidate, compile the batch in one
compiler run (starting the C compiler per candidate cost more than the search of a small kernel), and send back the program
descriptions and binaries. The pool is our own (_Pool): each worker has a pipe, so a worker that crashes, is killed or runs past its
timeout costs only its batch (tried once more on a fresh worker) and the search goes on; if workers can't even start, candidates are
compiled here.
Workers are spawned with a stand-in __main__, so the user's script is never run again in them.

BEAM_DEBUG=1 prints each round's best candidates, DEBUG>=2 the search's result, and a progress bar is drawn on stderr (on a terminal).
"""
from __future__ import annotations
import atexit
import collections
import hashlib
import math
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import types
from dataclasses import replace
from multiprocessing.connection import wait as wait_connections
from typing import Any, Sequence
from tinygrad.helpers import DEBUG, PARALLEL, CACHELEVEL, IGNORE_BEAM_CACHE, NOLOCALS, ContextVar, Context, getenv, diskcache_get, diskcache_put
from tinygrad.helpers import time_to_str, colored, prod, tqdm
from tinygrad.device import Device, Buffer
from tinygrad.dtype import AddrSpace
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.renderer import Renderer, ProgramSpec, Estimates, buffer_size
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opts, ranges_of, range_size
from tinygrad.codegen.lower import lower_kernel

# ***** the action space (tinygrad 0.14's list; axis and amount checks are apply_opt's) *****

actions = [Opt(OptOps.UPCAST, axis, amt) for amt in [0, 2, 3, 4, 5, 7] for axis in range(8)]
actions += [Opt(OptOps.UNROLL, axis, amt) for amt in [0, 4, 7] for axis in range(5)]
actions += [Opt(OptOps.LOCAL, axis, amt) for amt in [2, 3, 4, 8, 13, 16, 29] for axis in range(6)]
actions += [Opt(OptOps.GROUPTOP, axis, amt) for amt in [13, 16, 28, 29, 32, 49, 64, 256] for axis in range(3)]
actions += [Opt(OptOps.GROUP, axis, amt) for amt in [0, 4, 8, 16] for axis in range(3)]
if getenv("BEAM_PADTO", 0): actions += [Opt(OptOps.PADTO, axis, amt) for amt in [32] for axis in range(7)]
actions += [Opt(OptOps.LOCAL, 0, 32), Opt(OptOps.LOCAL, 6, 2)]
actions += [Opt(OptOps.TC, 0, (-1, 0, getenv("TC", 1)))]
actions += [Opt(OptOps.TC, axis, (-1, getenv("TC_OPT", 2), getenv("TC", 1))) for axis in range(9)]
actions += [Opt(OptOps.SWAP, axis0, axis1) for axis0 in range(5) for axis1 in range(axis0 + 1, 5)]
actions += [Opt(OptOps.THREAD, axis, amt) for amt in [2, 3, 4, 5, 8, 12, 16, 24, 32, 64] for axis in range(3)]
actions += [Opt(OptOps.PACK, axis, arg) for axis in range(4) for arg in range(2)]   # ours: a panel packed in a loop (CPU)
actions += [Opt(OptOps.CHAIN)]   # ours: a reduce's unrolled products as a chain of fused multiply-adds (renderers with fused_mulacc)
if NOLOCALS: actions += [Opt(OptOps.NOLOCALS)]

BEAM_DEBUG = ContextVar("BEAM_DEBUG", 0)
UPCAST_MAX, LOCAL_MAX = getenv("BEAM_UPCAST_MAX", 256), getenv("BEAM_LOCAL_MAX", 1024)  # lanes of all UPCAST/UNROLL (LOCAL/GROUP) ranges
UOPS_MAX = getenv("BEAM_UOPS_MAX", 3000)             # a candidate lowering to more linear UOps is not compiled
TIMEOUT_SEC = getenv("BEAM_TIMEOUT_SEC", 10)         # a compile taking longer (per candidate of a batch) is killed
BATCH = getenv("BEAM_BATCH", 8)                      # candidates compiled together by a worker (one C compiler run)
START_TIMEOUT_SEC = 120                              # a worker not ready (Python started, tinygrad imported) by then is replaced
SLOW_FACTOR = getenv("BEAM_SLOW_FACTOR", 3.0)        # a candidate whose first run is this much slower than the best so far is dropped
RUNS = getenv("BEAM_RUNS", 3)                        # timed runs per candidate (the minimum counts)
MIN_PROGRESS = getenv("BEAM_MIN_PROGRESS", 0.01)     # a round must beat the best by this fraction to go on
RUN_BUDGET_SEC = getenv("BEAM_RUN_BUDGET_MS", 50) / 1e3   # no more runs of a candidate once its runs add up to this
# the unoptimized kernel is a candidate only where the default runs faster than this: it can win only where threading and upcasting
# cost more than they save (small kernels), and on a big kernel one run of it can take seconds
BASE_MAX_SEC = getenv("BEAM_BASE_MAX_MS", 2) / 1e3

_IN_WORKER = False   # set in worker processes: a worker lowering a kernel never starts a search of its own

def kernel_actions(ast:UOp, ren:Renderer|None=None) -> dict[Opt, UOp]:
  """Every action that applies to ast (one more Opt on top of its own), within the lane limits: {action: the new AST}."""
  ret: dict[Opt, UOp] = {}
  def lanes(x:UOp, *kinds:AxisType) -> int: return prod(range_size(r) or 1 for r in ranges_of(x, *kinds))
  # the caps stop actions that add lanes: a kernel over them already (the heuristics' register tile with the scheduler's unroll) may
  # still be swapped, threaded or packed
  up, loc = lanes(ast, AxisType.UPCAST, AxisType.UNROLL), lanes(ast, AxisType.LOCAL, AxisType.GROUP_REDUCE)
  for a in actions:
    try: new = apply_opts(ast, [a], ren)
    except KernelOptError: continue
    if (n := lanes(new, AxisType.UPCAST, AxisType.UNROLL)) > UPCAST_MAX and n > up: continue
    if (n := lanes(new, AxisType.LOCAL, AxisType.GROUP_REDUCE)) > LOCAL_MAX and n > loc: continue
    if len(ranges_of(new, AxisType.THREAD)) > 1: continue   # one launch dimension of threads: the codegen would reject it
    ret[a] = new
  return ret

# ***** compiling a candidate (in a worker) *****

def lower_candidate(ast:UOp, opts:Sequence[Opt], ren:Renderer) -> ProgramSpec:
  """The kernel ast with opts applied, lowered and rendered."""
  k = lower_kernel(ast, ren, tuple(opts))
  if UOPS_MAX > 0 and len(k.uops) > UOPS_MAX: raise RuntimeError(f"{len(k.uops)} UOps, more than BEAM_UOPS_MAX={UOPS_MAX}")
  return ren.to_program(k.program_input)

def compile_candidates(ast:UOp, cands:Sequence[Sequence[Opt]], ren:Renderer, compiler) -> list[tuple[str, Any]]:
  """Each candidate (a list of Opts on ast) lowered, rendered and compiled: ("ok", (its program without the linear UOps, its estimates,
  the binary)) or ("err", why not). They are compiled together (compile_many: the CPU's C compiler starts once for several), and one
  by one if that fails, so each error is a kernel's own."""
  out: list[tuple[str, Any]] = []
  for opts in cands:
    try: out.append(("ok", lower_candidate(ast, opts, ren)))
    except Exception as e: out.append(("err", f"{type(e).__name__}: {e}"))   # a candidate that fails to lower is just not a candidate
  todo = [i for i, (ok, _) in enumerate(out) if ok == "ok"]
  try: libs: list[Any] = compiler.compile_many([out[i][1].src for i in todo])
  except Exception:
    libs = []
    for i in todo:
      try: libs.append(compiler.compile(out[i][1].src))
      except Exception as e: libs.append(e)
  for i, lib in zip(todo, libs):
    spec = out[i][1]
    out[i] = ("err", f"{type(lib).__name__}: {lib}") if isinstance(lib, Exception) else ("ok", (replace(spec, uops=()), spec.estimates, lib))
  return out

def _context_snapshot() -> dict[str, Any]:
  """The ContextVars' current values (those that are plain data), so a worker lowers exactly as this process would."""
  return {k: v for k, v in ContextVar.current_values().items() if type(v) in (int, float, str, bool)}

def worker_payload(ast:UOp, cands:Sequence[Sequence[Opt]], ren:Renderer) -> bytes:
  """What a worker receives for a batch of candidates, pickled: the ContextVars, the AST, each candidate's Opts, the renderer and its
  compiler's class with its constructor arguments (Compiler.init_args: CUDA's arch)."""
  comp = (type(ren.compiler), tuple(getattr(ren.compiler, "init_args", ())))
  return pickle.dumps((_context_snapshot(), ast, tuple(tuple(opts) for opts in cands), ren, comp))

_compilers: dict[tuple, Any] = {}
def run_payload(data:bytes) -> tuple[str, Any]:
  """A worker's job (or this process's, without workers): ("ok", compile_candidates(...)) or ("err", why the payload failed). The
  ContextVars are the payload's while it runs (quiet: DEBUG, VIZ and match statistics off) and restored after."""
  try:
    ctxvals, ast, cands, ren, (compiler_t, compiler_args) = pickle.loads(data)
    known = ContextVar.current_values()
    quiet = {"DEBUG": 0, "BEAM": 0, "VIZ": 0, "TRACK_MATCH_STATS": 0}
    with Context(**{**{k: v for k, v in ctxvals.items() if k in known}, **quiet}):
      if (comp := _compilers.get(key := (compiler_t, compiler_args))) is None: comp = _compilers[key] = compiler_t(*compiler_args)
      return "ok", compile_candidates(ast, cands, ren, comp)
  except Exception as e:
    return "err", f"{type(e).__name__}: {e}"

def _worker_main(conn) -> None:
  global _IN_WORKER
  _IN_WORKER = True
  signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle (it stops the workers)
  conn.send_bytes(b"ready")
  while True:
    try: data = conn.recv_bytes()
    except (EOFError, OSError): return
    if not data: return
    conn.send_bytes(pickle.dumps(run_payload(data)))

# ***** the worker pool *****

_start_lock = threading.Lock()
def _start_without_main(proc:multiprocessing.process.BaseProcess) -> None:
  # spawn imports the parent's __main__ in the child (as __mp_main__) when it has a __file__ or a __spec__, which runs the top level of
  # the user's script again: the child is started while __main__ is a stand-in module with neither
  with _start_lock:
    real = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try: proc.start()
    finally:
      if real is not None: sys.modules["__main__"] = real
      else: del sys.modules["__main__"]

class _Worker:
  def __init__(self, ctx):
    self.conn, child = ctx.Pipe(duplex=True)
    self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True, name="tinygrad-beam-worker")
    _start_without_main(self.proc)
    child.close()   # only the child holds its end now: its death is an EOF here
    self.ready, self.task, self.since, self.started = False, None, 0.0, time.monotonic()
  def stop(self, kill:bool=False) -> None:
    if not kill:
      try: self.conn.send_bytes(b"")
      except OSError: kill = True
    if kill and self.proc.is_alive(): self.proc.kill()
    self.proc.join(timeout=1 if not kill else 5)
    if self.proc.is_alive():
      self.proc.kill()
      self.proc.join(timeout=5)
    self.conn.close()

class _Pool:
  """BEAM's pool: processes, not threads, because lowering and rendering a candidate is Python that holds the GIL (and a worker that
  crashes or hangs can be replaced). `size` spawned worker processes, each on its own pipe. map() hands out payloads and yields
  results as they come; a worker that dies or passes the timeout is replaced and its payload retried once. Workers that keep dying
  before they are ready break the pool."""
  START_FAILURES = 3
  def __init__(self, size:int):
    self.ctx = multiprocessing.get_context("spawn")
    self.size, self.start_failures, self.broken = size, 0, False
    self.workers: list[_Worker] = [_Worker(self.ctx) for _ in range(size)]
  def _replace(self, w:_Worker) -> None:
    if not w.ready: self.start_failures += 1
    w.stop(kill=True)
    self.workers.remove(w)
    if self.start_failures >= self.START_FAILURES: self.broken = True
    else: self.workers.append(_Worker(self.ctx))
  def map(self, payloads:Sequence[bytes], timeout:float):
    """Yields (index, result) for every payload, in completion order. The result is None where the payload's worker died or timed out
    twice, and "unrun" where the pool broke before it ran (the caller compiles those itself)."""
    todo, tries = collections.deque(range(len(payloads))), [0] * len(payloads)
    def lost(w:_Worker) -> int|None:
      # the payload of a worker that died or hung goes back to the queue, unless it had already been tried on another worker
      i, started = w.task, w.ready
      self._replace(w)
      if i is None: return None
      if started: tries[i] += 1
      if tries[i] < 2 and not self.broken:
        todo.appendleft(i)
        return None
      return i
    try:
      while (todo or any(w.task is not None for w in self.workers)) and not self.broken:
        for w in list(self.workers):
          if w.task is None and todo:
            i = todo.popleft()
            try: w.conn.send_bytes(payloads[i])
            except OSError:   # the worker is already gone
              todo.appendleft(i)
              self._replace(w)
              continue
            w.task, w.since = i, time.monotonic()
        busy = {w.conn: w for w in self.workers if w.task is not None or not w.ready}
        for conn in wait_connections(list(busy), timeout=0.1):
          w = busy[conn]
          try: data = conn.recv_bytes()
          except (EOFError, OSError):
            if (i := lost(w)) is not None: yield i, None if tries[i] else "unrun"
            continue
          if data == b"ready":   # a task's time runs from here: starting Python and importing tinygrad is not compiling
            w.ready, w.since, self.start_failures = True, time.monotonic(), 0
            continue
          i, w.task = w.task, None
          try: res = pickle.loads(data)
          except Exception: res = None
          yield i, res
        now = time.monotonic()
        for w in [w for w in self.workers if (w.task is not None and w.ready and now - w.since > timeout) or not w.proc.is_alive() or
                  (not w.ready and now - w.started > START_TIMEOUT_SEC)]:
          if w in self.workers and (i := lost(w)) is not None: yield i, None if tries[i] else "unrun"
      if self.broken:   # workers can't start here: the caller compiles what is left, except what already crashed a worker
        left = list(todo) + [w.task for w in self.workers if w.task is not None]
        for w in self.workers: w.task = None
        for i in left: yield i, None if tries[i] else "unrun"
    finally:
      # left early (an exception, Ctrl-C, the caller stopped): a worker still busy would answer into the next map, so it is replaced
      for w in [w for w in self.workers if w.task is not None]:
        w.task = None
        self._replace(w)
  def close(self) -> None:
    for w in self.workers: w.stop()
    self.workers = []

_pool: _Pool|None = None
_pool_lock = threading.Lock()   # one search at a time uses the pool

def _get_pool() -> _Pool|None:
  global _pool
  if PARALLEL.value <= 0 or _IN_WORKER or multiprocessing.current_process().daemon: return None
  if _pool is not None and (_pool.broken or _pool.size != PARALLEL.value):
    _pool.close()
    _pool = None
  if _pool is None: _pool = _Pool(PARALLEL.value)
  return _pool

def close_pool() -> None:
  """Stops the search's worker processes (a later search starts new ones)."""
  global _pool
  if _pool is not None: _pool.close()
  _pool = None
atexit.register(close_pool)

def _forget_pool_in_child() -> None:
  # a forked child (a data loader) holds copies of the parent's worker handles: stopping them at its exit, as close_pool and
  # multiprocessing's exit handler (daemon children are terminated) would, stops the parent's workers. It starts its own if it searches
  global _pool, _pool_lock, _start_lock
  if _pool is not None:
    if (children := getattr(multiprocessing.process, "_children", None)) is not None:
      for w in _pool.workers: children.discard(w.proc)
    _pool = None
  _pool_lock, _start_lock = threading.Lock(), threading.Lock()   # (held by another thread of the parent at the fork: never released here)
if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_forget_pool_in_child)

def _compile_all(base:UOp, cands:list[tuple[Opt, ...]], ren:Renderer) -> dict[int, tuple[ProgramSpec, Estimates, bytes]]:
  """Compiles the candidates (in the workers, or here without them), in batches of up to BATCH, at least two per worker so they even
  out; {index: result} of those that compiled."""
  pool = _get_pool()
  size = max(1, min(BATCH, math.ceil(len(cands) / (2 * len(pool.workers))) if pool is not None and pool.workers else BATCH))
  batches = [list(range(i, min(i + size, len(cands)))) for i in range(0, len(cands), size)]
  payloads = [worker_payload(base, [cands[i] for i in b], ren) for b in batches]
  results: dict[int, Any] = {}
  with tqdm(total=len(cands), desc=f"BEAM {kernel_label(base)}", disable=None) as bar:
    for j, res in (pool.map(payloads, TIMEOUT_SEC * size) if pool is not None else ((j, "unrun") for j in range(len(payloads)))):
      if res == "unrun": res = run_payload(payloads[j])
      bar.update(len(batches[j]))
      if res is None or res[0] != "ok":
        if BEAM_DEBUG >= 2: print(f"BEAM: a batch of {len(batches[j])} candidates failed: {'its worker died' if res is None else res[1]}")
        continue
      for i, (ok, r) in zip(batches[j], res[1]):
        if ok == "ok": results[i] = r
        elif BEAM_DEBUG >= 2: print(f"BEAM: {list(cands[i])} failed: {r}")
  return results

# ***** timing on the device *****

def _scratch_buffers(ast:UOp, device:str) -> dict[int, Buffer]|None:
  """A fresh buffer for each PARAM slot of the kernel (None if a size is symbolic)."""
  ret: dict[int, Buffer] = {}
  for p in ast.toposort():
    if p.op is Ops.PARAM and p.src and p.arg.addrspace is AddrSpace.GLOBAL:
      if (n := buffer_size(p)) is None: return None
      ret[p.arg.slot] = Buffer(device, max(n, 1), p.arg.dtype).ensure_allocated()
  return ret

def _time_all(progs:list[Any], bufs:dict[int, Buffer], best:float) -> list[float]|None:
  """Min run time of each loaded (program, spec), runs interleaved across the candidates: up to RUNS each, fewer for a long kernel (once
  its runs add up to RUN_BUDGET_SEC); after its first run, a candidate slower than SLOW_FACTOR x the best is not run again. inf: failed
  to run. None: the device can't time its kernels."""
  tms, spent = [math.inf] * len(progs), [0.0] * len(progs)
  # untimed warm-up runs, so no candidate pays for first touching the buffers or starting the device's threads: the first program, and
  # the first that runs on several cores
  warm = {0, next((i for i, (_, spec) in enumerate(progs) if spec.core_id is not None), 0)} if progs else set()
  for rep in [-1] + list(range(RUNS)):
    cutoff = min([best] + tms) * SLOW_FACTOR
    for i, (prg, spec) in enumerate(progs):
      if prg is None or (rep == -1 and i not in warm) or (rep > 0 and (tms[i] > cutoff or spent[i] >= RUN_BUDGET_SEC)): continue
      try:
        gs, ls = spec.launch_dims({})
        t = prg(*[bufs[s]._buf for s in spec.globals], global_size=gs, local_size=ls, vals=spec.vals(_var_bounds(spec)), wait=True)
      except Exception as e:
        if BEAM_DEBUG >= 2: print(f"BEAM: {spec.name} failed to run: {e}")
        progs[i] = (None, spec)
        continue
      if t is None: return None
      if rep >= 0: tms[i], spent[i] = min(tms[i], t), spent[i] + t
  return tms

def _var_bounds(spec:ProgramSpec) -> dict[str, int]:
  return {n: int(v.arg.vmin_vmax[1]) for v, n in zip(spec.vars, spec.var_names) if getattr(v.arg, "vmin_vmax", None) is not None}

# ***** the search *****

def kernel_label(ast:UOp) -> str: return getattr(ast.arg, "name", "kernel")

def _cache_key(ast:UOp, ren:Renderer, amt:int) -> dict:
  return {"ast": hashlib.sha256(pickle.dumps(ast.replace(arg=None))).hexdigest(), "amt": amt, "device": ren.target.device or ren.device,
          "renderer": f"{type(ren).__name__}{ren.suffix}{ren.target!r}"}

def _opts_to_plain(opts:Sequence[Opt]) -> list: return [[o.op.name, o.axis, o.arg] for o in opts]
def _opts_from_plain(x:list) -> tuple[Opt, ...]:
  return tuple(Opt(OptOps[op], axis, tuple(arg) if isinstance(arg, list) else arg) for op, axis, arg in x)

def beam_search(ast:UOp, ren:Renderer|str, amt:int, disable_cache:bool|None=None) -> UOp:
  """The kernel ast with the Opts a BEAM search of width amt finds fastest on ren's device (see the module's docstring)."""
  from tinygrad.codegen.opt.heuristic import optimize_ast
  if isinstance(ren, str): ren = Device[ren].renderer
  base = ast
  if _IN_WORKER or amt < 1 or ast.op is not Ops.SINK: return optimize_ast(ast, ren)
  key = _cache_key(base, ren, amt)
  if not (IGNORE_BEAM_CACHE.value if disable_cache is None else disable_cache) and CACHELEVEL >= 1 and \
     (val := diskcache_get("beam_search", key)) is not None:
    try:
      ret = apply_opts(base, _opts_from_plain(val), ren)
      if DEBUG >= 2: print(f"BEAM {kernel_label(ret)}: cached {list(ret.arg.applied_opts)}")
      return ret
    except (KernelOptError, KeyError, TypeError, ValueError): pass   # an entry of another version of the action space: search again
  device = Device.canonicalize(ren.target.device or ren.device)
  with _pool_lock: ret = _search(base, ren, amt, device, optimize_ast(base, ren))
  if ret is None: return optimize_ast(base, ren)
  if CACHELEVEL >= 1: diskcache_put("beam_search", key, _opts_to_plain(ret.arg.applied_opts))
  return ret

def _search(base:UOp, ren:Renderer, amt:int, device:str, heuristic:UOp) -> UOp|None:
  from tinygrad.codegen.opt.heuristic import tile_family
  st = time.perf_counter()
  if (bufs := _scratch_buffers(base, device)) is None: return None
  dev = Device[device]
  seen: set[UOp] = set()       # candidates by AST (the recorded opts aside): each is compiled once
  seen_src: set[str] = set()   # and by source: different opts may render the same code
  n_tried = 0
  def measure(cands:list[UOp], best:float) -> list[tuple[float, UOp]]|None:
    """The candidates not seen before, compiled and timed: (time, AST) of those that ran, fastest first; None if the device can't time."""
    nonlocal n_tried
    cands = [c for c in cands if (k := c.replace(arg=None)) not in seen and not seen.add(k)]  # type: ignore[func-returns-value]
    n_tried += len(cands)
    progs, which = [], []
    for i, (spec, _, lib) in _compile_all(base, [c.arg.applied_opts for c in cands], ren).items():
      if spec.src in seen_src: continue
      seen_src.add(spec.src)
      try: progs.append((dev.runtime(spec.function_name, lib, spec), spec))
      except Exception as e:
        if BEAM_DEBUG >= 2: print(f"BEAM: {spec.name} failed to load: {e}")
        continue
      which.append(cands[i])
    if (tms := _time_all(progs, bufs, best)) is None: return None
    return sorted([(t, c) for t, c in zip(tms, which) if t < math.inf], key=lambda x: x[0])
  # round 0: the default; the unoptimized kernel too where the default is fast enough that it could lose to it
  if (timed := measure([heuristic], math.inf)) is None: return None
  default_tm = timed[0][0] if timed else math.inf
  if default_tm < BASE_MAX_SEC and (more := measure([base], default_tm)): timed = sorted(timed + more, key=lambda x: x[0])
  # and a family of register tiles around the default's (a big matmul: other row counts, unpacked), which the rounds extend
  if (family := tile_family(base, ren)) and (more := measure(family, default_tm)): timed = sorted(timed + more, key=lambda x: x[0])
  best: tuple[float, UOp]|None = timed[0] if timed else None
  beam, rnd = timed[:amt], 0
  while beam and best is not None:
    if BEAM_DEBUG:
      print(f"BEAM {kernel_label(base)} round {rnd}: {n_tried} candidates so far, {time.perf_counter() - st:.2f}s")
      for t, c in beam[:max(amt, 3)]: print(f"  {time_to_str(t, w=10)}  {list(c.arg.applied_opts)}")
    # every action on every kept candidate that is not far slower than the best (its extensions would be too, and each run costs)
    cands = [c for t, c in beam if t <= best[0] * SLOW_FACTOR for c in kernel_actions(c, ren).values()]
    if (timed := measure(cands, best[0])) is None: return None
    rnd += 1
    if not timed or timed[0][0] >= best[0] * (1 - MIN_PROGRESS):   # no progress: done
      if timed and timed[0][0] < best[0]: best = timed[0]
      break
    best, beam = timed[0], timed[:amt]
  if best is None: return None
  if DEBUG >= 2:
    print(f"BEAM {colored(kernel_label(best[1]), 'green')}: {time_to_str(best[0], w=0)} (default {time_to_str(default_tm, w=0)}) "
          f"{list(best[1].arg.applied_opts)} from {n_tried} candidates in {rnd} rounds, {time.perf_counter() - st:.2f}s")
  return best[1]
