"""The VIZ web viewer: serves a recorded program's rewrites (the rewrite log) and profile (a Chrome trace) on 127.0.0.1 only.

  python -m tinygrad.viz.serve [--rewrites LOG] [--profile TRACE] [--port N] [--no-browser]

VIZ=1 starts it at exit. The page (index.html, viz.js, viz.css in this folder) asks the JSON endpoints below for what it shows; graphs
are laid out by Graphviz's `dot` through the `graphviz` package (the [viz] extra), and shown as text without it.
"""
from __future__ import annotations
import argparse
import functools
import http.server
import json
import os
import pathlib
import re
import sys
import threading
import webbrowser
from collections import deque
from urllib.parse import parse_qs, urlparse

from tinygrad.viz.log import RewriteLog, RewriteLogError, read_log, reachable, render
from tinygrad.viz.profile import ProfileError, load_profile
from tinygrad.helpers import printable

STATIC = {"/": ("index.html", "text/html"), "/index.html": ("index.html", "text/html"), "/viz.js": ("viz.js", "text/javascript"),
          "/viz.css": ("viz.css", "text/css"), "/timeline.js": ("timeline.js", "text/javascript")}
MAX_SHOWN = 400        # a graph bigger than this is shown collapsed: the nodes nearest its root, the rest behind expandable nodes
LOOPBACK = "127.0.0.1"

class NotFound(Exception): pass

class VizData:
  """What the endpoints serve: the log, the profile, and the caches of their derived views."""
  def __init__(self, log:RewriteLog|None, profile:dict|None):
    self.log = log or RewriteLog([], [], [])
    self.profile = profile
    self._layouts: dict[tuple, dict] = {}
    self._lock = threading.Lock()

  def groups(self) -> list[dict]:
    return [{"id": g.id, "name": g.name, "kind": g.kind, "rewrites": len(g.rewrites),
             "matches": sum(len(self.log.rewrites[r].matches) for r in g.rewrites), "has_source": g.source is not None} for g in self.log.groups]

  def group(self, gi:int) -> dict:
    if not 0 <= gi < len(self.log.groups): raise NotFound(f"no group {gi} (the log has {len(self.log.groups)})")
    g = self.log.groups[gi]
    rws = [{"id": r, "name": (rec := self.log.rewrites[r]).name, "location": list(rec.location), "depth": rec.depth,
            "matches": len(rec.matches), "nodes": self._count(rec.sink)} for r in g.rewrites]
    return {"id": g.id, "name": g.name, "kind": g.kind, "source": g.source, "linear": g.linear, "rewrites": rws}

  @functools.lru_cache(maxsize=None)  # noqa: B019 (one VizData per server)
  def _count(self, root:int) -> int: return len(reachable(self.log.nodes, root))

  def rewrite(self, ri:int) -> dict:
    if not 0 <= ri < len(self.log.rewrites): raise NotFound(f"no rewrite {ri} (the log has {len(self.log.rewrites)})")
    rec = self.log.rewrites[ri]
    return {"id": ri, "group": rec.group, "name": rec.name, "location": list(rec.location), "sink": rec.sink, "result": rec.result,
            "matches": [{"i": i, "before": b, "after": a, "rule": list(loc), "rule_src": rule_source(loc), "seconds": t}
                        for i, (b, a, loc, t) in enumerate(rec.matches)]}

  def search(self, q:str) -> list[dict]:
    q = q.lower()
    if not q: return []
    return [{"node": n.id, "op": n.op, "arg": n.arg} for n in self.log.nodes if q in n.op.lower() or q in n.arg.lower()][:200]

  def graph(self, root:int, mark:frozenset[int], expand:frozenset[int], base:int|None) -> dict:
    nodes = self.log.nodes
    if not 0 <= root < len(nodes) or (base is not None and not 0 <= base < len(nodes)): raise NotFound(f"no node {root}")
    key = (root, mark, expand, base)
    with self._lock:
      if (ret := self._layouts.get(key)) is not None: return ret
    ret = graph_view(self.log, root, mark, expand, base)
    with self._lock: self._layouts[key] = ret
    return ret

def rule_source(loc:tuple[str, int]) -> str:
  # only Python sources: a log names the files, and the server shows nothing else of the disk
  return printable(loc) if loc[0].endswith(".py") else ""

def shown_nodes(log:RewriteLog, root:int, expand:frozenset[int]) -> tuple[list[int], dict[int, int]]:
  """The nodes drawn for the graph under root: all of them up to MAX_SHOWN, else the nearest MAX_SHOWN (breadth first from the root)
  plus the sources of every expanded node; a drawn node with sources left out is drawn collapsed, with the count of nodes it hides."""
  under = reachable(log.nodes, root)
  if len(under) <= MAX_SHOWN: return under, {}
  taken, queue = {root}, deque([root])
  while queue:
    u = queue.popleft()
    if len(taken) >= MAX_SHOWN and u not in expand: continue
    for s in log.nodes[u].src:
      if s not in taken:
        taken.add(s)
        queue.append(s)
  collapsed: dict[int, int] = {}
  for u in taken:
    if all(s in taken for s in log.nodes[u].src): continue
    hidden, stack = set(), [s for s in log.nodes[u].src if s not in taken]
    while stack:
      if (x := stack.pop()) in hidden: continue
      hidden.add(x)
      stack.extend(s for s in log.nodes[x].src if s not in taken and s not in hidden)
    collapsed[u] = len(hidden)
  return sorted(taken), collapsed

def _label(n) -> str:
  arg = n.arg if len(n.arg) <= 40 else n.arg[:37] + "..."
  return f"{n.op.removeprefix('Ops.')}\n{n.dtype.removeprefix('dtypes.')}" + ("" if arg in ("None", "") else f"\n{arg}")

_ESC = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})

def graph_view(log:RewriteLog, root:int, mark:frozenset[int], expand:frozenset[int], base:int|None) -> dict:
  shown, collapsed = shown_nodes(log, root, expand)
  shown_set = set(shown)
  changed = set(shown) - set(reachable(log.nodes, base)) if base is not None else set()
  meta = [{"id": u, "op": (n := log.nodes[u]).op, "dtype": n.dtype, "arg": n.arg, "changed": u in changed or u in mark,
           "collapsed": collapsed.get(u, 0)} for u in shown]
  ret = {"root": root, "total": len(reachable(log.nodes, root)), "shown": len(shown), "nodes": meta, "svg": None, "text": None, "layout": "dot"}
  lines = ["digraph G {", 'graph [rankdir=BT, bgcolor="transparent", nodesep=0.15, ranksep=0.3];',
           'node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10, fillcolor="#f2f2f2", color="#888888", margin="0.08,0.03"];',
           'edge [color="#888888", arrowsize=0.5];']
  for m in meta:
    label = _label(log.nodes[m["id"]]) + (f"\n[+{m['collapsed']} hidden]" if m["collapsed"] else "")
    fill = "#ffd27f" if m["changed"] else "#d7e7ff" if m["collapsed"] else "#f2f2f2"
    lines.append(f'n{m["id"]} [id="n{m["id"]}", label="{label.translate(_ESC)}", fillcolor="{fill}"];')
  for u in shown:
    if u in collapsed: continue
    for s in log.nodes[u].src:
      if s in shown_set: lines.append(f"n{s} -> n{u};")
  lines.append("}")
  try:
    import graphviz
    ret["svg"] = graphviz.Source("\n".join(lines)).pipe(format="svg").decode()
  except Exception as e:   # no graphviz package, no dot binary, or dot failed: the graph as text
    ret.update(layout="text", text=render(log.nodes, root) if ret["total"] <= 5000 else "\n".join(
      f"%{m['id']} = {m['op']} {m['dtype']} arg={m['arg']}" for m in meta), reason=f"{type(e).__name__}: {e}"[:300])
  return ret

class Handler(http.server.BaseHTTPRequestHandler):
  data: VizData
  def log_message(self, format, *args): pass   # quiet: the terminal shows the server's address only

  def send(self, status:int, body:bytes, ctype:str) -> None:
    self.send_response(status)
    self.send_header("Content-Type", ctype)
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Cache-Control", "no-store")
    self.end_headers()
    self.wfile.write(body)

  def send_json(self, obj, status:int=200) -> None: self.send(status, json.dumps(obj).encode(), "application/json")

  def do_GET(self):
    url = urlparse(self.path)
    query = parse_qs(url.query)
    try:
      if url.path in STATIC:
        fn, ctype = STATIC[url.path]
        return self.send(200, (pathlib.Path(__file__).parent / fn).read_bytes(), ctype)
      if url.path == "/api/groups": return self.send_json(self.data.groups())
      if (m := re.fullmatch(r"/api/groups/(\d+)", url.path)): return self.send_json(self.data.group(int(m[1])))
      if (m := re.fullmatch(r"/api/rewrites/(\d+)", url.path)): return self.send_json(self.data.rewrite(int(m[1])))
      if url.path == "/api/graph":
        def ids(k:str) -> frozenset[int]: return frozenset(int(x) for v in query.get(k, []) for x in v.split(",") if x)
        if "root" not in query: raise ValueError("/api/graph needs root=<node id>")
        base = int(query["base"][0]) if "base" in query else None
        return self.send_json(self.data.graph(int(query["root"][0]), ids("mark"), ids("expand"), base))
      if url.path == "/api/search": return self.send_json(self.data.search(query.get("q", [""])[0]))
      if url.path == "/api/profile": return self.send_json(self.data.profile)
      raise NotFound(f"no such path {url.path}")
    except NotFound as e: self.send_json({"error": str(e)}, 404)
    except ValueError as e: self.send_json({"error": str(e)}, 400)

def bind(port:int, tries:int=50) -> http.server.ThreadingHTTPServer:
  """A server on 127.0.0.1 at `port`, or the next free port (said on stdout)."""
  for p in range(port, port + tries):
    try: srv = http.server.ThreadingHTTPServer((LOOPBACK, p), Handler)
    except OSError: continue
    if p != port: print(f"port {port} in use, serving on http://{LOOPBACK}:{p}")
    return srv
  raise OSError(f"ports {port} to {port + tries - 1} on {LOOPBACK} are all in use: set PORT to a free one")

def make_server(rewrites:str|None, profile:str|None, port:int) -> http.server.ThreadingHTTPServer:
  log = read_log(rewrites) if rewrites else None
  prof = load_profile(profile) if profile else None
  handler = type("VizHandler", (Handler,), {"data": VizData(log, prof)})
  srv = bind(port)
  srv.RequestHandlerClass = handler
  return srv

def main(argv:list[str]|None=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinygrad.viz.serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--rewrites", help="the rewrite log VIZ=1 / TRACK_MATCH_STATS=2 saved")
  ap.add_argument("--profile", help="the profile (Chrome trace) VIZ / PROFILE=1 saved")
  ap.add_argument("--port", type=int, default=int(os.getenv("PORT", "8000")), help="first port to try (PORT, default 8000)")
  ap.add_argument("--no-browser", action="store_true", help="don't open a browser (also BROWSER=0)")
  args = ap.parse_args(argv)
  try: srv = make_server(args.rewrites, args.profile, args.port)
  except (RewriteLogError, ProfileError, OSError) as e: ap.error(str(e))
  url = f"http://{LOOPBACK}:{srv.server_address[1]}"
  print(f"serving VIZ on {url} (Ctrl-C stops)", flush=True)
  if not args.no_browser and os.getenv("BROWSER", "1") != "0":
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
  try: srv.serve_forever()
  except KeyboardInterrupt: pass
  finally: srv.server_close()
  return 0

if __name__ == "__main__": sys.exit(main())
