# tinygrad.llm.gguf against the gguf package: files it writes are read by gguf_load, and every quantized type is dequantized to the same
# float32 bits as its reference dequantize (llama.cpp's formulas). Quantized blocks are random bytes with sane float16 scales.
import struct
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.llm.gguf import gguf_load, ggml_data_to_tensor

pytestmark = pytest.mark.cpu
gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q, quants  # noqa: E402

# {type: (elements per block, bytes per block, byte offsets of float16 scales)}
QUANT = {Q.Q4_0: (32, 18, [0]), Q.Q4_1: (32, 20, [0, 2]), Q.Q5_0: (32, 22, [0]), Q.Q5_1: (32, 24, [0, 2]), Q.Q8_0: (32, 34, [0]),
         Q.Q4_K: (256, 144, [0, 2]), Q.Q5_K: (256, 176, [0, 2]), Q.Q6_K: (256, 210, [208]), Q.IQ3_XXS: (256, 98, [0]), Q.IQ3_S: (256, 110, [0]),
         Q.IQ2_S: (256, 82, [0]), Q.IQ4_XS: (256, 136, [0]), Q.MXFP4: (32, 17, [])}

def _blocks(qtype, nblocks, seed=0):
  epb, bpb, scales = QUANT[qtype]
  rng = np.random.default_rng(seed)
  b = rng.integers(0, 256, size=(nblocks, bpb), dtype=np.uint8)
  for o in scales: b[:, o:o+2] = rng.uniform(-3, 3, nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
  if qtype == Q.MXFP4: b[:, 0] = rng.integers(0, 256, nblocks)   # every e8m0 exponent, the two subnormal-like ones included
  return b

@pytest.mark.parametrize("qtype", list(QUANT), ids=lambda q: q.name)
def test_dequantize_matches_gguf(qtype):
  epb = QUANT[qtype][0]
  b = _blocks(qtype, 6, seed=int(qtype))
  ref = quants.dequantize(b.reshape(-1), qtype).reshape(-1).astype(np.float32)
  out = ggml_data_to_tensor(Tensor(b.reshape(-1)), 6 * epb, int(qtype))
  assert out.shape == (6 * epb,) and out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), ref)

def test_q1_0():
  # 128 elements per block: a float16 scale, then one bit per element (least significant first): +d for 1, -d for 0
  b = np.zeros((2, 18), np.uint8)
  b[:, 0:2] = np.array([0.5, -2.0], np.float16).view(np.uint8).reshape(2, 2)
  b[0, 2], b[1, 17] = 0b101, 0x80
  out = ggml_data_to_tensor(Tensor(b.reshape(-1)), 256, 41).numpy()
  exp = np.concatenate([np.full(128, -0.5), np.full(128, 2.0)]).astype(np.float16)
  exp[0], exp[2], exp[255] = 0.5, 0.5, -2.0
  assert out.dtype == np.float16
  np.testing.assert_array_equal(out, exp)

def _write(path, tensors, kv=None):
  w = gguf.GGUFWriter(str(path), "llama")
  for k, v in (kv or {}).items():
    if isinstance(v, str): w.add_string(k, v)
    elif isinstance(v, list): w.add_array(k, v)
    else: w.add_uint32(k, v)
  for name, (arr, qtype, shape) in tensors.items():
    if qtype is None: w.add_tensor(name, arr)
    else: w.add_tensor(name, arr.reshape(shape[0], -1), raw_dtype=qtype)   # rows of quantized bytes
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
  with pytest.raises(ValueError, match=r"type\.gguf: tensor 'w'.*type 99"): gguf_load(bad)
  # an array claiming more items than the file has bytes
  hdr = b"GGUF" + struct.pack("<iqq", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<iiQ", 9, 4, 1 << 40)
  (bad := tmp_path / "arr.gguf").write_bytes(hdr)
  with pytest.raises(ValueError, match=r"arr\.gguf: value 'k' claims 1099511627776 items"): gguf_load(bad)
  with pytest.raises(ValueError, match="type 99 is not supported"): ggml_data_to_tensor(Tensor(np.zeros(4, np.uint8)), 1, 99)
  with pytest.raises(ValueError, match="need 34 bytes"): ggml_data_to_tensor(Tensor(np.zeros(4, np.uint8)), 32, 8)
