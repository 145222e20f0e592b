# Movement ops against numpy: pad modes, view/shrink_to/pad_to, squeeze, unflatten, rearrange, split/chunk, repeat, roll, unfold,
# diagonals and triangles, cat/stack; error paths name the shapes.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5

def close(t:Tensor, ref):
  got = t.numpy()
  assert got.shape == np.asarray(ref).shape, (got.shape, np.asarray(ref).shape)
  np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)

CASES = {
  "pad_reflect": (lambda t: t.pad((2, 1, 1, 2), mode="reflect"), lambda a: np.pad(a, ((0, 0), (1, 2), (2, 1)), mode="reflect")),
  "pad_replicate": (lambda t: t.pad(((1, 0), None, (3, 2)), mode="replicate"), lambda a: np.pad(a, ((1, 0), (0, 0), (3, 2)), mode="edge")),
  "pad_circular": (lambda t: t.pad((4, 3), mode="circular"), lambda a: np.pad(a, ((0, 0), (0, 0), (4, 3)), mode="wrap")),
  "pad_value": (lambda t: t.pad(((1, 1), None, None), value=-2.0), lambda a: np.pad(a, ((1, 1), (0, 0), (0, 0)), constant_values=-2)),
  "pad_neg_reflect": (lambda t: t.pad((-1, 2), mode="reflect"), lambda a: np.pad(a[..., 1:], ((0, 0), (0, 0), (0, 2)), mode="reflect")),
  "view": (lambda t: t.view(4, -1), lambda a: a.reshape(4, -1)),
  "shrink_to": (lambda t: t.shrink_to(1, None, 2), lambda a: a[:1, :, :2]),
  "pad_to": (lambda t: t.pad_to(3, None, 6, value=1.5), lambda a: np.pad(a, ((0, 1), (0, 0), (0, 2)), constant_values=1.5)),
  "squeeze_tuple": (lambda t: t[:, :1, :1].squeeze((1, 2, 0)), lambda a: a[:, :1, :1].squeeze((1, 2))),
  "unflatten": (lambda t: t.unflatten(-1, (2, -1)), lambda a: a.reshape(2, 3, 2, 2)),
  "rearrange_perm": (lambda t: t.rearrange("a b c -> c a b"), lambda a: a.transpose(2, 0, 1)),
  "rearrange_group": (lambda t: t.rearrange("a b (c d) -> (a c) b d", d=2), lambda a: a.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(4, 3, 2)),
  "rearrange_ellipsis": (lambda t: t.rearrange("a ... -> ... a 1"), lambda a: a.transpose(1, 2, 0)[..., None]),
  "repeat": (lambda t: t.repeat(2, 1, 1, 2), lambda a: np.tile(a, (2, 1, 1, 2))),
  "repeat_interleave": (lambda t: t.repeat_interleave(2, 1), lambda a: np.repeat(a, 2, 1)),
  "repeat_interleave_flat": (lambda t: t.repeat_interleave(3), lambda a: np.repeat(a, 3)),
  "roll": (lambda t: t.roll((1, -5), (0, 2)), lambda a: np.roll(a, (1, -5), (0, 2))),
  "roll_flat": (lambda t: t.roll(7), lambda a: np.roll(a, 7)),
  "unfold": (lambda t: t.unfold(2, 2, 1), lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, axis=2)),
  "unfold_step": (lambda t: t.unfold(1, 2, 2), lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, axis=1)[:, ::2]),
  "diagonal": (lambda t: t.diagonal(), lambda a: np.diagonal(a)),
  "diagonal_offset": (lambda t: t.diagonal(1, 1, 2), lambda a: np.diagonal(a, 1, 1, 2)),
  "diagonal_neg": (lambda t: t.diagonal(-1, -1, -2), lambda a: np.diagonal(a, -1, -1, -2)),
  "tril": (lambda t: t.tril(), lambda a: np.tril(a)), "tril_off": (lambda t: t.tril(-1), lambda a: np.tril(a, -1)),
  "triu": (lambda t: t.triu(1), lambda a: np.triu(a, 1)), "triu_neg": (lambda t: t.triu(-2), lambda a: np.triu(a, -2)),
  "cat": (lambda t: t.cat(t[:, :1] * 2, dim=1), lambda a: np.concatenate([a, a[:, :1] * 2], 1)),
  "stack": (lambda t: Tensor.stack(t, t + 1, dim=-1), lambda a: np.stack([a, a + 1], -1)),
  "flip_transpose": (lambda t: t.flip(0, -1).transpose(0, 2).flatten(1), lambda a: a[::-1, :, ::-1].transpose(2, 1, 0).reshape(4, -1)),
}

@pytest.mark.cpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_movement_cpu(name):
  f, ref = CASES[name]
  close(f(Tensor(A)), ref(A))

@pytest.mark.parametrize("name", ["pad_reflect", "pad_circular", "rearrange_group", "roll", "unfold_step", "diagonal_offset", "triu"])
def test_movement_python(name):
  f, ref = CASES[name]
  close(f(Tensor(A, device="PYTHON")), ref(A))

@pytest.mark.cpu
def test_split_chunk():
  t = Tensor(A)
  for got, want in zip(t.split(3, 2), np.split(A, [3], 2)): close(got, want)
  for got, want in zip(t.split([1, 0, 2], 1), np.split(A, [1, 1], 1)): close(got, want)
  assert [c.shape for c in t.chunk(3, -1)] == [(2, 3, 2), (2, 3, 2)]
  assert [c.shape for c in t.chunk(2, 1)] == [(2, 2, 4), (2, 1, 4)]
  assert isinstance(t.split(2), tuple) and isinstance(t.chunk(2), list)
  close(t.stack(t * 2, dim=1), np.stack([A, A * 2], 1))   # a method as in 0.14: self is the first tensor
  close(Tensor.stack([t, t], dim=0), np.stack([A, A]))

@pytest.mark.cpu
def test_diag_and_dtypes():
  close(Tensor([1, 2, 3]).diag(), np.diag([1, 2, 3]))
  assert Tensor([1, 2, 3]).diag().dtype == dtypes.int32
  assert Tensor([True, False]).pad((1, 1), mode="replicate").tolist() == [True, True, False, False]
  b = Tensor(A).cast(dtypes.int8).repeat(1, 2, 1)
  assert b.dtype == dtypes.int8 and b.shape == (2, 6, 4)

@pytest.mark.cpu
def test_unfold_empty_window():
  assert Tensor(A).unfold(2, 0, 1).shape == (2, 3, 5, 0)

ERRORS = [
  (lambda t: t.pad((1, 1), mode="wrap"), NotImplementedError, "wrap"),
  (lambda t: t.pad((4, 0), mode="reflect"), ValueError, r"size 4 of dim 2"),
  (lambda t: t.pad((5, 0), mode="circular"), ValueError, r"size 4 of dim 2"),
  (lambda t: t.view(5, -1), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.shrink_to(1, 2), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.pad_to(1, 3, 4), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.squeeze((0, 3)), IndexError, r"\(2, 3, 4\)"),
  (lambda t: t.unflatten(1, (2, 2)), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.rearrange("a b -> b a"), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.rearrange("a b c -> a b"), ValueError, "names"),
  (lambda t: t.rearrange("a (b c) d -> a b c d"), ValueError, "infer"),
  (lambda t: t.rearrange("a b c"), ValueError, "->"),
  (lambda t: t.split([1, 1], 1), ValueError, r"size 3 of dim 1 of \(2, 3, 4\)"),
  (lambda t: t.split(0), ValueError, "positive"),
  (lambda t: t.chunk(0), ValueError, "positive"),
  (lambda t: t.repeat(2, 2), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.roll((1, 2), 0), RuntimeError, "shifts"),
  (lambda t: t.unfold(1, 4, 1), RuntimeError, r"\(2, 3, 4\)"),
  (lambda t: t.unfold(1, 2, 0), RuntimeError, "step"),
  (lambda t: t.diag(), ValueError, r"\(2, 3, 4\)"),
  (lambda t: t.diagonal(0, 1, -2), RuntimeError, "differ"),
  (lambda t: t[0, 0].triu(), RuntimeError, r"\(4,\)"),
  (lambda t: t.cat(t[:, :, :1]), RuntimeError, r"\(2, 3, 1\)"),
  (lambda t: t.stack(t[:, :, :1]), RuntimeError, r"\(2, 3, 1\)"),
  (lambda t: t.flip(0, -3), RuntimeError, "more than once"),
]

@pytest.mark.parametrize("f,exc,match", ERRORS)
def test_movement_errors(f, exc, match):
  with pytest.raises(exc, match=match): f(Tensor(A, device="PYTHON"))

def test_dims_must_be_ints():
  t = Tensor(A, device="PYTHON")
  for f in (lambda: t.max(False), lambda: t.flip(1.0), lambda: t.unsqueeze(True), lambda: t.split(2, dim="0")):
    with pytest.raises(TypeError, match="dimension must be an int"): f()
