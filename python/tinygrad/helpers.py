# Small shared utilities: environment flags (ContextVar/Context/getenv), sequence and integer helpers, timing and
# lightweight profiling events, the sqlite disk cache, downloads, and ctypes memory helpers.
# This module must not import anything else from tinygrad: every other module imports it.
from __future__ import annotations
import time
START_TIME = time.perf_counter()
import contextlib
import decimal
import copyreg
import ctypes
import functools
import gc
import hashlib
import importlib
import inspect
import itertools
import json
import math
import operator
import os
import pathlib
import pickle
import re
import sys
import tempfile
import threading
import types
import warnings
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generator, Generic, Iterable, Iterator, Sequence, TypeGuard, TypeVar, cast, overload
if TYPE_CHECKING:  # imported where used instead: each costs milliseconds at import tinygrad
  import decimal
  import sqlite3

T = TypeVar("T")
U = TypeVar("U")

OSX, WIN = sys.platform == "darwin", sys.platform == "win32"
BASEDIR = pathlib.Path(__file__).parent

# an empty os.system call switches the Windows console into ANSI mode so colored() output renders
if WIN: os.system("")

# *** sequences ***

def prod(x:Iterable[T]) -> T|int:
  """Product of the items; 1 (an int) for an empty iterable."""
  return functools.reduce(operator.mul, x, 1)
def dedup(x:Iterable[T]) -> list[T]:
  """Unique items, first occurrence order kept."""
  return list(dict.fromkeys(x))
def argfix(*x):
  """Lets a function take either f(1, 2, 3) or f((1, 2, 3)): returns the args as one tuple."""
  if x and x[0].__class__ in (tuple, list):
    if len(x) != 1: raise ValueError(f"bad arg {x}: pass either one tuple/list or separate values, not both")
    return tuple(x[0])
  return x
def argsort(x):
  """Indices that sort x, returned in the same container type as x."""
  return type(x)(sorted(range(len(x)), key=x.__getitem__))
def all_same(items:Sequence) -> bool: return all(x == items[0] for x in items)
def all_int(t:Sequence[Any]) -> TypeGuard[tuple[int, ...]]: return all(isinstance(s, int) for s in t)
def get_shape(x) -> tuple[int, ...]:
  """Shape of a nested list/tuple; raises ValueError when the nesting is ragged."""
  # strings are iterable but are scalars here; 0-d arrays have shape ()
  if not hasattr(x, "__len__") or isinstance(x, str) or getattr(x, "shape", None) == (): return ()
  subs = [get_shape(xi) for xi in x]
  if not all_same(subs): raise ValueError(f"inhomogeneous shape from {x}")
  return (len(subs),) + (subs[0] if subs else ())
def is_image_shape(shape) -> bool: return shape is not None and len(shape) == 3 and shape[-1] == 4
def make_tuple(x:int|Sequence[int], cnt:int) -> tuple[int, ...]: return (x,)*cnt if isinstance(x, int) else tuple(x)
def to_tuple(x:T|tuple[T, ...]) -> tuple[T, ...]: return x if isinstance(x, tuple) else (x,)
def flatten(l:Iterable[Iterable[T]]) -> list[T]: return [item for sub in l for item in sub]
def fully_flatten(l) -> list:
  """Flattens arbitrarily nested sequences (and array-likes) into a flat list of scalars."""
  if isinstance(l, str) or not (hasattr(l, "__len__") and hasattr(l, "__getitem__")): return [l]
  if getattr(l, "shape", None) == (): return [l[()]]
  return [x for li in l for x in fully_flatten(li)]
def flat_to_grouped(padding:Sequence[T]) -> tuple[tuple[T, T], ...]:
  """torch-style flat padding (last dim first: left, right, top, bottom, ...) -> per-dim (before, after) pairs, first dim first."""
  return tuple(zip(padding[-2::-2], padding[::-2]))
def resolve_pool_pads(padding:int|Sequence[int], dims:int) -> Sequence[int]:
  """Expands pooling padding (an int, one per dim, or two per dim) into the flat 2*dims form."""
  if isinstance(padding, int): return [padding]*2*dims
  if len(padding) == 2*dims: return padding
  if len(padding) != dims: raise ValueError(f"Padding must be an int or a sequence of length {dims} or {2*dims}, but got {padding=} with {dims=}.")
  return [p for p in padding for _ in range(2)][::-1]
def merge_dicts(ds:Iterable[dict[T, U]]) -> dict[T, U]:
  """Union of dicts; a key mapped to two different values is an error."""
  ds = list(ds)
  ret: dict[T, U] = {}
  for d in ds:
    for k, v in d.items():
      if k in ret and ret[k] != v: raise RuntimeError(f"{ds} contains different values for the same key {k!r}: {ret[k]!r} and {v!r}")
      ret[k] = v
  return ret
def partition(itr:Iterable[T], fxn:Callable[[T], bool]) -> tuple[list[T], list[T]]:
  """(items where fxn is true, items where it is false), order kept."""
  yes: list[T] = []
  no: list[T] = []
  for x in itr: (yes if fxn(x) else no).append(x)
  return yes, no
def unwrap(x:T|None) -> T:
  assert x is not None, "unwrap got None"
  return x
def get_single_element(x:Sequence[T]) -> T:
  assert len(x) == 1, f"{x} must only have 1 element"
  return x[0]
def get_child(obj, key:str):
  """Follows a dotted path like "layers.0.weight" through attributes, dict keys and list indices."""
  for k in key.split('.'):
    if k.isnumeric(): obj = obj[int(k)]
    elif isinstance(obj, dict): obj = obj[k]
    else: obj = getattr(obj, k)
  return obj
def fromimport(mod:str, frm:str): return getattr(importlib.import_module(mod), frm)
def pluralize(st:str, cnt:int) -> str: return f"{cnt} {st}" + ("" if cnt == 1 else "s")
def polyN(x:T, p:list[float]) -> T:
  """Horner evaluation of p[0]*x**(N-1) + ... + p[-1]."""
  return functools.reduce(lambda acc, c: acc*x+c, p, 0.0)  # type: ignore

class BoundedCache(dict):
  """A dict that keeps at most `maxsize` entries, dropping the least recently used: for caches whose keys (kernel ASTs, sources)
  would otherwise pile up for the life of a process. `get` counts as a use. Safe to share between threads (a racing eviction is a
  miss, never an error)."""
  def __init__(self, maxsize:int):
    super().__init__()
    self.maxsize = maxsize
  def get(self, key, default=None):
    try: val = self.pop(key)
    except KeyError: return default
    super().__setitem__(key, val)   # re-inserted at the end: dicts keep insertion order, so the front is the least recent
    return val
  def __setitem__(self, key, val):
    super().pop(key, None)
    super().__setitem__(key, val)
    while len(self) > self.maxsize:
      try: super().pop(next(iter(self)))
      except (KeyError, StopIteration, RuntimeError): break

@functools.lru_cache(maxsize=4096)
def canonicalize_strides(shape:tuple[T, ...], strides:tuple[T, ...]) -> tuple[T, ...]:
  # a size-1 dim never moves, so its stride is irrelevant; zero it so equal views compare equal
  return tuple(cast(T, 0) if s == 1 else st for s, st in zip(shape, strides))
@functools.lru_cache(maxsize=4096)
def strides_for_shape(shape:tuple[T, ...]) -> tuple[T, ...]:
  """Contiguous row-major strides for shape."""
  if not shape: return ()
  strides = tuple(itertools.accumulate(reversed(shape[1:]), operator.mul, initial=1))[::-1]
  return canonicalize_strides(shape, strides)

# *** integers ***

def ceildiv(num, amt):
  # symbolic (UOp) numerators that are known non-negative use the add-then-floor form, whose C and Python semantics agree
  if hasattr(num, "vmin") and num.vmin >= 0 and (amt > 0 if isinstance(amt, int) else amt.vmin > 0): return (num + amt - 1) // amt
  ret = -(num // -amt)
  return int(ret) if isinstance(ret, float) else ret
def round_up(num:int, amt:int) -> int: return (num + amt - 1) // amt * amt
def round_down(num:int, amt:int) -> int: return -round_up(-num, amt)
def next_power2(x:int) -> int: return 1 if x == 0 else 1 << (x - 1).bit_length()
# C semantics: the quotient truncates toward zero and the remainder takes the sign of the dividend; x/0 folds to 0
def cdiv(x:int, y:int) -> int:
  if y == 0: return 0
  q = abs(x) // abs(y)
  return -q if (x < 0) != (y < 0) else q
def cmod(x:int, y:int) -> int: return x - cdiv(x, y)*y
# Python semantics (floor), with the same x/0 -> 0 convention
def floordiv(x:int, y:int) -> int: return 0 if y == 0 else x // y
def floormod(x:int, y:int) -> int: return x - floordiv(x, y)*y
def lo32(x:Any) -> Any: return x & 0xFFFFFFFF
def hi32(x:Any) -> Any: return x >> 32
def data64(data:Any) -> tuple[Any, Any]: return (data >> 32, data & 0xFFFFFFFF)
def data64_le(data:Any) -> tuple[Any, Any]: return (data & 0xFFFFFFFF, data >> 32)
def to_be32(val:Any) -> Any:
  return ((val & 0xFF) << 24) | (((val >> 8) & 0xFF) << 16) | (((val >> 16) & 0xFF) << 8) | ((val >> 24) & 0xFF)
def to_be64(val:Any) -> Any: return to_be32(val >> 32) | (to_be32(val & 0xFFFFFFFF) << 32)
def getbits(value:int, start:int, end:int) -> int:
  """Bits start..end of value, both ends inclusive."""
  return (value >> start) & ((1 << (end - start + 1)) - 1)
def i2u(bits:int, value:int) -> int:
  """Reinterprets a negative value as its unsigned two's-complement encoding on `bits` bits."""
  return value if value >= 0 else (1 << bits) + value
def pad_bytes(b:bytes, align:int) -> bytes: return b + b"\x00" * (-len(b) % align)

# *** strings and terminal output ***

_COLORS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
def colored(st, color:str|None, background=False):
  """Wraps st in an ANSI color; an UPPERCASE color name selects the bright variant. Disabled by NO_COLOR=1."""
  if color is None or NO_COLOR: return st
  if color.lower() not in _COLORS: raise ValueError(f"unknown color {color!r}, expected one of {_COLORS}")
  code = 30 + _COLORS.index(color.lower()) + (60 if color.isupper() else 0) + (10 if background else 0)
  return f"\u001b[{code}m{st}\u001b[0m"
def colorize_float(x:float) -> str: return colored(f"{x:7.2f}x", "green" if x < 0.75 else "red" if x > 1.15 else "yellow")
def time_to_str(t:float, w=8) -> str:
  """Seconds as a fixed-width string in s, ms or us."""
  if t > 10: return f"{t:{w}.2f}s "
  if t > 10e-3: return f"{t*1e3:{w}.2f}ms"
  return f"{t*1e6:{w}.2f}us"
def size_to_str(s:int) -> str:
  for div, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
    if s >= div: return f"{s/div:.2f} {unit}"
  return f"{s} B"
_ANSI_RE = re.compile("\x1b\\[(K|.*?m)")
def ansistrip(s:str) -> str: return _ANSI_RE.sub("", s)
def ansilen(s:str) -> int: return len(ansistrip(s))
def ansipad(s:str, w:int) -> str: return s + " "*max(w - ansilen(s), 0)
def word_wrap(x:str, wrap=80) -> str:
  """Wraps at `wrap` visible characters; ANSI escape codes take no width."""
  if ansilen(x) <= wrap: return x
  if len(lines := x.splitlines()) > 1: return "\n".join(word_wrap(line, wrap) for line in lines)
  i = visible = 0
  while visible < wrap and i < len(x):
    if (m := _ANSI_RE.match(x, i)) is not None: i = m.end()
    else: i, visible = i + 1, visible + 1
  return x[:i] + "\n" + word_wrap(x[i:], wrap)
def _parens_balanced(s:str) -> bool:
  depth = 0
  for c in s:
    depth += (c == "(") - (c == ")")
    if depth < 0: return False
  return depth == 0
def strip_parens(fst:str) -> str:
  """Drops one pair of outer parentheses, only if they enclose the whole string."""
  return fst[1:-1] if fst[:1] == "(" and fst[-1:] == ")" and _parens_balanced(fst[1:-1]) else fst
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
@functools.lru_cache(maxsize=4096)
def to_function_name(s:str) -> str:
  """A C identifier from any string: non-identifier characters become their hex code, colors are dropped."""
  return "".join(c if c in _IDENT_CHARS else f"{ord(c):02X}" for c in ansistrip(s))
def stderr_log(msg:str): print(msg, end="", file=sys.stderr, flush=True)

# NOTE: build the exception inside the raising function, a module-level exception instance would hold frames alive (a GC cycle)
def panic(e:type[Exception]|None=None, *arg): raise e(*arg) if e is not None else RuntimeError("PANIC!")

def suppress_finalizing(func):
  """Decorator for __del__-style cleanup: errors are swallowed only while the interpreter is shutting down."""
  @functools.wraps(func)
  def wrapper(*args, **kwargs):
    try: return func(*args, **kwargs)
    except (RuntimeError, AttributeError, TypeError, ImportError, OSError):
      if not getattr(sys, "is_finalizing", lambda: True)(): raise
  return wrapper

def select_by_name(candidates:Sequence[T], get_name:Callable[..., str], query:str, err_msg:str) -> list[T]:
  """Candidates whose name equals query (all of them for an empty query); raises with a did-you-mean hint when none match."""
  ret = [c for c in candidates if not query or get_name(c) == query]
  if not ret:
    import difflib
    close = difflib.get_close_matches(query, [get_name(c) for c in candidates])
    raise RuntimeError(err_msg + (f", did you mean: {close[0]!r}?" if close else ""))
  return ret

def select_first_inited(candidates:Sequence[Callable[..., T]], err_msg:str, cache:dict|None=None, *args) -> T:
  """Returns the first candidate that constructs without raising; raises all the failures if none does."""
  errors: list[Exception] = []
  for typ in candidates:
    key = (typ,) + args
    if cache is not None and key in cache: return cache[key]
    try: ret = typ(*args)
    except Exception as e:
      errors.append(e)
      continue
    if cache is not None: cache[key] = ret
    return ret
  if len(errors) == 1: raise errors[0]
  raise ExceptionGroup(err_msg + " is available", errors)

# *** environment ***

_FALSE_STRINGS = frozenset({"", "0", "false", "no", "off"})
@overload
def getenv(key:str) -> int: ...
@overload
def getenv(key:str, default:T) -> T: ...
@functools.cache
def getenv(key:str, default:Any=0):
  """The environment variable `key` converted to the type of `default` (an int unless told). Cached: call getenv.cache_clear() after
  changing os.environ."""
  if (raw := os.getenv(key)) is None: return default
  # bool("0") would be True, so bools are parsed by hand
  if isinstance(default, bool): return raw.strip().lower() not in _FALSE_STRINGS
  try: return type(default)(raw)
  except (TypeError, ValueError) as e: raise ValueError(f"environment variable {key}={raw!r} is not a valid {type(default).__name__}") from e

def temp(x:str, append_user:bool=False) -> str:
  """A path in the system temp directory, optionally suffixed with the user name so users don't collide."""
  import getpass
  import tempfile
  return (pathlib.Path(tempfile.gettempdir()) / (f"{x}.{getpass.getuser()}" if append_user else x)).as_posix()

class ContextVar(Generic[T]):
  """A named global setting, initialised from the environment variable of the same name and changed temporarily with Context.
  Compares like its value (DEBUG >= 2), so it is not hashable."""
  _cache: ClassVar[dict[str, ContextVar]] = {}
  value: T
  key: str
  def __init__(self, key:str, default_value:T):
    if key in ContextVar._cache: raise RuntimeError(f"attempt to recreate ContextVar {key}")
    ContextVar._cache[key] = self
    self.key = key
    self.value = getenv(key, default_value)
  def __bool__(self): return bool(self.value)
  def __eq__(self, x): return self.value == x
  __hash__ = None  # type: ignore[assignment]
  def __ge__(self, x): return self.value >= x
  def __gt__(self, x): return self.value > x
  def __le__(self, x): return self.value <= x
  def __lt__(self, x): return self.value < x
  def __repr__(self): return f"ContextVar({self.key!r}, {self.value!r})"
  @staticmethod
  def current_values() -> dict[str, Any]:
    """{name: value} of every ContextVar now (what `Context(**values)` sets again, e.g. in a worker process)."""
    return {k: v.value for k, v in ContextVar._cache.items()}
  def tolist(self, obj=None) -> list:
    """Splits a comma-separated string value; with obj, each name is looked up as an attribute of obj."""
    if not isinstance(self.value, str): raise TypeError(f"ContextVar {self.key} holds {self.value!r}, tolist needs a str")
    return [getattr(obj, x) if obj else x for x in self.value.split(",") if x]

class Context(contextlib.ContextDecorator):
  """Sets ContextVars by name for the duration of a with-block (or a decorated call): `with Context(DEBUG=2, BEAM=0): ...`"""
  def __init__(self, **kwargs):
    self.kwargs = kwargs
    self._saved: list[dict[str, Any]] = []  # a stack, so one Context object can be re-entered (recursive decorated calls)
  def __enter__(self):
    if unknown := [k for k in self.kwargs if k not in ContextVar._cache]: raise KeyError(f"Context got unknown ContextVar(s) {unknown}")
    self._saved.append({k: ContextVar._cache[k].value for k in self.kwargs})
    for k, v in self.kwargs.items(): ContextVar._cache[k].value = v
    return self
  def __exit__(self, *exc):
    for k, v in self._saved.pop().items(): ContextVar._cache[k].value = v

@dataclass(frozen=True)
class Target:
  """One entry of DEV: which device, and optionally which renderer, arch, interface and device indices to use.
  String form: [interface[:indices]+]DEVICE[:RENDERER[:arch]], e.g. "CUDA", "CPU:LLVM", "NV:PTX:sm_80", "pci:1+AMD"."""
  device: str = ""
  renderer: str = ""
  arch: str = ""
  interface: str = ""
  indices: str = ""

  @staticmethod
  def parse(s:str) -> Target:
    iface = indices = ""
    if "+" in s:
      if s.count("+") > 1: raise RuntimeError(f"too many '+' in target string: {s!r}")
      prefix, s = s.split("+")
      iface, _, indices = prefix.rpartition(":") if ":" in prefix else (prefix, "", "")
    parts = s.split(":")
    if len(parts) > 3: raise RuntimeError(f"too many ':' in target string: {s!r}")
    # device and renderer are case-insensitive names; arch strings (sm_80, gfx1100) keep their case
    dev, ren, arch = (parts + ["", ""])[:3]
    return Target(dev.upper(), ren.upper(), arch, iface, indices)
  def __repr__(self):
    front = ":".join([self.interface, self.indices]).rstrip(":")
    back = ":".join([self.device, self.renderer, self.arch]).rstrip(":")
    return f"{front}+{back}" if front else back
  def replacedefault(self, **kwargs) -> Target:
    """Fills in the given fields only where this target leaves them empty."""
    return replace(self, **{k: v for k, v in kwargs.items() if not getattr(self, k)})

class _DEV(ContextVar):
  """DEV=... selects devices: a ';'-separated list of Targets. Attribute access (DEV.device, DEV.renderer) reads the first one."""
  _value: list[Target] = [Target()]
  @property
  def value(self) -> list[Target]: return self._value
  @value.setter
  def value(self, v:str|Target|list[Target]):
    if isinstance(v, list): self._value = v
    elif isinstance(v, Target): self._value = [v]
    elif isinstance(v, str): self._value = [Target.parse(t) for t in v.split(";")]
    else: raise TypeError(f"DEV must be a str, Target or list of Targets, got {v!r}")
  def __repr__(self) -> str: return ";".join(repr(t) for t in self._value)
  def __getattr__(self, k):
    if k.startswith("_"): raise AttributeError(k)
    return getattr(self._value[0], k)
  def target(self, dev:str, **kwargs) -> Target:
    """The Target to use for device `dev`: the first entry naming it (or naming no device), with kwargs as defaults for unset fields."""
    if (old := getenv(f"{dev}_CC", "")) != "":
      keep = [repr(t) for t in self._value if t.device != dev]
      raise RuntimeError(f"{dev}_CC={old} is deprecated, use DEV='{';'.join(keep + [f'{dev}:{old}'])}' instead")
    base = next((t for t in self._value if t.device in ("", dev)), Target(device=dev))
    return replace(base.replacedefault(**kwargs), device=dev)

# the global settings; defaults match tinygrad 0.14
DEV, DEBUG, BEAM, NOOPT = _DEV("DEV", ""), ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0)
JIT = ContextVar("JIT", 1)
NO_COLOR = ContextVar("NO_COLOR", 0)
TRAINING = ContextVar("TRAINING", 0)
USE_TC, TC_SELECT, TC_OPT = ContextVar("TC", 1), ContextVar("TC_SELECT", -1), ContextVar("TC_OPT", 0)
NOLOCALS = ContextVar("NOLOCALS", 0)
NO_MEMORY_PLANNER, LRU = ContextVar("NO_MEMORY_PLANNER", 0), ContextVar("LRU", 1)
CACHELEVEL, IGNORE_BEAM_CACHE = ContextVar("CACHELEVEL", 2), ContextVar("IGNORE_BEAM_CACHE", 0)
FUSE_OPTIM = ContextVar("FUSE_OPTIM", 0)
# all-reduce between devices (schedule/allreduce.py): RING 0 never uses the ring, 1 from RING_ALLREDUCE_THRESHOLD elements, 2 always
RING, RING_ALLREDUCE_THRESHOLD = ContextVar("RING", 1), ContextVar("RING_ALLREDUCE_THRESHOLD", 256_000)
ALLOW_DEVICE_USAGE, MAX_BUFFER_SIZE = ContextVar("ALLOW_DEVICE_USAGE", 1), ContextVar("MAX_BUFFER_SIZE", 0)
DEFAULT_FLOAT, DEFAULT_INT = ContextVar("DEFAULT_FLOAT", "float32"), ContextVar("DEFAULT_INT", "int32")

@functools.cache
def cpu_count() -> int:
  """CPUs this process may use: its affinity mask where the platform has one, capped by a cgroup v2 CPU quota (a container's share
  of a bigger machine). Read once: the CPU pool later moves threads' affinity, and sysfs reads cost tens of microseconds."""
  n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
  with contextlib.suppress(OSError, ValueError, ZeroDivisionError):
    quota, period = pathlib.Path("/sys/fs/cgroup/cpu.max").read_text().split()
    if quota != "max": n = min(n, int(quota) // int(period))
  return max(1, n)
NUM_CPU_THREADS = ContextVar("NUM_CPU_THREADS", cpu_count())
# threads per CPU device (CPU, CPU:1, ...); 0: NUM_CPU_THREADS split between the CPU devices in use (runtime/ops_cpu.py device_threads)
CPU_DEVICE_THREADS = ContextVar("CPU_DEVICE_THREADS", 0)

def map_on_threads(fn:Callable[[T], U], items:Sequence[T], name:str) -> list[U]:
  """The compile pool: [fn(x) for x in items] with one thread per item, the first on the calling thread (for work that releases the
  GIL, as a compiler process or NVRTC does). Plain threads: concurrent.futures, and the logging it imports, costs a cold process more
  than it saves. An exception in any item is raised in the caller, after every thread has ended."""
  results: list = [None] * len(items)
  errors: list[BaseException|None] = [None] * len(items)
  def work(n:int):
    try: results[n] = fn(items[n])
    except BaseException as e: errors[n] = e
  threads = [threading.Thread(target=work, args=(n,), name=f"{name}-{n}") for n in range(1, len(items))]
  for t in threads: t.start()
  work(0)
  for t in threads: t.join()
  if (err := next((e for e in errors if e is not None), None)) is not None: raise err
  return results
NULL_ALLOW_COPYOUT = ContextVar("NULL_ALLOW_COPYOUT", 0)
# an all-reduce between devices of one kind that has a collective of its own (Compiled.has_all_reduce) is one schedule item calling it:
# NCCL=0 makes CUDA devices use the scheduler's copies and adds instead; NULL_ALLREDUCE=1 gives the NULL device one that runs nothing
# (schedule-only tests of that schedule)
NCCL, NULL_ALLREDUCE = ContextVar("NCCL", 1), ContextVar("NULL_ALLREDUCE", 0)
VIZ = ContextVar("VIZ", 0)  # VIZ turns on PROFILE, PROFILE alone does not need VIZ
# parallel BEAM/compile workers; pytest-xdist workers split the CPUs between them; off under VIZ
PARALLEL = ContextVar("PARALLEL", NUM_CPU_THREADS.value // max(1, getenv("PYTEST_XDIST_WORKER_COUNT", 1)) if VIZ == 0 else 0)
PROFILE = ContextVar("PROFILE", abs(VIZ.value))
SPEC = ContextVar("SPEC", 1)
CCACHE = ContextVar("CCACHE", 1)          # 0 disables the compiler cache
SCACHE = ContextVar("SCACHE", 1)          # 0 disables the schedule cache
# tinygrad 0.14 flags for features this project does not have (image dtypes, Winograd convs, dtype emulation by flag, per-access
# bounds checks, partial contiguous): code that imports them keeps working, and one set in the environment is reported as doing nothing
IMAGE, WINO, EMULATED_DTYPES = ContextVar("IMAGE", 0), ContextVar("WINO", 0), ContextVar("EMULATED_DTYPES", "")
CHECK_OOB, PCONTIG = ContextVar("CHECK_OOB", 0), ContextVar("PCONTIG", 0)
INERT_FLAGS = (IMAGE, WINO, EMULATED_DTYPES, CHECK_OOB, PCONTIG)
for _flag in INERT_FLAGS:
  if _flag.value: warnings.warn(f"{_flag.key}={_flag.value} has no effect in this tinygrad (README: differences from tinygrad 0.14)", stacklevel=2)
# NOTE: tinygrad 0.14 defines this one in uop/ops.py; it lives here so the rewrite engine and the tests can share it
TRACK_MATCH_STATS = ContextVar("TRACK_MATCH_STATS", 2 if VIZ.value > 0 else 0)   # VIZ=-1: the profile alone

# *** global counters, metadata ***

@dataclass(frozen=True)
class Metadata:
  """Names the user-level operation (e.g. a Tensor method) that produced a kernel; `backward` marks gradient computations."""
  name: str
  backward: bool = False
  def __hash__(self): return hash(self.name)
  def __str__(self): return self.name + (" bw" if self.backward else "")

class GlobalCounters:
  global_ops: ClassVar[int] = 0
  global_mem: ClassVar[int] = 0
  time_sum_s: ClassVar[float] = 0.0
  kernel_count: ClassVar[int] = 0
  # bytes held by allocated base buffers (an arena of the memory planner once, its views nothing; allocations the LRU cache keeps for
  # reuse are not counted, as in tinygrad 0.14); not cleared by reset()
  mem_used: ClassVar[int] = 0
  mem_used_per_device: ClassVar[defaultdict] = defaultdict(int)         # not cleared by reset()
  max_mem_used: ClassVar[int] = 0                                       # the peak of mem_used since the last reset() (reset to mem_used)
  lock: ClassVar = threading.RLock()                                    # held while updating from several threads (reentrant: __del__)
  @staticmethod
  def reset():
    GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 0, 0, 0.0, 0
    GlobalCounters.max_mem_used = GlobalCounters.mem_used

# *** timing and profiling ***

class Timing(contextlib.ContextDecorator):
  """Prints the wall time of a block in ms; on_exit(elapsed_ns) may return a suffix string."""
  def __init__(self, prefix="", on_exit=None, enabled=True): self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self):
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc):
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

class Profiling(contextlib.ContextDecorator):
  """cProfile a block and print the top `frac` of functions sorted by `sort`; fn also dumps the raw stats there."""
  def __init__(self, enabled=True, sort="cumtime", frac=0.2, fn=None, ts=1):
    self.enabled, self.sort, self.frac, self.fn, self.time_scale = enabled, sort, frac, fn, 1e3/ts
  def __enter__(self):
    import cProfile
    self.pr = cProfile.Profile()
    if self.enabled: self.pr.enable()
    return self
  def __exit__(self, *exc):
    if not self.enabled: return
    self.pr.disable()
    if self.fn: self.pr.dump_stats(self.fn)
    import pstats
    stats = pstats.Stats(self.pr).strip_dirs().sort_stats(self.sort)
    def where(f): return f"{f[0]}:{f[1]}:{f[2]}"
    for fcn in stats.fcn_list[:int(len(stats.fcn_list)*self.frac)]:  # type: ignore[attr-defined]
      _, ncalls, tottime, cumtime, callers = stats.stats[fcn]  # type: ignore[attr-defined]
      top = max(callers.items(), key=lambda kv: kv[1][2], default=None)
      caller = colored(f"<- {top[1][2]/tottime*100 if tottime else 0:3.0f}% {where(top[0])}", "BLACK") if top else ""
      times = f"n:{ncalls:8d}  tm:{tottime*self.time_scale:7.2f}ms  tot:{cumtime*self.time_scale:7.2f}ms"
      print(times, colored(where(fcn).ljust(50), "yellow"), caller)

def perf_counter_us() -> decimal.Decimal:
  import decimal
  return decimal.Decimal(time.perf_counter_ns())/1000

@functools.cache
def lines(fn) -> list[str]:
  try:
    with open(fn, encoding="utf-8") as f: return f.readlines()
  except OSError: return []
def printable(loc:tuple[str, int]) -> str:
  """The stripped source line at (filename, lineno)."""
  try: return lines(loc[0])[loc[1]-1].strip()
  except IndexError: return "<missing>"
def get_stacktrace(frm, max_frames=30) -> tuple[tuple, ...]:
  """(filename, lineno, function, source line) for up to max_frames callers of frame frm."""
  ret: list[tuple] = []
  for _ in range(max_frames):
    if (frm := frm.f_back) is None: break
    code = frm.f_code
    ret.append((code.co_filename, frm.f_lineno, code.co_name, printable((code.co_filename, frm.f_lineno))))
  return tuple(ret)

@dataclass(frozen=True)
class TracingKey:
  display_name: str                 # what the trace viewer shows
  keys: tuple[Any, ...] = ()        # lets related traces be found
  ret: Any = None
  # the creating stack is only captured when VIZ will show it
  tb: tuple[tuple, ...]|None = field(default_factory=lambda: get_stacktrace(sys._getframe(1)) if VIZ else None)

class ProfileEvent: pass

@dataclass
class ProfileRangeEvent(ProfileEvent):
  device: str
  name: str|TracingKey
  st: decimal.Decimal
  en: decimal.Decimal|None = None
  profile_key: bytes|None = None
  cat: str = "other"                # kernel, copy, compile or other: the timeline's colour and the Chrome trace's category

@dataclass(frozen=True)
class ProfilePointEvent(ProfileEvent):
  device: str
  name: str
  key: Any
  arg: Any = field(default_factory=dict)
  ts: decimal.Decimal = field(default_factory=perf_counter_us)

cpu_events: list[ProfileEvent] = []
@contextlib.contextmanager
def cpu_profile(name:str|TracingKey, device="TINY", display=True, profile_key:bytes|None=None) -> Generator[ProfileRangeEvent, None, None]:
  """Times a block as a ProfileRangeEvent, recorded in cpu_events when PROFILE is on."""
  ev = ProfileRangeEvent(device, name, perf_counter_us(), profile_key=profile_key)
  try: yield ev
  finally:
    ev.en = perf_counter_us()
    if PROFILE and display: cpu_events.append(ev)

PROFILE_MAX_EVENTS = ContextVar("PROFILE_MAX_EVENTS", 1_000_000)   # events kept at most: a long profiled run drops its oldest half
def profile_event(device:str, name:str, cat:str, st:float, en:float) -> None:
  """Records a finished span (a kernel launch, a copy, a compile; st and en from time.perf_counter()) while PROFILE is on; callers
  test PROFILE first (free when off)."""
  cpu_events.append(ProfileRangeEvent(device, name, decimal.Decimal(round(st * 1e9)) / 1000, decimal.Decimal(round(en * 1e9)) / 1000, cat=cat))
  if len(cpu_events) > PROFILE_MAX_EVENTS.value:
    print(f"PROFILE: more than {PROFILE_MAX_EVENTS.value} events (PROFILE_MAX_EVENTS), dropping the oldest half")
    del cpu_events[:len(cpu_events) // 2]

def write_chrome_trace(f, events:list[ProfileEvent]) -> None:
  """The events as a Chrome trace (JSON; Perfetto and chrome://tracing open it): one process per device, complete ("X") events in us."""
  spans = [e for e in events if isinstance(e, ProfileRangeEvent) and e.en is not None]
  devices = sorted({e.device for e in spans})
  pid = {d: i for i, d in enumerate(devices)}
  trace: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid[d], "tid": 0, "args": {"name": d}} for d in devices]
  for e in spans:
    name = e.name.display_name if isinstance(e.name, TracingKey) else str(e.name)
    trace.append({"name": name, "cat": e.cat, "ph": "X", "ts": float(e.st), "dur": float(e.en - e.st), "pid": pid[e.device], "tid": 0, "args": {}})
  json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)

_saved_profile: list[str] = []
def save_profile() -> str|None:
  """Writes the recorded events once as a Chrome trace (a fresh 0600 temp file) and prints its path; None when nothing was profiled."""
  if _saved_profile: return _saved_profile[0]
  if not PROFILE or not any(isinstance(e, ProfileRangeEvent) for e in cpu_events): return None
  fd, fn = tempfile.mkstemp(prefix="tinygrad-profile-", suffix=".json")
  with os.fdopen(fd, "w") as f: write_chrome_trace(f, cpu_events)
  print(f"saved profile to {fn} (a Chrome trace: Perfetto opens it)")
  _saved_profile.append(fn)
  return fn

def profile_marker(name:str, color="gray") -> None:
  cpu_events.append(ProfilePointEvent("TINY", "marker", None, {"name": name, "color": color}))

if getenv("DEBUG_GC"):
  _gc_start = perf_counter_us()
  def _gc_callback(phase, info):
    global _gc_start
    if phase == "start": _gc_start = perf_counter_us()
    elif phase == "stop":
      cpu_events.append(ProfileRangeEvent("GC", f"collected: {info['collected']} (gen {info['generation']})", _gc_start, perf_counter_us()))
  if PROFILE: gc.callbacks.append(_gc_callback)

# *** host memory ***

@functools.cache
def host_memory() -> int:
  """Bytes of RAM plus swap on the host (0 when unknown): no host allocation can be bigger."""
  try:
    with open("/proc/meminfo") as f: info = {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f if ":" in line)}
    return info["MemTotal"] + info.get("SwapTotal", 0)
  except (OSError, KeyError, ValueError, IndexError):
    try: return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError): return 0

def check_host_alloc(nbytes:int, what:str) -> None:
  """MemoryError, before anything is allocated, when nbytes can't fit in the host's memory (the OOM killer would end the process
  part way instead)."""
  if (mem := host_memory()) and nbytes > mem:
    raise MemoryError(f"{what} needs {size_to_str(nbytes)}, more than this machine's memory and swap ({size_to_str(mem)})")

# *** disk cache (sqlite) ***
# Values are stored as plain data (bytes, or JSON of None/bool/int/float/str/bytes/list/tuple/dict), never as pickles: anyone who can
# write the cache file (or hand it to the user) would otherwise run code when it is read. Each row also holds a checksum of its table,
# key and value, so a row that diskcache_put did not write for that key (corrupted, truncated, edited, copied from another key) is
# ignored and recomputed. The checksum is no signature: the cache is trusted as far as its directory is, so it is used only where
# this user alone can write it (untrusted_cache_reason).

cache_dir: str = os.path.join(getenv("XDG_CACHE_HOME", os.path.expanduser("~/Library/Caches" if OSX else "~/.cache")), "tinygrad")
# NOTE: a different file than upstream tinygrad's cache.db, whose rows are pickles
CACHEDB: str = getenv("CACHEDB", os.path.abspath(os.path.join(cache_dir, "cache_rust.db")))

VERSION = 23  # part of every table name: bump it to invalidate old entries (22 and before held pickles: never read)
# one connection shared by every thread, used by one statement at a time (sqlite connections are not safe to use concurrently)
_db_lock = threading.RLock()
_db_connection: sqlite3.Connection|None = None
_db_pid = 0   # the process that opened _db_connection: a forked child must open its own
_db_refused: dict[str, str] = {}   # CACHEDB paths found unsafe -> why (checked and reported once)

def untrusted_cache_reason(db:str) -> str|None:
  """Why the cache file `db` can't be trusted, or None. The cache holds compiled kernels that get loaded and run, so whoever can write it
  can run code as this user: its directory and files (the database and sqlite's -wal/-shm/-journal beside it) must be owned by this
  user and not writable by group or others. (A directory only the user can write also keeps others from replacing the files.)"""
  if db in ("", ":memory:") or not hasattr(os, "getuid"): return None   # in memory; no POSIX owners and modes (Windows)
  import stat
  uid = os.getuid()
  for path in [os.path.dirname(os.path.abspath(db))] + [db + suffix for suffix in ("", "-wal", "-shm", "-journal")]:
    try: st = os.stat(path)
    except FileNotFoundError: continue
    if st.st_uid != uid: return f"{path} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if who := " and ".join(name for bit, name in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others")) if st.st_mode & bit):
      return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
  return None

def db_connection() -> sqlite3.Connection|None:
  """The disk cache's connection, or None when CACHEDB is not safe to use (untrusted_cache_reason: said once, then no disk cache)."""
  global _db_connection, _db_pid
  with _db_lock:
    if _db_connection is None or _db_pid != os.getpid():
      if CACHEDB in _db_refused: return None
      # a new directory and database file are the user's alone (whatever the umask lets others do)
      os.makedirs(os.path.dirname(CACHEDB) or ".", mode=0o700, exist_ok=True)
      if (why := untrusted_cache_reason(CACHEDB)) is not None:
        _db_refused[CACHEDB] = why
        print(f"tinygrad: not using the compile cache {CACHEDB}: {why}. Whoever can write it could make this process load their code. "
              "Make it yours and private (chmod go-w), point CACHEDB to a file in a directory only you can write, or set CACHELEVEL=0",
              file=sys.stderr)
        return None
      if CACHEDB != ":memory:":
        with contextlib.suppress(FileExistsError): os.close(os.open(CACHEDB, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
      import sqlite3
      _db_connection = sqlite3.connect(CACHEDB, timeout=60, isolation_level="IMMEDIATE", check_same_thread=False)
      _db_pid = os.getpid()
      # WAL lets readers and one writer work at once; another process may hold the lock while switching modes, which is fine
      with contextlib.suppress(sqlite3.OperationalError): _db_connection.execute("PRAGMA journal_mode=WAL").fetchone()
      _db_connection.execute("PRAGMA synchronous=NORMAL")
      if DEBUG >= 8: _db_connection.set_trace_callback(print)
    return _db_connection

def diskcache_clear():
  with _db_lock:
    if (conn := db_connection()) is None: return
    cur = conn.cursor()
    tables = [row[0] for row in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
    cur.executescript("".join(f"DROP TABLE IF EXISTS \"{t}\";" for t in tables) + "VACUUM;")
    _db_tables.clear()

def _cache_key(table:str, key:dict|str|int) -> dict:
  # table and column names are spliced into SQL, so they must be plain identifiers
  if not (isinstance(table, str) and table.isidentifier()): raise ValueError(f"diskcache table names must be identifiers, got {table!r}")
  if isinstance(key, (str, int)): key = {"key": key}
  if not isinstance(key, dict): raise TypeError(f"diskcache key must be a dict, str or int, got {key!r}")
  if bad := [k for k in key if not (isinstance(k, str) and k.isidentifier())]: raise ValueError(f"diskcache key names must be identifiers, got {bad}")
  if bad2 := {k: v for k, v in key.items() if type(v) not in _SQL_TYPES}:
    raise TypeError(f"diskcache key values must be str/int/float/bytes, got {bad2}")
  return key

def _to_plain(x:Any) -> Any:
  """x as JSON-able data: scalars stay, containers become [tag, items] (l: list, t: tuple, d: dict as [key, value] pairs, b: bytes)."""
  if x is None or type(x) in (bool, int, float, str): return x
  if type(x) is bytes: return ["b", x.hex()]
  if type(x) in (list, tuple): return ["l" if type(x) is list else "t", [_to_plain(v) for v in x]]
  if type(x) is dict: return ["d", [[_to_plain(k), _to_plain(v)] for k, v in x.items()]]
  raise TypeError(f"diskcache values must be plain data (None, bool, int, float, str, bytes, list, tuple, dict), got {type(x).__name__}")

def _from_plain(x:Any) -> Any:
  """The inverse of _to_plain; ValueError/TypeError on anything _to_plain doesn't produce."""
  if x is None or type(x) in (bool, int, float, str): return x
  if type(x) is not list or len(x) != 2 or type(x[1]) is not (str if x[0] == "b" else list): raise ValueError(f"malformed value {x!r:.60}")
  tag, body = x
  if tag == "b": return bytes.fromhex(body)
  if tag == "l": return [_from_plain(v) for v in body]
  if tag == "t": return tuple(_from_plain(v) for v in body)
  if tag == "d":
    if not all(type(p) is list and len(p) == 2 for p in body): raise ValueError("malformed dict")
    return {_from_plain(k): _from_plain(v) for k, v in body}
  raise ValueError(f"unknown tag {tag!r:.20}")

def _row_checksum(table:str, key:dict, kind:str, blob:bytes) -> str:
  head = json.dumps([table, VERSION, kind, _to_plain(sorted(key.items()))]).encode()
  return hashlib.sha256(len(head).to_bytes(8, "little") + head + blob).hexdigest()

def diskcache_get(table:str, key:dict|str|int) -> Any:
  """The value stored under key in table, or None when missing, when the row is malformed or fails its check, or when CACHELEVEL=0."""
  if CACHELEVEL < 1: return None
  key = _cache_key(table, key)
  where = " AND ".join(f"{k}=?" for k in key)
  import sqlite3
  with _db_lock:
    if (conn := db_connection()) is None: return None
    try: row = conn.execute(f"SELECT chk, kind, val FROM '{table}_{VERSION}' WHERE {where}", tuple(key.values())).fetchone()
    except sqlite3.OperationalError: return None  # the table was never created (or has another layout)
  if row is None: return None
  chk, kind, blob = row
  try:
    if type(blob) is not bytes or kind not in ("bytes", "json") or chk != _row_checksum(table, key, kind, blob):
      raise ValueError("the row's checksum, kind or value type doesn't match its key")
    return blob if kind == "bytes" else _from_plain(json.loads(blob))
  except (ValueError, TypeError, RecursionError) as e:
    if DEBUG >= 1: print(f"diskcache: ignoring a malformed row of {table} in {CACHEDB}: {e}")
    return None

_db_tables: set[str] = set()
_SQL_TYPES = {str: "text", bool: "integer", int: "integer", float: "numeric", bytes: "blob"}
def diskcache_put(table:str, key:dict|str|int, val:Any) -> Any:
  """Stores val (plain data: see _to_plain) under key in table and returns val. Does nothing when CACHELEVEL=0."""
  if CACHELEVEL < 1: return val
  key = _cache_key(table, key)
  kind, blob = ("bytes", val) if type(val) is bytes else ("json", json.dumps(_to_plain(val)).encode())
  row = tuple(key.values()) + (_row_checksum(table, key, kind, blob), kind, blob)
  with _db_lock:
    if (conn := db_connection()) is None: return val
    if table not in _db_tables:
      cols = ", ".join(f"{k} {_SQL_TYPES[type(v)]}" for k, v in key.items())
      conn.execute(f"CREATE TABLE IF NOT EXISTS '{table}_{VERSION}' ({cols}, chk text, kind text, val blob, PRIMARY KEY ({', '.join(key)}))")
      _db_tables.add(table)
    conn.execute(f"REPLACE INTO '{table}_{VERSION}' ({', '.join(key)}, chk, kind, val) VALUES ({', '.join('?'*len(row))})", row)
    conn.commit()
  return val

def diskcache(func:Callable[..., T]) -> Callable[..., T]:
  """Memoizes func on disk, keyed by a hash of its pickled arguments; its results must be plain data (see diskcache_put)."""
  @functools.wraps(func)
  def wrapper(*args, **kwargs) -> T:
    table, key = f"cache_{func.__name__}", hashlib.sha256(pickle.dumps((args, kwargs))).hexdigest()
    if (ret := diskcache_get(table, key)) is not None: return ret
    return diskcache_put(table, key, func(*args, **kwargs))
  return wrapper

# *** downloads ***

def _ensure_downloads_dir() -> pathlib.Path: return pathlib.Path(cache_dir) / "downloads"

def fetch(url:str, name:pathlib.Path|str|None=None, subdir:str|None=None, gunzip:bool=False, allow_caching=not getenv("DISABLE_HTTP_CACHE"),
          headers:dict[str, str]|None=None, sha256:str|None=None, extract:bool=False) -> pathlib.Path:
  """Downloads url into the cache (once) and returns the local path. Local paths ("/..." or "./...") are returned as they are.
  gunzip decompresses on the fly, sha256 verifies the content, extract unpacks a tarball and returns its directory."""
  import gzip
  import shutil
  import tempfile
  import urllib.request
  if url.startswith(("/", ".")): return pathlib.Path(url)
  headers = headers or {}
  if name is not None and (isinstance(name, pathlib.Path) or "/" in name): fp = pathlib.Path(name)
  else:
    # different request headers may give different content, so they are part of the cache file name
    hh = "_" + hashlib.md5("\n".join(f"{k.strip()}:{v.strip()}" for k, v in sorted(headers.items())).encode()).hexdigest() if headers else ""
    fn = (name or hashlib.md5(url.encode()).hexdigest()) + hh + (".gunzip" if gunzip else "")
    fp = _ensure_downloads_dir() / (subdir or "") / fn
  extract_dir = fp.parent / f"{fp.name}.extract"
  stale = not fp.is_file() or not allow_caching or (sha256 is not None and hashlib.sha256(fp.read_bytes()).hexdigest() != sha256)
  if stale:
    if extract: shutil.rmtree(extract_dir, ignore_errors=True)
    fp.parent.mkdir(parents=True, exist_ok=True)
    req = urllib.request.Request(url, headers={"User-Agent": "tinygrad 0.14.0", **headers})
    with urllib.request.urlopen(req, timeout=10) as r:
      # file:// and ftp:// responses have no HTTP status
      if r.status not in (200, 206, None): raise RuntimeError(f"fetch {url} failed with HTTP status {r.status}")
      length = None if gunzip else int(r.headers.get("content-length", 0))
      src = gzip.GzipFile(fileobj=r) if gunzip else r
      h = hashlib.sha256() if sha256 else None
      bar: tqdm = tqdm(total=length, unit="B", unit_scale=True, desc=url)
      # write to a temp file in the same directory, then rename: readers never see a partial download
      with tempfile.NamedTemporaryFile(dir=fp.parent, delete=False) as f:
        while chunk := src.read(16384):
          if h is not None: h.update(chunk)
          bar.update(f.write(chunk))
      if h is not None and (got := h.hexdigest()) != sha256:
        os.unlink(f.name)
        raise RuntimeError(f"fetch sha mismatch for {url}: expected {sha256} but got {got}")
      pathlib.Path(f.name).replace(fp)
      bar.update(close=True)
      if length and (size := fp.stat().st_size) < length: raise RuntimeError(f"fetch size incomplete, {size} < {length}")
  if not extract: return fp
  if not extract_dir.is_dir():
    import tarfile
    tmpdir = tempfile.mkdtemp(dir=fp.parent)
    try:
      with tarfile.open(fp) as t: t.extractall(tmpdir, filter="data")
      # rename is atomic: a concurrent fetch either sees the whole directory or none of it
      try: os.rename(tmpdir, extract_dir)
      except OSError:
        if not extract_dir.is_dir(): raise
    finally: shutil.rmtree(tmpdir, ignore_errors=True)
  return extract_dir

# *** processes ***

def system(cmd:str, **kwargs) -> str:
  """Runs cmd (split on whitespace, no shell) and returns its stripped output; raises RuntimeError with the output on failure."""
  import subprocess
  st = time.perf_counter()
  try: ret = subprocess.check_output(cmd.split(), stderr=subprocess.STDOUT, **kwargs).decode().strip()
  except subprocess.CalledProcessError as e:
    raise RuntimeError(f"system: '{cmd}' failed with exit code {e.returncode}\n{(e.output or b'').decode().strip()}") from e
  if DEBUG >= 1: print(f"system: '{cmd}' returned {len(ret)} bytes in {(time.perf_counter() - st)*1e3:.2f} ms")
  return ret

def cpu_objdump(lib:bytes, objdump_tool="objdump"):
  import tempfile
  with tempfile.NamedTemporaryFile(delete=True) as f:
    pathlib.Path(f.name).write_bytes(lib)
    print(system(f"{objdump_tool} -d {f.name}"))

def wait_cond(cb, *args, value=True, timeout_ms=10000, msg="") -> bool:
  """Busy-waits until cb(*args) == value; TimeoutError after timeout_ms."""
  deadline = time.perf_counter() + timeout_ms/1000
  val = None
  while time.perf_counter() < deadline:
    if (val := cb(*args)) == value: return val
  raise TimeoutError(f"{msg}. Timed out after {timeout_ms} ms, condition not met: {val} != {value}")

# *** ctypes memory ***

def from_mv(mv:memoryview, to_type:type[ctypes._SimpleCData]=ctypes.c_char) -> ctypes.Array:
  """A ctypes array sharing memory with a writable memoryview."""
  return ctypes.cast(ctypes.addressof(to_type.from_buffer(mv)), ctypes.POINTER(to_type * len(mv))).contents
def to_mv(ptr:int, sz:int) -> memoryview:
  """A byte memoryview of sz bytes at raw address ptr."""
  return memoryview((ctypes.c_uint8 * sz).from_address(ptr)).cast("B")
def mv_address(mv) -> int: return ctypes.addressof(ctypes.c_char.from_buffer(mv))
def to_char_p_p(options:list[bytes], to_type=ctypes.c_char):
  """A C `char**` array of copies of the given byte strings."""
  return (ctypes.POINTER(to_type) * len(options))(*[ctypes.cast(ctypes.create_string_buffer(o), ctypes.POINTER(to_type)) for o in options])
def flat_mv(mv:memoryview) -> memoryview: return mv if len(mv) == 0 else mv.cast("B", shape=(mv.nbytes,))

# *** progress bar ***

def _si(x:float) -> str:
  """Three significant digits with an SI suffix: 1234 -> 1.23k."""
  if x == 0: return "0.00"
  for p, suffix in enumerate(" kMGTPEZY"):
    if x < 999.5 * 1000**p or suffix == "Y":
      v = x / 1000**p
      return f"{v:.{max(0, 2 - int(math.log10(v)) if v >= 1 else 2)}f}" + suffix.strip()
  return str(x)
def _hms(t:float) -> str:
  h, m, s = int(t) // 3600, int(t) % 3600 // 60, int(t) % 60
  return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"

class tqdm(Generic[T]):
  """A minimal stand-in for the tqdm progress bar (same constructor arguments), drawn on stderr."""
  def __init__(self, iterable:Iterable[T]|None=None, desc:str="", disable:bool|None=False, unit:str="it", unit_scale=False,
               total:int|None=None, rate:int=100):
    self.disable = not sys.stderr.isatty() if disable is None else disable
    self.iterable, self.unit, self.unit_scale, self.rate = iterable, unit, unit_scale, rate
    self.t = (len(iterable) if hasattr(iterable, "__len__") else 0) if total is None else total  # type: ignore[arg-type]
    self.st, self.n, self.i, self.skip = time.perf_counter(), 0, -1, 1
    self.set_description(desc)
    self.update(0)
  def __iter__(self) -> Iterator[T]:
    if self.iterable is None: raise TypeError("tqdm needs an iterable to iterate")
    for item in self.iterable:
      yield item
      self.update(1)
    self.update(close=True)
  def __enter__(self): return self
  def __exit__(self, *_): self.update(close=True)
  def set_description(self, desc:str): self.desc = f"{desc}: " if desc else ""
  def update(self, n:int=0, close:bool=False):
    self.n, self.i = self.n + n, self.i + 1
    if self.disable or (not close and self.i % self.skip != 0): return
    elapsed = time.perf_counter() - self.st
    # redraw at most about `rate` times a second
    if elapsed and self.i and self.i/elapsed > self.rate: self.skip = max(int(self.i/elapsed) // self.rate, 1)
    fmt = _si if self.unit_scale else str
    count = f"{fmt(self.n)}/{fmt(self.t)}" if self.t else f"{fmt(self.n)}{self.unit}"
    eta = (f"<{_hms(elapsed*self.t/self.n - elapsed)}" if self.n else "<?") if self.t else ""
    speed = (_si(self.n/elapsed) if self.unit_scale else f"{self.n/elapsed:5.2f}") if self.n and elapsed else "?"
    suffix = f"{count} [{_hms(elapsed)}{eta}, {speed}{self.unit}/s]"
    bar = ""
    if self.t:
      frac = min(self.n/self.t, 1.0)
      import shutil
      width = max(shutil.get_terminal_size().columns - ansilen(self.desc) - len(suffix) - 7, 1)
      bar = f"{100*frac:3.0f}%|{('█'*int(width*frac)).ljust(width)}| "
    print("\r" + self.desc + bar + suffix, flush=True, end="\n" if close else "", file=sys.stderr)
  @classmethod
  def write(cls, s:str): print(f"\r\033[K{s}", flush=True, file=sys.stderr)

def trange(n:int, **kwargs) -> tqdm[int]: return tqdm(range(n), total=n, **kwargs)

class disable_gc(contextlib.ContextDecorator):
  """Turns the garbage collector off inside the block (restoring its previous state after)."""
  # a fresh instance per use, so nested/recursive uses each remember their own previous state
  def _recreate_cm(self): return type(self)()
  def __enter__(self):
    self._was_enabled = gc.isenabled()
    if self._was_enabled: gc.disable()
    return self
  def __exit__(self, *exc):
    if self._was_enabled: gc.enable()

# *** pickling of code objects and modules (so functions can be sent to worker processes) ***

def _reconstruct_code(*args): return types.CodeType(*args)
def _serialize_code(code:types.CodeType):
  # CodeType's constructor argument names map onto co_* attributes, except codestring->co_code and constants->co_consts
  renames = {"codestring": "code", "constants": "consts"}
  params = inspect.signature(types.CodeType).parameters
  return _reconstruct_code, tuple(getattr(code, "co_" + renames.get(p, p)) for p in params)
copyreg.pickle(types.CodeType, _serialize_code)
def _serialize_module(module:types.ModuleType): return importlib.import_module, (module.__name__,)
copyreg.pickle(types.ModuleType, _serialize_module)

class count:
  """A picklable itertools.count."""
  def __init__(self, start:int=0, step:int=1): self.n, self.step = start, step
  def __iter__(self): return self
  def __next__(self) -> int:
    cur, self.n = self.n, self.n + self.step
    return cur
