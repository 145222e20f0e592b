# tinygrad.llm.gguf against the gguf package: files it writes (GGUFWriter, raw quantized bytes) are read by gguf_load, with ggml's dims
# reversed, each tensor's stored bytes copied to the device and quantized ones dequantized lazily to the oracle's values (quants.py's
# own tests check every type in detail); bad files are clear errors.
import struct
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes, GlobalCounters
from tinygrad.llm.gguf import gguf_load, ggml_data_to_tensor
from tinygrad.llm.quants import GGML_TYPES
from tests.helpers.ggml_blocks import TYPE_IDS, random_blocks

pytestmark = pytest.mark.cpu
gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q, quants  # noqa: E402

def _blocks(qtype:Q, nblocks:int, seed:int=0) -> np.ndarray: return random_blocks(qtype.name, nblocks, seed)

def test_ggml_data_to_tensor():
  # tinygrad 0.14's entry point: the values of n elements of a type whose bytes start a 1-d uint8 tensor (on a device or a file's DISK)
  b = _blocks(Q.Q4_K, 3)
  ref = quants.dequantize(b.reshape(-1), Q.Q4_K)
  out = ggml_data_to_tensor(Tensor(np.concatenate([b.reshape(-1), np.zeros(5, np.uint8)])), 768, int(Q.Q4_K))
  assert out.shape == (768,) and out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), ref)
  q1 = np.zeros(18, np.uint8)
  q1[0:2], q1[2] = np.array([0.5], np.float16).view(np.uint8), 1
  assert ggml_data_to_tensor(Tensor(q1), 128, 41).dtype == dtypes.float16

def _write(path, tensors, kv=None):
  w = gguf.GGUFWriter(str(path), "llama")
  for k, v in (kv or {}).items():
    if isinstance(v, str): w.add_string(k, v)
    elif isinstance(v, list): w.add_array(k, v)
    else: w.add_uint32(k, v)
  for name, (arr, qtype, shape) in tensors.items():
    if qtype is None: w.add_tensor(name, arr)
    else: w.add_tensor(name, arr.reshape(*shape[:-1], -1), raw_dtype=qtype)   # rows of stored bytes
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()
  return path

def test_gguf_load_file(tmp_path):
  rng = np.random.default_rng(1)
  f32, f16, i32 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((4,)).astype(np.float16), np.arange(6, dtype=np.int32)
  q8, q4k = _blocks(Q.Q8_0, 4), _blocks(Q.Q4_K, 2)
  fn = _write(tmp_path / "m.gguf", {"f32": (f32, None, None), "f16": (f16, None, None), "i32": (i32, None, None),
                                     "q8": (q8, Q.Q8_0, (2, 64)), "q4k": (q4k, Q.Q4_K, (2, 256))},
              {"general.name": "tiny", "test.list": [1, 2, 3], "test.n": 7})
  kv, sd = gguf_load(fn)
  assert kv["general.name"] == "tiny" and kv["test.list"] == [1, 2, 3] and kv["test.n"] == 7 and kv["general.architecture"] == "llama"
  np.testing.assert_array_equal(sd["f32"].numpy(), f32)
  assert sd["f16"].dtype == dtypes.float16 and sd["i32"].dtype == dtypes.int32
  np.testing.assert_array_equal(sd["f16"].numpy(), f16)
  np.testing.assert_array_equal(sd["i32"].numpy(), i32)
  assert sd["q8"].shape == (2, 64) and sd["q4k"].shape == (2, 256)
  np.testing.assert_array_equal(sd["q8"].numpy(), quants.dequantize(q8.reshape(-1), Q.Q8_0).reshape(2, 64))
  np.testing.assert_array_equal(sd["q4k"].numpy(), quants.dequantize(q4k.reshape(-1), Q.Q4_K).reshape(2, 256))
  # the same read through a tensor of the file's bytes, and the reader of the package agrees on names and shapes
  kv2, sd2 = gguf_load(Tensor(fn.read_bytes()))
  assert kv2 == kv and {k: v.shape for k, v in sd2.items()} == {k: v.shape for k, v in sd.items()}
  r = gguf.GGUFReader(str(fn))
  assert {t.name: tuple(int(x) for x in reversed(t.shape)) for t in r.tensors} == {k: v.shape for k, v in sd.items()}

# every type the writer stores: (rows, cols) weights, and one (experts, rows, cols) tensor as mixture-of-experts models have
FILE_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "IQ2_S",
              "IQ3_S", "IQ4_XS", "IQ3_XXS"]

def test_gguf_load_every_type(tmp_path):
  rows, cols, tensors, refs = 4, 512, {}, {}
  for i, name in enumerate(FILE_TYPES):
    t = GGML_TYPES[TYPE_IDS[name]]
    b = random_blocks(name, rows * cols // t.block_elems, seed=i)
    refs[f"w.{name}"] = quants.dequantize(b.reshape(-1), Q[name]).reshape(rows, cols)
    tensors[f"w.{name}"] = (b, Q[name], (rows, cols))
  b = random_blocks("Q4_K", 3 * rows * cols // 256, seed=99)
  refs["experts"] = quants.dequantize(b.reshape(-1), Q.Q4_K).reshape(3, rows, cols)
  tensors["experts"] = (b, Q.Q4_K, (3, rows, cols))
  fn = _write(tmp_path / "all.gguf", tensors)
  _, sd = gguf_load(fn)
  r = gguf.GGUFReader(str(fn))
  assert {t.name: tuple(int(x) for x in reversed(t.shape)) for t in r.tensors} == {k: v.shape for k, v in sd.items()}
  for k, ref in refs.items():
    assert sd[k].device == Device.DEFAULT and sd[k].shape == ref.shape
    np.testing.assert_array_equal(sd[k].cast(dtypes.float32).numpy(), ref.astype(np.float32), err_msg=k)
  # a loaded weight is read packed: its matmul is one kernel
  x = Tensor.ones(1, cols).contiguous().realize()
  GlobalCounters.reset()
  (x @ sd["w.Q4_K"].T).realize()
  assert GlobalCounters.kernel_count == 1

def test_gguf_load_copies_the_stored_bytes(tmp_path):
  # every tensor's stored bytes go to the device as they are (also when the file is given as a DISK tensor, as tinygrad 0.14 takes
  # it): native ones as their values, quantized ones as packed blocks under lazy dequantization ops; the file is never written
  f32, q8 = np.arange(15, dtype=np.float32).reshape(3, 5), _blocks(Q.Q8_0, 2)
  fn = _write(tmp_path / "v.gguf", {"f32": (f32, None, None), "q8": (q8, Q.Q8_0, (1, 64))})
  before = fn.read_bytes()
  for src in (fn, Tensor(fn)):
    _, sd = gguf_load(src)
    assert sd["f32"].device == Device.DEFAULT and sd["q8"].device == Device.DEFAULT
    np.testing.assert_array_equal(sd["f32"].numpy(), f32)
    np.testing.assert_array_equal(sd["q8"].numpy(), quants.dequantize(q8.reshape(-1), Q.Q8_0).reshape(1, 64))
  # the file's bytes already in a tensor on the device: quantized blocks are read where they are (no copy at load)
  GlobalCounters.reset()
  _, sd = gguf_load(Tensor(before).realize())
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_mem == 2 * f32.nbytes   # the one native tensor's copy
  np.testing.assert_array_equal(sd["q8"].numpy(), quants.dequantize(q8.reshape(-1), Q.Q8_0).reshape(1, 64))
  np.testing.assert_array_equal(sd["f32"].numpy(), f32)
  t = Tensor(fn)
  np.testing.assert_array_equal(ggml_data_to_tensor(t[before.index(f32.tobytes()):], 15, 0).to("CPU").numpy(), f32.reshape(-1))
  assert fn.read_bytes() == before

def test_gguf_bad_files(tmp_path):
  fn = _write(tmp_path / "ok.gguf", {"w": (np.ones((4, 8), np.float32), None, None)})
  data = fn.read_bytes()
  (bad := tmp_path / "trunc.gguf").write_bytes(data[:-16])
  with pytest.raises(ValueError, match=r"trunc\.gguf.*tensor 'w'.*past|trunc\.gguf.*tensor 'w'"): gguf_load(bad)
  (bad := tmp_path / "magic.gguf").write_bytes(b"GGUX" + data[4:])
  with pytest.raises(ValueError, match="not a GGUF file"): gguf_load(bad)
  (bad := tmp_path / "short.gguf").write_bytes(data[:30])
  with pytest.raises(ValueError, match=r"short\.gguf"): gguf_load(bad)
  # an unknown tensor type: patch the type field that follows the name and dims of the one tensor
  pos = data.index(b"w", 24) + 1 + 4 + 2 * 8
  assert struct.unpack("<i", data[pos:pos+4])[0] == 0
  (bad := tmp_path / "type.gguf").write_bytes(data[:pos] + struct.pack("<i", 99) + data[pos+4:])
  with pytest.raises(ValueError, match=r"type\.gguf: tensor 'w': GGML type 99 is not supported \(supported: F32 \(0\), .*Q4_K \(12\)"):
    gguf_load(bad)
  # a quantized tensor cut short names itself and its type
  fn = _write(tmp_path / "q.gguf", {"blk.0.w": (_blocks(Q.Q4_K, 4), Q.Q4_K, (2, 512))})
  (bad := tmp_path / "qtrunc.gguf").write_bytes(fn.read_bytes()[:-100])
  with pytest.raises(ValueError, match=r"qtrunc\.gguf: tensor 'blk\.0\.w' \(Q4_K, dims \(512, 2\)\) claims bytes .*\(truncated or corrupt\)"):
    gguf_load(bad)
  # an array claiming more items than the file has bytes
  hdr = b"GGUF" + struct.pack("<iqq", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<iiQ", 9, 4, 1 << 40)
  (bad := tmp_path / "arr.gguf").write_bytes(hdr)
  with pytest.raises(ValueError, match=r"arr\.gguf: value 'k' claims 1099511627776 items"): gguf_load(bad)
  with pytest.raises(ValueError, match="type 99 is not supported"): ggml_data_to_tensor(Tensor(np.zeros(4, np.uint8)), 1, 99)
  with pytest.raises(ValueError, match="need 34 bytes"): ggml_data_to_tensor(Tensor(np.zeros(4, np.uint8)), 32, 8)
