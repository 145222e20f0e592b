"""Renderers of symbolic expressions.

- `renderer`: the PatternMatcher UOp.render() uses (tinygrad 0.14's format: `(a//2)`, `(a%3)`, `max(a, b)`, `(t if c else f)`,
  `cdiv(a, b)`, ...). render() raises for an op with no rule here instead of printing the node.
- `compile_python`: a Python function evaluating an expression, behind UOp.sym_infer.
- `render_c`: a C expression (with `C_PREAMBLE` for floor division/modulo and max). C truncates division toward zero, so `//`
  and `%` render as plain `/` and `%` only where the numerator is provably >= 0 and the divisor > 0, and through the
  preamble's helpers otherwise. An op without a C form raises NotImplementedError naming the op.
"""
from __future__ import annotations
from typing import Callable
from tinygrad.uop import Ops
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, ParamArg, range_str
from tinygrad.dtype import dtypes, Invalid
from tinygrad.helpers import strip_parens, cdiv, cmod, floordiv, floormod

# ***** the default renderer *****

syms = {Ops.ADD: "+", Ops.SUB: "-", Ops.FLOORDIV: "//", Ops.FLOORMOD: "%", Ops.SHL: "<<", Ops.SHR: ">>", Ops.MUL: "*", Ops.CMPLT: "<",
        Ops.CMPNE: "!=", Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}
# binding strength (lower binds tighter); comparisons are left out on purpose, they keep their parentheses
precedence = {Ops.MUL: 1, Ops.FLOORDIV: 1, Ops.FLOORMOD: 1, Ops.ADD: 2, Ops.SUB: 2, Ops.SHL: 3, Ops.SHR: 3, Ops.AND: 4, Ops.XOR: 5, Ops.OR: 6}

def strip_binary_parens(x:UOp, left:str, right:str, code_for_op:Callable[[str, str], str]) -> str:
  """Drops the parentheses an operand does not need: left-associative ops, tighter-binding operands."""
  if x.op not in precedence: return code_for_op(left, right)
  lp, rp, p = precedence.get(x.src[0].op, 99), precedence.get(x.src[1].op, 99), precedence[x.op]
  return code_for_op(strip_parens(left) if lp <= p else left, strip_parens(right) if rp < p else right)

def _param_name(x:UOp) -> str:
  if isinstance(x.arg, ParamArg) and x.arg.name is not None: return x.arg.name
  return f"{'p' if x.op is Ops.PARAM else 'b'}{getattr(x.arg, 'slot', '')}"

def _render_binary(ctx, x:UOp) -> str:
  sym = syms[x.op]
  return strip_binary_parens(x, ctx[x.src[0]], ctx[x.src[1]], lambda a, b: f"({a}{sym}{b})")

renderer = PatternMatcher([
  (UPat((Ops.PARAM, Ops.BUFFER), name="x"), _param_name),
  (UPat(Ops.AFTER, name="x"), lambda ctx, x: ctx[x.src[0]]),
  (UPat(Ops.STORE), lambda: ""),   # the value a bound Variable's AFTER stores: the Variable renders as its name
  (UPat(Ops.SPECIAL, name="x"), lambda x: x.arg),
  (UPat(Ops.RANGE, dtypes.void, name="x"), lambda x: f"loop{x.arg[0]}"),
  (UPat(Ops.RANGE, name="x"), lambda x: f"r{range_str(x)}"),
  (UPat(Ops.CONST, name="x"), lambda x: str(x.arg)),
  # a CAST of a weak or bool CONST states the width; the value is the CONST's
  (UPat(Ops.CAST, src=(UPat(Ops.CONST, dtypes.weaks+(dtypes.bool,), name="c"),)), lambda c: str(c.arg)),
  (UPat(Ops.CAST, name="x"), lambda ctx, x: f"({str(x.dtype)[7:]})({ctx[x.src[0]]})"),
  (UPat(Ops.NEG, name="x"), lambda ctx, x: f"(-{ctx[x.src[0]]})"),
  (UPat(Ops.RECIPROCAL, name="x"), lambda ctx, x: f"(1/{ctx[x.src[0]]})"),
  (UPat(Ops.MAX, name="x"), lambda ctx, x: f"max({ctx[x.src[0]]}, {ctx[x.src[1]]})"),
  (UPat(Ops.MULACC, name="x"), lambda ctx, x: f"({ctx[x.src[0]]}*{ctx[x.src[1]]}+{ctx[x.src[2]]})"),
  (UPat(Ops.WHERE, name="x"), lambda ctx, x: f"({ctx[x.src[1]]} if {ctx[x.src[0]]} else {ctx[x.src[2]]})"),
  (UPat(Ops.CDIV, name="x"), lambda ctx, x: f"cdiv({ctx[x.src[0]]}, {ctx[x.src[1]]})"),
  (UPat(Ops.CMOD, name="x"), lambda ctx, x: f"cmod({ctx[x.src[0]]}, {ctx[x.src[1]]})"),
  (UPat(tuple(syms), name="x"), _render_binary),
  (UPat(Ops.INDEX, name="x"), lambda ctx, x: ''.join([f"[{strip_parens(ctx[y])}]" for y in x.src[1:]])),
  (UPat(Ops.STACK, name="x"), lambda ctx, x: f"{{{','.join([ctx[y] for y in x.src])}}}"),
  (UPat(Ops.SINK, name="x"), lambda ctx, x: f"({', '.join([ctx[y] for y in x.src])})"),
])

# ***** Python evaluation (sym_infer) *****

_py_binary = {Ops.ADD: "{}+{}", Ops.SUB: "{}-{}", Ops.MUL: "{}*{}", Ops.CMPLT: "{}<{}", Ops.CMPNE: "{}!={}", Ops.CMPEQ: "{}=={}",
              Ops.AND: "{}&{}", Ops.OR: "{}|{}", Ops.XOR: "{}^{}", Ops.SHL: "{}<<{}", Ops.SHR: "{}>>{}", Ops.MAX: "max({}, {})",
              Ops.FLOORDIV: "floordiv({}, {})", Ops.FLOORMOD: "floormod({}, {})", Ops.CDIV: "cdiv({}, {})", Ops.CMOD: "cmod({}, {})"}
_py_globals = {"max": max, "floordiv": floordiv, "floormod": floormod, "cdiv": cdiv, "cmod": cmod}

def compile_python(root:UOp) -> tuple[Callable, tuple[str, ...]]:
  """(f, names): f(*values) evaluates root with its Variables, in the order of `names`, set to values. One line per node, so
  expressions of any depth compile."""
  names: list[str] = []
  ref: dict[UOp, str] = {}
  lines: list[str] = []
  for i, u in enumerate(root.toposort()):
    op = u.op
    if (op is Ops.BUFFER or op is Ops.PARAM) and isinstance(u.arg, ParamArg) and u.arg.name is not None:
      if u.arg.name not in names: names.append(u.arg.name)
      ref[u] = f"v{names.index(u.arg.name)}"
      continue
    if op is Ops.CONST:
      if u.arg is Invalid: raise NotImplementedError("sym_infer: the expression contains Invalid")
      ref[u] = repr(u.arg)
      continue
    if op is Ops.AFTER or (op is Ops.STACK and not u.src):  # a bound Variable is the Variable; the empty STACK is a Variable's shape
      if u.src: ref[u] = ref[u.src[0]]
      continue
    if op is Ops.STORE: continue
    s = [ref[x] for x in u.src if x in ref]
    if op in _py_binary: code = _py_binary[op].format(*s)
    elif op is Ops.WHERE: code = f"({s[1]} if {s[0]} else {s[2]})"
    elif op is Ops.NEG: code = f"-{s[0]}"
    elif op is Ops.CAST: code = f"{'float' if dtypes.is_float(u.dtype) else 'bool' if u.dtype is dtypes.bool else 'int'}({s[0]})"
    else: raise NotImplementedError(f"sym_infer: {op} can't be evaluated")
    ref[u] = f"t{i}"
    lines.append(f"  t{i} = {code}")
  args = ", ".join(f"v{i}" for i in range(len(names)))
  src = f"def _f({args}):\n" + "\n".join(lines) + f"\n  return {ref[root]}\n"
  ns = dict(_py_globals)
  exec(compile(src, "<sym_infer>", "exec"), ns)  # pylint: disable=exec-used
  return ns["_f"], tuple(names)

# ***** C *****

C_PREAMBLE = """\
static inline long long tg_floordiv(long long a, long long b) { long long q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline long long tg_floormod(long long a, long long b) { long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline long long tg_max(long long a, long long b) { return a > b ? a : b; }
"""

_c_binary = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.CDIV: "/", Ops.CMOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.CMPEQ: "==",
             Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}

def _c_type(dt) -> str:
  if dt in dtypes.weaks: return "long long" if dt is dtypes.weakint else "double"
  return "_Bool" if dt is dtypes.bool else dt.name

def _c_const(x:UOp) -> str:
  if x.arg is Invalid: return None  # type: ignore[return-value]
  if isinstance(x.arg, bool): return "1" if x.arg else "0"
  if isinstance(x.arg, int): return f"({x.arg}LL)" if x.arg < 0 else f"{x.arg}LL" if x.arg > 2**31-1 else str(x.arg)
  return None  # type: ignore[return-value]

def _c_divmod(ctx, x:UOp) -> str:
  a, b = x.src
  # floor and truncation agree for a >= 0, b > 0: the usual case of index math
  if a.vmin >= 0 and b.vmin > 0: return f"({ctx[a]}{'/' if x.op is Ops.FLOORDIV else '%'}{ctx[b]})"
  return f"tg_{'floordiv' if x.op is Ops.FLOORDIV else 'floormod'}({ctx[a]}, {ctx[b]})"

c_renderer = PatternMatcher([
  (UPat((Ops.PARAM, Ops.BUFFER), name="x"), lambda x: _param_name(x) if isinstance(x.arg, ParamArg) and x.arg.name is not None else None),
  (UPat(Ops.AFTER, name="x"), lambda ctx, x: ctx[x.src[0]]),
  (UPat(Ops.STORE), lambda: ""),   # the value a bound Variable's AFTER stores: the Variable renders as its name
  (UPat(Ops.CONST, name="x"), _c_const),
  (UPat((Ops.FLOORDIV, Ops.FLOORMOD), name="x"), _c_divmod),
  (UPat(tuple(_c_binary), name="x"), lambda ctx, x: f"({ctx[x.src[0]]}{_c_binary[x.op]}{ctx[x.src[1]]})"),
  (UPat(Ops.MAX, name="x"), lambda ctx, x: f"tg_max({ctx[x.src[0]]}, {ctx[x.src[1]]})"),
  (UPat(Ops.WHERE, name="x"), lambda ctx, x: f"({ctx[x.src[0]]}?{ctx[x.src[1]]}:{ctx[x.src[2]]})"),
  (UPat(Ops.NEG, name="x"), lambda ctx, x: f"(-{ctx[x.src[0]]})"),
  (UPat(Ops.CAST, name="x"), lambda ctx, x: f"(({_c_type(x.dtype)})({ctx[x.src[0]]}))" if dtypes.is_int(x.dtype) or x.dtype is dtypes.bool else None),
])

def render_c(root:UOp, simplify:bool=False) -> str:
  """root as one C expression over its Variables (declare them as long long and include C_PREAMBLE)."""
  root = root.simplify() if simplify else root
  ctx: dict[UOp, str] = {}
  for u in root.toposort():
    # the empty STACK under a Variable and the STORE of a bound Variable are structure, not values
    if (u.op is Ops.STACK and not u.src) or u.op is Ops.STORE: continue
    if (r := c_renderer.rewrite(u, ctx=ctx)) is None: raise NotImplementedError(f"render_c: {u.op} has no C form")
    ctx[u] = r
  return ctx[root]
