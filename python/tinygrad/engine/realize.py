"""Running a schedule: each ScheduleItem is lowered (tinygrad.codegen), rendered, compiled (cached by the device) and launched."""
from __future__ import annotations
import time
from tinygrad.helpers import DEBUG, NOOPT, BEAM, PROFILE, GlobalCounters, colored, BoundedCache, ansipad, time_to_str, profile_event
from tinygrad.device import Device, ProgramLoader
from tinygrad.uop.ops import Ops
from tinygrad.schedule import ScheduleItem
from tinygrad.uop.ops import UOp
from tinygrad.codegen import to_program, render_kernel
from tinygrad.renderer import Estimates
from tinygrad.schedule.buffers import buffer_of

# (kernel AST, device, NOOPT, BEAM, the renderer, its pre_matcher and has_local) -> ProgramSpec: the codegen optimizes unless NOOPT, searches
# with BEAM; DEV=NULL:CUDA renders the NULL device's kernels with another renderer than NULL; a user's pre_matcher changes the kernel;
# PYTHON_LOCALS switches the PYTHON renderer's local dims
_specs: dict = BoundedCache(4096)

# TinyJit (engine/jit.py) puts its capture here while the function it jits runs: every kernel and copy run_schedule runs is handed to
# capturing[-1] first (add_kernel / add_copy), before it runs, so the JIT records exactly what ran and replays it
capturing: list = []

def get_spec(si:ScheduleItem, device:str):
  if si.ast.op is Ops.PROGRAM: return si.ast.arg   # lowered already (compile_linear, codegen.to_program)
  dev = Device[device]
  ren = dev.renderer
  if (spec := _specs.get(key := (si.ast, device, NOOPT.value, BEAM.value, ren, ren.pre_matcher, ren.has_local))) is None:
    k, spec = render_kernel(si.ast, device)
    if DEBUG >= 3:
      print(si.ast)
      for i, u in enumerate(k.uops): print(f"{i:4d} {str(u.op):20s} {str(u.dtype):20s} {u.arg!r}")
    _specs[key] = spec
    if DEBUG >= 3: print(f"{spec.name} opts: {list(spec.applied_opts)}")
    if DEBUG >= 4: print(spec.src)
  return spec

# the DEBUG=2 line of one launch, in tinygrad 0.14's format: the head green on a kernel's first run, magenta on a TinyJit replay; the
# launch's time / the total so far, then its rates (ops, memory | the loads' bytes) from the kernel's estimates
_ran_before: set[str] = set()
def launch_line(device:str, name:str, nargs:int, et:float, ops:int=0, mem:int=0, lds:int=0, jitted:bool=False) -> str:
  head = colored(f"*** {device[:7]:7s} {GlobalCounters.kernel_count:4d}", "magenta" if jitted else None if name in _ran_before else "green")
  _ran_before.add(name)
  rate = 1 / max(et, 1e-20)
  flops = f"{ops*rate*1e-9:7.0f} GFLOPS" if ops*rate < 1e14 else colored(f"{ops*rate*1e-12:7.0f} TFLOPS", "green")
  bw = f"{mem*rate*1e-9:4.0f}|{lds*rate*1e-9:<6.0f} GB/s" if mem*rate < 1e13 and lds*rate < 1e15 else \
    colored(f"{mem*rate*1e-12:4.0f}|{lds*rate*1e-12:<6.0f} TB/s", "green")
  tm = colored(time_to_str(et, w=9), "yellow" if et > 0.01 else None)
  return (f"{head} {ansipad(name, 46)} arg {nargs:2d} mem {GlobalCounters.mem_used/1e9:6.2f} GB tm {tm}/{GlobalCounters.time_sum_s*1e3:9.2f}ms "
          f"({flops} {bw})")
def kernel_name(name:str) -> str: return colored(name, "yellow" if name.startswith("r") else "cyan")

_NOT_KERNELS = (Ops.COPY, Ops.ALLREDUCE)   # schedule items that run no kernel: a copy, a device collective

def run_all_reduce(op:str, bufs:list) -> None:
  """A device collective's all-reduce: bufs are the outputs (one per device), then the inputs; the first device's Compiled runs it."""
  n = len(bufs) // 2
  for b in bufs[:n]: b.ensure_allocated().before_write()
  Device[bufs[0].device].all_reduce(op, bufs[:n], [b.ensure_allocated() for b in bufs[n:]])

def run_schedule(schedule:list[ScheduleItem], var_vals:dict[str, int]|None=None) -> None:
  """Runs the kernels in order, counting them in GlobalCounters; var_vals ({name: value}) are the values of the symbolic Variables the
  kernels take at launch. DEBUG=1: a summary line, 2: a line per kernel, 3: the kernel
  AST and its linear UOps, 4: the C source (3 and 4 when a kernel is first compiled)."""
  if not schedule: return
  st_all, ops0, mem0 = time.perf_counter(), GlobalCounters.global_ops, GlobalCounters.global_mem
  # lower and render every kernel before running any: each device compiles its new kernels in a few batches, the first ones while the
  # later kernels are still being lowered (ProgramLoader)
  loaders: dict[str, ProgramLoader] = {}
  for si in schedule:
    if si.ast.op in _NOT_KERNELS: continue
    if (loader := loaders.get(device := si.bufs[0].device)) is None: loader = loaders[device] = Device[device].loader()
    loader.add(get_spec(si, device))
  for loader in loaders.values(): loader.finish()
  for si in schedule:
    device = si.bufs[0].device
    if si.ast.op is Ops.COPY:  # a copy between devices (Tensor.to): no kernel, not counted in kernel_count
      if capturing: capturing[-1].add_copy(si.bufs[0], si.bufs[1])
      st = time.perf_counter()
      si.bufs[0].copy_from(si.bufs[1].ensure_allocated())   # the source may be a Tensor.empty never used before
      et = time.perf_counter() - st
      if PROFILE: profile_event(device, si.name, "copy", st, st + et)
      with GlobalCounters.lock: GlobalCounters.time_sum_s += et
      if DEBUG >= 2: print(launch_line(device, colored(si.name, "green"), len(si.bufs), et, mem=si.bufs[0].nbytes))
      continue
    if si.ast.op is Ops.ALLREDUCE:  # a device collective (schedule/allreduce.py): bufs are the outputs, then the inputs
      if capturing: capturing[-1].add_all_reduce(si.ast.arg.op.name, si.bufs)
      st = time.perf_counter()
      run_all_reduce(si.ast.arg.op.name, si.bufs)
      et = time.perf_counter() - st
      if PROFILE: profile_event(device, si.name, "copy", st, st + et)
      with GlobalCounters.lock: GlobalCounters.time_sum_s += et
      if DEBUG >= 2: print(launch_line(device, colored(si.name, "green"), len(si.bufs), et, mem=si.bufs[0].nbytes * len(si.bufs)))
      continue
    spec = get_spec(si, device)
    dev = Device[device]
    if capturing: capturing[-1].add_kernel(dev, spec, si.bufs)
    timed = DEBUG >= 2
    st = time.perf_counter()
    et = dev.run(spec, si.bufs, var_vals, wait=timed or bool(PROFILE))
    if et is None: et = time.perf_counter() - st
    if PROFILE: profile_event(device, spec.name, "kernel", st, st + et)
    # a symbolic kernel is counted at its Variables' upper bounds (spec.estimates, computed once); walking its UOps again at this
    # launch's values costs more than a small kernel runs, so only the per-kernel DEBUG line does
    est = spec.estimate(var_vals) if timed and var_vals and spec.vars else spec.estimates
    with GlobalCounters.lock:
      GlobalCounters.kernel_count += 1
      GlobalCounters.global_ops += est.ops
      GlobalCounters.global_mem += est.mem
      GlobalCounters.time_sum_s += et
    if DEBUG >= 2: print(launch_line(device, kernel_name(spec.name), len(si.bufs), et, est.ops, est.mem, est.lds))
  if DEBUG >= 1:
    et_all = time.perf_counter() - st_all
    nk = sum(1 for si in schedule if si.ast.op not in _NOT_KERNELS)
    copies = f" and {len(schedule) - nk} cop{'ies' if len(schedule) - nk != 1 else 'y'}" if len(schedule) != nk else ""
    print(f"ran {nk} kernel{'s' if nk != 1 else ''}{copies} in {et_all*1e3:.2f} ms, {GlobalCounters.global_ops - ops0} ops, "
          f"{GlobalCounters.global_mem - mem0} bytes (total {GlobalCounters.kernel_count} kernels, {GlobalCounters.time_sum_s*1e3:.2f} ms)")

def run_linear(linear:UOp, var_vals:dict[str, int]|None=None) -> None:
  """Runs a LINEAR UOp (Tensor.schedule_linear / linear_with_vars): its CALLs in order, as run_schedule runs ScheduleItems."""
  if linear.op is not Ops.LINEAR: raise ValueError(f"run_linear needs a LINEAR UOp (from Tensor.schedule_linear), got {linear.op}")
  run_schedule([ScheduleItem.from_call(c) for c in linear.src], var_vals)

def compile_linear(linear:UOp) -> UOp:
  """tinygrad 0.14's: a LINEAR (Tensor.schedule_linear) with each kernel's AST lowered for its device into a PROGRAM (codegen.to_program),
  the way run_linear would lower it; copies stay as they are. run_linear runs the result."""
  if linear.op is not Ops.LINEAR: raise ValueError(f"compile_linear needs a LINEAR UOp (from Tensor.schedule_linear), got {linear.op}")
  def lower(call:UOp) -> UOp:
    if call.src[0].op is not Ops.SINK: return call
    return call.replace(src=(to_program(call.src[0], Device[buffer_of(call.src[1]).device].renderer), *call.src[1:]))
  return linear.replace(src=tuple(lower(c) for c in linear.src))

def estimate_uop(call:UOp) -> Estimates:
  """tinygrad 0.14's: what one CALL of a schedule costs (ops, bytes loaded and stored, bytes of memory touched): a kernel's as lowered for
  its device (the Variables at their upper bounds), a copy's its bytes, a device collective's the bytes of its inputs and outputs."""
  if call.op is not Ops.CALL or not call.src: raise ValueError(f"estimate_uop needs a CALL UOp of a schedule, got {call.op}")
  if (ast := call.src[0]).op is Ops.COPY:
    nbytes = buffer_of(call.src[1]).nbytes
    return Estimates(lds=nbytes, mem=nbytes)
  if ast.op is Ops.ALLREDUCE:   # each device reads its input and writes its output
    nbytes = sum(buffer_of(b).nbytes for b in call.src[1:])
    return Estimates(lds=nbytes, mem=nbytes)
  if ast.op in (Ops.SINK, Ops.PROGRAM):
    si = ScheduleItem.from_call(call)
    return get_spec(si, si.bufs[0].device).estimates
  return Estimates()
