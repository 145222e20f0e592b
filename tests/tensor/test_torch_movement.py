import pytest
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch   # the opt-in torch group
from tests.helpers.torch_compare import compare, Tensor  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MOVEMENT = {
  "reshape": (lambda x: x.reshape(4, -1), lambda x: x.reshape(4, -1)), "view": (lambda x: x.view(2, 12), lambda x: x.view(2, 12)),
  "expand": (lambda x: x[:, :1].expand(2, 5, 4), lambda x: x[:, :1].expand(2, 5, 4)),
  "permute": (lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1)),
  "flip": (lambda x: x.flip(0, 2), lambda x: x.flip((0, 2))), "shrink": (lambda x: x.shrink(((0, 1), None, (1, 3))), lambda x: x[0:1, :, 1:3]),
  "pad_const": (lambda x: x.pad((1, 2, 0, 1), value=1.5), lambda x: F.pad(x, (1, 2, 0, 1), value=1.5)),
  "pad_neg": (lambda x: x.pad((-1, 2, 1, -1)), lambda x: F.pad(x, (-1, 2, 1, -1))),
  "pad_reflect": (lambda x: x.pad((2, 1, 1, 2), mode="reflect"), lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect")),
  "pad_replicate": (lambda x: x.pad((2, 1, 1, 3), mode="replicate"), lambda x: F.pad(x, (2, 1, 1, 3), mode="replicate")),
  "pad_circular": (lambda x: x.pad((2, 1, 1, 2), mode="circular"), lambda x: F.pad(x, (2, 1, 1, 2), mode="circular")),
  "squeeze": (lambda x: x[:, :1].squeeze(1), lambda x: x[:, :1].squeeze(1)), "unsqueeze": (lambda x: x.unsqueeze(-2), lambda x: x.unsqueeze(-2)),
  "transpose": (lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2)), "T": (lambda x: x[0].T, lambda x: x[0].T),
  "flatten": (lambda x: x.flatten(1), lambda x: x.flatten(1)), "unflatten": (lambda x: x.unflatten(2, (2, 2)), lambda x: x.unflatten(2, (2, 2))),
  "split": (lambda x: x.split([1, 2], dim=1), lambda x: x.split([1, 2], dim=1)), "chunk": (lambda x: x.chunk(2, dim=2), lambda x: x.chunk(2, dim=2)),
  "cat": (lambda x: x.cat(x * 2, x[:, :1], dim=1), lambda x: torch.cat([x, x * 2, x[:, :1]], dim=1)),
  "stack": (lambda x: Tensor.stack(x, x + 1, dim=1), lambda x: torch.stack([x, x + 1], dim=1)),
  "repeat": (lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3)),
  "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), lambda x: x.repeat_interleave(2, dim=1)),
  "roll": (lambda x: x.roll((1, -2), (0, 2)), lambda x: x.roll((1, -2), (0, 2))),
  "unfold": (lambda x: x.unfold(2, 2, 1), lambda x: x.unfold(2, 2, 1)),
  "diagonal": (lambda x: x.diagonal(), lambda x: x.diagonal()), "diagonal_off": (lambda x: x.diagonal(1, -1, 1), lambda x: x.diagonal(1, -1, 1)),
  "tril": (lambda x: x.tril(1), lambda x: x.tril(1)), "triu": (lambda x: x.triu(-1), lambda x: x.triu(-1)),
  "rearrange": (lambda x: x.rearrange("a b c -> c (a b)"), lambda x: x.permute(2, 0, 1).reshape(4, 6)),
  "shrink_to": (lambda x: x.shrink_to(1, 3, 2), lambda x: x[:1, :, :2]),
  "pad_to": (lambda x: x.pad_to(3, 4, 5), lambda x: F.pad(x, (0, 1, 0, 1, 0, 1))),
}

@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(name):
  ours, theirs = MOVEMENT[name]
  compare(ours, theirs, [(2, 3, 4)])

def test_diag_and_meshgrid():
  compare(lambda x: x.diag(), torch.diag, [(4,)])
  compare(lambda x, y: Tensor.meshgrid(x, y), lambda x, y: torch.meshgrid(x, y, indexing="ij"), [(3,), (2,)])
  compare(lambda x, y: Tensor.meshgrid(x, y, indexing="xy"), lambda x, y: torch.meshgrid(x, y, indexing="xy"), [(3,), (2,)])
