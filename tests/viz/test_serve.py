# The VIZ server: JSON endpoints over a recorded training step, loopback only, the next free port, and the page in headless Chromium.
import base64
import json
import os
import signal
import subprocess
import sys
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
import zlib
import pytest
import tinygrad
from tinygrad.viz import serve
from tinygrad.viz.log import read_log
from tinygrad.viz.profile import ProfileError, load_profile
from tests.helpers.browser import HeadlessChromium, chromium_path
from tests.helpers.viz_run import TRAIN_STEP, run_recorded

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
  _, files = run_recorded(tmp_path_factory.mktemp("viz"), TRAIN_STEP, VIZ="1")
  return files

def start(rewrites:str|None, profile:str|None, port:int=0):
  srv = serve.make_server(rewrites, profile, port)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  return srv, f"http://127.0.0.1:{srv.server_address[1]}"

def get(url:str):
  with urllib.request.urlopen(url, timeout=30) as r: return json.loads(r.read())

@pytest.fixture(scope="module")
def server(recorded):
  srv, url = start(recorded["rewrites"], recorded["profile"])
  SERVED[url] = recorded
  yield url
  srv.shutdown()
  srv.server_close()

@pytest.mark.cpu
def test_endpoints(server, recorded):
  groups = get(f"{server}/api/groups")
  log = read_log(recorded["rewrites"])
  assert [g["name"] for g in groups] == [g.name for g in log.groups]
  kernel = next(g for g in groups if g["kind"] == "kernel" and g["rewrites"])
  assert kernel["has_source"] and kernel["matches"] > 0
  g = get(f"{server}/api/groups/{kernel['id']}")
  assert g["source"].count(g["name"]) >= 1 and g["linear"] and all(set(r) >= {"id", "name", "location", "depth", "matches", "nodes"}
                                                                     for r in g["rewrites"])
  rw = get(f"{server}/api/rewrites/{next(r['id'] for r in g['rewrites'] if r['matches'])}")
  m = rw["matches"][0]
  assert m["rule_src"] and m["rule"][0].endswith(".py") and m["seconds"] >= 0
  before, after = get(f"{server}/api/graph?root={m['before']}"), get(f"{server}/api/graph?root={m['after']}&base={m['before']}")
  assert before["layout"] == "dot" and "<svg" in before["svg"] and before["shown"] == before["total"] == len(before["nodes"])
  assert any(n["changed"] for n in after["nodes"]) and not any(n["changed"] for n in before["nodes"])
  hits = get(f"{server}/api/search?q=range")
  assert hits and all("RANGE" in h["op"] or "range" in h["arg"].lower() for h in hits)
  prof = get(f"{server}/api/profile")
  assert prof["devices"][0]["name"] == "CPU" and prof["t1"] > prof["t0"]
  for bad in ("/api/groups/99999", "/api/rewrites/99999", "/api/graph?root=99999999", "/nothing"):
    with pytest.raises(urllib.error.HTTPError) as e: urllib.request.urlopen(server + bad, timeout=30)
    assert e.value.code == 404 and "error" in json.loads(e.value.read())

def test_loopback_only_and_next_free_port(capsys):
  srv, url = start(None, None)
  try:
    assert srv.server_address[0] == "127.0.0.1"
    # another address of this host can't reach it
    other = socket.gethostbyname(socket.gethostname())
    if other.startswith("127."): other = None
    if other is not None:
      with pytest.raises(OSError): socket.create_connection((other, srv.server_address[1]), timeout=2)
    busy = srv.server_address[1]
    srv2 = serve.bind(busy)
    assert srv2.server_address[1] != busy and f"port {busy} in use, serving on" in capsys.readouterr().out
    srv2.server_close()
    assert get(f"{url}/api/groups") == [] and get(f"{url}/api/profile") is None
  finally:
    srv.shutdown()
    srv.server_close()

def test_bad_files_are_refused(tmp_path):
  (bad := tmp_path / "p.json").write_text("[1, 2]")
  with pytest.raises(ProfileError, match="p.json is not a profile"): load_profile(str(bad))
  with pytest.raises(SystemExit): serve.main(["--profile", str(bad), "--no-browser"])

BIG = """
import sys
sys.setrecursionlimit(100000)
from tinygrad.uop.ops import UOp, UPat, PatternMatcher, graph_rewrite, Ops
from tinygrad.dtype import dtypes
x = UOp.variable("x", 0, 10)
for i in range(10000): x = UOp(Ops.ADD, dtypes.int, (x, UOp(Ops.CONST, dtypes.int, arg=i))) if i % 2 else UOp(Ops.MUL, dtypes.int, (x, x))
pm = PatternMatcher([(UPat(Ops.CONST, arg=1, name="c"), lambda c: UOp(Ops.CONST, dtypes.int, arg=-1))])
graph_rewrite(UOp.sink(x), pm, name="big")
"""

def png_varies(png:bytes) -> bool:
  """Whether a PNG's pixels are not all one colour (decodes the IDAT stream: 8-bit RGBA or RGB, any filter)."""
  assert png[:8] == b"\x89PNG\r\n\x1a\n"
  pos, idat, width = 8, b"", 0
  while pos < len(png):
    n, kind = struct.unpack(">I4s", png[pos:pos+8])
    if kind == b"IHDR": width, bpp = struct.unpack(">I", png[pos+8:pos+12])[0], {6: 4, 2: 3}[png[pos+17]]
    if kind == b"IDAT": idat += png[pos+8:pos+8+n]
    pos += 12 + n
  raw = zlib.decompress(idat)
  rows = [raw[i+1:i+1+width*bpp] for i in range(0, len(raw), width*bpp+1)]
  # filtered rows: a blank image is constant after filtering too (filter bytes aside), so look at the distinct bytes of the rows
  return len({bytes(r) for r in rows}) > 2 or len(set(rows[len(rows)//2])) > 2

@pytest.mark.cpu
def test_big_graph_opens_fast(tmp_path):
  _, files = run_recorded(tmp_path, BIG, TRACK_MATCH_STATS="2")
  srv, url = start(files["rewrites"], None)
  try:
    rw = get(f"{url}/api/rewrites/0")
    st = time.perf_counter()
    g = get(f"{url}/api/graph?root={rw['sink']}")
    took = time.perf_counter() - st
    assert g["total"] > 10000 and g["shown"] <= serve.MAX_SHOWN + 2 and any(n["collapsed"] for n in g["nodes"])
    assert took < 2.0, f"a 10,000-node graph took {took:.2f} s to open"
    hidden = next(n for n in g["nodes"] if n["collapsed"])
    more = get(f"{url}/api/graph?root={rw['sink']}&expand={hidden['id']}")
    assert more["shown"] > g["shown"]
  finally:
    srv.shutdown()
    srv.server_close()

@pytest.mark.browser
@pytest.mark.cpu
def test_page_in_chromium(server):
  if (exe := chromium_path()) is None: pytest.skip("needs chromium")
  browser = HeadlessChromium(exe)
  try:
    browser.open(server + "/")
    browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
    n = browser.wait_for("document.querySelectorAll('.group').length")
    assert n == len(get(f"{server}/api/groups"))
    names = browser.eval("[...document.querySelectorAll('.group > .name')].map(e => e.firstChild.textContent)")
    assert any(name.startswith("schedule") for name in names) and any(name.startswith(("E_", "r_")) for name in names)
    # open a kernel: its first rewrite's graph is drawn
    browser.eval("[...document.querySelectorAll('.group')].find(g => /^(r|E)_/.test(g.querySelector('.name').firstChild.textContent))"
                 ".querySelector('.name').click()")
    browser.wait_for("document.querySelectorAll('#view svg g.node').length > 0", timeout=30)
    # a click on a match draws before and after, with the new nodes marked
    rw = browser.eval("const rw = [...document.querySelectorAll('.rw')].find(r => !r.textContent.includes(' 0 matches')); rw.click(); rw.dataset.id")
    browser.wait_for(f"document.getElementById('steps').dataset.rewrite == '{rw}' && document.querySelectorAll('.step').length > 1")
    browser.eval("document.querySelectorAll('.step')[1].click()")
    browser.wait_for("document.querySelectorAll('#view .pane').length == 2 && document.querySelectorAll('#view .pane svg').length == 2",
                     timeout=30)
    assert browser.eval("document.querySelector('#source pre').textContent").startswith(("typedef", "#include", "void", "static"))
    # the search box marks nodes by op
    browser.eval("const s = document.getElementById('search'); s.value = 'const'; s.dispatchEvent(new Event('input'))")
    assert browser.eval("document.querySelectorAll('#view g.node.hit').length") > 0
    shot = base64.b64decode(browser.send("Page.captureScreenshot", format="png")["data"])
    assert png_varies(shot)
    # the profile tab: a row per device with its events
    browser.eval("document.querySelector('[data-tab=profile]').click()")
    assert browser.wait_for("document.querySelectorAll('#timeline rect.event').length", timeout=30) > 0
    assert "CPU" in browser.eval("document.getElementById('timeline').textContent")
  finally: browser.close()

@pytest.mark.browser
def test_page_says_when_nothing_was_recorded():
  if (exe := chromium_path()) is None: pytest.skip("needs chromium")
  srv, url = start(None, None)
  browser = HeadlessChromium(exe)
  try:
    browser.open(url + "/")
    assert browser.wait_for("document.querySelector('#groups .msg') && document.querySelector('#groups .msg').textContent.includes('no graph')")
    browser.eval("document.querySelector('[data-tab=profile]').click()")
    assert "no profile was recorded" in browser.wait_for("document.querySelector('#timeline .msg').textContent.includes('no profile') && "
                                                          "document.querySelector('#timeline .msg').textContent")
  finally:
    browser.close()
    srv.shutdown()
    srv.server_close()

@pytest.mark.cpu
def test_without_graphviz_graphs_are_text(server, monkeypatch):
  monkeypatch.setitem(sys.modules, "graphviz", None)   # import graphviz now raises ImportError
  log = read_log(serve_files(server)["rewrites"])
  g = serve.graph_view(log, log.rewrites[0].sink, frozenset(), frozenset(), None)
  assert g["layout"] == "text" and g["svg"] is None and "= Ops." in g["text"]

def serve_files(url:str) -> dict: return SERVED[url]
SERVED: dict[str, dict] = {}

@pytest.mark.cpu
def test_viz_serves_at_exit(tmp_path):
  # VIZ=1 serves at exit (VIZ_SERVE=1 stands in for a terminal), on a free port, until stopped
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  (tmp_path / "prog.py").write_text(TRAIN_STEP)
  env = {k: v for k, v in os.environ.items() if k not in ("TRACK_MATCH_STATS", "VIZ", "PROFILE", "DEBUG")}
  env.update(VIZ="1", VIZ_SERVE="1", PORT=str(port), BROWSER="0", TMPDIR=str(tmp_path),
             PYTHONPATH=os.path.dirname(os.path.dirname(tinygrad.__file__)))
  proc = subprocess.Popen([sys.executable, str(tmp_path / "prog.py")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
  try:
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (line := proc.stdout.readline()):
      lines.append(line)
      if "serving VIZ on" in line: break
    assert f"serving VIZ on http://127.0.0.1:{port}" in "".join(lines), "".join(lines)
    assert any(g["kind"] == "kernel" for g in get(f"http://127.0.0.1:{port}/api/groups"))
  finally:
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(30)

@pytest.mark.browser
@pytest.mark.cpu
def test_page_opens_a_big_graph_fast(tmp_path):
  if (exe := chromium_path()) is None: pytest.skip("needs chromium")
  _, files = run_recorded(tmp_path, BIG, TRACK_MATCH_STATS="2")
  srv, url = start(files["rewrites"], None)
  browser = HeadlessChromium(exe)
  try:
    browser.open(url + "/")
    browser.wait_for("document.querySelectorAll('.group').length")
    browser.eval("window.t0 = performance.now(); document.querySelector('.group .name').click()")
    browser.wait_for("document.querySelectorAll('#view svg g.node').length > 0", timeout=30)
    took = browser.eval("(performance.now() - window.t0) / 1000")
    print(f"the page drew the 10,000-node graph in {took:.2f} s")
    assert took < 2.0, f"the page took {took:.2f} s to draw a 10,000-node graph"
    assert "of 15003 nodes shown" in browser.eval("document.getElementById('status').textContent")
    n = browser.eval("document.querySelectorAll('#view g.node').length")
    browser.eval("document.querySelector('#view g.node.expandable').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    browser.wait_for(f"document.querySelectorAll('#view g.node').length > {n}", timeout=30)
  finally:
    browser.close()
    srv.shutdown()
    srv.server_close()
