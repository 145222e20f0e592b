# The DISK device (a file as a device) and the tensors on it: views of the file's bytes (slices, reshapes, bitcasts) read when copied to
# a device, written by assign; other ops and bad files are clear errors; safe_load of a big file to CPU holds one copy of it in memory.
import json
import os
import pathlib
import struct
import subprocess
import sys
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import GlobalCounters
from tinygrad.nn.state import safe_load, safe_save

pytestmark = pytest.mark.cpu

@pytest.fixture
def data_file(tmp_path) -> pathlib.Path:
  (fn := tmp_path / "data.bin").write_bytes(bytes(range(256)) * 4)
  return fn

def test_path_tensor_maps_the_file(data_file):
  t = Tensor(data_file)
  assert t.shape == (1024,) and t.dtype is dtypes.uint8 and t.device == f"DISK:{data_file.resolve()}"
  np.testing.assert_equal(t.numpy(), np.fromfile(data_file, np.uint8))
  h = Tensor(data_file, dtype=dtypes.int16)
  assert h.shape == (512,) and h.device.startswith("DISK:")
  np.testing.assert_equal(h.numpy(), np.fromfile(data_file, np.int16))
  c = Tensor(data_file, device="CPU")
  assert c.device == "CPU"
  np.testing.assert_equal((c.cast(dtypes.int32) + 1).numpy(), np.fromfile(data_file, np.uint8).astype(np.int32) + 1)

def test_slices_reshapes_and_bitcasts_are_views_at_offsets(data_file):
  ref = np.fromfile(data_file, np.uint8)
  t = Tensor.empty(16, 64, dtype=dtypes.uint8, device=f"disk:{data_file}")
  np.testing.assert_equal(t[3].to("CPU").numpy(), ref.reshape(16, 64)[3])
  np.testing.assert_equal(t[2:5].bitcast(dtypes.uint32).to("CPU").numpy(), ref.reshape(16, 64)[2:5].view(np.uint32))
  np.testing.assert_equal(t.bitcast(dtypes.uint16)[7, 3:9].numpy(), ref.reshape(16, 64).view(np.uint16)[7, 3:9])
  np.testing.assert_equal(t.reshape(1024)[5:].reshape(1019, 1)[100:104].numpy(), ref[105:109].reshape(4, 1))
  # a transpose that comes back, and a permute of size-1 axes, are the same bytes
  np.testing.assert_equal(t.T.T[1].numpy(), ref.reshape(16, 64)[1])
  np.testing.assert_equal(t[4:5].permute(1, 0)[:, 0].numpy(), ref.reshape(16, 64)[4])
  assert t[3:3].numpy().shape == (0, 64)
  with pytest.raises(RuntimeError, match="unsupported size in bitcast"): t[0, :3].bitcast(dtypes.uint16)

def test_non_contiguous_views_and_compute_are_errors(data_file):
  t = Tensor(data_file).reshape(32, 32)
  for bad in (lambda: t.T.to("CPU"), lambda: t.T.realize(), lambda: t[::2].numpy(), lambda: t[:2, :2].tolist(), lambda: t[:1].expand(4, 32).numpy(),
              lambda: t.flip(0).numpy(), lambda: t.pad(((1, 0), (0, 0))).numpy()):
    with pytest.raises(RuntimeError, match="non-contiguous view is not supported for DISK"): bad()
  for bad in (lambda: t + 1, lambda: t.sum(), lambda: t.cast(dtypes.float32), lambda: Tensor.cat(t[:1], t[2:3]), lambda: t[0] * t[1]):
    with pytest.raises(NotImplementedError, match="a DISK tensor is a file"): bad()
  # the same error is the AssertionError tinygrad 0.14 raises for it
  with pytest.raises(AssertionError): t.max()

def test_write_through_to_and_assign(tmp_path):
  fn = tmp_path / "out.bin"
  Tensor([1.0, 2.0, 3.0, 4.0]).to(f"disk:{fn}").realize()
  assert fn.read_bytes() == struct.pack("<4f", 1, 2, 3, 4)
  t = Tensor.empty(4, dtype=dtypes.float32, device=f"disk:{fn}")
  t[1:3].assign(Tensor([7.0, 8.0]))
  t[3] = 9.0
  assert fn.read_bytes() == struct.pack("<4f", 1, 7, 8, 9)
  # a new file is created with the size of the tensor it is made for, whatever part is written first
  new = Tensor.empty(10, dtype=dtypes.int64, device=f"disk:{tmp_path / 'new.bin'}")
  new[8:10].assign([5, 6])
  np.testing.assert_equal(new.numpy(), [0] * 8 + [5, 6])
  u8 = Tensor.empty(16, dtype=dtypes.uint8, device=f"disk:{tmp_path / 'hdr.bin'}")
  u8[0:8].bitcast(dtypes.int64).assign([12345])
  assert int.from_bytes(u8[0:8].data(), "little") == 12345
  with pytest.raises(RuntimeError, match="non-contiguous view is not supported"): t[::2].assign(Tensor([0.0, 0.0]))
  with pytest.raises(RuntimeError, match="advanced setitem is not supported for DISK"): t[Tensor([0, 2])] = 1.0
  with pytest.raises(RuntimeError, match="dtype mismatch"): t.assign(Tensor([1, 2, 3, 4], dtype=dtypes.int32))

def test_disk_bytes_are_not_device_memory(data_file):
  before = GlobalCounters.mem_used
  t = Tensor.empty(1024, dtype=dtypes.uint8, device=f"disk:{data_file}")
  c = t.to("CPU").realize()
  assert GlobalCounters.mem_used - before == 1024 and c.shape == (1024,)   # the CPU copy, not the file

def test_bad_paths_and_sizes_name_the_file(tmp_path, data_file):
  with pytest.raises(FileNotFoundError, match="nope.bin"): Tensor(tmp_path / "nope.bin")
  with pytest.raises(IsADirectoryError, match=str(tmp_path)): Tensor(tmp_path)
  with pytest.raises(FileNotFoundError, match="missing.bin"): Tensor.empty(4, device=f"disk:{tmp_path / 'missing.bin'}").numpy()
  with pytest.raises(IsADirectoryError, match=str(tmp_path)): Tensor.empty(4, device=f"disk:{tmp_path}").numpy()
  # reading past the end of a file is an error (never a crash, never growing the file)
  with pytest.raises(ValueError, match=rf"reading 2048 bytes of file '{data_file}', which has 1024 bytes"):
    Tensor.empty(2048, dtype=dtypes.uint8, device=f"disk:{data_file}").numpy()
  t = Tensor(data_file)
  with open(data_file, "r+b") as f: f.truncate(100)
  with pytest.raises(ValueError, match="which has 100 bytes"): t[500:600].numpy()
  assert data_file.stat().st_size == 100
  (odd := tmp_path / "odd.bin").write_bytes(b"abc")
  with pytest.raises(ValueError, match="not a whole number of"): Tensor(odd, dtype=dtypes.int16)

def test_a_replaced_file_is_read_again(tmp_path):
  safe_save({"x": Tensor([1.0, 2.0])}, fn := tmp_path / "m.safetensors")
  old = safe_load(fn)["x"]   # keeps the file's DISK device open
  assert old.tolist() == [1.0, 2.0]
  safe_save({"x": Tensor([3.0, 4.0])}, fn)
  assert safe_load(fn)["x"].tolist() == [3.0, 4.0]

@pytest.mark.slow
def test_safe_load_to_cpu_holds_one_copy(tmp_path):
  # ~380 MB of float32 in 4 tensors; loading them to CPU must not hold the file's bytes twice (a read copy and the tensor)
  n, fn, header, off = 25_000_000, tmp_path / "big.safetensors", {}, 0
  for i in range(4):
    header[f"t{i}"] = {"dtype": "F32", "shape": [n], "data_offsets": [off, off + 4 * n]}
    off += 4 * n
  j = json.dumps(header).encode()
  j += b" " * (-len(j) % 8)
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    for i in range(4): f.write(np.full(n, i, np.float32).tobytes())
  code = ("import json, resource, sys\nfrom tinygrad import Tensor\nfrom tinygrad.nn.state import safe_load\nTensor([1.0]).realize()\n"
          "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
          "sd = {k: v.to('CPU').realize() for k, v in safe_load(sys.argv[1]).items()}\n"
          "grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024\n"
          "print(json.dumps([grown, [v[-1].item() for v in sd.values()], [v.device for v in sd.values()]]))")
  import tinygrad
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(tinygrad.__file__)), os.environ.get("PYTHONPATH", "")])}
  out = subprocess.run([sys.executable, "-c", code, str(fn)], capture_output=True, text=True, timeout=300, env=env)
  assert out.returncode == 0, out.stderr
  grown, last, devices = json.loads(out.stdout.splitlines()[-1])
  assert last == [0.0, 1.0, 2.0, 3.0] and devices == ["CPU"] * 4
  size = fn.stat().st_size
  assert grown < 1.3 * size, f"loading a {size/1e6:.0f} MB file to CPU grew the process by {grown/1e6:.0f} MB"

def test_disk_device_is_in_the_registry(data_file):
  from tinygrad.runtime.ops_disk import DiskDevice
  assert "DISK" in Device._devices and isinstance(Device[f"DISK:{data_file}"], DiskDevice)
