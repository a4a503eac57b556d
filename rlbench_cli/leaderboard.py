"""Ranked tables from the statistics in ``rlbench_cli.stats``: a DataFrame, markdown, CSV, JSON and LaTeX.

table = stats.score_table(df, rule="final")
agg = stats.aggregates(table, reps=50000, seed=0)
poi = stats.probability_of_improvement(table, reps=2000, seed=0)
board = leaderboard(table, agg, poi)
print(to_markdown(board, header_lines("quickstart", table, reps=50000, seed=0)))

Or all of it from a suite's metric rows, as ``rlbench leaderboard`` does (``per_task=True``: one row per
algorithm and task, ``per_task_table``)::

board = build("quickstart", df, metric="eval/return", rule="final", reps=50000, seed=0)
print(render(board, "latex"))
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlbench_cli import stats

__all__ = [
    "COLUMNS",
    "FORMATS",
    "Board",
    "leaderboard",
    "header_lines",
    "per_task_table",
    "common_tasks",
    "build",
    "render",
    "to_markdown",
    "to_csv",
    "to_json",
    "to_latex",
    "latex_escape",
    "decimals",
    "meta_json",
]

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
        norm = f"normalised by fixed {table.norm_description}"  # e.g. the x 100 of D4RL's convention
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


def decimals(values: Sequence[object] | pd.Series) -> int:
    """Decimal places for a column of numbers, from its largest finite magnitude: 3, 2 from 100, 1 from 1,000."""
    finite = [abs(float(v)) for v in values if isinstance(v, (float, np.floating)) and math.isfinite(v)]
    largest = max(finite, default=0.0)
    return 1 if largest >= 1000 else 2 if largest >= 100 else 3


def _fmt(value: object, places: int | None = None) -> str:
    """One cell: floats with ``places`` decimals (default: ``decimals`` of the value alone) and a thousands
    separator, never ``-0.000``; NaN as ``n/a``; text with ``|`` escaped."""
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "n/a"
        places = decimals([value]) if places is None else places
        text = f"{value:,.{places}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text  # -0.000 -> 0.000
    return str(value).replace("|", "\\|").replace("\n", " ")


def _cells(
    df: pd.DataFrame, fmt: Callable[[object, int | None], str]
) -> tuple[list[str], list[list[str]], list[bool]]:
    """Column titles, formatted cells (one list per column) and which columns are numeric.

    Every number of a column has the same decimal places (``decimals`` of the column). The IQM and its
    interval share one column, ``iqm [lower, upper]``, when all three are present.
    """
    columns = list(df.columns)
    combined = {"iqm", "iqm_lower", "iqm_upper"} <= set(columns)
    titles: list[str] = []
    cells: list[list[str]] = []
    numeric: list[bool] = []
    for col in columns:
        if combined and col in ("iqm_lower", "iqm_upper"):
            continue
        if combined and col == "iqm":
            titles.append("iqm [lower, upper]")
            d = decimals(pd.concat([df["iqm"], df["iqm_lower"], df["iqm_upper"]]).tolist())
            cells.append(
                [
                    f"{fmt(v, d)} [{fmt(lo, d)}, {fmt(hi, d)}]"
                    for v, lo, hi in zip(df["iqm"], df["iqm_lower"], df["iqm_upper"], strict=True)
                ]
            )
            numeric.append(True)
            continue
        titles.append(str(col))
        d = decimals(df[col].tolist())
        cells.append([fmt(v, d) for v in df[col]])
        numeric.append(pd.api.types.is_numeric_dtype(df[col]))
    return titles, cells, numeric


def to_markdown(df: pd.DataFrame, header_lines: Sequence[str] = ()) -> str:
    """Renders a leaderboard as a plain markdown table (no ``tabulate`` needed).

    The IQM and its interval share one column, ``iqm [lower, upper]``, when all three are present.
    Every number of a column gets the same decimals, from the column's largest magnitude (3; 2 from 100; 1
    from 1,000), a zero never shows a sign (``0.000``, not ``-0.000``), NaN shows as ``n/a``.

    Args:
        df: ``leaderboard`` output (any DataFrame works).
        header_lines: Lines printed above the table as a bullet list (see ``header_lines``).

    Returns:
        Markdown text ending with a newline.
    """
    titles, cells, numeric = _cells(df, _fmt)
    lines = []
    for line in header_lines:
        lines.append(line if line.startswith(("#", "-", "*")) else f"- {line}")
    if lines:
        lines.append("")
    lines.append("| " + " | ".join(titles) + " |")
    lines.append("|" + "|".join("---:" if num else ":---" for num in numeric) + "|")
    for i in range(len(df)):
        lines.append("| " + " | ".join(column[i] for column in cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(df: pd.DataFrame, path: str | Path | None = None, header_lines: Sequence[str] = ()) -> str:
    """Leaderboard as CSV at full precision (empty field for NaN).

    Args:
        df: ``leaderboard`` output.
        path: When given, the CSV is also written there (folders created).
        header_lines: Written first as comment lines, ``# line`` (read back with
            ``pd.read_csv(..., comment="#")``). Empty by default: a plain CSV, which ``pd.read_csv(path)`` and
            spreadsheets read as it is; ``render`` and ``rlbench leaderboard`` keep what a table shows in a
            ``.meta.json`` sidecar (``meta_json``) instead.

    Returns:
        The CSV text.
    """
    text = "".join(f"# {line}\n" for line in header_lines) + df.to_csv(index=False, lineterminator="\n")
    if path is not None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return text


# ------------------------------------------------------------------------------------------ per-task table
PER_TASK_STATS = ("mean", "std", "median", "min", "max")


def per_task_table(per_run: pd.DataFrame, normalized: bool | None = None) -> pd.DataFrame:
    """One row per algorithm and task: how its runs scored.

    Args:
        per_run: One row per run with columns ``algo, env, score`` (``stats.run_scores`` output), and
            optionally ``norm_score`` (``stats.score_table(...).per_run``).
        normalized: Add ``norm_*`` columns from ``norm_score``. None: when ``norm_score`` is there and differs
            from ``score`` (``score_table`` copies ``score`` into it for raw scores).

    Returns:
        DataFrame with columns ``algo, task, runs, mean, std, median, min, max`` (then ``norm_mean,
        norm_std, norm_median, norm_min, norm_max`` when normalised), sorted by algo and task. ``std`` is the
        POPULATION standard deviation (ddof=0, numpy's default), 0 for a single run. NaN scores are not
        counted.
    """
    missing = [c for c in ("algo", "env", "score") if c not in per_run.columns]
    if missing:
        raise stats.StatsError(
            f"per-run scores lack column(s) {', '.join(missing)}; pass stats.run_scores output"
        )
    has_norm = "norm_score" in per_run.columns
    if normalized is None:
        normalized = has_norm and not np.array_equal(
            per_run["norm_score"].to_numpy(float), per_run["score"].to_numpy(float), equal_nan=True
        )
    if normalized and not has_norm:
        raise stats.StatsError("normalized=True needs a norm_score column (stats.score_table(...).per_run)")
    data = per_run.assign(algo=per_run["algo"].astype(str), task=per_run["env"].astype(str))
    sources = [("", "score")] + ([("norm_", "norm_score")] if normalized else [])
    grouped = data.groupby(["algo", "task"], sort=True)
    out = grouped["score"].count().rename("runs").to_frame()
    for prefix, column in sources:
        values = grouped[column]
        out[f"{prefix}mean"] = values.mean()
        out[f"{prefix}std"] = values.std(ddof=0)
        out[f"{prefix}median"] = values.median()
        out[f"{prefix}min"] = values.min()
        out[f"{prefix}max"] = values.max()
    out = out.reset_index()
    out["runs"] = out["runs"].astype(int)
    return out


# ------------------------------------------------------------------------------ leaderboard of a suite
POI_REPS = 2000  # rliable's default for the probability of improvement; rlbench plot uses the same


@dataclass
class Board:
    """A table ready to print, with the lines that say what it shows.

    Attributes:
        kind: ``"aggregate"`` (``leaderboard`` output, ranked by IQM) or ``"per_task"`` (``per_task_table``).
        frame: The table.
        header: Lines saying what the table shows (suite, metric, score rule, normalisation, runs, ...).
        meta: The same facts as values, for JSON.
        warnings: What was dropped or changed on the way (``stats.StatsWarning`` messages), once each.
    """

    kind: str
    frame: pd.DataFrame
    header: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def common_tasks(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str], dict[str, list[str]]]:
    """Keeps the rows of the tasks every algorithm has runs on.

    rliable's aggregates compare algorithms over the same tasks (one ``num_runs x num_tasks`` matrix each),
    so a task that some algorithm never ran is left out rather than the algorithm.

    Returns:
        ``(rows of the common tasks, those tasks sorted, {left-out task: algorithms without runs on it})``.
    """
    data = df.assign(algo=df["algo"].astype(str), env=df["env"].astype(str))
    have = data.groupby("algo")["env"].agg(lambda s: set(s.unique()))
    tasks = sorted(set(data["env"].unique()))
    common = sorted(set.intersection(*have.tolist())) if len(have) else []
    left_out = {t: sorted(a for a, ts in have.items() if t not in ts) for t in tasks if t not in common}
    if not common:
        raise stats.StatsError(
            f"no task has runs of every algorithm ({_few(have.index)}), so they cannot be ranked on common "
            "tasks; compare them task by task with --per-task"
        )
    return data.loc[data["env"].isin(common)], common, left_out


def _few(items: Sequence[object] | pd.Index, limit: int = 5) -> str:
    items = [str(i) for i in items]
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def build(
    suite: str,
    df: pd.DataFrame,
    *,
    metric: str,
    rule: str = "final",
    drop_first: int = 0,
    normalize: Any = "auto",
    reps: int = 50_000,
    seed: int = 0,
    per_task: bool = False,
) -> Board:
    """The leaderboard of a suite from one metric's rows (what ``rlbench leaderboard`` prints).

    Args:
        suite: Suite name, for the header.
        df: Tidy rows of one metric, columns ``run_id, algo, env, seed, step, value``.
        metric: The metric's name, for the header.
        rule: Score rule (``final``, ``best``, ``mean_last:N``, ``auc``).
        drop_first: Evaluations dropped from the start of each run before the rule.
        normalize: ``"auto"``, None / ``"none"`` (raw), a reference set name or a suite's normalize block, as
            in ``stats.score_table``.
        reps: Bootstrap replications of the aggregates (aggregate mode).
        seed: Bootstrap seed (aggregate mode).
        per_task: One row per algorithm and task (``per_task_table``) instead of the ranked aggregates.

    Returns:
        A ``Board``. Aggregate mode keeps the tasks every algorithm has (``common_tasks``), then does what
        ``rlbench plot`` does: ``stats.score_table``, ``stats.aggregates`` (``reps``), the probability of
        improvement's point estimates (``poi_estimates``; the header still names ``min(reps, POI_REPS)``, as
        ``rlbench plot`` bootstraps it) and ``leaderboard``.
    """
    if per_task:
        return _per_task_board(suite, df, metric, rule, drop_first, normalize)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        board = _aggregate_board(suite, df, metric, rule, drop_first, normalize, reps, seed)
    board.warnings = _messages(caught)
    return board


def _messages(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    notes = [str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)]
    return list(dict.fromkeys(notes))


def _meta(suite: str, table: stats.ScoreTable, header: list[str], **extra: Any) -> dict[str, Any]:
    return {"suite": suite, "metric": table.metric, "score_rule": table.rule, "drop_first": table.drop_first,
            "normalized": table.normalized, **extra, "header": header}  # fmt: skip


def _aggregate_board(
    suite: str, df: pd.DataFrame, metric: str, rule: str, drop_first: int, normalize: Any, reps: int,
    seed: int,
) -> Board:  # fmt: skip
    data, _, left_out = common_tasks(df)
    table = stats.score_table(data, rule=rule, drop_first=drop_first, normalize=normalize, metric=metric)
    agg = stats.aggregates(table, reps=reps, seed=seed)
    poi = poi_estimates(table) if len(table.algos) > 1 else None
    board = aggregate_board(suite, table, agg, poi, left_out, reps=reps, seed=seed)
    if left_out:
        warnings.warn(f"{_left_out_note(left_out)}; compare them task by task with --per-task",
                      stats.StatsWarning, stacklevel=2)  # fmt: skip
    return board


def poi_estimates(table: stats.ScoreTable) -> pd.DataFrame:
    """The point estimates of ``stats.probability_of_improvement`` (its ``estimate`` column, bit for bit) for
    every ordered pair of ``table.algos``, without its bootstrap; ``lower`` and ``upper`` are NaN. The board
    shows only the estimates (``p_improve_over_next``), so ``build`` computes these instead of 2,000 bootstrap
    replicates of every pair (10 algorithms, 50 tasks, 20 seeds: about 1 s of CPU) whose intervals it drops.
    """
    from . import bootstrap

    rows = [(x, y, float(bootstrap.probability_of_improvement(table.scores[x], table.scores[y])), np.nan, np.nan)
            for x in table.algos for y in table.algos if x != y]  # fmt: skip
    return pd.DataFrame(rows, columns=["algo_x", "algo_y", "estimate", "lower", "upper"])


def _left_out_note(left_out: dict[str, list[str]]) -> str:
    why = "; ".join(f"{t} (no runs of {_few(algos)})" for t, algos in left_out.items())
    return f"Tasks left out, as not every algorithm has runs there: {why}"


def aggregate_board(
    suite: str,
    table: stats.ScoreTable,
    agg: pd.DataFrame,
    poi: pd.DataFrame | None,
    left_out: dict[str, list[str]],
    *,
    reps: int,
    seed: int,
) -> Board:
    """The ranked board from statistics already computed on the common tasks' ``table`` (``stats.aggregates``
    with ``reps`` and ``seed``, the probability of improvement with ``min(reps, POI_REPS)``), as ``build``
    makes it; ``left_out``: ``common_tasks``'s tasks some algorithm has no runs on, said in the header."""
    poi_reps = min(reps, POI_REPS)
    frame = leaderboard(table, agg, poi)
    header = header_lines(suite, table, reps=reps, seed=seed, poi_reps=poi_reps)
    if left_out:
        at = next((i + 1 for i, line in enumerate(header) if line.startswith("Runs:")), len(header))
        header.insert(at, _left_out_note(left_out))
    meta = _meta(suite, table, header, kind="aggregate", tasks=list(table.tasks), left_out_tasks=left_out,
                 reps=reps, poi_reps=poi_reps, seed=seed, confidence=0.95)  # fmt: skip
    return Board("aggregate", frame, header, meta)


def _per_task_board(
    suite: str, df: pd.DataFrame, metric: str, rule: str, drop_first: int, normalize: Any
) -> Board:
    # the per-run scores, with what they drop (non-finite values, runs emptied by drop_first, ...) ...
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        stats.per_run_scores(df, rule, drop_first)
    notes = _messages(caught)
    # ... and the same runs normalised; score_table also matches seeds across tasks for rliable's matrices,
    # which a per-task table does not need, so what it says about that is not passed on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        table = stats.score_table(
            df, rule=rule, drop_first=drop_first, normalize=normalize, metric=metric, matrices=False
        )
    per_run = table.per_run
    frame = per_task_table(per_run, normalized=table.normalized is not None)
    keep = ("Suite:", "Metric:", "Normalisation:")
    header = [
        line.replace(" (optimality gap not defined)", "")
        for line in header_lines(suite, table, reps=1, seed=0)
        if line.startswith(keep)
    ]
    n_algos, n_tasks = per_run["algo"].nunique(), per_run["env"].nunique()
    header += [
        f"Runs: {len(per_run)} ({n_algos} algorithm{'s' * (n_algos != 1)}, {n_tasks} task{'s' * (n_tasks != 1)}); "
        "one row per algorithm and task: mean, std, median, min and max of its runs' scores",
        "std: population standard deviation over runs (ddof=0, numpy's default), not the sample std (ddof=1)",
    ]
    if table.normalized:
        header.append("norm_*: the same statistics of the normalised scores")
    meta = _meta(suite, table, header, kind="per_task", std="population (ddof=0)")
    return Board("per_task", frame, header, meta, notes)


# ------------------------------------------------------------------------------------------ JSON and LaTeX
def _json_value(value: object) -> object:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def to_json(df: pd.DataFrame, meta: dict[str, Any] | None = None) -> str:
    """``{"meta": {...}, "rows": [{column: value}, ...]}`` at full precision; NaN becomes null.

    Args:
        df: A leaderboard or per-task table.
        meta: What the table shows (``Board.meta``: suite, metric, score rule, header lines, ...).
    """
    rows = [{str(k): _json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
    return json.dumps({"meta": _json_value(meta or {}), "rows": rows}, indent=1)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}  # fmt: skip


def latex_escape(text: str) -> str:
    """Escapes LaTeX's special characters (``_``, ``%``, ``&``, ``#``, ``$``, braces, ``~``, ``^``, ``\\``)."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def _latex_cell(value: object, places: int | None = None) -> str:
    text = _fmt(value, places)
    if text == "n/a":
        return "--"
    if isinstance(value, (float, np.floating, int, np.integer)) and text.startswith("-"):
        return "$-$" + text[1:]
    return latex_escape(text)


def to_latex(df: pd.DataFrame, header_lines: Sequence[str] = ()) -> str:
    """A booktabs table (``\\usepackage{booktabs}``) with the header lines as its caption.

    Numbers are rounded as in ``to_markdown`` (one number of decimals per column); NaN shows as ``--``; text is escaped (``latex_escape``).
    """
    titles, cells, numeric = _cells(df, _latex_cell)
    titles = [latex_escape(t).replace(r"[lower, upper]", r"[95\% CI]") for t in titles]
    lines = [
        "% rlbench leaderboard; needs \\usepackage{booktabs}",
        r"\begin{table}[ht]",
        r"\centering",
    ]
    if header_lines:
        lines.append(r"\caption{" + " ".join(latex_escape(h.rstrip(".")) + "." for h in header_lines) + "}")
    lines += [
        r"\begin{tabular}{" + "".join("r" if num else "l" for num in numeric) + "}",
        r"\toprule",
        " & ".join(titles) + r" \\",
        r"\midrule",
    ]
    for i in range(len(df)):
        lines.append(" & ".join(column[i] for column in cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


FORMATS = ("md", "csv", "json", "latex")


def meta_json(board: Board) -> str:
    """What a board shows (``Board.meta``: suite, metric, score rule, normalisation, header lines, ...) as
    JSON: the sidecar of a plain CSV leaderboard."""
    return json.dumps(_json_value(board.meta), indent=1) + "\n"


def render(board: Board, fmt: str = "md") -> str:
    """A ``Board`` as markdown (header as a bullet list), plain CSV (header row and rows only; the header
    lines go to a sidecar, see ``meta_json``), JSON (a ``meta`` object) or LaTeX (a caption)."""
    if fmt == "md":
        return to_markdown(board.frame, board.header)
    if fmt == "csv":
        return to_csv(board.frame)
    if fmt == "json":
        return to_json(board.frame, board.meta) + "\n"
    if fmt == "latex":
        return to_latex(board.frame, board.header)
    raise stats.StatsError(f"unknown table format {fmt!r}; use one of: {', '.join(FORMATS)}")
