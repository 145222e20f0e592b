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
# A threaded kernel is called through the entry point the C renderer writes after it (renderer/cstyle.py thread_entry_name): one C
# signature, `void (const uint64_t *args, int core_id)`, for every kernel, whatever its buffers and the dtypes of its variables. A job
# is that entry's address and the kernel's arguments as 64-bit words.
#
# This is the only pool that runs kernels. Where it can't be built (the pool's C fails to compile or load) a threaded kernel's chunks
# run one after another on the calling thread, and where no worker thread starts (pthread_create fails) the calling thread takes every
# chunk itself. The other pools on the CPU path run no kernels: the compile pool (helpers.map_on_threads, used by the C compiler's
# compile_many, which device.ProgramLoader's one background thread starts early) is one short-lived thread per translation unit, each
# waiting on a compiler process; BEAM's pool (codegen/opt/search.py _Pool) is worker processes that lower, render and compile
# candidates, which are then timed in the searching process, on this pool.
from __future__ import annotations
import ctypes
import os
import threading
from typing import Callable
from tinygrad.helpers import DEBUG

SPIN_NS = 200_000            # a worker waits this long for the next job before it sleeps (a replayed step launches kernels µs apart)
MAX_JOB_CHUNKS = 0xffff      # the ticket's 16-bit chunk fields: a launch of more chunks is run as several jobs

def pool_source() -> str:
  """The C of the pool."""
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
typedef void (*entry_t)(const uint64_t *args, int core_id);
""" + f"#define MAX_JOB_CHUNKS {MAX_JOB_CHUNKS}\n" + r"""
#define MAX_WORKERS 255
static _Atomic uint64_t ticket;              /* generation << 32 | chunks << 16 | next chunk */
static _Atomic int done, sleepers, quit;
static _Atomic uint64_t chunks_run[2];          /* chunks run by calling threads, by workers (tests and DEBUG read them) */
static entry_t job_fn;
static const uint64_t *job_args;
static long job_base;                        /* core_id of the job's chunk 0 */
static pthread_mutex_t run_mu, sleep_mu;
static pthread_cond_t wake;
static pthread_t threads[MAX_WORKERS];
static _Atomic long thread_ids[MAX_WORKERS];   /* the workers' kernel thread ids (Linux; tests read them) */
static int workers;
static long spin_ns;

static int has_work(uint64_t t) { return (t & 0xffff) < ((t >> 16) & 0xffff); }
static long now_ns(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000L + ts.tv_nsec; }

static void run_chunk(int i, int by_worker) {
  job_fn(job_args, (int)(job_base + i));
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

/* runs f(args, core_id) for core_id 0..n-1, the calling thread taking part */
void tg_pool_run(entry_t f, const uint64_t *args, long n) {
  pthread_mutex_lock(&run_mu);
  if (n > 1) place_workers();
  for (long base = 0; base < n; base += MAX_JOB_CHUNKS) {
    uint64_t chunks = n - base < MAX_JOB_CHUNKS ? (uint64_t)(n - base) : MAX_JOB_CHUNKS;
    job_fn = f; job_args = args; job_base = base;
    atomic_store(&done, 0);
    /* published with chunk 0 taken: the calling thread runs it even if a woken worker takes its core for a while */
    atomic_store(&ticket, (((atomic_load(&ticket) >> 32) + 1) << 32) | (chunks << 16) | 1);
    wake_all();
    run_chunk(0, 0);
    work(0);
    while ((uint64_t)atomic_load(&done) < chunks) sched_yield();   /* the workers' last chunks */
  }
  pthread_mutex_unlock(&run_mu);
}
"""

class NativePool:
  """The C pool of a loaded library of pool_source(), started with `workers` threads (beside the calling thread)."""
  def __init__(self, lib:ctypes.CDLL, workers:int, spin_ns:int|None=None):
    self.lib, self.workers, self.spin_ns = lib, workers, SPIN_NS if spin_ns is None else spin_ns
    lib.tg_pool_start.argtypes, lib.tg_pool_start.restype = [ctypes.c_int, ctypes.c_long], ctypes.c_int
    lib.tg_pool_run.argtypes, lib.tg_pool_run.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long], None
    lib.tg_pool_stop.argtypes, lib.tg_pool_stop.restype = [], None
    lib.tg_pool_stats.argtypes, lib.tg_pool_stats.restype = [ctypes.c_void_p], None
    self._run = lib.tg_pool_run
    self.started = lib.tg_pool_start(workers, self.spin_ns)

  def runner(self, entry_addr:int, nargs:int, n:int) -> Callable[..., None]:
    """A function of a threaded kernel's nargs arguments in call order (buffer addresses, then variable values, core_id's a placeholder)
    that runs its n chunks through the kernel's entry point (see the module's comment) at entry_addr."""
    if n < 1: raise ValueError(f"a threaded launch needs at least one chunk, got {n}")
    run, words = self._run, ctypes.c_uint64 * nargs
    # (a negative variable becomes its two's complement word, which the entry's cast to the variable's C type undoes)
    def launch(*args): run(entry_addr, words(*args), n)
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

_pool: NativePool|None = None
_failed = False
_lock = threading.Lock()

def native_pool(load:Callable[[str], ctypes.CDLL], workers:int) -> NativePool|None:
  """The process's pool, built on first use (`load` compiles and loads a source) with `workers` threads beside the caller; None where
  it can't be built (the pool's C fails to compile or load): the caller then runs a launch's chunks itself, one after another."""
  global _pool, _failed
  if _pool is not None: return _pool
  with _lock:
    if _pool is None and not _failed:
      try: _pool = NativePool(load(pool_source()), workers)
      except Exception as e:
        _failed = True   # not tried again: each try would start the compiler
        if DEBUG >= 1: print(f"no CPU thread pool ({type(e).__name__}: {e}): threaded kernels run their launches in turn on the caller")
    return _pool

def _after_fork() -> None:
  # the child has the library's state but none of its threads: start them again (and a lock another thread held is never released)
  global _lock
  _lock = threading.Lock()
  if _pool is not None: _pool.started = _pool.lib.tg_pool_start(_pool.workers, _pool.spin_ns)

if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_after_fork)
