# Random garbage into every public Tensor constructor and method (fuzz_tensor_child.py, hypothesis, bounded in time): each call raises
# an expected Python exception or returns a sane result. The fuzzer runs in a child process so a crash fails this test, not pytest.
import os
import signal
import subprocess
import sys
import pytest
import tinygrad

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "30"))

def run_child(code_or_file:list[str], tmp_path) -> tuple[int, str]:
  env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(tinygrad.__file__)), "CACHEDB": str(tmp_path / "cache.db")}
  proc = subprocess.run([sys.executable, "-W", "ignore", *code_or_file], env=env, capture_output=True, text=True, timeout=SECONDS + 120,
                        cwd=HERE)
  return proc.returncode, proc.stdout + proc.stderr

def check_child(rc:int, out:str) -> None:
  if rc < 0: pytest.fail(f"the fuzzed process crashed with {signal.Signals(-rc).name}:\n{out[-4000:]}")
  assert rc == 0 and "FUZZ_OK" in out, out[-4000:]

@pytest.mark.cpu
def test_fuzz_tensor_api(tmp_path):
  check_child(*run_child(["fuzz_tensor_child.py", str(SECONDS), os.environ.get("FUZZ_SEED", "0")], tmp_path))

def test_a_crashing_child_fails_the_test(tmp_path):
  # the harness itself: a segfault in the child is reported as a crash, with the signal
  rc, out = run_child(["-c", "import ctypes; ctypes.string_at(0)"], tmp_path)
  with pytest.raises(pytest.fail.Exception, match="crashed with SIGSEGV"): check_child(rc, out)
