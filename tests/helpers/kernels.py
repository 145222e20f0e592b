# One Tensor's kernel AST and running an AST lowered as is: for tests that optimize a kernel by hand and check it against numpy.
import numpy as np
from tinygrad import Tensor
from tinygrad.device import Device
from tinygrad.uop.ops import UOp, AxisType
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
