# The DISK device: a file as a device ("DISK:/path/to/file"). A buffer is a byte range of the file, read and written through one shared
# map of it. It runs no kernels (no renderer): tensors on it are views of its bytes that are copied to and from other devices.
# Reading never changes the file: a missing file, a directory or a range past the end is an error naming the file. Writing creates the
# file, and grows it to the whole buffer being written into (a new Tensor.empty(n, device="disk:...") file holds n elements).
from __future__ import annotations
import contextlib
import mmap
import os
import stat
from tinygrad.device import Compiled, Allocator, BufferSpec

# reads copy this much at a time, then drop those pages of the map from the process: the file's pages stay in the OS cache, and the
# process holds one copy of the data (the destination), not two
READ_CHUNK = 64 << 20

class DiskBuffer:
  """`size` bytes at byte `offset` of the file; `extent`: the end of the buffer it is a view of (what a write makes the file hold)."""
  __slots__ = ("offset", "size", "extent")
  def __init__(self, offset:int, size:int, extent:int): self.offset, self.size, self.extent = offset, size, extent
  def __repr__(self): return f"<DiskBuffer {self.size} bytes at {self.offset}>"

class DiskAllocator(Allocator['DiskDevice']):
  counts_memory = False   # the bytes are the file's, not memory
  def _alloc(self, size:int, options:BufferSpec) -> DiskBuffer:
    self.dev.refcount += 1
    return DiskBuffer(0, size, size)
  def _free(self, opaque:DiskBuffer, options:BufferSpec):
    self.dev.refcount -= 1
    if self.dev.refcount == 0: self.dev.close()
  def _offset(self, buf:DiskBuffer, size:int, offset:int) -> DiskBuffer: return DiskBuffer(buf.offset + offset, size, buf.extent)
  def _copyin(self, dest:DiskBuffer, src:memoryview):
    mem = self.dev.mapping(max(dest.extent, dest.offset + len(src)), write=True)
    mem[dest.offset:dest.offset+len(src)] = src
  def _copyout(self, dest:memoryview, src:DiskBuffer):
    n = len(dest)
    mem = self.dev.mapping(src.offset + n, write=False)
    for off in range(0, n, READ_CHUNK):
      end = min(n, off + READ_CHUNK)
      dest[off:end] = mem[src.offset+off:src.offset+end]
      self.dev.forget(src.offset + off, src.offset + end)

class DiskDevice(Compiled):
  def __init__(self, device:str):
    self.filename = device.split(":", 1)[1] if ":" in device else ""
    self.fd: int|None = None
    self.writable = False
    self.mem: mmap.mmap|None = None
    self.refcount = 0   # allocated buffers: the file is closed when the last one is freed
    super().__init__(device, DiskAllocator(self), [], None)

  def _check_path(self, write:bool) -> None:
    if not self.filename: raise ValueError(f"{self.device}: a DISK device needs a file name (DISK:/path/to/file)")
    try: st = os.stat(self.filename)
    except FileNotFoundError:
      if write: return
      raise FileNotFoundError(f"{self.device}: no file {self.filename!r} to read") from None
    if stat.S_ISDIR(st.st_mode): raise IsADirectoryError(f"{self.device}: {self.filename!r} is a directory, not a file")

  def _open(self, write:bool) -> int:
    if self.fd is not None and (self.writable or not write) and self._same_file(): return self.fd
    self._check_path(write)
    fd = os.open(self.filename, os.O_RDWR | os.O_CREAT, 0o644) if write else os.open(self.filename, os.O_RDONLY)
    self.close()
    self.fd, self.writable = fd, write
    return fd

  def _same_file(self) -> bool:
    # the path may name another file since it was opened (replaced, as safe_save replaces a file): then it is opened again
    try: st, cur = os.stat(self.filename), os.fstat(self.fd)   # type: ignore[arg-type]
    except OSError: return False
    return (st.st_ino, st.st_dev) == (cur.st_ino, cur.st_dev)

  def mapping(self, end:int, write:bool) -> memoryview:
    """A map of the file's first `end` bytes or more (write: the file is created or grown to `end` bytes first)."""
    fd = self._open(write)
    size = os.fstat(fd).st_size
    if size < end:
      if not write:
        raise ValueError(f"{self.device}: reading {end} bytes of file {self.filename!r}, which has {size} bytes (a size or offset past its end)")
      os.ftruncate(fd, size := end)
    if end == 0: return memoryview(b"")
    # the file may have changed size since it was mapped: map it again (touching a map past the end of its file kills the process)
    if self.mem is None or len(self.mem) != size:
      self.mem = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ)
    return memoryview(self.mem)

  def forget(self, start:int, end:int) -> None:
    """Drops the pages of [start, end) from this process's map (they stay in the file and the OS cache)."""
    if self.mem is None or not hasattr(self.mem, "madvise"): return
    start -= start % mmap.PAGESIZE
    with contextlib.suppress(OSError, ValueError): self.mem.madvise(mmap.MADV_DONTNEED, start, end - start)

  def close(self) -> None:
    # a memoryview of the map may still be alive (a zero-copy read): dropping the reference closes it once that is gone
    self.mem = None
    if self.fd is not None:
      os.close(self.fd)
      self.fd = None
