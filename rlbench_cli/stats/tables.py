"""Score tables in rliable's contract: ``{algo: ndarray(num_runs x num_tasks)}``, runs matched by seed across
tasks (``ScoreTable``, ``score_table``), and the words that say what a table holds (``score_label``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rlbench_cli.references import Resolved
from rlbench_cli.scoring import StatsError, _short, _warn
from rlbench_cli.stats.normalise import _normalise, _resolve_references
from rlbench_cli.stats.scores import per_run_scores

METRICS = ("median", "iqm", "mean", "optimality_gap")
METRIC_LABELS = {"median": "Median", "iqm": "IQM", "mean": "Mean", "optimality_gap": "Optimality gap"}
OPTIMALITY_GAP_GAMMA = 1.0


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
