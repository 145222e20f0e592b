# Tensor.arange as a graph (no host data) and the scheduler's closed forms for counting and one-hot sums (schedule/reduce_fold.py):
# numpy's values for every start/stop/step/dtype, kernels without a loop over n, and one-hot selections that become indexed loads.
import subprocess
import sys
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops
from tinygrad.codegen import get_program
from tinygrad.device import Device
from tests.helpers.devices import DEVICES
from tests.helpers.kernels import loop_sizes

NP = {dtypes.int8: np.int8, dtypes.int32: np.int32, dtypes.int64: np.int64, dtypes.uint16: np.uint16, dtypes.float16: np.float16,
      dtypes.float32: np.float32, dtypes.float64: np.float64}

def _asts(t:Tensor) -> list:
  return [si.ast for si in t.schedule()[0]]

def _no_reduce(t:Tensor) -> None:
  asts = _asts(t)
  assert asts, "expected at least one kernel"
  for ast in asts:
    assert not any(u.op is Ops.REDUCE for u in ast.toposort()), ast.arg.name
    assert ast.arg.name.startswith("E_"), ast.arg.name

ARGS = [(5,), (0,), (-3,), (2, 11, 3), (5, 0, -2), (10, -10, -3), (-7, 7, 3), (3, 3), (5, 2), (0, 1, 0.25), (0, 1, 0.1), (-3.3, 7.1, 0.7),
        (0.5, -2, -0.3), (1e6, 1e6 + 5, 0.37), (0, 10, 1 / 3), (2.5,), (1, 2, 5), (100, 0, -7.5)]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("args", ARGS, ids=str)
def test_arange_is_numpys(args, device):
  t = Tensor.arange(*args, device=device)
  ref = np.arange(*args, dtype=np.float32 if t.dtype is dtypes.float32 else np.int32)
  got = t.numpy()
  assert got.dtype == ref.dtype and got.shape == ref.shape
  np.testing.assert_array_equal(got, ref)

@pytest.mark.cpu
@pytest.mark.parametrize("dt", list(NP), ids=str)
def test_arange_dtypes(dt):
  for args in [(7,), (1, 9, 2), (6, 0, -1)] + ([(0.5, 3, 0.25), (-1, 1, 0.3)] if dtypes.is_float(dt) else []):
    if dt is dtypes.uint16 and args[-1] < 0: continue
    t = Tensor.arange(*args, dtype=dt)
    assert t.dtype is dt
    np.testing.assert_array_equal(t.numpy(), np.arange(*args, dtype=NP[dt]), err_msg=f"{args} {dt}")

@pytest.mark.cpu
def test_arange_long_is_elementwise():
  n = 100_000
  t = Tensor.arange(n)
  _no_reduce(t)
  np.testing.assert_array_equal(t.numpy(), np.arange(n, dtype=np.int32))
  # every size, an UNROLL-split reduce (a multiple of 4) included, folds
  for m in (1, 2, 7, 8, 12, 33, 4096): _no_reduce(Tensor.arange(m))
  _no_reduce(Tensor.arange(3, 40, 0.5))

@pytest.mark.cpu
def test_arange_program_has_no_loop():
  (ast,) = _asts(Tensor.arange(4096) * 3 + 1)
  uops = get_program(ast, Device["CPU"].renderer).uops
  assert len(loop_sizes(uops)) == 1   # the output loop only: the arange's reduce is folded away
  np.testing.assert_array_equal((Tensor.arange(4096) * 3 + 1).numpy(), np.arange(4096) * 3 + 1)

def test_arange_errors():
  with pytest.raises(ValueError, match="nonzero step"): Tensor.arange(0, 3, 0)
  with pytest.raises(TypeError, match="arange takes a Python bool, int or float, got str"): Tensor.arange("3")

def test_arange_does_not_import_numpy():
  code = ("import sys\nfrom tinygrad import Tensor\nTensor.arange(10).realize()\n(Tensor.arange(4) - 1).one_hot(3).sum().realize()\n"
          "print('numpy' in sys.modules)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"DEV": "PYTHON", **_env()})
  assert out.stdout.strip() == "False", out.stderr

def _env() -> dict:
  import os
  return {k: v for k, v in os.environ.items() if k != "DEV"}

@pytest.mark.parametrize("device", DEVICES)
def test_embedding_select_is_an_indexed_load(device):
  rng = np.random.default_rng(0)
  w_np = rng.standard_normal((10, 8)).astype(np.float32)
  idx_np = np.array([[3, 1, 9], [0, 12, -1]], dtype=np.int32)   # 12 and -1 are out of range: a one-hot of them is all zeros
  w, idx = Tensor(w_np, device=device), Tensor(idx_np, device=device)
  out = (Tensor.arange(10, device=device) == idx.unsqueeze(-1)).unsqueeze(-1).where(w, 0).sum(2)
  _no_reduce(out)
  valid = (idx_np >= 0) & (idx_np < 10)
  ref = np.where(valid[..., None], w_np[np.clip(idx_np, 0, 9)], 0)
  np.testing.assert_array_equal(out.numpy(), ref)
  # the mask multiplied in, as tinygrad's nn.Embedding writes it
  mul = ((Tensor.arange(10, device=device) == idx.unsqueeze(-1)).unsqueeze(-1) * w).sum(2)
  _no_reduce(mul)
  np.testing.assert_array_equal(mul.numpy(), ref)

@pytest.mark.parametrize("device", DEVICES)
def test_gather_one_hot_tril_fold(device):
  rng = np.random.default_rng(1)
  x_np = rng.standard_normal((6, 5)).astype(np.float32)
  i_np = rng.integers(0, 6, (4, 5)).astype(np.int32)
  x, i = Tensor(x_np, device=device), Tensor(i_np, device=device)
  g = x.gather(0, i)
  _no_reduce(g)
  np.testing.assert_array_equal(g.numpy(), np.take_along_axis(x_np, i_np, 0))
  oh = i.one_hot(6)
  _no_reduce(oh)
  np.testing.assert_array_equal(oh.numpy(), np.eye(6, dtype=np.int32)[i_np])
  for t, r in ((x.tril(), np.tril(x_np)), (x.triu(1), np.triu(x_np, 1)), (x.tril(-2), np.tril(x_np, -2))):
    _no_reduce(t)
    np.testing.assert_array_equal(t.numpy(), r)
  np.testing.assert_array_equal(Tensor.eye(4, 6, device=device).numpy(), np.eye(4, 6, dtype=np.float32))

@pytest.mark.cpu
def test_cross_entropy_label_pick_folds():
  rng = np.random.default_rng(2)
  logits_np, y_np = rng.standard_normal((5, 7)).astype(np.float32), np.array([0, 6, 3, 3, 1], dtype=np.int32)
  logits, y = Tensor(logits_np), Tensor(y_np)
  loss = logits.sparse_categorical_crossentropy(y)
  # the label pick is a load: no kernel sums over the 7 classes for it, so the kernels are the row max, the row sum of exps and the mean
  names = [a.arg.name for a in _asts(loss)]
  assert len(names) <= 4, names
  lsm = logits_np - logits_np.max(1, keepdims=True)
  lsm = lsm - np.log(np.exp(lsm).sum(1, keepdims=True))
  np.testing.assert_allclose(loss.item(), -lsm[np.arange(5), y_np].mean(), rtol=1e-5)

@pytest.mark.cpu
def test_cross_entropy_backward_folds():
  # the backward of the label pick sums -onehot/n over the classes: folded too, so the gradient of the logits is the row max, the row
  # sum of exps and one elementwise kernel
  rng = np.random.default_rng(3)
  logits_np, y_np = rng.standard_normal((6, 9)).astype(np.float32), np.array([0, 8, 3, 3, 1, 5], dtype=np.int32)
  logits = Tensor(logits_np, requires_grad=True)
  logits.sparse_categorical_crossentropy(Tensor(y_np)).backward()
  assert len(_asts(logits.grad)) == 3, [a.arg.name for a in _asts(logits.grad)]
  p = np.exp(logits_np - logits_np.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  np.testing.assert_allclose(logits.grad.numpy(), (p - np.eye(9, dtype=np.float32)[y_np]) / 6, rtol=1e-5, atol=1e-7)

@pytest.mark.cpu
def test_select_that_does_not_fold_gets_a_buffer():
  # a one-hot against 2*arange is not a pick of one position per row the fold knows: the sum planned to fold where it is used (under an
  # expand) is computed into a buffer of its own instead of a loop in every element of its user
  rng = np.random.default_rng(4)
  w_np, x_np = rng.standard_normal((5, 10)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
  idx_np = np.array([4, 3, 18, 0, 7], dtype=np.int32)
  w, x, idx = Tensor(w_np), Tensor(x_np), Tensor(idx_np)
  picked = ((Tensor.arange(10) * 2) == idx.unsqueeze(-1)).where(w, 0).sum(1)
  out = (picked.unsqueeze(-1) * x).sum(1)
  asts = _asts(out)
  assert len(asts) == 2 and all(sum(u.op is Ops.REDUCE for u in a.toposort()) == 1 for a in asts), [a.arg.name for a in asts]
  ref = np.where(np.arange(10) * 2 == idx_np[:, None], w_np, 0).sum(1)
  np.testing.assert_allclose(out.numpy(), (ref[:, None] * x_np).sum(1), rtol=1e-5)

@pytest.mark.cpu
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32], ids=str)
def test_row_gather_of_a_long_half_table_is_an_indexed_load(dt):
  # a half table's sum runs in float (a cast between the one-hot select and the sum): with more rows than a sum gets stages for, the
  # select was staged and never folded, so looking up one row of an F16 embedding read the whole table
  from tinygrad.schedule.knobs import REDUCE_STAGE
  rows = 4 * REDUCE_STAGE + 7
  w_np = np.random.default_rng(5).standard_normal((rows, 16)).astype(np.float32)
  w = Tensor(w_np).cast(dt).contiguous().realize()
  idx_np = np.array([[rows - 1, 3, 0]], dtype=np.int32)
  out = w[Tensor(idx_np)].float()
  _no_reduce(out)
  np.testing.assert_array_equal(out.numpy(), w.float().numpy()[idx_np])
