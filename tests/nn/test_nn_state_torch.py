# torch_load against real torch.save files (zip and legacy formats), opt-in: pytest -m torch
import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
from tinygrad import dtypes  # noqa: E402
from tinygrad.nn.state import torch_load, safe_save, safe_load  # noqa: E402

def _state():
  g = torch.Generator().manual_seed(0)
  base = torch.randn(4, 6, generator=g)
  lin = torch.nn.Linear(3, 2)
  return {
    "f32": torch.randn(2, 3, 4, generator=g), "f16": torch.randn(5, generator=g).half(), "bf16": torch.randn(7, generator=g).bfloat16(),
    "f64": torch.randn(3, generator=g).double(), "i64": torch.arange(-3, 3), "i32": torch.arange(5, dtype=torch.int32),
    "i8": torch.tensor([-128, 5, 127], dtype=torch.int8), "u8": torch.tensor([0, 255], dtype=torch.uint8), "b": torch.tensor([True, False]),
    "t": base.t(), "slice": base[1:3, 2:], "permuted": torch.randn(2, 3, 4, generator=g).permute(2, 0, 1), "scalar": torch.tensor(3.5),
    "shared_a": base, "param": torch.nn.Parameter(torch.ones(2, 2)), "empty": torch.zeros(0, 3),
    "lin.weight": lin.weight, "lin.bias": lin.bias,
  }

def _np(t):
  t = t.detach()
  return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()

@pytest.mark.parametrize("zipfmt", [True, False], ids=["zip", "legacy"])
def test_torch_load_matches_torch(tmp_path, zipfmt):
  state = _state()
  torch.save(state, fn := tmp_path / "m.pth", _use_new_zipfile_serialization=zipfmt)
  sd = torch_load(fn)
  assert list(sd) == list(state)
  for k, v in state.items():
    assert sd[k].shape == tuple(v.shape), k
    np.testing.assert_array_equal(sd[k].numpy(), _np(v), err_msg=k)
  assert sd["bf16"].dtype == dtypes.bfloat16 and sd["f16"].dtype == dtypes.float16 and sd["b"].dtype == dtypes.bool

def test_torch_module_state_dict_and_safetensors_roundtrip(tmp_path):
  m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.Linear(4 * 26 * 26, 10))
  torch.save(m.state_dict(), fn := tmp_path / "cnn.pth")
  sd = torch_load(fn)
  assert list(sd) == list(m.state_dict())
  safe_save(sd, fn2 := tmp_path / "cnn.safetensors")
  back = safe_load(fn2)
  for k, v in m.state_dict().items(): np.testing.assert_array_equal(back[k].numpy(), _np(v), err_msg=k)

def test_torch_load_refuses_pickled_code(tmp_path):
  import os
  import pickle
  marker = tmp_path / "ran"
  class Evil:
    def __reduce__(self): return (os.system, (f"touch {marker}",))
  torch.save({"w": torch.ones(1), "x": Evil()}, fn := tmp_path / "evil.pth")
  with pytest.raises(pickle.UnpicklingError, match="refuses the global"): torch_load(fn)
  assert not marker.exists()
