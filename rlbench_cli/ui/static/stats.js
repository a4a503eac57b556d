// rlbench ui: a suite's statistics drawn (the scores against a setting, the performance profile, a tuning
// study, the paired comparisons), loaded after app.js, whose helpers (el, api, fmt, recordsTable, PALETTE) it
// uses. As there: every string from the store reaches the page through textContent, never innerHTML.
"use strict";

// one chart per task: each legend entry's points at the key's values, with its 95% band
function drawByKey(div, out, charts) {
  div.setAttribute("data-tasks", out.tasks.length);
  div.setAttribute("data-points", out.points.length);
  const ax = out.axis;
  const label = (x) => { const i = ax.positions.indexOf(x); return i >= 0 ? ax.values[i] : ""; };
  out.tasks.forEach((task) => {
    const box = el("div", { class: "chart", "data-task": task }, el("b", {}, task));
    div.appendChild(box);
    const series = [{ label: out.key }], bands = [], cols = [ax.positions];
    out.legends.forEach((g, i) => {
      const color = PALETTE[i % PALETTE.length];
      const pts = new Map(out.points.filter((p) => p.env === task && p.legend === g).map((p) => [p.position, p]));
      ["estimate", "lower", "upper"].forEach((f) => cols.push(ax.positions.map((x) => (pts.has(x) ? pts.get(x)[f] : null))));
      series.push({ label: g, stroke: color, width: 2, spanGaps: true, points: { show: true, size: 6 } });
      ["lower", "upper"].forEach((edge) => series.push({ label: edge, stroke: bandColor(color, 0.3), width: 0,
        spanGaps: true, band: true, points: { show: false } }));
      bands.push({ series: [3 * i + 3, 3 * i + 2], fill: bandColor(color, 0.15) });
    });
    const u = new uPlot({ width: Math.max(360, box.clientWidth || 560), height: 280, series, bands,
      scales: { x: { time: false, distr: ax.log ? 3 : 1 } },
      // a tick at each value, unless two lie too close for a label each (ax.crowded): then uPlot's own
      axes: [ax.crowded ? { label: out.key } : { label: out.key, splits: () => ax.positions, filter: (_, xs) => xs, values: (_, xs) => xs.map(label) }, { label: `${out.stat.toUpperCase()} of ${out.metric}` }],
      legend: { live: false } }, cols, box);
    const rows = u.root.querySelectorAll(".u-legend .u-series");
    const skip = series.length - rows.length; // the x series has no row when the legend is not live
    rows.forEach((row, i) => { if (series[i + skip].band) row.style.display = "none"; });
    charts.push(u);
  });
}

function drawProfile(div, rows) {
  const algos = [...new Set(rows.map((r) => r.algo))];
  if (!algos.length) return;
  const tables = algos.map((a) => { const rs = rows.filter((r) => r.algo === a); return [rs.map((r) => r.tau), rs.map((r) => r.estimate)]; });
  const series = [{ label: "tau" }, ...algos.map((a, i) => ({ label: a, stroke: PALETTE[i % PALETTE.length], width: 2 }))];
  state.charts.push(new uPlot({ width: Math.max(400, div.clientWidth || 700), height: 260, series,
    scales: { x: { time: false } }, axes: [{ label: "score threshold" }, { label: "fraction of runs above" }] },
  uPlot.join(tables), div));
}

// a suite rlbench tune made (NAME.tune, NAME.confirm): its study, as rlbench tune --status reads it
// (true when there is one, or the reason why not: worth asking again)
async function tuningSection(box, suite) {
  const out = await api(`/api/suite/${encodeURIComponent(suite)}/tuning`);
  if (!out.study) { clear(box); if (out.reason) box.append(el("p", { class: "muted" }, out.reason)); return !!out.reason; }
  const s = out.study;
  if (box.chart) { box.chart.destroy(); box.chart = null; } // its own chart: the curves' redraws leave it
  const done = out.trials.filter((t) => t.state === "complete" && t.value !== null);
  const best = done.reduce((b, t) => (b === null || t.value > b.value ? t : b), null);
  const history = el("div", { id: "tune-history", class: "chart" });
  const rows = out.trials.map((t) => ({ trial: t.number, state: t.state, ...Object.fromEntries(s.params.map((k) => [k, t.params[k] ?? null])), objective: t.value }));
  const trials = recordsTable(rows, "tune-trials");
  if (best) trials.querySelectorAll("tr").forEach((tr, i) => { if (i > 0 && rows[i - 1].trial === best.number) tr.className = "best"; });
  clear(box).append(el("h2", {}, `Tuning study of ${s.tuned}`),
    el("p", {}, `Search of ${s.algorithm}'s params (${s.sampler} sampler, pruner ${s.pruner}): ${out.trials.length} of ${s.trials_asked} trials, ` +
      `each on seeds ${s.search_seeds.join(", ")} x the suite's tasks; objective: ${s.objective} of the scores` +
      (best ? `; best so far: trial ${best.number} (${fmt(best.value)}).` : ".")),
    history, trials);
  if (done.length) {
    let top = -Infinity;
    const xs = done.map((t) => t.number), ys = done.map((t) => t.value), bests = ys.map((v) => (top = Math.max(top, v)));
    box.chart = new uPlot({ width: Math.max(400, box.clientWidth || 700), height: 240,
      series: [{ label: "trial" }, { label: "objective", stroke: PALETTE[0], width: 0, points: { show: true, size: 6 } },
        { label: "best so far", stroke: PALETTE[1], width: 2, paths: uPlot.paths.stepped({ align: 1 }) }],
      scales: { x: { time: false } }, legend: { live: false },
      axes: [{ label: "trial", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] }, { label: s.objective }] }, [xs, ys, bests], history);
  }
  if (out.confirmed.length) {
    const iv = (t) => (t ? `${fmt(t[0])} [${fmt(t[1])}, ${fmt(t[2])}]` : "-");
    box.append(el("h3", {}, `Confirmation on fresh seeds ${s.confirm_seeds[0]}..${s.confirm_seeds[1]}`),
      el("p", { class: "muted" }, "The search's best configurations and the default, re-run on seeds the search never used: the search score is optimistic (it was picked for being high), the confirmed one is not."),
      recordsTable(out.confirmed.map((c) => ({ configuration: c.label, "search score": c.search_value, "confirmed IQM [95% CI]": iv(c.iqm),
        "P(beats default) [95% CI]": iv(c.poi_vs_default), verdict: c.verdict, ...(c.adastop ? { AdaStop: c.adastop } : {}) })), "tune-confirm"));
  }
  return true;
}

// each task (or algorithm) against a baseline, seed by seed, as `rlbench compare --paired` prints it: asked for
// (it scores every finished run), then again at each change of the baseline, the test's side, the metric or
// the steps the runs are scored at (several: one family, as --step-max repeated), and at each refresh of a live
// page once a table is shown (the old table stays until the new one comes). metrics(): the metric names the
// page knows. Returns { refresh }.
const ALPHA = 0.05;
function pairedSection(box, suite, metrics) {
  const base = el("select", { id: "paired-baseline" }, el("option", { value: "" }, "pick a baseline"));
  const alt = el("select", { id: "paired-alternative" }, ["two-sided", "greater", "less"].map((a) => el("option", { value: a }, a)));
  const metric = el("select", { id: "paired-metric" }, el("option", { value: "" }, "the suite's score"));
  const step = el("input", { id: "paired-step", type: "text", inputmode: "numeric", placeholder: "final; or 0, 1000",
    title: "the step each run is scored at, as if it ended there; several (0, 1000) make one family", style: "width: 10em" });
  const out = el("div", { id: "paired-out" });
  box.append(el("h2", {}, "Paired by seed"),
    el("div", { class: "controls" }, el("button", { id: "load-paired", onclick: () => load() }, "pair by seed"),
      "baseline", base, "alternative", alt, "score of", metric, "scored at step(s)", step), out);

  function fillChoices(choices) {
    const keep = base.value;
    clear(base).appendChild(el("option", { value: "" }, "pick a baseline"));
    [["tasks", "task"], ["algos", "algo"]].forEach(([k, kind]) => base.appendChild(el("optgroup", { label: kind === "task" ? "tasks" : "algorithms" },
      choices[k].map((n) => el("option", { value: `${kind}:${n}`, selected: `${kind}:${n}` === keep }, n)))));
  }
  function fillMetrics() {
    const keep = metric.value, names = metrics();
    if (metric.options.length === names.length + 1) return;
    clear(metric).appendChild(el("option", { value: "" }, "the suite's score"));
    names.forEach((m) => metric.appendChild(el("option", { value: m, selected: m === keep }, m)));
  }
  let shown = false, busy = false, ticket = 0; // a table is on the page; a request on its way; the latest asked
  async function load(quiet) {
    fillMetrics();
    const q = new URLSearchParams({ alternative: alt.value });
    if (base.value) q.set("baseline", base.value);
    if (metric.value) q.set("metric", metric.value);
    step.value.split(/[\s,]+/).filter((v) => v !== "").forEach((v) => q.append("step", v));
    if (!quiet) {
      // the page keeps its height while the table is away: a control changed by leaving it (the step box's
      // change comes with the click elsewhere) must not scroll what that click is on from under the pointer
      out.style.minHeight = `${out.offsetHeight}px`;
      clear(out).appendChild(el("p", { class: "muted" }, base.value ? "bootstrapping..." : "scoring the runs..."));
    }
    const mine = ++ticket;
    busy = true;
    try {
      const res = await api(`/api/suite/${encodeURIComponent(suite)}/paired?` + q);
      if (mine !== ticket) return; // asked again while this was on its way: the newer request draws
      fillChoices(res.choices);
      clear(out);
      shown = Boolean(res.paired);
      if (!res.paired) {
        out.appendChild(el("p", { class: "muted" }, "Pick the baseline: each other task is compared with a baseline task within each algorithm " +
          "(or each other algorithm with a baseline algorithm within each task), seed by seed."));
        return;
      }
      out.append(pairedCaption(suite, res.paired, q), pairedTable(res.paired, res.comparisons));
      out.setAttribute("data-drawn", mine); // which request drew the table (tests watch a live redraw)
    } catch (e) {
      if (mine === ticket) { shown = false; clear(out).appendChild(el("p", { class: "error" }, String(e.message || e))); }
    } finally { if (mine === ticket) { busy = false; out.style.minHeight = ""; } }
  }
  [base, alt, metric, step].forEach((c) => c.addEventListener("change", () => load()));
  return { refresh: () => (shown && !busy ? load(true) : null) };
}

function pairedCaption(suite, s, q) {
  const [held, across] = s.dimension === "task" ? ["algorithm", "task"] : ["task", "algorithm"];
  const several = Array.isArray(s.step_max), steps = several ? s.step_max : s.step_max === null ? [] : [s.step_max];
  const sided = s.alternative === "two-sided" ? "two-sided" : `one-sided (the other ${across} ${s.alternative === "greater" ? "above" : "below"} the baseline)`;
  const cmd = [`rlbench compare ${suite} --paired '${q.get("baseline")}'`, q.has("metric") ? ` --metric ${q.get("metric")}` : "",
    s.alternative !== "two-sided" ? ` --alternative ${s.alternative}` : "", ...steps.map((at) => ` --step-max ${at}`)].join("");
  return el("p", {}, `Each ${across} against ${s.baseline} within each ${held}; ${s.metric} scored by ${s.rule}` +
    (several ? ` at steps ${steps.join(", ")} (one family)` : steps.length ? ` at step ${steps[0]}` : "") + `; difference = other - baseline, its mean with a 95% bootstrap interval ` +
    `(${s.reps.toLocaleString("en")} reps, seed ${s.seed}); ${sided} sign and Wilcoxon signed-rank tests; Holm's correction over the ` +
    `${s.tested} test${s.tested === 1 ? "" : "s"}` + (s.comparisons > s.tested ? ` (${s.comparisons - s.tested} comparison` +
    `${s.comparisons - s.tested === 1 ? "" : "s"} with no seed off level or none paired: no test)` : "") +
    ` (* below ${ALPHA}). The same table: `, el("code", {}, cmd));
}

// Python's f"{v:.{d}f}", as the command prints: a value exactly halfway (exact p-values and means of a few
// seeds are often k / 2^n, e.g. 0.8125) goes to the even digit, where JS's toFixed rounds it up
function pyFixed(v, d) {
  const exact = Math.abs(v).toFixed(100), cut = exact.indexOf(".") + 1 + d; // toFixed(100): the exact digits
  if (!/^50*$/.test(exact.slice(cut))) return v.toFixed(d);
  const kept = exact.slice(0, d ? cut : cut - 1);
  return Number(kept.slice(-1)) % 2 === 0 ? (v < 0 ? "-" : "") + kept : v.toFixed(d);
}

function pairedTable(s, rows) {
  const [held, across] = s.dimension === "task" ? ["algorithm", "task"] : ["task", "algorithm"];
  const num = (v) => {
    if (v === null || v === undefined) return "-";
    const d = v === 0 ? 0 : 3 - Math.floor(Math.log10(Math.abs(v))); // %.4g's decimals
    return String(Number(d >= 0 && d <= 20 ? pyFixed(v, d) : Number(v).toPrecision(4)));
  };
  const p = (v) => (v === null || v === undefined ? "-" : v < 0.001 ? v.toPrecision(2) : pyFixed(v, 3));
  const several = Array.isArray(s.step_max);
  let blind = 0;
  const table = recordsTable(rows.map((r) => {
    let mark = r.holm_p !== null && r.holm_p < ALPHA ? " *" : "";
    if (r.pairs && r.min_p >= ALPHA) { mark = " †"; blind += 1; }
    return { ...(several ? { step: r.step } : {}), [held]: r.group, [across]: r.other, seeds: r.pairs + (r.unpaired.length ? ` (${r.unpaired.length} unpaired)` : ""),
      "baseline mean": num(r.mean_a), mean: num(r.mean_b), "difference [95% CI]": r.pairs ? `${num(r.mean_diff)} [${num(r.lower)}, ${num(r.upper)}]` : "-",
      "above / below / level": r.pairs ? `${r.above} / ${r.below} / ${r.tied}` : "-", "sign p": p(r.sign_p),
      "Wilcoxon p": p(r.wilcoxon_p), "Holm p": p(r.holm_p) + mark };
  }), "paired-table");
  const cols = several ? 11 : 10, text = several ? [1, 2] : [0, 1];
  table.querySelectorAll("td").forEach((td, i) => { if (!text.includes(i % cols)) td.className = "num"; });
  if (!blind) return table;
  return el("div", {}, table, el("p", { class: "muted" }, `† too few seeds off level for these tests to reach ${ALPHA} whatever ` +
    "their outcome (the smallest p possible with n of them is 2 / 2^n two-sided, 1 / 2^n one-sided): run more seeds."));
}
