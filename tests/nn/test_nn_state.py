# tinygrad.nn.state: state dicts, safetensors (checked both ways against the safetensors package, bit for bit), torch checkpoints built
# here without torch (zip and legacy formats, and a malicious pickle that must run nothing), tar and zip archives, and lying headers.
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile
from collections import OrderedDict, namedtuple
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.nn.state import (safe_load, safe_save, safe_load_metadata, get_state_dict, get_parameters, load_state_dict, torch_load,
                               tar_extract, zip_extract, safe_dtypes)

pytestmark = pytest.mark.cpu
safetensors = pytest.importorskip("safetensors")
from safetensors.numpy import save_file, load_file   # noqa: E402
from safetensors import _safetensors_rust as st_rust  # noqa: E402

# ***** state dicts *****

class Lin:
  def __init__(self, i, o): self.weight, self.bias = Tensor.ones(o, i).contiguous(), Tensor.zeros(o).contiguous()
class Net:
  def __init__(self):
    self.l1, self.l2 = Lin(2, 3), Lin(3, 1)
    self.blocks = [Lin(1, 1), {"a": Lin(1, 2)}]
    self.scale = 2.0

def test_get_state_dict_names_and_order():
  sd = get_state_dict(Net())
  assert list(sd) == ["l1.weight", "l1.bias", "l2.weight", "l2.bias", "blocks.0.weight", "blocks.0.bias", "blocks.1.a.weight", "blocks.1.a.bias"]
  assert sd["l1.weight"].shape == (3, 2)
  assert list(get_state_dict(Net(), prefix="m."))[0] == "m.l1.weight"
  assert len(get_parameters(Net())) == 8

def test_get_state_dict_containers():
  P = namedtuple("P", ["x", "y"])
  t = Tensor([1.0])
  assert list(get_state_dict(P(t, [t, t]))) == ["x", "y.0", "y.1"]
  assert list(get_state_dict(OrderedDict(b=t, a=t))) == ["b", "a"]
  assert get_state_dict(t) == {"": t}
  # tensor_type picks what counts as a leaf
  assert list(get_state_dict({"a": 1, "b": [2]}, tensor_type=int)) == ["a", "b.0"]

def test_get_state_dict_cycle_terminates():
  n = Net()
  n.parent = n   # a back reference must not loop
  assert len(get_state_dict(n)) == 8

def test_load_state_dict_roundtrip_and_errors():
  src, dst = Net(), Net()
  sd = {k: Tensor(np.full(v.shape, i, np.float32)) for i, (k, v) in enumerate(get_state_dict(src).items())}
  ret = load_state_dict(dst, sd, verbose=False)
  assert len(ret) == 8
  for i, (k, v) in enumerate(get_state_dict(dst).items()): np.testing.assert_equal(v.numpy(), np.full(v.shape, i, np.float32), err_msg=k)
  bad = dict(sd, **{"l1.weight": Tensor.zeros(2, 3)})
  with pytest.raises(ValueError, match=r"l1\.weight.*\(3, 2\).*\(2, 3\)"): load_state_dict(Net(), bad, verbose=False)
  missing = {k: v for k, v in sd.items() if k != "l2.bias"}
  with pytest.raises(KeyError, match="l2.bias"): load_state_dict(Net(), missing, verbose=False)
  assert len(load_state_dict(Net(), missing, strict=False, verbose=False)) == 7
  with pytest.raises(TypeError, match="l1.bias.*ndarray"): load_state_dict(Net(), dict(sd, **{"l1.bias": np.zeros(3)}), verbose=False)

def test_load_state_dict_consume_and_scalar():
  class M:
    def __init__(self): self.s = Tensor([0.0]).contiguous()
  sd = {"s": Tensor(3.0), "extra": Tensor([1.0])}
  m = M()
  load_state_dict(m, sd, consume=True, verbose=False)
  assert m.s.shape == (1,) and m.s.item() == 3.0 and list(sd) == ["extra"]

# ***** safetensors *****

NP_CASES = {"f32": np.arange(12, dtype=np.float32).reshape(3, 4), "f16": np.array([1.5, -2, 65504], np.float16), "f64": np.array([np.pi]),
            "i8": np.array([-128, 127], np.int8), "u8": np.arange(5, dtype=np.uint8), "i16": np.array([-3], np.int16),
            "u16": np.array([65535], np.uint16), "i32": np.array([[1, -2]], np.int32), "u32": np.array([2**32-1], np.uint32),
            "i64": np.array([-2**63], np.int64), "u64": np.array([2**64-1], np.uint64), "b": np.array([True, False]),
            "scalar": np.array(7.0, np.float32), "empty": np.zeros((0, 3), np.float32)}

def test_safe_load_reads_safetensors_files(tmp_path):
  save_file(NP_CASES, fn := tmp_path / "a.safetensors", metadata={"format": "np"})
  sd = safe_load(fn)
  assert set(sd) == set(NP_CASES)
  for k, v in NP_CASES.items():
    assert sd[k].shape == v.shape
    assert sd[k].numpy().dtype == v.dtype and sd[k].numpy().tobytes() == v.tobytes(), k
  # loaded tensors are views of the file on its DISK device (as in tinygrad 0.14): kernels read them once moved to a device
  assert all(t.device == f"DISK:{fn.resolve()}" for t in sd.values())
  np.testing.assert_equal((sd["f32"].to("CPU") * 2 + sd["i32"].to("CPU").sum()).numpy(), NP_CASES["f32"] * 2 - 1)
  _, data_start, meta = safe_load_metadata(fn)
  assert meta["__metadata__"] == {"format": "np"} and data_start == 8 + struct.unpack("<Q", fn.read_bytes()[:8])[0]

def test_safe_save_is_read_by_safetensors(tmp_path):
  safe_save({k: Tensor(v) for k, v in NP_CASES.items()}, fn := tmp_path / "b.safetensors", metadata={"who": "tinygrad"})
  back = load_file(fn)
  for k, v in NP_CASES.items(): assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes(), k
  with safetensors.safe_open(fn, "np") as f: assert f.metadata() == {"who": "tinygrad"}
  # views (a transpose, a slice) are written as their values
  x = Tensor(NP_CASES["f32"])
  safe_save({"t": x.T, "s": x[1:, ::2]}, fn2 := tmp_path / "v.safetensors")
  back = load_file(fn2)
  np.testing.assert_equal(back["t"], NP_CASES["f32"].T)
  np.testing.assert_equal(back["s"], NP_CASES["f32"][1:, ::2])

# dtypes numpy lacks: bytes written through the package's raw serializer, read back by us, written by us, read by the package
RAW = [("BF16", "bfloat16", 2), ("F8_E4M3", "float8_e4m3fn", 1), ("F8_E5M2", "float8_e5m2", 1)]

@pytest.mark.parametrize("safe_name,st_name,isz", RAW)
def test_raw_dtypes_bit_for_bit(tmp_path, safe_name, st_name, isz):
  arr = np.random.default_rng(0).integers(0, 256, 6 * isz, dtype=np.uint8)
  raw = arr.tobytes()
  spec = st_rust.TensorSpec(dtype=st_name, shape=[2, 3], data_ptr=arr.ctypes.data, data_len=arr.nbytes)
  st_rust.serialize_file({"x": spec}, str(fn := tmp_path / "r.safetensors"), None)
  x = safe_load(fn)["x"]
  assert x.dtype == safe_dtypes[safe_name] and x.shape == (2, 3) and bytes(x.data()) == raw
  safe_save({"y": x}, fn2 := tmp_path / "w.safetensors")
  (name, info), = st_rust.deserialize(fn2.read_bytes())
  assert name == "y" and info["dtype"] == safe_name and info["shape"] == [2, 3] and bytes(info["data"]) == raw

def test_bf16_values(tmp_path):
  safe_save({"h": Tensor([1.0, -2.5, 3.0e38], dtype=dtypes.bfloat16)}, fn := tmp_path / "h.safetensors")
  h = safe_load(fn)["h"]
  assert h.dtype == dtypes.bfloat16 and h.numpy()[:2].tolist() == [1.0, -2.5]
  assert bytes(safe_load(fn)["h"].data()) == struct.pack("<3H", 0x3F80, 0xC020, 0x7F62)

def test_safe_load_from_tensor_and_save_errors(tmp_path):
  save_file({"a": np.ones(3, np.float32)}, fn := tmp_path / "t.safetensors")
  np.testing.assert_equal(safe_load(Tensor(fn.read_bytes()))["a"].numpy(), np.ones(3, np.float32))
  with pytest.raises(ValueError, match="concrete dtype"): safe_save({"c": Tensor.const(1.0)}, tmp_path / "x")
  with pytest.raises(TypeError, match="not a Tensor"): safe_save({"c": np.ones(2)}, tmp_path / "x")

def _write_header(path, header:dict, data:bytes):
  j = json.dumps(header).encode()
  path.write_bytes(struct.pack("<Q", len(j)) + j + data)
  return path

@pytest.mark.parametrize("header,data,match", [
  ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, r"'w'.*past the end"),
  ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 16, r"'w'.*needs 16 bytes"),
  ({"w": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}, b"\0", r"'w'.*unknown dtype 'Q9'"),
  ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12,
   r"'w' and 'v' overlap"),
  ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, b"", r"'w'.*bad shape"),
  ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}, b"\0" * 8, r"'w'.*bad data_offsets"),
  ({"w": {"shape": [1]}}, b"", r"'w' needs"),
])
def test_lying_headers(tmp_path, header, data, match):
  fn = _write_header(tmp_path / "bad.safetensors", header, data)
  with pytest.raises(ValueError, match=match) as e: safe_load(fn)
  assert str(fn) in str(e.value)

def test_truncated_files(tmp_path):
  (fn := tmp_path / "short").write_bytes(b"\x01\x02")
  with pytest.raises(ValueError, match="too short"): safe_load(fn)
  (fn := tmp_path / "empty").write_bytes(b"")
  with pytest.raises(ValueError, match="too short"): safe_load(fn)
  (fn := tmp_path / "hdr").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
  with pytest.raises(ValueError, match="header claims bytes"): safe_load(fn)
  (fn := tmp_path / "json").write_bytes(struct.pack("<Q", 3) + b"{x}")
  with pytest.raises(ValueError, match="not valid JSON"): safe_load(fn)

def test_safe_load_does_not_read_the_file_whole(tmp_path, monkeypatch):
  save_file({"a": np.ones(4, np.float32)}, fn := tmp_path / "m.safetensors")
  import pathlib
  monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: pytest.fail("safe_load read the whole file"))
  monkeypatch.setattr(np, "fromfile", lambda *a, **k: pytest.fail("safe_load read the whole file"))
  assert safe_load(fn)["a"].numpy().sum() == 4

# ***** archives *****

def test_zip_and_tar_extract(tmp_path):
  with zipfile.ZipFile(zfn := tmp_path / "a.zip", "w") as z:
    z.writestr("s.bin", b"stored", compress_type=zipfile.ZIP_STORED)
    z.writestr("d/x.bin", b"deflated" * 10, compress_type=zipfile.ZIP_DEFLATED)
  files = zip_extract(zfn)
  assert bytes(files["s.bin"].data()) == b"stored" and bytes(files["d/x.bin"].data()) == b"deflated" * 10
  with tarfile.open(tfn := tmp_path / "a.tar", "w") as t:
    for name, data in [("one", b"1234"), ("dir/two", b"")]:
      ti = tarfile.TarInfo(name)
      ti.size = len(data)
      t.addfile(ti, io.BytesIO(data))
  files = tar_extract(tfn)
  assert bytes(files["one"].data()) == b"1234" and files["dir/two"].shape == (0,)
  with pytest.raises(ValueError, match="not a zip"): zip_extract(tfn)

# ***** torch checkpoints, built without torch *****

class _G:
  """A pickled reference to a global module.name (what torch.save writes for torch._utils._rebuild_tensor_v2 etc.)."""
  def __init__(self, module, name): self.module, self.name = module, name

class _Call:
  def __init__(self, fn, args): self.fn, self.args = fn, args
  def __reduce__(self): return (self.fn, self.args)

class _TorchLikePickler(pickle.Pickler):
  """Pickles _Call(_G(...), args) as REDUCE of the named global, and ('storage', ...) tuples wrapped in _PID as persistent ids: the
  opcodes torch.save writes, without torch."""
  def reducer_override(self, obj):
    if isinstance(obj, _Call): return (_GlobalStub.make(obj.fn.module, obj.fn.name), obj.args)
    return NotImplemented
  def persistent_id(self, obj): return obj.pid if isinstance(obj, _PID) else None

class _PID:
  def __init__(self, pid): self.pid = pid

class _GlobalStub:
  """Functions whose pickled form is exactly `module.name` (pickle writes __module__ and __qualname__ and checks the module has it),
  living in stand-in modules that are in sys.modules only while _pkl pickles: the test process never sees a fake torch."""
  _modules: dict = {}
  @staticmethod
  def make(module, name):
    import types
    mod = _GlobalStub._modules.setdefault(module, types.ModuleType(module))
    if not hasattr(mod, name):
      def f(*a): pass
      f.__module__, f.__qualname__, f.__name__ = module, name, name
      setattr(mod, name, f)
    return getattr(mod, name)

for _n in ("_rebuild_tensor_v2", "_rebuild_parameter"): _GlobalStub.make("torch._utils", _n)

def _storage(kind, key, numel): return _PID(("storage", _GlobalStub.make("torch", kind), key, "cpu", numel))
def _tensor(storage, offset, size, stride):
  return _Call(_G("torch._utils", "_rebuild_tensor_v2"), (storage, offset, tuple(size), tuple(stride), False, OrderedDict()))

def _pkl(obj, protocol=2):
  import sys
  f, added = io.BytesIO(), [k for k in _GlobalStub._modules if k not in sys.modules]
  sys.modules.update({k: _GlobalStub._modules[k] for k in added})
  try: _TorchLikePickler(f, protocol=protocol).dump(obj)
  finally:
    for k in added: del sys.modules[k]
  return f.getvalue()

W = np.arange(6, dtype=np.float32).reshape(2, 3)

def _state():
  # w: a (2, 3) float tensor; wt: its transpose (a strided view of the same storage); h: bf16 at an offset; n: int64 wrapped as Parameter
  sw = _storage("FloatStorage", "0", 6)
  return OrderedDict(w=_tensor(sw, 0, (2, 3), (3, 1)), wt=_tensor(sw, 0, (3, 2), (1, 3)),
                     h=_tensor(_storage("BFloat16Storage", "1", 3), 1, (2,), (1,)),
                     n=_Call(_G("torch._utils", "_rebuild_parameter"),
                             (_tensor(_storage("LongStorage", "2", 2), 0, (2,), (1,)), False, OrderedDict())))
STORAGE_BYTES = {"0": W.tobytes(), "1": struct.pack("<3H", 0x3F80, 0x4000, 0xC040), "2": np.array([5, -6], np.int64).tobytes()}

def _check_state(sd):
  assert list(sd) == ["w", "wt", "h", "n"]
  np.testing.assert_equal(sd["w"].numpy(), W)
  np.testing.assert_equal(sd["wt"].numpy(), W.T)
  assert sd["h"].dtype == dtypes.bfloat16 and sd["h"].numpy().tolist() == [2.0, -3.0]
  assert sd["n"].dtype == dtypes.int64 and sd["n"].numpy().tolist() == [5, -6]

def _torch_zip(path, state, storages=STORAGE_BYTES):
  with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", _pkl(state))
    z.writestr("archive/version", "3\n")
    for k, v in storages.items(): z.writestr(f"archive/data/{k}", v)
  return path

def test_torch_load_zip(tmp_path):
  _check_state(torch_load(_torch_zip(tmp_path / "m.pth", _state())))

def _torch_legacy(path, state, storages=STORAGE_BYTES, keys=None):
  out = _pkl(0x1950a86a20f9469cfc6c) + _pkl(1001) + _pkl({"protocol_version": 1001, "little_endian": True}) + _pkl(state)
  keys = list(storages) if keys is None else keys
  out += _pkl(keys)
  for k in keys: out += struct.pack("<q", len(storages[k]) // {"0": 4, "1": 2, "2": 8}[k]) + storages[k]
  path.write_bytes(out)
  return path

def test_torch_load_legacy(tmp_path):
  _check_state(torch_load(_torch_legacy(tmp_path / "l.pth", _state())))

def _torch_tar(path, pickle_bytes=None, ndim_override=None):
  # the tar format of torch < 0.4: 'storages', 'tensors' and 'pickle' members
  fs, ls = _GlobalStub.make("torch", "FloatStorage"), _GlobalStub.make("torch", "LongStorage")
  storages = _pkl(2) + _pkl(("0", "cpu", fs)) + struct.pack("<q", 6) + W.tobytes() + _pkl(("1", "cpu", ls)) + struct.pack("<q", 2) + \
             np.array([5, -6], np.int64).tobytes() + _pkl([])
  tensors = _pkl(3)
  for key, sid, size, stride, off in [("10", "0", (2, 3), (3, 1), 0), ("11", "0", (3, 2), (1, 3), 0), ("12", "1", (1,), (1,), 1)]:
    ndim = len(size) if ndim_override is None else ndim_override
    tensors += _pkl((key, sid, _GlobalStub.make("torch", "FloatTensor"))) + struct.pack("<ii", ndim, 0)
    tensors += struct.pack(f"<{2*len(size)+1}q", *size, *stride, off)
  main = _pkl(OrderedDict(w=_PID("10"), wt=_PID("11"), n=_PID("12"))) if pickle_bytes is None else pickle_bytes
  with tarfile.open(path, "w") as t:
    for name, data in [("sys_info", _pkl({})), ("pickle", main), ("tensors", tensors), ("storages", storages)]:
      ti = tarfile.TarInfo(name)
      ti.size = len(data)
      t.addfile(ti, io.BytesIO(data))
  return path

def test_torch_load_tar_format(tmp_path):
  sd = torch_load(_torch_tar(tmp_path / "old.tar"))
  assert list(sd) == ["w", "wt", "n"]
  np.testing.assert_equal(sd["w"].numpy(), W)
  np.testing.assert_equal(sd["wt"].numpy(), W.T)
  assert sd["n"].dtype == dtypes.int64 and sd["n"].numpy().tolist() == [-6]
  with pytest.raises(ValueError, match="has 100 dimensions"): torch_load(_torch_tar(tmp_path / "bad.tar", ndim_override=100))
  with pytest.raises(pickle.UnpicklingError, match="unknown persistent id '99'"):
    torch_load(_torch_tar(tmp_path / "bad2.tar", pickle_bytes=_pkl({"x": _PID("99")})))

STRIDED = [((3, 2), (1, 3), 0), ((2, 3, 4), (1, 0, 2), 1), ((4, 3), (6, 2), 0), ((2, 2, 3), (0, 8, 2), 2), ((3, 3), (1, 1), 3),
           ((), (), 5), ((5, 1), (0, 7), 4), ((2, 3), (3, 1), 6)]

@pytest.mark.parametrize("shape,stride,offset", STRIDED)
def test_torch_load_strided_views_match_numpy(tmp_path, shape, stride, offset):
  # permuted, expanded (stride 0), gapped, overlapping windows and scalar views of one storage, as torch's as_strided reads them
  data = np.arange(24, dtype=np.float32)
  fn = _torch_zip(tmp_path / "s.pth", {"x": _tensor(_storage("FloatStorage", "0", 24), offset, shape, stride)}, {"0": data.tobytes()})
  x = torch_load(fn)["x"]
  want = np.lib.stride_tricks.as_strided(data[offset:], shape, tuple(st * 4 for st in stride))
  assert x.shape == shape
  np.testing.assert_equal(x.numpy(), want)

def test_torch_load_contiguous_tensors_view_the_file(tmp_path):
  sd = torch_load(_torch_zip(tmp_path / "m.pth", _state()))
  assert sd["w"].device == f"DISK:{(tmp_path / 'm.pth').resolve()}"

def test_torch_load_stride0_view_stays_a_view(tmp_path):
  # a 1 KB checkpoint whose tensor views one float with stride 0 over 100M elements: loading it allocates nothing like 400 MB
  fn = _torch_zip(tmp_path / "e.pth", {"x": _tensor(_storage("FloatStorage", "0", 1), 0, (100_000_000,), (0,))}, {"0": W.tobytes()[4:8]})
  assert fn.stat().st_size < 1024
  code = ("import json, resource, sys\nfrom tinygrad.nn.state import torch_load\nfrom tinygrad import Tensor\nTensor([1.0]).realize()\n"
          "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\nx = torch_load(sys.argv[1])['x']\n"
          "vals = x[:2].numpy().tolist() + x[-3:].numpy().tolist()\n"
          "print(json.dumps([x.shape, vals, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024]))")
  out = subprocess.run([sys.executable, "-c", code, str(fn)], capture_output=True, text=True, timeout=300, env=_child_env())
  assert out.returncode == 0, out.stderr
  shape, vals, grown = json.loads(out.stdout.splitlines()[-1])
  assert shape == [100_000_000] and vals == [1.0] * 5
  assert grown < 50e6, f"loading a stride-0 view of one element grew the process by {grown/1e6:.0f} MB"

def _child_env() -> dict:
  # the child imports the tinygrad package this test imported (the source tree, or site-packages when installed)
  import tinygrad
  return {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(tinygrad.__file__)), os.environ.get("PYTHONPATH", "")])}

def test_torch_load_bad_files(tmp_path):
  # a view reaching past its storage
  sw = _storage("FloatStorage", "0", 6)
  with pytest.raises(ValueError, match=r"reads past the end of storage '0'"):
    torch_load(_torch_zip(tmp_path / "a.pth", {"w": _tensor(sw, 4, (2, 3), (3, 1))}, {"0": W.tobytes()}))
  # a storage whose bytes are shorter than the pickle says
  with pytest.raises(ValueError, match=r"storage '0' has 8 bytes"):
    torch_load(_torch_zip(tmp_path / "b.pth", {"w": _tensor(sw, 0, (2, 3), (3, 1))}, {"0": W.tobytes()[:8]}))
  # a legacy file cut short
  fn = _torch_legacy(tmp_path / "c.pth", _state())
  fn.write_bytes(fn.read_bytes()[:-10])
  with pytest.raises(ValueError, match=str(fn)): torch_load(fn)
  (fn := tmp_path / "d.pth").write_bytes(b"garbage that is no checkpoint")
  with pytest.raises((ValueError, pickle.UnpicklingError), match=str(fn)): torch_load(fn)

class _Evil:
  def __reduce__(self): return (os.system, ("touch " + str(self.marker),))

@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_torch_load_refuses_code(tmp_path, fmt):
  marker = tmp_path / "pwned"
  evil = _Evil()
  evil.marker = marker
  state = {"w": evil}
  fn = _torch_zip(tmp_path / "e.pth", state) if fmt == "zip" else _torch_legacy(tmp_path / "e.pth", state, {}, [])
  with pytest.raises(pickle.UnpicklingError, match=r"refuses the global (posix|os)\.system"): torch_load(fn)
  assert not marker.exists()
  # builtins are refused the same way
  with zipfile.ZipFile(fn2 := tmp_path / "b.pth", "w") as z: z.writestr("a/data.pkl", b"cbuiltins\neval\n(S'1+1'\ntR.")
  with pytest.raises(pickle.UnpicklingError, match=r"refuses the global builtins\.eval"): torch_load(fn2)
