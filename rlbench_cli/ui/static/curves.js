// rlbench ui's curves: /api/curves' groups unpacked and drawn as uPlot lines with their bands (one polygon a
// group), per-seed lines and, past COMPACT_LEGEND groups, a searchable legend. Loaded after app.js, whose
// helpers (el, clear, state, destroyCharts, PALETTE) it uses, before the page starts (DOMContentLoaded). As
// there: every string from the store reaches the page through textContent, never innerHTML.
"use strict";

// /api/curves?pack=1 sends each list of numbers as base64 of float64 (NaN: no value): exact, and read here
// far faster than as many JSON numbers
function floats(text) {
  const bin = atob(text), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const f = new Float64Array(bytes.buffer), out = new Array(f.length);
  for (let i = 0; i < f.length; i++) out[i] = Number.isNaN(f[i]) ? null : f[i];
  return out;
}

function unpack(out) {
  if (!out.packed) return out;
  out.groups.forEach((g) => {
    ["step", "wall", "y", "lower", "upper"].forEach((k) => { g[k] = floats(g[k]); });
    g.lines.forEach((l) => ["step", "wall", "y"].forEach((k) => { l[k] = floats(l[k]); }));
  });
  out.packed = false;
  return out;
}

// the i-th group's colour: the palette's ten, then hues a golden angle apart (two groups found among 500 by
// the compact legend's search rarely share a colour)
function groupColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  const h = (i * 137.508) % 360, s = 0.7, l = i % 2 ? 0.38 : 0.5;
  const f = (n) => { const k = (n + h / 30) % 12, c = l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1)); return Math.round(255 * c).toString(16).padStart(2, "0"); };
  return "#" + f(0) + f(8) + f(4);
}

function bandColor(c, a) {
  const n = parseInt(c.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

// above COMPACT_LEGEND groups the chart's legend is a searchable list of the groups (uPlot's own: a row per
// series, 500 rows or more for 500 groups, most of the browser's time to draw them), LEGEND_ROWS rows at once
const COMPACT_LEGEND = 50;
const LEGEND_ROWS = 40;

function drawCurves(div, out, st, drawn) {
  div.drawn = drawn; // called once the chart has drawn these data
  div.setAttribute("data-groups", out.groups.length);
  div.setAttribute("data-points", out.groups.reduce((n, g) => n + g.step.length, 0));
  if (!div.hiddenGroups) div.hiddenGroups = new Set(); // the groups the user hid (by label), kept across redraws
  const layout = JSON.stringify([st.x, st.log, out.metric, out.groups.map((g) => [g.label, g.lines.map((l) => l.seed)])]);
  if (out.groups.length && div.chart && state.charts.includes(div.chart) && div.layout === layout) {
    const { data, series, bands, groups } = curveData(out, st);
    div.bands = bands;
    div.chart.setData(data); // the same series: new points only, no new chart
    if (div.legendGroups) { div.legendGroups = groups; div.renderLegend(); } // its run counts (n=)
    // a group's run count (n=) in its legend row, changed in place
    const u = div.chart, rows = u.root.querySelectorAll(".u-legend .u-series"), skip = series.length - rows.length;
    series.forEach((s, k) => {
      if (k < skip || s.band || u.series[k].label === s.label) return;
      u.series[k].label = s.label;
      const label = rows[k - skip].querySelector(".u-label");
      if (label) label.textContent = s.label;
    });
    return;
  }
  destroyCharts();
  clear(div);
  div.chart = null;
  if (!out.groups.length) {
    div.appendChild(el("p", { class: "muted" }, "no points yet"));
    if (div.drawn) { div.drawn(); div.drawn = null; }
    return;
  }
  const { data, series, bands, groups } = curveData(out, st);
  div.bands = bands;
  groups.forEach((g) => { if (div.hiddenGroups.has(g.label)) g.series.forEach((k) => { series[k].show = false; }); });
  const compact = groups.length > COMPACT_LEGEND;
  const opts = {
    width: Math.max(400, div.clientWidth || 900), height: 320, series,
    scales: { x: { time: false }, y: { ...(st.log ? { distr: 4 } : {}), range: (u, min, max) => bandRange(u, div.bands, min, max, st.log) } },
    axes: [{ label: series[0].label }, { label: out.metric }],
    legend: { live: false, show: !compact },
    hooks: { drawAxes: [(u) => fillBands(u, div.bands)], draw: [() => { const f = div.drawn; div.drawn = null; if (f) f(); }] },
  };
  const u = new uPlot(opts, data, div);
  div.legendGroups = null;
  if (compact) compactLegend(div, u, groups);
  else {
    // the legend names the groups; band edges and per-seed lines stay out of it
    const rows = u.root.querySelectorAll(".u-legend .u-series");
    const skip = series.length - rows.length; // the x series has no row when the legend is not live
    rows.forEach((row, i) => { if (series[i + skip].band) row.style.display = "none"; });
  }
  state.charts.push(u);
  div.chart = u;
  div.layout = layout;
}

// the compact legend: a search box over the groups' labels, the first LEGEND_ROWS matches listed, each with
// its colour and a box to hide or show it (its line, band and per-seed lines); "only these" shows the matches
// alone, "all" every group. The search and the hidden groups outlive a live refresh's redraw.
function compactLegend(div, u, groups) {
  div.legendGroups = groups;
  const search = el("input", { id: "legend-search", type: "search", size: 36, value: div.legendQuery || "",
    placeholder: `find a group (${groups.length})`, "aria-label": "find a group" });
  const count = el("span", { id: "legend-count", class: "muted" });
  const list = el("div", { id: "legend-list" });
  const matches = () => {
    const q = search.value.trim().toLowerCase();
    return div.legendGroups.filter((g) => !q || g.label.toLowerCase().includes(q));
  };
  const setShown = (g, on) => {
    g.series.forEach((k) => { if (u.series[k].show !== on) u.setSeries(k, { show: on }); });
    if (on) div.hiddenGroups.delete(g.label); else div.hiddenGroups.add(g.label);
  };
  function render() {
    const found = matches(), all = div.legendGroups;
    const hidden = all.filter((g) => !u.series[g.series[0]].show).length;
    div.setAttribute("data-hidden", hidden);
    count.textContent = `${found.length} of ${all.length} groups` + (hidden ? `, ${hidden} hidden` : "") +
      (found.length > LEGEND_ROWS ? `; the first ${LEGEND_ROWS} listed, type to narrow` : "");
    clear(list).append(...found.slice(0, LEGEND_ROWS).map((g) => {
      const box = el("input", { type: "checkbox", "data-group": g.label, checked: u.series[g.series[0]].show });
      box.addEventListener("change", () => { u.batch(() => setShown(g, box.checked)); render(); });
      return el("label", { class: "legend-row", title: g.label }, box,
        el("span", { class: "swatch", style: `background:${g.color}` }), `${g.label} (n=${g.runs})`);
    }));
  }
  search.addEventListener("input", () => { div.legendQuery = search.value; render(); });
  const only = el("button", { id: "legend-only", onclick: () => {
    const keep = new Set(matches());
    u.batch(() => div.legendGroups.forEach((g) => setShown(g, keep.has(g)))); render();
  } }, "show only these");
  const every = el("button", { id: "legend-all", onclick: () => { u.batch(() => div.legendGroups.forEach((g) => setShown(g, true))); render(); } }, "show all");
  div.appendChild(el("div", { id: "curve-legend", class: "compact-legend" }, el("div", { class: "controls" }, search, only, every, count), list));
  div.renderLegend = render;
  render();
}

// each group's band as one polygon under the lines (upper edge, then the lower one back), its gaps spanned:
// one path and one fill per group, where uPlot's own bands clip a fill per band (500 groups: seconds to draw)
function fillBands(u, bands) {
  const ctx = u.ctx, xs = u.data[0], { left, top, width, height } = u.bbox;
  ctx.save();
  ctx.beginPath(); ctx.rect(left, top, width, height); ctx.clip();
  for (const b of bands || []) {
    if (!u.series[b.line] || !u.series[b.line].show) continue;
    const lo = b.lower, hi = b.upper, at = [];
    for (let i = 0; i < xs.length; i++) if (hi[i] !== null && hi[i] !== undefined && lo[i] !== null && lo[i] !== undefined) at.push(i);
    if (at.length < 2) continue;
    ctx.beginPath();
    at.forEach((i, k) => ctx[k ? "lineTo" : "moveTo"](u.valToPos(xs[i], "x", true), u.valToPos(hi[i], "y", true)));
    for (let k = at.length - 1; k >= 0; k--) ctx.lineTo(u.valToPos(xs[at[k]], "x", true), u.valToPos(lo[at[k]], "y", true));
    ctx.closePath();
    ctx.fillStyle = b.fill;
    ctx.fill();
  }
  ctx.restore();
}

// uPlot's columns (x joined over the groups), series and bands of /api/curves' groups: a band's edges are
// columns of the join kept beside the chart's data, not series (500 groups: 1,000 series fewer, a third of
// the chart's time); bandRange puts them in the y range
function curveData(out, st) {
  const tables = [], series = [{ label: st.x === "wall" ? "wall time (s)" : "step" }], bands = [], groups = [];
  const keep = []; // the join's columns that are series
  let col = 1, idx = 1;
  out.groups.forEach((g, i) => {
    const color = groupColor(i);
    groups.push({ label: g.label, runs: g.runs, color, series: [idx, ...g.lines.map((_, k) => idx + 1 + k)] });
    const xs = st.x === "wall" ? g.wall : g.step;
    const order = xs.map((_, k) => k).filter((k) => xs[k] !== null).sort((a, b) => xs[a] - xs[b]);
    tables.push([order.map((k) => xs[k]), order.map((k) => g.y[k]), order.map((k) => g.lower[k]), order.map((k) => g.upper[k])]);
    series.push({ label: `${g.label} (n=${g.runs})`, stroke: color, width: 2, spanGaps: true });
    bands.push({ line: idx, lowerCol: col + 1, upperCol: col + 2, fill: bandColor(color, 0.15) });
    keep.push(col);
    col += 3; idx += 1;
    g.lines.forEach((line) => {
      const lx = st.x === "wall" ? line.wall : line.step;
      tables.push([lx, line.y]);
      series.push({ label: `seed ${line.seed}`, stroke: bandColor(color, 0.45), width: 1, spanGaps: true, band: true });
      keep.push(col);
      col += 1; idx += 1;
    });
  });
  const joined = uPlot.join(tables);
  bands.forEach((b) => { b.lower = joined[b.lowerCol]; b.upper = joined[b.upperCol]; });
  return { data: [joined[0], ...keep.map((c) => joined[c])], series, bands, groups };
}

// the y range of the shown groups' lines and bands (uPlot's own range of the lines, widened)
function bandRange(u, bands, min, max, log) {
  let lo = min, hi = max;
  for (const b of bands || []) {
    if (!u.series[b.line] || !u.series[b.line].show) continue;
    for (const v of b.lower) if (v !== null && v !== undefined && (lo === null || v < lo)) lo = v;
    for (const v of b.upper) if (v !== null && v !== undefined && (hi === null || v > hi)) hi = v;
  }
  if (lo === null || hi === null) return [min, max];
  return log ? uPlot.rangeAsinh(lo, hi, 10, false) : uPlot.rangeNum(lo, hi, 0.1, true);
}
