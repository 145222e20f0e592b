# The README's quickstart and .ci/run must not drift apart: CI runs exactly the README's test command.
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]

def _readme_commands() -> list[str]:
  text = (ROOT / "README.md").read_text()
  block = text.split("```sh", 1)[1].split("```", 1)[0]
  return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]

def test_readme_has_two_setup_commands():
  cmds = _readme_commands()
  assert len(cmds) == 2, cmds
  assert cmds[0].startswith("pip install") and "tinygrad.apps.demo" in cmds[0] and "pytest" in cmds[1] and "cargo test" in cmds[1]

def test_ci_runs_the_readme_test_command():
  ci = (ROOT / ".ci" / "run").read_text().splitlines()
  assert _readme_commands()[1] in [line.strip() for line in ci]
