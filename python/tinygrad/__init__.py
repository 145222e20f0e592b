# The public surface of tinygrad. Later layers (Tensor, Device, TinyJit, nn) are added here as they land.
from tinygrad.dtype import dtypes, DType  # noqa: F401
from tinygrad.helpers import getenv, Context  # noqa: F401
from tinygrad.uop.ops import UOp  # noqa: F401
Variable = UOp.variable
from tinygrad.device import Device  # noqa: F401,E402
from tinygrad.tensor import Tensor  # noqa: F401,E402
