# Indices wider than 32 bits through the whole pipeline: the rendered types (NULL and PYTHON render without running, so no memory is
# needed) and, on CPU, the values of uint8 tensors just past 2**31 elements (2 GB each: marked slow, deselect with -m 'not slow').
import re
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor, dtypes, Device
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, Ops, ParamArg
from tinygrad.codegen import lower_ast
from tinygrad.uop.ops import KernelInfo
from tinygrad.engine.realize import get_spec

def specs(t:Tensor, device:str) -> list:
  items, _ = t.schedule()
  return [get_spec(si, device) for si in items if si.ast.op is Ops.SINK]

def loop_dtypes(spec) -> set: return {u.dtype for u in spec.uops if u.op is Ops.RANGE}
def offset_dtypes(spec) -> set: return {u.src[1].dtype for u in spec.uops if u.op is Ops.INDEX and u.src[0].op is Ops.PARAM}

class TestRenderedTypes:
  def test_small_kernels_stay_int(self):
    for t in (Tensor.empty(100, 100, device="NULL").sum(axis=1), Tensor.empty(16, 16, device="NULL").pad(((1, 1), (2, 2))).flip(0) + 1):
      for sp in specs(t, "NULL"):
        # (the pad kernel's loops are split at the pad's edges: ridx0_0, ridx0_1, ...)
        assert "long" not in sp.src and "for (int ridx0" in sp.src, sp.src
  def test_loop_past_2_33(self):
    # an int sum of a constant: one loop (a float one is staged)
    (sp,) = specs(Tensor.ones(2**33 + 7, dtype=dtypes.int32, device="NULL", buffer=False).sum(), "NULL")
    assert "for (long ridx0 = 0; ridx0 < 8589934599l; ridx0++) {" in sp.src, sp.src
  def test_offset_past_2_31(self):
    (sp,) = specs(Tensor.empty(65539, 32773, dtype=dtypes.uint8, device="NULL")[-1, -1], "NULL")
    # the offset is 65538*32773 + 32772 = 2147909646: an int64 literal, not int32's -2147057650
    assert "const unsigned char* restrict data1_2147909647" in sp.src and "data1_2147909647[2147909646l]" in sp.src, sp.src
    assert "-2147057650" not in sp.src
  def test_only_wide_expressions_widen(self):
    (sp,) = specs(Tensor.empty(2**31 + 4, dtype=dtypes.uint8, device="NULL").reshape(4, -1).permute(1, 0).contiguous(), "NULL")
    # the loop counter and the offsets below 2**31 stay int; the last row's offset is computed in long
    assert "for (int ridx0 = 0; ridx0 < 536870913; ridx0++)" in sp.src and "data1_2147483652[ridx0+1073741826]" in sp.src, sp.src
    assert "long cast0 = (long)ridx0;" in sp.src and "data1_2147483652[cast0+1610612739l]" in sp.src, sp.src
  def test_python_device(self):
    (sp,) = specs(Tensor.ones(2**33 + 7, dtype=dtypes.int32, device="PYTHON", buffer=False).sum(), "PYTHON")
    assert loop_dtypes(sp) == {dtypes.int64} and "range(8589934599)" in sp.src
    (sp,) = specs(Tensor.empty(65539, 32773, dtype=dtypes.uint8, device="PYTHON")[-1, -1], "PYTHON")
    assert offset_dtypes(sp) == {dtypes.int64, dtypes.int32} and "[2147909646]" in sp.src   # the load's offset and the store's 0
    assert not any(u.dtype is dtypes.weakint for u in sp.uops)
    (sp,) = specs(Tensor.empty(100, 100, device="PYTHON").sum(axis=1), "PYTHON")
    assert loop_dtypes(sp) == offset_dtypes(sp) == {dtypes.int32}

  def test_expanded_store_past_2_31(self):
    # tinygrad's null test: a (2048, 2048, 1) buffer expanded to 2**33 elements is stored through a 64-bit offset; 64 per dim stays int
    (sp,) = specs(Tensor.empty(2048, 2048, 1, device="NULL").expand(-1, -1, 2048).contiguous(), "NULL")
    assert "long" in sp.src and "8589934592" in sp.src, sp.src
    (sp,) = specs(Tensor.empty(64, 64, 1, device="NULL").expand(-1, -1, 64).contiguous(), "NULL")
    assert "long" not in sp.src, sp.src
    # the same with a symbolic size: its bound decides (2048 * 2048 * 2048 needs long, 256 * 256 * 64 does not)
    (sp,) = specs(Tensor.empty(2048, 2048, 1, device="NULL").expand(-1, -1, UOp.variable("d", 1, 2048).bind(32)).contiguous(), "NULL")
    assert "data0_8589934592[" in sp.src and "*2048l)" in sp.src, sp.src
    (sp,) = specs(Tensor.empty(256, 256, 1, device="NULL").expand(-1, -1, UOp.variable("d", 1, 64).bind(32)).contiguous(), "NULL")
    assert "long" not in sp.src, sp.src

@pytest.mark.cpu
class TestIndexPast2_31:
  """Tensors of more than 2**31 elements made by expand or arange (no memory behind them): positions past int32 stay exact."""
  def test_gather_from_an_expand(self):
    # tinygrad's test_tensor_index_overflow; its index list has no dtype: 2**31 + 2 makes it int64 (0.14 wraps it into int32)
    big = Tensor([1]).expand(2**31 + 3)
    assert big[Tensor([0, 2**31 + 2])].tolist() == [1, 1]
    assert big[Tensor([0, 2**31 + 2, -1], dtype=dtypes.int64)].tolist() == [1, 1, 1]
  def test_arange_past_int32(self):
    # an int range past the default int is int64 (as in 0.14), so its values and the positions indexing it don't wrap
    n = 2**31 + 5
    assert Tensor.arange(2**31, 2**31 + 3).dtype is dtypes.int64 and Tensor.arange(-2**31 - 1, 0).dtype is dtypes.int64
    assert Tensor.arange(2**31 - 1).dtype is dtypes.int32
    with pytest.raises(OverflowError): Tensor.arange(n, dtype=dtypes.int32)   # an explicit dtype that can't hold it, as 0.14
    a = Tensor.arange(n)
    assert a[-3:].tolist() == [n - 3, n - 2, n - 1] and a[2**31 - 1:2**31 + 1].tolist() == [2**31 - 1, 2**31]
    assert a[Tensor([0, n - 1, -2, 2**31], dtype=dtypes.int64)].tolist() == [0, n - 1, n - 2, 2**31]
    assert a.shrink(((n - 4, n),)).sum().item() == 4 * n - 10
  def test_int_index_into_an_expand(self):
    assert Tensor([7]).expand(2**33)[2**33 - 1].item() == 7 and Tensor([1], dtype=dtypes.int64).expand(2**32 + 3).sum().item() == 2**32 + 3

@pytest.mark.cpu
def test_threading_split_past_2_31():
  # the CPU kernel runs once per core: core_id*(N/n) is computed in long, the per-thread loop stays int
  (sp,) = specs(Tensor.empty(2**32 + 8, dtype=dtypes.uint8, device="CPU") + 1, "CPU")
  assert sp.global_size[0] > 1 and sp.var_dtypes == (dtypes.int32,) and "const int core_id" in sp.src, sp.src
  # (the loop is the inner part of the split output range: its name carries the split path, ridx0_1...)
  assert re.search(r"for \(int ridx0[_0-9]* = 0;", sp.src) and "((long)core_id)*" in sp.src, sp.src

@pytest.mark.cpu
@pytest.mark.slow
class TestCPUValues:
  def test_sum_uint8_past_2_31(self):
    s = Tensor.ones(2**31 + 5, dtype=dtypes.uint8, buffer=False).sum()
    assert s.dtype is dtypes.uint32 and s.item() == 2**31 + 5       # tinygrad 0.14 sums uint8 in uint32
  def test_sum_of_a_buffer_past_2_31(self):
    # realized first: the sum reads 2**31 + 8 bytes of memory, not a constant
    assert Tensor.ones(2**31 + 8, dtype=dtypes.uint8).contiguous().sum().item() == 2**31 + 8
  def test_last_element_past_2_31(self):
    t = Tensor.ones(65540, 32772, dtype=dtypes.uint8).contiguous()
    assert t[-1, -1].item() == 1 and t[0, 0].item() == 1
    assert Tensor.ones(65539, 32773, dtype=dtypes.uint8)[-1, -1].item() == 1   # the example (it segfaulted)

@pytest.mark.parametrize("device", DEVICES)
def test_tensor_math_with_a_variable_past_int32(device):
  # a bound Variable declared past int32 enters tensor math at its full value (it was cast to int32 first: 2**40 became 0)
  from tinygrad import Variable
  v = Variable("k", -2**40, 2**40)
  for val in (2**40, -2**33 - 3, 7):
    assert (Tensor.ones(4, device=device) * v.bind(val)).numpy().tolist() == [float(np.float32(val))] * 4
    assert (Tensor.ones(2, dtype=dtypes.int64, device=device) * (v.bind(val) + 1)).numpy().tolist() == [val + 1] * 2
    # computed from it: the value fits int32, the Variable it is computed from does not
    assert (Tensor.ones(2, dtype=dtypes.int64, device=device) * (v.bind(val) // 2**20)).numpy().tolist() == [val // 2**20] * 2
    assert (Tensor.ones(2, dtype=dtypes.int64, device=device) * (v.bind(val) % 7 + 3)).numpy().tolist() == [val % 7 + 3] * 2

@pytest.mark.parametrize("device", DEVICES)
def test_variable_wider_than_int32(device):
  # a kernel argument whose declared range needs 64 bits is passed as int64 (C `const long`, a ctypes c_int64)
  n = UOp.variable("n", 0, 2**40, param=True)
  out = UOp(Ops.PARAM, dtypes.float, (UOp.const(1),), ParamArg(0, dtypes.float))
  value = UOp(Ops.CAST, dtypes.float, (n + (-2**33),), dtypes.float)
  ast = UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float, (out, UOp.const(0))), value)),), KernelInfo("E_n"))
  spec = Device[device].renderer.to_program(lower_ast(ast).uops)
  assert spec.var_dtypes == (dtypes.int64,)
  # pinned C text: the argument's C type and the literal's suffix are what makes the 64-bit value reach the kernel
  if device == "CPU": assert "const long n" in spec.src and "8589934592l" in spec.src, spec.src
  buf = Buffer(device, 1, dtypes.float).ensure_allocated()
  Device[device].run(spec, [buf], {"n": 2**33 + 5})
  assert buf.numpy().tolist() == [5.0]
