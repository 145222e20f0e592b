"""The onnx package's backend node tests, one pytest case each. Cases known to fail are listed with the reason in node_xfail/*.txt
(one file per operator family, `test_name  reason`); they run as strict xfails, so one that starts passing must leave the list."""
import pathlib
import pytest
pytestmark = pytest.mark.cpu
pytest.importorskip("onnx")
from tests.onnx.node_cases import load_cases, run_case  # noqa: E402

def _known_failures() -> dict[str, str]:
  known = {}
  for f in sorted((pathlib.Path(__file__).parent / "node_xfail").glob("*.txt")):
    for line in f.read_text().splitlines():
      if line.strip() and not line.startswith("#"):
        name, _, reason = line.strip().partition(" ")
        known[name] = reason.strip() or "listed without a reason"
  return known

CASES, KNOWN = load_cases(), _known_failures()

@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[n])) if n in KNOWN else n
                                  for n in sorted(CASES)])
def test_node(name):
  from tinygrad.nn.onnx import OnnxRunner
  run_case(CASES[name], OnnxRunner)
