// The VIZ page: lists the recorded groups (schedules, kernels), their rewrites and matches, and draws graphs the server laid out.
"use strict";
const $ = (sel) => document.querySelector(sel);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text != null) e.textContent = text; return e; };
const state = { group: null, rewrite: null, expand: new Set(), profileDrawn: false };

async function api(path) {
  const res = await fetch(path);
  const body = await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }));
  if (!res.ok) throw new Error(body && body.error ? body.error : `${path}: ${res.status}`);
  return body;
}
function showError(where, err) { where.replaceChildren(el("div", "err", `error: ${err.message || err}`)); }
function status(text) { $("#status").textContent = text; }
const short = (loc) => `${loc[0].split("/").pop()}:${loc[1]}`;

async function loadGroups() {
  const box = $("#groups");
  let groups;
  try { groups = await api("/api/groups"); } catch (e) { return showError(box, e); }
  box.replaceChildren();
  if (groups.length === 0) { box.append(el("p", "msg", "this program ran no graph rewrites")); return; }
  for (const g of groups) {
    const div = el("div", "group"); div.dataset.id = g.id; div.dataset.name = g.name.toLowerCase();
    const name = el("div", "name", g.name); name.append(el("span", "kind", `${g.kind} · ${g.rewrites} rewrites · ${g.matches} matches`));
    name.onclick = () => openGroup(g.id, div);
    div.append(name); box.append(div);
  }
  status(`${groups.length} groups`);
}

async function openGroup(id, div) {
  document.querySelectorAll(".group.open").forEach((d) => { d.classList.remove("open"); d.querySelectorAll(".rw").forEach((r) => r.remove()); });
  div.classList.add("open");
  let g;
  try { g = await api(`/api/groups/${id}`); } catch (e) { return showError($("#view"), e); }
  state.group = g;
  for (const r of g.rewrites) {
    const row = el("div", "rw"); row.dataset.id = r.id;
    row.append(`${"  ".repeat(r.depth)}${r.name} `, el("span", "n", `${r.matches} matches, ${r.nodes} nodes`));
    row.title = short(r.location);
    row.onclick = (ev) => { ev.stopPropagation(); openRewrite(r.id, row); };
    div.append(row);
  }
  $("#source pre").textContent = g.source ?? "(not a kernel: no source)";
  $("#linear pre").textContent = g.linear ? g.linear.join("\n") : "(not a kernel: no linear UOps)";
  status(`${g.name}: ${g.rewrites.length} rewrites`);
  if (g.rewrites.length) openRewrite(g.rewrites[0].id, div.querySelector(".rw"));
  else $("#view").replaceChildren(el("p", "msg", "this group ran no rewrites (its kernel came from a cache or a hand-written program)"));
}

async function openRewrite(id, row) {
  document.querySelectorAll(".rw.sel").forEach((r) => r.classList.remove("sel"));
  if (row) row.classList.add("sel");
  let rw;
  try { rw = await api(`/api/rewrites/${id}`); } catch (e) { return showError($("#view"), e); }
  state.rewrite = rw;
  const steps = $("#steps"); steps.replaceChildren(); steps.dataset.rewrite = id;
  const add = (label, src, fn) => { const s = el("div", "step", label); if (src) s.append(el("span", "src", src)); s.onclick = () => { select(s); fn(); }; steps.append(s); return s; };
  const select = (s) => { steps.querySelectorAll(".sel").forEach((x) => x.classList.remove("sel")); s.classList.add("sel"); };
  const first = add(`input of ${rw.name}`, short(rw.location), () => drawSingle(rw.sink));
  for (const m of rw.matches) add(`${m.i}: ${short(m.rule)} (${(m.seconds * 1e6).toFixed(1)} us)`, m.rule_src, () => drawPair(m));
  if (rw.result != null) add("output", null, () => drawSingle(rw.result, rw.sink));
  select(first); state.expand = new Set(); drawSingle(rw.sink);
}

async function fetchGraph(root, base) {
  const q = new URLSearchParams({ root });
  if (base != null) q.set("base", base);
  if (state.expand.size) q.set("expand", [...state.expand].join(","));
  return api(`/api/graph?${q}`);
}

function drawInto(pane, g, redraw) {
  pane.replaceChildren();
  if (g.layout !== "dot") { const pre = el("pre", null, g.text); pane.append(pre); return; }
  const holder = el("div"); holder.innerHTML = g.svg;
  const svg = holder.querySelector("svg"); svg.removeAttribute("width"); svg.removeAttribute("height");
  const box = svg.viewBox.baseVal; svg.setAttribute("width", box.width); svg.setAttribute("height", box.height);
  pane.append(svg);
  const meta = new Map(g.nodes.map((n) => [`n${n.id}`, n]));
  for (const node of svg.querySelectorAll("g.node")) {
    const m = meta.get(node.id);
    if (m && m.collapsed) { node.classList.add("expandable"); node.onclick = () => { state.expand.add(m.id); redraw(); }; }
    if (m) node.dataset.text = `${m.op} ${m.arg}`.toLowerCase();
  }
  panZoom(pane, svg);
  highlight();
  status(`${g.shown} of ${g.total} nodes shown` + (g.shown < g.total ? " (click a blue node to expand it)" : ""));
}

function panZoom(pane, svg) {
  let s = Math.min(1, pane.clientWidth / (svg.viewBox.baseVal.width || 1), pane.clientHeight / (svg.viewBox.baseVal.height || 1)), x = 0, y = 0, drag = null;
  const apply = () => { svg.style.transform = `translate(${x}px,${y}px) scale(${s})`; };
  pane.onwheel = (e) => { e.preventDefault(); const r = pane.getBoundingClientRect(), px = e.clientX - r.left, py = e.clientY - r.top, f = Math.exp(-e.deltaY * 0.0015);
    x = px - (px - x) * f; y = py - (py - y) * f; s *= f; apply(); };
  pane.onmousedown = (e) => { drag = [e.clientX - x, e.clientY - y]; };
  window.addEventListener("mouseup", () => { drag = null; });
  pane.onmousemove = (e) => { if (drag) { x = e.clientX - drag[0]; y = e.clientY - drag[1]; apply(); } };
  apply();
}

async function drawSingle(root, base) {
  const view = $("#view"); view.replaceChildren(el("p", "msg", "laying out…"));
  const pane = el("div", "pane");
  const redraw = async () => { try { drawInto(pane, await fetchGraph(root, base), redraw); } catch (e) { showError(pane, e); } };
  view.replaceChildren(pane); pane.style.height = "100%"; await redraw();
}

async function drawPair(m) {
  const view = $("#view"), pair = el("div", "pair"), before = el("div", "pane"), after = el("div", "pane");
  pair.append(before, after); view.replaceChildren(pair);
  const rb = async () => { try { drawInto(before, await fetchGraph(m.before), rb); before.prepend(el("h4", null, "before")); } catch (e) { showError(before, e); } };
  const ra = async () => { try { drawInto(after, await fetchGraph(m.after, m.before), ra); after.prepend(el("h4", null, "after (new nodes marked)")); } catch (e) { showError(after, e); } };
  await Promise.all([rb(), ra()]);
}

function highlight() {
  const q = $("#search").value.trim().toLowerCase();
  let n = 0;
  for (const node of document.querySelectorAll("#view g.node")) {
    const hit = q !== "" && (node.dataset.text || "").includes(q);
    node.classList.toggle("hit", hit); if (hit) n++;
  }
  $("#found").textContent = q ? `${n} in view` : "";
  return n;
}

async function searchAll() {
  const q = $("#search").value.trim();
  if (!q) return;
  const inView = highlight();
  try { const hits = await api(`/api/search?q=${encodeURIComponent(q)}`); $("#found").textContent = `${inView} in view, ${hits.length}${hits.length === 200 ? "+" : ""} in the log`; }
  catch (e) { $("#found").textContent = `search failed: ${e.message}`; }
}

function filterGroups() {
  const q = $("#filter").value.trim().toLowerCase();
  for (const g of document.querySelectorAll(".group")) g.style.display = !q || g.dataset.name.includes(q) ? "" : "none";
}

async function showTab(name) {
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("on", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("on", t.id === name));
  if (name === "profile" && !state.profileDrawn) {
    state.profileDrawn = true;
    const box = $("#timeline");
    try {
      const prof = await api("/api/profile");
      if (!prof || !prof.devices.length) box.replaceChildren(el("p", "msg", "no profile was recorded (run with VIZ=1, VIZ=-1 or PROFILE=1)"));
      else drawTimeline(box, prof);
    } catch (e) { showError(box, e); }
  }
}

document.querySelectorAll("#tabs button").forEach((b) => { b.onclick = () => showTab(b.dataset.tab); });
$("#search").addEventListener("input", highlight);
$("#search").addEventListener("keydown", (e) => { if (e.key === "Enter") searchAll(); });
$("#filter").addEventListener("input", filterGroups);
window.addEventListener("error", (e) => status(`error: ${e.message}`));
loadGroups();
