# BEAM search (tinygrad/codegen/opt/search.py): it finds kernels no slower than the heuristics' with the same results, caches them, survives
# workers that die or hang, never runs the user's __main__ again in a worker, and everything it sends to a worker pickles (on every Python
# found here with the package's core built for it).
import io
import os
import pathlib
import pickle
import random
import shutil
import subprocess
import sys
import threading
import time
import tinygrad
import numpy as np
import pytest
from tinygrad import Tensor, Device
from tinygrad.helpers import Context
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.codegen.opt import search
from tinygrad.codegen.opt.heuristic import optimize_ast
from tinygrad.codegen.opt.kernel import apply_opts

pytestmark = pytest.mark.cpu
# the directory holding the tinygrad package this test imported (the source tree, or site-packages when installed): a subprocess gets
# it on PYTHONPATH so it imports the same package, compiled core included
PKG_DIR = str(pathlib.Path(tinygrad.__file__).resolve().parents[1])

def _kernel_ast(t:Tensor):
  items, _ = t.schedule()
  return [si for si in items if si.ast.op.name == "SINK"][-1].ast

def _matmul(n=64, seed=0):
  rng = np.random.default_rng(seed)
  a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
  return a, b, Tensor(a).realize(), Tensor(b).realize()

def _min_time(spec, bufs, runs=30) -> float:
  dev = Device["CPU"]
  prg = dev.get_program(spec)
  gs, ls = spec.launch_dims({})
  return min(prg(*[bufs[s]._buf for s in spec.globals], global_size=gs, local_size=ls, vals=spec.vals({}), wait=True) for _ in range(runs))

def test_beam_matmul_no_slower_than_default_and_numpy_equal():
  a, b, ta, tb = _matmul()
  with Context(BEAM=2, PARALLEL=2, IGNORE_BEAM_CACHE=1):
    out = (ta @ tb).numpy()
  np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
  ast = _kernel_ast(ta @ tb)
  ren = Device["CPU"].renderer
  found = search.beam_search(ast, ren, 2)   # the search above cached it
  assert found.arg.applied_opts == apply_opts(ast, found.arg.applied_opts, ren).arg.applied_opts
  default, beamed = get_program(optimize_ast(ast, ren), ren), get_program(found, ren)
  bufs = search._scratch_buffers(ast, "CPU")
  # interleaved, best of several tries: the machine is shared, so allow noise
  t_default = t_beam = float("inf")
  for _ in range(4): t_default, t_beam = min(t_default, _min_time(default, bufs)), min(t_beam, _min_time(beamed, bufs))
  assert t_beam <= t_default * 1.5 + 5e-6, f"BEAM {found.arg.applied_opts}: {t_beam*1e6:.1f}us, default {t_default*1e6:.1f}us"

def test_beam_cache_second_run_does_no_search(monkeypatch):
  ast, ren = _kernel_ast(Tensor.rand(16, 16).realize().exp2()), Device["CPU"].renderer
  calls = []
  real = search._compile_all
  def counting(*args):
    calls.append(len(args[1]))
    return real(*args)
  monkeypatch.setattr(search, "_compile_all", counting)
  with Context(PARALLEL=0):
    first = search.beam_search(ast, ren, 1, disable_cache=True)
    assert calls, "the first search compiled nothing"
    n = len(calls)
    assert search.beam_search(ast, ren, 1) is first and len(calls) == n       # cached: no compile
    with Context(IGNORE_BEAM_CACHE=1):
      search.beam_search(ast, ren, 1)
      assert len(calls) > n                                                   # IGNORE_BEAM_CACHE=1 searches again
    n = len(calls)
    with Context(CACHELEVEL=0):
      search.beam_search(ast, ren, 1)
      assert len(calls) > n                                                   # no disk cache at all

def test_actions_skip_invalid():
  ast, ren = _kernel_ast(Tensor.rand(12, 8).realize().sum(axis=1)), Device["CPU"].renderer
  acts = search.kernel_actions(ast, ren)
  assert acts and all(a in search.actions for a in acts)
  assert Opt(OptOps.UPCAST, 0, 5) not in acts and Opt(OptOps.UPCAST, 0, 4) in acts   # 5 does not divide 12
  for a, new in acts.items(): assert new.arg.applied_opts == (a,)

# ***** the worker pool *****

class _Exit:
  """Unpickling this in a worker ends the worker process at once (a crash mid-task)."""
  def __reduce__(self): return os._exit, (3,)

class _Hang:
  def __reduce__(self): return time.sleep, (60,)

def test_pool_survives_crashing_and_hanging_workers():
  ast, ren = _kernel_ast(Tensor.rand(16).realize() + 1), Device["CPU"].renderer
  good = search.worker_payload(ast, [()], ren)
  pool = search._Pool(2)
  try:
    st = time.monotonic()
    got = dict(pool.map([good, pickle.dumps(_Exit()), good, pickle.dumps(_Hang()), good], timeout=1.5))
    assert time.monotonic() - st < 40
    assert sorted(got) == [0, 1, 2, 3, 4] and got[1] is None and got[3] is None
    assert all(got[i][0] == "ok" and got[i][1][0][0] == "ok" and "E_" in got[i][1][0][1][0].src for i in (0, 2, 4))
    assert len(pool.workers) == 2 and all(w.proc.is_alive() for w in pool.workers) and not pool.broken
    # a map left early (Ctrl-C, an exception) replaces the workers still busy: none answers into the next map
    it = pool.map([good, pickle.dumps(_Hang())], timeout=30)
    assert next(it)[0] == 0
    it.close()
    assert all(w.task is None for w in pool.workers) and len(pool.workers) == 2
    got = dict(pool.map([good], timeout=30))
    assert got[0][0] == "ok" and got[0][1][0][0] == "ok"
  finally: pool.close()

def test_search_completes_while_workers_are_killed():
  a, b, ta, tb = _matmul(32, seed=1)
  ast, ren = _kernel_ast(ta @ tb), Device["CPU"].renderer
  stop = threading.Event()
  killed = []
  def killer():
    rnd = random.Random(0)
    while not stop.wait(0.15):
      if search._pool is not None and (ws := [w for w in search._pool.workers if w.proc.is_alive()]):
        w = rnd.choice(ws)
        w.proc.kill()
        killed.append(w.proc.pid)
  th = threading.Thread(target=killer, daemon=True)
  with Context(PARALLEL=2):
    search._get_pool()   # started before the killer, so it has something to kill from the first candidate on
    th.start()
    st = time.monotonic()
    try: found = search.beam_search(ast, ren, 1, disable_cache=True)
    finally: stop.set(); th.join()
    took = time.monotonic() - st
    assert killed and took < 120, f"{len(killed)} workers killed, took {took:.1f}s"
    # the result is a valid kernel: it rebuilds from its opts and computes a @ b
    assert apply_opts(ast, found.arg.applied_opts, ren).arg == found.arg
    spec = get_program(found, ren)
    bufs = search._scratch_buffers(ast, "CPU")
    bufs[1].copyin(memoryview(a.tobytes())); bufs[2].copyin(memoryview(b.tobytes()))
    Device["CPU"].run(spec, [bufs[s] for s in spec.globals])
    out = np.frombuffer(bufs[0].as_buffer(), dtype=np.float32).reshape(32, 32)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    # and the pool is whole again for the next search
    assert len(search._get_pool().workers) == 2

# ***** what workers receive *****

# the only globals a payload's pickle may name outside tinygrad: they exist and pickle the same on every Python 3.11+
_STDLIB_OK = {("builtins", "getattr"), ("copyreg", "_reconstructor"), ("builtins", "object"), ("builtins", "frozenset"), ("builtins", "set")}

def _payload():
  _, _, ta, tb = _matmul(16, seed=2)
  ast, ren = _kernel_ast(ta @ tb), Device["CPU"].renderer
  # two actions in a row, as a candidate of the second round has them
  first = next(iter(search.kernel_actions(ast, ren).values()))
  opts = next(iter(search.kernel_actions(first, ren).values())).arg.applied_opts
  assert len(opts) == 2
  # with a candidate that can't apply (an axis no kernel has): the batch still compiles the others
  return ast, ren, opts, search.worker_payload(ast, [opts, (Opt(OptOps.UPCAST, 40, 2),), ()], ren)

def _globals(data:bytes) -> set[tuple[str, str]]:
  """The (module, name) pairs a pickle refers to."""
  seen: set[tuple[str, str]] = set()
  class Recorder(pickle.Unpickler):
    def find_class(self, module, name):
      seen.add((module, name))
      return super().find_class(module, name)
  Recorder(io.BytesIO(data)).load()
  return seen

def test_worker_payload_round_trips_and_names_only_plain_globals():
  ast, ren, opts, data = _payload()
  ctxvals, ast2, cands, ren2, (compiler_t, compiler_args) = pickle.loads(data)
  assert ast2 is ast and cands == (opts, (Opt(OptOps.UPCAST, 40, 2),), ()) and type(ren2) is type(ren) and ren2.target == ren.target
  assert compiler_t is type(ren.compiler) and compiler_args == () and all(type(v) in (int, float, str, bool) for v in ctxvals.values())
  bad = {g for g in _globals(data) if not g[0].startswith("tinygrad") and g not in _STDLIB_OK}
  assert not bad, f"the payload pickles objects a newer Python may not: {bad}"
  ok, res = search.run_payload(data)
  assert ok == "ok", res
  assert [r[0] for r in res] == ["ok", "err", "ok"] and "KernelOptError" in res[1][1]
  spec, est, lib = res[0][1]
  assert spec.src and lib and est.ops > 0 and spec.name == apply_opts(ast, opts, ren).arg.name and res[2][1][0].name == ast.arg.name

def _other_pythons() -> list[str]:
  """Interpreters of other Python versions on this machine (PATH, pyenv, TINYGRAD_TEST_PYTHONS), one per version; those named in
  TINYGRAD_TEST_PYTHONS first."""
  found = {}
  cands = [p for p in os.environ.get("TINYGRAD_TEST_PYTHONS", "").split(os.pathsep) if p]   # e.g. a venv with numpy
  cands += [shutil.which(f"python3.{v}") for v in range(12, 16)]
  cands += [str(p) for p in sorted(pathlib.Path(os.path.expanduser("~/.pyenv/versions")).glob("3.1[2-9]*/bin/python3"))]
  for exe in cands:
    if exe is None: continue
    try: ver = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired): continue
    if ver and ver != str(sys.version_info[:2]): found.setdefault(ver, exe)
  return list(found.values())

def test_payload_unpickles_on_other_pythons():
  # every newer Python here reads the payload's pickle stream with the same stdlib globals (tinygrad's own classes stubbed: their
  # pickling is the package's, tested above and, where the core is built for that Python, end to end below)
  pythons = _other_pythons()
  if not pythons: pytest.skip("no other Python version on this machine")
  *_, data = _payload()
  code = ("import pickle, sys\n"
          "class Meta(type):\n  def __getattr__(cls, k): return cls()\n"
          "class Stub(metaclass=Meta):\n  def __new__(cls, *a, **k): return object.__new__(cls)\n  def __init__(self, *a, **k): pass\n"
          "  def __call__(self, *a, **k): return Stub()\n  def __getattr__(self, k): return Stub()\n  def __setstate__(self, s): pass\n"
          "class U(pickle.Unpickler):\n  def find_class(self, m, n):\n"
          "    return Meta(n, (Stub,), {}) if m.startswith('tinygrad') else super().find_class(m, n)\n"
          "x = U(sys.stdin.buffer).load()\nprint(type(x).__name__, len(x))\n")
  for exe in pythons:
    r = subprocess.run([exe, "-c", code], input=data, capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == [b"tuple", b"5"], (exe, r.stderr.decode()[-2000:])

_SCRIPT = """\
print("TOP-LEVEL-RUN", flush=True)
import sys
import numpy as np
from tinygrad import Tensor
from tinygrad.codegen.opt import search
a = np.arange(32*32, dtype=np.float32).reshape(32, 32) / 1024
out = (Tensor(a) @ Tensor(a)).numpy()
print("RESULT", np.allclose(out, a @ a, rtol=1e-4), "WORKERS", len(search._pool.workers) if search._pool else 0, flush=True)
"""

def _run_script(exe:str, tmp_path:pathlib.Path) -> subprocess.CompletedProcess:
  # no `if __name__ == "__main__":` guard: spawn would run the top level again in every worker
  (script := tmp_path / "user_script.py").write_text(_SCRIPT)
  env = {**os.environ, "BEAM": "1", "PARALLEL": "2", "DEBUG": "2", "CACHEDB": str(tmp_path / "cache.db"), "PYTHONPATH": PKG_DIR}
  env.pop("IGNORE_BEAM_CACHE", None)
  return subprocess.run([exe, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)

def test_main_is_not_run_again_in_workers_and_the_cache_serves_the_next_run(tmp_path):
  r = _run_script(sys.executable, tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert r.stdout.count("TOP-LEVEL-RUN") == 1 and "RESULT True WORKERS 2" in r.stdout, r.stdout + r.stderr[-3000:]
  searched = [ln for ln in r.stdout.splitlines() if ln.startswith("BEAM ") and " candidates in " in ln]
  assert searched and "cached" not in r.stdout
  # the same program again: every kernel's opts come from the disk cache, no search and no worker
  r2 = _run_script(sys.executable, tmp_path)
  assert r2.returncode == 0 and "RESULT True WORKERS 0" in r2.stdout, r2.stdout + r2.stderr[-3000:]
  assert " candidates in " not in r2.stdout and r2.stdout.count(": cached [") == len(searched), r2.stdout

def test_beam_on_other_pythons(tmp_path):
  # the whole search (pickling, spawning, workers) on each newer Python that has the package's core built for it and numpy
  ok = [exe for exe in _other_pythons()
        if subprocess.run([exe, "-c", "import tinygrad._core, numpy"], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": PKG_DIR}).returncode == 0]
  if not ok: pytest.skip("no other Python here has the package's core built for it (maturin build -i python3.X) and numpy")
  for exe in ok:
    r = _run_script(exe, tmp_path)
    assert r.returncode == 0 and r.stdout.count("TOP-LEVEL-RUN") == 1 and "RESULT True WORKERS 2" in r.stdout, (exe, r.stdout, r.stderr[-3000:])

def test_actions_extend_a_tile_over_the_lane_caps(monkeypatch):
  # the heuristics' register tile (8 x 16 lanes, the scheduler's unroll of 4: 512 lanes, over BEAM_UPCAST_MAX) can still be swapped and
  # packed (or chained: CHAIN adds no lanes): the caps stop only actions that add lanes
  import tinygrad.codegen.opt.heuristic as H
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)
  _, _, ta, tb = _matmul(64)
  ast, ren = _kernel_ast(ta @ tb), Device["CPU"].renderer
  tile = apply_opts(ast, optimize_ast(ast, ren).arg.applied_opts[:-2], ren)   # the tile before its SWAP and PACK
  acts = search.kernel_actions(tile, ren)
  assert {a.op for a in acts} <= {OptOps.SWAP, OptOps.PACK, OptOps.THREAD, OptOps.CHAIN} and any(a.op is OptOps.PACK for a in acts)
  assert all(a.op is not OptOps.UPCAST for a in acts)

def test_search_starts_from_the_tile_family(monkeypatch):
  import tinygrad.codegen.opt.heuristic as H
  monkeypatch.setattr(H, "TILE_MIN_WORK", 1)
  a, b, ta, tb = _matmul(64)
  ast, ren = _kernel_ast(ta @ tb), Device["CPU"].renderer
  family = H.tile_family(ast, ren)
  default = optimize_ast(ast, ren)
  # the default first, the packed tiles of 4 and 16 rows (of 64), the chained 4 x 32 one (CHAIN before its PACK), and the default's
  # tile without its SWAP and PACK
  assert family[0] is default and len(family) == 5 and len({k.arg.applied_opts for k in family}) == 5
  assert [[o.arg for o in k.arg.applied_opts if o.op is OptOps.UPCAST] for k in family] == [[16, 8], [16, 4], [16, 16], [16, 2, 4], [16, 8]]
  assert [k for k in family if any(o.op is OptOps.CHAIN for o in k.arg.applied_opts)] == [family[3]]
  assert family[-1].arg.applied_opts == default.arg.applied_opts[:-2] and all(k.arg.applied_opts[-1].op is OptOps.PACK for k in family[:-1])
  measured = []
  real = search._compile_all
  def recording(base, cands, ren):
    measured.extend(cands)
    return real(base, cands, ren)
  monkeypatch.setattr(search, "_compile_all", recording)
  with Context(PARALLEL=0):
    found = search.beam_search(ast, ren, 2, disable_cache=True)
  assert all(k.arg.applied_opts in measured for k in family)
  np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  assert found.arg.applied_opts == apply_opts(ast, found.arg.applied_opts, ren).arg.applied_opts
