# Renderer.pre_matcher: a user's PatternMatcher run on the lowered kernel after the codegen passes (and the renderer's extra_matcher),
# before linearizing, so users can transform kernels without editing the package.
import re
import numpy as np
import pytest
from tests.helpers.devices import DEVICES
from tinygrad import Tensor
from tinygrad.device import Device
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, Ops
from tinygrad.dtype import dtypes
from tinygrad.codegen import lower_ast, get_program, full_rewrite_to_sink
from tinygrad.renderer.cstyle import ClangRenderer

def _twice_as_add(x:UOp, c:UOp) -> UOp|None: return UOp(Ops.ADD, x.dtype, (x, x)) if dtypes.is_float(x.dtype) and c.arg == 2 else None
# the user's rule: x*2 -> x+x for floats
x_times_2_as_add = PatternMatcher([(UPat(Ops.MUL, src=[UPat.var("x"), UPat.cvar("c")]), _twice_as_add)])

class AddNotMul(ClangRenderer):
  pre_matcher = x_times_2_as_add

def rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def kernel_ast(t:Tensor) -> UOp:
  items, _ = t.schedule()
  return items[-1].ast

def test_subclass_hook_changes_the_source():
  ast = kernel_ast(Tensor(rand(16)) * 2 + 1)
  plain, hooked = get_program(ast, ClangRenderer()).src, get_program(ast, AddNotMul()).src
  assert "*2.0f" in plain.replace(" ", "") and "*2.0f" not in hooked.replace(" ", "")
  # the doubled value is an addition of a value to itself (vector lanes or scalars, whatever the upcast made)
  assert re.search(r"\b(\w+)\+\1\b", hooked.replace(" ", "")), hooked

def test_hook_runs_after_extra_matcher_with_renderer_ctx():
  seen: list = []
  def spy(ctx, s):
    seen.append(ctx)
    return None
  class Both(ClangRenderer):
    # extra_matcher doubles by x*2 first, pre_matcher then sees (and rewrites) it
    extra_matcher = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("x"), UPat.var("x")], dtype=dtypes.float32), lambda x: x * 2.0)])
    pre_matcher = x_times_2_as_add + PatternMatcher([(UPat(Ops.SINK, name="s"), spy)])
  ren = Both()
  x = Tensor(rand(8))
  sink = full_rewrite_to_sink(kernel_ast(x + x), ren)
  assert seen and all(c is ren for c in seen)
  assert not [u for u in sink.toposort() if u.op is Ops.MUL and u.dtype is dtypes.float32]
  assert [u for u in sink.toposort() if u.op is Ops.ADD and u.dtype is dtypes.float32 and u.src[0] is u.src[1]]

def test_no_hook_by_default():
  assert ClangRenderer.pre_matcher is None and Device["PYTHON"].renderer.pre_matcher is None

@pytest.mark.parametrize("device", DEVICES)
def test_instance_hook_runs_and_results_match(device):
  ren = Device[device].renderer
  a = rand(37)
  try:
    ren.pre_matcher = x_times_2_as_add
    t = Tensor(a, device=device) * 2 - 3
    k = lower_ast(kernel_ast(t), device)
    assert not [u for u in k.uops if u.op is Ops.MUL and dtypes.is_float(u.dtype)]
    np.testing.assert_allclose(t.numpy(), a * 2 - 3, rtol=1e-6)
  finally: ren.pre_matcher = None
  # without the hook the same kernel is compiled again: its MUL is back
  assert [u for u in lower_ast(kernel_ast(Tensor(a, device=device) * 2 - 3), device).uops if u.op is Ops.MUL and dtypes.is_float(u.dtype)]
  np.testing.assert_allclose((Tensor(a, device=device) * 2 - 3).numpy(), a * 2 - 3, rtol=1e-6)
