"""Ranked tables from the statistics in ``rlbench_cli.stats``: a DataFrame, markdown and CSV.

table = stats.score_table(df, rule="final")
agg = stats.aggregates(table, reps=50000, seed=0)
poi = stats.probability_of_improvement(table, reps=2000, seed=0)
board = leaderboard(table, agg, poi)
print(to_markdown(board, header_lines("quickstart", table, reps=50000, seed=0)))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rlbench_cli import stats

__all__ = ["COLUMNS", "leaderboard", "header_lines", "to_markdown", "to_csv"]

COLUMNS = (
    "rank",
    "algo",
    "iqm",
    "iqm_lower",
    "iqm_upper",
    "median",
    "mean",
    "optimality_gap",
    "p_improve_over_next",
    "runs",
    "tasks",
)


def leaderboard(
    table: stats.ScoreTable, aggregates_df: pd.DataFrame, poi_df: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Ranks algorithms by IQM.

    Args:
        table: The score table the statistics came from (for run and task counts).
        aggregates_df: ``stats.aggregates`` output, columns ``algo, metric, estimate, lower, upper``.
        poi_df: ``stats.probability_of_improvement`` output, columns ``algo_x, algo_y, estimate, lower,
            upper``; None (or a missing pair) leaves ``p_improve_over_next`` NaN.

    Returns:
        DataFrame with columns ``COLUMNS``, one row per algorithm, best IQM first (ties broken by median,
        then name). ``p_improve_over_next`` is P(a run of this algorithm beats a run of the next-ranked one),
        averaged over tasks, NaN for the last row. ``runs`` counts the runs in the table (num_runs x
        num_tasks), ``tasks`` the tasks. ``optimality_gap`` is NaN on raw (unnormalised) scores.
    """
    wide = aggregates_df.pivot(index="algo", columns="metric", values="estimate")
    iqm = aggregates_df.loc[aggregates_df["metric"] == "iqm"].set_index("algo")
    algos = [a for a in table.algos if a in wide.index]
    if not algos:
        raise stats.StatsError(
            "No aggregates for the algorithms of this table; compute stats.aggregates first."
        )
    rows = []
    for algo in algos:
        rows.append(
            {
                "algo": algo,
                "iqm": float(iqm.loc[algo, "estimate"]),
                "iqm_lower": float(iqm.loc[algo, "lower"]),
                "iqm_upper": float(iqm.loc[algo, "upper"]),
                "median": float(wide.loc[algo].get("median", np.nan)),
                "mean": float(wide.loc[algo].get("mean", np.nan)),
                "optimality_gap": float(wide.loc[algo].get("optimality_gap", np.nan)),
                "runs": int(table.scores[algo].size),
                "tasks": int(table.scores[algo].shape[1]),
            }
        )
    board = pd.DataFrame(rows)
    board = board.sort_values(
        ["iqm", "median", "algo"], ascending=[False, False, True], kind="mergesort", na_position="last"
    )
    board = board.reset_index(drop=True)
    board.insert(0, "rank", np.arange(1, len(board) + 1))
    poi = {}
    if poi_df is not None and len(poi_df):
        poi = {(r.algo_x, r.algo_y): float(r.estimate) for r in poi_df.itertuples(index=False)}
    ranked = board["algo"].tolist()
    board["p_improve_over_next"] = [
        poi.get((a, b), np.nan) for a, b in zip(ranked, ranked[1:] + [None], strict=True)
    ]
    return board.loc[:, list(COLUMNS)]


def header_lines(
    suite: str,
    table: stats.ScoreTable,
    reps: int,
    seed: int,
    confidence: float = 0.95,
    poi_reps: int | None = None,
) -> list[str]:
    """The lines that say what a leaderboard shows: suite, metric, rule, normalisation, runs, bootstrap.

    Args:
        suite: Suite name.
        table: The score table.
        reps: Bootstrap replications of the aggregates.
        seed: Bootstrap seed.
        confidence: Interval coverage.
        poi_reps: Replications of the probability of improvement, when different from ``reps``.
    """
    rule = table.rule + (f", first {table.drop_first} evaluations dropped" if table.drop_first else "")
    if table.normalized:
        norm = (
            f"normalised by the fixed {table.normalized} reference scores: "
            "(score - random) / (reference - random), 0 = random policy, 1 = reference"
        )
    else:
        norm = "raw scores, not normalised (optimality gap not defined)"
    used = int(table.per_run["in_table"].sum()) if "in_table" in table.per_run else len(table.per_run)
    left_out = len(table.per_run) - used
    n_algos, n_tasks = len(table.algos), len(table.tasks)
    runs = f"Runs: {used} in the table ({n_algos} algorithm{'s' * (n_algos != 1)} x "
    runs += f"{n_tasks} task{'s' * (n_tasks != 1)}: "
    runs += ", ".join(table.tasks) + ")"
    if left_out:
        runs += f"; {left_out} left out (seed missing on some task)"
    boot = f"Intervals: {confidence:.0%} stratified bootstrap (rliable), {reps:,} reps, seed {seed}"
    if poi_reps is not None and poi_reps != reps:
        boot += f"; probability of improvement {poi_reps:,} reps"
    return [
        f"Suite: {suite}",
        f"Metric: {table.metric}; score rule: {rule}",
        f"Normalisation: {norm}",
        runs,
        boot,
        "Ranked by IQM (interquartile mean over all runs and tasks); p_improve_over_next = probability "
        "that a run of this algorithm beats a run of the next-ranked one, averaged over tasks",
    ]


def _fmt(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "n/a"
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.1f}"
        if magnitude >= 100:
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pd.DataFrame, header_lines: Sequence[str] = ()) -> str:
    """Renders a leaderboard as a plain markdown table (no ``tabulate`` needed).

    The IQM and its interval share one column, ``iqm [lower, upper]``, when all three are present.
    Numbers get 3 decimals (2 from 100, 1 from 1,000), NaN shows as ``n/a``.

    Args:
        df: ``leaderboard`` output (any DataFrame works).
        header_lines: Lines printed above the table as a bullet list (see ``header_lines``).

    Returns:
        Markdown text ending with a newline.
    """
    frame = df.copy()
    columns = list(frame.columns)
    cells: dict[str, list[str]] = {}
    combined = {"iqm", "iqm_lower", "iqm_upper"} <= set(columns)
    titles: list[str] = []
    numeric: list[bool] = []
    for col in columns:
        if combined and col in ("iqm_lower", "iqm_upper"):
            continue
        if combined and col == "iqm":
            titles.append("iqm [lower, upper]")
            cells[titles[-1]] = [
                f"{_fmt(v)} [{_fmt(lo)}, {_fmt(hi)}]"
                for v, lo, hi in zip(frame["iqm"], frame["iqm_lower"], frame["iqm_upper"], strict=True)
            ]
            numeric.append(True)
            continue
        titles.append(str(col))
        cells[titles[-1]] = [_fmt(v) for v in frame[col]]
        numeric.append(pd.api.types.is_numeric_dtype(frame[col]))
    lines = []
    for line in header_lines:
        lines.append(line if line.startswith(("#", "-", "*")) else f"- {line}")
    if lines:
        lines.append("")
    lines.append("| " + " | ".join(titles) + " |")
    lines.append("|" + "|".join("---:" if num else ":---" for num in numeric) + "|")
    for i in range(len(frame)):
        lines.append("| " + " | ".join(cells[t][i] for t in titles) + " |")
    return "\n".join(lines) + "\n"


def to_csv(df: pd.DataFrame, path: str | Path | None = None) -> str:
    """Leaderboard as CSV at full precision (empty field for NaN).

    Args:
        df: ``leaderboard`` output.
        path: When given, the CSV is also written there (folders created).

    Returns:
        The CSV text.
    """
    text = df.to_csv(index=False, lineterminator="\n")
    if path is not None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return text
