# The public surface: `from tinygrad import ...` and tinygrad.helpers names as tinygrad 0.14 has them, the Tensor names of creation,
# random, casting, shape and data with 0.14's parameters (recorded below from 0.14.0's inspect.signature).
import inspect
import pytest

def test_from_tinygrad_import():
  from tinygrad import Tensor, UOp, Variable, dtypes, GlobalCounters, fetch, Context, getenv, Device
  from tinygrad.helpers import getenv as g2, Context as c2, DEBUG, prod, flatten, GlobalCounters as gc2, fetch as f2, tqdm, Timing
  assert (g2, c2, gc2, f2) == (getenv, Context, GlobalCounters, fetch)
  assert Variable("n", 1, 10).op is UOp.variable("n", 1, 10).op and dtypes.float32.itemsize == 4 and isinstance(Device.DEFAULT, str)
  assert prod([2, 3]) == 6 and flatten([[1], [2, 3]]) == [1, 2, 3] and isinstance(DEBUG.value, int) and callable(tqdm) and callable(Timing)
  assert Tensor.__module__.startswith("tinygrad.tensor")
  for name in ("global_ops", "global_mem", "kernel_count", "mem_used", "time_sum_s", "reset"): assert hasattr(GlobalCounters, name)

REF_PARAMS = {
  'const': 'b dtype=None', 'empty': '*shape device=None dtype=None', 'full': 'shape fill_value dtype=None device=None buffer=True',
  'zeros': '*shape **kwargs', 'ones': '*shape **kwargs', 'arange': 'start stop=None step=1 dtype=None', 'linspace': 'start stop steps dtype=None',
  'eye': 'n m=None dtype=None', 'invalids': '*shape device=None dtype=None', 'from_blob': 'ptr shape **kwargs',
  'from_url': 'url gunzip=False **kwargs', 'empty_like': 'dtype=None device=None', 'full_like': 'fill_value dtype=None device=None buffer=True',
  'zeros_like': '**kwargs', 'ones_like': '**kwargs', 'const_like': 'b dtype=None', 'meshgrid': "*args indexing='ij'", 'manual_seed': 'seed=0',
  'rand': '*shape device=None dtype=None contiguous=True', 'rand_like': '**kwargs', 'randn': '*shape dtype=None **kwargs',
  'randn_like': 'dtype=None **kwargs', 'randint': '*shape low=0 high=10 dtype=dtypes.int **kwargs', 'normal': '*shape mean=0.0 std=1.0 **kwargs',
  'uniform': '*shape low=0.0 high=1.0 dtype=None **kwargs', 'scaled_uniform': '*shape **kwargs', 'glorot_uniform': '*shape **kwargs',
  'kaiming_uniform': '*shape a=0.01 **kwargs', 'kaiming_normal': '*shape a=0.01 **kwargs', 'randperm': 'n device=None dtype=dtypes.int **kwargs',
  'multinomial': 'num_samples=1 replacement=False', 'random_bits': 'key counter num', 'dropout': 'p=0.5', 'double': '', 'long': '', 'short': '',
  'bfloat16': '', 'float': '', 'half': '', 'int': '', 'bool': '', 'is_floating_point': '', 'element_size': '', 'size': 'dim=None', 'max_numel': '',
  'nbytes': '', 'clone': 'device=None', 'replace': 'x', 'realize': '*lst do_update_stats=True', 'cast': 'dtype', 'bitcast': 'dtype', 'numel': '',
  'item': '', 'data': '', 'tolist': '', 'numpy': '', 'to': 'device', 'to_': 'device', 'decode_hevc_frame': 'frame_pos shape state ref_frames=None',
}

def _params(fn) -> list[str]:
  ret = []
  for p in inspect.signature(fn).parameters.values():
    if p.name in ("self", "cls"): continue
    name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
    ret.append(name if p.default is p.empty else f"{name}={p.default!r}")
  return ret

@pytest.mark.parametrize("name", list(REF_PARAMS))
def test_signature_as_014(name):
  """Every parameter of 0.14 is there with its default, in 0.14's order (extra keyword parameters, like arange's device, may follow)."""
  from tinygrad import Tensor
  ours, ref = _params(getattr(Tensor, name)), REF_PARAMS[name].split()
  assert all(p in ours for p in ref), f"Tensor.{name}{tuple(ours)} lacks some of 0.14's {tuple(ref)}"
  assert [ours.index(p) for p in ref] == sorted(ours.index(p) for p in ref), f"Tensor.{name}{tuple(ours)}: 0.14's order is {tuple(ref)}"

def test_max_shape_is_property():
  from tinygrad import Tensor
  assert isinstance(inspect.getattr_static(Tensor, "max_shape"), property)
