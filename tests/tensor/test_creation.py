# Creation of tensors (constructor, const, full/zeros/ones/empty/invalids, arange/linspace/eye, *_like, meshgrid, from_blob,
# from_url, Path), data/shape/casting names, against numpy; dtypes as tinygrad 0.14 infers them.
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import GlobalCounters
import tinygrad.helpers as helpers
from tinygrad.schedule.buffers import as_buffer

DEVICES = ["PYTHON", pytest.param("CPU", marks=pytest.mark.cpu)]

# (data, dtype, shape) as tinygrad 0.14 gives them: a Python int or float scalar is weak (weakint/weakfloat: stored as the default
# int/float, and taking the type of the tensor it meets)
CONSTRUCTOR = [
  (3, dtypes.weakint, ()), (3.0, dtypes.weakfloat, ()), (True, dtypes.bool, ()), ([1, 2], dtypes.int32, (2,)),
  ([1.0, 2], dtypes.float32, (2,)), ([True, False], dtypes.bool, (2,)), ([], dtypes.float32, (0,)), ([[1], [2]], dtypes.int32, (2, 1)),
  ((1, 2), dtypes.int32, (2,)), ([[1, 2.5], [3, 4]], dtypes.float32, (2, 2)), (b"ab", dtypes.uint8, (2,)),
]

@pytest.mark.parametrize("data,dt,shape", CONSTRUCTOR, ids=repr)
def test_constructor_python(data, dt, shape):
  t = Tensor(data, device="PYTHON")
  assert (t.dtype, t.shape) == (dt, shape)
  ref = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.array(data)
  np.testing.assert_equal(t.numpy(), ref.astype(t.numpy().dtype))

NP_DTYPES = {np.bool_: dtypes.bool, np.int8: dtypes.int8, np.uint8: dtypes.uint8, np.int16: dtypes.int16, np.uint16: dtypes.uint16,
             np.int32: dtypes.int32, np.uint32: dtypes.uint32, np.int64: dtypes.int64, np.uint64: dtypes.uint64, np.float16: dtypes.float16,
             np.float32: dtypes.float32, np.float64: dtypes.float64}

@pytest.mark.parametrize("npdt", list(NP_DTYPES), ids=lambda d: d.__name__)
def test_constructor_numpy(npdt):
  a = (np.arange(6).reshape(2, 3) % 3).astype(npdt)
  t = Tensor(a, device="PYTHON")
  assert t.dtype is NP_DTYPES[npdt] and t.numpy().dtype == a.dtype
  assert t.shape == (2, 3)
  np.testing.assert_equal(t.numpy(), a)
  assert Tensor(np.array(2.5)).shape == ()

@pytest.mark.cpu
def test_constructor_uop_and_dtype():
  t = Tensor(Tensor([1, 2]).uop, dtype=dtypes.float32)
  assert t.dtype is dtypes.float32 and t.tolist() == [1.0, 2.0]
  assert Tensor([1, 2], dtype="float16").dtype is dtypes.float16

@pytest.mark.cpu
def test_constructor_errors():
  with pytest.raises(TypeError, match="can't make a Tensor from str"): Tensor("abc")
  assert Tensor(300, dtype=dtypes.uint8).item() == 44   # wraps, as in tinygrad 0.14 and torch (tests/tensor/test_tensor_from_list.py)

def test_constructor_path(tmp_path):
  p = tmp_path / "blob.bin"
  p.write_bytes(bytes(range(16)))
  t = Tensor(p)
  assert (t.dtype, t.shape) == (dtypes.uint8, (16,))
  np.testing.assert_equal(t.numpy(), np.arange(16, dtype=np.uint8))
  np.testing.assert_equal(Tensor(p, dtype=dtypes.uint32).numpy(), np.arange(16, dtype=np.uint8).view(np.uint32))
  (tmp_path / "odd.bin").write_bytes(bytes(5))
  with pytest.raises(ValueError, match="5 bytes, not a whole number of dtypes.int"): Tensor(tmp_path / "odd.bin", dtype=dtypes.int32)
  with pytest.raises(FileNotFoundError, match="no file at"): Tensor(tmp_path / "missing.bin")

def test_from_url_local(tmp_path, monkeypatch):
  p = tmp_path / "data.bin"
  p.write_bytes(bytes([5, 6, 7, 8]))
  np.testing.assert_equal(Tensor.from_url(str(p)).numpy(), [5, 6, 7, 8])
  # a file:// URL goes through the download cache (kept under tmp_path here)
  monkeypatch.setattr(helpers, "cache_dir", str(tmp_path / "cache"))
  t = Tensor.from_url(p.as_uri(), dtype=dtypes.uint16)
  np.testing.assert_equal(t.numpy(), np.array([5, 6, 7, 8], np.uint8).view(np.uint16))

def test_from_blob():
  a = np.arange(6, dtype=np.float32)
  t = Tensor.from_blob(a.ctypes.data, (2, 3), dtype=dtypes.float32, device="CPU")
  np.testing.assert_equal(t.numpy(), a.reshape(2, 3))
  a[0] = 42   # not a copy: the tensor reads the memory
  assert Tensor.from_blob(a.ctypes.data, (1,), dtype=dtypes.float32, device="CPU").item() == 42
  with pytest.raises(ValueError, match="nonzero int address"): Tensor.from_blob(0, (2,))
  with pytest.raises(TypeError, match="unexpected arguments"): Tensor.from_blob(a.ctypes.data, (2,), bad=1)

@pytest.mark.parametrize("device", DEVICES)
def test_full_zeros_ones(device):
  assert Tensor.full((2, 3), 7, device=device).dtype is dtypes.int32
  assert Tensor.full((2,), 2.5).dtype is dtypes.float32 and Tensor.full((2,), True).dtype is dtypes.bool
  np.testing.assert_equal(Tensor.full((2, 3), 7, dtypes.int8, device).numpy(), np.full((2, 3), 7, np.int8))
  np.testing.assert_equal(Tensor.full(3, 1.5, device=device).numpy(), np.full(3, 1.5, np.float32))
  assert Tensor.zeros(2, 3).dtype is dtypes.float32 and Tensor.ones((2,), dtype="int32").dtype is dtypes.int32
  np.testing.assert_equal(Tensor.zeros(2, 3, device=device).numpy(), np.zeros((2, 3), np.float32))
  np.testing.assert_equal(Tensor.ones((2, 2), dtype=dtypes.int16, device=device).numpy(), np.ones((2, 2), np.int16))
  with pytest.raises(ValueError, match="non-negative ints"): Tensor.zeros(2, -1)
  with pytest.raises(ValueError, match="non-negative ints"): Tensor.full((2.5,), 1)

def test_empty_and_invalids():
  t = Tensor.empty(2, 3, dtype=dtypes.int16)
  assert (t.shape, t.dtype) == ((2, 3), dtypes.int16) and t.numpy().shape == (2, 3)
  assert Tensor.empty(4).dtype is dtypes.float32
  assert Tensor([1, 2, 3]).empty_like().dtype is dtypes.int32 and Tensor([1, 2]).empty_like(dtypes.half).dtype is dtypes.half
  i = Tensor.invalids(2, 3)
  assert (i.shape, i.dtype) == ((2, 3), dtypes.bool) and Tensor.invalids(4, dtype=dtypes.float32).realize().shape == (4,)

@pytest.mark.cpu
def test_like():
  a = Tensor([1, 2, 3])
  assert a.full_like(2.5).dtype is dtypes.int32 and a.full_like(2.5, dtype=dtypes.float32).tolist() == [2.5] * 3
  assert a.ones_like(dtype=dtypes.float16).dtype is dtypes.float16 and a.zeros_like().tolist() == [0, 0, 0]
  c = a.const_like(5)
  assert (c.shape, c.dtype, c.tolist()) == ((3,), dtypes.int32, [5, 5, 5])
  assert a.const_like(1.5, dtypes.float32).tolist() == [1.5] * 3

@pytest.mark.cpu
def test_const():
  c = Tensor.const(3)
  assert c.dtype is dtypes.weakint and c.shape == ()
  assert Tensor.const(2.5, dtypes.half).dtype is dtypes.half
  with pytest.raises(TypeError, match="const takes a Python bool, int or float, got tuple"): Tensor.const((0, 0))
  with pytest.raises(TypeError, match="const_like takes a Python bool, int or float, got str"): Tensor([1]).const_like("a")
  # a weak constant takes the other operand's dtype, as a Python scalar does
  r = Tensor.const(3) + Tensor([1, 2], dtype=dtypes.int8)
  assert r.dtype is dtypes.int8 and r.tolist() == [4, 5]
  r = Tensor([1, 2, 3]) * Tensor.const(1.5)
  assert r.dtype is dtypes.float32 and r.tolist() == [1.5, 3.0, 4.5]

@pytest.mark.cpu
@pytest.mark.parametrize("device", DEVICES)
def test_arange_linspace_eye(device):
  assert Tensor.arange(5).dtype is dtypes.int32 and Tensor.arange(0, 1, 0.25).dtype is dtypes.float32
  np.testing.assert_equal(Tensor.arange(2, 11, 3, device=device).numpy(), np.arange(2, 11, 3))
  np.testing.assert_equal(Tensor.arange(5, 0, -2, dtypes.int64, device).numpy(), np.arange(5, 0, -2))
  np.testing.assert_allclose(Tensor.arange(0, 1, 0.25, device=device).numpy(), np.arange(0, 1, 0.25, dtype=np.float32))
  np.testing.assert_allclose(Tensor.linspace(-1, 1, 5, device=device).numpy(), np.linspace(-1, 1, 5, dtype=np.float32), rtol=1e-6)
  np.testing.assert_equal(Tensor.linspace(0, 4, 5, dtypes.int32).numpy(), np.arange(5))
  np.testing.assert_equal(Tensor.eye(2, 3, device=device).numpy(), np.eye(2, 3, dtype=np.float32))
  np.testing.assert_equal(Tensor.eye(3, dtype=dtypes.int8).numpy(), np.eye(3, dtype=np.int8))
  with pytest.raises(ValueError, match="nonzero step"): Tensor.arange(0, 3, 0)
  with pytest.raises(TypeError, match="int number of steps"): Tensor.linspace(0, 1, 2.0)
  with pytest.raises(ValueError, match="steps >= 0"): Tensor.linspace(0, 1, -1)
  with pytest.raises(ValueError, match="non-negative sizes"): Tensor.eye(-1)

@pytest.mark.cpu
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
  x, y, z = [1, 2], [3, 4, 5], [6, 7, 8, 9]
  ours = Tensor(x).meshgrid(Tensor(y), Tensor(z), indexing=indexing)
  for o, r in zip(ours, np.meshgrid(np.array(x), np.array(y), np.array(z), indexing=indexing)): np.testing.assert_equal(o.numpy(), r)
  assert Tensor(x).meshgrid()[0].tolist() == x
  with pytest.raises(RuntimeError, match='"ij" or "xy"'): Tensor(x).meshgrid(Tensor(y), indexing="yx")
  with pytest.raises(RuntimeError, match="0-d or 1-d"): Tensor([[1]]).meshgrid(Tensor(y))

def test_shape_names():
  a = Tensor.zeros(2, 3, 4)
  assert a.size() == (2, 3, 4) and a.size(1) == 3 and a.size(-1) == 4
  assert a.max_shape == (2, 3, 4) and a.max_numel() == 24 and a.nbytes() == 96 and a.element_size() == 4 and len(a) == 2
  with pytest.raises(IndexError, match=r"dimension 3 out of range for a tensor of shape \(2, 3, 4\)"): a.size(3)
  with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"): len(Tensor(1.0))
  with pytest.raises(RuntimeError, match="concrete dtype"): Tensor.const(1).element_size()

@pytest.mark.cpu
def test_casting_names():
  a = Tensor([1.5, -2.5])
  for name, dt in [("double", dtypes.float64), ("long", dtypes.int64), ("short", dtypes.int16), ("bfloat16", dtypes.bfloat16),
                   ("half", dtypes.float16), ("float", dtypes.float32), ("int", dtypes.int32), ("bool", dtypes.bool)]:
    assert getattr(a, name)().dtype is dt
  assert a.long().tolist() == [1, -2] and a.short().tolist() == [1, -2] and a.double().tolist() == [1.5, -2.5]
  assert a.is_floating_point() and a.bfloat16().is_floating_point() and not a.int().is_floating_point()

@pytest.mark.cpu
def test_clone_replace_realize():
  a = Tensor([1, 2, 3]).realize()
  b = a.clone().realize()
  assert as_buffer(b.uop) is not as_buffer(a.uop) and b.tolist() == [1, 2, 3]
  assert a.clone(device="PYTHON").device == "PYTHON"
  c = Tensor([7, 8, 9], dtype=dtypes.int8)
  assert a.replace(c) is a and a.dtype is dtypes.int8 and a.tolist() == [7, 8, 9]
  with pytest.raises(RuntimeError, match=r"same shape, got \(3,\) and \(2,\)"): a.replace(Tensor([1, 2]))
  x, y = Tensor([1.0]) + 1, Tensor([2.0]) * 3
  GlobalCounters.reset()
  assert Tensor.realize(x, y) is x and GlobalCounters.kernel_count >= 1
  assert x.tolist() == [2.0] and y.tolist() == [6.0]

@pytest.mark.cpu
def test_clones_are_independent():
  # two clones of one tensor (or of one constant) are two buffers: writing one leaves the other (they were one interned node)
  for a in (Tensor([1.0, 2.0, 3.0]).realize(), Tensor([1.0, 2.0, 3.0]) * 2, Tensor.full((3,), 2.0, buffer=False)):
    b, c = a.clone(), a.clone()
    want = a.tolist()
    b.realize(), c.realize()
    b.assign(Tensor([9.0, 9.0, 9.0])).realize()
    assert b.tolist() == [9.0] * 3 and c.tolist() == want and a.tolist() == want
  w1, w2 = Tensor(3.5).clone(), Tensor(3.5).clone()
  w1.assign(Tensor([1.0]).reshape(())).realize()
  assert (w1.item(), w2.item()) == (1.0, 3.5)
  # the gradient flows through a clone to its source, and a clone keeps a copy of the source's .grad (as in 0.14)
  x = Tensor([1.0, 2.0])
  y = x.clone()
  (y * y).sum().backward()
  assert x.grad.tolist() == [2.0, 4.0] and y.grad.tolist() == [2.0, 4.0] and y.clone().grad.tolist() == [2.0, 4.0]

def test_repr_hash_bool():
  a = Tensor([1, 2, 3])
  assert repr(a) == f"<Tensor <UOp {a.device} (3,) int> on {a.device} with grad None>"
  assert hash(a) != hash(Tensor([1, 2, 3])) and {a: 1}[a] == 1
  with pytest.raises(TypeError, match="__bool__ on Tensor is not defined"): bool(a)

def test_decode_hevc_frame():
  with pytest.raises(NotImplementedError, match="HEVC decoder"): Tensor([1]).decode_hevc_frame(None, (1,), Tensor([1]))


def test_global_counters_count_kernels():
  a = Tensor.ones(16, 16, device="PYTHON").contiguous().realize()
  b = Tensor.ones(16, 16, device="PYTHON").contiguous().realize()
  GlobalCounters.reset()
  (a + b).realize()
  # 0.14 counts one kernel, 256 adds and 3 * 1024 bytes moved for the same code
  assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == (1, 256, 3072)
  GlobalCounters.reset()
  a.sum().realize()
  assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == (1, 256, 1028)
  GlobalCounters.reset()
  assert (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem) == (0, 0, 0)

@pytest.mark.cpu
def test_keccak_matches_hashlib():
  # 24 rounds of Keccak-f are 24 kernels (a few seconds of compiling); hash() is 0.14's tree of them over 1 MiB: too slow to test here
  import hashlib
  msgs = [b"Hello World!", b"x" * 12]
  out = Tensor([list(m) for m in msgs], dtype=dtypes.uint8, device="CPU").keccak()
  assert out.shape == (2, 32) and out.dtype is dtypes.uint8
  assert [bytes(r).hex() for r in out.tolist()] == [hashlib.sha3_256(m).hexdigest() for m in msgs]
  with pytest.raises(ValueError, match="keccak cfg must be one of"): Tensor([1], dtype=dtypes.uint8).keccak("md5")
  with pytest.raises(RuntimeError, match="at least one dimension"): Tensor(1).keccak()

@pytest.mark.cpu
def test_full_tensors_are_independent():
  # as in tinygrad 0.14, full/zeros/ones (buffer=True, the default) are a buffer of their own each: equal ones are not one node
  a, b = Tensor.zeros(3), Tensor.zeros(3)
  assert a.uop is not b.uop
  a.requires_grad = True
  (a * 2 + 1).sum().backward()
  assert a.grad is not None and a.grad.tolist() == [2.0] * 3 and b.grad is None
  w = Tensor.zeros(3)
  w.requires_grad = True
  (w * Tensor([1.0, 2.0, 3.0])).sum().backward()
  assert w.grad.tolist() == [1.0, 2.0, 3.0]
  c, d = Tensor.zeros(3), Tensor.zeros(3)
  c.assign(Tensor([1.0, 2.0, 3.0]))
  assert c.tolist() == [1.0, 2.0, 3.0] and d.tolist() == [0.0] * 3
  e, f = Tensor.ones(2, 2).realize(), Tensor.ones(2, 2).realize()
  e[0] = 5
  assert e.tolist() == [[5.0, 5.0], [1.0, 1.0]] and f.tolist() == [[1.0, 1.0], [1.0, 1.0]]
  g = Tensor.full((2,), 7)
  g += 1
  assert g.tolist() == [8, 8] and Tensor.full((2,), 7).tolist() == [7, 7] and g.dtype is dtypes.int32
  x, y = Tensor.zeros(2, 2).realize(), Tensor.zeros(2, 2).realize()
  assert as_buffer(x.uop) is not as_buffer(y.uop)

@pytest.mark.cpu
def test_full_without_buffer_is_a_broadcast_constant():
  # buffer=False: the constant, fused into the kernels that read it (equal ones are one interned node, with no gradient)
  a, b = Tensor.full((4, 4), 2.0, buffer=False), Tensor.full((4, 4), 2.0, buffer=False)
  assert a.uop is b.uop and a.zeros_like(buffer=False, dtype=dtypes.float).uop is Tensor.zeros(4, 4, buffer=False).uop
  x = Tensor.ones(4, 4, buffer=False)
  GlobalCounters.reset()
  assert (x * a + 1).tolist() == [[3.0] * 4] * 4 and GlobalCounters.kernel_count == 1
  # with a buffer: one kernel fills it, one reads it (as 0.14 schedules it)
  GlobalCounters.reset()
  assert (Tensor.ones(4, 4) + 1).tolist() == [[2.0] * 4] * 4 and GlobalCounters.kernel_count == 2
