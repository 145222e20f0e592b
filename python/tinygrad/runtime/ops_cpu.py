# The CPU device: kernels are C compiled into shared objects and called through ctypes; buffers are page-aligned private mmaps (huge
# pages for large ones), moved into a memfd when numpy() first exports them, so numpy() can share them copy-on-write.
#
# CPU, CPU:1, CPU:2, ... are separate devices of one host. While one CPU device is in use its kernels run on the calling thread; once
# several are, each runs its kernels, copies into its buffers and frees of its buffers in order on a queue of its own
# (runtime/support/cpu_queue.py), so the devices compute at the same time, and each device's threaded kernels run on a thread pool of
# its own holding its share of the cores (device_threads).
from __future__ import annotations
import atexit
import contextlib
import ctypes
import functools
import hashlib
import mmap
import os
try: import resource
except ImportError: resource = None  # type: ignore[assignment]   # not on Windows
import tempfile
import threading
import time
import weakref
from typing import Callable
from tinygrad.device import Compiled, LRUAllocator, BufferSpec, Program
from tinygrad.dtype import DType, dtypes
from tinygrad.helpers import to_mv, mv_address, round_up, cache_dir, NUM_CPU_THREADS, CPU_DEVICE_THREADS
from tinygrad.renderer.cstyle import ClangRenderer, thread_entry_name
from tinygrad.runtime.support.compiler_cpu import ClangCompiler, unit_symbol
from tinygrad.runtime.support.cpu_threads import NativePool, pool_library
from tinygrad.runtime.support.cpu_queue import LaunchQueue

class CPUBuffer:
  """A span of host memory: `mv` is a byte view of it, `addr` its address. Views keep their base alive through `base`. `fd` is the
  memfd behind a large buffer's memory once numpy() exported it (None otherwise): it lets numpy() map the same pages copy-on-write
  instead of copying them; `cow` holds weak references to those mappings until the memory is next written. `movable`: the memory is
  our own private mapping, which may be moved into a memfd."""
  __slots__ = ("mv", "addr", "size", "base", "fd", "cow", "movable")
  def __init__(self, mv:memoryview, addr:int, size:int, base:CPUBuffer|None=None, movable:bool=False):
    self.mv, self.addr, self.size, self.base, self.fd, self.cow, self.movable = mv, addr, size, base, None, [], movable
  def __repr__(self): return f"<CPUBuffer {self.size} bytes at 0x{self.addr:x}>"
  def __del__(self):
    if self.fd is not None:
      os.close(self.fd)   # the mappings made from it stay valid
      _release_fds(1)

COW_MIN_BYTES = 1 << 20   # numpy() shares buffers this big through a memfd; smaller ones are cheaper to copy
# Every exported buffer's memfd costs a file descriptor, and so does each copy-on-write numpy() view alive (Python's mmap keeps a dup
# of the memfd). Buffers move into memfds while all of those together stay under a quarter of the process's soft limit (read at each
# export: a program may lower it), so the rest is left to the program, kernels being loaded, sqlite and the compiler; past it numpy()
# copies.
MAX_FD_SHARE, MAX_FDS = 4, 2048
_fds_held = 0
_fd_lock = threading.Lock()

def fd_budget() -> int:
  """How many file descriptors CPU buffers may hold now."""
  if resource is None: return 0
  soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
  return MAX_FDS if soft == resource.RLIM_INFINITY else min(MAX_FDS, soft // MAX_FD_SHARE)

def _reserve_fds(n:int) -> bool:
  global _fds_held
  with _fd_lock:
    if _fds_held + n > fd_budget(): return False
    _fds_held += n
    return True

def _release_fds(n:int) -> None:
  global _fds_held
  with _fd_lock: _fds_held -= n

def _count_mapping_fd(mm:mmap.mmap) -> mmap.mmap:
  # the mmap holds its own dup of the memfd until it is closed or freed (after every memoryview/numpy array of it is gone)
  weakref.finalize(mm, _release_fds, 1)
  return mm

def _root(buf:CPUBuffer) -> CPUBuffer:
  while buf.base is not None: buf = buf.base
  return buf

# Large buffers are private anonymous memory that asks for transparent huge pages: Linux gives huge pages only to private memory (shared
# memory, memfds included, gets them only where an admin turned shmem THP on), and a kernel streaming through 2 MiB pages walks far
# fewer page tables than through 4 KiB ones (x.sum() of 16M floats: benches/README.md, Design measurements). They start on a huge
# page boundary (the mapping is over-allocated by one huge page: address space only, the slack is never touched), so every whole 2 MiB
# of the buffer can be one page.
HUGE_PAGE = 2 << 20   # the PMD size of x86-64 and arm64 with 4 KiB pages
MAP_FIXED = 0x10      # Linux and the BSDs (the mmap module doesn't export it)

def _private_memory(size:int) -> tuple[memoryview, bool]:
  """Page-aligned memory for size bytes, zero filled lazily by the OS and unmapped when unreferenced; True if it is a private mapping
  of ours (which _move_to_memfd may replace)."""
  if not hasattr(mmap, "MAP_PRIVATE"): return memoryview(mmap.mmap(-1, size)), False   # Windows: the pagefile-backed default
  if size < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"): return memoryview(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)), True
  mm = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE)
  with contextlib.suppress(OSError): mm.madvise(mmap.MADV_HUGEPAGE)   # a kernel without THP says EINVAL: 4 KiB pages then
  start = -mv_address(mm) % HUGE_PAGE
  return memoryview(mm)[start:start + size], True

@functools.cache
def _libc():
  libc = ctypes.CDLL(None, use_errno=True)
  libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
  libc.madvise.restype, libc.madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
  return libc

_move_lock = threading.Lock()

def _move_to_memfd(root:CPUBuffer) -> bool:
  """Puts the buffer's memory in a new memfd at the same address (kernels captured by TinyJit keep using the address they resolved):
  its bytes are written into the memfd, which is then mapped shared over the buffer's pages (MAP_FIXED replaces them in one step,
  so a concurrent reader sees the old pages or the new ones, both holding the same bytes). False where it can't: numpy() then copies.
  The buffer's own mmap object still spans the range and unmaps it, memfd pages included, when it is freed."""
  with _move_lock:
    if root.fd is not None: return True
    if not root.movable or not hasattr(os, "memfd_create") or not _reserve_fds(1): return False
    fd, length, moved = None, round_up(root.size, mmap.PAGESIZE), False
    try:
      fd = os.memfd_create("tinygrad", os.MFD_CLOEXEC)
      os.ftruncate(fd, length)
      src, done = root.mv[:root.size], 0
      while done < root.size: done += os.pwrite(fd, src[done:], done)
      if _libc().mmap(root.addr, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, fd, 0) != root.addr:
        err = ctypes.get_errno()
        # it fails only out of mappings or memory (ENOMEM); a kernel may have unmapped the old pages by then (madvise of an unmapped
        # range is ENOMEM too): the buffer's contents are gone, which must not pass as a copy to make
        if _libc().madvise(root.addr, length, mmap.MADV_NORMAL) != 0:
          raise MemoryError(f"moving a {root.size} byte CPU buffer into a memfd failed (errno {err}) and unmapped it")
        raise OSError(err, "mmap MAP_FIXED of the memfd failed")
      moved = True
    except OSError: pass
    finally:
      if not moved:
        if fd is not None: os.close(fd)
        _release_fds(1)
    if not moved: return False
    root.fd = fd
    return True

class CPUAllocator(LRUAllocator['CPUDevice']):
  host_memory = True
  def _alloc(self, size:int, options:BufferSpec) -> CPUBuffer:
    if options.external_ptr is not None: return CPUBuffer(to_mv(options.external_ptr, size), options.external_ptr, size)
    mv, movable = _private_memory(size)
    return CPUBuffer(mv, mv_address(mv), size, movable=movable and size >= COW_MIN_BYTES)
  def _private_view(self, buf:CPUBuffer) -> memoryview|None:
    """A writable copy-on-write mapping of the buffer's pages (a private mmap of its memfd; the first export moves the buffer into
    one), or None where it can't: reading it copies nothing, writing to it copies only the pages written and never changes the buffer."""
    self.dev.synchronize()   # its bytes are copied into the memfd
    root = _root(buf)
    if not _move_to_memfd(root) or not _reserve_fds(1): return None
    off = buf.addr - root.addr
    start = off - off % mmap.ALLOCATIONGRANULARITY
    try: mm = _count_mapping_fd(mmap.mmap(root.fd, buf.size + off - start, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                                          offset=start))
    except OSError:
      _release_fds(1)
      return None
    root.cow = [ref for ref in root.cow if ref() is not None] + [weakref.ref(mm)]
    return memoryview(mm)[off - start:off - start + buf.size]
  def _before_write(self, buf:CPUBuffer) -> None:
    """Pages of a private mapping that was never written still show the shared memory: before that memory changes (a kernel stores
    into it, a copyin, or the LRU cache hands it to a new buffer), every live private mapping gets its own copy of each page."""
    root = _root(buf)
    if not root.cow: return
    for ref in root.cow:
      if (mm := ref()) is not None and not mm.closed:
        for page in range(0, len(mm), mmap.PAGESIZE): mm[page] = mm[page]   # writing a byte makes the page the mapping's own
    root.cow = []
  # the host reads or writes the memory itself: after the device's queued work (which may write it, or still read what it holds)
  def _as_buffer(self, src:CPUBuffer) -> memoryview:
    self.dev.synchronize()
    return src.mv[:src.size]
  def _copyin(self, dest:CPUBuffer, src:memoryview):
    self.dev.synchronize()
    dest.mv[:len(src)] = src
  def _copyout(self, dest:memoryview, src:CPUBuffer):
    self.dev.synchronize()
    dest[:] = src.mv[:len(dest)]
  def _transfer(self, dest:CPUBuffer, src:CPUBuffer, size:int, src_dev:CPUDevice, dest_dev:CPUDevice):
    """A copy between two CPU devices' buffers, queued on the destination's device after the work queued so far on the source's (its
    writes), and the source's later work queued after the copy (a later write or a reuse of the source's memory must not pass it)."""
    if (dq := dest_dev.queue) is None:   # a device alone runs on the calling thread: only the source may have work queued
      src_dev.synchronize()
      ctypes.memmove(dest.addr, src.addr, size)
      return
    dq.after(src_dev.queue, src_dev.queue.submitted if src_dev.queue is not None else 0)
    copied = dq.submit(_memmove, dest, src, size)
    if src_dev.queue is not None: src_dev.queue.after(dq, copied)
  def free(self, opaque:CPUBuffer, size:int, options:BufferSpec|None=None):
    # queued kernels hold its address only: the memory goes back (to the cache, or unmapped) after them
    if (q := self.dev.queue) is None: super().free(opaque, size, options)
    else: q.submit(super().free, opaque, size, options)
  def _offset(self, buf:CPUBuffer, size:int, offset:int) -> CPUBuffer: return CPUBuffer(buf.mv[offset:offset+size], buf.addr + offset, size, buf)

_CTYPES: dict[DType, type] = {dtypes.bool: ctypes.c_bool, dtypes.int8: ctypes.c_int8, dtypes.uint8: ctypes.c_uint8, dtypes.int16: ctypes.c_int16,
                              dtypes.uint16: ctypes.c_uint16, dtypes.int32: ctypes.c_int32, dtypes.uint32: ctypes.c_uint32,
                              dtypes.int64: ctypes.c_int64, dtypes.uint64: ctypes.c_uint64}

def _load_shared_object(lib:bytes) -> ctypes.CDLL:
  """dlopen needs a file: write one, load it, delete it (the mapping stays). Falls back to the cache directory if /tmp is noexec."""
  errors = []
  for d in (None, cache_dir):
    try:
      if d is not None: os.makedirs(d, exist_ok=True)
      fd, path = tempfile.mkstemp(suffix=".so", prefix="tinygrad-", dir=d)
      try:   # removed whatever happens (a failed write, a failed dlopen, an interrupt)
        with os.fdopen(fd, "wb") as f: f.write(lib)
        return ctypes.CDLL(path)
      finally: os.unlink(path)
    except OSError as e: errors.append(f"{d or tempfile.gettempdir()}: {e}")
  raise RuntimeError("could not load the compiled kernel: " + "; ".join(errors))

# the kernels compiled together share one library (runtime/support/compiler_cpu.py): each distinct library is loaded once, while any
# of its kernels is alive
_loaded: weakref.WeakValueDictionary[str, ctypes.CDLL] = weakref.WeakValueDictionary()
_loaded_lock = threading.Lock()

def load_library(lib:bytes) -> ctypes.CDLL:
  """The loaded library of these bytes, loading it only if no live program holds it yet."""
  key = hashlib.sha256(lib).hexdigest()
  with _loaded_lock:
    if (so := _loaded.get(key)) is None: _loaded[key] = so = _load_shared_object(lib)
  return so

class CPUProgram(Program['CPUDevice']):
  def __init__(self, dev:CPUDevice, name:str, lib:bytes, spec=None):
    super().__init__(dev, name, lib, spec)
    self.so = load_library(lib)
    # its own function object (getattr would share one, and its argtypes, with the library's other users); in a library compiled with
    # another kernel of the same name, it is under unit_symbol
    for sym in ([unit_symbol(name, spec.src)] if spec is not None else []) + [name]:
      try:
        self.fxn = self.so[sym]
        break
      except AttributeError: pass
    else: raise RuntimeError(f"the compiled library has no function {name!r}")
    self.fxn.restype = None
    # a threaded kernel's entry point (renderer/cstyle.py), which the thread pool calls; None: a library without one (hand-written C)
    self.entry: int|None = None
    if spec is not None and spec.core_id is not None:
      try: self.entry = ctypes.cast(self.so[thread_entry_name(sym)], ctypes.c_void_p).value
      except AttributeError: pass
    self._runners: dict[int, Callable[..., None]] = {}   # chunks -> the pool's launch
    if spec is not None:
      if bad := [dt for dt in spec.var_dtypes if dt not in _CTYPES]: raise TypeError(f"kernel {name}: variables of dtype {bad} can't be passed")
      self.fxn.argtypes = [ctypes.c_void_p] * len(spec.globals) + [_CTYPES[dt] for dt in spec.var_dtypes]
  def __call__(self, *bufs:CPUBuffer, global_size:tuple[int, ...]=(1, 1, 1), local_size:tuple[int, ...]|None=None, vals:tuple[int, ...]=(),
               wait:bool=False) -> float|None:
    self.check_args(bufs, vals)
    # without a spec the argument types are unknown: pointers, and variables as C ints
    args = [b.addr for b in bufs] + list(vals) if self.spec is not None else [ctypes.c_void_p(b.addr) for b in bufs] + [ctypes.c_int(v) for v in vals]
    fn = self.fxn if self.spec is None or self.spec.core_id is None or global_size[0] <= 1 else self._threaded(global_size[0])
    if (q := self.dev.queue) is not None:
      if not wait:
        q.submit(fn, *args)
        return None
      took: list[float] = []
      q.wait(q.submit(_timed, fn, args, took))   # timed: the kernel alone, after the work queued before it
      return took[0]
    st = time.perf_counter()
    fn(*args)
    return time.perf_counter() - st if wait else None
  def _threaded(self, n:int) -> Callable[..., None]:
    """A function of this threaded kernel's arguments (core_id's a placeholder) that runs its n launches: on the thread pool
    (runtime/support/cpu_threads.py), or one after another on the calling thread where there is no pool or no entry point."""
    if (run := self._runners.get(n)) is not None: return run
    assert self.spec is not None and (core := self.spec.core_id) is not None
    if self.entry is not None and (pool := self.dev.native_pool()) is not None:
      run = pool.runner(self.entry, len(self.spec.globals) + len(self.spec.vars), n)
    else:
      fxn, slot = self.fxn, len(self.spec.globals) + core
      def run(*args):
        for i in range(n): fxn(*args[:slot], i, *args[slot+1:])
    self._runners[n] = run
    return run
  def launcher(self, global_size:tuple[int, ...], local_size:tuple[int, ...]|None):
    if self.spec is None: return super().launcher(global_size, local_size)
    fn = self.fxn if self.spec.core_id is None or global_size[0] <= 1 else self._threaded(global_size[0])
    # the C function itself, no Python frame, on a device alone; a queued device's launcher is valid until its launch_epoch changes
    if (q := self.dev.queue) is None: return _addr, fn
    return _addr, functools.partial(q.submit, fn)

def _addr(buf:CPUBuffer) -> int: return buf.addr
def _memmove(dest:CPUBuffer, src:CPUBuffer, size:int) -> None: ctypes.memmove(dest.addr, src.addr, size)
def _timed(fn:Callable[..., None], args:list, took:list[float]) -> None:
  st = time.perf_counter()
  fn(*args)
  took.append(time.perf_counter() - st)

# the CPU devices in use: opened and not closed (Device.close)
_in_use: list[CPUDevice] = []
_in_use_lock = threading.Lock()
# the queues by device name, and how often each name's queue changed: a queue belongs to the name, so the buffers and programs of a
# closed device (a Device.close, then Device[name] again) order their work with the device now open under it
_queues: dict[str, LaunchQueue] = {}
_queue_epochs: dict[str, int] = {}

def device_threads() -> int:
  """The threads each CPU device's kernels run on (its queue's or the caller's thread, and its pool's workers): CPU_DEVICE_THREADS
  where set, else the NUM_CPU_THREADS cores split evenly between the CPU devices in use (at least one each). A device counts as in
  use from its opening (Device["CPU:1"], or a first tensor on it; the default CPU counts once anything opened it) until Device.close.
  The split is made again whenever a CPU device opens or closes (rebalance)."""
  if CPU_DEVICE_THREADS.value > 0: return CPU_DEVICE_THREADS.value
  return max(1, NUM_CPU_THREADS.value // max(1, len(_in_use)))

def rebalance() -> None:
  """Gives every CPU device in use its queue (several in use) or none (one alone), and its share of the threads (device_threads; a
  pool takes it at its next launch). Called when a CPU device opens or closes; call it after changing NUM_CPU_THREADS or
  CPU_DEVICE_THREADS at run time."""
  with _in_use_lock:
    for dev in _in_use: dev._configure(queued=len(_in_use) > 1, threads=device_threads())

class CPUDevice(Compiled):
  def __init__(self, device:str="CPU"):
    super().__init__(device, CPUAllocator(self), [(ClangRenderer, ClangCompiler)], CPUProgram)
    self._pool: NativePool|None = None
    self._pool_lock = threading.Lock()
    with _in_use_lock: _in_use.append(self)
    rebalance()
  @property
  def queue(self) -> LaunchQueue|None:
    """Where this device's work runs in order; None: on the calling thread."""
    return _queues.get(self.device)
  @property
  def launch_epoch(self) -> int:
    return _queue_epochs.get(self.device, 0)
  def _configure(self, queued:bool, threads:int) -> None:
    if queued and self.queue is None:
      _queues[self.device] = LaunchQueue(self.device)
      _queue_epochs[self.device] = self.launch_epoch + 1
    elif not queued and (q := self.queue) is not None:
      q.wait()
      del _queues[self.device]
      _queue_epochs[self.device] = self.launch_epoch + 1
      q.close()
    if (pool := self._pool) is not None and pool.workers != threads - 1: pool.resize(threads - 1)
  def synchronize(self) -> None:
    if (q := self.queue) is not None: q.wait()
  def finalize(self) -> None:
    """Closing the device (Device.close): its queued work finished, its queue and pool threads ended, its share of the cores handed
    to the other CPU devices. Its buffers and programs stay usable: their work goes where the device open under its name runs it."""
    with _in_use_lock:
      if self in _in_use: _in_use.remove(self)
    self._configure(queued=False, threads=1)
    if (pool := self._pool) is not None: pool.stop()
    rebalance()
  def native_pool(self) -> NativePool|None:
    """This device's thread pool for its threaded kernels (runtime/support/cpu_threads.py), built at its first threaded launch with
    device_threads() - 1 workers beside the thread that launches: the pool's C is compiled once for every device (then it comes from
    the disk cache); None where it can't be built."""
    if (pool := self._pool) is not None: return pool
    with self._pool_lock:
      if self._pool is None and (lib := pool_library(lambda src: load_library(self.compiler.compile_cached(src)))) is not None:
        self._pool = NativePool(lib, device_threads() - 1 if self in _in_use else 0)
    return self._pool

def _drain_queues() -> None:
  # before a fork (the child gets none of the queues' threads) and at exit (the interpreter then frees the memory queued kernels use):
  # what is queued runs first; an error stays for the next wait
  for q in list(_queues.values()): q.drain()

def _after_fork_in_child() -> None:
  global _in_use_lock
  _in_use_lock = threading.Lock()
  for name in _queues: _queues[name] = LaunchQueue(name)

if hasattr(os, "register_at_fork"): os.register_at_fork(before=_drain_queues, after_in_child=_after_fork_in_child)
atexit.register(_drain_queues)
