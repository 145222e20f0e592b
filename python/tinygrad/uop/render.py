"""Renderers of symbolic expressions.

- `renderer`: the PatternMatcher UOp.render() uses (tinygrad 0.14's format: `(a//2)`, `(a%3)`, `max(a, b)`, `(t if c else f)`,
  `cdiv(a, b)`, ...). render() raises for an op with no rule here instead of printing the node.
- `compile_python`: a Python function evaluating an expression, behind UOp.sym_infer.
(Kernels are rendered to C by tinygrad/renderer/cstyle.py, the one C renderer.)
"""
from __future__ import annotations
from typing import Callable
from tinygrad.uop import Ops
from tinygrad.uop.base import UOp, PatternMatcher, ParamArg, range_str
from tinygrad.uop.upat import UPat
from tinygrad.uop.alu import python_alu
from tinygrad.dtype import dtypes, Invalid
from tinygrad.helpers import strip_parens

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
# the calls are the ALU evaluator's functions (uop/alu.py python_alu), the ones constant folding uses
_py_globals = {"max": python_alu[Ops.MAX], "floordiv": python_alu[Ops.FLOORDIV], "floormod": python_alu[Ops.FLOORMOD],
               "cdiv": python_alu[Ops.CDIV], "cmod": python_alu[Ops.CMOD]}

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
