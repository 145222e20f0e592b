// The profile timeline: one row per device, each event a box coloured by kind (kernel, copy, compile); wheel zooms, drag pans.
"use strict";
function drawTimeline(box, data) {
  const colors = { kernel: "#4c8bf5", copy: "#2bb673", compile: "#f5a623", other: "#9b9b9b" };
  const rowH = 28, labelW = 140, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg"), tip = document.createElement("div");
  tip.style.cssText = "position:absolute;pointer-events:none;background:#222;color:#fff;padding:2px 6px;font-size:11px;display:none;border-radius:3px";
  svg.setAttribute("width", "100%"); svg.setAttribute("height", String(data.devices.length * rowH + 30));
  box.replaceChildren(svg, tip);
  const span = Math.max(data.t1 - data.t0, 1e-3);
  let scale = (box.clientWidth - labelW - 10) / span, offset = 0, drag = null;
  function render() {
    svg.replaceChildren();
    data.devices.forEach((dev, i) => {
      const y = i * rowH + 20;
      const label = document.createElementNS(ns, "text"); label.setAttribute("x", 4); label.setAttribute("y", y + 17); label.textContent = dev.name;
      label.setAttribute("font-size", "12"); svg.append(label);
      for (const ev of dev.events) {
        const x = labelW + (ev.st - data.t0) * scale + offset, w = Math.max(ev.dur * scale, 1);
        if (x + w < labelW || x > box.clientWidth) continue;
        const r = document.createElementNS(ns, "rect");
        r.setAttribute("x", x); r.setAttribute("y", y + 3); r.setAttribute("width", w); r.setAttribute("height", rowH - 8);
        r.setAttribute("fill", colors[ev.cat] || colors.other); r.classList.add("event");
        r.onmousemove = (e) => { tip.style.display = "block"; tip.style.left = `${e.offsetX + 10}px`; tip.style.top = `${e.offsetY + 10}px`;
          tip.textContent = `${ev.name} (${ev.cat}): ${ev.dur >= 1000 ? (ev.dur / 1000).toFixed(2) + " ms" : ev.dur.toFixed(1) + " us"}`; };
        r.onmouseleave = () => { tip.style.display = "none"; };
        svg.append(r);
      }
    });
    const axis = document.createElementNS(ns, "text"); axis.setAttribute("x", labelW); axis.setAttribute("y", 12); axis.setAttribute("font-size", "11");
    axis.textContent = `${(span / 1000).toFixed(2)} ms recorded · wheel: zoom · drag: pan`; svg.append(axis);
  }
  box.onwheel = (e) => { e.preventDefault(); const px = e.offsetX - labelW, f = Math.exp(-e.deltaY * 0.0015);
    offset = px - (px - offset) * f; scale *= f; render(); };
  box.onmousedown = (e) => { drag = e.clientX - offset; };
  window.addEventListener("mouseup", () => { drag = null; });
  box.onmousemove = (e) => { if (drag != null) { offset = e.clientX - drag; render(); } };
  render();
}
