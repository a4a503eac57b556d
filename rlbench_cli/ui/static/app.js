// rlbench ui: vanilla JS, no build step. Every string from the store reaches the page through textContent or
// an attribute set by the DOM API, never through innerHTML.
"use strict";

const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f",
  "#7c3aed", "#b45309"];
const state = { seen: { db: "", files: "" }, due: 0, liveDue: 0, routes: 0, view: null, charts: [] };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: r.statusText }; }
  if (!r.ok) throw new Error((body && body.error) || r.statusText);
  return body;
}

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(4);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function link(href, text) { return el("a", { href }, text); }

function crumbs(...parts) {
  const c = clear(document.getElementById("crumbs"));
  parts.forEach((p) => { c.appendChild(document.createTextNode(" / ")); c.appendChild(p); });
}

function destroyCharts() { state.charts.forEach((u) => u.destroy()); state.charts = []; }

// ---------------------------------------------------------------- suites
async function suitesView(main) {
  crumbs();
  const box = el("section", {}, el("h2", {}, "Suites"));
  main.appendChild(box);
  const table = el("table", { id: "suites" });
  box.appendChild(table);
  async function load() {
    const { suites } = await api("/api/suites");
    clear(table).appendChild(el("tr", {}, el("th", {}, "suite"), el("th", {}, "runs"), el("th", {}, "by status"),
      el("th", {}, "description")));
    for (const s of suites) {
      const counts = Object.entries(s.counts).map(([k, n]) => el("span", { class: "chip status-" + k }, `${k} ${n}`));
      table.appendChild(el("tr", {}, el("td", {}, link("#/suite/" + encodeURIComponent(s.name), s.name)),
        el("td", { class: "num" }, s.total), el("td", {}, counts), el("td", {}, s.description)));
    }
    if (!suites.length) box.appendChild(el("p", { class: "muted" }, "No suites yet: rlbench run SUITE.yaml"));
  }
  await load();
  main.appendChild(queryBox());
  return load;
}

function queryBox() {
  const text = el("textarea", { id: "sql", rows: 3, cols: 100 }, "SELECT suite, algo, status, count(*) AS runs FROM runs GROUP BY ALL ORDER BY ALL");
  const result = el("div", { id: "sql-result" });
  const run = el("button", { id: "run-sql", onclick: async () => {
    try {
      const out = await api("/api/sql?" + new URLSearchParams({ q: text.value }));
      const rows = out.rows.map((r) => Object.fromEntries(out.columns.map((c, i) => [c, r[i]])));
      clear(result).append(el("div", { class: "muted" }, `${out.total} rows` + (out.total > out.rows.length ? `, the first ${out.rows.length} shown` : "")), recordsTable(rows, "sql-table"));
    } catch (e) { clear(result).appendChild(el("p", { class: "error" }, String(e.message || e))); }
  } }, "run");
  return el("section", {}, el("h2", {}, "Query (read-only SQL on this database; no files, no extensions)"), text, el("div", {}, run), result);
}

// ---------------------------------------------------------------- a suite: runs table + curves + stats
function suiteView(main, suite) {
  crumbs(link("#/suite/" + encodeURIComponent(suite), suite));
  const st = { filters: [], sort: "run_id", desc: false, offset: 0, limit: 50, selected: new Set(),
    metric: null, group: ["algo"], stat: "iqm", smooth: 0, x: "step", log: false, lines: false, keys: null,
    keyCharts: [] };
  const runsBox = el("section", { id: "runs" }, el("h2", {}, "Runs"));
  const curvesBox = el("section", { id: "curves" }, el("h2", {}, "Curves"));
  const statsBox = el("section", { id: "stats" }, el("h2", {}, "Leaderboard"));
  const tuneBox = el("section", { id: "tuning" });
  const keyBox = el("section", { id: "by-key", hidden: true }, el("h2", {}, "Score against a setting"));
  const pairedBox = el("section", { id: "paired" });
  main.append(tuneBox, curvesBox, runsBox, keyBox, statsBox, pairedBox);
  const paired = pairedSection(pairedBox, suite, () => (st.keys ? st.keys.metrics : []));

  // the score (the suite's rule, of its metric or another) against a config key, as `rlbench plot --x`
  const keySel = el("select", { id: "x-key" }, el("option", { value: "" }, "pick a setting"));
  const keyMetric = el("select", { id: "x-metric" });
  const keyCharts = el("div", { id: "key-charts", class: "grid2" });
  const keyNote = el("div", { id: "key-note", class: "muted" });
  keyBox.append(el("div", { class: "controls" }, "x", keySel, "score of", keyMetric), keyCharts, keyNote);
  keySel.addEventListener("change", () => loadByKey());
  keyMetric.addEventListener("change", () => loadByKey());

  async function loadByKey() {
    st.keyCharts.forEach((u) => u.destroy()); st.keyCharts.length = 0;
    clear(keyCharts); keyNote.textContent = ""; keyNote.className = "muted";
    if (!keySel.value) return;
    const q = new URLSearchParams({ x: keySel.value, stat: st.stat });
    if (keyMetric.value) q.set("metric", keyMetric.value);
    try {
      const out = await api(`/api/suite/${encodeURIComponent(suite)}/by-key?` + q);
      drawByKey(keyCharts, out, st.keyCharts);
      keyNote.textContent = `${out.title.replace("\n", ": ")}; ${out.reps} replicates per point` +
        (out.warnings.length ? "; " + out.warnings.join("; ") : "");
    } catch (e) { keyNote.textContent = String(e.message || e); keyNote.className = "error"; }
  }

  // filters
  const filterKey = el("select", { id: "filter-key" });
  const filterValue = el("select", { id: "filter-value" });
  const chips = el("span", { id: "filters" });
  const compareBtn = el("button", { id: "compare", onclick: () => {
    if (st.selected.size >= 2) location.hash = "#/compare/" + [...st.selected].map(encodeURIComponent).join(",");
  } }, "compare selected");
  const pager = el("span", { id: "pager" });
  const table = el("table", { id: "runs-table" });
  runsBox.append(el("div", { class: "controls" }, "filter", filterKey, "=", filterValue,
    el("button", { id: "add-filter", onclick: () => {
      if (!filterKey.value || filterValue.value === "") return;
      st.filters.push([filterKey.value, filterValue.value]); st.offset = 0; refreshAll();
    } }, "add"), chips, compareBtn, pager), table);

  function fillValues() {
    clear(filterValue);
    const k = filterKey.value;
    const vals = (st.keys.columns[k] || st.keys.config[k] || []);
    vals.forEach((v) => filterValue.appendChild(el("option", { value: v }, v)));
  }
  filterKey.addEventListener("change", fillValues);

  // curve controls
  const metricSel = el("select", { id: "metric" });
  const groupBox = el("span", { id: "group-by" });
  const statSel = el("select", { id: "stat" }, el("option", { value: "iqm" }, "IQM"), el("option", { value: "mean" }, "mean"));
  const smooth = el("input", { id: "smooth", type: "range", min: 0, max: 0.95, step: 0.05, value: 0 });
  const xSel = el("select", { id: "x-axis" }, el("option", { value: "step" }, "step"), el("option", { value: "wall" }, "wall time (s)"));
  const logBox = el("input", { id: "log-scale", type: "checkbox" });
  const linesBox = el("input", { id: "per-seed", type: "checkbox" });
  const chartDiv = el("div", { id: "chart", class: "chart" });
  const legend = el("div", { id: "curve-note", class: "muted" });
  curvesBox.append(el("div", { class: "controls" }, "metric", metricSel, "group by", groupBox, statSel,
    "smoothing", smooth, "x", xSel, el("label", {}, logBox, "log y"), el("label", {}, linesBox, "per-seed lines")),
  chartDiv, legend);
  metricSel.addEventListener("change", () => { st.metric = metricSel.value; loadCurves(); });
  statSel.addEventListener("change", () => { st.stat = statSel.value; loadCurves(); loadByKey(); });
  smooth.addEventListener("change", () => { st.smooth = Number(smooth.value); loadCurves(); });
  xSel.addEventListener("change", () => { st.x = xSel.value; loadCurves(); });
  logBox.addEventListener("change", () => { st.log = logBox.checked; loadCurves(); });
  linesBox.addEventListener("change", () => { st.lines = linesBox.checked; loadCurves(); });

  function query() {
    const q = new URLSearchParams({ suite });
    st.filters.forEach(([k, v]) => q.append("f", k + ":" + v));
    return q;
  }

  async function loadKeys() { applyKeys(await api("/api/keys?" + new URLSearchParams({ suite }))); }

  function applyKeys(keys) {
    st.keys = keys;
    const prevKey = filterKey.value;
    clear(filterKey);
    [...Object.keys(st.keys.columns), ...Object.keys(st.keys.config)].forEach((k) =>
      filterKey.appendChild(el("option", { value: k }, k)));
    if (prevKey) filterKey.value = prevKey;
    fillValues();
    const prevMetric = st.metric;
    clear(metricSel);
    st.keys.metrics.forEach((m) => metricSel.appendChild(el("option", { value: m }, m)));
    st.metric = prevMetric && st.keys.metrics.includes(prevMetric) ? prevMetric
      : (st.keys.metrics.includes("eval/return") ? "eval/return" : st.keys.metrics[0] || null);
    if (st.metric) metricSel.value = st.metric;
    const prevX = keySel.value;
    clear(keySel).appendChild(el("option", { value: "" }, "pick a setting"));
    (st.keys.settings || []).forEach((k) => keySel.appendChild(el("option", { value: k }, k)));
    keyBox.hidden = !(st.keys.settings || []).length;
    if (prevX && (st.keys.settings || []).includes(prevX)) keySel.value = prevX;
    const prevKeyMetric = keyMetric.value;
    clear(keyMetric).appendChild(el("option", { value: "" }, "the suite's score metric"));
    st.keys.metrics.forEach((m) => keyMetric.appendChild(el("option", { value: m }, m)));
    if (st.keys.metrics.includes(prevKeyMetric)) keyMetric.value = prevKeyMetric;
    clear(groupBox);
    st.keys.group_keys.forEach((k) => {
      const box = el("input", { type: "checkbox", value: k, "data-key": k, checked: st.group.includes(k) });
      box.addEventListener("change", () => {
        st.group = box.checked ? [...st.group, k] : st.group.filter((g) => g !== k);
        loadCurves();
      });
      groupBox.appendChild(el("label", { class: "chip" }, box, k));
    });
  }

  function pageQuery(q) {
    q.set("sort", st.sort); q.set("desc", st.desc ? "1" : "0"); q.set("offset", st.offset); q.set("limit", st.limit);
    q.set("config", "0"); // the table shows no run's config
    return q;
  }

  async function loadRuns() { drawRuns(await api("/api/runs?" + pageQuery(query()))); }

  let lastPage = "", lastHead = "";
  const cols = ["", "run_id", "algo", "env", "seed", "status", "score", "attempts", "duration_s", "host", "executor", "started_at"];
  const cellText = (r, c) => (["seed", "score", "attempts", "duration_s"].includes(c) ? fmt(r[c]) : r[c]);
  function drawRuns(page) {
    const drawn = JSON.stringify([page, st.filters, st.sort, st.desc]);
    if (drawn === lastPage) return; // a live refresh that changed nothing here redraws nothing
    lastPage = drawn;
    const shape = JSON.stringify([page.score, st.filters, st.sort, st.desc, page.rows.map((r) => r.run_id)]);
    if (shape === lastHead) { // the same runs in the same order: only the cells whose text changed
      page.rows.forEach((r, i) => {
        const cells = table.rows[i + 1].cells;
        cols.forEach((c, k) => {
          if (k < 2) return;
          const text = cellText(r, c), cell = cells[k];
          if (cell.textContent !== String(text ?? "")) cell.textContent = text ?? "";
          if (c === "status" && cell.className !== "status-" + r.status) cell.className = "status-" + r.status;
        });
      });
      drawPager(page);
      performance.mark("runs-table-drawn");
      return;
    }
    lastHead = shape;
    clear(chips);
    st.filters.forEach(([k, v], i) => chips.appendChild(el("span", { class: "chip" }, `${k} = ${v}`,
      el("button", { title: "remove", onclick: () => { st.filters.splice(i, 1); st.offset = 0; refreshAll(); } }, "\u00d7"))));
    const head = el("tr", {});
    cols.forEach((c) => {
      if (!c) { head.appendChild(el("th", {})); return; }
      const label = c === "score" ? `score (${page.score.rule} ${page.score.metric})` : c;
      const cls = "sortable" + (st.sort === c ? (st.desc ? " sorted-desc" : " sorted-asc") : "");
      head.appendChild(el("th", { class: cls, "data-col": c, onclick: () => {
        if (st.sort === c) st.desc = !st.desc; else { st.sort = c; st.desc = c === "score"; }
        loadRuns();
      } }, label));
    });
    clear(table).appendChild(head);
    for (const r of page.rows) {
      const box = el("input", { type: "checkbox", class: "pick", "data-run": r.run_id, checked: st.selected.has(r.run_id) });
      box.addEventListener("change", () => { if (box.checked) st.selected.add(r.run_id); else st.selected.delete(r.run_id); });
      table.appendChild(el("tr", { "data-run": r.run_id },
        el("td", {}, box),
        el("td", {}, link("#/run/" + encodeURIComponent(r.run_id), r.run_id)),
        ...cols.slice(2).map((c) => el("td", { class: c === "status" ? "status-" + r.status : ["seed", "score", "attempts", "duration_s"].includes(c) ? "num" : null }, cellText(r, c)))));
    }
    performance.mark("runs-table-drawn");
    drawPager(page);
  }

  function drawPager(page) {
    clear(pager).append(`${page.total} runs; ${page.total ? st.offset + 1 : 0}-${Math.min(st.offset + st.limit, page.total)} `,
      el("button", { disabled: st.offset === 0, onclick: () => { st.offset = Math.max(0, st.offset - st.limit); loadRuns(); } }, "prev"),
      el("button", { disabled: st.offset + st.limit >= page.total, onclick: () => { st.offset += st.limit; loadRuns(); } }, "next"));
  }

  function curveQuery(q) {
    q.set("metric", st.metric); q.set("stat", st.stat); q.set("smooth", st.smooth); q.set("reps", 200); q.set("pack", "1");
    if (st.lines) q.set("lines", "1");
    st.group.forEach((g) => q.append("group", g));
    return q;
  }

  async function loadCurves() {
    if (!st.metric) { clear(chartDiv); legend.textContent = "no metric logged yet"; return; }
    const t0 = performance.now();
    performance.mark("curves-request");
    showCurves(await api("/api/curves?" + curveQuery(query())), t0);
  }

  function showCurves(out, t0) {
    // measured to uPlot's draw (it draws in a microtask after the chart is made or given new data)
    drawCurves(chartDiv, unpack(out), st, () => {
      legend.textContent = `${out.groups.length} groups, ${out.runs} runs; ${out.stat.toUpperCase()} with a 95% ` +
        `bootstrap band resampling each group's runs (${out.reps} replicates); ${Math.round(performance.now() - t0)} ms`;
      performance.mark("curves-drawn");
      performance.measure("curves", "curves-request", "curves-drawn");
    });
  }

  let boardLoaded = false;
  const boardBtn = el("button", { id: "load-board", onclick: () => loadBoard() }, "compute leaderboard, probability of improvement, AdaStop");
  const boardDiv = el("div", { id: "board" });
  statsBox.append(boardBtn, boardDiv);

  async function loadBoard() {
    clear(boardDiv).appendChild(el("p", { class: "muted" }, "bootstrapping..."));
    try {
      const [lb, imp, dec] = await Promise.all([api(`/api/suite/${encodeURIComponent(suite)}/leaderboard`),
        api(`/api/suite/${encodeURIComponent(suite)}/improvement`), api(`/api/suite/${encodeURIComponent(suite)}/decisions`)]);
      clear(boardDiv);
      (lb.board.meta.header || []).forEach((line) => boardDiv.appendChild(el("div", { class: "muted" }, line)));
      boardDiv.appendChild(recordsTable(lb.board.rows || [], "leaderboard"));
      lb.warnings.forEach((w) => boardDiv.appendChild(el("div", { class: "error" }, "warning: " + w)));
      boardDiv.appendChild(el("h2", {}, "Probability of improvement"));
      boardDiv.appendChild(recordsTable(imp.poi, "poi"));
      boardDiv.appendChild(el("h2", {}, "Performance profile"));
      const prof = el("div", { id: "profile", class: "chart" });
      boardDiv.appendChild(prof);
      drawProfile(prof, imp.profile);
      boardDiv.appendChild(el("h2", {}, "AdaStop decisions"));
      boardDiv.appendChild(recordsTable(dec.decisions, "decisions"));
      boardLoaded = true;
    } catch (e) { clear(boardDiv).appendChild(el("p", { class: "error" }, String(e.message || e))); }
  }

  // the table does not wait for the keys; the curves need the metric names they bring
  let keysAt = 0, tuned = true;
  async function refreshAll(live) {
    // a live refresh asks for the keys (config keys, metric names) only now and then, and for a study only
    // of a suite rlbench tune made: they change far less often than the table and the curves
    const keys = !live || !st.keys || !st.keys.metrics.length || performance.now() - keysAt > KEYS_EVERY_MS;
    if (live) return Promise.all([liveRefresh(keys), !tuned ? null : tuningSection(tuneBox, suite).then((found) => { tuned = found; }),
      paired.refresh()]);
    await Promise.all([loadRuns(),
      (keys ? loadKeys().then(() => { keysAt = performance.now(); }) : Promise.resolve()).then(() => Promise.all([loadCurves(), loadByKey()])),
      !live || tuned ? tuningSection(tuneBox, suite).then((found) => { tuned = found; }) : null]);
  }
  // a live refresh is one request (one read of the store) for the table, the curves and now and then the keys;
  // a part the page shows already (its tag in have=) comes back as "same" and is not drawn again
  // curvesOnly: a new shard of a running run (the long poll's files stamp), which changes the curves only:
  // neither the runs page nor the scores by setting are read again (a database change refreshes those)
  const tags = {};
  async function liveRefresh(keys, curvesOnly) {
    const metric = st.metric;
    const q = curvesOnly ? query() : pageQuery(query());
    if (curvesOnly) q.set("runs", "0");
    if (metric) curveQuery(q);
    if (keys || (curvesOnly && !metric)) q.set("keys", "1"); // no metric yet: its name may be in this shard
    Object.values(tags).forEach((t) => q.append("have", t));
    const t0 = performance.now();
    if (metric) performance.mark("curves-request");
    const out = await api(`/api/suite/${encodeURIComponent(suite)}/live?` + q);
    if (out.runs) { drawRuns(out.runs); tags.runs = out.tags.runs; }
    if (q.has("keys")) keysAt = performance.now();
    if (out.keys) { applyKeys(out.keys); tags.keys = out.tags.keys; }
    if (metric && st.metric === metric && out.curves) { showCurves(out.curves, t0); tags.curves = out.tags.curves; }
    else if (!metric && st.metric) await loadCurves(); // the first metric just logged
    if (keySel.value && !curvesOnly) await loadByKey();
  }
  return refreshAll(false).then(() => ({ refresh: () => refreshAll(true), live: () => liveRefresh(false, true),
    suite, metric: () => st.metric || "", liveGap: SUITE_LIVE_GAP_MS, refreshGap: REFRESH_GAP_MAX_MS }));
}

function recordsTable(rows, id) {
  const t = el("table", { id });
  if (!rows.length) { t.appendChild(el("tr", {}, el("td", { class: "muted" }, "none"))); return t; }
  const cols = Object.keys(rows[0]);
  t.appendChild(el("tr", {}, cols.map((c) => el("th", {}, c))));
  rows.forEach((r) => t.appendChild(el("tr", {}, cols.map((c) => el("td", { class: typeof r[c] === "number" ? "num" : "" }, fmt(r[c]))))));
  return t;
}

// ---------------------------------------------------------------- one run
let runMetric = null;

async function runView(main, runId) {
  const box = el("section", { id: "run" });
  const logBox = el("pre", { id: "log" });
  // the run's own curve of any metric it logged: kept across refreshes, new points appended (live)
  const pick = el("select", { id: "run-metric" });
  const chart = el("div", { id: "run-chart", class: "chart" });
  const curveBox = el("section", { id: "run-curve", hidden: true }, el("div", { class: "controls" }, "metric", pick), chart);
  const curve = { metric: null, picked: false, names: new Set(), attempt: null, step: [], value: [], u: null };
  main.append(box, curveBox, el("section", {}, el("h2", {}, "output.log (tail)"), logBox));
  pick.addEventListener("change", () => {
    runMetric = pick.value; curve.metric = pick.value; curve.picked = true; curve.attempt = null; points();
  });

  // the metrics the run logged so far, in the picker; the one shown: the user's pick, else eval/return
  function choose(names) {
    const before = curve.names.size;
    names.forEach((m) => curve.names.add(m));
    const all = [...curve.names].sort();
    if (curve.names.size !== before) clear(pick).append(...all.map((m) => el("option", { value: m }, m)));
    curveBox.hidden = !all.length;
    if (!curve.picked) {
      const want = all.includes(runMetric) ? runMetric : (all.includes("eval/return") ? "eval/return" : all[0] || null);
      if (want !== curve.metric) { curve.metric = want; curve.attempt = null; }
    }
    if (curve.metric) pick.value = curve.metric;
  }

  async function points() {
    const asked = curve.metric;
    const q = new URLSearchParams({ after: curve.attempt === null ? 0 : curve.step.length });
    if (asked) q.set("metric", asked);
    if (curve.attempt !== null) q.set("attempt", curve.attempt);
    const out = await api("/api/run/" + encodeURIComponent(runId) + "/points?" + q);
    choose(out.names);
    if (curve.metric !== asked) return points(); // the first metric, or eval/return, just appeared
    if (!asked) return;
    if (out.reset) { curve.step = []; curve.value = []; }
    const fresh = out.reset || !curve.u;
    const ordered = !curve.step.length || !out.step.length || out.step[0] >= curve.step[curve.step.length - 1];
    out.step.forEach((x, i) => { curve.step.push(x); curve.value.push(out.value[i]); });
    curve.attempt = out.attempt;
    if (!ordered) { // a step logged out of order: the x axis must ascend
      const order = curve.step.map((_, i) => i).sort((i, j) => curve.step[i] - curve.step[j]);
      curve.step = order.map((i) => curve.step[i]); curve.value = order.map((i) => curve.value[i]);
    }
    chart.setAttribute("data-points", curve.step.length);
    chart.setAttribute("data-metric", asked);
    if (fresh) {
      if (curve.u) { curve.u.destroy(); state.charts = state.charts.filter((u) => u !== curve.u); curve.u = null; }
      clear(chart);
      if (!curve.step.length) { chart.appendChild(el("p", { class: "muted" }, "no points yet")); return; }
      curve.u = new uPlot({ width: Math.max(400, chart.clientWidth || 900), height: 320,
        series: [{ label: "step" }, { label: asked, stroke: PALETTE[0], width: 2, spanGaps: true }],
        scales: { x: { time: false } }, axes: [{ label: "step" }, { label: asked }], legend: { live: false } },
      [curve.step, curve.value], chart);
      state.charts.push(curve.u);
    } else if (out.step.length) {
      curve.u.setData([curve.step, curve.value]);
    }
  }

  async function tail() {
    const log = await api("/api/run/" + encodeURIComponent(runId) + "/log");
    const text = log.text || "(empty)";
    if (logBox.textContent !== text) logBox.textContent = text; // the same text: no new layout
  }

  async function load() {
    const out = await api("/api/run/" + encodeURIComponent(runId));
    const r = out.run;
    crumbs(link("#/suite/" + encodeURIComponent(r.suite), r.suite), link("#/run/" + encodeURIComponent(runId), runId));
    clear(box).append(el("h2", {}, `${r.algo} on ${r.env}, seed ${r.seed}: `, el("span", { class: "status-" + r.status, id: "run-status" }, r.status)));
    if (r.error) box.appendChild(el("pre", { id: "run-error" }, r.error));
    const facts = el("table", { id: "manifest" });
    Object.entries({ run_id: r.run_id, attempts: r.attempts, exit_code: r.exit_code, started_at: r.started_at,
      ended_at: r.ended_at, duration_s: r.duration_s, ...out.manifest }).forEach(([k, v]) => {
      if (k === "packages") return;
      facts.appendChild(el("tr", {}, el("th", {}, k), el("td", {}, fmt(v))));
    });
    const latest = el("table", { id: "latest" });
    Object.entries(out.latest).forEach(([k, v]) => latest.appendChild(el("tr", {}, el("th", {}, k), el("td", { class: "num" }, fmt(v.value)), el("td", { class: "muted" }, "step " + v.step))));
    const files = el("ul", { id: "files" });
    const arts = recordsTable(out.artifacts.map((a) => { const { file, ...rest } = a; return rest; }), "artifacts");
    const fileHref = (rel) => "/files/" + encodeURIComponent(runId) + "/" + rel.split("/").map(encodeURIComponent).join("/");
    out.files.forEach((f) => files.appendChild(el("li", {}, el("a", { href: fileHref(f.path) }, f.path), ` (${f.bytes} bytes)`)));
    // videos (artifacts, or .mp4 / .webm files in the run folder) play in the page
    const videos = el("div", { id: "videos" });
    const transcripts = el("div", { id: "transcripts" });
    const seen = new Set();
    [...out.artifacts.map((a) => a.file).filter(Boolean), ...out.files.map((f) => f.path)].forEach((rel) => {
      if (!/\.(mp4|webm)$/i.test(rel) || seen.has(rel)) return;
      seen.add(rel);
      videos.appendChild(el("figure", {}, el("video", { controls: true, preload: "metadata", src: fileHref(rel), width: 320 }), el("figcaption", {}, rel)));
    });
    const attempts = recordsTable(out.attempts.map((a) => ({ attempt: a.attempt, status: a.result ? a.result.status : "-",
      exit_code: a.result ? a.result.exit_code : null, duration_s: a.result ? a.result.duration_s : null,
      error: a.result && a.result.error ? String(a.result.error).split("\n")[0] : "" })), "attempts");
    const config = el("pre", { id: "config" }, JSON.stringify(r.config, null, 1));
    const packages = el("details", {}, el("summary", {}, "packages"), el("pre", {}, JSON.stringify(out.manifest.packages, null, 1)));
    box.append(el("div", { class: "grid2" }, el("div", {}, el("h2", {}, "Manifest"), facts, packages),
      el("div", {}, el("h2", {}, "Latest metrics"), latest)),
    el("h2", {}, "Attempts"), attempts, el("h2", {}, "Config"), config, el("h2", {}, "Files"), files,
    el("h2", {}, "Artifacts"), arts, videos, transcripts);
    // text episodes (a transcript artifact of a text env) shown as their text
    for (const a of out.artifacts) {
      if (!a.file || !/transcript/i.test(`${a.kind || ""} ${a.file}`)) continue;
      const r2 = await fetch(fileHref(a.file), { credentials: "same-origin" });
      if (r2.ok) transcripts.appendChild(el("details", { open: true }, el("summary", {}, a.file), el("pre", { class: "transcript" }, await r2.text())));
    }
    choose(Object.keys(out.latest));
    await Promise.all([points(), tail()]);
  }
  await load();
  return { refresh: load, live: () => Promise.all([points(), tail()]), run: runId };
}

// ---------------------------------------------------------------- compare runs
async function compareView(main, ids) {
  const box = el("section", { id: "compare-view" });
  main.appendChild(box);
  async function load() {
    const q = new URLSearchParams();
    ids.forEach((i) => q.append("run", i));
    const out = await api("/api/compare?" + q);
    crumbs(link("#/suite/" + encodeURIComponent(out.runs[0].suite), out.runs[0].suite), el("span", {}, "compare"));
    const onlyDiff = el("input", { type: "checkbox", id: "only-diff" });
    const t = el("table", { id: "compare-table" });
    function draw() {
      clear(t).appendChild(el("tr", {}, el("th", {}, "key"), out.runs.map((r) => el("th", {}, link("#/run/" + encodeURIComponent(r.run_id), `${r.run_id} (${r.algo}, ${r.env}, seed ${r.seed})`)))));
      out.keys.filter((k) => k.differs || !onlyDiff.checked).forEach((k) =>
        t.appendChild(el("tr", { class: k.differs ? "differs" : "" }, el("td", {}, k.key), k.values.map((v) => el("td", {}, fmt(v))))));
    }
    onlyDiff.addEventListener("change", draw);
    clear(box).append(el("h2", {}, `Comparing ${out.runs.length} runs: `, String(out.keys.filter((k) => k.differs).length), " differences highlighted"),
      el("label", {}, onlyDiff, "only the differences"), t);
    draw();
  }
  await load();
  return load;
}

// ---------------------------------------------------------------- routing and live updates
// The page holds one long poll on /api/changes, answered when the database (db) or, on a run's page, the run's
// folder (files: a new metric shard, its log) changes: an idle page costs nothing. A view is { refresh, live,
// run }: a new shard calls live() (a run's new points only); a database change calls refresh() (the whole
// view), spaced by REFRESH_COST times what the last refresh took (4 to 8 s; 5 s on a run's or a suite's page,
// whose points come live), so a heavy view over a busy store never keeps the server or the browser busy; a
// hidden tab refreshes nothing. On a suite's page "files" are its running runs' shard folders, and live()
// asks for the curves alone.
// a suite's refresh is one request (/api/suite/NAME/live: ~25 ms of server CPU, parts the page has left out):
// at most every 8 s while rlbench run writes, its curves alone every second when a running run's shard holds
// the metric shown (benchmarks/ui_live.py: the lag, and the UI server's and the browser's CPU seconds per
// minute of an open suite page)
const REFRESH_GAP_MS = 4000;
const REFRESH_GAP_MAX_MS = 8000; // however slow the last one was (a loaded machine), the next within 8 s
const REFRESH_GAP_LIVE_MS = 5000; // a view whose live() shows what is new (a run's points) refreshes the rest slower
const REFRESH_COST = 8;
const KEYS_EVERY_MS = 30000; // a suite's keys and metric names (a third of a refresh's cost), on a live refresh
const LIVE_GAP_MS = 200; // a run's new points and log at most this often
// a suite's curves on a running run's new shard of the metric shown at most this often (and at least
// REFRESH_COST times what the last took apart): a row on screen within 2 s of being logged (its flush at most
// 1 s, then this); the rest of the page (its table, the other runs' rows) then refreshes every
// REFRESH_GAP_MAX_MS (a whole refresh reads the database: 3-6 times a curves-only one, from the files)
const SUITE_LIVE_GAP_MS = 1000;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const shown = () => new Promise((done) => document.addEventListener("visibilitychange", done, { once: true }));

async function stamps(query) {
  return api("/api/changes?" + new URLSearchParams(query));
}

async function route() {
  destroyCharts();
  const main = clear(document.getElementById("main"));
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const seq = ++state.routes;
  state.view = null; // no live refresh while the view loads
  // the stamps before the view reads anything: what it shows is at least that new, so a change while it
  // loads is refreshed next, never taken as seen
  const run = parts[0] === "run" && parts[1] ? parts[1] : "";
  const suite = parts[0] === "suite" && parts[1] ? parts[1] : "";
  const before = await stamps(run ? { run, wait: 0 } : suite ? { suite, wait: 0 } : { wait: 0 })
    .catch(() => ({ db: "", files: "" }));
  let view = null;
  try {
    if (parts[0] === "suite" && parts[1]) view = await suiteView(main, parts[1]);
    else if (run) view = await runView(main, run);
    else if (parts[0] === "compare" && parts[1]) view = await compareView(main, parts[1].split(","));
    else view = await suitesView(main);
  } catch (e) {
    main.appendChild(el("p", { class: "error", id: "view-error" }, String(e.message || e)));
  }
  if (seq === state.routes) {
    state.view = typeof view === "function" ? { refresh: view } : view;
    state.seen = { db: before.db, files: before.files };
    state.due = 0;
  }
  performance.mark("view-ready");
  document.body.setAttribute("data-ready", "1");
}

async function refreshView(view, now) {
  const t0 = performance.now();
  await view.refresh();
  if (view !== state.view) return;
  state.seen = { db: now.db, files: now.files };
  const took = performance.now() - t0;
  const floor = view.refreshGap || (view.live ? REFRESH_GAP_LIVE_MS : REFRESH_GAP_MS);
  const gap = Math.min(REFRESH_GAP_MAX_MS, Math.max(floor, REFRESH_COST * took));
  state.due = performance.now() + gap;
  document.body.setAttribute("data-refreshed", String(Date.now()));
}

async function watch() {
  const live = document.getElementById("live");
  let latest = null; // the newest stamps the server gave for this view
  for (;;) {
    const view = state.view;
    if (document.hidden) { latest = null; await shown(); continue; } // a hidden tab asks for nothing
    if (!view) { latest = null; await sleep(200); continue; }
    try {
      if (!latest || latest.view !== view) latest = { view, db: state.seen.db, files: state.seen.files };
      const dbChanged = latest.db !== state.seen.db;
      const filesChanged = latest.files !== state.seen.files;
      const whole = dbChanged || (filesChanged && !view.live); // what only refresh() shows
      const t = performance.now();
      if (filesChanged && view.live && t >= state.liveDue) {
        await view.live();
        if (view === state.view) {
          state.seen = { db: state.seen.db, files: latest.files };
          const took = performance.now() - t;
          state.liveDue = performance.now() + Math.min(REFRESH_GAP_MAX_MS, Math.max(view.liveGap || LIVE_GAP_MS, REFRESH_COST * took));
        }
        continue;
      }
      if (whole && t >= state.due) {
        await refreshView(view, { db: latest.db, files: latest.files }); // a refresh shows the files too
        continue;
      }
      // wait for the next change; a database change already seen is not waited for again (its refresh is
      // due at state.due), nor is a new shard before state.liveDue
      // its files: a run's folder, or the shards of a suite's running runs holding the metric its curves show
      const watched = view.run ? { run: view.run } : view.suite ? { suite: view.suite, metric: view.metric() } : null;
      if (whole && !watched) { await sleep(state.due - t); continue; }
      // a new shard already seen, its live() not due yet: nothing the server could say changes what runs next
      // (a suite's running runs write a shard a second each: one long poll answered per shard otherwise)
      if (filesChanged && view.live && !whole) { await sleep(state.liveDue - t); continue; }
      // a suite's page asks whether the database changed only when its next whole refresh is due (while
      // rlbench run writes it changes every second: a poll answered each time would cost more than the
      // refreshes); until then it waits on its runs' shards alone
      const ahead = !whole && view.suite && t < state.due;
      const q = whole || ahead ? {} : { db: latest.db };
      let wait = whole || ahead ? state.due - t : 30000;
      if (watched) {
        Object.assign(q, watched); q.files = latest.files;
        if (filesChanged) wait = Math.min(wait, state.liveDue - t);
      }
      q.wait = Math.max(0, wait) / 1000;
      const now = await stamps(q);
      if (live.className) live.className = "";
      if (view === state.view) latest = { view, db: now.db, files: watched ? now.files : "" };
    } catch (e) {
      live.className = "stale"; // the server gone or the database busy: try again in a second
      await sleep(1000);
    }
  }
}

window.addEventListener("hashchange", route);
// curves.js and stats.js, the page's next scripts, are read by then
window.addEventListener("DOMContentLoaded", () => route().then(watch));
