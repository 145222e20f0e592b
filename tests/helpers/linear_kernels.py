# Hand-built linear kernels (the contract in tinygrad/renderer/__init__.py), and running them on a device.
from __future__ import annotations
from typing import Sequence
import numpy as np
from tinygrad.device import Device, Buffer
from tinygrad.dtype import DType, dtypes, AddrSpace, _to_np_dtype
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType

class Linear:
  """Collects UOps in the order they are added, srcs first: building a kernel statement by statement gives a valid linear list."""
  def __init__(self): self.uops: list[UOp] = []
  def add(self, u:UOp) -> UOp:
    seen = set(self.uops)
    for x in u.toposort():
      if x not in seen: self.uops.append(x)
    return u
  def param(self, slot:int, dt:DType, size:int) -> UOp: return self.add(UOp(Ops.PARAM, dt, (UOp.const(size, dtypes.int),), ParamArg(slot, dt)))
  def var(self, name:str, lo:int, hi:int, slot:int=-1) -> UOp:
    v = UOp.variable(name, lo, hi, dtypes.int, param=True)
    return self.add(v if slot == -1 else v.replace(arg=ParamArg(slot, dtypes.int, (lo, hi), 1, name, AddrSpace.ALU)))
  def special(self, n:int, name:str="core_id") -> UOp: return self.add(UOp.special(n, name, dtypes.int))
  def acc(self, slot:int, dt:DType, size:int=1) -> UOp:
    return self.add(UOp(Ops.BUFFER, dt, (UOp.const(size, dtypes.int),), ParamArg(slot, dt, addrspace=AddrSpace.REG)))
  def range(self, end:int|UOp, axis:int, *deps:UOp, axis_type=AxisType.LOOP) -> UOp:
    e = UOp.const(end, dtypes.int) if isinstance(end, int) else end
    return self.add(UOp(Ops.RANGE, dtypes.int, (e, *deps), (axis, axis_type)))
  def end(self, body:UOp, rng:UOp, cond:UOp|None=None) -> UOp:
    return self.add(UOp(Ops.END, dtypes.void, (body, rng) + ((cond,) if cond is not None else ())))
  def store(self, buf:UOp, idx, val:UOp, gate:UOp|None=None) -> UOp: return self.add(buf.index(idx).store(val, gate))
  def load(self, buf:UOp, idx) -> UOp: return self.add(buf.index(idx).load())
  def sink(self, name:str, *srcs:UOp) -> list[UOp]:
    self.add(UOp(Ops.SINK, dtypes.void, srcs, name))
    return self.uops

def c(v, dt:DType=dtypes.int) -> UOp: return UOp.const(v, dt)

def run(device:str, uops:Sequence[UOp], inputs:Sequence[np.ndarray|int], out_dtypes:Sequence[DType], var_vals:dict|None=None) -> list[np.ndarray]:
  """Renders, compiles and runs a kernel whose buffer slots are (outputs..., inputs...); returns the outputs as numpy arrays."""
  dev = Device[device]
  spec = dev.renderer.to_program(uops)
  sizes = {u.arg.slot: u.src[0].arg for u in uops if u.op is Ops.PARAM and u.arg.addrspace is AddrSpace.GLOBAL}
  outs = [Buffer(device, sizes[i], dt).copyin(np.zeros(sizes[i], _np(dt)).data) for i, dt in enumerate(out_dtypes)]
  ins = [Buffer(device, x.size, _from_np(x.dtype)).copyin(np.ascontiguousarray(x).data) for x in inputs]
  dev.run(spec, outs + ins, var_vals)
  return [b.numpy() for b in outs]

def _np(dt:DType): return np.uint16 if dt is dtypes.bfloat16 else _to_np_dtype(dt)
def _from_np(npdt) -> DType:
  return {np.dtype(_to_np_dtype(d)): d for d in (dtypes.bool, *dtypes.ints, dtypes.half, dtypes.float, dtypes.double)}[np.dtype(npdt)]

# ***** sample kernels *****

def add_kernel(n:int) -> list[UOp]:
  k = Linear()
  out, a, b = k.param(0, dtypes.float, n), k.param(1, dtypes.float, n), k.param(2, dtypes.float, n)
  r = k.range(n, 0)
  return k.sink(f"E_{n}", k.end(k.store(out, r, k.load(a, r) + k.load(b, r)), r))

def sum_kernel(rows:int, cols:int) -> list[UOp]:
  """out[i] = sum(a[i*cols:(i+1)*cols]), with a register accumulator the way tinygrad 0.14's codegen lowers REDUCE."""
  k = Linear()
  out, a = k.param(0, dtypes.float, rows), k.param(1, dtypes.float, rows*cols)
  acc = k.acc(0, dtypes.float)
  i = k.range(rows, 0)
  init = k.add(acc.after(i).index(c(0)).store(c(0.0, dtypes.float)))
  j = k.range(cols, 1, i)
  x = k.load(a, i*c(cols) + j)
  cur = acc.after(init, j).index(c(0))
  body = k.add(cur.store(k.add(cur.load()) + x))
  done = k.end(body, j)
  return k.sink(f"r_{rows}_{cols}", k.end(k.add(out.index(i).store(k.add(acc.after(done).index(c(0)).load()))), i))

def var_kernel() -> list[UOp]:
  """out[i] = a[i] * 2 + m for i < n: two int Variables, one as a loop bound."""
  k = Linear()
  out, a = k.param(0, dtypes.float, 10), k.param(1, dtypes.float, 10)
  n, m = k.var("n", 1, 10), k.var("m", 0, 100)
  r = k.range(n, 0)
  return k.sink("E_n", k.end(k.store(out, r, k.load(a, r) * c(2.0, dtypes.float) + k.add(m.cast(dtypes.float))), r))
