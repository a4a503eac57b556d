"""``rlbench report``: a suite's whole result as one self-contained HTML page.

The page holds the leaderboard with its intervals, AdaStop's decisions (when the suite ran with --adaptive), the
seed-by-seed comparisons with a baseline (``--paired``),
every figure of ``rlbench plot`` inlined as SVG, each algorithm's latest recorded episode on each task
(``budget.video_every``: an MP4 as a data URI, a text env's transcript), the per-task table, the run table (status, attempts, duration,
executor, host, device, job id, score, the error of failed runs), the score rule and normalisation, the suite
file and the reproducibility manifest (code versions, interpreters, packages, hosts). Nothing is fetched
when it is viewed: no scripts, fonts or images from elsewhere. Every string from the database is escaped.

A suite with no finished runs gets a page that says so, with its run table.
"""

from __future__ import annotations

import html
import json
import re
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_html", "suite_page"]

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1a1a1a;
       margin: 0; background: #fafafa; }
main { max-width: 1180px; margin: 0 auto; padding: 16px 20px 48px; background: #fff; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.1em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.sub { color: #555; margin-top: 0; }
nav a { margin-right: 1em; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.88em; margin: 8px 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f2f4f7; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
tr.failed td { background: #fff1f0; } tr.interrupted td { background: #fffbe6; }
figure { margin: 14px 0 22px; } figure svg, figure video { max-width: 100%; height: auto; display: block; }
figcaption { color: #555; font-size: 0.88em; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; font-size: 0.85em; max-width: 100%; }
pre.err { white-space: pre-wrap; margin: 2px 0; padding: 4px 8px; max-width: 60em; }
.note { background: #eef6ff; border-left: 4px solid #4a90d9; padding: 8px 12px; }
"""

# With #layout-check in the URL, the page writes the size of its tables and figures into #layout: the tests
# render it in headless Chromium and read what a person would see (no overflow at a laptop's width).
LAYOUT_CHECK = """
if (location.hash === "#layout-check") {
  const out = {viewport: innerWidth, page_width: document.documentElement.scrollWidth, items: []};
  for (const el of document.querySelectorAll("[data-check]")) {
    const r = el.getBoundingClientRect();
    out.items.push({name: el.dataset.check, width: r.width, height: r.height, left: r.left, right: r.right});
  }
  document.getElementById("layout").textContent = JSON.stringify(out);
}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(frame: Any, name: str, text_cols: tuple[str, ...] = (), row_class: list[str] | None = None) -> str:
    """A DataFrame as an HTML table (escaped), numbers right-aligned, wrapped so it scrolls, not overflows."""
    import math

    cols = [str(c) for c in frame.columns]
    head = "".join(f'<th class="{"text" if c in text_cols else ""}">{_e(c)}</th>' for c in cols)
    rows = []
    for i, rec in enumerate(frame.itertuples(index=False)):
        cells = []
        for c, v in zip(cols, rec):
            if isinstance(v, float):
                v = "" if math.isnan(v) else (f"{v:.4g}" if abs(v) < 1e5 else f"{v:,.0f}")
            cls = "text" if c in text_cols else ""
            cells.append(f'<td class="{cls}">{_e(v)}</td>')
        klass = f' class="{row_class[i]}"' if row_class else ""
        rows.append(f"<tr{klass}>{''.join(cells)}</tr>")
    return (f'<div class="scroll" data-check="{_e(name)}"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")  # fmt: skip


def _svg(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return re.sub(r"<!--.*?-->", "", text[start:], flags=re.S) if start >= 0 else ""


def build_html(
    store: Any,
    suite: str,
    *,
    metric: str,
    rule: str,
    drop_first: int,
    normalize: Any,
    reps: int = 50_000,
    seed: int = 0,
    step_kinds: dict[str, str] | None = None,
    worker: Any = None,
    curves: bool = True,
    paired: str | None = None,
    alternative: str = "two-sided",
    paired_steps: Sequence[int] = (),
    share_y: bool = False,
) -> tuple[str, list[str]]:
    """The page for ``suite`` and the warnings met on the way (tasks left out, runs dropped, ...).
    ``paired``: a baseline task or algorithm, whose seed-by-seed comparisons (``stats.paired_family``,
    ``alternative``) get a section (an unknown baseline raises ``stats.StatsError`` before anything is drawn);
    with ``paired_steps``, each run scored as if it ended at each step, one family over the steps
    (``sequential.paired_suite``, the same numbers as ``rlbench compare --paired --step-max``; its
    ``UsageError`` too raised before anything is drawn).

    The statistics are bootstrapped once, by ``report.make_report`` for the figures, and its leaderboard is
    the page's; ``worker`` (a ``figure_worker.FigureWorker``) draws the figures beside the bootstraps.
    ``curves=False`` reads per-run scores computed in the database (``Store.run_scores``) instead of every
    metric row, and leaves out the curves over training: the same leaderboard, tables and score figures.
    ``share_y``: the figures against the settings that vary draw each metric's tasks on one y range."""
    import pandas as pd

    from . import analysis, leaderboard, report, stats

    with analysis.shared_reader(store) as reads, reads.reader() as con:
        store.require_suite(con, suite)
        runs = store.runs(con, suite)
        info = store.suite_info(con, suite)
        decisions, adaptive = store.decisions(con, suite)
        recorded = [a for a in store.artifacts(con, suite=suite) if a["kind"] in ("video", "transcript")]
        if curves:
            df = analysis.metric_rows(reads, suite, metric)
        else:
            name, n = stats.parse_rule(rule)
            df = store.run_scores(con, suite=suite, metric=metric, rule=name, n=n, drop_first=drop_first,
                                  phase=stats.rule_phase(rule)[1]).to_pandas()  # fmt: skip
    config = info["config"]
    notes: list[str] = []
    sections: list[tuple[str, str, str]] = []  # (anchor, title, html)
    counts = ", ".join(
        f"{n} {s}" for s, n in sorted(pd.Series([r["status"] for r in runs]).value_counts().items())
    )
    scoring = (f"Score rule: <b>{_e(rule)}</b> of <code>{_e(metric)}</code>"
               + (f" after dropping the first {drop_first} evaluations" if drop_first else "") + "; normalisation: "
               + _e(_describe_normalize(normalize)) + ".")  # fmt: skip
    scores: dict[str, float] = {}
    if df.empty:
        sections.append(("results", "Results", f'<p class="note" data-check="no-results">No finished runs of '
                         f"<code>{_e(metric)}</code> yet ({_e(counts) or 'no runs'}): there is nothing to rank "
                         f"or draw. See <code>rlbench status {_e(suite)}</code>.</p>"))  # fmt: skip
    else:
        at_steps = None  # (rows, settings) of compare --paired --step-max
        if paired:  # an unknown baseline, or steps with nothing to pair, refused before anything is drawn
            stats.resolve_baseline(
                paired, sorted(set(map(str, df["env"]))), sorted(set(map(str, df["algo"])))
            )
            if paired_steps:
                from .sequential import paired_suite

                at_steps = paired_suite(store, suite, paired, metric, rule, drop_first, alternative, reps, seed,
                                        list(paired_steps))  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            made = report.make_report(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                      normalize=normalize, reps=reps, seed=seed, out_dir=Path(tmp), fmt="svg",
                                      step_kinds=step_kinds, worker=worker, curves=curves)  # fmt: skip
            figs = [p for p in made.paths if p.suffix == ".svg"]
            body = "".join(
                f'<figure data-check="figure:{_e(p.stem)}">{_svg(p)}<figcaption>{_e(p.stem.replace("_", " "))}'
                f"</figcaption></figure>" for p in figs)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", stats.StatsWarning)
            per_run = stats.per_run_scores(df, rule, drop_first)
            scores = dict(zip(per_run["run_id"], per_run["score"]))
            try:  # make_report's board; without one (no common tasks), build says why (before bootstrapping)
                board = made.board or leaderboard.build(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                                        normalize=normalize, reps=reps, seed=seed)  # fmt: skip
                header = "".join(f"<li>{_e(h)}</li>" for h in board.header)
                sections.append(("leaderboard", "Leaderboard", f"<ul>{header}</ul>"
                                 + _table(board.frame, "leaderboard", ("algo",))))  # fmt: skip
            except stats.StatsError as e:
                sections.append(("leaderboard", "Leaderboard", f'<p class="note">{_e(e)}.</p>'))
            per_task = leaderboard.build(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                         normalize=normalize, per_task=True)  # fmt: skip
        notes += list(
            dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning))
        )
        notes += [n for n in made.warnings if n not in notes]
        if decisions:
            frame = pd.DataFrame(decisions)[["task", "algo_a", "decision", "algo_b", "look", "runs_a", "runs_b",
                                             "mean_a", "mean_b"]]  # fmt: skip
            s = adaptive or {}
            sections.append(("adastop", "AdaStop decisions", (
                f"<p>Family-wise error {_e(s.get('alpha'))} over every pair, task and look; batches of "
                f"{_e(s.get('batch'))} runs, at most {_e(s.get('max_batches'))} looks. <i>larger</i>: A is better "
                "than B.</p>" + _table(frame, "adastop", ("task", "algo_a", "decision", "algo_b")))))  # fmt: skip
        if paired:
            if at_steps is None:
                dimension, name, rows = stats.paired_family(per_run, paired, alternative, reps, seed)
                steps_said = None
            else:
                rows, settings = at_steps
                dimension, name, steps_said = (settings[k] for k in ("dimension", "baseline", "step_max"))
            sections.append(("paired", "Paired by seed",
                             _paired(rows, dimension, name, alternative, reps, seed, steps_said)))  # fmt: skip
        sections.append(("figures", "Figures", body))
        against = _by_keys(store, suite, metric=metric, rule=rule, drop_first=drop_first, normalize=normalize,
                           reps=reps, seed=seed, notes=notes, share_y=share_y)  # fmt: skip
        if against:
            sections.append(("by-key", "Against the settings that vary", against))
        sections.append(("per-task", "Per-task scores", _table(per_task.frame, "per-task", ("algo", "env"))))
    tuning = _tuning(store, config)
    if tuning:
        sections.append(("tuning", "Tuning", tuning))
    if recorded:
        sections.append(("episodes", "Episodes", _episodes(store, suite, runs, recorded, notes)))
    sections.append(("runs", "Runs", _run_table(runs, scores)))
    sections.append(("suite", "Suite file", _suite_file(info["source_path"], config)))
    sections.append(("manifest", "Reproducibility", _manifest(runs)))
    nav = "".join(f'<a href="#{a}">{_e(t)}</a>' for a, t, _ in sections)
    body = "".join(f'<section id="{a}"><h2>{_e(t)}</h2>{h}</section>' for a, t, h in sections)
    warn = "".join(f"<li>{_e(n)}</li>" for n in notes)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(suite)}: rlbench report</title><style>{CSS}</style></head>
<body><main>
<h1 data-check="title">{_e(suite)}</h1>
<p class="sub">{_e(info["description"])}</p>
<p class="sub">{len(runs)} runs ({_e(counts) or "none"}). {scoring}
Generated by rlbench on {_e(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))} from {_e(store.path)}.</p>
<nav>{nav}</nav>
{f"<h2>Notes</h2><ul>{warn}</ul>" if warn else ""}
{body}
<pre id="layout" hidden></pre>
</main><script>{LAYOUT_CHECK}</script></body></html>
"""
    return page, notes


def _paired(rows: list[dict[str, Any]], dimension: str, name: str, alternative: str, reps: int, seed: int,
            steps: int | list[int] | None) -> str:  # fmt: skip
    """The "Paired by seed" section: ``rlbench compare --paired``'s table of ``stats.paired_family``'s ``rows``
    (``dimension``: what is compared across; ``name``: the baseline), its settings said above it; ``steps``:
    the step the runs were scored at, or the steps of one family (its rows with a step column)."""
    import pandas as pd

    from . import stats

    tested = stats.tests_in_family(rows)  # not a row without a paired seed, or with every seed level
    held, across = ("algo", "task") if dimension == "task" else ("task", "algo")
    several = isinstance(steps, list)
    frame = pd.DataFrame([{**({"step": r["step"]} if several else {}), held: r["group"], across: r["other"], "seeds": r["pairs"],
                           "unpaired": len(r["unpaired"]), "baseline": r.get("mean_a"),
                           "mean": r.get("mean_b"), "diff": r.get("mean_diff"), "lower": r.get("lower"),
                           "upper": r.get("upper"), "above": r.get("above"), "below": r.get("below"),
                           "level": r.get("tied"), "sign p": r.get("sign_p"), "Wilcoxon p": r.get("wilcoxon_p"),
                           "Holm p": r.get("holm_p"), "min p": r.get("min_p")} for r in rows])  # fmt: skip
    sided = (
        "two-sided" if alternative == "two-sided" else f"one-sided ({alternative}: the other above / below)"
    )
    listed = steps if several else [] if steps is None else [steps]
    at = "" if not listed else f"Each run scored as if it ended at step {listed[0]}. "
    if several:
        at = f"Each run scored as if it ended at each of steps {', '.join(map(str, listed))}: one family. "
    flags = "".join(f" --step-max {s}" for s in listed)
    return (f"<p>{at}Each {_e(across)} against <b>{_e(name)}</b> within each {_e(held)}, seed by seed: diff = other "
            f"- baseline (baseline and mean: the two means), its mean with a 95% bootstrap interval (lower, upper; "
            f"{reps:,} reps, seed {seed}); seeds above / below / level; {sided} sign and Wilcoxon signed-rank "
            f"tests; Holm's correction over the {tested} tested row{'s' if tested != 1 else ''}. min p: the smallest "
            "p these seeds could give; above your alpha, they could not have shown a difference. The same table: "
            f"<code style=\"white-space: nowrap\">rlbench compare SUITE --paired '{_e(name)}'{flags}</code>.</p>"
            + (_table(frame, "paired", (held, across)) if rows
               else '<p class="note">Nothing to pair.</p>'))  # fmt: skip


def suite_page(
    store: Any,
    suite: str,
    *,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    normalize: str = "auto",
    reps: int = 50_000,
    seed: int = 0,
    worker: Any = None,
    curves: bool = True,
    paired: str | None = None,
    alternative: str = "two-sided",
    paired_steps: Sequence[int] = (),
    share_y: bool = False,
) -> tuple[str, list[str]]:
    """``rlbench report``: ``build_html`` of a suite scored as given, else as the suite says
    (``analysis.suite_scoring``), ``normalize`` a ``--normalize`` value (``analysis.suite_normalize``)."""
    from . import analysis

    with analysis.shared_reader(store) as reads:  # the small reads on one connection, closed before the page
        metric, rule, drop_first = analysis.suite_scoring(reads, suite, metric, rule, drop_first)
        norm = analysis.suite_normalize(reads, suite, normalize, metric)
        kinds = analysis.step_kinds(reads, suite)
    return build_html(store, suite, metric=metric, rule=rule, drop_first=drop_first, normalize=norm, reps=reps,
                      seed=seed, step_kinds=kinds, worker=worker, curves=curves, paired=paired,
                      alternative=alternative, paired_steps=paired_steps, share_y=share_y)  # fmt: skip


MAX_KEY_FIGURES = 8  # figures against a setting on a page at most (the first keys by name)


def _by_keys(store: Any, suite: str, *, metric: str, rule: str, drop_first: int, normalize: Any, reps: int,
             seed: int, notes: list[str], share_y: bool = False) -> str:  # fmt: skip
    """For each setting an algorithm varies in the suite (a sweep's params, ...), the score against it
    (``rlbench plot SUITE --x KEY``'s figure and table, IQM over seeds with 95% CIs); "" when there is none."""
    from . import analysis, plots, report, stats
    from .errors import UsageError

    parts = []
    for key in analysis.suite_setting_keys(store, suite):
        if len(parts) == MAX_KEY_FIGURES:
            notes.append(f"figures against more than {MAX_KEY_FIGURES} settings are left out; draw one with "
                         f"rlbench plot {suite} --x KEY")  # fmt: skip
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.StatsWarning)  # the leaderboard's own notes say them
            try:
                scored = analysis.key_scores(store, suite, key, metric=metric, rule=rule, drop_first=drop_first,
                                             normalize=normalize)  # fmt: skip
            except (UsageError, stats.StatsError):
                continue
            if not scored.within:
                continue
            points = report.key_points(scored, "iqm", reps, seed)
        fig = report.draw_key_figure(scored, points, "iqm", plots.FigureOptions(share_y=share_y))
        with tempfile.TemporaryDirectory() as tmp:
            path = plots.save_figure(fig, Path(tmp) / f"{report.key_file_name(key, metric)}.svg")
            svg = _svg(path)
        shown = points.assign(**{"95% CI": [f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(points["lower"],
                                                                                      points["upper"])]})  # fmt: skip
        shown = shown[["env", "legend", "x", "estimate", "95% CI", "runs"]].rename(
            columns={"env": "task", "x": key, "estimate": "IQM"}
        )
        left = [f"{b} (one value: {', '.join(v)})" for b, v in scored.single.items()]
        left += [f"{a} ({n} runs without it)" for a, n in scored.left_out.items()]
        parts.append(f'<h3>{_e(key)}</h3><figure data-check="figure:by-{_e(key)}">{svg}<figcaption>IQM over seeds '
                     f"of {_e(rule)} {_e(metric)} against {_e(key)}, 95% stratified bootstrap CI; "
                     f"<code>rlbench plot {_e(suite)} --x {_e(key)}</code>"
                     + (f"; left out: {_e('; '.join(left))}" if left else "") + "</figcaption></figure>"
                     + _table(shown, f"by-{key}", ("task", "legend", key, "95% CI")))  # fmt: skip
    return "".join(parts)


def _tuning(store: Any, config: dict[str, Any]) -> str:
    """The study behind a suite that ``rlbench tune`` made (``NAME.tune``, ``NAME.confirm``): its trials, history,
    importance and slice figures and the confirmation; "" for any other suite or when the study is gone."""
    import pandas as pd

    from .errors import UsageError
    from .tune import tune_status, tuned_suite

    suite = tuned_suite(config)
    if suite is None or suite.tune is None:
        return ""
    spec = suite.tune
    with tempfile.TemporaryDirectory() as tmp:
        try:
            found = tune_status(suite, suite.name, store, figures=Path(tmp), fmt="svg")
        except UsageError:
            return ""
        figs = "".join(f'<figure data-check="figure:{_e(p.stem)}">{_svg(p)}<figcaption>{_e(p.stem.replace("_", " "))}'
                       "</figcaption></figure>" for p in found.figures)  # fmt: skip
    rows = [{"trial": t["number"], "state": t["state"], **{k: t["params"].get(k) for k in spec.params},
             "objective": t["value"]} for t in found.trials]  # fmt: skip
    html = (f"<p>Search of <code>{_e(spec.algorithm)}</code>'s params ({_e(spec.sampler)} sampler, pruner "
            f"{_e(spec.pruner)}): {len(found.trials)} of {spec.trials} trials, each on seeds "
            f"{_e(spec.search_seeds())} x the suite's tasks; objective: {_e(spec.objective)} of the scores.</p>"
            + _table(pd.DataFrame(rows), "tune-trials", ("state",)) + figs)  # fmt: skip
    if found.confirmed:
        seeds = spec.confirm.seed_list()  # type: ignore[union-attr]
        conf = pd.DataFrame([{"configuration": c.label, "search score": c.search_value,
                              "confirmed IQM": None if c.iqm is None else c.iqm[0],
                              "95% CI": None if c.iqm is None else f"[{c.iqm[1]:.3f}, {c.iqm[2]:.3f}]",
                              "P(beats default)": None if c.poi_vs_default is None else c.poi_vs_default[0],
                              "P 95% CI": None if c.poi_vs_default is None else
                              f"[{c.poi_vs_default[1]:.3f}, {c.poi_vs_default[2]:.3f}]", "verdict": c.verdict,
                              **({"AdaStop": c.adastop or ""} if any(x.adastop for x in found.confirmed) else {})}
                             for c in found.confirmed])  # fmt: skip
        html += (f"<h3>Confirmation on fresh seeds {seeds[0]}..{seeds[-1]}</h3><p>The search's best configurations "
                 "and the default, re-run on seeds the search never used: the search score is optimistic (it was "
                 "picked for being high), the confirmed one is not.</p>"
                 + _table(conf, "tune-confirm", ("configuration", "95% CI", "P 95% CI", "verdict")))  # fmt: skip
    return html


EPISODES_BUDGET = 15 << 20  # bytes of videos a page embeds at most (base64 adds a third)


def _episodes(store: Any, suite: str, runs: list[dict[str, Any]], recorded: list[dict[str, Any]],
              notes: list[str]) -> str:  # fmt: skip
    """The latest recorded episode (``budget.video_every``) of each algorithm on each task, from its run of
    the lowest seed: an MP4 embedded as a data URI (the page stays self-contained), a transcript as text.
    At most ``EPISODES_BUDGET`` bytes of video; a file missing or changed since it was recorded is left out,
    with a note."""
    import base64

    from .artifacts import resolve, sha256_file
    from .coordinator import runs_root

    by_run = {r["run_id"]: r for r in runs}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for a in recorded:
        r = by_run.get(a["run_id"])
        if r is None:
            continue
        key, have = (str(r["algo"]), str(r["env"])), latest.get((str(r["algo"]), str(r["env"])))
        if have is None or (r["seed"], -a["step"]) < (by_run[have["run_id"]]["seed"], -have["step"]):
            latest[key] = a
    parts, spent = [], 0
    for (algo, env), a in sorted(latest.items()):
        r = by_run[a["run_id"]]
        caption = f"{_e(algo)} on {_e(env)}, seed {_e(r['seed'])}, evaluation at step {_e(a['step'])}"
        try:
            path = resolve(runs_root(store) / suite / a["run_id"], a["path"])
            ok = path.is_file() and path.stat().st_size == a["bytes"] and sha256_file(path) == a["sha256"]
        except ValueError:
            ok = False
        if not ok:
            notes.append(
                f"episode {a['path']} of run {a['run_id']}: missing or changed since it was recorded"
            )
            continue
        if a["kind"] == "transcript":
            text = path.read_text(errors="replace")
            parts.append(f'<figure><pre data-check="transcript">{_e(text[-20_000:])}</pre>'
                         f"<figcaption>{caption}</figcaption></figure>")  # fmt: skip
            continue
        if spent + a["bytes"] > EPISODES_BUDGET:
            notes.append(f"episode videos beyond {EPISODES_BUDGET >> 20} MB are left out of the page "
                         "(rlbench sql \"FROM artifacts\" lists them)")  # fmt: skip
            break
        spent += a["bytes"]
        data = base64.b64encode(path.read_bytes()).decode()
        parts.append(f'<figure data-check="video"><video controls muted playsinline preload="metadata" '
                     f'src="data:video/mp4;base64,{data}"></video><figcaption>{caption}</figcaption></figure>')  # fmt: skip
    return "".join(parts) or "<p>No recorded episode is on disk.</p>"


def _describe_normalize(normalize: Any) -> str:
    if normalize is None or normalize == "none":
        return "none (raw scores)"
    if isinstance(normalize, dict):
        return str(normalize.get("source") or normalize.get("table") or "the suite's normalize block")
    return str(normalize)


def _run_table(runs: list[dict[str, Any]], scores: dict[str, float]) -> str:
    import pandas as pd

    if not runs:
        return "<p>No runs.</p>"
    rows = [{"run_id": r["run_id"], "algo": r["algo"], "task": r["env"], "seed": r["seed"], "status": r["status"],
             "attempts": r["attempts"], "duration s": r["duration_s"], "executor": r.get("executor"),
             "host": r["host"], "device": r["device"], "job": r.get("job_id"), "score": scores.get(r["run_id"])}
            for r in runs]  # fmt: skip
    table = _table(pd.DataFrame(rows), "runs", ("run_id", "algo", "task", "status", "executor", "host", "device",
                                                "job"), [str(r["status"]) for r in runs])  # fmt: skip
    errors = "".join(f"<p><code>{_e(r['run_id'])}</code> {_e(r['algo'])} {_e(r['env'])} seed {_e(r['seed'])} "
                     f"({_e(r['status'])}):</p><pre class=\"err\">{_e((r['error'] or '').strip()[-2000:])}</pre>"
                     for r in runs if r["status"] in ("failed", "interrupted") and r["error"])  # fmt: skip
    return table + (f"<h3>Errors</h3>{errors}" if errors else "")


def _suite_file(source: str | None, config: dict[str, Any]) -> str:
    if source and Path(source).is_file():
        try:
            return (
                f"<p><code>{_e(source)}</code></p><pre>{_e(Path(source).read_text(encoding='utf-8'))}</pre>"
            )
        except (OSError, UnicodeDecodeError):
            pass
    return f"<p>As stored with the results:</p><pre>{_e(json.dumps(config, indent=1, default=str))}</pre>"


def _manifest(runs: list[dict[str, Any]]) -> str:
    def distinct(key: str) -> str:
        values = sorted({str(r[key]) for r in runs if r.get(key) not in (None, "")})
        return ", ".join(values) or "-"

    packages: dict[str, set[str]] = {}
    for r in runs:
        raw = r.get("packages")
        for name, version in (json.loads(raw) if isinstance(raw, str) else raw or {}).items():
            packages.setdefault(name, set()).add(str(version))
    items = [("git commit", distinct("git_commit")), ("uncommitted changes", distinct("git_dirty")),
             ("python", distinct("python")), ("hosts", distinct("host")), ("devices", distinct("device")),
             ("executors", distinct("executor"))]  # fmt: skip
    items += [(name, ", ".join(sorted(v))) for name, v in sorted(packages.items())]
    rows = "".join(f'<tr><th class="text">{_e(k)}</th><td class="text">{_e(v)}</td></tr>' for k, v in items)
    return f'<div class="scroll" data-check="manifest"><table>{rows}</table></div>'
