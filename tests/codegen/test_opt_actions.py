# The kernel optimizer's action space (tinygrad/codegen/opt/): every OptOp alone and in combinations on matmul, reduce, elementwise and
# conv kernels against numpy on CPU and PYTHON (PYTHON_LOCALS=1: a GPU-like PYTHON device runs LOCAL/GROUP kernels with local memory
# and barriers), the KernelOptError of every invalid action, the heuristics (CPU and GPU flavour) over a corpus of kernels, and random
# opt sequences.
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from tinygrad import Tensor, Device
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, AxisType
from tinygrad.codegen import get_program, lower_ast
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.kernel import apply_opt, apply_opts, opt_ranges, axes_for, ranges_of, range_size, rtype
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations, hand_coded_gpu
from tinygrad.renderer.python import PythonRenderer, PYTHON_LOCALS  # noqa: F401  (registers the PYTHON_LOCALS ContextVar)
from tinygrad.renderer.cstyle import ClangRenderer
import tinygrad.engine.realize as realize

O = OptOps
def rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def _kernel(name:str, dev:str):
  """(the last kernel's AST, its buffers, the expected output) for a small program; the kernels before the last one are run."""
  a, b = rand(6, 32), rand(32, 12, seed=1)
  x, w = rand(2, 3, 6, 6, seed=2), rand(4, 3, 3, 3, seed=3)
  r = rand(4, 6, 10, seed=4)
  T = lambda v: Tensor(v, device=dev).realize()  # noqa: E731
  if name == "matmul": t, want = T(a) @ T(b), a @ b
  elif name == "elementwise": t, want = (T(a) * 2 + 1).T.contiguous(), (a * 2 + 1).T
  elif name == "conv":
    t = T(x).conv2d(T(w), padding=1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.einsum("nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3)), w)
  elif name.startswith("sum"): t, want = T(r).sum(axis=int(name[-1])), r.sum(axis=int(name[-1]))
  elif name == "max": t, want = T(r).max(axis=2), r.max(axis=2)
  elif name == "long": t, want = T(rand(2, 4096, seed=5)).sum(axis=1), rand(2, 4096, seed=5).sum(axis=1)
  else: raise ValueError(name)
  items, _ = t.schedule()
  for si in items[:-1]: realize.run_schedule([si])
  return items[-1].ast, items[-1].bufs, want

def _ren(dev:str):
  return Device[dev].renderer

def _run(name:str, dev:str, opts:list[Opt]):
  ast, bufs, want = _kernel(name, dev)
  ren = _ren(dev)
  # THREAD's count is checked against the machine's cores (global_max[0]): these kernels are checked without a device
  opt_ast = apply_opts(ast, opts, None if any(o.op is O.THREAD for o in opts) else ren)
  spec = get_program(opt_ast, ren)
  assert spec.applied_opts == tuple(opts) or not opts
  Device[dev].run(spec, bufs)
  np.testing.assert_allclose(bufs[0].numpy().reshape(want.shape), want, rtol=1e-4, atol=1e-4)
  return spec

@pytest.fixture
def gpu():
  """The PYTHON device with GPU dims and shared memory."""
  with Context(PYTHON_LOCALS=1): yield

# the ranges in opt order: matmul L6 L12 R8 N4 (the scheduler's unroll), elementwise L32 L6, conv L2 L4 L6 L6 R3 R3 R3, sum0 L60 R4,
# sum1 L4 L10 R6, sum2 and max L24 R10, long L2 R1024 N4
CPU_CASES = [
  ("matmul", [Opt(O.UPCAST, 1, 4)]), ("matmul", [Opt(O.UNROLL, 0, 0)]), ("matmul", [Opt(O.THREAD, 0, 3)]), ("matmul", [Opt(O.PADTO, 0, 8)]),
  ("matmul", [Opt(O.PADTO, 2, 5)]), ("matmul", [Opt(O.SWAP, 0, 1)]), ("matmul", [Opt(O.NOLOCALS)]),
  ("matmul", [Opt(O.UPCAST, 1, 4), Opt(O.UPCAST, 0, 2), Opt(O.UNROLL, 0, 2), Opt(O.THREAD, 0, 3)]),
  ("matmul", [Opt(O.PADTO, 1, 16), Opt(O.UPCAST, 1, 8), Opt(O.SWAP, 0, 1)]),
  ("elementwise", [Opt(O.UPCAST, 1, 3)]), ("elementwise", [Opt(O.SWAP, 0, 1), Opt(O.UPCAST, 0, 2)]), ("elementwise", [Opt(O.PADTO, 1, 4)]),
  ("conv", [Opt(O.UPCAST, 3, 3), Opt(O.UNROLL, 2, 0)]), ("conv", [Opt(O.SWAP, 1, 3), Opt(O.THREAD, 0, 2)]), ("conv", [Opt(O.PADTO, 4, 4)]),
  ("sum0", [Opt(O.UNROLL, 0, 0), Opt(O.UPCAST, 0, 5)]), ("sum1", [Opt(O.UNROLL, 0, 3)]), ("sum2", [Opt(O.PADTO, 1, 4), Opt(O.UNROLL, 0, 4)]),
  ("max", [Opt(O.PADTO, 1, 8)]), ("max", [Opt(O.UPCAST, 0, 2), Opt(O.UNROLL, 0, 0)]), ("long", [Opt(O.UNROLL, 0, 8), Opt(O.THREAD, 0, 2)]),
]
# PACK (devices without GPU dims; in the loop it names, arg picks among the reduce's loads no inner loop moves, by buffer: a matmul's
# A then B)
PACK_CASES = [
  ("matmul", [Opt(O.PACK, 1, 1)]), ("matmul", [Opt(O.PACK, 1, 0)]), ("matmul", [Opt(O.PACK, 0, 0)]),
  ("matmul", [Opt(O.UPCAST, 1, 4), Opt(O.UPCAST, 0, 2), Opt(O.SWAP, 1, 0), Opt(O.THREAD, 0, 3), Opt(O.PACK, 0, 1)]),
  ("conv", [Opt(O.UPCAST, 2, 2), Opt(O.PACK, 3, 0)]), ("sum1", [Opt(O.UNROLL, 0, 3), Opt(O.PACK, 1, 0)]), ("long", [Opt(O.PACK, 0, 0)]),
]
GPU_CASES = [
  ("matmul", [Opt(O.LOCAL, 0, 3)]), ("matmul", [Opt(O.LOCAL, 1, 4), Opt(O.LOCAL, 0, 2)]), ("matmul", [Opt(O.GROUP, 0, 4)]),
  ("matmul", [Opt(O.GROUPTOP, 0, 2)]), ("matmul", [Opt(O.LOCAL, 1, 4), Opt(O.GROUP, 0, 2), Opt(O.UPCAST, 0, 2)]),
  ("matmul", [Opt(O.GROUPTOP, 0, 4), Opt(O.UNROLL, 0, 2), Opt(O.LOCAL, 0, 2)]), ("matmul", [Opt(O.PADTO, 0, 8), Opt(O.LOCAL, 0, 8)]),
  ("matmul", [Opt(O.SWAP, 0, 1), Opt(O.LOCAL, 1, 6)]), ("elementwise", [Opt(O.LOCAL, 0, 8), Opt(O.UPCAST, 1, 3)]),
  ("conv", [Opt(O.LOCAL, 3, 3), Opt(O.UPCAST, 2, 2)]), ("sum0", [Opt(O.GROUPTOP, 0, 4)]), ("sum1", [Opt(O.GROUP, 0, 3), Opt(O.LOCAL, 0, 4)]),
  ("sum2", [Opt(O.GROUPTOP, 0, 5), Opt(O.UNROLL, 0, 0)]), ("max", [Opt(O.GROUP, 0, 10), Opt(O.UPCAST, 0, 2)]),
  ("max", [Opt(O.PADTO, 1, 4), Opt(O.GROUPTOP, 0, 4)]), ("long", [Opt(O.GROUPTOP, 0, 16), Opt(O.UNROLL, 1, 4), Opt(O.UPCAST, 0, 2)]),
]

@pytest.mark.cpu
@pytest.mark.parametrize("name,opts", CPU_CASES)
def test_opts_cpu(name, opts): _run(name, "CPU", opts)

@pytest.mark.parametrize("name,opts", CPU_CASES + GPU_CASES)
def test_opts_python(gpu, name, opts): _run(name, "PYTHON", opts)

@pytest.mark.parametrize("dev", [pytest.param("CPU", marks=pytest.mark.cpu), "PYTHON"])
@pytest.mark.parametrize("name,opts", PACK_CASES)
def test_pack(dev, name, opts):
  spec = _run(name, dev, opts)
  # the panel is a per-thread array the loads read (the copy loop fills it)
  assert any(u.op is Ops.BUFFER and u.arg.name == "pack" for u in spec.uops)

def test_group_uses_local_memory_and_barriers(gpu):
  spec = _run("sum2", "PYTHON", [Opt(O.GROUPTOP, 0, 5), Opt(O.LOCAL, 0, 2)])
  assert spec.local_size == (2, 5, 1) and spec.global_size == (12, 1, 1)
  assert any(u.op is Ops.BARRIER for u in spec.uops) and "yield" in spec.src and "_shared.setdefault" in spec.src

def test_axis_numbering():
  ast, _, _ = _kernel("matmul", "PYTHON")
  # UNROLL/GROUP count the reduce ranges; the others all ranges, by kind then in dim order (tinygrad 0.14)
  L, U, R, N = AxisType.LOOP, AxisType.UPCAST, AxisType.REDUCE, AxisType.UNROLL
  assert [rtype(r) for r in opt_ranges(ast)] == [L, L, R, N]
  assert axes_for(ast, O.UNROLL) == axes_for(ast, O.GROUP) == ranges_of(ast, AxisType.REDUCE)
  up = apply_opt(ast, Opt(O.UPCAST, 0, 2))[0]
  assert [(rtype(r), range_size(r)) for r in opt_ranges(up)] == [(L, 3), (L, 12), (U, 2), (R, 8), (N, 4)]
  assert apply_opt(up, Opt(O.UNROLL, 0, 4))[0].arg.applied_opts == (Opt(O.UPCAST, 0, 2), Opt(O.UNROLL, 0, 4))

def test_rebuild_from_opts(gpu):
  ast, _, _ = _kernel("matmul", "PYTHON")
  ren = _ren("PYTHON")
  opts = [Opt(O.LOCAL, 1, 4), Opt(O.GROUP, 0, 2), Opt(O.UPCAST, 0, 2)]
  a, b = get_program(apply_opts(ast, opts, ren), ren), get_program(apply_opts(ast, opts, ren), ren)
  assert a.src == b.src and a.applied_opts == tuple(opts) and a.name == b.name
  # the heuristic's program, rebuilt from the opts it recorded, is the same program
  h = get_program(ast, ren)
  assert h.applied_opts and get_program(apply_opts(ast, h.applied_opts, ren), ren).src == h.src

def test_opts_printed_at_debug3(gpu, capsys, monkeypatch):
  monkeypatch.setattr(realize, "_specs", {})
  with Context(DEBUG=3): (Tensor(rand(4, 8), device="PYTHON") + 1).sum(axis=1).realize()
  assert "opts: [Opt(op=OptOps." in capsys.readouterr().out

# ***** invalid actions *****

def _raises(name:str, opts:list[Opt], match:str, ren):
  ast, _, _ = _kernel(name, "PYTHON")
  with pytest.raises(KernelOptError, match=match): apply_opts(ast, opts, ren)

INVALID = [
  ("matmul", [Opt(O.UPCAST, 4, 2)], r"UPCAST.*axis 4 is out of range: the kernel has 4 ranges"),
  ("matmul", [Opt(O.UPCAST, None, 2)], r"axis None is out of range"),
  ("matmul", [Opt(O.UNROLL, 1, 2)], r"UNROLL.*axis 1 is out of range: the kernel has 1 reduce ranges"),
  ("elementwise", [Opt(O.GROUP, 0, 2)], r"GROUP.*the kernel has 0 REDUCE ranges"),
  ("matmul", [Opt(O.UPCAST, 0, 4)], r"4 does not divide the size 6"),
  ("matmul", [Opt(O.UPCAST, 0, 1)], r"amount must be an int >= 2"),
  ("matmul", [Opt(O.UPCAST, 2, 2)], r"REDUCE range .*UPCAST applies to LOOP/GLOBAL/LOCAL ranges"),
  ("matmul", [Opt(O.THREAD, 2, 2)], r"THREAD applies to LOOP ranges"),
  ("conv", [Opt(O.UPCAST, 3, 6), Opt(O.UPCAST, 2, 6), Opt(O.UPCAST, 1, 4), Opt(O.UPCAST, 0, 2)], r"288 UPCAST lanes in all, more than 256"),
  ("long", [Opt(O.UNROLL, 0, 32), Opt(O.UNROLL, 0, 2)], r"a reduce of 256 UNROLL lanes, more than 128"),
  ("long", [Opt(O.UNROLL, 0, 64)], r"an unroll of 64 lanes, more than 32"),
  ("sum0", [Opt(O.UPCAST, 0, 0)], r"an upcast of 60 lanes, more than 16"),
  ("matmul", [Opt(O.UNROLL, 0, 0), Opt(O.UNROLL, 0, 0)], r"the kernel has 0 reduce ranges"),
  ("matmul", [Opt(O.UPCAST, 1, 4), Opt(O.UPCAST, 2, 2)], r"UPCAST range .*UPCAST applies to"),
  ("matmul", [Opt(O.THREAD, 0, 2), Opt(O.THREAD, 0, 3)], r"threaded already"),
  ("matmul", [Opt(O.PADTO, 0, 64)], r"padding 6 to 64 more than quadruples the work"),
  ("matmul", [Opt(O.PADTO, 0, 3)], r"is a multiple of 3 already"),
  ("matmul", [Opt(O.UPCAST, 1, 4), Opt(O.PADTO, 2, 8)], r"UPCAST/UNROLL/THREAD ranges can't be padded"),
  ("matmul", [Opt(O.SWAP, 0, 2)], r"SWAP exchanges two LOOP or two GLOBAL ranges"),
  ("matmul", [Opt(O.SWAP, 0, 0)], r"arg must be the axis of another range"),
  ("matmul", [Opt(O.NOLOCALS), Opt(O.NOLOCALS)], r"NOLOCALS was applied already"),
  ("matmul", [Opt(O.TC, 0, (0, 0, 1))], r"has no tensor cores"),
  ("matmul", [Opt(O.TC, 0, 1)], r"TC takes arg="),
  ("matmul", [Opt(O.PACK, 2, 0)], r"REDUCE range .*PACK copies a panel in each iteration of a LOOP range"),
  ("matmul", [Opt(O.PACK, 0, 1)], r"arg 1 names none of the 1 loads that can be packed"),
  ("matmul", [Opt(O.PACK, 1, None)], r"arg None names none of the 2 loads"),
  ("elementwise", [Opt(O.PACK, 0, 0)], r"arg 0 names none of the 0 loads"),
  ("matmul", [Opt(O.PACK, 1, 1), Opt(O.UPCAST, 0, 2)], r"the kernel is packed \(PACK\): PACK is the last opt"),
  ("matmul", [Opt(O.PACK, 1, 1), Opt(O.PACK, 0, 0)], r"PACK is the last opt"),
]

@pytest.mark.parametrize("name,opts,match", INVALID)
def test_invalid(name, opts, match): _raises(name, opts, match, None if O.THREAD in [o.op for o in opts] else PythonRenderer())

GPU_INVALID = [
  ("matmul", [Opt(O.NOLOCALS), Opt(O.LOCAL, 0, 2)], r"NOLOCALS was applied: the kernel may not use local dims"),
  ("matmul", [Opt(O.LOCAL, 0, 2), Opt(O.NOLOCALS)], r"has LOCAL/GROUP_REDUCE ranges already"),
  ("matmul", [Opt(O.GROUP, 0, 2), Opt(O.NOLOCALS)], r"has LOCAL/GROUP_REDUCE ranges already"),
  ("matmul", [Opt(O.LOCAL, 0, 3), Opt(O.LOCAL, 1, 2), Opt(O.GROUP, 0, 2), Opt(O.LOCAL, 0, 2)], r"4 local dims .* a workgroup has 3"),
  ("conv", [Opt(O.LOCAL, 1, 4), Opt(O.LOCAL, 1, 2), Opt(O.LOCAL, 2, 2)], r"a workgroup of 16 threads, more than the device's 8"),
  ("conv", [Opt(O.LOCAL, 1, 2), Opt(O.LOCAL, 2, 2), Opt(O.LOCAL, 3, 6)], r"the local LOCAL range \(3, 1\) of size 6 is over the device's 4"),
  ("sum2", [Opt(O.GROUP, 0, 10), Opt(O.LOCAL, 0, 6), Opt(O.UPCAST, 0, 4)], r"960 bytes of shared memory, more than the device's 512"),
  ("conv", [Opt(O.GROUP, 1, 3)], r"a grouped reduce can't be inside a loop \(LOOP range"),
  ("matmul", [Opt(O.PACK, 1, 1)], r"has GPU dims: PACK copies into a thread's own memory"),
]

@pytest.mark.parametrize("name,opts,match", GPU_INVALID)
def test_invalid_gpu(name, opts, match):
  # a small GPU-like device: workgroups of at most 8 threads (4 in dim 2), 512 bytes of shared memory
  small = {"local_max": (8, 8, 4)} if "workgroup of" in match or "local LOCAL" in match else {"shared_max": 512} if "shared" in match else {}
  with Context(PYTHON_LOCALS=1): _raises(name, opts, match, type("SmallGPU", (PythonRenderer,), small)())

def test_locals_need_a_gpu():
  ast, _, _ = _kernel("matmul", "PYTHON")
  for op in (O.LOCAL, O.GROUP, O.GROUPTOP):
    with pytest.raises(KernelOptError, match=f"{op}.*has no local dims \\(has_local=False\\)"): apply_opt(ast, Opt(op, 0, 2), ClangRenderer())
    with pytest.raises(KernelOptError, match="has no local dims"): apply_opt(ast, Opt(op, 0, 2), PythonRenderer())  # PYTHON_LOCALS off
  with pytest.raises(KernelOptError, match="no CPU threads"): apply_opt(ast, Opt(O.THREAD, 0, 2), PythonRenderer())
  with Context(PYTHON_LOCALS=1):
    no_shared = type("NoShared", (PythonRenderer,), {"has_shared": False})()
    with pytest.raises(KernelOptError, match="no shared memory"): apply_opt(ast, Opt(O.GROUP, 0, 2), no_shared)
    with pytest.raises(KernelOptError, match="CPU threads and GPU dims don't mix"):
      apply_opts(ast, [Opt(O.THREAD, 0, 2), Opt(O.LOCAL, 1, 2)])
    with pytest.raises(KernelOptError, match="the kernel has GPU dims"): apply_opts(ast, [Opt(O.LOCAL, 1, 2), Opt(O.THREAD, 0, 2)])
  two_cores = type("TwoCores", (ClangRenderer,), {"global_max": (2, 1, 1)})()
  with pytest.raises(KernelOptError, match="6 threads, the device has 2"): apply_opt(ast, Opt(O.THREAD, 0, 6), two_cores)
  apply_opt(ast, Opt(O.THREAD, 0, 2), two_cores)

# ***** the heuristics over a corpus of kernels *****

def _corpus(dev:str) -> list[tuple[Tensor, np.ndarray]]:
  x, w, v = rand(5, 7), rand(7, 3, seed=1), rand(1, 2, 5, 5, seed=2)
  ck = rand(3, 2, 3, 3, seed=3)
  T = lambda a, g=False: Tensor(a, device=dev, requires_grad=g)  # noqa: E731
  e = np.exp(x - x.max(axis=1, keepdims=True))
  mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
  xv = T(v, True)
  out = [(T(x).softmax(axis=1), e / e.sum(axis=1, keepdims=True)), (T(x).layernorm(axis=1), (x - mu) / np.sqrt(var + 1e-5)),
         (T(x) @ T(w), x @ w), (T(rand(3, 1000)).sum(axis=1), rand(3, 1000).sum(axis=1)), (T(x).max(axis=0), x.max(axis=0)),
         (T(rand(13, 17, seed=5)).sum(), rand(13, 17, seed=5).sum()), (T(x).cat(T(x * 2), dim=1), np.concatenate([x, x * 2], axis=1)),
         (T(x).pad(((1, 2), (0, 3))) + 1, np.pad(x, ((1, 2), (0, 3))) + 1)]
  conv = xv.conv2d(T(ck), padding=1)
  xp = np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = np.einsum("nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3)), ck)
  out.append((conv, want))
  conv.sum().backward()
  # d(sum conv)/dx: each input pixel gets the sum of the kernel weights that touch it
  ones = np.pad(np.ones((1, 3, 5, 5), np.float32), ((0, 0), (0, 0), (1, 1), (1, 1)))
  gx = np.einsum("nohwij,ocij->nchw", np.lib.stride_tricks.sliding_window_view(ones, (3, 3), axis=(2, 3)), ck[:, :, ::-1, ::-1])
  out.append((xv.grad, gx))
  return out

def _asts(dev:str) -> list:
  return [si.ast for t, _ in _corpus(dev) for si in t.schedule()[0] if si.ast.op is Ops.SINK]

@pytest.mark.cpu
def test_cpu_heuristic_valid():
  ren = _ren("CPU")
  big = (Tensor(rand(128, 128)) @ Tensor(rand(128, 32, seed=1))).schedule()[0][-1].ast   # enough work to be threaded
  threads = min(ren.global_max[0], 32) if ren.global_max else 1
  for ast in _asts("CPU") + [big]:
    opts = hand_coded_optimizations(ast, threads, True).arg.applied_opts
    apply_opts(ast, opts, ren)  # raises if the heuristic chose an invalid action for this renderer
    apply_opts(ast, hand_coded_optimizations(ast, 1, False).arg.applied_opts, ren)

def test_gpu_heuristic_valid_and_correct(gpu, monkeypatch):
  monkeypatch.setattr(realize, "_specs", {})  # every kernel made now, for the GPU-like device
  ren = _ren("PYTHON")
  seen = set()
  for ast in _asts("PYTHON"):
    opts = hand_coded_gpu(ast, ren).arg.applied_opts
    assert apply_opts(ast, opts, ren).arg.applied_opts == opts
    seen |= {o.op for o in opts}
  assert {O.LOCAL, O.GROUPTOP} <= seen
  for t, want in _corpus("PYTHON"): np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4)

def test_default_python_is_unchanged():
  ast, _, _ = _kernel("matmul", "PYTHON")
  spec = get_program(ast, _ren("PYTHON"))
  assert spec.local_size is None and not any(o.op in (O.LOCAL, O.GROUP, O.GROUPTOP) for o in spec.applied_opts)

# ***** random opt sequences *****

_OPS = [O.UPCAST, O.UNROLL, O.LOCAL, O.GROUP, O.GROUPTOP, O.PADTO, O.SWAP, O.NOLOCALS, O.THREAD]

@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["matmul", "sum0", "sum1", "sum2", "max", "elementwise", "conv"]), st.data())
def test_random_opts(name, data):
  with Context(PYTHON_LOCALS=1):
    ast, bufs, want = _kernel(name, "PYTHON")
    ren = _ren("PYTHON")
    applied = []
    for _ in range(data.draw(st.integers(1, 5))):
      # mostly valid actions: an axis of the kind the op counts (or one past them), an amount that divides the range (or 0, or 3)
      op = data.draw(st.sampled_from(_OPS))
      cands = axes_for(ast, op)
      axis = data.draw(st.integers(0, len(cands)))
      size = range_size(cands[axis]) or 1 if axis < len(cands) else 1
      arg = data.draw(st.sampled_from([0, 3] + [d for d in range(2, min(size, 16) + 1) if size % d == 0]))
      if op is O.SWAP: arg = data.draw(st.integers(0, len(cands)))
      opt = Opt(op) if op is O.NOLOCALS else Opt(op, axis, arg)
      try: ast = apply_opt(ast, opt, ren if op is not O.THREAD else None)[0]
      except KernelOptError: continue
      applied.append(opt)
    assert ast.arg.applied_opts == tuple(applied)
    spec = get_program(ast, ren) if applied else ren.to_program(lower_ast(ast).program_input)
    Device["PYTHON"].run(spec, bufs)
    np.testing.assert_allclose(bufs[0].numpy().reshape(want.shape), want, rtol=1e-4, atol=1e-4)

def test_swap_exchanges_launch_dims_and_loops(gpu):
  # on a GPU-like device SWAP decides which output range is which launch dim; on CPU which loop is outside
  assert _run("matmul", "PYTHON", [Opt(O.NOLOCALS)]).global_size == (6, 12, 1)
  assert _run("matmul", "PYTHON", [Opt(O.SWAP, 0, 1)]).global_size == (12, 6, 1)
  with Context(PYTHON_LOCALS=0):
    ast, _, _ = _kernel("matmul", "PYTHON")
    loops = [u.src[0].arg for u in lower_ast(apply_opt(ast, Opt(O.SWAP, 0, 1))[0]).uops if u.op is Ops.RANGE]
    assert loops[:2] == [12, 6]

@pytest.mark.cpu
def test_conv_weight_gradient_tile():
  # tap_tile on a conv's weight gradient (bench_train's CNN conv2: 32 x 16 x 3 x 3 over 64 images of 8 x 8): its inner tap loop upcast,
  # one reduce loop unrolled (the image's x, by the unroll pass; tap_tile adds none), the output channels (the loop no gated input load
  # moves with) upcast by 4 and the input channels by 2; the weight gradient against numpy
  x, g, wv = rand(64, 16, 8, 8), rand(64, 32, 8, 8, seed=1), rand(32, 16, 3, 3, seed=2)
  w = Tensor(wv, requires_grad=True)
  (Tensor(x).conv2d(w, padding=1) * Tensor(g)).sum().backward()
  items, _ = w.grad.schedule()
  ast = items[-1].ast
  opts = hand_coded_optimizations(ast, 1, True).arg.applied_opts
  loops = [range_size(r) for r in ranges_of(ast, AxisType.LOOP)]
  assert loops == [32, 16, 3, 3]
  assert [o.op for o in opts].count(O.UNROLL) == 1 and [o.arg for o in opts if o.op is O.UPCAST] == [0, 4, 2]
  tiled = apply_opts(ast, opts, None)
  assert [range_size(r) for r in ranges_of(tiled, AxisType.UPCAST)] == [4, 2, 3] and [range_size(r) for r in ranges_of(tiled, AxisType.UNROLL)] == [8]
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  want = np.einsum("nohw,nchwij->ocij", g, np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, :8, :8])
  np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-3, atol=1e-3)

@pytest.mark.cpu
def test_short_outer_loop_upcast_fully():
  # upcast_outer on a Linear's weight gradient of 10 outputs (g.T @ x, 10 x 512 over a batch of 64): two threads leave 5 rows each,
  # which 4 doesn't divide, so the row loop is upcast fully (each vector of x loaded serves the 5 rows); 10 rows (one thread) are more
  # than OUTER_FULL_MAX and stay a loop
  g, x = rand(64, 10), rand(64, 512, seed=1)
  t = Tensor(g).T @ Tensor(x)
  ast = t.schedule()[0][-1].ast
  assert [range_size(r) for r in ranges_of(ast, AxisType.LOOP)] == [10, 512]
  threaded = [(o.op, o.arg) for o in hand_coded_optimizations(ast, 2, True).arg.applied_opts if o.op is not O.UNROLL]
  assert threaded == [(O.THREAD, 2), (O.UPCAST, 4), (O.UPCAST, 0)]
  assert [o.arg for o in hand_coded_optimizations(ast, 1, True).arg.applied_opts if o.op is O.UPCAST] == [4]
  np.testing.assert_allclose(t.numpy(), g.T @ x, rtol=1e-4, atol=1e-4)
