"""From one metric's rows to the figures and leaderboard of a suite (what ``rlbench plot`` writes)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "make_report", "suite_scoring", "suite_normalize", "CURVE_REPS"]

# rliable's own default for performance profiles and probability of improvement; the aggregates use --reps.
CURVE_REPS = 2000


@dataclass
class Report:
    paths: list[Path]
    leaderboard_md: str
    warnings: list[str] = field(default_factory=list)


def _suite_config(store: Any, suite: str) -> dict[str, Any]:
    with store.reader() as con:
        rows = con.execute("SELECT config FROM suites WHERE name = ?", [suite]).fetchall()
    return json.loads(rows[0][0]) if rows and rows[0][0] else {}


def suite_scoring(
    store: Any, suite: str, metric: str | None, rule: str | None, drop_first: int | None
) -> tuple[str, str, int]:
    """(metric, rule, drop_first): the flags given, else what the suite declared (stored with it), else
    ``eval/return``, ``final``, 0."""
    score = _suite_config(store, suite).get("score") or {}
    return (
        metric or score.get("metric") or "eval/return",
        rule or score.get("rule") or "final",
        int(score.get("drop_first", 0)) if drop_first is None else drop_first,
    )


def suite_normalize(store: Any, suite: str, flag: str) -> str | dict[str, Any] | None:
    """What ``--normalize FLAG`` means for a suite: ``auto`` prefers the suite's own normalize block."""
    if flag == "none":
        return None
    if flag == "suite" or flag == "auto":
        config = _suite_config(store, suite)
        block = config.get("normalize")
        if block:
            return block
        refs = config.get("dataset_references")
        if refs and not config.get("envs"):  # offline suites: each dataset's random and expert returns, x 100
            return {"references": refs, "scale": 100, "source": "each dataset's random and expert returns"}
        if flag == "suite":
            from .errors import UsageError

            raise UsageError(
                f"suite {suite!r} has no normalize block; use --normalize auto, none or a table name"
            )
    return flag


def make_report(
    suite: str,
    df: Any,
    *,
    metric: str,
    rule: str,
    drop_first: int,
    normalize: str | None,
    reps: int,
    seed: int,
    out_dir: Path,
    fmt: str = "png",
) -> Report:
    """Score runs, compute rliable statistics, write every figure and the leaderboard (md + csv)."""
    from . import leaderboard, plots, stats

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.StatsWarning)
        try:  # the same rule as `rlbench leaderboard`: rank on the tasks every algorithm has
            data, _, left_out = leaderboard.common_tasks(df)
        except stats.StatsError as e:
            data, left_out = None, {}
            warnings.warn(f"{e}; writing learning curves and the per-task table only", stats.StatsWarning,
                          stacklevel=2)  # fmt: skip
        if data is None:
            board = leaderboard.build(suite, df, metric=metric, rule=rule, drop_first=drop_first,
                                      normalize=normalize, reps=reps, seed=seed, per_task=True)  # fmt: skip
            paths = [
                plots.write_learning_curves(suite, df, metric, out_dir, fmt=fmt, reps=CURVE_REPS, seed=seed)
            ]
            frame, md = board.frame, leaderboard.render(board, "md").rstrip("\n")
        else:
            if left_out:
                why = "; ".join(f"{t} (no runs of {', '.join(a)})" for t, a in left_out.items())
                warnings.warn(f"tasks left out of the aggregate figures, as not every algorithm has runs there: "
                              f"{why}; their learning curves are still drawn", stats.StatsWarning, stacklevel=2)  # fmt: skip
            table = stats.score_table(
                data, rule=rule, drop_first=drop_first, normalize=normalize, metric=metric
            )
            agg = stats.aggregates(table, reps=reps, seed=seed)
            poi_reps = min(reps, CURVE_REPS)
            poi = (
                stats.probability_of_improvement(table, reps=poi_reps, seed=seed)
                if len(table.algos) > 1
                else None
            )
            paths = plots.write_all(suite, data, table, out_dir, fmt=fmt, reps=poi_reps, seed=seed,
                                    aggregates_df=agg, poi_df=poi, aggregate_reps=reps, curves_df=df)  # fmt: skip
            frame = leaderboard.leaderboard(table, agg, poi)
            header = leaderboard.header_lines(suite, table, reps=reps, seed=seed, poi_reps=poi_reps)
            md = leaderboard.to_markdown(frame, header)
    (out_dir / "leaderboard.md").write_text(md + "\n")
    leaderboard.to_csv(frame, out_dir / "leaderboard.csv")
    paths += [out_dir / "leaderboard.md", out_dir / "leaderboard.csv"]
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, stats.StatsWarning)))
    return Report(paths=paths, leaderboard_md=md, warnings=notes)
