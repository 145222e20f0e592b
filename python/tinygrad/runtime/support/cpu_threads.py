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
# Each CPU device (CPU, CPU:1, ...) has a pool of its own (a pool_t of the one loaded library), sized to the device's share of the cores
# (runtime/ops_cpu.py device_threads) and resized, between two jobs, when that share changes. These are the only pools that run
# kernels. Where they can't be built (the pool's C fails to compile or load) a threaded kernel's chunks
# run one after another on the calling thread, and where no worker thread starts (pthread_create fails) the calling thread takes every
# chunk itself. The other pools on the CPU path run no kernels: the compile pool (helpers.map_on_threads, used by the C compiler's
# compile_many, which device.ProgramLoader's one background thread starts early) is one short-lived thread per translation unit, each
# waiting on a compiler process; BEAM's pool (codegen/opt/search.py _Pool) is worker processes that lower, render and compile
# candidates, which are then timed in the searching process, on this pool.
from __future__ import annotations
import ctypes
import os
import threading
import weakref
from typing import Callable
from tinygrad.helpers import DEBUG

SPIN_NS = 200_000            # a worker waits this long for the next job before it sleeps (a replayed step launches kernels µs apart)
MAX_JOB_CHUNKS = 0xffff      # the ticket's 16-bit chunk fields: a launch of more chunks is run as several jobs
MAX_WORKERS = 255            # threads of one pool at most

def pool_source() -> str:
  """The C of the pool."""
  return r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
typedef void (*entry_t)(const uint64_t *args, int core_id);
""" + f"#define MAX_JOB_CHUNKS {MAX_JOB_CHUNKS}\n#define MAX_WORKERS {MAX_WORKERS}\n" + r"""
struct pool;
struct worker_arg { struct pool *p; int i; };
/* one pool per CPU device: each device's kernels run on its own workers */
typedef struct pool {
  _Atomic uint64_t ticket;              /* generation << 32 | chunks << 16 | next chunk */
  _Atomic int done, sleepers, quit;
  _Atomic int want;                     /* the workers it should have: set by tg_pool_resize, applied by the next run */
  _Atomic uint64_t chunks_run[2];       /* chunks run by calling threads, by workers (tests and DEBUG read them) */
  entry_t job_fn;
  const uint64_t *job_args;
  long job_base;                        /* core_id of the job's chunk 0 */
  pthread_mutex_t run_mu, sleep_mu;
  pthread_cond_t wake;
  pthread_t threads[MAX_WORKERS];
  struct worker_arg args[MAX_WORKERS];
  _Atomic long thread_ids[MAX_WORKERS]; /* the workers' kernel thread ids (Linux; tests read them) */
  int workers;
  long spin_ns;
  int placed_cpu;                       /* the CPU the workers are kept off (see the module's comment); -1: not placed yet */
} pool_t;

static int has_work(uint64_t t) { return (t & 0xffff) < ((t >> 16) & 0xffff); }
static long now_ns(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000L + ts.tv_nsec; }

static void run_chunk(pool_t *p, int i, int by_worker) {
  p->job_fn(p->job_args, (int)(p->job_base + i));
  atomic_fetch_add(&p->chunks_run[by_worker], 1);
  atomic_fetch_add(&p->done, 1);
}

/* take and run chunks of the current job until none is left */
static void work(pool_t *p, int by_worker) {
  uint64_t t = atomic_load(&p->ticket);
  while (has_work(t)) {
    /* after a successful exchange the job can't finish before this chunk does, so its fields stay put */
    if (atomic_compare_exchange_weak(&p->ticket, &t, t + 1)) {
      run_chunk(p, (int)(t & 0xffff), by_worker);
      t = atomic_load(&p->ticket);
    }
  }
}

static void *worker(void *arg) {
  pool_t *p = ((struct worker_arg *)arg)->p;
#ifdef __linux__
  atomic_store(&p->thread_ids[((struct worker_arg *)arg)->i], syscall(SYS_gettid));
#endif
  while (!atomic_load(&p->quit)) {
    work(p, 1);
    long deadline = now_ns() + p->spin_ns;
    /* yielding: a worker that shares a core with the calling thread (or another program) lets it run */
    while (!has_work(atomic_load(&p->ticket)) && !atomic_load(&p->quit) && now_ns() < deadline) sched_yield();
    if (has_work(atomic_load(&p->ticket))) continue;
    pthread_mutex_lock(&p->sleep_mu);
    /* counted before the check: a job published after it sees the sleeper and signals under the mutex (no lost wake-up) */
    atomic_fetch_add(&p->sleepers, 1);
    while (!has_work(atomic_load(&p->ticket)) && !atomic_load(&p->quit)) pthread_cond_wait(&p->wake, &p->sleep_mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->sleep_mu);
  }
  return 0;
}

static void place_workers(pool_t *p) {
#ifdef __linux__
  int cpu = sched_getcpu();
  if (cpu < 0 || cpu == p->placed_cpu) return;
  cpu_set_t set;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return;
  CPU_CLR(cpu, &set);
  if (CPU_COUNT(&set) == 0) return;   /* the caller may run on that CPU only: the workers share it with it */
  for (int i = 0; i < p->workers; i++) pthread_setaffinity_np(p->threads[i], sizeof(set), &set);
  p->placed_cpu = cpu;
#endif
}

static void wake_all(pool_t *p) {
  if (atomic_load(&p->sleepers) == 0) return;
  pthread_mutex_lock(&p->sleep_mu);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->sleep_mu);
}

static void start_workers(pool_t *p, int n) {
  atomic_store(&p->quit, 0); atomic_store(&p->sleepers, 0);
  p->placed_cpu = -1;
  /* a worker writes its id when it starts: until then its slot reads 0, never the id of an earlier pool's (exited) thread */
  for (int i = 0; i < n && i < MAX_WORKERS; i++) atomic_store(&p->thread_ids[i], 0);
  for (p->workers = 0; p->workers < n && p->workers < MAX_WORKERS; p->workers++) {
    p->args[p->workers].p = p; p->args[p->workers].i = p->workers;
    if (pthread_create(&p->threads[p->workers], 0, worker, &p->args[p->workers]) != 0) break;
  }
  atomic_store(&p->want, p->workers);
}

static void stop_workers(pool_t *p) {
  atomic_store(&p->quit, 1);
  pthread_mutex_lock(&p->sleep_mu); pthread_cond_broadcast(&p->wake); pthread_mutex_unlock(&p->sleep_mu);
  for (int i = 0; i < p->workers; i++) pthread_join(p->threads[i], 0);
  p->workers = 0;
}

/* a new pool (never freed: a device's pool lives as long as the process) */
void *tg_pool_new(void) {
  pool_t *p = calloc(1, sizeof(pool_t));
  if (p) p->placed_cpu = -1;
  return p;
}

/* (re)start with n workers; also in a forked child, whose copies of the workers and locks are gone or stale */
int tg_pool_start(pool_t *p, int n, long spin) {
  pthread_mutex_init(&p->run_mu, 0); pthread_mutex_init(&p->sleep_mu, 0); pthread_cond_init(&p->wake, 0);
  p->spin_ns = spin;
  start_workers(p, n);
  return p->workers;
}

void tg_pool_stop(pool_t *p) { stop_workers(p); atomic_store(&p->want, 0); }

/* asks for n workers: the next run starts or ends workers before its job (a running job keeps the workers it has) */
void tg_pool_resize(pool_t *p, int n) { atomic_store(&p->want, n < 0 ? 0 : n); }

void tg_pool_stats(pool_t *p, uint64_t *out) { out[0] = atomic_load(&p->chunks_run[0]); out[1] = atomic_load(&p->chunks_run[1]); }
int tg_pool_workers(pool_t *p) { return p->workers; }
int tg_pool_thread_ids(pool_t *p, long *out) { for (int i = 0; i < p->workers; i++) out[i] = atomic_load(&p->thread_ids[i]); return p->workers; }

/* runs f(args, core_id) for core_id 0..n-1, the calling thread taking part */
void tg_pool_run(pool_t *p, entry_t f, const uint64_t *args, long n) {
  pthread_mutex_lock(&p->run_mu);
  int want = atomic_load(&p->want);
  if (want != p->workers) { stop_workers(p); start_workers(p, want); }
  if (n > 1) place_workers(p);
  for (long base = 0; base < n; base += MAX_JOB_CHUNKS) {
    uint64_t chunks = n - base < MAX_JOB_CHUNKS ? (uint64_t)(n - base) : MAX_JOB_CHUNKS;
    p->job_fn = f; p->job_args = args; p->job_base = base;
    atomic_store(&p->done, 0);
    /* published with chunk 0 taken: the calling thread runs it even if a woken worker takes its core for a while */
    atomic_store(&p->ticket, (((atomic_load(&p->ticket) >> 32) + 1) << 32) | (chunks << 16) | 1);
    wake_all(p);
    run_chunk(p, 0, 0);
    work(p, 0);
    while ((uint64_t)atomic_load(&p->done) < chunks) sched_yield();   /* the workers' last chunks */
  }
  pthread_mutex_unlock(&p->run_mu);
}
"""

class NativePool:
  """A C pool (one pool_t) of a loaded library of pool_source(), started with `workers` threads (beside the calling thread)."""
  def __init__(self, lib:ctypes.CDLL, workers:int, spin_ns:int|None=None):
    self.lib, self.workers, self.spin_ns = lib, workers, SPIN_NS if spin_ns is None else spin_ns
    vp = ctypes.c_void_p
    lib.tg_pool_new.argtypes, lib.tg_pool_new.restype = [], vp
    lib.tg_pool_start.argtypes, lib.tg_pool_start.restype = [vp, ctypes.c_int, ctypes.c_long], ctypes.c_int
    lib.tg_pool_run.argtypes, lib.tg_pool_run.restype = [vp, vp, vp, ctypes.c_long], None
    lib.tg_pool_stop.argtypes, lib.tg_pool_stop.restype = [vp], None
    lib.tg_pool_resize.argtypes, lib.tg_pool_resize.restype = [vp, ctypes.c_int], None
    lib.tg_pool_stats.argtypes, lib.tg_pool_stats.restype = [vp, vp], None
    lib.tg_pool_thread_ids.argtypes, lib.tg_pool_thread_ids.restype = [vp, vp], ctypes.c_int
    if not (handle := lib.tg_pool_new()): raise MemoryError("no memory for a CPU thread pool")
    self.handle = ctypes.c_void_p(handle)
    lib.tg_pool_workers.argtypes, lib.tg_pool_workers.restype = [vp], ctypes.c_int
    lib.tg_pool_start(self.handle, workers, self.spin_ns)
    _live_pools.add(self)

  def runner(self, entry_addr:int, nargs:int, n:int) -> Callable[..., None]:
    """A function of a threaded kernel's nargs arguments in call order (buffer addresses, then variable values, core_id's a placeholder)
    that runs its n chunks through the kernel's entry point (see the module's comment) at entry_addr."""
    if n < 1: raise ValueError(f"a threaded launch needs at least one chunk, got {n}")
    run, handle, words = self.lib.tg_pool_run, self.handle, ctypes.c_uint64 * nargs
    # (a negative variable becomes its two's complement word, which the entry's cast to the variable's C type undoes)
    def launch(*args): run(handle, entry_addr, words(*args), n)
    return launch

  def resize(self, workers:int) -> None:
    """Asks for `workers` threads: the next launch starts or ends threads before it runs (a launch running now keeps its threads)."""
    self.workers = max(0, workers)
    self.lib.tg_pool_resize(self.handle, self.workers)

  def chunks_run(self) -> tuple[int, int]:
    """How many chunks calling threads and the workers have run so far."""
    out = (ctypes.c_uint64 * 2)()
    self.lib.tg_pool_stats(self.handle, out)
    return out[0], out[1]

  def thread_ids(self) -> list[int]:
    """The workers' kernel thread ids (0 for a worker not started yet, or off Linux)."""
    out = (ctypes.c_long * MAX_WORKERS)()
    return list(out[:self.lib.tg_pool_thread_ids(self.handle, out)])

  @property
  def started(self) -> int:
    """How many worker threads the pool has now (a resize takes effect at the next launch)."""
    return self.lib.tg_pool_workers(self.handle)

  def stop(self) -> None:
    """Ends the workers (jobs after it run on the calling thread alone)."""
    self.workers = 0
    self.lib.tg_pool_stop(self.handle)

_live_pools: weakref.WeakSet[NativePool] = weakref.WeakSet()
_library: ctypes.CDLL|None = None
_failed = False
_lock = threading.Lock()

def pool_library(load:Callable[[str], ctypes.CDLL]) -> ctypes.CDLL|None:
  """The loaded library of pool_source(), built on first use (`load` compiles and loads a source); None where it can't be built (the
  pool's C fails to compile or load): threaded kernels then run their chunks on the calling thread, one after another."""
  global _library, _failed
  if _library is not None: return _library
  with _lock:
    if _library is None and not _failed:
      try: _library = load(pool_source())
      except Exception as e:
        _failed = True   # not tried again: each try would start the compiler
        if DEBUG >= 1: print(f"no CPU thread pool ({type(e).__name__}: {e}): threaded kernels run their launches in turn on the caller")
    return _library

def _after_fork() -> None:
  # the child has the pools' state but none of their threads: start them again (and a lock another thread held is never released)
  global _lock
  _lock = threading.Lock()
  for pool in list(_live_pools): pool.lib.tg_pool_start(pool.handle, pool.workers, pool.spin_ns)

if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_after_fork)
