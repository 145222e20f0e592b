"""Fuzzes every public Tensor constructor and method with random garbage; run as a child process by test_fuzz_tensor.py, so a crash
(a signal) fails that test instead of killing pytest.

  python fuzz_tensor_child.py SECONDS SEED

Every call must raise an ordinary Python exception of an expected class, or return something sane: a Tensor whose shape is a tuple of
non-negative ints and whose data comes back in that shape (checked against numpy where the call has a numpy meaning). Prints FUZZ_OK
and the number of calls, or the first failure with the reproducing call."""
import inspect
import math
import os
import resource
import sys
import time
import warnings
# a bound on memory, so a huge-but-possible size fails with MemoryError instead of swapping the machine
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck, seed as hseed
from tinygrad import Tensor, dtypes
from tinygrad.dtype import DType

SECONDS, SEED = float(sys.argv[1]), int(sys.argv[2])
ROUNDS = int(os.environ.get("FUZZ_ROUNDS", "60"))   # seeds per run (see the main loop)
# the errors bad input may raise: anything else (AttributeError, AssertionError, UnboundLocalError, KeyError...) is a bug showing
EXPECTED = (TypeError, ValueError, IndexError, RuntimeError, OverflowError, MemoryError, NotImplementedError, ZeroDivisionError)
# from_blob reads the raw address it is given (unsafe by design, as in tinygrad); keccak and hash compile a kernel per Keccak round
# (seconds a call): their bad-input paths are tested in test_creation.py
NOT_FUZZED = {"from_blob", "keccak", "hash"}
# randperm and multinomial sort and scan (argsort, topk, cumsum): fuzzed once those ops are there
NOT_FUZZED |= {"randperm", "multinomial"} if not all(hasattr(Tensor, n) for n in ("argsort", "topk", "cumsum")) else set()
NAMES = sorted({n for n in dir(Tensor) if not n.startswith("_") and n not in NOT_FUZZED} |
               {"__add__", "__sub__", "__mul__", "__truediv__", "__matmul__", "__getitem__", "__neg__", "__invert__", "__lt__", "__eq__",
                "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__rsub__", "__rtruediv__", "__len__", "__bool__", "__init__"})
ALL_DTYPES = [getattr(dtypes, n) for n in dir(dtypes) if isinstance(getattr(dtypes, n), DType)]

def small_tensor(data, dtype) -> Tensor: return Tensor(np.asarray(data).astype(dtype))
tensors = st.builds(small_tensor, st.sampled_from([0, 1.5, [1, 2, 3], [[1, -2], [3, 4]], [[[1.0]]], [[]], [True, False]]),
                    st.sampled_from([np.float32, np.int32, np.bool_, np.float16, np.uint8, np.int64]))
odd_numpy = st.sampled_from([np.float16(1.5), np.int64(5), np.uint64(2**64 - 1), np.complex64(1j), np.array([1, 2], dtype=np.uint16),
                             np.array(3.0), np.array(["a", "b"]), np.array([1, None], dtype=object), np.zeros((2, 0)), np.bool_(True),
                             np.array([[1, 2], [3, 4]], dtype=np.int8).T, np.datetime64("2020"), np.float64("nan"), np.array(2**62)])
leaf = st.one_of(st.integers(-4, 8), st.sampled_from([2**31, 2**40, 2**63, -(2**63), 2**70, -(2**40)]), st.floats(), st.booleans(), st.none(),
                 st.text(max_size=3), st.sampled_from(ALL_DTYPES), st.sampled_from(["CPU", "PYTHON", "NULL", "float32", "int", "nope", "cpu:0"]),
                 odd_numpy, tensors, st.sampled_from([Ellipsis, slice(None, None, -1), slice(1, None), slice(0, 0), slice(None, None, 0)]),
                 st.sampled_from([b"\x00\x01", bytearray(3), object(), {1: 2}, {1, 2}, 1j, range(3), lambda: 1]))
garbage = st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.tuples(c, c) | st.tuples(c), max_leaves=8)
KWARGS = ["axis", "dim", "keepdim", "dtype", "device", "low", "high", "shape", "value", "reverse", "start_dim", "end_dim", "mean", "std",
          "contiguous", "requires_grad"]
kwargs = st.dictionaries(st.sampled_from(KWARGS), garbage, max_size=2)

def check_result(ret, call:str) -> None:
  if isinstance(ret, Tensor):
    shape = ret.shape
    assert type(shape) is tuple and all(type(s) is int and s >= 0 for s in shape), f"{call}: bad shape {shape!r}"
    assert isinstance(ret.dtype, DType), f"{call}: bad dtype {ret.dtype!r}"
    if ret.device != "NULL" and math.prod(shape) <= 4096:
      try: out = ret.numpy()
      except EXPECTED: return   # realizing can still refuse (e.g. a kernel op the dtype doesn't support): an error, not a crash
      assert out.shape == shape, f"{call}: numpy() gave shape {out.shape}, the tensor says {shape}"

def check_against_numpy(data, call:str) -> None:
  """Tensor(data) for lists/scalars numpy reads as numbers: same shape and values as numpy's (within the default dtypes)."""
  try: ref = np.array(data)
  except Exception: return
  if ref.dtype.kind not in "biuf" or ref.size > 4096 or (ref.dtype.kind in "iu" and (ref.min() < -2**31 or ref.max() >= 2**31)): return
  try: t = Tensor(data)
  except EXPECTED: return
  if t.shape != ref.shape: raise AssertionError(f"{call}: shape {t.shape}, numpy says {ref.shape}")
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    want = ref.astype(np.float32 if ref.dtype.kind == "f" else ref.dtype if ref.dtype.kind == "b" else np.int32)
  np.testing.assert_array_equal(t.numpy(), want, err_msg=call)

calls = 0
COLLECT = len(sys.argv) > 3   # a third argument: list every distinct failure instead of stopping at the first (for fixing them)
found: dict = {}
deadline = time.monotonic() + SECONDS

STATIC = {n for n in NAMES if isinstance(inspect.getattr_static(Tensor, n, None), staticmethod)}

@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
@given(st.sampled_from(NAMES), tensors, garbage, st.lists(garbage, max_size=3), kwargs)
def fuzz(name, receiver, first, args, kw):
  global calls
  if time.monotonic() > deadline: return
  calls += 1
  if name == "__init__":
    call = f"Tensor({first!r}, **{kw!r})"
    check_against_numpy(first, call)
    fn, args = Tensor, [first]
  else:
    # constructors get garbage for every argument; methods are called on a real tensor (garbage as `self` is not an API use)
    call = f"{'Tensor' if name in STATIC else repr(receiver)}.{name}(*{args!r}, **{kw!r})"
    fn = getattr(Tensor if name in STATIC else receiver, name)
  if not callable(fn):
    check_result(fn, call)
    return
  try: ret = fn(*args, **kw)
  except EXPECTED: return
  except Exception as e:
    if COLLECT:
      found.setdefault((name, type(e).__name__, str(e)[:60]), call)
      return
    raise AssertionError(f"{call} raised {type(e).__name__}: {e}") from e
  try: check_result(ret, call)
  except Exception as e:
    if COLLECT:
      found.setdefault((name, type(e).__name__, str(e)[:60]), call)
      return
    raise
  if isinstance(ret, (tuple, list)):
    for r in ret: check_result(r, call)

if __name__ == "__main__":
  # rounds of a few examples each, with the next seed, until the time is up (hypothesis itself has no wall-clock budget)
  # a fixed list of seeds (FUZZ_ROUNDS of them), cut short by the time budget: a slower machine runs a prefix of the same
  # examples, so a run never meets an example that no earlier run has passed
  rnd = 0
  while time.monotonic() < deadline and rnd < ROUNDS:
    hseed(SEED * 1_000_003 + rnd)(fuzz)()
    rnd += 1
  for k, v in found.items(): print("FOUND", k, v[:300])
  print(f"FUZZ_OK {calls} calls")
