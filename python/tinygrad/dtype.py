# Scalar data types, the type promotion lattice, and exact per-dtype value rounding (used for constant folding).
# DTypes are interned: building one with the same fields returns the same object, so `is`/identity hashing is correct
# and a pickle round trip gives back the canonical instance. The Rust core relies on both.
# In tinygrad 0.14 a DType is always a scalar: vector width lives in a UOp's shape and memory spaces on its arg (AddrSpace).
from __future__ import annotations
import ctypes
import functools
import math
import operator
import struct
from fractions import Fraction
from dataclasses import dataclass, fields
from enum import IntEnum, auto
from typing import Callable, ClassVar, Final, Literal
from tinygrad.helpers import getenv, DEFAULT_FLOAT, DEFAULT_INT

# *** constant values ***

class ConstFloat(float):
  """A float constant that can key a cache: -0.0 and 0.0 hash differently (they fold differently), and nan equals nan."""
  __slots__ = ("bits",)
  bits: int
  def __new__(cls, v:float):
    self = super().__new__(cls, v)
    self.bits = struct.unpack("<Q", struct.pack("<d", self))[0]
    return self
  def __eq__(self, other):
    if self is other: return True
    if isinstance(other, float) and math.isnan(self) and math.isnan(other): return True
    return float.__eq__(self, other)
  def __ne__(self, other):
    eq = self.__eq__(other)
    return eq if eq is NotImplemented else not eq
  def __hash__(self): return hash(self.bits)
  def __repr__(self): return f"ConstFloat({float.__repr__(self)})"
  def __str__(self): return float.__repr__(self)
  def __reduce__(self): return ConstFloat, (float(self),)

class InvalidType:
  """The type of `Invalid`, the marker value of an index that points nowhere. A singleton, also across pickling."""
  _instance: ClassVar[InvalidType|None] = None
  def __new__(cls):
    if cls._instance is None: cls._instance = object.__new__(cls)
    return cls._instance
  # foreign types get NotImplemented, so Python falls back to their reflected __eq__ (a UOp compares itself to Invalid)
  def __eq__(self, other): return self is other if isinstance(other, InvalidType) else NotImplemented
  def __hash__(self): return id(self)
  def __repr__(self): return "Invalid"
  def __format__(self, spec): return "Invalid"
  def __reduce__(self): return InvalidType, ()

Invalid = InvalidType()

PyConst = float|int|bool
ConstType = PyConst|InvalidType

# struct module format characters of the dtypes that have one
FmtStr = Literal['?', 'b', 'B', 'h', 'H', 'i', 'I', 'q', 'Q', 'e', 'f', 'd']
_FMT_CHARS = frozenset("?bBhHiIqQefd")

class AddrSpace(IntEnum):
  """Where a buffer lives: device global memory, workgroup-local memory, registers, or plain ALU values."""
  def __str__(self): return repr(self)
  def __repr__(self): return f"{type(self).__name__}.{self.name}"
  GLOBAL = auto(); LOCAL = auto(); REG = auto(); ALU = auto()

# *** DType ***

class DTypeMetaClass(type):
  """Interns DTypes: one object per distinct (class, fields)."""
  dcache: dict[tuple, DType] = {}
  def __call__(cls, *args, **kwargs):
    if kwargs:  # normalise keywords to positional order so DType(14, 32, name="float", fmt="f") hits the same entry
      names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
      if unknown := set(kwargs) - set(names[len(args):]): raise TypeError(f"{cls.__name__} got unexpected or repeated fields {sorted(unknown)}")
      if missing := [n for n in names[len(args):] if n not in kwargs]: raise TypeError(f"{cls.__name__} is missing fields {missing}")
      args = args + tuple(kwargs[n] for n in names[len(args):])
    key = (cls, *args)
    if (ret := DTypeMetaClass.dcache.get(key)) is None: ret = DTypeMetaClass.dcache[key] = super().__call__(*args)
    return ret

@dataclass(frozen=True, eq=False)
class DType(metaclass=DTypeMetaClass):
  priority: int          # position in the promotion order (see __lt__ and least_upper_dtype)
  bitsize: int
  name: str              # the C spelling, e.g. "unsigned char", "__bf16"
  fmt: FmtStr|None       # struct format char, None where struct has none (bfloat16, fp8, void, weak types)
  def __post_init__(self):
    if not isinstance(self.priority, int) or not isinstance(self.bitsize, int) or self.bitsize < 0:
      raise TypeError(f"DType priority and bitsize must be ints (bitsize >= 0), got {self.priority!r} and {self.bitsize!r}")
    if not isinstance(self.name, str): raise TypeError(f"DType name must be a str, got {self.name!r}")
    if self.fmt is not None and self.fmt not in _FMT_CHARS:
      raise ValueError(f"DType fmt must be one of {''.join(sorted(_FMT_CHARS))} or None, got {self.fmt!r}")
  @property
  def itemsize(self) -> int: return (self.bitsize + 7) // 8
  @staticmethod
  def new(priority:int, bitsize:int, name:str, fmt:FmtStr|None) -> DType: return DType(priority, bitsize, name, fmt)
  # rebuilding through the constructor goes through the intern cache, so unpickling yields the canonical object
  def __reduce__(self): return type(self), (self.priority, self.bitsize, self.name, self.fmt)
  def __repr__(self):
    if (attr := INVERSE_DTYPES_DICT.get(self.name)) is not None and getattr(dtypes, attr, None) is self: return f"dtypes.{attr}"
    return f"DType({self.priority}, {self.bitsize}, {self.name!r}, {self.fmt!r})"
  def __lt__(self, o:DType):
    if not isinstance(o, DType): return NotImplemented   # `dtype < 3` is a TypeError, as for any unordered pair of types
    return (self.priority, self.bitsize, self.name, self.fmt) < (o.priority, o.bitsize, o.name, o.fmt)
  @functools.cached_property
  def min(self):
    """Smallest value: the int range for ints, -inf for floats (the fp8 formats without an infinity: their lowest finite value, so a
    max reduce starts from a value of the dtype), False for bool (and other dtypes)."""
    if dtypes.is_int(self): return 0 if dtypes.is_unsigned(self) else -2**(self.bitsize-1)
    if self in _FP8_FORMATS and _FP8_FORMATS[self][4] != "ieee": return -fp8_max(self)
    return -math.inf if dtypes.is_float(self) else False
  @functools.cached_property
  def max(self):
    if dtypes.is_int(self): return 2**self.bitsize - 1 + self.min
    if self in _FP8_FORMATS and _FP8_FORMATS[self][4] != "ieee": return fp8_max(self)
    return math.inf if dtypes.is_float(self) else True
  def const(self, val:ConstType) -> ConstType:
    """val as a constant of this dtype: floats are rounded to the dtype and wrapped in ConstFloat, bools and ints converted.
    Ints are NOT wrapped around here (truncate does that)."""
    if isinstance(val, InvalidType): return val
    if dtypes.is_float(self):
      # every nan becomes the one canonical nan so equal constants intern together
      fval = math.nan if isinstance(val, float) and math.isnan(val) else float(val)
      return ConstFloat(truncate.get(self, float)(fval))
    return bool(val) if self is dtypes.bool else int(val)

# *** the dtypes namespace ***

class DTypes:
  # the predicates come first: further down the class body, `bool`, `int` and `float` name dtypes, not builtins
  @staticmethod
  def is_float(x:DType) -> bool: return x in _FLOAT_SET
  @staticmethod
  def is_int(x:DType) -> bool: return x in _INT_SET
  @staticmethod
  def is_unsigned(x:DType) -> bool: return x in _UINT_SET
  @staticmethod
  def is_bool(x:DType) -> bool: return x is dtypes.bool
  @staticmethod
  def from_py(x) -> DType:
    """The dtype a Python value gets: bool, the weak int/float for scalars, and the strong promotion of a (nested) list's items."""
    if isinstance(x, (bool, InvalidType)): return dtypes.bool  # before int: True is an int too
    if isinstance(x, float): return dtypes.weakfloat
    if isinstance(x, int): return dtypes.weakint
    if isinstance(x, (list, tuple)): return strong_dtype(max(dtypes.from_py(xi) for xi in x)) if x else dtypes.default_float
    raise RuntimeError(f"Could not infer dtype of {x!r} with type {type(x)}")
  @staticmethod
  def finfo(dtype:DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    if (ret := _FINFO.get(dtype)) is None: raise ValueError(f"{dtype} is not a floating point type")
    return ret
  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_DICT

  # NOTE: definition order is kept by DTYPES_DICT, and the alias spellings below win in repr (dtypes.uint8 prints as dtypes.uchar)
  void: Final[DType] = DType.new(-1, 0, "void", None)
  weakint: Final[DType] = DType.new(0, 800, "weakint", None)    # a Python int literal: adopts the other operand's int type
  bool: Final[DType] = DType.new(0, 1, "bool", '?')
  int8: Final[DType] = DType.new(1, 8, "signed char", 'b')
  uint8: Final[DType] = DType.new(2, 8, "unsigned char", 'B')
  int16: Final[DType] = DType.new(3, 16, "short", 'h')
  uint16: Final[DType] = DType.new(4, 16, "unsigned short", 'H')
  int32: Final[DType] = DType.new(5, 32, "int", 'i')
  uint32: Final[DType] = DType.new(6, 32, "unsigned int", 'I')
  int64: Final[DType] = DType.new(7, 64, "long", 'q')
  uint64: Final[DType] = DType.new(8, 64, "unsigned long", 'Q')
  _uint128: Final[DType] = DType.new(8, 128, "uint128", None)   # internal, for wide intermediate math
  _uint256: Final[DType] = DType.new(8, 256, "uint256", None)
  weakfloat: Final[DType] = DType.new(9, 800, "weakfloat", None)  # a Python float literal: adopts the other operand's float type
  fp8e4m3: Final[DType] = DType.new(10, 8, "float8_e4m3", None)
  fp8e5m2: Final[DType] = DType.new(11, 8, "float8_e5m2", None)
  fp8e4m3fnuz: Final[DType] = DType.new(10, 8, "float8_e4m3fnuz", None)
  fp8e5m2fnuz: Final[DType] = DType.new(11, 8, "float8_e5m2fnuz", None)
  float16: Final[DType] = DType.new(12, 16, "half", 'e')
  bfloat16: Final[DType] = DType.new(13, 16, "__bf16", None)
  float32: Final[DType] = DType.new(14, 32, "float", 'f')
  float64: Final[DType] = DType.new(15, 64, "double", 'd')

  half = float16; float = float32; double = float64
  uchar = uint8; ushort = uint16; uint = uint32; ulong = uint64
  char = int8; short = int16; int = int32; long = int64

  # the defaults follow the DEFAULT_FLOAT / DEFAULT_INT ContextVars, so Context(DEFAULT_FLOAT="half") changes them
  @property
  def default_float(self) -> DType: return to_dtype(DEFAULT_FLOAT.value)
  @property
  def default_int(self) -> DType: return to_dtype(DEFAULT_INT.value)

  fp8_ocp = (fp8e4m3, fp8e5m2)
  fp8_fnuz = (fp8e4m3fnuz, fp8e5m2fnuz)
  fp8s = fp8_ocp + fp8_fnuz
  floats = fp8s + (float16, bfloat16, float32, float64)
  int8s = (uint8, int8)
  int16s = (uint16, int16)
  int32s = (uint32, int32)
  int64s = (uint64, int64)
  uints = (uint8, uint16, uint32, uint64)
  sints = (int8, int16, int32, int64)
  ints = uints + sints
  weaks = (weakint, weakfloat)
  all = floats + ints + (bool,)  # noqa: A003

dtypes = DTypes()

_FLOAT_SET = frozenset(dtypes.floats + (dtypes.weakfloat,))
_INT_SET = frozenset(dtypes.ints + (dtypes.weakint,))
_UINT_SET = frozenset(dtypes.uints)
_FINFO = {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52),
          dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.fp8e4m3fnuz: (4, 3), dtypes.fp8e5m2fnuz: (5, 2)}

# public names of the real (non-internal, non-weak) dtypes, aliases included, in definition order
DTYPES_DICT: dict[str, DType] = {k: v for k, v in DTypes.__dict__.items()
                                  if isinstance(v, DType) and not k.startswith(("default", "void", "weak", "_"))}
# C name -> attribute name used in repr; later aliases overwrite earlier names ("float" over "float32")
INVERSE_DTYPES_DICT: dict[str, str] = {**{v.name: k for k, v in DTYPES_DICT.items()}, "void": "void", "weakint": "weakint", "weakfloat": "weakfloat",
                                       "uint128": "_uint128", "uint256": "_uint256"}

DTypeLike = str|DType
class NotADTypeError(TypeError, AttributeError):
  """A dtype argument that is neither a DType nor a name: a TypeError, and the AttributeError tinygrad 0.14 raises for it (0.14 looks
  every dtype argument up as an attribute of dtypes), so code catching either keeps working."""

class UnknownDTypeError(ValueError, AttributeError):
  """A dtype name dtypes has no DType for: a ValueError (a bad value), and the AttributeError tinygrad 0.14 raises for it."""

def to_dtype(dtype:DTypeLike) -> DType:
  """A DType from a DType or a name ("float32", "half", "default_float"; case-insensitive). An unknown name raises UnknownDTypeError
  (an AttributeError, as in tinygrad 0.14); anything else NotADTypeError."""
  if isinstance(dtype, DType): return dtype
  if not isinstance(dtype, str): raise NotADTypeError(f"expected a DType or a dtype name, got {dtype!r} of type {type(dtype).__name__}")
  name = dtype.lower()
  if name.startswith("_") or not isinstance(ret := getattr(dtypes, name, None), DType):
    raise UnknownDTypeError(f"unknown dtype name {dtype!r} (dtypes has no attribute {name!r})")
  return ret

if not dtypes.is_float(dtypes.default_float): raise ValueError(f"DEFAULT_FLOAT={DEFAULT_FLOAT.value} is not a float dtype")
if not dtypes.is_int(dtypes.default_int): raise ValueError(f"DEFAULT_INT={DEFAULT_INT.value} is not an int dtype")

def strong_dtype(dtype:DType) -> DType:
  """Weak literal types become the concrete defaults; everything else is unchanged."""
  if dtype is dtypes.weakint: return dtypes.default_int
  if dtype is dtypes.weakfloat: return dtypes.default_float
  return dtype
def weak_dtype(dtype:DType) -> DType:
  return dtypes.weakfloat if dtypes.is_float(dtype) else dtypes.weakint if dtypes.is_int(dtype) else dtype

# *** promotion ***

# JAX-style promotion lattice (https://jax.readthedocs.io/en/latest/jep/9407-type-promotion.html): each dtype lists the dtypes
# directly above it. The result of promoting several dtypes is the smallest (by DType.__lt__) dtype above all of them.
promo_lattice: dict[DType, list[DType]] = {
  dtypes.bool: [dtypes.weakint], dtypes.weakint: [dtypes.int8, dtypes.uint8],
  dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32], dtypes.int32: [dtypes.int64], dtypes.int64: [dtypes.weakfloat],
  dtypes.uint8: [dtypes.int16, dtypes.uint16], dtypes.uint16: [dtypes.int32, dtypes.uint32],
  dtypes.uint32: [dtypes.int64, dtypes.uint64], dtypes.uint64: [dtypes.weakfloat],
  dtypes.weakfloat: list(dtypes.fp8s),
  **{fp8: [dtypes.float16, dtypes.bfloat16] for fp8 in dtypes.fp8s},
  dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32], dtypes.float32: [dtypes.float64], dtypes.float64: [],
}

@functools.cache
def _get_recursive_parents(dtype:DType) -> frozenset[DType]:
  """dtype and every dtype above it in the lattice."""
  if dtype not in promo_lattice: raise TypeError(f"{dtype!r} does not take part in type promotion")
  return frozenset({dtype}).union(*(_get_recursive_parents(p) for p in promo_lattice[dtype]))

@functools.cache
def least_upper_dtype(*ds:DType) -> DType:
  """The dtype that all of ds promote to."""
  if not ds: raise TypeError("least_upper_dtype needs at least one dtype")
  return min(frozenset.intersection(*(_get_recursive_parents(d) for d in ds)))

def least_upper_float(dt:DType) -> DType:
  """The float dtype an op on dt computes in (weak ints stay weak)."""
  if dt is dtypes.weakint: return dtypes.weakfloat
  return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)

# dst -> the dtypes whose every value dst can hold exactly (bool and dst itself always can)
_LOSSLESS_FROM: dict[DType, frozenset[DType]] = {
  dtypes.weakint: frozenset(dtypes.ints),
  dtypes.float64: frozenset((dtypes.float32, dtypes.float16, dtypes.bfloat16, *dtypes.fp8s, dtypes.uint32, dtypes.uint16, dtypes.uint8,
                             dtypes.int32, dtypes.int16, dtypes.int8)),
  dtypes.float32: frozenset((dtypes.float16, dtypes.bfloat16, *dtypes.fp8s, dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8)),
  dtypes.float16: frozenset((*dtypes.fp8s, dtypes.uint8, dtypes.int8)),
  dtypes.uint64: frozenset((dtypes.uint32, dtypes.uint16, dtypes.uint8)),
  dtypes.uint32: frozenset((dtypes.uint16, dtypes.uint8)),
  dtypes.uint16: frozenset((dtypes.uint8,)),
  dtypes.int64: frozenset((dtypes.uint32, dtypes.uint16, dtypes.uint8, dtypes.int32, dtypes.int16, dtypes.int8)),
  dtypes.int32: frozenset((dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8)),
  dtypes.int16: frozenset((dtypes.uint8, dtypes.int8)),
}
def can_lossless_cast(dt0:DType, dt1:DType) -> bool:
  """True if every value of dt0 survives a cast to dt1 (like numpy.can_cast with casting="safe")."""
  return dt0 is dt1 or dt0 is dtypes.bool or dt0 in _LOSSLESS_FROM.get(dt1, ())

def sum_acc_dtype(dt:DType) -> DType:
  """The accumulator dtype of a sum over dt: at least uint32/int32 for ints, at least SUM_DTYPE (float32) for floats."""
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt is dtypes.bool: return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, to_dtype(getenv("SUM_DTYPE", "float32")))

def sum_dtype(dt:DType) -> DType:
  """The dtype of a sum over dt (no dtype asked for): half, bfloat16 and fp8 sum in their accumulator and are cast back, others keep it."""
  return dt if dt in (dtypes.float16, dtypes.bfloat16, *dtypes.fp8s) else sum_acc_dtype(dt)

# *** exact rounding of Python values to a dtype ***

def float_to_fp16(x) -> float:
  """x rounded to the nearest half (round-half-even); out of range gives +-inf."""
  try: return struct.unpack("<e", struct.pack("<e", float(x)))[0]
  except OverflowError: return math.copysign(math.inf, x)

def float_to_bf16(x) -> float:
  """x rounded to float32, then to bfloat16 (round-half-even on the dropped 16 bits); nan and inf pass through."""
  if not math.isfinite(x): return x
  bits = struct.unpack("<I", struct.pack("<f", ctypes.c_float(x).value))[0]
  hi, lo = bits >> 16, bits & 0xFFFF
  if lo > 0x8000 or (lo == 0x8000 and hi & 1): hi += 1
  return struct.unpack("<f", struct.pack("<I", hi << 16))[0]

# fp8 layouts: (exponent bits, mantissa bits, exponent bias, largest finite code, special-value scheme)
#   "ieee": e5m2 has inf (exponent all ones, mantissa 0) and nan (mantissa != 0)
#   "fn":   e4m3 has no inf, only nan at S.1111.111
#   "fnuz": no inf, no negative zero, the single nan is 0x80
_FP8_FORMATS: dict[DType, tuple[int, int, int, int, str]] = {
  dtypes.fp8e4m3: (4, 3, 7, 0x7E, "fn"), dtypes.fp8e5m2: (5, 2, 15, 0x7B, "ieee"),
  dtypes.fp8e4m3fnuz: (4, 3, 8, 0x7F, "fnuz"), dtypes.fp8e5m2fnuz: (5, 2, 16, 0x7F, "fnuz"),
}

def float_to_fp8(x:float, dtype:DType) -> int:
  """The 8-bit code of x in an fp8 dtype: round-half-even, finite values beyond the range saturate to the largest finite value."""
  if (fmt := _FP8_FORMATS.get(dtype)) is None: raise ValueError(f"{dtype!r} is not an fp8 dtype")
  _, mant_bits, bias, max_code, scheme = fmt
  x = float(x)
  negative = math.copysign(1.0, x) < 0
  if not math.isfinite(x):
    if scheme == "fnuz": return 0x80
    if scheme == "fn": return 0xFF if negative else 0x7F
    return (0x80 if negative else 0) | (0x7C if math.isinf(x) else 0x7F)
  a, code = abs(x), 0
  if a != 0:
    # binade exponent of a, no lower than the smallest normal's: below that the spacing stays fixed (subnormals)
    exp = max(math.frexp(a)[1] - 1, 1 - bias)
    # count of mantissa steps in that binade (exact scaling by a power of two, then round-half-even); carrying into
    # the next binade naturally yields the next exponent's code because codes are ordered like the values
    code = min(round(math.ldexp(a, mant_bits - exp)) + ((exp + bias - 1) << mant_bits), max_code)
  if scheme == "fnuz" and code == 0: return 0  # no -0 in fnuz formats
  return code | (0x80 if negative else 0)

def fp8_layout(dtype:DType) -> tuple[int, int, int, int, str]:
  """An fp8 dtype's (exponent bits, mantissa bits, exponent bias, largest finite code, special-value scheme), see _FP8_FORMATS."""
  if (fmt := _FP8_FORMATS.get(dtype)) is None: raise ValueError(f"{dtype!r} is not an fp8 dtype")
  return fmt

def fp8_max(dtype:DType) -> float:
  """The largest finite value of an fp8 dtype (where its casts saturate)."""
  if (fmt := _FP8_FORMATS.get(dtype)) is None: raise ValueError(f"{dtype!r} is not an fp8 dtype")
  return fp8_to_float(fmt[3], dtype)

def fp8_to_float(x:int, dtype:DType) -> float:
  """The value of the 8-bit code x in an fp8 dtype."""
  if (fmt := _FP8_FORMATS.get(dtype)) is None: raise ValueError(f"{dtype!r} is not an fp8 dtype")
  if not 0 <= x <= 0xFF: raise ValueError(f"fp8 code must be in 0..255, got {x}")
  exp_bits, mant_bits, bias, _, scheme = fmt
  sign = -1.0 if x & 0x80 else 1.0
  exp, mant = (x >> mant_bits) & ((1 << exp_bits) - 1), x & ((1 << mant_bits) - 1)
  if scheme == "fnuz" and x == 0x80: return math.nan
  if scheme == "fn" and x & 0x7F == 0x7F: return math.nan
  if scheme == "ieee" and exp == (1 << exp_bits) - 1: return sign*math.inf if mant == 0 else math.copysign(math.nan, sign)
  if exp == 0: return sign * math.ldexp(mant, 1 - bias - mant_bits)
  return sign * math.ldexp(mant | (1 << mant_bits), exp - bias - mant_bits)

def _wrap_int(bits:int, signed:bool) -> Callable:
  """Two's complement wraparound to `bits` bits (what a C cast to that integer type does)."""
  mod, half = 1 << bits, 1 << (bits - 1)
  if signed: return lambda x: (operator.index(x) + half) % mod - half
  return lambda x: operator.index(x) % mod

# dtype -> function rounding a Python value exactly as storing it in that dtype would
truncate: dict[DType, Callable] = {
  dtypes.bool: bool,
  dtypes.float16: float_to_fp16,
  dtypes.bfloat16: lambda x: float_to_bf16(float(x)),
  **{fp8: (lambda x, fp8=fp8: fp8_to_float(float_to_fp8(x, fp8), fp8)) for fp8 in dtypes.fp8s},
  dtypes.float32: lambda x: ctypes.c_float(x).value,
  dtypes.float64: lambda x: ctypes.c_double(x).value,
  **{dt: _wrap_int(dt.bitsize, dt in dtypes.sints) for dt in dtypes.ints},
}

# *** fused multiply-add: a*b+c rounded once (what C's fmaf/fma compute), without math.fma (Python 3.13+) ***

def fma64(a:float, b:float, c:float) -> float:
  """a*b+c rounded once to float64."""
  # IEEE: inf*0 and inf-inf are NaN; a finite product (even one past float64's range) added to an inf or NaN c is c
  if not (math.isfinite(a) and math.isfinite(b)): return a * b + c
  if not math.isfinite(c): return c
  exact = Fraction(a) * Fraction(b) + Fraction(c)
  # an exact zero keeps IEEE's sign: -0 only from (-0)+(-0), which the float expression gives (its product of zeros is exact)
  if exact == 0: return a * b + c if c == 0 else 0.0
  try: return float(exact)  # int/int true division: correctly rounded
  except OverflowError: return math.inf if exact > 0 else -math.inf

_F32_MAX, _F32_OVERFLOW = float.fromhex("0x1.fffffep127"), float.fromhex("0x1.ffffffp127")

def fma32(a:float, b:float, c:float) -> float:
  """a*b+c rounded once to float32, for float32 a, b, c. Their product is exact in float64 (48 bits), and s = p+c rounded to float64
  with its error e (TwoSum: p+c == s+e exactly) rounds to float32 as the exact sum does, except when s lies exactly halfway between two
  float32 values and e != 0: then the exact sum is on e's side of the tie (float32 ties are float64 values, so no other s can straddle one)."""
  p = a * b
  s = p + c
  r = ctypes.c_float(s).value
  if not math.isfinite(s): return r
  bb = s - p
  e = (p - (s - bb)) + (c - bb)
  if e == 0 or r == s: return r
  # s at the overflow tie (float32's max plus half an ulp, which rounds to inf) with the exact sum just inside it: the max
  if math.isinf(r): return math.copysign(_F32_MAX, s) if abs(s) == _F32_OVERFLOW and (e < 0) == (s > 0) else r
  # s is a tie iff its mirror across s from r, 2s-r (exact when it is a float32), is a float32 and s its exact midpoint
  t = s + (s - r)
  if ctypes.c_float(t).value != t or 2 * Fraction(s) != Fraction(r) + Fraction(t): return r
  return t if (e > 0) == (t > s) else r

def fma(a, b, c, dt:DType):
  """MULACC's value in dt: float32 and float64 fuse (one rounding, as the CPU and PYTHON renderers compute it); other floats round
  the product to dt before the add, as the devices compute them; ints are exact (the caller wraps the sum, and rounds any float)."""
  if dt is dtypes.float32: return fma32(float(a), float(b), float(c))
  if dt is dtypes.float64: return fma64(float(a), float(b), float(c))
  return (truncate[dt](a * b) if dtypes.is_float(dt) and dt in truncate else a * b) + c

# *** bit-level storage ***

def storage_fmt_for_dtype(dtype:DType) -> str|None:
  """struct format of the raw storage: bfloat16 is kept as uint16 bits, fp8 as uint8 codes."""
  if dtype is dtypes.bfloat16: return "H"
  if dtype in dtypes.fp8s: return "B"
  return dtype.fmt

def to_storage_scalar(x, dtype:DType):
  """x as the Python value struct packs for dtype's storage format."""
  if dtype is dtypes.float16: return float_to_fp16(x)
  if dtype is dtypes.bfloat16: return struct.unpack("<I", struct.pack("<f", float_to_bf16(x)))[0] >> 16
  if dtype in dtypes.fp8s: return float_to_fp8(float(x), dtype)
  return x

def from_storage_scalar(x, dtype:DType):
  """Inverse of to_storage_scalar."""
  if dtype is dtypes.bfloat16: return struct.unpack("<f", struct.pack("<I", (x & 0xFFFF) << 16))[0]
  if dtype in dtypes.fp8s: return fp8_to_float(int(x), dtype)
  return x

def bitcast(x, in_dtype:DType, out_dtype:DType):
  """Reinterprets the bits of the in_dtype value x as out_dtype."""
  if in_dtype.itemsize != out_dtype.itemsize:
    raise ValueError(f"bitcast itemsize mismatch: {in_dtype!r} is {in_dtype.itemsize} bytes, {out_dtype!r} is {out_dtype.itemsize}")
  if (fin := storage_fmt_for_dtype(in_dtype)) is None or (fout := storage_fmt_for_dtype(out_dtype)) is None:
    raise ValueError(f"cannot bitcast between {in_dtype!r} and {out_dtype!r}")
  return from_storage_scalar(struct.unpack(fout, struct.pack(fin, to_storage_scalar(x, in_dtype)))[0], out_dtype)

# *** numpy / torch interop (both imported lazily: importing tinygrad.dtype needs neither) ***

def to_np_dtype(dtype:DType) -> type|None:
  """The numpy scalar type that holds dtype's values; bfloat16 and fp8 are exchanged as float32, weak/void types have none."""
  import numpy as np
  if dtype is dtypes.bfloat16 or dtype in dtypes.fp8s: return np.float32
  return None if dtype.fmt is None else np.dtype(dtype.fmt).type

def from_np_dtype(npdtype) -> DType:
  import numpy as np
  name = np.dtype(npdtype).name
  if (ret := DTYPES_DICT.get(name)) is None: raise TypeError(f"numpy dtype {name} has no tinygrad dtype")
  return ret

_to_np_dtype, _from_np_dtype = to_np_dtype, from_np_dtype   # tinygrad 0.14's names, for code written against it

@functools.cache
def _to_torch_dtype(dtype:DType):
  import torch
  dtype = strong_dtype(dtype)
  if dtype in dtypes.fp8s: return torch.uint8  # fp8 travels as its raw 8-bit codes
  names = {dtypes.bool: "bool", dtypes.int8: "int8", dtypes.uint8: "uint8", dtypes.int16: "int16", dtypes.uint16: "uint16",
           dtypes.int32: "int32", dtypes.uint32: "uint32", dtypes.int64: "int64", dtypes.uint64: "uint64",
           dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64"}
  return getattr(torch, names[dtype], None) if dtype in names else None

@functools.cache
def _from_torch_dtype(torchdtype) -> DType:
  # fp8 also maps to torch.uint8; the reverse direction must give uint8, so fp8 is left out
  table = {t: dt for dt in dict.fromkeys(DTYPES_DICT.values()) if dt not in dtypes.fp8s and (t := _to_torch_dtype(dt)) is not None}
  if torchdtype not in table: raise TypeError(f"torch dtype {torchdtype} has no tinygrad dtype")
  return table[torchdtype]
