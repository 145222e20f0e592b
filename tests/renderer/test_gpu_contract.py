# The GPU part of the linear-UOp contract run for real: SPECIAL gidx/lidx over a launch grid (symbolic sizes too), local memory shared
# by a workgroup and barriers (PYTHON runs a workgroup's threads in lock-step), SPECIAL core_id on CPU and PYTHON, and the codegen pass
# that turns THREAD/GLOBAL/LOCAL ranges into those SPECIALs.
import os
import subprocess
import sys
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tests.helpers.linear_kernels import run
from tinygrad.device import Device, Buffer
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.codegen import get_program, lower_ast
from tinygrad.uop.ops import KernelInfo
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, ParamArg, AxisType

def P(slot, n, dt=dtypes.float): return UOp(Ops.PARAM, dt, (UOp.const(n, dtypes.int),), ParamArg(slot, dt))
def i(v): return UOp.const(v, dtypes.int)
def alu(op, a, b): return UOp(op, a.dtype, (a, b))
def special(name, n): return UOp(Ops.SPECIAL, dtypes.int, (n if isinstance(n, UOp) else i(n),), name)
def linear(*stores, name="k"): return list(UOp(Ops.SINK, dtypes.void, stores, name).toposort())

def group_sums(groups, threads:int, total:int) -> list[UOp]:
  """out[g] = sum of in[g*T .. g*T+T-1]: every thread puts its element into local memory, a barrier, then thread 0 adds them up."""
  out, inp = P(0, total // threads), P(1, total)
  g, lid = special("gidx0", groups), special("lidx0", threads)
  tmp = UOp(Ops.BUFFER, dtypes.float, (i(threads),), ParamArg(0, dtypes.float, addrspace=AddrSpace.LOCAL))
  st = tmp.index(lid).store(inp.index(alu(Ops.ADD, alu(Ops.MUL, g, i(threads)), lid)).load())
  after = tmp.after(UOp(Ops.BARRIER, dtypes.void, (st,)))
  acc = after.index(i(0)).load()
  for j in range(1, threads): acc = alu(Ops.ADD, acc, after.index(i(j)).load())
  return linear(out.index(g).store(acc, alu(Ops.CMPEQ, lid, i(0)).replace(dtype=dtypes.bool)), name="group_sums")

def test_python_runs_a_workgroup_in_lockstep():
  x = np.arange(32, dtype=np.float32)
  out, = run("PYTHON", group_sums(4, 8, 32), [x], [dtypes.float])
  np.testing.assert_array_equal(out, x.reshape(4, 8).sum(1))

def test_python_symbolic_grid():
  n = UOp.variable("n", 1, 4, dtypes.int, param=True)
  x = np.arange(32, dtype=np.float32) + 1
  out, = run("PYTHON", group_sums(n, 8, 32), [x], [dtypes.float], {"n": 3})
  np.testing.assert_array_equal(out, np.append(x.reshape(4, 8).sum(1)[:3], 0))  # only 3 workgroups ran

@pytest.mark.parametrize("device", DEVICES)
def test_special_core_id(device):
  # out[core_id*8 + r] = 2 * in[...]: 4 launches, each its own slice
  out, inp = P(0, 32), P(1, 32)
  core = special("core_id", 4)
  r = UOp(Ops.RANGE, dtypes.int, (i(8),), (0, AxisType.LOOP))
  idx = alu(Ops.ADD, alu(Ops.MUL, core, i(8)), r)
  st = out.index(idx).store(alu(Ops.MUL, inp.index(idx).load(), UOp.const(2.0, dtypes.float)))
  uops = linear(UOp(Ops.END, dtypes.void, (st, r)), name="threads")
  spec = Device[device].renderer.to_program(uops)
  assert spec.global_size == (4, 1, 1) and spec.var_names == ("core_id",) and spec.core_id == 0
  x = np.arange(32, dtype=np.float32)
  np.testing.assert_array_equal(run(device, uops, [x], [dtypes.float])[0], 2 * x)

def _ast(kinds:tuple[AxisType, ...], sizes:tuple[int, ...]) -> UOp:
  """out[flat index] = in[flat index] + 1 over ranges of the given kinds."""
  n = int(np.prod(sizes))
  out, inp = P(0, n), P(1, n)
  rs = [UOp(Ops.RANGE, dtypes.int, (i(s),), (ax, k)) for ax, (k, s) in enumerate(zip(kinds, sizes))]
  idx = rs[0]
  for r, s in zip(rs[1:], sizes[1:]): idx = alu(Ops.ADD, alu(Ops.MUL, idx, i(s)), r)
  return UOp(Ops.SINK, dtypes.void, (out.index(idx).store(alu(Ops.ADD, inp.index(idx).load(), UOp.const(1.0, dtypes.float))),), KernelInfo("k"))

def _run_spec(device, spec, n):
  x = np.arange(n, dtype=np.float32)
  bufs = [Buffer(device, n, dtypes.float).copyin(np.zeros(n, np.float32).data), Buffer(device, n, dtypes.float).copyin(x.data)]
  Device[device].run(spec, bufs)
  np.testing.assert_array_equal(bufs[0].numpy(), x + 1)

@pytest.mark.parametrize("device", DEVICES)
def test_thread_range_becomes_core_id(device):
  ast = _ast((AxisType.THREAD, AxisType.LOOP), (3, 10))
  k = lower_ast(ast)
  assert [u.arg for u in k.uops if u.op is Ops.SPECIAL] == ["core_id"] and sum(u.op is Ops.RANGE for u in k.uops) == 1
  spec = get_program(ast, Device[device].renderer)
  assert spec.global_size == (3, 1, 1) and spec.core_id is not None
  _run_spec(device, spec, 30)

def test_global_and_local_ranges_become_gpu_dims():
  ast = _ast((AxisType.GLOBAL, AxisType.GLOBAL, AxisType.LOCAL), (2, 3, 4))
  spec = get_program(ast, Device["PYTHON"].renderer)
  assert sorted(u.arg for u in spec.uops if u.op is Ops.SPECIAL) == ["gidx0", "gidx1", "lidx0"]
  assert spec.global_size == (2, 3, 1) and spec.local_size == (4, 1, 1) and not any(u.op is Ops.RANGE for u in spec.uops)
  _run_spec("PYTHON", spec, 24)
  with pytest.raises(ValueError, match="4 AxisType.GLOBAL ranges, more than the 3 launch dims"):
    lower_ast(_ast((AxisType.GLOBAL,) * 4, (2, 2, 2, 2)))

def test_pass_names_in_the_rewrite_log():
  code = """
from tinygrad.uop.ops import track_rewrites_log
from tinygrad import Tensor
(Tensor.arange(12).reshape(3, 4).sum(1) + 1).realize()
print(sorted({r.name for r in track_rewrites_log}))
"""
  env = {**os.environ, "TRACK_MATCH_STATS": "2", "DEV": "PYTHON"}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
  for name in ("decompositions", "constant folding", "launch dims", "end loops", "reduce to accumulator"): assert repr(name) in out, out

def test_optimizer_reads_renderer_capabilities():
  from tinygrad.codegen.opt.heuristic import optimize_ast
  from tinygrad.codegen.opt.kernel import ranges_of
  from tinygrad.renderer.cstyle import ClangRenderer
  class Serial(ClangRenderer): has_threads = False
  class NoVectors(ClangRenderer): supports_float4 = False
  class TwoCores(ClangRenderer): global_max = (2, 0, 0)
  ast = _ast((AxisType.LOOP, AxisType.LOOP), (256, 1024))
  def kinds(ren): return [(u.arg[-1], u.src[0].arg) for u in ranges_of(optimize_ast(ast, ren))]
  # threads: a THREAD range of at most global_max[0] launches; vectors: an UPCAST range (its lanes become SHRINK accesses)
  assert kinds(TwoCores()) == [(AxisType.THREAD, 2), (AxisType.LOOP, 128), (AxisType.LOOP, 256), (AxisType.UPCAST, 4)]
  assert kinds(Serial()) == [(AxisType.LOOP, 256), (AxisType.LOOP, 256), (AxisType.UPCAST, 4)]
  assert AxisType.UPCAST not in [k for k, _ in kinds(NoVectors())]
  assert optimize_ast(ast.replace(arg=KernelInfo()), TwoCores()).arg.name == "E_2_128_256_4"   # the naming is the subject: read off the ranges
  assert optimize_ast(ast, TwoCores()).arg.name == "k"   # a name the kernel's author gave is kept (as in 0.14)
  assert optimize_ast(ast, None) is ast
