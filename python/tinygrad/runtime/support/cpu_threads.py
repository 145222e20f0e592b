# A thread pool in C for the CPU device's threaded kernels (a SPECIAL core_id: the kernel runs `n` times, core_id = 0..n-1).
#
# Why not Python threads: handing a launch to a sleeping Python thread and getting it back costs a futex wake each way plus the GIL, as
# much wall time as most of a training step's small kernels compute (benches/README.md, Design measurements). These workers are
# pthreads that never touch Python: after a job they spin (yielding the core) for SPIN_NS before they sleep, so the kernels of a
# replayed step, launched microseconds apart, find them awake.
#
# A job's launches are chunks taken from a shared counter: the calling thread runs chunk 0 at once, then takes more, and the workers
# take what is left when they get to it, so a worker that wakes late (or is descheduled on a loaded machine) never delays a small kernel; it finds
# nothing left. The ticket (generation << 32 | chunks << 16 | next chunk) names the job, so a worker holding a stale ticket can't take
# a chunk of the next job, and a job's fields (function, arguments) don't change while any of its chunks is unfinished.
#
# Where the workers run: a worker woken while the calling thread runs chunk 0 may be placed on the caller's own CPU (Linux's wake-up
# prefers the waker's CPU when the idle one looks unavailable, as a halted virtual CPU does to a guest), and the two halves of a kernel
# then share one core for milliseconds until the load balancer moves one: a 1024 matmul after a pause then runs markedly slower
# (benches/README.md, Design measurements). So before a job the workers are kept off the caller's current CPU (their affinity
# is the caller's minus that CPU, set again only when the caller has moved), on Linux. Chunk stealing still covers a worker that
# starts late on a busy CPU.
#
# Kernels are C functions of several pointers, then int32 variables, then core_id (renderer/__init__.py's call order). A job gives the
# kernel's address and its arguments as 64-bit words; a trampoline per (pointers, variables) count calls it. Kernels outside that
# (more buffers, variables of other dtypes) take the Python pool (ops_cpu.py).
from __future__ import annotations
import contextlib
import ctypes
import functools
import os
import threading
from typing import Callable

MAX_PTRS, MAX_VARS = 16, 2   # the trampolines cover kernels of up to this many buffers and int32 variables
SPIN_NS = 200_000            # a worker waits this long for the next job before it sleeps (a replayed step launches kernels µs apart)

def _trampolines() -> str:
  lines, table = [], []
  for k in range(MAX_PTRS + 1):
    row = []
    for m in range(MAX_VARS + 1):
      proto = ", ".join(["void*"] * k + ["int"] * (m + 1))
      call = ", ".join([f"(void*)a[{i}]" for i in range(k)] + [f"(int)a[{k + j}]" for j in range(m)] + ["tid"])
      # the kernel's buffer parameters are typed pointers (float*, ...): every data pointer has void*'s representation on the ABIs we run
      lines.append(f"static void t{k}_{m}(void *f, const uint64_t *a, int tid) {{ ((void (*)({proto}))f)({call}); }}")
      row.append(f"t{k}_{m}")
    table.append("{" + ", ".join(row) + "}")
  return "\n".join(lines) + f"\nstatic const tramp_t tramps[{MAX_PTRS + 1}][{MAX_VARS + 1}] = {{" + ",\n".join(table) + "};\n"

def pool_source() -> str:
  """The C of the pool and its trampolines."""
  return r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
typedef void (*tramp_t)(void *f, const uint64_t *a, int tid);
""" + _trampolines() + f"#define MAX_PTRS {MAX_PTRS}\n#define MAX_VARS {MAX_VARS}\n" + r"""
#define MAX_WORKERS 255
static _Atomic uint64_t ticket;              /* generation << 32 | chunks << 16 | next chunk */
static _Atomic int done, sleepers, quit;
static _Atomic uint64_t chunks_run[2];          /* chunks run by calling threads, by workers (tests and DEBUG read them) */
static void *job_fn;
static tramp_t job_tramp;
static const uint64_t *job_args;
static pthread_mutex_t run_mu, sleep_mu;
static pthread_cond_t wake;
static pthread_t threads[MAX_WORKERS];
static _Atomic long thread_ids[MAX_WORKERS];   /* the workers' kernel thread ids (Linux; tests read them) */
static int workers;
static long spin_ns;

static int has_work(uint64_t t) { return (t & 0xffff) < ((t >> 16) & 0xffff); }
static long now_ns(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000L + ts.tv_nsec; }

static void run_chunk(int i, int by_worker) {
  job_tramp(job_fn, job_args, i);
  atomic_fetch_add(&chunks_run[by_worker], 1);
  atomic_fetch_add(&done, 1);
}

/* take and run chunks of the current job until none is left */
static void work(int by_worker) {
  uint64_t t = atomic_load(&ticket);
  while (has_work(t)) {
    /* after a successful exchange the job can't finish before this chunk does, so its fields stay put */
    if (atomic_compare_exchange_weak(&ticket, &t, t + 1)) {
      run_chunk((int)(t & 0xffff), by_worker);
      t = atomic_load(&ticket);
    }
  }
}

static void *worker(void *arg) {
#ifdef __linux__
  atomic_store(&thread_ids[(intptr_t)arg], syscall(SYS_gettid));
#endif
  while (!atomic_load(&quit)) {
    work(1);
    long deadline = now_ns() + spin_ns;
    /* yielding: a worker that shares a core with the calling thread (or another program) lets it run */
    while (!has_work(atomic_load(&ticket)) && !atomic_load(&quit) && now_ns() < deadline) sched_yield();
    if (has_work(atomic_load(&ticket))) continue;
    pthread_mutex_lock(&sleep_mu);
    /* counted before the check: a job published after it sees the sleeper and signals under the mutex (no lost wake-up) */
    atomic_fetch_add(&sleepers, 1);
    while (!has_work(atomic_load(&ticket)) && !atomic_load(&quit)) pthread_cond_wait(&wake, &sleep_mu);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&sleep_mu);
  }
  return 0;
}

/* keeps the workers off the CPU the calling thread is on (see the module's comment); -1: not placed yet */
static int placed_cpu;
static void place_workers(void) {
#ifdef __linux__
  int cpu = sched_getcpu();
  if (cpu < 0 || cpu == placed_cpu) return;
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return;
  CPU_CLR(cpu, &set);
  if (CPU_COUNT(&set) == 0) return;   /* the caller may run on that CPU only: the workers share it with it */
  for (int i = 0; i < workers; i++) pthread_setaffinity_np(threads[i], sizeof(set), &set);
  placed_cpu = cpu;
#endif
}

static void wake_all(void) {
  if (atomic_load(&sleepers) == 0) return;
  pthread_mutex_lock(&sleep_mu);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&sleep_mu);
}

/* (re)start with n workers; also in a forked child, whose copies of the workers and locks are gone or stale */
int tg_pool_start(int n, long spin) {
  pthread_mutex_init(&run_mu, 0); pthread_mutex_init(&sleep_mu, 0); pthread_cond_init(&wake, 0);
  atomic_store(&quit, 0); atomic_store(&sleepers, 0);
  spin_ns = spin; placed_cpu = -1;
  /* a worker writes its id when it starts: until then its slot reads 0, never the id of an earlier pool's (exited) thread */
  for (int i = 0; i < n && i < MAX_WORKERS; i++) atomic_store(&thread_ids[i], 0);
  for (workers = 0; workers < n && workers < MAX_WORKERS; workers++)
    if (pthread_create(&threads[workers], 0, worker, (void *)(intptr_t)workers) != 0) break;
  return workers;
}

void tg_pool_stop(void) {
  atomic_store(&quit, 1);
  pthread_mutex_lock(&sleep_mu); pthread_cond_broadcast(&wake); pthread_mutex_unlock(&sleep_mu);
  for (int i = 0; i < workers; i++) pthread_join(threads[i], 0);
  workers = 0;
}

void tg_pool_stats(uint64_t *out) { out[0] = atomic_load(&chunks_run[0]); out[1] = atomic_load(&chunks_run[1]); }
int tg_pool_thread_ids(long *out) { for (int i = 0; i < workers; i++) out[i] = atomic_load(&thread_ids[i]); return workers; }

/* runs f's chunks 0..n-1 (k pointers then m int32 variables in args, core_id appended), the calling thread taking part; returns
   0, or -1 for a signature it has no trampoline for (nothing ran) */
int tg_pool_run(void *f, int k, int m, const uint64_t *args, int n) {
  if (k < 0 || k > MAX_PTRS || m < 0 || m > MAX_VARS || n < 1 || n > 0xffff) return -1;
  pthread_mutex_lock(&run_mu);
  if (n > 1) place_workers();
  job_fn = f; job_tramp = tramps[k][m]; job_args = args;
  atomic_store(&done, 0);
  /* published with chunk 0 taken: the calling thread runs it even if a woken worker takes its core for a while */
  atomic_store(&ticket, (((atomic_load(&ticket) >> 32) + 1) << 32) | ((uint64_t)n << 16) | 1);
  wake_all();
  run_chunk(0, 0);
  work(0);
  while (atomic_load(&done) < n) sched_yield();   /* the workers' last chunks */
  pthread_mutex_unlock(&run_mu);
  return 0;
}
"""

def pool_fits(k:int, m:int, n:int) -> bool:
  """Whether the pool can run a kernel of k buffers and m int32 variables (then core_id) in n chunks."""
  return 0 <= k <= MAX_PTRS and 0 <= m <= MAX_VARS and 1 <= n <= 0xffff

class NativePool:
  """The C pool of a loaded library of pool_source(), started with `workers` threads (beside the calling thread)."""
  def __init__(self, lib:ctypes.CDLL, workers:int, spin_ns:int|None=None):
    self.lib, self.workers, self.spin_ns = lib, workers, SPIN_NS if spin_ns is None else spin_ns
    lib.tg_pool_start.argtypes, lib.tg_pool_start.restype = [ctypes.c_int, ctypes.c_long], ctypes.c_int
    lib.tg_pool_run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.tg_pool_run.restype = ctypes.c_int
    lib.tg_pool_stop.argtypes, lib.tg_pool_stop.restype = [], None
    lib.tg_pool_stats.argtypes, lib.tg_pool_stats.restype = [ctypes.c_void_p], None
    self._run = lib.tg_pool_run
    self.started = lib.tg_pool_start(workers, self.spin_ns)

  def runner(self, fn_addr:int, k:int, m:int, n:int) -> Callable[..., None]:
    """A function of the kernel's arguments (k buffer addresses, m int32 variable values, a placeholder for core_id) that runs its n
    chunks."""
    if not pool_fits(k, m, n): raise ValueError(f"no trampoline for {k} buffers and {m} variables in {n} chunks")
    run, words = self._run, ctypes.c_uint64 * (k + m + 1)
    # (a negative variable wraps to its two's complement word, which the trampoline's (int) cast undoes)
    def launch(*args):
      if run(fn_addr, k, m, words(*args), n) != 0: raise RuntimeError("the C thread pool refused a job")
    return launch

  def chunks_run(self) -> tuple[int, int]:
    """How many chunks calling threads and the workers have run so far."""
    out = (ctypes.c_uint64 * 2)()
    self.lib.tg_pool_stats(out)
    return out[0], out[1]

  def thread_ids(self) -> list[int]:
    """The workers' kernel thread ids (0 for a worker not started yet, or off Linux)."""
    out = (ctypes.c_long * max(1, self.started))()
    return list(out[:self.lib.tg_pool_thread_ids(out)])

  def stop(self) -> None:
    """Ends the workers (jobs after it run on the calling thread alone)."""
    self.lib.tg_pool_stop()

@functools.cache
def _sched_getcpu() -> Callable[[], int]|None:
  try: fn = ctypes.CDLL(None).sched_getcpu
  except (AttributeError, OSError): return None   # not glibc/musl
  fn.argtypes, fn.restype = [], ctypes.c_int
  return fn

class ThreadPlacement:
  """Keeps the threads of a Python pool off the CPU of the thread that hands them work, as the C pool does with its workers (see the
  module's comment): each pool thread calls register() as it starts; the launching thread calls place() before it wakes them."""
  def __init__(self): self.threads, self.cpu = [], -1
  def register(self) -> None:
    self.threads.append(threading.get_native_id())
    self.cpu = -1   # a new thread has the launching thread's affinity: placed at the next launch
  def place(self) -> None:
    if not hasattr(os, "sched_setaffinity") or (getcpu := _sched_getcpu()) is None or (cpu := getcpu()) < 0 or cpu == self.cpu: return
    if not (cpus := os.sched_getaffinity(0) - {cpu}): return   # the launching thread may run on that CPU only
    for tid in self.threads:
      with contextlib.suppress(OSError): os.sched_setaffinity(tid, cpus)   # (a thread that has exited)
    self.cpu = cpu

_pool: NativePool|None = None
_failed = False
_lock = threading.Lock()

def native_pool(load:Callable[[str], ctypes.CDLL]|None, workers:int) -> NativePool|None:
  """The process's C pool, built on first use (`load` compiles and loads a source; None: only a pool already built), with `workers`
  threads beside the caller; None where it can't be built (no pthreads, a compiler error): the caller then uses Python threads."""
  global _pool, _failed
  if _pool is not None or load is None: return _pool
  with _lock:
    if _pool is None and not _failed:
      try: _pool = NativePool(load(pool_source()), workers)
      except Exception: _failed = True   # not tried again: each try would start the compiler
    return _pool

def _after_fork() -> None:
  # the child has the library's state but none of its threads: start them again (and a lock another thread held is never released)
  global _lock
  _lock = threading.Lock()
  if _pool is not None: _pool.started = _pool.lib.tg_pool_start(_pool.workers, _pool.spin_ns)

if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_after_fork)
