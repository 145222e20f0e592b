# The public surface of tinygrad (as 0.14's `from tinygrad import ...`).
from tinygrad.dtype import dtypes, DType  # noqa: F401
from tinygrad.helpers import getenv, Context, GlobalCounters, fetch  # noqa: F401
from tinygrad.uop.ops import UOp  # noqa: F401
Variable = UOp.variable
from tinygrad.device import Device  # noqa: F401,E402
import tinygrad.runtime  # noqa: F401,E402  (registers the runtimes with Device)
from tinygrad.tensor import Tensor  # noqa: F401,E402
from tinygrad.engine.jit import TinyJit  # noqa: F401,E402
from tinygrad.function import function  # noqa: F401,E402
