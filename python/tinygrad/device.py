# Devices: the registry (Device["CPU"], Device.DEFAULT; tinygrad/runtime registers its runtimes here), Buffer and the allocators
# behind it, the Compiler base with its in-memory and on-disk caches, the Program (a loaded kernel) base, and Compiled, which ties a
# device's allocator, renderer, compiler and runtime together. The runtimes themselves live in tinygrad/runtime/ops_<name>.py.
from __future__ import annotations
import contextlib
import functools
import hashlib
import os
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar, TYPE_CHECKING
from tinygrad.helpers import DEBUG, LRU, CCACHE, ALLOW_DEVICE_USAGE, MAX_BUFFER_SIZE, DEV, GlobalCounters, diskcache_get, diskcache_put
from tinygrad.helpers import select_by_name, select_first_inited, flat_mv, size_to_str, suppress_finalizing, check_host_alloc, BoundedCache
from tinygrad.helpers import cpu_count, PROFILE, profile_event
from tinygrad.dtype import DType, dtypes, to_np_dtype, from_storage_scalar, storage_fmt_for_dtype
if TYPE_CHECKING:
  from tinygrad.renderer import Renderer, ProgramSpec

__all__ = ["Device", "Buffer", "BufferSpec", "Allocator", "LRUAllocator", "Compiler", "CompileError", "CompilerNotFoundError", "Program",
           "Compiled", "ProgramLoader", "canonicalize_device"]

# **************** Device ****************

class _Device:
  """The device registry. Device["CPU"] opens (once) and returns a device; names are case-insensitive and "CPU:0" is "CPU"."""
  def __init__(self) -> None:
    self._devices: dict[str, Callable[[], type[Compiled]]] = {}   # name -> its Compiled class's loader (tinygrad/runtime registers them)
    self._default_candidates: list[tuple[int, str, Callable[[], bool]]] = []   # (rank, name, whether it can be the default now)
    self._opened_devices: set[str] = set()
    self._opened: dict[str, Compiled] = {}
    self._open_lock = threading.Lock()
  @functools.cache  # a method cache is fine on a singleton
  def _canonicalize(self, device:str) -> str:
    d = device.split(":", 1)[0].upper()
    return re.sub(r":0$", "", d + device[len(d):])
  def canonicalize(self, device:str|None) -> str:
    """The canonical name of a device string ("cpu:0" -> "CPU"); None means Device.DEFAULT."""
    if device is None: return self._canonicalize(self.DEFAULT)
    if not isinstance(device, str): raise TypeError(f"a device name must be a str, got {device!r} of type {type(device).__name__}")
    if not device: raise ValueError("a device name cannot be empty")
    return self._canonicalize(device)
  def __getitem__(self, ix:str) -> Compiled:
    ix = self.canonicalize(ix)
    if not ALLOW_DEVICE_USAGE and ix.split(":")[0] != "PYTHON": raise RuntimeError(f"usage of device {ix} is disallowed (ALLOW_DEVICE_USAGE=0)")
    return self.__get_canonicalized_item(ix)
  def __contains__(self, ix:str) -> bool: return self.canonicalize(ix).split(":")[0] in self._devices
  def register(self, name:str, load:Callable[[], type[Compiled]], default_rank:int|None=None, usable:Callable[[], bool]=lambda: True) -> None:
    """Device[name] opens load()(name) (load runs on first use). With a default_rank, the device is the default (no DEV or DEVICE) when
    it is usable() and no device of a lower rank is."""
    self._devices[name.upper()] = load
    if default_rank is not None: self._default_candidates = sorted(self._default_candidates + [(default_rank, name.upper(), usable)])
  @functools.cache
  def get_class(self, ix:str) -> type[Compiled]:
    name = ix.split(":")[0].upper()
    if name not in self._devices: raise RuntimeError(f"unknown device {ix!r}, the devices are {', '.join(sorted(self._devices))}")
    return self._devices[name]()
  def __get_canonicalized_item(self, ix:str) -> Compiled:
    if (ret := self._opened.get(ix)) is not None: return ret
    with self._open_lock:   # two threads opening a device at once must get the same one
      if (ret := self._opened.get(ix)) is None: ret = self._opened[ix] = self.__open(ix)
    return ret
  def __open(self, ix:str) -> Compiled:
    ret = self.get_class(ix)(ix)
    if DEBUG >= 1: print(f"opened device {ix} from pid:{os.getpid()}")
    self._opened_devices.add(ix)
    return ret
  def close(self, ix:str) -> None:
    """Closes an opened device: its queued work is finished and its threads end (finalize); Device[ix] then opens it anew. Buffers
    allocated on it keep their memory until freed."""
    ix = self.canonicalize(ix)
    with self._open_lock:
      if (dev := self._opened.pop(ix, None)) is None: raise RuntimeError(f"device {ix} is not open")
      self._opened_devices.discard(ix)
    dev.synchronize()
    dev.finalize()
  @property
  def default(self) -> Compiled: return self[self.DEFAULT]
  def get_available_devices(self) -> Iterator[str]:
    """The devices that open and run kernels (a DISK file does not), the default candidates first (in their order)."""
    first = [name for _, name, _ in self._default_candidates]
    for device in first + sorted(set(self._devices) - set(first)):
      with contextlib.suppress(Exception):
        if (dev := self[device]).renderers: yield dev.device
  @property
  def DEFAULT(self) -> str:
    """DEV=... (its first target's device), else DEVICE=..., else the first usable of the registered default candidates (tinygrad/runtime:
    a usable GPU, else the CPU)."""
    if DEV.device: return self._canonicalize(DEV.device)
    if dev := os.environ.get("DEVICE", ""): return self._canonicalize(dev)
    return self._preferred_default()
  @functools.cache
  def _preferred_default(self) -> str:
    """The first usable device of the default candidates: asked once (it may import a runtime and ask its driver)."""
    if (name := next((name for _, name, usable in self._default_candidates if usable()), None)) is None:
      raise RuntimeError(f"no usable default device among {[n for _, n, _ in self._default_candidates]}: choose one with DEV=")
    return name
  @DEFAULT.setter
  def DEFAULT(self, v):
    raise AttributeError(f"Device.DEFAULT can't be set, use `with Context(DEV={v!r}):` or DEV.value = {v!r} (or the DEV environment variable)")
Device: _Device = _Device()

def canonicalize_device(device:str|tuple|list|None) -> str|tuple[str, ...]:
  if not isinstance(device, (tuple, list)): return Device.canonicalize(device)
  return canonical[0] if len(canonical := tuple(Device.canonicalize(d) for d in device)) == 1 else canonical

# **************** Buffer + Allocators ****************

@dataclass(frozen=True, eq=True)
class BufferSpec:
  uncached: bool = False
  cpu_access: bool = False
  host: bool = False
  nolru: bool = False      # never keep this allocation in the LRU cache
  zero: bool = False
  external_ptr: int|None = None

class Buffer:
  """`size` elements of `dtype` on `device`, allocated lazily (on allocate/ensure_allocated/copyin). A Buffer with `base` is a view of
  `size` elements starting `offset` bytes into its base; it shares the base's memory."""
  def __init__(self, device:str, size:int, dtype:DType, opaque:Any=None, options:BufferSpec|None=None, initial_value:bytes|None=None,
               uop_refcount:int=0, base:Buffer|None=None, offset:int=0, preallocate:bool=False):
    if not isinstance(dtype, DType): raise TypeError(f"Buffer dtype must be a DType, got {dtype!r}")
    if dtype in dtypes.weaks or dtype is dtypes.void: raise ValueError(f"a Buffer can't hold {dtype}: it has no storage size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0: raise ValueError(f"Buffer size must be an int >= 0, got {size!r}")
    self.device, self.size, self.dtype, self.options, self.offset = Device.canonicalize(device), size, dtype, options, offset
    self.allocated_views = 0
    self._buf: Any = None
    self._allocated = False
    self._owned = True        # False when the memory came from the caller (opaque=), which then frees it
    self._exported = False    # set when a zero-copy view escaped: the memory must not go back to the LRU cache
    if base is None:
      if offset != 0: raise ValueError("a base buffer can't have an offset")
      self._base: Buffer|None = None
      self._uop_refcount = uop_refcount
      if opaque is not None: self.allocate(opaque)
      if initial_value is not None: self.copyin(memoryview(initial_value))
    else:
      if base._base is not None: raise ValueError("the base of a view must be a base buffer, not another view")
      if base.device != self.device: raise ValueError(f"a view must be on its base's device, {self.device} != {base.device}")
      if offset < 0 or offset + self.nbytes > base.nbytes:
        raise ValueError(f"view of {self.nbytes} bytes at offset {offset} doesn't fit in its base of {base.nbytes} bytes")
      self._base = base
    if preallocate: self.allocate()
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def uop_refcount(self) -> int: return self.base._uop_refcount
  def ref(self, cnt:int) -> Buffer:
    self.base._uop_refcount += cnt
    return self
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def is_allocated(self) -> bool: return self._allocated
  def is_initialized(self) -> bool: return self._allocated
  def ensure_allocated(self) -> Buffer: return self if self._allocated else self.allocate()
  def allocate(self, opaque:Any=None, external_ptr:int|None=None) -> Buffer:
    if self._allocated: raise RuntimeError(f"{self!r} is already allocated")
    if self.size > MAX_BUFFER_SIZE > 0 and not self.device.startswith("NULL"):
      raise MemoryError(f"buffer of {self.size} elements is over MAX_BUFFER_SIZE={MAX_BUFFER_SIZE.value}")
    self.allocator: Allocator = Device[self.device].allocator
    if external_ptr is not None:
      self.options = replace(self.options, external_ptr=external_ptr) if self.options else BufferSpec(external_ptr=external_ptr)
    if self._base is not None:
      self._base.ensure_allocated()
      self._base.allocated_views += 1
      self._buf = self.allocator._offset(self._base._buf, self.nbytes, self.offset)
    elif opaque is not None: self._buf, self._owned = opaque, False
    else:
      self._buf = self.allocator.alloc(self.nbytes, self.options)
      if self._counted():
        with GlobalCounters.lock:
          GlobalCounters.mem_used += self.nbytes
          GlobalCounters.mem_used_per_device[self.device] += self.nbytes
          GlobalCounters.max_mem_used = max(GlobalCounters.max_mem_used, GlobalCounters.mem_used)
    if DEBUG >= 7: print(f"buffer: allocate {self.nbytes} bytes on {self.device}")
    self._allocated = True
    return self
  def deallocate(self) -> None:
    if not self._allocated: raise RuntimeError(f"{self!r} is not allocated")
    if DEBUG >= 7: print(f"buffer: deallocate {self.nbytes} bytes on {self.device}")
    if self._base is not None: self._base.allocated_views -= 1
    elif self._owned:
      if self._counted():
        with GlobalCounters.lock:
          GlobalCounters.mem_used -= self.nbytes
          GlobalCounters.mem_used_per_device[self.device] -= self.nbytes
      # memory that numpy (or anyone) still sees must not be handed out again
      options = replace(self.options or BufferSpec(), nolru=True) if self._exported else self.options
      self.allocator.free(self._buf, self.nbytes, options)
    self._buf, self._allocated = None, False
  def _counted(self) -> bool:
    """Whether this base buffer's bytes count as device memory (GlobalCounters.mem_used): not a caller's memory, not a file's."""
    return (self.options is None or self.options.external_ptr is None) and self.allocator.counts_memory
  @suppress_finalizing
  def __del__(self):
    if getattr(self, "_allocated", False): self.deallocate()
  def __repr__(self):
    return f"<buf real:{self.is_allocated()} device:{self.device} size:{self.size} dtype:{self.dtype}" + \
           (f" offset:{self.offset}" if self._base is not None else "") + (f" {self.options=}" if self.options is not None else "") + ">"
  def __reduce__(self):
    if self._base is not None: return self.__class__, (self.device, self.size, self.dtype, None, None, None, 0, self._base, self.offset)
    data = bytes(self.as_buffer()) if self._allocated else None
    return self.__class__, (self.device, self.size, self.dtype, None, self.options, data, self.uop_refcount)

  # ** data in and out **
  def copyin(self, mv:memoryview|bytes|bytearray) -> Buffer:
    """Copies host bytes in (allocating first if needed); the source must be C-contiguous and exactly nbytes long."""
    src = _flat_bytes(mv, "copyin")
    if len(src) != self.nbytes: raise ValueError(f"copyin of {len(src)} bytes into {self!r} of {self.nbytes} bytes")
    self.ensure_allocated()
    self.before_write()
    if self.nbytes: self.allocator._copyin(self._buf, src)
    return self
  def private_view(self) -> memoryview|None:
    """A writable view of the contents that shares the buffer's memory copy-on-write (None where the device can't: then copy). Writes to
    the view never reach the buffer, and writes to the buffer never reach the view (before_write gives the view its own pages first)."""
    if not self._allocated or (fn := getattr(self.allocator, "_private_view", None)) is None: return None
    return fn(self._buf)
  def before_write(self) -> None:
    """Called before anything writes into this buffer's memory (see private_view)."""
    if self._allocated and (fn := getattr(self.allocator, "_before_write", None)) is not None: fn(self._buf)
  def copyout(self, mv:memoryview|bytearray) -> memoryview:
    """Copies the contents into a writable host buffer of exactly nbytes."""
    dest = _flat_bytes(mv, "copyout")
    if dest.readonly: raise ValueError("copyout needs a writable destination")
    if len(dest) != self.nbytes: raise ValueError(f"copyout of {self!r} ({self.nbytes} bytes) into {len(dest)} bytes")
    # a view of allocated memory can always be read
    if not self._allocated and self._base is not None and self._base._allocated: self.allocate()
    if not self._allocated: raise RuntimeError(f"copyout of {self!r}: the buffer was never allocated or written")
    if self.nbytes: self.allocator._copyout(dest, self._buf)
    return dest
  def as_buffer(self, allow_zero_copy:bool=False, force_zero_copy:bool=False) -> memoryview:
    """The contents as a byte memoryview: a copy, or the buffer's own memory when zero copy is allowed and the device is host memory.
    A zero-copy view stays valid after the Buffer is freed (its memory is then never reused), but sees later writes to the Buffer."""
    if not self._allocated and self._base is not None and self._base._allocated: self.allocate()
    if (allow_zero_copy or force_zero_copy) and self._allocated and hasattr(self.allocator, "_as_buffer"):
      self.allocator.dev.synchronize()
      self.base._exported = True
      return self.allocator._as_buffer(self._buf)
    if force_zero_copy: raise RuntimeError(f"force_zero_copy: {self.device} memory can't be viewed from the host without a copy")
    return self.copyout(memoryview(bytearray(self.nbytes)))
  as_memoryview = as_buffer
  def numpy(self, zero_copy:bool=False, share:bool=False) -> Any:
    """The contents as a 1-d numpy array (bfloat16 and fp8 come out as float32, converted). zero_copy: a view of the buffer's memory
    where the device allows (it sees later writes); share: a writable copy-on-write view where the device allows (see private_view),
    else a copy."""
    import numpy as np
    if (npdt := to_np_dtype(self.dtype)) is None: raise TypeError(f"no numpy dtype for {self.dtype}")
    if not share or (mv := self.private_view()) is None:
      # a copy goes into numpy's own memory, which numpy asks huge pages for (a bytearray's 4 KiB pages cost several times the copy)
      mv = self.as_buffer(allow_zero_copy=True) if zero_copy else self.copyout(memoryview(np.empty(self.nbytes, np.uint8)))
    if self.dtype is dtypes.bfloat16: return (np.frombuffer(mv, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    if self.dtype in dtypes.fp8s:
      table = np.array([from_storage_scalar(i, self.dtype) for i in range(256)], dtype=np.float32)
      return table[np.frombuffer(mv, dtype=np.uint8)]
    assert storage_fmt_for_dtype(self.dtype) is not None
    return np.frombuffer(mv, dtype=npdt)
  def copy_from(self, src:Buffer) -> Buffer:
    if self.nbytes != src.nbytes: raise ValueError(f"copy size mismatch: {self.nbytes} != {src.nbytes} bytes")
    # between two buffers of a device kind that copies without the host (CUDA to CUDA:1): its allocator's _transfer
    if src._allocated and self.nbytes and hasattr(src.allocator, "_transfer") and type(Device[self.device].allocator) is type(src.allocator):
      self.ensure_allocated().before_write()
      self.allocator._transfer(self._buf, src._buf, self.nbytes, src.allocator.dev, self.allocator.dev)
      return self
    # a source the host can't view (a file, GPU memory) is copied straight into a destination in host memory: no staging copy
    if self.nbytes and not hasattr(src.allocator, "_as_buffer") and hasattr(Device[self.device].allocator, "_as_buffer"):
      self.ensure_allocated().before_write()
      src.copyout(self.allocator._as_buffer(self._buf))
      return self
    return self.copyin(src.as_buffer(allow_zero_copy=True))
  def view(self, size:int, dtype:DType, offset:int) -> Buffer:
    """A view of `size` elements of `dtype` starting `offset` bytes into this buffer."""
    if offset < 0 or (offset >= self.nbytes and self.nbytes > 0): raise ValueError(f"view offset {offset} is outside {self!r} ({self.nbytes} bytes)")
    return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)

def _flat_bytes(x:Any, what:str) -> memoryview:
  try: mv = x if isinstance(x, memoryview) else memoryview(x)
  except TypeError as e: raise TypeError(f"{what} needs a bytes-like object, got {type(x).__name__}") from e
  if not mv.c_contiguous: raise ValueError(f"{what} needs a C-contiguous buffer")
  return flat_mv(mv)

DeviceType = TypeVar("DeviceType", bound="Compiled")

class Allocator(Generic[DeviceType]):
  """Raw memory for one device. Runtimes implement the underscore methods; `opaque` is whatever the runtime uses as a buffer handle."""
  def __init__(self, dev:DeviceType):
    self.dev: DeviceType = dev
    self.default_buffer_spec: BufferSpec = BufferSpec()
  counts_memory = True  # False where the bytes are not memory (a file): GlobalCounters.mem_used leaves them out
  host_memory = False   # True where the device's memory is the host's: sizes over the machine's memory fail before allocating
  def alloc(self, size:int, options:BufferSpec|None=None):
    if size < 0: raise ValueError(f"alloc size must be >= 0, got {size}")
    if self.host_memory: check_host_alloc(size, f"a buffer on {self.dev.device}")
    # a zero-byte buffer still gets a distinct, valid address
    try: return self._alloc(max(size, 1), options if options is not None else self.default_buffer_spec)
    except (RuntimeError, MemoryError, OSError) as e:
      raise MemoryError(f"allocation of {size_to_str(size)} failed on {self.dev.device} "
                        f"(in use: {size_to_str(GlobalCounters.mem_used_per_device[self.dev.device])})") from e
  def free(self, opaque, size:int, options:BufferSpec|None=None): self._free(opaque, options if options is not None else self.default_buffer_spec)
  @property
  def has_views(self) -> bool:
    """Whether a buffer can be a view into another one (the runtime implements _offset; a file-backed DISK allocator does not)."""
    return type(self)._offset is not Allocator._offset
  # implemented by the runtime
  def _alloc(self, size:int, options:BufferSpec): raise NotImplementedError("need alloc")
  def _free(self, opaque, options:BufferSpec): pass  # a Python object needs no explicit free
  def _copyin(self, dest, src:memoryview): raise NotImplementedError("need copyin")
  def _copyout(self, dest:memoryview, src): raise NotImplementedError("need copyout")
  def _offset(self, buf, size:int, offset:int): raise NotImplementedError("need offset")
  # def _as_buffer(self, src) -> memoryview: a zero-copy host view, for devices whose memory is host memory

class LRUAllocator(Allocator, Generic[DeviceType]):
  """Keeps freed allocations by (size, options) and hands them out again instead of asking the runtime (LRU=0 turns it off)."""
  def __init__(self, dev:DeviceType):
    self.cache: dict[tuple[int, BufferSpec|None], list] = defaultdict(list)
    super().__init__(dev)
  def alloc(self, size:int, options:BufferSpec|None=None):
    # pop, not check-then-pop: another thread may take the last cached allocation in between
    with contextlib.suppress(IndexError): return self.cache[(size, options)].pop()
    try: return super().alloc(size, options)
    except MemoryError:
      self.free_cache()
      return super().alloc(size, options)
  def free_cache(self):
    for (sz, options), opaques in list(self.cache.items()):   # (a CPU device's queue may free into the cache meanwhile)
      for opaque in opaques: super().free(opaque, sz, options)
      opaques.clear()
  # a freed allocation this large goes back to the runtime: reuse saves little next to filling it, and a cache of them (a test run
  # touching several 2 GiB buffers) would hold gigabytes nothing uses again
  max_cached_size = 256 << 20
  def free(self, opaque, size:int, options:BufferSpec|None=None):
    if LRU and size <= self.max_cached_size and (options is None or not (options.nolru or options.zero or options.external_ptr is not None)):
      self.cache[(size, options)].append(opaque)
    else: super().free(opaque, size, options)

# **************** Compilers ****************

class CompileError(RuntimeError):
  """The compiler rejected a kernel; the message holds the compiler's output and the numbered source."""

class CompilerNotFoundError(CompileError):
  """No usable compiler executable (the message says what was tried)."""

class Compiler:
  """Turns source into a loadable binary. `compile_cached` keeps results in memory and, when the compiler has a `cachekey`, on disk
  (the sqlite cache under the user's cache directory, keyed by a hash of the compiler identity and the source; CACHELEVEL=0 or
  CCACHE=0 turn the disk cache off). The base class is the identity: the "binary" is the source's bytes."""
  def __init__(self, cachekey:str|None=None):
    self.cachekey = cachekey
    self._mem: dict[str, bytes] = BoundedCache(4096)   # source hash -> binary
    self.stats = {"compiled": 0, "mem_hits": 0, "disk_hits": 0}
    self._lock = threading.Lock()   # guards _mem and stats (threads may compile at once; the compiling itself runs unlocked)
  def cache_id(self) -> str:
    """What besides the source determines the binary (compiler path, flags); part of the cache key."""
    return type(self).__name__
  def compile(self, src:str) -> bytes: return src.encode()
  # True when compiling runs outside this process (a compiler process, the GIL released while it works): a schedule's first kernels then
  # compile while the later ones are still being lowered (ProgramLoader)
  compiles_in_background: bool = False
  def compile_many(self, srcs:Sequence[str], jobs:int|None=None) -> list[bytes]:
    """Compiles several sources at once, with at most `jobs` compiler processes at a time (None: one per core). A compiler with a
    per-process cost (the CPU's C compiler) overrides this to pay it once."""
    return [self.compile(src) for src in srcs]
  def cache_key(self, src:str) -> str: return hashlib.sha256(f"{self.cache_id()}\0{src}".encode()).hexdigest()
  def compile_cached(self, src:str) -> bytes: return self.compile_cached_many([src])[0]
  def compile_cached_many(self, srcs:Sequence[str], jobs:int|None=None) -> list[bytes]:
    """compile_cached of each source; the ones found in neither cache are compiled together by one compile_many call (`jobs` as there)."""
    keys = [self.cache_key(src) for src in srcs]
    use_disk = self.cachekey is not None and CCACHE
    missing: dict[str, str] = {}   # key -> source, each distinct source once
    found: dict[str, bytes] = {}     # this call's results (the bounded memory cache may drop some of them before the end)
    with self._lock:
      for src, key in zip(srcs, keys):
        if key in found or key in missing: continue   # the same source twice in this call: looked up or compiled once
        if (lib := self._mem.get(key)) is not None:
          self.stats["mem_hits"] += 1
          found[key] = lib
        elif use_disk and isinstance(lib := diskcache_get(self.cachekey, key), bytes):
          self.stats["disk_hits"] += 1
          found[key] = self._mem[key] = lib
        else: missing[key] = src
    st = time.perf_counter()
    libs = dict(zip(missing, self.compile_many(list(missing.values()), jobs=jobs))) if missing else {}
    if PROFILE and missing: profile_event(type(self).__name__, f"compile {len(missing)} kernel{'s' if len(missing) != 1 else ''}", "compile",
                                          st, time.perf_counter())
    with self._lock:
      for key, lib in libs.items():
        self.stats["compiled"] += 1
        if use_disk: diskcache_put(self.cachekey, key, lib)
        found[key] = self._mem[key] = lib
    return [found[key] for key in keys]
  def disassemble(self, lib:bytes): pass

def numbered_source(src:str) -> str: return "\n".join(f"{i+1:4d}  {line}" for i, line in enumerate(src.splitlines()))

# **************** Programs and compiled devices ****************

class Program(Generic[DeviceType]):
  """A loaded kernel. Call it with the runtime buffer handles (Buffer._buf) in the spec's `globals` order and the int variable values in
  its `vars` order; with wait=True it returns the run time in seconds."""
  def __init__(self, dev:DeviceType, name:str, lib:bytes, spec:ProgramSpec|None=None):
    self.dev, self.name, self.lib, self.spec = dev, name, lib, spec
  def check_args(self, bufs:Sequence, vals:Sequence[int]) -> None:
    if self.spec is None: return
    nb, nv = len(self.spec.globals), len(self.spec.vars)
    if len(bufs) != nb or len(vals) != nv:
      raise TypeError(f"kernel {self.name} takes {nb} buffer(s) and {nv} variable(s) {list(self.spec.var_names)}, "
                      f"got {len(bufs)} buffer(s) and {len(vals)} value(s)")
    if bad := [v for v in vals if not isinstance(v, int)]: raise TypeError(f"kernel {self.name}: variable values must be ints, got {bad}")
  def __call__(self, *bufs, global_size:tuple[int, ...]=(1, 1, 1), local_size:tuple[int, ...]|None=None, vals:tuple[int, ...]=(),
               wait:bool=False) -> float|None:
    raise NotImplementedError(f"{type(self).__name__} can't run programs")
  def launcher(self, global_size:tuple[int, ...], local_size:tuple[int, ...]|None) -> tuple[Callable[[Any], Any], Callable[..., None]]:
    """For replaying a captured kernel (engine/jit.py) at the cost of a call: (arg, launch), where arg(handle) is how a buffer handle
    (Buffer._buf) is passed and launch(*args, *vals) runs the kernel at these launch dims on the passed handles, unchecked."""
    nb = len(self.spec.globals) if self.spec is not None else None
    def launch(*args): self(*args[:nb], global_size=global_size, local_size=local_size, vals=tuple(args[nb:]) if nb is not None else ())
    return (lambda h: h), launch

class ProgramLoader:
  """Not a pool of its own: one background thread that starts the compiler's compile_many (helpers.map_on_threads) early. Loads a
  schedule's kernels as they are lowered (add each ProgramSpec, then finish()). With a compiler that works in its own process,
  the kernels added while no compile is running start compiling in a background thread once they hold OVERLAP_BYTES of source, with one
  compiler process fewer than the cores (the lowering keeps one busy); finish() compiles the rest on every core and waits for all. Otherwise
  everything is compiled in one go by finish(). A failed compile raises from finish(), after the background compile has ended."""
  OVERLAP_BYTES = 8192   # less C than this: a compiler process's start-up costs more than the overlap gains (benches/README.md, Design measurements)
  def __init__(self, dev:Compiled):
    self.dev, self.pending, self.seen = dev, [], set()
    # decided at the first kernel that needs loading
    self.background: bool|None = None
    self.job: threading.Thread|None = None
    self.error: BaseException|None = None
  def add(self, spec:ProgramSpec) -> None:
    if (key := self.dev.program_key(spec)) in self.seen or key in self.dev._programs: return
    self.seen.add(key)
    self.pending.append(spec)
    if self.background is None: self.background = self.dev.compiler.compiles_in_background and cpu_count() > 1
    if self.background and (self.job is None or not self.job.is_alive()) and self.error is None and \
       sum(len(s.src) for s in self.pending) >= self.OVERLAP_BYTES:
      chunk, self.pending = self.pending, []
      self.job = threading.Thread(target=self._load, args=(chunk, max(1, cpu_count() - 1)), name="tinygrad-load", daemon=True)
      self.job.start()
  def _load(self, specs:list[ProgramSpec], jobs:int) -> None:
    try: self.dev.load_programs(specs, jobs=jobs)
    except BaseException as e: self.error = e   # re-raised by finish, in the caller's thread
  def finish(self) -> None:
    try:
      if self.pending: self.dev.load_programs(self.pending)
    finally:
      if self.job is not None: self.job.join()
    if self.error is not None: raise self.error

class Compiled:
  """A device: its allocator, its renderers (the first that can be built is used; DEV=CPU:<RENDERER> picks one), the compiler of the
  chosen renderer, and its runtime (a Program class)."""
  def __init__(self, device:str, allocator:Allocator, renderers:Sequence[type[Renderer]|tuple[type[Renderer], Callable[[], Compiler]]],
               runtime:type[Program]|None, graph:Any=None, arch:str|None=None):
    # a renderer comes with (a factory of) the compiler this device builds its source with: the pairing lives here, in the runtime, so renderers
    # (a lower layer) never import a compiler; a renderer given alone keeps its own (the base Compiler, which builds nothing)
    pairs = [r if isinstance(r, tuple) else (r, None) for r in renderers]
    self.renderers, self._compiler_for = [r for r, _ in pairs], {r: c for r, c in pairs if c is not None}
    self.device, self.allocator, self.runtime_t, self.graph, self.arch = device, allocator, runtime, graph, arch
    self.device_id = int(idx) if ":" in device and (idx := device.split(":")[1]).isdigit() else 0
    self.cached_renderer: dict[Any, Renderer] = {}
    self._renderer_memo: tuple[Any, Renderer]|None = None
    self._programs: dict[tuple[str, str, Compiler|None], Program] = BoundedCache(4096)
  def __repr__(self): return f"<{type(self).__name__} {self.device}>"
  def _renderer_name(self, r:type[Renderer]) -> str:
    devname = self.device.split(":")[0].upper()
    return r.__name__.upper().removesuffix("RENDERER").removeprefix(devname) or devname
  @property
  def renderer(self) -> Renderer:
    # DEV's value is replaced, never mutated, when DEV changes (Context(DEV=...)): the choice made for one value holds until then. Choosing
    # parses and matches a Target, which would otherwise be paid twice per kernel launch
    if (memo := self._renderer_memo) is not None and memo[0] is DEV.value: return memo[1]
    if not self.renderers: raise RuntimeError(f"{self.device} has no renderer")
    t = DEV.target(self.device.split(":")[0], **({"arch": self.arch} if self.arch else {}))
    cands = select_by_name(self.renderers, self._renderer_name, t.renderer, f"{self.device} has no renderer {t.renderer!r}")
    key = (tuple(cands), t)
    if (ren := self.cached_renderer.get(key)) is None:
      ren = select_first_inited(cands, f"No renderer for {self.device}", None, t)
      if (comp := self._compiler_for.get(type(ren))) is not None: ren.compiler = comp()
      self.cached_renderer[key] = ren
    self._renderer_memo = (DEV.value, ren)
    return ren
  @property
  def compiler(self) -> Compiler: return self.renderer.compiler
  def runtime(self, name:str, lib:bytes, spec:ProgramSpec|None=None) -> Program:
    if self.runtime_t is None: raise RuntimeError(f"{self.device} has no runtime")
    return self.runtime_t(self, name, lib, spec)
  def program_key(self, spec:ProgramSpec) -> tuple[str, str, Compiler|None]:
    # the compiler is part of it: one source compiles to different binaries for different targets (NULL:CUDA:sm_80, then sm_90)
    return (spec.function_name, spec.src, self.renderer.compiler)
  def get_program(self, spec:ProgramSpec) -> Program:
    """Compiles (through the compiler's caches) and loads a rendered kernel, once per (name, source, compiler)."""
    if (prg := self._programs.get(key := self.program_key(spec))) is None:
      self.load_programs([spec])
      prg = self._programs[key]
    return prg
  def load_programs(self, specs:Sequence[ProgramSpec], jobs:int|None=None) -> None:
    """Compiles and loads the kernels not loaded yet, all in one compiler call (the CPU device then starts its C compiler once for
    a whole schedule instead of once per kernel); `jobs`: compiler processes at most (None: one per core)."""
    todo = {key: spec for spec in specs if (key := self.program_key(spec)) not in self._programs}
    if not todo: return
    for (key, spec), lib in zip(todo.items(), self.compiler.compile_cached_many([spec.src for spec in todo.values()], jobs=jobs)):
      self._programs[key] = self.runtime(spec.function_name, lib, spec)
  def loader(self) -> ProgramLoader: return ProgramLoader(self)
  def run(self, spec:ProgramSpec, bufs:Sequence[Buffer], var_vals:dict|None=None, wait:bool=False) -> float|None:
    """Runs a rendered kernel on Buffers (allocating them if needed), in the spec's buffer order."""
    if bad := [b for b in bufs if b.device != self.device]: raise ValueError(f"buffers {bad} are not on {self.device}")
    prg = self.get_program(spec)
    for slot, b in zip(spec.globals, bufs):
      if slot in spec.outs: b.ensure_allocated().before_write()
    global_size, local_size = spec.launch_dims(var_vals)
    return prg(*[b.ensure_allocated()._buf for b in bufs], global_size=global_size, local_size=local_size, vals=spec.vals(var_vals), wait=wait)
  # a launcher (Program.launcher) is valid while its device's launch_epoch stays the same: a CPU device that starts or stops its queue
  # changes it, and TinyJit makes its launchers again
  launch_epoch = 0
  def synchronize(self) -> None: pass
  def finalize(self) -> None: pass
  # ***** a collective all-reduce of the device kind's own (NCCL for CUDA), instead of the scheduler's copies and adds *****
  @classmethod
  def has_all_reduce(cls, devices:tuple[str, ...], dtype:DType) -> bool:
    """Whether all_reduce below can reduce values of dtype across `devices` (canonical names, all of this kind): asked while a sharded
    graph is lowered, before any device is opened."""
    return False
  def all_reduce(self, op:str, dsts:list[Buffer], srcs:list[Buffer]) -> None:
    """dsts[i] (on device i) = the reduction (op: "ADD", "MAX" or "MUL") of every srcs[j], with the same bits on every device. Called on
    the first device's Compiled; ordered after what each device ran before, and before what it runs next."""
    raise NotImplementedError(f"{type(self).__name__} has no collective all-reduce")
