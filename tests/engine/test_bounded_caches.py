# Caches that outlive a call are bounded (issue 9 item 7): a long-running process that keeps building new kernels must not keep
# every kernel AST, source and binary it ever made.
import threading
from tinygrad.helpers import BoundedCache
from tinygrad.device import Compiler
import tinygrad.engine.realize as realize

def test_bounded_cache_drops_least_recent():
  c = BoundedCache(3)
  for i in range(3): c[i] = str(i)
  assert c.get(0) == "0"          # 0 is now the most recent
  c[3] = "3"                      # evicts 1, the least recent
  assert list(c) == [2, 0, 3] and c.get(1) is None and c.get(1, "x") == "x"
  c[2] = "two"                    # an update is a use
  c[4] = "4"
  assert list(c) == [3, 2, 4] and len(c) == 3

def test_bounded_cache_threads():
  c = BoundedCache(64)
  def work(k):
    for i in range(5000):
      c[(k, i % 100)] = i
      c.get((k, (i * 7) % 100))
  ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for t in ts: t.start()
  for t in ts: t.join()
  assert len(c) <= 64

def test_compiler_memory_cache_is_bounded():
  comp = Compiler()
  comp._mem.maxsize = 8
  srcs = [f"kernel {i}" for i in range(20)]
  assert comp.compile_cached_many(srcs) == [s.encode() for s in srcs]   # results survive evictions inside one call
  assert len(comp._mem) == 8
  assert comp.compile_cached(srcs[-1]) == srcs[-1].encode() and comp.stats["mem_hits"] == 1

def test_program_spec_cache_is_bounded():
  assert isinstance(realize._specs, BoundedCache) and realize._specs.maxsize > 0
