"""The package is layered in pipeline order: a module imports only modules of its own layer or a lower one.

Imports are read from the source (module level and inside functions alike, `if TYPE_CHECKING:` blocks excepted),
so a lazy import that reaches upward counts too. Importing a submodule runs the package's __init__, which pulls in
everything, so checking sys.modules after an import would prove nothing."""
import ast
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
  ("frontend", ("tinygrad.engine.jit", "tinygrad.tensor", "tinygrad.function", "tinygrad.nn", "tinygrad.apps", "tinygrad.viz", "tinygrad.llm",
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

def imports_of(path:pathlib.Path, mod:str) -> list[tuple[str, int]]:
  tree = ast.parse(path.read_text(), str(path))
  skip: set[int] = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
      skip.update(id(n) for b in node.body for n in ast.walk(b))
  pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
  pkg = pkg.removesuffix(".__init__")
  out = []
  for node in ast.walk(tree):
    if id(node) in skip: continue
    if isinstance(node, ast.Import): out += [(a.name, node.lineno) for a in node.names if a.name.startswith("tinygrad")]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level: base = ".".join(pkg.split(".")[:len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
      if not base.startswith("tinygrad"): continue
      # `from tinygrad import X` / `from tinygrad.uop import ops`: X may be a submodule
      for a in node.names:
        sub = f"{base}.{a.name}"
        out.append((sub if is_module(sub) else base, node.lineno))
  return out

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
  bad = [(name, line) for name, line in imports_of(path, mod) if layer_of(resolve(name)) > me]
  assert not bad, f"{mod} ({LAYERS[me][0]} layer) imports upper layers: " + \
    ", ".join(f"{n} ({LAYERS[layer_of(resolve(n))][0]}) at line {ln}" for n, ln in bad)

def test_every_module_has_a_layer():
  for p in SOURCES: layer_of(module_name(p))
