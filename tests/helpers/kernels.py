# One Tensor's kernel AST and running an AST lowered as is: for tests that optimize a kernel by hand and check it against numpy.
from collections import Counter
import numpy as np
from tinygrad import Tensor
from tinygrad.device import Device
from tinygrad.dtype import AddrSpace
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.codegen import lower_ast
from tinygrad.codegen.opt.kernel import ranges_of, range_size

def rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def ast_of(t:Tensor) -> tuple[UOp, list]:
  """The AST and buffers of the one kernel `t` schedules to."""
  items, _ = t.schedule()
  assert len(items) == 1
  return items[0].ast, items[0].bufs

def kinds(ast:UOp) -> list[tuple[AxisType, int]]: return [(r.arg[-1], range_size(r)) for r in ranges_of(ast)]

def run(ast:UOp, bufs:list, device:str) -> np.ndarray:
  """Lowers an (already optimized) AST with no further optimizations, renders and runs it on the schedule item's buffers."""
  spec = Device[device].renderer.to_program(lower_ast(ast).uops)
  Device[device].run(spec, bufs)
  return bufs[0].numpy()

# ***** what a lowered (linear) kernel does, read off its UOps: for tests of optimizations that must not depend on kernel names or
# on the C renderer's spelling *****

def loop_sizes(uops) -> list[int|UOp]:
  """The trip count of each loop (RANGE) of a linear kernel, in program order."""
  return [u.src[0].arg if u.src[0].op is Ops.CONST else u.src[0] for u in uops if u.op is Ops.RANGE]

def register_sizes(uops) -> list[int]:
  """The element count of each register buffer (the accumulators)."""
  return [u.src[0].arg for u in uops if u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.REG]

def _slot(buf:UOp) -> int|str:
  while buf.op is Ops.AFTER: buf = buf.src[0]
  return "reg" if buf.op is Ops.BUFFER else buf.arg.slot

def accesses(uops) -> Counter:
  """{(LOAD or STORE, buffer slot or "reg", lanes): how many} over the memory accesses of a linear kernel (a SHRINK access is a
  vector of its width, an INDEX one a scalar)."""
  out: Counter = Counter()
  for u in uops:
    if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op in (Ops.SHRINK, Ops.INDEX):
      idx = u.src[0]
      out[(u.op.name, _slot(idx.src[0]), idx.src[2].arg if idx.op is Ops.SHRINK else 1)] += 1
  return out

def vector_accesses(uops) -> Counter:
  """accesses() of more than one lane."""
  return Counter({k: v for k, v in accesses(uops).items() if k[2] > 1})
