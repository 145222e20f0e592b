"""UOp.shape: the shape of a tensor-level UOp, computed once per node from its op, sources and arg, and kept on the node.

Tensor-level conventions (what Tensor and the UOp mixins build, what the scheduler reads):
  BUFFER   src: (CONST size,)  arg: ParamArg(uid, dtype, device=...)   a flat device buffer, shape (size,)
  CONST    src: ()             arg: value                               shape ()
  RESHAPE/EXPAND arg: the new shape; PERMUTE arg: the order; PAD arg: ((before, after), ...) (>= 0); SHRINK arg: ((start, end), ...);
  FLIP arg: a tuple of bools (one per dim)
  REDUCE   src: (x,)           arg: (op, axes)                          keeps the reduced dims as size 1
  ALU / CAST / BITCAST / CONTIGUOUS / COPY / DETACH                     the shape of their sources, which agree (Tensor broadcasts
                                                                        first; COPY's arg is (src device, dst device))
  AFTER    src: (storage, STORE(view, value))                          Tensor.assign: the storage (a BUFFER or an earlier AFTER,
                                                                        flat) once value is written through view (a movement chain
                                                                        over storage); shape: the storage's. The STORE's: the view's
  MSTACK   src: one value per device  arg: axis (or None)               a sharded tensor (tinygrad/schedule/multi.py): the shards
                                                                        joined along axis, or (None) each shard the whole tensor
  ALLREDUCE src: one value per device  arg: the reduce op               a device collective's all-reduce (schedule/allreduce.py), on
  MSELECT  src: (ALLREDUCE,)  arg: i                                    all the devices; MSELECT i is device i's result (each shape
                                                                        the values')
  PARAM    src: (STACK of sizes,)                                      an argument of a call body (tinygrad/uop/call.py): that shape
                                                                        (CONST ints, or a symbolic size's expression)
Kernel-level UOps (RANGE, PARAM(CONST size), INDEX, LOAD, a Variable, ...) have shape None, and so does everything computed from one:
a shape is never a property of index arithmetic. An ill-formed tensor-level node raises a RuntimeError naming its op, its arg and the shapes
of its sources when its shape is first asked for.

The rules are a PatternMatcher whose callbacks return the shape (no rule: None). Sources are done first without recursion, so the
shape of a deep graph costs one pass over the nodes not seen before.
"""
from __future__ import annotations
from tinygrad.uop import Ops, GroupOp
from tinygrad.uop.base import UOp, PatternMatcher, _fill_children_first, _is_var
from tinygrad.uop.upat import UPat
from tinygrad.uop.sint import resolve, ssimplify, sym_le
from tinygrad.dtype import dtypes
from tinygrad.helpers import prod
from tinygrad.mixin.movement import same_sizes
from tinygrad.dtype import AddrSpace

def _sint_ok(i, lo:int) -> bool:
  # a symbolic size (an int expression of Variables, bound or not) counts when every value it can take is >= lo
  if type(i) is int: return i >= lo
  return isinstance(i, UOp) and i.dtype in _SIZE_DTYPES and i.vmin >= lo
_SIZE_DTYPES = frozenset(dtypes.ints + (dtypes.weakint,))

def _ints(t, lo:int=0) -> bool: return isinstance(t, tuple) and all(_sint_ok(i, lo) for i in t)
def _ssum(*xs):
  # a size from sizes: plain ints add as ints; symbolic ones are simplified (zeros dropped first: most pads and shrinks have them)
  if all(type(x) is int for x in xs): return sum(xs)
  ret = None
  for x in xs:
    if type(x) is int and x == 0: continue
    ret = x if ret is None else ret + x
  return ssimplify(ret)
def _differ(a, b) -> bool: return resolve(a != b, False) if isinstance(a, UOp) or isinstance(b, UOp) else a != b
def _canon(shape:tuple) -> tuple:
  # symbolic sizes simplified: one size has one UOp, so shapes that hold the same sizes are equal tuples (broadcasting compares them so)
  return shape if all(type(s) is int for s in shape) else tuple(ssimplify(s) for s in shape)

def _bad(u:UOp, s, why:str):
  raise RuntimeError(f"ill-formed {u.op} with arg {u.arg!r} on a source of shape {s}: {why}")

def _reshape(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not _ints(u.arg): _bad(u, s, "the new shape must be a tuple of ints >= 0")
  if not same_sizes(u.arg, s) and _differ(prod(u.arg), prod(s)): _bad(u, s, f"{prod(s)} elements can't become {prod(u.arg)}")
  return _canon(u.arg)

def _expand(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not _ints(u.arg) or len(u.arg) != len(s): _bad(u, s, "the new shape needs one int >= 0 per dim")
  if any(o is not n and _differ(o, 1) and _differ(o, n) for o, n in zip(s, u.arg)): _bad(u, s, "only dims of size 1 can expand")
  return _canon(u.arg)

def _permute(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not _ints(u.arg) or sorted(u.arg) != list(range(len(s))): _bad(u, s, f"the order must be a permutation of range({len(s)})")
  return tuple(s[i] for i in u.arg)

def _pairs_ok(u:UOp, s:tuple) -> bool: return isinstance(u.arg, tuple) and len(u.arg) == len(s) and all(_ints(p) and len(p) == 2 for p in u.arg)

def _pad(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not _pairs_ok(u, s): _bad(u, s, "the padding needs one (before, after) pair of ints >= 0 per dim")
  return tuple(_ssum(n, b, a) for n, (b, a) in zip(s, u.arg))

def _shrink(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not _pairs_ok(u, s) or any(not sym_le(b, e) or not sym_le(e, n) for (b, e), n in zip(u.arg, s)):
    _bad(u, s, "needs one (start, end) per dim, 0 <= start <= end <= size")
  return tuple(_ssum(e, -b) for b, e in u.arg)

def _flip(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  if not (isinstance(u.arg, tuple) and len(u.arg) == len(s) and all(isinstance(f, bool) for f in u.arg)): _bad(u, s, "needs one bool per dim")
  return s

def _reduce(u:UOp, x:UOp):
  if (s := x.shape) is None: return None
  op, axes = u.arg
  if op not in GroupOp.Reduce or not _ints(axes) or list(axes) != sorted(set(axes)) or any(a >= len(s) for a in axes):
    _bad(u, s, "needs (op, sorted distinct axes of the source)")
  return tuple(1 if i in axes else n for i, n in enumerate(s))

def _elementwise(u:UOp):
  shapes = [s.shape for s in u.src]
  if not shapes or any(s is None for s in shapes): return None
  if any(s != shapes[0] for s in shapes[1:]):
    raise RuntimeError(f"ill-formed {u.op}: its sources have the shapes {', '.join(map(str, shapes))} (elementwise ops need one shape)")
  return shapes[0]

def _mstack(u:UOp):
  # a sharded value (tinygrad/schedule/multi.py): arg None, a copy per device (each the whole shape); else the shards joined along arg
  shapes = [s.shape for s in u.src]
  if not shapes or any(s is None for s in shapes): return None
  ax = u.arg
  if any(len(s) != len(shapes[0]) or any(_differ(a, b) for i, (a, b) in enumerate(zip(s, shapes[0])) if i != ax) for s in shapes) or \
     (ax is not None and not 0 <= ax < len(shapes[0])):
    raise RuntimeError(f"ill-formed MSTACK along axis {ax}: its shards have the shapes {', '.join(map(str, shapes))}")
  return shapes[0] if ax is None else tuple(_ssum(*[s[ax] for s in shapes]) if i == ax else d for i, d in enumerate(shapes[0]))

def _param(u:UOp):
  if getattr(u.arg, "addrspace", None) is AddrSpace.ALU: return None
  if (s := u.src[0]).op is not Ops.STACK: return None
  # each size: a CONST int, or a symbolic size (uop/call.py keeps it as its expression)
  ret = tuple(x.arg if x.op is Ops.CONST and type(x.arg) is int else x for x in s.src)
  return ret if _ints(ret) else None

_ELEMENTWISE = tuple(GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.COPY})
shape_rules = PatternMatcher([
  (UPat(Ops.CONST), lambda: ()),
  # a Variable, bound or not, is a 0-d value in tensor math (t * v), as in tinygrad 0.14
  (UPat(Ops.BUFFER, src=(UPat(Ops.STACK, src=()),), name="u"), lambda u: () if _is_var(u) else None),
  (UPat(Ops.AFTER, name="u"), lambda u: () if u.is_bound_var else None),
  (UPat(Ops.BUFFER, src=(UPat(Ops.CONST, name="n"),)), lambda n: (n.arg,) if type(n.arg) is int else None),
  (UPat(Ops.RESHAPE, src=(UPat.var("x"),), name="u"), _reshape),
  (UPat(Ops.EXPAND, src=(UPat.var("x"),), name="u"), _expand),
  (UPat(Ops.PERMUTE, src=(UPat.var("x"),), name="u"), _permute),
  (UPat(Ops.PAD, src=(UPat.var("x"),), name="u"), _pad),
  (UPat(Ops.SHRINK, src=(UPat.var("x"),), name="u"), _shrink),
  (UPat(Ops.FLIP, src=(UPat.var("x"),), name="u"), _flip),
  # the tensor-level REDUCE (op, axes) on one source; a kernel's REDUCE(x, *ranges, arg=(op,)) has no shape
  (UPat(Ops.REDUCE, src=(UPat.var("x"),), name="u"), lambda u, x: _reduce(u, x) if isinstance(u.arg, tuple) and len(u.arg) == 2 else None),
  (UPat(_ELEMENTWISE, name="u"), _elementwise),
  (UPat(Ops.MSTACK, name="u"), _mstack),
  # a collective all-reduce (tinygrad/schedule/allreduce.py): one value per device in, MSELECT(ALLREDUCE, i) device i's result out
  (UPat(Ops.ALLREDUCE, name="u"), _elementwise),
  (UPat(Ops.MSELECT, src=(UPat(Ops.ALLREDUCE, name="a"),)), lambda a: a.shape),
  # the tensor-level STORE and AFTER of Tensor.assign (in a kernel, a STORE writes an INDEX, which has no shape, and so has no AFTER
  # of it: there it orders an accumulator)
  (UPat(Ops.STORE, src=(UPat.var("v"), UPat())), lambda v: v.shape),
  (UPat(Ops.AFTER, src=(UPat.var("x"), UPat(Ops.STORE, name="st"))), lambda x, st: x.shape if st.shape is not None else None),
  # calls (tinygrad/uop/call.py): a call body's PARAM has the shape its src spells (a Variable's, in the ALU addrspace, has none), a
  # FUNCTION's output that of its body's, and an argument of a CALL is itself once the kernel ran (as is a hand-written kernel's buffer
  # ordered after its loops or stores)
  (UPat(Ops.PARAM, name="u"), _param),
  (UPat(Ops.GETTUPLE, src=(UPat(Ops.FUNCTION, name="f"),), name="u"), lambda u, f: f.src[0].src[u.arg].shape),
  (UPat(Ops.AFTER, src=(UPat.var("x"),), allow_any_len=True, name="u"),
   lambda u, x: x.shape if all(s.op is not Ops.STORE for s in u.src[1:]) else None),
])

# the ops whose shape is read from their sources: a walk to fill in shapes only descends through these
_FROM_SRC = frozenset(GroupOp.Movement | {Ops.REDUCE, Ops.AFTER, Ops.MSTACK, Ops.ALLREDUCE, Ops.MSELECT} | set(_ELEMENTWISE))
_NO_SRC = frozenset(set(Ops) - _FROM_SRC)

def _store_shape(u:UOp) -> None: u.__dict__["shape"] = shape_rules.rewrite(u)

class _Shape:
  """UOp.shape: computed on first access (sources first, without recursion) and stored in the node's __dict__, which this non-data
  descriptor lets win from then on: the same tuple object every time."""
  def __get__(self, u, owner=None):
    if u is None: return self
    if u.op in _FROM_SRC:
      for s in u.src:
        if "shape" not in s.__dict__:
          _fill_children_first(u, "shape", _store_shape, _NO_SRC)
          return u.__dict__["shape"]
    ret = u.__dict__["shape"] = shape_rules.rewrite(u)
    return ret
