"""Headless Chromium driven through the DevTools protocol over --remote-debugging-pipe (JSON messages ended by a NUL byte: Chromium reads
commands on its fd 3 and writes replies and events on its fd 4), so a page can be tested without a websocket library."""
from __future__ import annotations
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any

def chromium_path() -> str|None: return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

class HeadlessChromium:
  def __init__(self, exe:str, timeout:float=60.0):
    self.timeout, self.next_id, self.buf, self.session = timeout, 0, b"", None
    self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
    to_child_r, self.to_child = os.pipe()
    self.from_child, from_child_w = os.pipe()
    # the child's ends move above fd 9 so that bash can put them on fd 3 and 4 (where Chromium looks) without one overwriting the other
    # (bash, not sh: dash takes one-digit fds only)
    child_r, child_w = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
    for fd in (to_child_r, from_child_w): os.close(fd)
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions", "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}", "about:blank"]
    self.proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{child_r} 4>&{child_w}', exe, *args], pass_fds=(child_r, child_w),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for fd in (child_r, child_w): os.close(fd)

  def send(self, method:str, session:bool=True, **params:Any) -> dict:
    """Runs one command and returns its result (in the attached page's session unless session=False); events in between are dropped."""
    self.next_id += 1
    msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
    if session and self.session: msg["sessionId"] = self.session
    os.write(self.to_child, json.dumps(msg).encode() + b"\0")
    deadline = time.monotonic() + self.timeout
    while True:
      while b"\0" in self.buf:
        raw, self.buf = self.buf.split(b"\0", 1)
        reply = json.loads(raw)
        if reply.get("id") == self.next_id:
          if "error" in reply: raise RuntimeError(f"{method}: {reply['error']}")
          return reply["result"]
      if (left := deadline - time.monotonic()) <= 0 or not select.select([self.from_child], [], [], left)[0]:
        raise TimeoutError(f"chromium did not answer {method} in {self.timeout} s")
      if not (data := os.read(self.from_child, 1 << 20)): raise RuntimeError("chromium exited")
      self.buf += data

  def open(self, url:str) -> None:
    page = next(t for t in self.send("Target.getTargets", session=False)["targetInfos"] if t["type"] == "page")
    self.session = self.send("Target.attachToTarget", session=False, targetId=page["targetId"], flatten=True)["sessionId"]
    self.send("Page.enable")
    self.send("Page.navigate", url=url)
    self.wait_for("document.readyState === 'complete' && location.href.startsWith(" + json.dumps(url) + ")")

  def eval(self, expression:str) -> Any:
    res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in res: raise RuntimeError(f"{expression!r} threw: {res['exceptionDetails']}")
    return res["result"].get("value")

  def wait_for(self, expression:str, timeout:float|None=None) -> Any:
    deadline = time.monotonic() + (timeout or self.timeout)
    while not (value := self.eval(expression)):
      if time.monotonic() > deadline: raise TimeoutError(f"still false after {timeout or self.timeout} s: {expression}")
      time.sleep(0.05)
    return value

  def close(self) -> None:
    try: self.send("Browser.close", session=False)
    except (RuntimeError, TimeoutError, OSError): pass
    try: self.proc.wait(10)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    os.close(self.to_child)
    os.close(self.from_child)
    shutil.rmtree(self.profile, ignore_errors=True)
