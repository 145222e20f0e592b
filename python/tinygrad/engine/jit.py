"""TinyJit: capture the kernels a function runs, then replay them on new inputs for the cost of their launches.

The first call runs the function as it is (compiling its kernels); the second runs it again while engine/realize.py hands every kernel
and copy it runs to the capture (`realize.capturing`); later calls check the inputs against the capture and replay the captured
launches with the new inputs' buffers swapped in: no tracing, scheduling, codegen or cache lookups, a loop over loaded programs."""
from __future__ import annotations
import functools
import struct
import time
import weakref
from typing import Any, Callable, Generic, TypeVar
from tinygrad.helpers import DEBUG, JIT, BEAM, PROFILE, Context, GlobalCounters, colored, getenv, profile_event
from tinygrad.device import Buffer, Compiled, Device, Program
from tinygrad.uop import GroupOp
from tinygrad.uop.ops import UOp, Ops
from tinygrad.renderer import ProgramSpec
from tinygrad.schedule.buffers import buffer_of, new_buffer, realized_view, has_buffer
from tinygrad.schedule import unbind_arg
from tinygrad.engine import realize
from tinygrad.tensor import Tensor
from tinygrad.tensor.random import advance_rng_counter
from tinygrad.tensor.autograd import live_tensors
from tinygrad.engine.memory import memory_planner
from tinygrad.dtype import dtypes

__all__ = ["TinyJit", "JitError", "CapturedJit", "ExecItem"]

class JitError(Exception):
  """A TinyJit was used in a way whose replay would not compute what the function computes; the message says what to do instead."""

ReturnType = TypeVar("ReturnType")

# ***** the captured launches *****

class ExecItem:
  """One captured launch: a kernel (prg, the loaded Program of spec), a copy (prg and spec None: bufs[0] <- bufs[1]) or a device
  collective's all-reduce (all_reduce its op: the first half of bufs <- the second), on `bufs` in argument order. A memory planner may
  put other Buffers into `bufs` (same size and dtype), then call CapturedJit.relink()."""
  __slots__ = ("prg", "spec", "bufs", "all_reduce")
  def __init__(self, prg:Program|None, spec:ProgramSpec|None, bufs:list[Buffer], all_reduce:str|None=None):
    self.prg, self.spec, self.bufs, self.all_reduce = prg, spec, bufs, all_reduce
  @property
  def outs(self) -> list[Buffer]:
    """The buffers this launch writes."""
    if self.all_reduce is not None: return self.bufs[:len(self.bufs) // 2]
    if self.spec is None: return [self.bufs[0]]
    return [b for slot, b in zip(self.spec.globals, self.bufs) if slot in self.spec.outs]
  def __repr__(self): return f"<ExecItem {self.spec.name if self.spec is not None else 'copy'} on {len(self.bufs)} buffers>"

def _copy(dst:Buffer, src:Buffer) -> None: dst.copy_from(src.ensure_allocated())

def _view_chain(u:UOp) -> tuple[UOp|None, tuple]:
  """The BUFFER UOp that u views (through movement ops and realized marks) and the movement ops from it to u as (op, arg) pairs;
  (None, ()) when u still has to be computed."""
  chain = []
  while True:
    if (v := realized_view(u)) is not None: u = v
    if u.op is Ops.BUFFER: return (u if has_buffer(u) else None), tuple(reversed(chain))
    if u.op not in GroupOp.Movement: return None, ()
    chain.append((u.op, u.arg))
    u = u.src[0]

def _rebuild(base:UOp, chain:tuple, var_vals:dict[str, int]) -> UOp:
  """The view `chain` (unbound, as _unbind_chain made it) of base, its Variables bound to this call's values."""
  for op, arg in chain: base = base._mop(op, _bind_arg(arg, var_vals))
  return base

def _unbind_chain(chain:tuple, var_vals:dict[str, int]) -> tuple:
  # a view's symbolic sizes hold the bound Variables of one call: unbound, a view is the same at every call (its values go to var_vals)
  memo: dict[UOp, UOp] = {}
  return tuple((op, unbind_arg(arg, var_vals, memo)) for op, arg in chain)

def _bind_arg(arg, var_vals:dict[str, int]):
  if isinstance(arg, tuple): return tuple(_bind_arg(a, var_vals) for a in arg)
  if not isinstance(arg, UOp): return arg
  # walk: each Variable is replaced once (its bound form holds it)
  return arg.substitute({v: v.bind(var_vals[v.expr]) for v in arg.variables()}, walk=True)

class _Input:
  """A tensor argument of one call: its base BUFFER UOp and Buffer, and what the captured kernels depend on (the signature)."""
  __slots__ = ("name", "tensor", "uop", "buf", "sig", "var_vals")
  def __init__(self, name, t:Tensor):
    if t.dtype in dtypes.weaks:
      raise JitError(f"TinyJit input {name!r} is a Python constant ({t.dtype}) without storage: pass it with a dtype "
                     f"(Tensor(value, dtype=dtypes.float32)) so each call's value is read from a buffer")
    base, chain = _view_chain(t.uop)
    if base is None:   # an unrealized input (a computation or a constant): realize it into a buffer of its own, as a plain call would
      t.replace(t.contiguous().realize())
      base, chain = _view_chain(t.uop)
      if base is None: raise JitError(f"TinyJit input {name!r} could not be realized into a buffer; pass t.contiguous().realize()")
    self.name, self.tensor, self.uop, self.buf = name, t, base, buffer_of(base).ensure_allocated()
    # a plain contiguous tensor (only reshapes of a whole buffer) is the same to the kernels whatever reshapes it went through
    plain = all(op is Ops.RESHAPE for op, _ in chain) and self.buf.size == t.numel()
    # a symbolic shape is compared unbound: the values of its Variables are the call's, like a bound Variable argument's
    self.var_vals: dict[str, int] = {}
    ((_, shape),) = _unbind_chain(((None, t.shape),), self.var_vals)
    self.sig = (shape, t.dtype, t.device, None if plain else (_unbind_chain(chain, self.var_vals), self.buf.size, self.buf.dtype))

def _describe(sig) -> str:
  shape, dtype, device, view = sig
  return f"shape {shape} dtype {dtype} device {device}" + ("" if view is None else f" (a view of a {view[2]} buffer of {view[1]}: {view[0]})")

_SCALARS = (int, float, bool, str, bytes, type(None))

def _collect_args(args:tuple, kwargs:dict) -> tuple[list, list[_Input], dict[str, int], list]:
  """(names, inputs, var_vals, constants): the tensors among the arguments (positional, keyword sorted by name, and those directly
  inside list/tuple/dict arguments), the values of bound Variables, and the Python scalars (frozen into the capture)."""
  names: list = []
  tensors: list[tuple[Any, Tensor]] = []
  var_vals: dict[str, int] = {}
  consts: list = []
  for name, x in list(enumerate(args)) + sorted(kwargs.items()):
    if isinstance(x, Tensor): tensors.append((name, x))
    elif isinstance(x, UOp) and x.is_bound_var:
      var, val = x.unbind()
      var_vals[var.expr] = val
      names.append(("var", name, var.expr))
    elif isinstance(x, (list, tuple, dict)):
      for k, y in (x.items() if isinstance(x, dict) else enumerate(x)):
        if isinstance(y, Tensor): tensors.append(((name, k), y))
    elif isinstance(x, _SCALARS): consts.append((name, type(x), repr(x)))   # repr: a NaN equals itself
  names += [name for name, _ in tensors]
  inputs = [_Input(name, t) for name, t in tensors]
  seen: dict[Buffer, Any] = {}
  for i in inputs:
    if (other := seen.setdefault(i.buf, i.name)) is not i.name:
      raise JitError(f"TinyJit inputs {other!r} and {i.name!r} are the same buffer (or views of one): the replay swaps buffers per "
                     f"input, so pass a .clone() of one of them")
    for k, val in i.var_vals.items():
      if var_vals.setdefault(k, val) != val:
        raise JitError(f"TinyJit input {i.name!r} has Variable {k!r} bound to {val}, another argument binds it to {var_vals[k]}")
  return names, inputs, var_vals, consts

# how a replay fills one buffer argument from the call's buffers: (source index, view (offset, size, dtype) or None)
class _Patch:
  __slots__ = ("args", "pos", "src", "view", "conv")
  def __init__(self, args:list, pos:int, src:int, view:tuple|None, conv:Callable):
    self.args, self.pos, self.src, self.view, self.conv = args, pos, src, view, conv

class CapturedJit(Generic[ReturnType]):
  """The captured form of a TinyJit call: `items` (ExecItems in run order) on the capture's buffers. `inputs` are the capture's input
  Buffers (swapped for each call's), `fresh` the output Buffers that get a new Buffer at each call (so a returned tensor is never
  overwritten by a later call), `rng` the random-number counters that each call advances as a plain call would, `persistent` the
  buffers that were allocated before the capture (parameters, optimizer state): a memory planner may share the memory of the other
  buffers of `items` except inputs, fresh outputs, rng buffers and buffers live tensors still hold (a .grad made during the capture)."""
  def __init__(self, items:list[ExecItem], inputs:list[Buffer], input_sigs:list, names:list, consts:list, ret:Any, ret_plan:dict,
               fresh:list[Buffer], rng:list[tuple[str, int, Buffer, Buffer]], persistent:set[Buffer]):
    self.items, self.inputs, self.input_sigs, self.names, self.consts = items, inputs, input_sigs, names, consts
    self.ret, self.ret_plan, self.fresh, self.rng, self.persistent = ret, ret_plan, fresh, rng, persistent
    self.relink()
  @property
  def jit_cache(self) -> list[ExecItem]: return self.items   # tinygrad's older name
  def __len__(self) -> int: return len(self.items)

  def relink(self) -> None:
    """Builds the replay loop from `items` (again after a planner changed their buffers): each launch's argument list with the
    capture's buffer handles, and where each call's input and fresh-output buffers go."""
    srcs = {b: i for i, b in enumerate(self.inputs)}
    srcs.update({b: len(self.inputs) + i for i, b in enumerate(self.fresh)})
    self._calls: list[list] = []          # [launch, args]
    self._patches: list[_Patch] = []
    # kernels with variables: their values (and, where the launch dims are symbolic, the launcher) come with each call
    self._dynamic: list[tuple[int, ExecItem, bool]] = []
    written: dict[Buffer, None] = {}
    written_srcs: set[int] = set()
    self._ops = self._mem = self._kernels = 0
    # the launchers below hold until their device's launch_epoch changes (a CPU device starting or stopping its queue)
    self._epochs = [(dev, dev.launch_epoch) for dev in {item.prg.dev: None for item in self.items if item.prg is not None}]
    for item in self.items:
      for b in item.outs:
        if (s := srcs.get(b.base)) is None: written[b.base] = None
        else: written_srcs.add(s)
      launch: Callable|None
      if item.all_reduce is not None:
        launch, conv = (lambda op: lambda *bufs: realize.run_all_reduce(op, list(bufs)))(item.all_reduce), (lambda b: b)
        args = [b.ensure_allocated() for b in item.bufs]
      elif item.prg is None or item.spec is None:
        launch, conv = _copy, (lambda b: b)
        args: list = [b.ensure_allocated() for b in item.bufs]
      else:
        spec = item.spec
        static = all(isinstance(d, int) for d in (*spec.global_size, *(spec.local_size or ())))
        argf, launch = item.prg.launcher(*spec.launch_dims()) if static else (item.prg.launcher((1,), None)[0], None)
        conv = (lambda argf: lambda b: argf(b._buf))(argf)
        args = [argf(b.ensure_allocated()._buf) for b in item.bufs]
        if any(i != spec.core_id for i in range(len(spec.vars))): self._dynamic.append((len(self._calls), item, not static))
        else: args += list(spec.vals())
        self._ops, self._mem, self._kernels = self._ops + spec.estimates.ops, self._mem + spec.estimates.mem, self._kernels + 1
      for pos, b in enumerate(item.bufs):
        if (s := srcs.get(b.base)) is not None: self._patches.append(_Patch(args, pos, s, None if b.base is b else (b.offset, b.size, b.dtype), conv))
      self._calls.append([launch, args])
    # before a launch writes a buffer, copy-on-write views of it (numpy()) get their own pages: see Buffer.before_write
    self._before_write = list(written)
    self._written_srcs = sorted(written_srcs)

  def __call__(self, inputs:list[_Input], var_vals:dict[str, int]) -> ReturnType:
    if any(dev.launch_epoch != epoch for dev, epoch in self._epochs): self.relink()
    fresh_uops = [new_buffer(b.device, b.size, b.dtype) for b in self.fresh]
    srcs = [i.buf for i in inputs] + [buffer_of(u).allocate() for u in fresh_uops]
    for device, num, key_buf, ctr_buf in self.rng:
      key, start = advance_rng_counter(Tensor, device, num)
      ctr_buf.copyin(struct.pack("<II", start & 0xffffffff, start >> 32))
      if (kb := buffer_of(_view_chain(key.uop)[0])) is not key_buf: key_buf.copyin(kb.as_buffer())
    for p in self._patches:
      b = srcs[p.src]
      p.args[p.pos] = p.conv(b if p.view is None else b.view(p.view[1], p.view[2], p.view[0]).ensure_allocated())
    for b in self._before_write: b.before_write()
    for s in self._written_srcs: srcs[s].before_write()
    for idx, item, symbolic_dims in self._dynamic:
      assert item.prg is not None and item.spec is not None
      call = self._calls[idx]
      call[1][len(item.bufs):] = item.spec.vals(var_vals)
      if symbolic_dims: call[0] = item.prg.launcher(*item.spec.launch_dims(var_vals))[1]
    if DEBUG >= 2 or PROFILE: self._replay_timed(var_vals, DEBUG >= 2)
    else:
      if DEBUG >= 1: print(f"TinyJit replayed {len(self._calls)} launches (nothing scheduled or compiled)")
      for launch, args in self._calls: launch(*args)
      with GlobalCounters.lock:
        GlobalCounters.kernel_count += self._kernels
        GlobalCounters.global_ops += self._ops
        GlobalCounters.global_mem += self._mem
    return self._returned(inputs, fresh_uops, var_vals)

  def _replay_timed(self, var_vals:dict[str, int], show:bool) -> None:
    """The replay loop for DEBUG>=2 and PROFILE: each launch waits for its device, is profiled and (show) prints its line, as run_schedule
    does for a plain call."""
    for (launch, args), item in zip(self._calls, self.items):
      device = item.bufs[0].device
      st = time.perf_counter()
      launch(*args)
      Device[device].synchronize()
      et = time.perf_counter() - st
      if PROFILE: profile_event(device, "copy" if item.spec is None else item.spec.name, "copy" if item.spec is None else "kernel",
                                st, st + et)
      if item.all_reduce is not None:
        with GlobalCounters.lock: GlobalCounters.time_sum_s += et
        if show: print(realize.launch_line(device, colored(f"allreduce {item.all_reduce.lower()}", "green"), len(item.bufs), et, jitted=True))
        continue
      if item.spec is None:
        with GlobalCounters.lock: GlobalCounters.time_sum_s += et
        name = colored(f"copy {item.bufs[0].nbytes:8d}, {device[:7]:>7s} <- {item.bufs[1].device[:7]:7s}", "green")
        if show: print(realize.launch_line(device, name, 2, et, mem=item.bufs[0].nbytes, jitted=True))
        continue
      est = item.spec.estimate(var_vals) if var_vals and item.spec.vars else item.spec.estimates
      with GlobalCounters.lock:
        GlobalCounters.kernel_count += 1
        GlobalCounters.global_ops += est.ops
        GlobalCounters.global_mem += est.mem
        GlobalCounters.time_sum_s += et
      if show: print(realize.launch_line(device, realize.kernel_name(item.spec.name), len(item.bufs), et, est.ops, est.mem, est.lds, jitted=True))
    print(f"TinyJit replayed {len(self._calls)} launches")

  def _returned(self, inputs:list[_Input], fresh_uops:list[UOp], var_vals:dict[str, int]) -> Any:
    """The function's return value for this call: each returned tensor that views an input or a fresh output is rebuilt on this
    call's buffer; the others (model state the function updates in place, constants) are returned as they are."""
    made: dict[int, Tensor] = {}
    def tensor(t:Tensor) -> Tensor:
      if (plan := self.ret_plan.get(id(t))) is None: return t
      if (ret := made.get(id(t))) is None:
        kind, idx, chain = plan
        if kind == "input" and chain is None: ret = inputs[idx].tensor
        else: ret = Tensor(_rebuild(inputs[idx].uop if kind == "input" else fresh_uops[idx], chain, var_vals), device=t.device)
        made[id(t)] = ret
      return ret
    return _map_ret(self.ret, tensor)

def _map_ret(ret:Any, fn:Callable[[Tensor], Tensor]) -> Any:
  if isinstance(ret, Tensor): return fn(ret)
  if isinstance(ret, (list, tuple)): return type(ret)(_map_ret(x, fn) for x in ret)
  if isinstance(ret, dict): return {k: _map_ret(v, fn) for k, v in ret.items()}
  return ret

def _returned_tensors(ret:Any, strict:bool=True) -> list[Tensor]:
  """The tensors in the return value (nested lists, tuples and dicts); strict: anything else but None raises JitError."""
  out: list[Tensor] = []
  stack = [ret]
  while stack:
    x = stack.pop()
    if isinstance(x, Tensor): out.append(x)
    elif isinstance(x, (list, tuple)): stack.extend(reversed(x))
    elif isinstance(x, dict): stack.extend(reversed(list(x.values())))
    elif x is not None and strict:
      raise JitError(f"a TinyJit function returned a {type(x).__name__} ({x!r:.40}): replays return what the capture returned, so it "
                     f"would never change; return Tensors (or None) only, and compute Python values outside the jitted function")
  return out

# ***** capturing *****

class _Capture:
  """Collects what engine/realize.py runs while the function is captured (it sits in realize.capturing)."""
  def __init__(self):
    self.items: list[ExecItem] = []
    self.was_allocated: dict[Buffer, bool] = {}   # each base buffer the capture used: allocated before its first launch?
    self.rng: list[tuple[str, int, Buffer, Buffer]] = []
  def _see(self, bufs) -> None:
    for b in bufs: self.was_allocated.setdefault(b.base, b.base.is_allocated())
  def add_kernel(self, dev:Compiled, spec:ProgramSpec, bufs:list[Buffer]) -> None:
    self._see(bufs)
    self.items.append(ExecItem(dev.get_program(spec), spec, list(bufs)))
  def add_copy(self, dst:Buffer, src:Buffer) -> None:
    self._see((dst, src))
    self.items.append(ExecItem(None, None, [dst, src]))
  def add_all_reduce(self, op:str, bufs:list[Buffer]) -> None:
    self._see(bufs)
    self.items.append(ExecItem(None, None, list(bufs), all_reduce=op))
  def add_rng(self, device:str, num:int, key:Tensor, counter:Tensor) -> None:
    self.rng.append((device, num, buffer_of(_view_chain(key.uop)[0]), buffer_of(_view_chain(counter.uop)[0])))
  def host_read(self) -> None:
    raise JitError("reading a tensor's data (.numpy(), .item(), .tolist(), .data()) inside a TinyJit function would freeze the value "
                   "read at capture into every replay: return the tensor from the function and read it after the call")

def _held_buffers() -> set[Buffer]:
  """The base buffers that tensors alive now can read: their storage and every buffer in their pending graphs."""
  if not (live := [t.uop for t in live_tensors()]): return set()
  held: set[Buffer] = set()
  for u in UOp(Ops.SINK, dtypes.void, tuple(live)).toposort():
    if (base := _view_chain(u)[0]) is not None: held.add(buffer_of(base).base)
  return held

def _prune(items:list[ExecItem], varying:set[Buffer], persistent:set[Buffer]) -> list[ExecItem]:
  """The items whose effect can change from call to call: those touching a buffer that varies (an input, a random counter, or a
  buffer a kept item writes) and those writing state that outlives the call (a buffer allocated before the capture: parameters,
  an optimizer's step count). The others compute the same at every call: the capture ran them, a replay skips them. Repeated to a
  fixed point, since a replay is a loop (a kept item may write what an earlier item reads at the next call)."""
  kept: set[int] = set()
  while True:
    n = len(kept)
    for i, item in enumerate(items):
      if i in kept: continue
      outs = {b.base for b in item.outs}
      if not {b.base for b in item.bufs}.isdisjoint(varying) or not outs.isdisjoint(persistent):
        kept.add(i)
        varying |= outs
    if len(kept) == n: return [item for i, item in enumerate(items) if i in kept]

class TinyJit(Generic[ReturnType]):
  """Captures the kernels of a function of Tensors and replays them: `@TinyJit def step(x, y): ...`.

  The first call runs the function; the second runs it again and captures the kernels it runs; later calls replay those kernels on
  the buffers of the new Tensor arguments (positional, keyword, and directly inside list/tuple/dict arguments). Returned tensors are
  realized, and a replay returns new tensors on new buffers (a later call never overwrites them). Random numbers advance at every
  call as without the JIT. JIT=0 runs the function every time; JIT=1 and JIT=2 capture (there are no device graphs to batch into).
  prune=True skips the captured kernels whose results are the same at every call (not depending on inputs or on state the call
  updates; unlike 0.14, kernels writing parameters or optimizer state are kept). `reset()` forgets
  the capture; `captured` is the CapturedJit. On a method, each instance gets its own capture.

  Raises JitError (instead of replaying something wrong): reading data (.numpy()/.item()/.tolist()/.data()) while capturing; a call
  whose tensors differ in shape, dtype, device or view from the capture's, or come in other positional/keyword places; the same
  buffer passed twice; a Python number argument whose value changed; a non-Tensor in the return value; a function that runs no kernel.
  Inputs that are unrealized computations or constants are realized first (as 0.14), a slice of a realized tensor is fine, writes into
  an input (t.assign, t[1:3] = v) go to each call's input, and a TinyJit called while another one captures just runs its function.

  Inherent, not detected: what Python computes is frozen at capture. Control flow on Python values (an `if` on a global, a loop
  count), Python numbers and tensors the function reads from globals or closures, and tensors it makes from host data
  (Tensor(np_array) inside the function) keep their capture-time values or buffers at every replay: pass what changes as Tensor
  arguments (or bound Variables)."""
  def __init__(self, fxn:Callable[..., ReturnType]|None=None, captured:CapturedJit|None=None, prune:bool=False):
    if fxn is None and captured is None: raise TypeError("TinyJit needs a function (or a CapturedJit)")
    self.fxn, self.captured, self.prune = fxn, captured, prune
    self.cnt = 0 if captured is None else 2
    self._instances: weakref.WeakKeyDictionary[Any, TinyJit] = weakref.WeakKeyDictionary()
    if fxn is not None: functools.update_wrapper(self, fxn)

  def reset(self) -> None:
    """Forgets the capture (and those of every instance of a jitted method): the next call runs the function, the one after captures."""
    if self.fxn is None: raise JitError("this TinyJit was made from a CapturedJit without its function: it can't capture again")
    self.cnt, self.captured = 0, None
    for jit in list(self._instances.values()): jit.reset()

  def __get__(self, obj, objtype=None):
    # a method: one TinyJit per instance, so an instance never replays kernels captured on another instance's tensors
    if obj is None: return self
    try: jit = self._instances.get(obj)
    except TypeError as e:
      raise JitError(f"a TinyJit method needs instances that are hashable and weak-referenceable, {type(obj).__name__} is not: "
                     f"jit a function of the instance instead") from e
    if jit is None: self._instances[obj] = jit = TinyJit(functools.partial(self.fxn, obj), prune=self.prune)
    return jit

  def _run(self, args, kwargs, strict:bool=False) -> ReturnType:
    assert self.fxn is not None
    ret = self.fxn(*args, **kwargs)
    if ts := _returned_tensors(ret, strict): Tensor.realize(*ts)
    return ret

  def __call__(self, *args, **kwargs) -> ReturnType:
    if not JIT or realize.capturing:   # off, or inside another TinyJit's capture: its kernels are that JIT's
      return self._run(args, kwargs)
    names, inputs, var_vals, consts = _collect_args(args, kwargs)
    if self.cnt == 0:
      ret = self._run(args, kwargs)
    elif self.cnt == 1:
      cap = _Capture()
      realize.capturing.append(cap)
      try:
        # each realize of the capture keeps its own buffers: the planner places the whole call's intermediates at once afterwards
        with Context(BEAM=getenv("JITBEAM", BEAM.value), NO_MEMORY_PLANNER=1): ret = self._run(args, kwargs, strict=True)
      finally: realize.capturing.remove(cap)
      self.captured = self._make_captured(cap, names, inputs, var_vals, consts, ret)
    else:
      if (captured := self.captured) is None: raise JitError("TinyJit has no capture")
      self._check(captured, names, inputs, consts)
      ret = captured(inputs, var_vals)
    self.cnt += 1
    return ret

  def _make_captured(self, cap:_Capture, names, inputs:list[_Input], var_vals, consts, ret) -> CapturedJit:
    if not cap.items: raise JitError("TinyJit captured no kernel: the function computed nothing (it must return or assign tensors)")
    in_bufs = [i.buf for i in inputs]
    items = cap.items
    persistent = {b for b, allocated in cap.was_allocated.items() if allocated}
    if self.prune:
      items = _prune(items, set(in_bufs) | {b for _, _, kb, cb in cap.rng for b in (kb, cb)}, persistent)
      if DEBUG >= 1: print(f"TinyJit pruned {len(cap.items)} -> {len(items)} kernels")
    written = {b.base for item in items for b in item.outs}
    in_index = {b: i for i, b in enumerate(in_bufs)}
    fresh: list[Buffer] = []
    fresh_index: dict[Buffer, int] = {}
    ret_plan: dict[int, tuple] = {}
    for t in _returned_tensors(ret):
      base, chain = _view_chain(t.uop)
      if base is None: continue
      chain = _unbind_chain(chain, found := {})
      if missing := sorted(set(found) - set(var_vals)):
        raise JitError(f"a tensor the TinyJit function returns has a shape of the Variable(s) {missing}, which no argument binds: a replay "
                       f"would not know their values; pass them (bound) as arguments or in the shapes of tensor arguments")
      b = buffer_of(base)
      if (k := next((k for k, i in enumerate(inputs) if i.tensor is t), None)) is not None: ret_plan[id(t)] = ("input", k, None)
      elif b in in_index: ret_plan[id(t)] = ("input", in_index[b], chain)
      elif b in written and not cap.was_allocated.get(b, True):
        if b not in fresh_index:
          fresh_index[b] = len(fresh)
          fresh.append(b)
        ret_plan[id(t)] = ("fresh", fresh_index[b], chain)
    # the call's intermediates share memory where their lifetimes allow; what outlives a replay keeps its own buffer: inputs, fresh
    # outputs, random counters, state allocated before the capture, and anything a live tensor can still read
    keep = set(in_bufs) | set(fresh) | persistent | {b for _, _, kb, cb in cap.rng for b in (kb, cb)} | _held_buffers()
    if plan := memory_planner(items, keep):
      for item in items: item.bufs = [plan.get(b, b) for b in item.bufs]
    if DEBUG >= 1: print(f"TinyJit captured {len(items)} launches with {len(inputs)} inputs ({len(plan)} buffers planned)")
    return CapturedJit(items, in_bufs, [i.sig for i in inputs], names, consts, ret, ret_plan, fresh, cap.rng, persistent)

  @staticmethod
  def _check(captured:CapturedJit, names, inputs:list[_Input], consts) -> None:
    if names != captured.names:
      raise JitError(f"TinyJit was captured with tensors (and Variables) at arguments {captured.names} and is now called with them at "
                     f"{names}: pass them the same way (positional or keyword) at every call, or reset() it")
    for i, sig in zip(inputs, captured.input_sigs):
      if i.sig != sig:
        raise JitError(f"TinyJit input {i.name!r} has {_describe(i.sig)}, but the kernels were captured for {_describe(sig)}: use one "
                       f"shape/dtype/device per TinyJit (a TinyJit per shape, or jit.reset() to capture again)")
    if consts != captured.consts:
      changed = [f"{n!r}: {v} -> {w}" for (n, _, v), (m, _, w) in zip(captured.consts, consts) if (n, v) != (m, w)]
      raise JitError(f"TinyJit's Python arguments changed since capture ({', '.join(changed) or 'a different set'}): they are frozen into the "
                     f"captured kernels; pass values that change as Tensors or bound Variables, or reset() it")
