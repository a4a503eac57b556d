"""Score rules, normalisation and rliable aggregates: from tidy metric rows to numbers with confidence intervals.

Data flow::

    metric rows (run_id, algo, env, seed, step, value)      one metric, e.g. ``eval/return``
      -> run_scores(df, rule)        one score per run by a declared rule (final, best, mean_last:N, auc)
      -> score_table(df, rule, ...)  ScoreTable: {algo: ndarray(num_runs x num_tasks)}, rliable's contract,
                                     normalised by FIXED reference scores (never by the loaded runs)
      -> aggregates / probability_of_improvement / performance_profile    rliable, stratified bootstrap

Curves over training (``sample_efficiency``, ``learning_curves``) start again from the metric rows.

Reproducible bootstrap: every statistic of rliable's here is ``rlbench_cli.bootstrap``'s vectorised one,
proven equal to rliable on the same data (``tests/unit/test_stats.py``, ``tests/unit/test_bootstrap.py``).
The generator of each is derived from ``seed`` and the name of what is resampled (an algorithm, or a pair of
algorithms), so an algorithm's interval depends only on its own runs and ``seed``, not on which other
algorithms happen to be loaded: ``bootstrap.derive_rng(seed, key)`` for the aggregates, probability of
improvement and performance profiles; for the sample-efficiency curve, numpy's legacy generator seeded with
``bootstrap_seed(seed, key)``, the stream rliable draws from after ``np.random.seed(bootstrap_seed(seed,
algo))``, so a direct rliable call on the same array reproduces that curve's bands. The learning curves'
bands (a bootstrap of each point's mean over runs, not one of rliable's) come from one
``numpy.random.default_rng(seed)`` drawn point after point. Numpy's global generator is never touched.

Neither rliable nor scipy is imported here, so importing this module is cheap.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rlbench_cli.references import BUILTIN, NormalizeError, Resolved, resolve
from rlbench_cli.scoring import (  # noqa: F401  (re-exported: stats is where callers look)
    PHASE_METRIC,
    SCORED_COLUMNS,
    StatsError,
    StatsWarning,
    _short,
    _warn,
    finish_order,
    parse_rule,
    rule_phase,
)

__all__ = [
    "REFERENCES",
    "RULES",
    "METRICS",
    "ScoreTable",
    "StatsError",
    "StatsWarning",
    "parse_rule",
    "run_scores",
    "SCORED_COLUMNS",
    "rule_phase",
    "phase_rows",
    "PHASE_METRIC",
    "is_scored",
    "finish_run_scores",
    "per_run_scores",
    "score_table",
    "aggregates",
    "probability_of_improvement",
    "performance_profile",
    "sample_efficiency",
    "learning_curves",
    "bootstrap_seed",
    "score_label",
]

COLUMNS = ("run_id", "algo", "env", "seed", "step", "value")
RULES = ("final", "best", "mean_last:N", "auc")
METRICS = ("median", "iqm", "mean", "optimality_gap")
METRIC_LABELS = {"median": "Median", "iqm": "IQM", "mean": "Mean", "optimality_gap": "Optimality gap"}
OPTIMALITY_GAP_GAMMA = 1.0

# Fixed reference scores live in ``references`` (classic-control, d4rl, atari, and a suite's own block);
# this mapping exposes each built-in set's table for callers that want the raw numbers.
REFERENCES: dict[str, dict[str, tuple[float, float]]] = {name: dict(rs.table) for name, rs in BUILTIN.items()}


def phase_rows(df: pd.DataFrame, phase: str | None) -> pd.DataFrame:
    """The rows of ``df`` in ``phase`` (see ``rule_phase``), by its ``boundary`` column (each row's run's
    phase boundary step, NaN or absent for runs without one); all rows when ``phase`` is None."""
    if phase is None:
        return df
    boundary = df["boundary"] if "boundary" in df.columns else pd.Series(np.nan, index=df.index)
    boundary = pd.to_numeric(boundary, errors="coerce").astype(float)
    step = df["step"].astype(float)
    keep = (boundary.isna() | (step <= boundary)) if phase == "offline" else (step > boundary)
    out = df.loc[keep.to_numpy()]
    if out.empty and not df.empty:
        why = (
            "no run has an online phase (runs fine-tuned with finetune: {steps: N} have)"
            if phase == "online"
            else "nothing is left"
        )
        raise StatsError(f"No evaluation points in the {phase} phase: {why}.")
    return out


def _clean(df: pd.DataFrame) -> pd.DataFrame:
    """Checks the columns, drops non-finite values (with a warning) and sorts each run by step."""
    if not isinstance(df, pd.DataFrame):
        raise StatsError(f"Expected a pandas DataFrame of metric rows, got {type(df).__name__}.")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise StatsError(
            f"Metric table lacks column(s) {', '.join(missing)}; expected columns {', '.join(COLUMNS)}."
        )
    if df.empty:
        raise StatsError("Metric table is empty: no evaluation rows to score. Did the runs log this metric?")
    for col in ("name", "metric"):
        if col in df.columns and df[col].nunique() > 1:
            names = sorted(map(str, df[col].unique()))
            raise StatsError(
                f"Metric table mixes {len(names)} metrics ({_short(names)}); pass rows of one metric."
            )
    out = df.loc[:, list(COLUMNS)].copy()
    out["value"] = pd.to_numeric(out["value"], errors="coerce").astype(float)
    # k-th evaluation of each run, counted before non-finite values are dropped: drop_first and the
    # alignment of curves refer to evaluations, whatever their value
    out = out.sort_values(["run_id", "step"], kind="mergesort").reset_index(drop=True)
    out["index"] = out.groupby("run_id", sort=False).cumcount()
    finite = np.isfinite(out["value"].to_numpy())
    if not finite.all():
        bad = out.loc[~finite]
        _warn(
            f"Dropped {len(bad)} non-finite value(s) (NaN/inf) from {bad['run_id'].nunique()} run(s): "
            f"{_short(sorted(map(str, bad['run_id'].unique())))}."
        )
        out = out.loc[finite]
    if out.empty:
        raise StatsError("Metric table has no finite values left after dropping NaN/inf.")
    return out.reset_index(drop=True)


def run_scores(df: pd.DataFrame, rule: str = "final", drop_first: int = 0) -> pd.DataFrame:
    """Reduces each run to one number by a score rule.

    Args:
        df: Tidy rows of ONE metric, columns ``run_id, algo, env, seed, step, value``, one row per evaluation
            point. Runs may have different lengths; non-finite values are dropped with a warning.
        rule: Score rule, see ``parse_rule``; with ``@offline`` / ``@online``, the rows of that phase only
            (``phase_rows``, by a ``boundary`` column), before evaluations are numbered.
        drop_first: Drop each run's first ``drop_first`` evaluation points (ordered by step) before applying
            the rule. A run left with no points is dropped with a warning.

    Returns:
        DataFrame with columns ``run_id, algo, env, seed, score``, one row per run, sorted by
        ``algo, env, seed, run_id``.
    """
    name, n = parse_rule(rule)
    if int(drop_first) != drop_first or drop_first < 0:
        raise StatsError(f"drop_first must be a non-negative integer, got {drop_first!r}.")
    if isinstance(df, pd.DataFrame) and not df.empty and "step" in df.columns:
        df = phase_rows(df, rule_phase(rule)[1])  # before numbering evaluations, as step bounds are
    data = _clean(df)
    if drop_first:
        before = set(data["run_id"].unique())
        data = data.loc[data["index"] >= drop_first].copy()
        emptied = sorted(map(str, before - set(data["run_id"].unique())))
        if emptied:
            _warn(
                f"{len(emptied)} run(s) have no more than {drop_first} evaluation point(s) and were dropped "
                f"by drop_first={drop_first}: {_short(emptied)}."
            )
        if data.empty:
            raise StatsError(f"No evaluation points left after drop_first={drop_first}; lower --drop-first.")
    grouped = data.groupby("run_id", sort=False)
    keys = grouped[["algo", "env", "seed"]].first()
    values = grouped["value"]
    if name == "final":
        score = values.last()
    elif name == "best":
        score = values.max()
    elif name == "mean_last":
        short = grouped.size()
        short = short[short < n]
        if len(short):
            _warn(
                f"{len(short)} run(s) have fewer than {n} evaluation points; mean_last:{n} averages all the "
                f"points they have: {_short(sorted(map(str, short.index)))}."
            )
        last = grouped.tail(n).groupby("run_id", sort=False)["value"]
        score = last.agg(math.fsum) / last.size()  # exactly rounded sums, as DuckDB's fsum in SQL scores
    else:  # auc: trapezoids over consecutive points of a run, divided by the run's step span
        step = data["step"].astype(float)
        prev_step = grouped["step"].shift().astype(float)
        prev_value = values.shift()
        area = ((data["value"] + prev_value) / 2.0 * (step - prev_step)).fillna(0.0)
        total = area.groupby(data["run_id"], sort=False).agg(math.fsum)
        span = step.groupby(data["run_id"], sort=False).max() - step.groupby(data["run_id"], sort=False).min()
        score = total / span.where(span > 0)
        flat = score.index[score.isna()]  # one point (or one step): its mean, summed only for those runs
        if len(flat):
            one = data.loc[data["run_id"].isin(flat)].groupby("run_id", sort=False)["value"]
            score = score.fillna(one.agg(math.fsum) / one.size())
    out = keys.assign(score=score.astype(float)).reset_index()
    out = out.sort_values(["algo", "env", "seed", "run_id"], kind="mergesort").reset_index(drop=True)
    return out.loc[:, ["run_id", "algo", "env", "seed", "score"]]


def is_scored(df: pd.DataFrame) -> bool:
    """Whether ``df`` holds per-run scores computed in SQL (``SCORED_COLUMNS``) rather than metric rows."""
    return (
        isinstance(df, pd.DataFrame) and set(SCORED_COLUMNS) <= set(df.columns) and "value" not in df.columns
    )


def finish_run_scores(runs: pd.DataFrame, rule: str = "final", drop_first: int = 0) -> pd.DataFrame:
    """``run_scores``'s output, warnings and errors from per-run scores computed in SQL.

    ``Store.run_scores`` applies the rule in the database and counts, per run, its rows, the non-finite ones
    and the points the rule used; this says what ``run_scores`` says about them (non-finite values dropped,
    runs emptied by ``drop_first``, runs shorter than ``mean_last:N``), in the same words and order, and
    returns the same frame: equal scores (bitwise: the same operations in the same order), same sort.

    Args:
        runs: Columns ``SCORED_COLUMNS``, one row per run (any subset of a suite's runs, e.g. some tasks).
        rule: The score rule the scores were computed with.
        drop_first: The evaluations dropped from the start of each run.

    Returns:
        DataFrame with columns ``run_id, algo, env, seed, score``, one row per run, sorted by
        ``algo, env, seed, run_id``.
    """
    order = finish_order({c: runs[c].to_numpy() for c in runs.columns}, rule, drop_first)
    out = runs.iloc[order].loc[:, ["run_id", "algo", "env", "seed", "score"]].astype({"score": float})
    return out.reset_index(drop=True)


def per_run_scores(df: pd.DataFrame, rule: str = "final", drop_first: int = 0) -> pd.DataFrame:
    """``run_scores`` of metric rows, or ``finish_run_scores`` of per-run scores computed in SQL."""
    if is_scored(df):
        return finish_run_scores(df, rule, drop_first)
    return run_scores(df, rule, drop_first)


# ------------------------------------------------------------------------------------------ normalisation
def _resolve_references(
    tasks: Sequence[str], normalize: Any, per_run: pd.DataFrame | None = None
) -> Resolved:
    """References for ``tasks`` (see ``references.resolve``); warns when "auto" falls back to raw scores."""
    if isinstance(normalize, Resolved):
        return normalize
    try:
        res = resolve(list(tasks), normalize, per_run)
    except NormalizeError as e:
        raise StatsError(str(e)) from None
    if normalize == "auto" and res.name is None:
        _warn(
            f"No built-in reference scores cover every task ({_short(list(tasks))}); reporting RAW scores "
            "(not normalised). Add a normalize block to the suite or pass --normalize NAME."
        )
    return res


def _normalise(values: pd.Series, tasks: pd.Series, res: Resolved) -> pd.Series:
    if not res.refs:
        return values.astype(float)
    if any(len(r) == 3 for r in res.refs.values()):
        from rlbench_cli.references import normalise

        out = [normalise(float(v), res.refs[t], res.scale) for v, t in zip(values, tasks, strict=True)]
        return pd.Series(out, index=values.index, dtype=float)
    low = tasks.map(lambda t: res.refs[t][0]).astype(float)
    high = tasks.map(lambda t: res.refs[t][1]).astype(float)
    return res.scale * (values - low) / (high - low)


def _complete_seeds(
    cells: pd.DataFrame, algos: Sequence[str], tasks: Sequence[str]
) -> dict[str, list[object]]:
    """Seeds each algorithm has on EVERY task (warns about dropped seeds and algorithms)."""
    kept: dict[str, list[object]] = {}
    seeds_of = cells.groupby(["algo", "env"], observed=True, sort=False)["seed"].agg(set).to_dict()
    for algo in algos:
        by_task = {t: seeds_of.get((algo, t), set()) for t in tasks}
        absent = [t for t in tasks if not by_task[t]]
        if absent:
            _warn(
                f"Algorithm {algo!r} has no runs on task(s) {', '.join(absent)}; it is left out of the table."
            )
            continue
        all_seeds = sorted(set().union(*by_task.values()), key=_seed_key)
        seeds = [s for s in all_seeds if all(s in by_task[t] for t in tasks)]
        dropped = {s: [t for t in tasks if s not in by_task[t]] for s in all_seeds if s not in seeds}
        if not seeds:
            _warn(
                f"Algorithm {algo!r} has no seed present on every task; it is left out of the table "
                f"(runs are matched by seed across tasks)."
            )
            continue
        if dropped:
            detail = "; ".join(f"seed {s} (missing on {', '.join(ts)})" for s, ts in dropped.items())
            _warn(
                f"Algorithm {algo!r}: runs are matched by seed across tasks, so {len(dropped)} seed(s) were "
                f"dropped: {detail}. Kept {len(seeds)} seed(s): {_short(seeds, 10)}."
            )
        kept[algo] = seeds
    if not kept:
        raise StatsError("No algorithm has a seed present on every task; nothing to compare.")
    return kept


def _seed_key(seed: object) -> tuple[int, object]:
    return (0, seed) if isinstance(seed, (int, np.integer)) else (1, str(seed))


def _check_unique_cells(frame: pd.DataFrame) -> None:
    dup = frame.duplicated(["algo", "env", "seed"], keep=False)
    if dup.any():
        first = frame.loc[dup].iloc[0]
        same = (frame[["algo", "env", "seed"]] == first[["algo", "env", "seed"]]).all(axis=1)
        ids = frame.loc[same, "run_id"]
        raise StatsError(
            f"{len(ids)} runs share algo={first['algo']} env={first['env']} seed={first['seed']} "
            f"(run ids {_short(sorted(map(str, ids)))}); give sweep variants distinct algorithm labels."
        )


# -------------------------------------------------------------------------------------------- score table
@dataclass
class ScoreTable:
    """Scores of one metric, one number per run, arranged for rliable.

    Attributes:
        rule: Score rule that made one number per run (``final``, ``best``, ``mean_last:N``, ``auc``).
        drop_first: Evaluation points dropped from the start of each run before the rule.
        normalized: Name of the reference set used (a built-in set, or ``"suite"`` for the suite's own
            ``normalize`` block), or ``None`` for raw scores.
        tasks: Task (environment) names, the columns of every score matrix.
        algos: Algorithm names, the keys of ``scores`` (sorted).
        scores: ``{algo: ndarray of shape (num_runs, num_tasks)}``, rliable's contract. Row ``i`` holds the
            runs of the i-th seed in ``seeds[algo]`` on every task; column ``j`` is ``tasks[j]``. Normalised
            if ``normalized`` is set.
        per_run: ``run_scores`` output plus ``norm_score`` (equal to ``score`` when raw) and ``in_table``
            (False for runs whose seed is missing on some task, or whose algorithm was left out).
        seeds: ``{algo: seeds}``, the seed of each row of ``scores[algo]``.
        references: ``{task: (low, high)}`` used for normalisation (empty when raw).
        metric: Name of the metric that was scored (e.g. ``eval/return``), for labels.
        scale: Normalised value of the high reference (1, or 100 for D4RL's convention).
        norm_description: One line saying how scores were normalised, for headers and captions.
    """

    rule: str
    drop_first: int
    normalized: str | None
    tasks: list[str]
    algos: list[str]
    scores: dict[str, np.ndarray]
    per_run: pd.DataFrame
    seeds: dict[str, list[object]] = field(default_factory=dict)
    references: dict[str, tuple[float, float]] = field(default_factory=dict)
    metric: str = "score"
    scale: float = 1.0
    norm_description: str = "raw scores, not normalised"

    @property
    def resolved(self) -> Resolved:
        """The normalisation this table used, to apply the same one elsewhere (e.g. sample efficiency)."""
        return Resolved(self.normalized, dict(self.references), self.scale, self.norm_description)

    @property
    def num_runs(self) -> dict[str, int]:
        """Runs per task of each algorithm (rows of its score matrix)."""
        return {a: int(s.shape[0]) for a, s in self.scores.items()}


def score_table(
    df: pd.DataFrame,
    rule: str = "final",
    drop_first: int = 0,
    normalize: str | None = "auto",
    metric: str | None = None,
    matrices: bool = True,
) -> ScoreTable:
    """Builds rliable's ``{algo: (num_runs x num_tasks)}`` score matrices from metric rows.

    With ``matrices=False`` only the per-run scores (raw and normalised) are filled in, for tables that
    look at one task at a time: ``scores`` and ``algos`` stay empty and no run needs a partner on another
    task.

    Args:
        df: Tidy rows of ONE metric, columns ``run_id, algo, env, seed, step, value`` (see ``run_scores``).
            An optional ``name`` or ``metric`` column with one unique value names the metric for labels.
            Or per-run scores computed in SQL with the same rule (``SCORED_COLUMNS``, ``Store.run_scores``):
            the same table, without loading the rows.
        rule: Score rule, see ``parse_rule``.
        drop_first: Evaluation points to drop from the start of each run.
        normalize: A suite's ``normalize`` mapping (see ``references.resolve``), or ``"auto"``: normalise by
            the first built-in reference set (``references.BUILTIN``) that covers every
            task, else raw scores with a warning. ``None`` (or ``"none"``): raw scores. A reference set name: that set;
            ``StatsError`` if it lacks a task. Normalisation uses FIXED references, ``(score - low) /
            (high - low)``, never the min/max of the loaded runs.
        metric: Metric name for labels; inferred from a ``name``/``metric`` column when omitted.

    Returns:
        A ``ScoreTable``. Runs are matched by seed across tasks: the rows of ``scores[algo]`` are the seeds
        that algorithm has on every task; other seeds are dropped with a warning naming seeds and tasks.
    """
    if metric is None:
        metric = _infer_metric(df)
    per_run = per_run_scores(df, rule, drop_first)
    _check_unique_cells(per_run)
    tasks = sorted(per_run["env"].astype(str).unique())
    per_run["env"] = per_run["env"].astype(str)
    per_run["algo"] = per_run["algo"].astype(str)
    res = _resolve_references(tasks, normalize, per_run)
    per_run["norm_score"] = _normalise(per_run["score"], per_run["env"], res)
    seeds = _complete_seeds(per_run, sorted(per_run["algo"].unique()), tasks) if matrices else {}
    scores: dict[str, np.ndarray] = {}
    per_run["in_table"] = not matrices
    for algo, algo_seeds in seeds.items():
        rows = per_run.loc[(per_run["algo"] == algo) & per_run["seed"].isin(algo_seeds)]
        grid = rows.pivot(index="seed", columns="env", values="norm_score")
        scores[algo] = grid.loc[algo_seeds, tasks].to_numpy(dtype=float)
        per_run.loc[rows.index, "in_table"] = True
    return ScoreTable(
        rule=rule.strip(),
        drop_first=int(drop_first),
        normalized=res.name,
        tasks=tasks,
        algos=list(scores),
        scores=scores,
        per_run=per_run,
        seeds=seeds,
        references=res.refs,
        metric=metric,
        scale=res.scale,
        norm_description=res.description,
    )


def _infer_metric(df: pd.DataFrame) -> str:
    for col in ("name", "metric"):
        if isinstance(df, pd.DataFrame) and col in df.columns and df[col].nunique() == 1:
            return str(df[col].iloc[0])
    return "score"


def score_label(table: ScoreTable, metric: str | None = None) -> str:
    """Human label of what a table holds, e.g. ``IQM of final eval/return (normalised: classic-control)``.

    Args:
        table: The score table.
        metric: Aggregate name to put in front (``iqm``, ``median``...; a key of ``METRIC_LABELS``) or None.
    """
    rule = table.rule + (f", first {table.drop_first} evals dropped" if table.drop_first else "")
    norm = "raw, not normalised"
    if table.normalized:
        norm = f"normalised: {table.normalized} refs" + (f", x{table.scale:g}" if table.scale != 1 else "")
    head = f"{METRIC_LABELS.get(metric, metric)} of " if metric else ""
    return f"{head}{rule} {table.metric} ({norm})"


# ---------------------------------------------------------------------------------------------- bootstrap
def bootstrap_seed(seed: int, key: str) -> list[int]:
    """The seed for numpy's global generator before bootstrapping ``key`` (an algorithm or ``"x|y"``).

    Derived from ``seed`` and a CRC32 of ``key``, so each algorithm (or pair) gets its own stream that does
    not depend on the other algorithms loaded. Pass it to ``np.random.seed``.
    """
    if int(seed) != seed or seed < 0 or seed >= 2**32:
        raise StatsError(f"Bootstrap seed must be an integer in [0, 2**32), got {seed!r}.")
    return [int(seed), zlib.crc32(key.encode("utf-8"))]


@contextmanager
def global_seed(seed: int | list[int]) -> Iterator[None]:
    """Seeds numpy's global generator (which rliable uses) and restores the previous state afterwards; for
    calling rliable itself reproducibly (the tests and the side-by-side benchmark)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _check_reps(reps: int, confidence: float = 0.95) -> None:
    if int(reps) != reps or reps < 1:
        raise StatsError(f"reps must be a positive integer, got {reps!r}.")
    if not 0 < confidence < 1:
        raise StatsError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")


def aggregates(table: ScoreTable, reps: int = 50000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """rliable's aggregates with stratified bootstrap confidence intervals, vectorised (``bootstrap``).

    Point estimates equal rliable's; intervals agree with rliable's within Monte Carlo error (tests compare
    them, and ``benchmarks/stats_speed.py`` times both). Each algorithm's replicates come from its own
    generator, ``bootstrap.derive_rng(seed, algo)``: the same seed gives identical intervals, and adding an
    algorithm leaves the others' intervals as they were.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs, num_tasks).
        reps: Bootstrap replications (rliable's default: 50,000).
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo, metric, estimate, lower, upper``: four rows per algorithm, metric in
        ``median, iqm, mean, optimality_gap``. Median and mean are of per-task means (rliable), IQM is the
        25% trimmed mean over all runs and tasks, optimality gap uses gamma = 1.0 x the table's scale (the
        high reference) and is NaN for raw scores (a fixed threshold means nothing on an unnormalised scale).
    """
    from . import bootstrap

    _check_reps(reps, confidence)
    gamma = OPTIMALITY_GAP_GAMMA * table.scale
    # raw scores have no optimality gap (NaN below): not bootstrapped. The other statistics do not depend on
    # which are computed together (the same replicates, each statistic on its own), so they are unchanged.
    funcs = METRICS if table.normalized is not None else tuple(m for m in METRICS if m != "optimality_gap")
    est = bootstrap.interval_estimates(
        {a: table.scores[a] for a in table.algos}, funcs, reps=int(reps), confidence=confidence, seed=seed,
        gamma=gamma,
    )  # fmt: skip
    rows = []
    for algo in table.algos:
        point, lower, upper = est[algo]
        for metric in METRICS:
            if metric not in funcs:
                rows.append((algo, metric, np.nan, np.nan, np.nan))
            else:
                i = funcs.index(metric)
                rows.append((algo, metric, float(point[i]), float(lower[i]), float(upper[i])))
    return pd.DataFrame(rows, columns=["algo", "metric", "estimate", "lower", "upper"])


def probability_of_improvement(
    table: ScoreTable, reps: int = 2000, seed: int = 0, confidence: float = 0.95
) -> pd.DataFrame:
    """Probability that a run of ``algo_x`` beats a run of ``algo_y`` on a task, averaged over tasks.

    rliable's estimator (Mann-Whitney U / (n_x n_y) per task, averaged over tasks), bootstrapped by the
    vectorised ``bootstrap.poi_interval`` (runs of x and y resampled independently per task, as rliable's
    StratifiedIndependentBootstrap does). Each unordered pair is bootstrapped once, with x before y in
    ``table.algos`` order and the generator ``derive_rng(seed, "x|y")``; the reverse pair reuses those
    replicates, since
    P(y > x) = 1 - P(x > y) on every replicate: its interval is ``[1 - upper, 1 - lower]`` and its point
    estimate is computed on (y, x). The two directions stay consistent.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs_algo, num_tasks).
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo_x, algo_y, estimate, lower, upper``, one row per ordered pair x != y.
        Empty when the table has fewer than two algorithms.
    """
    from . import bootstrap

    _check_reps(reps, confidence)
    rows = []
    algos = table.algos
    pairs = [(x, y) for i, x in enumerate(algos) for y in algos[i + 1 :]]
    intervals = bootstrap.map_independent(
        lambda p: bootstrap.poi_interval(table.scores[p[0]], table.scores[p[1]], reps=int(reps),
                                         confidence=confidence, seed=seed, key=f"{p[0]}|{p[1]}"),
        pairs, seed,
    )  # fmt: skip
    for (x, y), (point, lo, hi) in zip(pairs, intervals):
        sx, sy = table.scores[x], table.scores[y]
        rows.append((x, y, float(point), float(lo), float(hi)))
        rows.append(
            (y, x, float(bootstrap.probability_of_improvement(sy, sx)), 1.0 - float(hi), 1.0 - float(lo))
        )
    out = pd.DataFrame(rows, columns=["algo_x", "algo_y", "estimate", "lower", "upper"])
    order = {a: k for k, a in enumerate(algos)}
    out = out.sort_values(["algo_x", "algo_y"], key=lambda c: c.map(order), kind="mergesort")
    return out.reset_index(drop=True)


def default_taus(table: ScoreTable, num: int = 81) -> np.ndarray:
    """Thresholds for a performance profile: 0..max(1, best score) when normalised, else the score range."""
    values = np.concatenate([s.ravel() for s in table.scores.values()])
    if table.normalized:
        low, high = min(0.0, float(values.min())), max(table.scale, float(values.max()))
    else:
        low, high = float(values.min()), float(values.max())
        if high == low:
            low, high = low - 1.0, high + 1.0
    return np.linspace(low, high, num)


def performance_profile(
    table: ScoreTable,
    taus: Sequence[float] | np.ndarray | None = None,
    reps: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    variant: str = "run",
) -> pd.DataFrame:
    """Performance profiles with stratified bootstrap bands (rliable's, vectorised in ``bootstrap``).

    ``variant="run"``: the run-score distribution, the fraction of all runs x tasks scoring above tau
    (rliable's default). ``variant="mean"``: the average-score distribution, the fraction of tasks whose mean
    over runs is above tau. Each algorithm is resampled with its own generator ``derive_rng(seed, algo)``.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs, num_tasks).
        taus: 1-D thresholds, shape (num_taus,); defaults to ``default_taus(table)``.
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile bands.
        variant: ``"run"`` or ``"mean"`` (see above).

    Returns:
        DataFrame with columns ``algo, tau, estimate, lower, upper``, num_taus rows per algorithm.
    """
    from . import bootstrap

    _check_reps(reps, confidence)
    tau_arr = default_taus(table) if taus is None else np.asarray(taus, dtype=float).ravel()
    if tau_arr.size == 0:
        raise StatsError("performance_profile needs at least one threshold tau.")
    prof = bootstrap.performance_profile(
        {a: table.scores[a] for a in table.algos}, tau_arr, reps=int(reps), confidence=confidence, seed=seed,
        variant=variant,
    )  # fmt: skip
    frames = []
    for algo in table.algos:
        point, lower, upper = prof[algo]
        frames.append(pd.DataFrame({"algo": algo, "tau": tau_arr, "estimate": np.asarray(point, float),
                                    "lower": np.asarray(lower, float), "upper": np.asarray(upper, float)}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------------------------------------ curves
def sample_efficiency(
    df: pd.DataFrame,
    normalize: str | None = "auto",
    reps: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """IQM over runs and tasks at each evaluation point, with stratified bootstrap intervals (rliable).

    Runs are aligned by evaluation index (the k-th evaluation of every run, ordered by step); the x value of
    point k is the median step of that point over the runs used. Runs are matched by seed across tasks as in
    ``score_table``, and every algorithm's curve keeps the evaluation indices all its runs have, i.e. stops
    at its shortest run (with a warning).
    Per algorithm, an array of shape (num_runs, num_tasks, num_points) is bootstrapped as rliable's
    ``get_interval_estimates`` does it, resampling runs independently per task and point (as rliable's own
    sample-efficiency curves do), from numpy's legacy generator seeded with ``bootstrap_seed(seed, algo)``:
    ``bootstrap.curve_interval`` replays exactly those replicates with the IQM of every point vectorised over
    a batch of them, so ``np.random.seed(bootstrap_seed(seed, algo))`` and rliable on the same array give
    the same curve and bands (up to floating-point summation order).

    Args:
        df: Tidy metric rows, columns ``run_id, algo, env, seed, step, value``.
        normalize: As in ``score_table`` (``"auto"``, ``None`` or a reference set name; a ``ScoreTable``'s
            ``resolved`` attribute can be passed to apply exactly its normalisation).
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo, step, estimate, lower, upper``, one row per algorithm and point.
    """
    from . import bootstrap

    _check_reps(reps, confidence)
    data = _clean(df)
    data["env"] = data["env"].astype(str)
    data["algo"] = data["algo"].astype(str)
    runs = data.groupby("run_id", sort=False)[["algo", "env", "seed"]].first().reset_index()
    _check_unique_cells(runs)
    tasks = sorted(runs["env"].unique())
    res = _resolve_references(tasks, normalize)
    data["norm"] = _normalise(data["value"], data["env"], res)
    seeds = _complete_seeds(runs, sorted(runs["algo"].unique()), tasks)
    cubes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for algo, algo_seeds in seeds.items():
        rows = data.loc[(data["algo"] == algo) & data["seed"].isin(algo_seeds)]
        n_runs = rows["run_id"].nunique()
        have = rows.groupby("index")["run_id"].nunique()
        common = have.index[have == n_runs]
        if len(common) < len(have):
            lengths = rows.groupby("run_id")["index"].max() + 1
            _warn(
                f"Algorithm {algo!r}: runs have {int(lengths.min())} to {int(lengths.max())} evaluation points "
                f"(or non-finite ones); its sample-efficiency curve keeps the {len(common)} evaluation "
                f"indices every run has."
            )
        if not len(common):
            continue
        rows = rows.loc[rows["index"].isin(common)]
        k = len(common)
        cube = (
            rows.set_index(["seed", "env", "index"])["norm"]
            .unstack("index")
            .reindex(pd.MultiIndex.from_product([algo_seeds, tasks], names=["seed", "env"]))
            .loc[:, common]
            .to_numpy(dtype=float)
            .reshape(len(algo_seeds), len(tasks), k)
        )
        cubes[algo] = (cube, rows.groupby("index")["step"].median().loc[common].to_numpy(dtype=float))
    if not cubes:
        raise StatsError(
            "No evaluation index is shared by all runs of any algorithm; no sample-efficiency curve."
        )

    def one(algo: str) -> pd.DataFrame:
        # rliable's get_interval_estimates({algo: cube}, IQM per point) after np.random.seed(bootstrap_seed),
        # replayed with a RandomState of that seed: the same replicates, one vectorised IQM per batch
        cube, steps = cubes[algo]
        est = bootstrap.curve_interval(
            cube, bootstrap.batch_iqm_per_point, reps=int(reps), confidence=confidence,
            seed=np.random.RandomState(bootstrap_seed(seed, algo)),
        )  # fmt: skip
        return pd.DataFrame({"algo": algo, "step": steps, "estimate": est.point, "lower": est.lower,
                             "upper": est.upper})  # fmt: skip

    # each algorithm has its own RandomState: independent, so on threads (an integer seed says so)
    return pd.concat(bootstrap.map_independent(one, cubes, int(seed)), ignore_index=True)


def learning_curves(
    df: pd.DataFrame, confidence: float = 0.95, reps: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Mean raw value over seeds at each evaluation point, per environment and algorithm.

    Runs are aligned by evaluation index (k-th evaluation, ordered by step); the step of point k is the
    median step over the runs that have it. The interval is a percentile bootstrap of the mean over the n
    runs that have point k (``reps`` resamples of the runs, seeded): unlike a t interval on 3 seeds it stays
    within the range of the observed values. Bounds equal the mean when n = 1. Values are raw, not normalised.

    Args:
        df: Tidy metric rows, columns ``run_id, algo, env, seed, step, value``.
        confidence: Coverage of the interval.
        reps: Bootstrap resamples per point.
        seed: Seed of the resampling (same seed, same bands).

    Returns:
        DataFrame with columns ``algo, env, step, mean, lower, upper, n``, sorted by env, algo, step.
    """
    if not 0 < confidence < 1:
        raise StatsError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")
    data = _clean(df)
    data["env"] = data["env"].astype(str)
    data["algo"] = data["algo"].astype(str)
    keys = ["env", "algo", "index"]
    # the points (env, algo, index) in sorted order, each point's runs in the table's order (a stable sort)
    data = data.sort_values(keys, kind="mergesort")
    cols = data[keys]
    starts = np.flatnonzero(cols.ne(cols.shift()).any(axis=1).to_numpy())
    counts = np.diff(np.append(starts, len(data)))
    values = data["value"].to_numpy(dtype=float)
    step_values = data["step"].to_numpy(dtype=float)
    mean, steps = np.empty(len(starts)), np.empty(len(starts))
    for sel, rows in _by_count(starts, counts):
        mean[sel] = values.take(rows).mean(axis=1)
        steps[sel] = np.median(step_values.take(rows), axis=1)
    lower, upper = _point_intervals(
        values, starts, counts, mean, confidence, reps, np.random.default_rng(seed)
    )
    first = data.iloc[starts]
    return pd.DataFrame({"algo": first["algo"].to_numpy(), "env": first["env"].to_numpy(), "step": steps,
                         "mean": mean, "lower": lower, "upper": upper, "n": counts.astype(np.int64)})  # fmt: skip


def _by_count(starts: np.ndarray, counts: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Points grouped by their number of rows n: (which points, their rows' positions, shape (points, n))."""
    for n in np.unique(counts):
        sel = np.flatnonzero(counts == n)
        yield sel, starts[sel, None] + np.arange(n)


# index draws of one batch of points (uint32, 4 MB; the take and the means hold 8 bytes a draw)
_POINT_DRAWS = 1 << 20


def _point_intervals(
    values: np.ndarray, starts: np.ndarray, counts: np.ndarray, mean: np.ndarray, confidence: float,
    reps: int, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A percentile bootstrap interval of each point's mean of ``values[starts[g]:starts[g] + counts[g]]``
    (``mean``, the bounds of single-run points), for all points at once.

    The numbers are those of one ``rng.integers(0, n, size=(reps, n))`` draw, ``values[idx].mean(axis=1)``
    and ``np.quantile`` per point with n > 1, in order: the draws of a batch of points come from one call
    (bounds repeated per point where n varies), which is the same stream, and as uint32 (the same 32-bit
    words as int64 draws below 2**32, in less time); means over the last axis of a (points, ..., n) array
    are the same sums as over each point's own array.
    """
    alpha = (1.0 - confidence) / 2.0
    lower, upper = mean.copy(), mean.copy()
    multi = np.flatnonzero(counts > 1)
    draws = reps * counts[multi]
    first_draw = np.cumsum(draws) - draws
    # a batch: the points whose first draw falls in the same _POINT_DRAWS-long stretch (at least one point)
    cuts = np.flatnonzero(np.diff(first_draw // _POINT_DRAWS)) + 1
    for batch in np.split(multi, cuts) if len(multi) else []:
        n_b = counts[batch]
        # a scalar bound where every point has the same n: the same draws, several times faster
        high = n_b[0] if (n_b == n_b[0]).all() else np.repeat(n_b, reps * n_b).astype(np.uint32)
        flat = rng.integers(0, high, size=int(reps * n_b.sum()), dtype=np.uint32)
        offsets = np.cumsum(reps * n_b) - reps * n_b
        for sel, pos in _by_count(offsets, reps * n_b):
            n = len(pos[0]) // reps
            means = values.take(starts[batch[sel], None, None] + flat.take(pos).reshape(len(sel), reps, n))
            q = np.quantile(means.mean(axis=2), [alpha, 1.0 - alpha], axis=1)
            lower[batch[sel]], upper[batch[sel]] = q[0], q[1]
    return lower, upper
