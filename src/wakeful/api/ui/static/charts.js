"use strict";
// Inline SVG pictures drawn from the JSON API (issue 17): a Loop's 24 h timeline, its wake-budget gauge and the
// overview's wakes per hour. Labels are set with textContent like everything else.
(function (W) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = function (tag, attrs, ...children) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = String(v);
      else if (k === "testid") node.setAttribute("data-testid", v);
      else node.setAttribute(k, String(v));
    }
    for (const c of children) if (c) node.append(c);
    return node;
  };
  const tip = (text) => svg("title", { text });
  const HOUR = 3600 * 1000;

  // rows of ticks over the last 24 h: events received, wakes sent, faults
  W.timeline = function (rows, testid) {
    const width = 1200, left = 80, rowH = 24, top = 6, to = W.now(), from = to - 24 * HOUR;
    const height = top + rows.length * rowH + 18;
    const x = (ms) => left + ((ms - from) / (to - from)) * (width - left - 8);
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", testid });
    root.append(tip("last 24 h: " + rows.map((r) => r.label + " " + r.times.length).join(", ")));
    for (let h = 0; h <= 24; h += 6) {
      const at = x(from + h * HOUR);
      root.append(svg("line", { x1: at, x2: at, y1: top, y2: height - 16, class: "axis" }));
      root.append(svg("text", { x: at, y: height - 4, class: "tick", "text-anchor": h === 24 ? "end" : "middle", text: h === 24 ? "now" : "-" + (24 - h) + " h" }));
    }
    rows.forEach((row, i) => {
      const y = top + i * rowH + rowH / 2;
      root.append(svg("text", { x: 0, y: y + 4, class: "label", text: row.label + " (" + row.times.length + ")" }));
      root.append(svg("line", { x1: left, x2: width - 8, y1: y, y2: y, class: "lane" }));
      for (const t of row.times) {
        if (t < from || t > to) continue;
        root.append(svg("circle", { cx: x(t), cy: y, r: 4, class: "dot " + row.kind }, tip(row.label + " " + W.time(t))));
      }
    });
    return root;
  };

  // a half-ring: wakes used of the window's budget (6 by default)
  W.gauge = function (used, limit, testid) {
    const frac = limit ? Math.min(1, used / limit) : 0;
    const r = 40, cx = 50, cy = 50;
    const point = (f) => [cx - r * Math.cos(Math.PI * f), cy - r * Math.sin(Math.PI * f)];
    const [ex, ey] = point(frac);
    const root = svg("svg", { viewBox: "0 0 100 62", class: "gauge", role: "img", testid });
    root.append(tip(`wakes used ${used} of ${limit} in the window`));
    root.append(svg("path", { d: `M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${cx + r} ${cy}`, class: "track" }));
    if (frac > 0) root.append(svg("path", { d: `M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${ex.toFixed(2)} ${ey.toFixed(2)}`, class: frac >= 1 ? "fill full" : "fill" }));
    root.append(svg("text", { x: cx, y: cy - 4, "text-anchor": "middle", class: "gauge-value", text: `${used}/${limit}` }));
    root.append(svg("text", { x: cx, y: cy + 10, "text-anchor": "middle", class: "tick", text: "wakes in window" }));
    return root;
  };

  // bars: wakes per hour over the last 24 h
  W.hourBars = function (times, testid) {
    const counts = new Array(24).fill(0), to = W.now();
    for (const t of times) {
      const back = Math.floor((to - t) / HOUR);
      if (back >= 0 && back < 24) counts[23 - back] += 1;
    }
    const width = 1200, height = 150, left = 28, bottom = 18, max = Math.max(1, ...counts);
    const bw = (width - left) / 24;
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", testid });
    root.append(tip("wakes per hour, last 24 h: " + counts.join(" ")));
    root.append(svg("text", { x: 0, y: 12, class: "tick", text: String(max) }));
    root.append(svg("line", { x1: left, x2: width, y1: height - bottom, y2: height - bottom, class: "axis" }));
    counts.forEach((n, i) => {
      const h = ((height - bottom - 8) * n) / max;
      root.append(svg("rect", { x: left + i * bw + 2, y: height - bottom - h, width: bw - 4, height: h, class: "bar", "data-count": n },
        tip((23 - i === 0 ? "this hour" : (23 - i) + " h ago") + ": " + n + " wakes")));
      if (i % 6 === 0) root.append(svg("text", { x: left + i * bw, y: height - 4, class: "tick", text: "-" + (24 - i) + " h" }));
    });
    root.append(svg("text", { x: width - 2, y: height - 4, class: "tick", "text-anchor": "end", text: "now" }));
    return root;
  };
})(window.W);
