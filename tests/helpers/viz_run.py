"""Runs a program under VIZ / PROFILE in a fresh process (so every kernel is lowered, and the exit handler writes its files) and returns
the paths it printed."""
from __future__ import annotations
import os
import re
import subprocess
import sys
import tinygrad

TRAIN_STEP = """\
from tinygrad import Tensor, nn
from tinygrad.helpers import Context
from tinygrad.nn.optim import SGD
Tensor.manual_seed(0)
l1, l2 = nn.Linear(8, 16), nn.Linear(16, 4)
opt = SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.1)
with Context(TRAINING=1):
  loss = l2(l1(Tensor.randn(4, 8)).relu()).sparse_categorical_crossentropy(Tensor([0, 1, 2, 3]))
  opt.zero_grad(); loss.backward(); opt.step()
  print("loss", loss.item())
"""

def run_recorded(tmp_path, script:str, **env_vars:str) -> tuple[str, dict[str, str]]:
  """(stdout, {"rewrites": path, "profile": path} for the files the run saved)."""
  (tmp_path / "prog.py").write_text(script)
  env = {k: v for k, v in os.environ.items() if k not in ("TRACK_MATCH_STATS", "VIZ", "PROFILE", "DEBUG", "VIZ_SERVE")}
  env.update(TMPDIR=str(tmp_path), PYTHONPATH=os.path.dirname(os.path.dirname(tinygrad.__file__)), CACHELEVEL="0", BROWSER="0", **env_vars)
  proc = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  files = {}
  if (m := re.search(r"saved to (\S+\.jsonl)", proc.stdout)): files["rewrites"] = m[1]
  if (m := re.search(r"saved profile to (\S+\.json)", proc.stdout)): files["profile"] = m[1]
  return proc.stdout, files
