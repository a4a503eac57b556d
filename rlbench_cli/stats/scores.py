"""Score rules applied to metric rows: one number per run (``run_scores``), or the same frame from per-run
scores computed in SQL (``finish_run_scores``); the rows of one training phase (``phase_rows``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rlbench_cli.scoring import (
    SCORED_COLUMNS,
    StatsError,
    _short,
    _warn,
    finish_order,
    parse_rule,
    rule_phase,
)

COLUMNS = ("run_id", "algo", "env", "seed", "step", "value")
RULES = ("final", "best", "mean_last:N", "auc")


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
