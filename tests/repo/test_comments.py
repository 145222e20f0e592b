"""Code comments say why, not what one machine measured once: no session or issue numbers, no "this VM", no timings.

History belongs in git log; figures belong in benches/README.md ("Design measurements"), where they carry their date and
machine. Only comments and docstrings are read: Python through tokenize (COMMENT tokens, and strings that are a statement of their
own), Rust through a small lexer that skips string and char literals, so code and error messages never count."""
import bisect
import functools
import io
import pathlib
import re
import tokenize
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PY_ROOT, RS_ROOT = ROOT / "python" / "tinygrad", ROOT / "crates" / "uop-core" / "src"

RULES = {
  "session number": r"\bsessions?[ -]?\d+",
  "issue number": r"\bissues?[ -]?#?\d+|\(issue\b",
  "branch of a past session": r"\bs\d{1,2}-[a-z]+\b",
  "measurement machine": r"\bv-?cpus?\b|\bthis (?:machine|vm)\b|\b\d+-(?:v?core|v?cpu) (?:machine|vm)\b",
  "timing": r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|ns)\b|\b\d+\.\d+\s?s\b",
  "throughput": r"\b[gt]flops?\b|\b\d+(?:\.\d+)?\s?[gmk]b/s",
  "speed-up": r"\b\d+(?:\.\d+)?(?:x|%) (?:faster|slower)\b",
}
PATTERN = re.compile("|".join(f"(?P<r{i}>{p})" for i, p in enumerate(RULES.values())), re.IGNORECASE)
RULE_NAMES = list(RULES)

# Hits in the files that the codegen-as-tables rewrite owns (python/tinygrad/codegen/*.py, not opt/), left to that branch: (the
# matched text, a fragment of the same comment line). Empty this list once those passes are rewritten: the stale check says when.
ALLOWED_CODEGEN: list[tuple[str, str]] = []

STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)

def python_comments(path:pathlib.Path) -> list[tuple[int, str]]:
  """COMMENT tokens, and string literals that are a statement of their own (docstrings): never a string the code uses."""
  toks = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline) if t.type != tokenize.NL]
  out = [(t.start[0], t.string) for t in toks if t.type == tokenize.COMMENT]
  code = [t for t in toks if t.type != tokenize.COMMENT]
  for k, t in enumerate(code):
    if t.type == tokenize.STRING and (k == 0 or code[k-1].type in STATEMENT_START) and (k + 1 == len(code) or code[k+1].type in
                                                                                          (tokenize.NEWLINE, tokenize.ENDMARKER)):
      out += [(t.start[0] + i, line) for i, line in enumerate(t.string.splitlines())]
  return out

RAW_STRING, CHAR_LITERAL = re.compile(r'b?r(#*)"'), re.compile(r"b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'")
RUST_TOKEN = re.compile(r"""//|/\*|\bb?r#*"|"|'""")   # where a comment or a literal may start

def rust_comments(path:pathlib.Path) -> list[tuple[int, str]]:
  src, out, i = path.read_text(), [], 0
  starts = [0] + [m.end() for m in re.finditer("\n", src)]
  def line_of(pos:int) -> int: return bisect.bisect_right(starts, pos)
  while (m := RUST_TOKEN.search(src, i)) is not None:
    i, tok = m.start(), m.group(0)
    if tok == "//":
      j = src.find("\n", i)
      j = len(src) if j < 0 else j
      out.append((line_of(i), src[i:j]))
    elif tok == "/*":
      j = src.find("*/", i + 2)
      j = len(src) if j < 0 else j + 2
      out += [(line_of(i) + k, line) for k, line in enumerate(src[i:j].splitlines())]
    elif tok.endswith('"') and (r := RAW_STRING.match(src, i)):   # r"..", r#".."#: no escapes, ends at the same number of #
      j = src.find('"' + r.group(1), r.end())
      j = len(src) if j < 0 else j + 1 + len(r.group(1))
    elif tok == '"':
      j = i + 1
      while j < len(src) and src[j] != '"': j += 2 if src[j] == "\\" else 1
      j += 1
    else: j = c.end() if (c := CHAR_LITERAL.match(src, i)) else i + 1   # a char literal, or a lifetime's quote
    i = j
  return out

def comment_hits(path:pathlib.Path) -> list[tuple[str, int, str, str]]:
  """(path relative to the repository, line, rule, matched text) for each hit in path's comments and docstrings."""
  comments = python_comments(path) if path.suffix == ".py" else rust_comments(path)
  rel = path.relative_to(ROOT).as_posix()
  return [(rel, line, RULE_NAMES[int(m.lastgroup[1:])], m.group(0)) for line, text in comments for m in PATTERN.finditer(text)]

@functools.cache
def all_hits() -> list[tuple[str, int, str, str]]:
  files = sorted(PY_ROOT.rglob("*.py")) + sorted(RS_ROOT.rglob("*.rs"))
  return [hit for f in files for hit in comment_hits(f)]

def _is_codegen_pass_file(rel:str) -> bool: return pathlib.PurePosixPath(rel).parent.as_posix() == "python/tinygrad/codegen"

def _comment_lines(hits) -> dict[tuple[str, int], str]:
  out = {}
  for rel in {h[0] for h in hits}:
    path = ROOT / rel
    for line, text in (python_comments(path) if path.suffix == ".py" else rust_comments(path)): out[(rel, line)] = text
  return out

def _allowing(hit, comments) -> list[tuple[str, str]]:
  rel, line, _, text = hit
  return [e for e in ALLOWED_CODEGEN if _is_codegen_pass_file(rel) and text == e[0] and e[1] in comments[(rel, line)]]

def test_no_history_or_measurements_in_comments():
  hits = all_hits()
  comments = _comment_lines(hits)
  bad = [h for h in hits if not _allowing(h, comments)]
  assert not bad, "comments or docstrings with a session/issue number, a machine or a measurement (keep the why, move the figure to " \
    "benches/README.md, Design measurements):\n" + "\n".join(f"  {rel}:{line}: {rule}: {text!r}" for rel, line, rule, text in bad)

def test_allowed_codegen_hits_still_exist():
  hits = all_hits()
  comments = _comment_lines(hits)
  used = {e for h in hits for e in _allowing(h, comments)}
  stale = [e for e in ALLOWED_CODEGEN if e not in used]
  assert not stale, f"ALLOWED_CODEGEN entries that match nothing any more, delete them: {stale}"

@pytest.mark.parametrize("comment, rule", [
  ("# measured in session 8", "session number"), ("# symbolic (issue 3)", "issue number"), ("# see issue 12", "issue number"),
  ("# on this 2-vCPU VM", "measurement machine"), ("# only on this machine", "measurement machine"),
  ("# 12 ms -> 1.6 ms per step", "timing"), ("# 160 -> 26 us", "timing"), ("# ~0.1 s per run", "timing"),
  ("# 51 GFLOP/s per core", "throughput"), ("# 7x faster conv backward", "speed-up"), ("# branch s7-matmul", "branch of a past session"),
])
def test_rules_catch(comment, rule, tmp_path):
  f = tmp_path / "m.py"
  f.write_text(f"x = 1  {comment}\n")
  assert rule in [RULE_NAMES[int(m.lastgroup[1:])] for _, text in python_comments(f) for m in PATTERN.finditer(text)]

def test_docstrings_are_read(tmp_path):
  f = tmp_path / "m.py"
  f.write_text('"""Module."""\nclass A:\n  """A class,\n  measured in session 4."""\n  def f(self):\n    r\'\'\'Took 12 ms.\'\'\'\n    return 1\n')
  assert [(line, m.group(0)) for line, text in python_comments(f) for m in PATTERN.finditer(text)] == [(4, "session 4"), (6, "12 ms")]

@pytest.mark.parametrize("src", [
  'x = "session 8 took 12 ms"\n',                         # a string in code is not a comment
  "y = 2  # a 3x3 window, 4 KiB pages, 2^29 multiply-adds, 8 lanes x 16 channels\n",
  "def f():\n  '''Threads per workgroup, elements per block, a 16 MiB limit.'''\n",
])
def test_rules_pass_code_and_facts(src, tmp_path):
  f = tmp_path / "m.py"
  f.write_text(src)
  assert [m.group(0) for _, text in python_comments(f) for m in PATTERN.finditer(text)] == []

def test_rust_lexer_reads_comments_only(tmp_path):
  f = tmp_path / "m.rs"
  f.write_text('/// doc: session 8\nlet s = "// not a comment: 12 ms";\nlet c = \'"\'; // after a char: issue 3\n'
               'let r = r#"raw "// 5 ms" "#; /* block\n 7x faster */\n')
  got = [(line, m.group(0)) for line, text in rust_comments(f) for m in PATTERN.finditer(text)]
  assert got == [(1, "session 8"), (3, "issue 3"), (5, "7x faster")]
