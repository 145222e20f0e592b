"""The package is layered in pipeline order: a module imports only modules of its own layer or a lower one, no modules import
each other (directly or around a circle), and no module reaches into another package's private names.

Imports are read from the source (module level and inside functions alike, `if TYPE_CHECKING:` blocks excepted), so a lazy import
that reaches upward or closes a circle counts too, and so do imports by name (`importlib.import_module("tinygrad...")`,
`__import__`). Importing a submodule runs the package's __init__, which pulls in everything, so checking sys.modules after an
import would prove nothing."""
import ast
import functools
import pathlib
import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "python" / "tinygrad"

# lowest first; a module's layer is the longest matching prefix of its dotted name
LAYERS = [
  ("base", ("tinygrad._core", "tinygrad.helpers", "tinygrad.dtype", "tinygrad.device")),
  ("uop", ("tinygrad.uop", "tinygrad.mixin", "tinygrad.gradient")),
  ("schedule", ("tinygrad.schedule",)),
  # the renderer package's __init__ is the linear-UOp contract (Renderer, ProgramSpec, check_linear) that codegen lowers to
  ("codegen", ("tinygrad.codegen", "tinygrad.renderer.__init__")),
  ("renderer", ("tinygrad.renderer",)),
  ("runtime", ("tinygrad.runtime",)),
  ("engine", ("tinygrad.engine",)),
  # the JIT captures and replays what Tensor code runs: it sits above the Tensor, as in tinygrad
  ("frontend", ("tinygrad.engine.jit", "tinygrad.tensor", "tinygrad.function", "tinygrad.nn", "tinygrad.distributed", "tinygrad.apps",
                "tinygrad.viz", "tinygrad.llm",
                "tinygrad.__init__")),
]

def layer_of(mod:str) -> int:
  best = None
  for i, (_, prefixes) in enumerate(LAYERS):
    for p in prefixes:
      if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > best[1]): best = (i, len(p))
  if best is None: raise AssertionError(f"{mod} is in no layer: add it to LAYERS")
  return best[0]

def module_name(path:pathlib.Path) -> str:
  rel = path.relative_to(PKG.parent).with_suffix("")
  return ".".join(rel.parts)

@functools.cache
def parsed(path:pathlib.Path) -> tuple[ast.Module, frozenset[int]]:
  """The module's syntax tree and the ids of the nodes inside `if TYPE_CHECKING:` blocks (imports for annotations only)."""
  tree = ast.parse(path.read_text(), str(path))
  skip: set[int] = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
      skip.update(id(n) for b in node.body for n in ast.walk(b))
  return tree, frozenset(skip)

def nodes_of(path:pathlib.Path):
  tree, skip = parsed(path)
  return [n for n in ast.walk(tree) if id(n) not in skip]

def from_base(node:ast.ImportFrom, mod:str, path:pathlib.Path) -> str:
  """The absolute module a `from ... import` reads from (relative imports resolved against mod's package)."""
  base = node.module or ""
  if not node.level: return base
  pkg = (mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]).removesuffix(".__init__")
  parts = pkg.split(".")
  return ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))

def imports_of(path:pathlib.Path, mod:str) -> list[tuple[str, int]]:
  """The tinygrad modules path imports with import statements: (module, line)."""
  out = []
  for node in nodes_of(path):
    if isinstance(node, ast.Import): out += [(a.name, node.lineno) for a in node.names if a.name.startswith("tinygrad")]
    elif isinstance(node, ast.ImportFrom):
      base = from_base(node, mod, path)
      if not base.startswith("tinygrad"): continue
      # `from tinygrad import X` / `from tinygrad.uop import ops`: X may be a submodule
      for a in node.names:
        sub = f"{base}.{a.name}"
        out.append((sub if is_module(sub) else base, node.lineno))
  return out

# imports by a name that only exists at run time, each with why it cannot be written down
DYNAMIC_IMPORTS = {
  # unpickling a lambda: its code is rebuilt in the module the pickle names (as pickle itself imports the module of a class)
  ("tinygrad.uop.base", "_rebuild_function"),
  # tinygrad 0.14's helper: `fromimport(mod, name)` for callers that hold a module path as a string
  ("tinygrad.helpers", "fromimport"),
}

def by_name_imports_of(path:pathlib.Path, mod:str) -> list[tuple[str|None, int, str]]:
  """The imports path does by name, `importlib.import_module(name)` or `__import__(name)`: (module, line, where). The module is the
  literal name, or the package an f-string's literal start names (`f"tinygrad.runtime.ops_{x}"`: tinygrad.runtime); None when the name
  is not written in the source. `where` is the function the call is in."""
  tree, skip = parsed(path)
  out = []
  def visit(node:ast.AST, where:str):
    for child in ast.iter_child_nodes(node):
      inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else where
      if id(child) not in skip and isinstance(child, ast.Call) and child.args and ast.unparse(child.func) in BY_NAME_CALLS:
        out.append((literal_module(child.args[0]), child.lineno, where))
      visit(child, inner)
  visit(tree, "<module>")
  return [(name, line, where) for name, line, where in out if name is None or name.startswith("tinygrad")]

BY_NAME_CALLS = {"importlib.import_module", "import_module", "__import__", "importlib.__import__"}

def literal_module(arg:ast.expr) -> str|None:
  if isinstance(arg, ast.Constant) and isinstance(arg.value, str): return arg.value
  if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(first := arg.values[0], ast.Constant):
    # the package the literal start names: "tinygrad.runtime.ops_" -> tinygrad.runtime
    prefix = str(first.value)
    return prefix.rstrip(".") if prefix.endswith(".") else prefix.rsplit(".", 1)[0]
  return None

def all_imports_of(path:pathlib.Path, mod:str) -> list[tuple[str, int]]:
  """Import statements and by-name imports whose name the source spells."""
  return imports_of(path, mod) + [(name, line) for name, line, _ in by_name_imports_of(path, mod) if name is not None]

def is_module(name:str) -> bool:
  # the compiled core is a module too, wherever the build put it (a wheel install leaves no .so in the source tree)
  if name == "tinygrad._core": return True
  p = PKG.parent / name.replace(".", "/")
  return p.is_dir() or any(p.parent.glob(p.name + ".*"))

def resolve(name:str) -> str:
  """`tinygrad.renderer` means its __init__; `tinygrad` means the package __init__."""
  p = PKG.parent / name.replace(".", "/")
  return f"{name}.__init__" if p.is_dir() else name

SOURCES = sorted(p for p in PKG.rglob("*.py"))

@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_go_down(path:pathlib.Path):
  mod = module_name(path)
  me = layer_of(mod)
  bad = [(name, line) for name, line in all_imports_of(path, mod) if layer_of(resolve(name)) > me]
  assert not bad, f"{mod} ({LAYERS[me][0]} layer) imports upper layers: " + \
    ", ".join(f"{n} ({LAYERS[layer_of(resolve(n))][0]}) at line {ln}" for n, ln in bad)

def test_every_module_has_a_layer():
  for p in SOURCES: layer_of(module_name(p))

def test_by_name_imports_are_written_out():
  """A by-name import names its module in the source (so the layer check above sees it), unless it is one of DYNAMIC_IMPORTS."""
  bad = [f"{module_name(p)}:{line} (in {where})" for p in SOURCES for name, line, where in by_name_imports_of(p, module_name(p))
         if name is None and (module_name(p), where) not in DYNAMIC_IMPORTS]
  assert not bad, "imports by a name the source does not spell: " + ", ".join(bad)

# ***** circles *****

def import_graph() -> dict[str, dict[str, int]]:
  """{module: {module it imports: the line of the first such import}} over the package's sources."""
  graph: dict[str, dict[str, int]] = {}
  for p in SOURCES:
    mod = module_name(p)
    edges = graph.setdefault(mod, {})
    for name, line in all_imports_of(p, mod):
      if (target := resolve(name)) != mod: edges.setdefault(target, line)
  return graph

def components(graph:dict[str, dict[str, int]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan's algorithm, without recursion), each sorted."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  found: list[list[str]] = []
  for root in graph:
    if root in index: continue
    work = [(root, iter(graph[root]))]
    index[root] = low[root] = len(index)
    stack.append(root); on_stack.add(root)
    while work:
      v, it = work[-1]
      w = next((w for w in it if w in graph), None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index)
          stack.append(w); on_stack.add(w)
          work.append((w, iter(graph[w])))
        elif w in on_stack: low[v] = min(low[v], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
      if low[v] == index[v]:
        comp = []
        while True:
          w = stack.pop(); on_stack.discard(w); comp.append(w)
          if w == v: break
        if len(comp) > 1: found.append(sorted(comp))
  return found

def circles(graph:dict[str, dict[str, int]]) -> list[list[str]]:
  """One circle per component: the modules along a shortest way from the component's first module back to itself."""
  return [shortest_circle(graph, comp) for comp in components(graph)]

def shortest_circle(graph:dict[str, dict[str, int]], comp:list[str]) -> list[str]:
  start, members = comp[0], set(comp)
  came_from: dict[str, str] = {}
  frontier = [start]
  while frontier:
    nxt = []
    for v in frontier:
      for w in graph[v]:
        if w not in members or w in came_from: continue
        came_from[w] = v
        if w == start:
          path = [start]
          while (path[-1] != start or len(path) == 1): path.append(came_from[path[-1]])
          return path[::-1]
        nxt.append(w)
    frontier = nxt
  raise AssertionError(f"no circle through {start} in {comp}")

# circles tolerated for now, each with what keeps it and the way out (none: every import points down). A known one must stay exactly
# these modules: a module that joins it is a new circle, and one that is gone must leave this list.
KNOWN_CIRCLES: set[frozenset[str]] = set()

def test_no_import_circles():
  graph = import_graph()
  new = [shortest_circle(graph, comp) for comp in components(graph) if frozenset(comp) not in KNOWN_CIRCLES]
  assert not new, f"{len(new)} import circle(s): " + "; ".join(
    " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(c, c[1:])) + f" -> {c[-1]}" for c in new)

def test_known_circles_are_still_there():
  found = {frozenset(comp) for comp in components(import_graph())}
  assert not (gone := [sorted(c) for c in KNOWN_CIRCLES if c not in found]), f"no longer circles, remove them from KNOWN_CIRCLES: {gone}"

def test_circles_are_found():
  graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e": 5}}
  assert circles(graph) == [["a", "b", "c", "a"]]

# ***** private names *****

# modules whose private names other packages may use by design
PRIVATE_OK = {"tinygrad._core"}   # the compiled core: the package's own extension module

def package_of(mod:str) -> str:
  """The top-level package a module belongs to: tinygrad.tensor.core -> tinygrad.tensor; a module directly in tinygrad/ is its own."""
  return ".".join(mod.split(".")[:2])

def is_private(name:str) -> bool: return name.startswith("_") and not name.startswith("__")

def private_reach_ins(path:pathlib.Path, mod:str) -> list[str]:
  """`from tinygrad.x import _name` and `bound._name` (bound: a name imported from tinygrad.x) where tinygrad.x is another package."""
  mine = package_of(mod)
  bound: dict[str, str] = {}   # local name -> the module it was imported from (or is)
  bad = []
  for node in nodes_of(path):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name.startswith("tinygrad") and a.asname: bound[a.asname] = a.name
    elif isinstance(node, ast.ImportFrom) and (base := from_base(node, mod, path)).startswith("tinygrad"):
      for a in node.names:
        target = f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base
        bound[a.asname or a.name] = target
        if is_private(a.name) and package_of(base) != mine and f"{base}.{a.name}" not in PRIVATE_OK:
          bad.append(f"line {node.lineno}: from {base} import {a.name}")
  for node in nodes_of(path):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and is_private(node.attr) and \
       (src := bound.get(node.value.id)) is not None and package_of(src) != mine and src not in PRIVATE_OK:
      bad.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({node.value.id} from {src})")
  return bad

@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_reach_ins(path:pathlib.Path):
  mod = module_name(path)
  assert not (bad := private_reach_ins(path, mod)), f"{mod} uses private names of other packages: " + ", ".join(bad)
