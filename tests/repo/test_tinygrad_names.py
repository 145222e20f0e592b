# Names at tinygrad 0.14's module paths (issue 24): each imported from where 0.14 has it, and its behaviour checked.
import numpy as np
import pytest
from tinygrad import Tensor, Device
from tinygrad.uop.ops import UOp, UPat, Ops, PatternMatcher, TrackedPatternMatcher, KernelInfo, graph_rewrite, set_track_match_stats
from tinygrad.uop.ops import track_rewrites_log, match_stats_table
from tinygrad.nn.state import TensorIO
from tinygrad.schedule import schedule_cache
from tinygrad.codegen import to_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.engine.realize import compile_linear, estimate_uop, run_linear

pytestmark = pytest.mark.cpu

def test_kernel_info_fields():
  k = KernelInfo(name="my_kernel", opts_to_apply=())
  assert k.applied_opts == () and k.opts_to_apply == () and k.function_name == "my_kernel" and KernelInfo().name == "test"

def test_tracked_pattern_matcher_records_even_if_built_untracked():
  pm = TrackedPatternMatcher([(UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), lambda x: x)])
  assert isinstance(pm, PatternMatcher)
  x = UOp.variable("names_a", 0, 10)
  set_track_match_stats(2)
  try:
    n = len(track_rewrites_log)
    assert graph_rewrite(x + 0, pm, name="tracked") is x
    rec = track_rewrites_log[n]
    assert rec.name == "tracked" and len(rec.matches) == 1 and rec.matches[0][1] is x
    assert rec.matches[0][2][0] == __file__
    assert any(__file__.split("/")[-1] in line for line in match_stats_table())
  finally: set_track_match_stats(0)

def test_uop_device_base_buffer_identity():
  a = Tensor([1.0, 2.0, 3.0]).realize()
  v = (a + 1).reshape(3, 1).expand(3, 2)
  assert v.uop.device == "CPU" and a.to("PYTHON").uop.device == "PYTHON"
  assert v.uop.base is (a + 1).uop and a.reshape(1, 3).uop.base is a.uop
  assert a.uop.has_buffer_identity() and a.reshape(1, 3).uop.has_buffer_identity() and not a[1:].uop.has_buffer_identity()

def test_tensor_io():
  f = TensorIO(Tensor(b"Hello World!"))
  assert f.read(5) == b"Hello" and f.tell() == 5 and f.seek(-2, 2) == 10 and f.read() == b"d!" and f.seek(100) == 12 and f.read(3) == b""
  with pytest.raises(ValueError): TensorIO(Tensor([1.0]))

def test_schedule_cache_hit():
  def step(): return (Tensor.empty(8) * 2 + 1).schedule_linear()
  step()
  n = len(schedule_cache)
  step()
  assert len(schedule_cache) == n

def test_to_program_compile_linear_estimate_uop():
  a = Tensor(np.arange(256, dtype=np.float32).reshape(16, 16)).realize()
  out = (a * 2).sum(axis=1)
  ast = out.schedule_linear().src[-1].src[0]
  ren = Device["CPU"].renderer
  p = to_program(ast.replace(arg=KernelInfo(opts_to_apply=())), ren)
  assert p.op is Ops.PROGRAM and p.src[0].arg.applied_opts == () and "for" in p.src[2].arg
  opts = (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 4))
  assert to_program(ast.replace(arg=KernelInfo(opts_to_apply=opts)), ren).src[0].arg.applied_opts == opts
  assert to_program(ast.replace(arg=KernelInfo(name="custom")), ren).arg.name == "custom"
  out = (a * 2).sum(axis=1)   # a fresh graph: compile_linear lowers what run_linear would
  lin = compile_linear(out.schedule_linear())
  assert lin.src[-1].src[0].op is Ops.PROGRAM
  run_linear(lin)
  np.testing.assert_allclose(out.numpy(), (np.arange(256, dtype=np.float32).reshape(16, 16) * 2).sum(axis=1))
  est = estimate_uop(lin.src[-1])
  assert est.ops >= 256 and est.mem >= 256 * 4

def test_custom_kernel_recipe_from_seeds():
  # the seed's recipe: stores over a range, grouped, the range ended, then .sink(arg=KernelInfo(name=...))
  n = 10
  def shift(out:UOp, inp:UOp) -> UOp:
    r = UOp.range(n - 1, 0)
    copies = [out[r].store(inp[r + 1]), out[r + 1].store(inp[r] * 2)]
    return UOp.group(*copies).end(r).sink(arg=KernelInfo(name="my_kernel"))
  x = np.arange(n, dtype=np.float32)
  res = Tensor.empty(n).custom_kernel(Tensor(x), fxn=shift)[0]
  want = np.empty(n, np.float32)
  for i in range(n - 1): want[i], want[i + 1] = x[i + 1], x[i] * 2   # the loop body in order: the next iteration overwrites want[i + 1]
  np.testing.assert_allclose(res.numpy(), want)

def test_spec_tables_at_their_0_14_names():
  from tinygrad.uop.spec import spec_shared, spec_program, spec_linear, type_verify
  from tinygrad.dtype import dtypes
  one = UOp.const(dtypes.int, 1)
  type_verify(UOp(Ops.ADD, dtypes.int, (one, one)), spec_shared)   # 0.14's two-argument form
  bad = UOp(Ops.ADD, dtypes.float, (UOp.const(dtypes.int, 1), UOp.const(dtypes.int, 2)))   # an int add claiming a float result
  with pytest.raises(RuntimeError, match="SPEC: the graph is invalid"): type_verify(bad, spec_shared)
  assert spec_program is spec_linear
  with pytest.raises(RuntimeError): type_verify([bad], spec_program)

def test_from_storage_scalar_in_ops_python():
  from tinygrad.runtime.ops_python import from_storage_scalar, to_storage_scalar
  from tinygrad.dtype import dtypes
  assert from_storage_scalar(0x3F80, dtypes.bfloat16) == 1.0 and to_storage_scalar(1.0, dtypes.bfloat16) == 0x3F80
  assert from_storage_scalar(5, dtypes.int32) == 5

def test_ggml_iq_grid_matches_the_gguf_package():
  gguf_quants = pytest.importorskip("gguf.quants")
  from tinygrad.llm.gguf import _ggml_iq_grid
  for cls, shape in ((gguf_quants.IQ2_S, (1024, 8)), (gguf_quants.IQ3_XXS, (256, 4)), (gguf_quants.IQ3_S, (512, 4))):
    cls.init_grid()
    ref = np.asarray(cls.grid, dtype=np.float32).reshape(shape)
    words = tuple(int(w) for w in ref.astype(np.uint8).view("<u8" if shape[1] == 8 else "<u4").reshape(-1))   # ggml's packed words
    np.testing.assert_equal(_ggml_iq_grid(Device.DEFAULT, words, shape).numpy(), ref)
  with pytest.raises(ValueError, match="can't be shaped"): _ggml_iq_grid(Device.DEFAULT, (1, 2, 3), (4, 4))

def test_tensor_module_names():
  import numpy as np
  from tinygrad import dtypes
  from tinygrad.tensor import Tensor, Device, _to_np_dtype, is_numpy_ndarray
  assert np.dtype(_to_np_dtype(dtypes.float16)) == np.float16 and np.dtype(_to_np_dtype(dtypes.int64)) == np.int64
  assert is_numpy_ndarray(np.zeros(2)) and not is_numpy_ndarray([0, 0]) and not is_numpy_ndarray(Tensor([0]))
  assert Device.DEFAULT in ("CPU", "CUDA")
