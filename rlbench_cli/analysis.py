"""A suite's scores and metric rows, read from the results database: what ``rlbench plot``, ``leaderboard``,
``report``, ``compare`` and ``fetch --scores`` compute from, as plain functions for Python users.

Every function takes a ``store.Store`` (or the store ``shared_reader`` yields, to do several reads on one
connection) and returns pandas or pyarrow data:

- metric rows (``metric_rows``, ``load_metric``): a DataFrame ``run_id, algo, env, seed, step, value``, one
  row per logged value of one metric of each finished run, and a float ``boundary`` column (the run's last
  offline step; NaN for runs without one) when some run of the suite was fine-tuned online;
- per-run scores computed in the database (``load_scores``): a DataFrame with ``stats.SCORED_COLUMNS`` and
  ``status``, one row per finished run, in place of the rows wherever ``stats`` and ``leaderboard`` take them;
- a ``stats.ScoreTable`` (``score_table``): per algorithm an array of shape (runs, tasks), rliable's contract.

Example::

    from rlbench_cli import analysis
    from rlbench_cli.store import Store

    table = analysis.score_table(Store("results/rlbench.duckdb"), "quickstart")
    table.scores["ppo"]  # ndarray (runs, tasks), columns table.tasks
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from .errors import UnknownName, UsageError
from .store.browse import CONFIG_KEY, PLAIN_COLUMNS

__all__ = [
    "KeyScores",
    "ROW_COLUMNS",
    "SCORE_COLUMNS",
    "SuiteScores",
    "key_scores",
    "setting_keys",
    "figure_keys",
    "SIZE_METRICS",
    "suite_setting_keys",
    "load_metric",
    "load_scores",
    "load_suite",
    "metric_rows",
    "score_runs",
    "score_table",
    "shared_reader",
    "step_kinds",
    "suite_normalize",
    "suite_scoring",
]

ROW_COLUMNS = ["run_id", "algo", "env", "seed", "step", "value"]
# a text world model's rates on [0, 1] that --normalize auto leaves raw, as it does success (eval/success...):
# fidelity (EM, EM on episode ends, Real, WM, W2R) and consistency (CR = W2R / Real)
RATE_METRICS = ("eval/em", "eval/em_end", "eval/real", "eval/wm", "eval/w2r", "eval/cr")
# a model's size that runs log once (text_world_model: ``policy.size_metrics``): the report draws the score
# against it and the UI offers it, beside the config keys that vary (``figure_keys``)
SIZE_METRICS = ("model/parameters_non_embedding",)


class _SharedReader:
    """A store whose ``reader()`` is one connection already open; everything else is the store's."""

    def __init__(self, store: Any, con: Any):
        self._store, self._con = store, con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def reader(self) -> Any:
        return nullcontext(self._con)


@contextmanager
def shared_reader(store: Any) -> Iterator[Any]:
    """The store with ONE read-only connection for several short reads (suite config, scores, task kinds):
    the file is opened once instead of once a read. Leave it before a long computation, so a running suite's
    coordinator can write meanwhile."""
    with store.reader() as con:
        yield _SharedReader(store, con)


def _suite_config(store: Any, suite: str) -> dict[str, Any]:
    with store.reader() as con:
        info = store.suite_info(con, suite)
    return info["config"] if info else {}


def suite_scoring(
    store: Any, suite: str, metric: str | None, rule: str | None, drop_first: int | None
) -> tuple[str, str, int]:
    """(metric, rule, drop_first): the values given, else what the suite declared (stored with it), else
    ``eval/return``, ``final``, 0. The suite's ``phase`` rides on the rule (``final@online``) unless the
    rule names a phase itself (``final@all`` scores whole runs)."""
    score = _suite_config(store, suite).get("score") or {}
    rule = rule or score.get("rule") or "final"
    if "@" not in rule and score.get("phase"):
        rule = f"{rule}@{score['phase']}"
    return (
        metric or score.get("metric") or "eval/return",
        rule.removesuffix("@all"),
        int(score.get("drop_first", 0)) if drop_first is None else drop_first,
    )


def suite_normalize(
    store: Any, suite: str, flag: str, metric: str | None = None
) -> str | dict[str, Any] | None:
    """What ``--normalize FLAG`` means for a suite: ``auto`` prefers the suite's own normalize block. A
    success rate (``eval/success``, ``eval/success/<level>``) or a text world model's rate (``RATE_METRICS``, and
    ``eval/world_model/*`` of an agent's imagination) is left raw under ``auto``: it is on [0, 1] already, and return references mean nothing to it."""
    if flag == "none" or (
        flag == "auto"
        and metric is not None
        and (metric.startswith(("eval/success", "eval/world_model/")) or metric in RATE_METRICS)
    ):
        return None  # a success rate is already on [0, 1]
    if flag == "suite" or flag == "auto":
        config = _suite_config(store, suite)
        block = config.get("normalize")
        if block:
            return block
        refs = config.get("dataset_references")
        if refs and not config.get("envs"):  # offline suites: each dataset's random and expert returns, x 100
            return {"references": refs, "scale": 100, "source": "each dataset's random and expert returns"}
        if flag == "suite":
            raise UsageError(
                f"suite {suite!r} has no normalize block; use --normalize auto, none or a table name"
            )
    return flag


def _rows_frame(table: Any, boundaries: dict[str, int]) -> Any:
    df = table.to_pandas()[ROW_COLUMNS]
    if boundaries:  # offline-to-online runs: their phase boundary, for score phases and the curves' marker
        df["boundary"] = df["run_id"].map(boundaries).astype(float)
    return df


def metric_rows(store: Any, suite: str, metric: str) -> Any:
    """Finished runs' rows of one metric: a DataFrame ``run_id, algo, env, seed, step, value`` (and
    ``boundary`` when some run has a phase boundary), ordered by algo, env, seed, step; empty when there are
    none. The suite is not checked (see ``load_metric``)."""
    with store.reader() as con:
        table = store.query_metrics(con, suite=suite, metrics=[metric], statuses=["finished"])
        boundaries = store.phase_boundaries(con, suite)
    return _rows_frame(table, boundaries)


def _nothing_to_score(suite: str, metric: str, finished: int, names: list[str]) -> Exception:
    if not finished:
        return UsageError(f"suite {suite!r} has no finished runs yet; see rlbench status {suite}")
    return UnknownName(f"suite {suite!r} has no finished run with metric {metric!r} "
                       f"(metrics there: {', '.join(names) or 'none'}); pass another --metric")  # fmt: skip


def _all_nonfinite(suite: str, metric: str) -> UsageError:
    return UsageError(f"suite {suite!r}: every {metric!r} value of its finished runs is NaN or inf, so there is "
                      f"nothing to score; see them with rlbench fetch --suite {suite} --metric {metric}")  # fmt: skip


def load_metric(store: Any, suite: str, metric: str) -> tuple[Any, int]:
    """``metric_rows`` of a suite that has them, and the number of its runs not finished (left out).

    Raises:
        UnknownName: no such suite, or no finished run logged ``metric`` (the message names the metrics
            there).
        UsageError: no finished run yet, or every value is NaN or inf.
    """
    with store.reader() as con:
        store.require_suite(con, suite)
        table = store.query_metrics(con, suite=suite, metrics=[metric], statuses=["finished"])
        boundaries = store.phase_boundaries(con, suite)
        unfinished, finished = store.run_counts(con, suite)
        names = store.metric_names(con, suite)
    df = _rows_frame(table, boundaries)
    if df.empty:
        raise _nothing_to_score(suite, metric, finished, names)
    if not df["value"].astype(float).map(math.isfinite).any():
        raise _all_nonfinite(suite, metric)
    return df, unfinished


def load_scores(
    store: Any, suite: str, metric: str, rule: str, drop_first: int, step_max: int | None = None
) -> tuple[Any, int]:
    """Finished runs' scores of one metric by a score rule, computed in the database (``Store.run_scores``),
    and the number of runs not finished. ``step_max``: score each run as if it ended at that step (its rows
    after it left out; ``fetch --scores``' ``--step-max``).

    Returns:
        A DataFrame with ``stats.SCORED_COLUMNS`` and ``status``, one row per finished run with a row of the
        metric, ordered by run_id; ``stats.score_table`` and ``leaderboard.build`` take it in place of the
        rows ``load_metric`` returns (same tables, same warnings). And the count of unfinished runs.

    Raises:
        What ``load_metric`` raises; UsageError when no run has a row at or before ``step_max``.
    """
    from . import scoring

    name, n = scoring.parse_rule(rule)
    with store.reader() as con:
        store.require_suite(con, suite)
        table = store.run_scores(con, suite=suite, metric=metric, rule=name, n=n, drop_first=drop_first,
                                 step_max=step_max, phase=scoring.rule_phase(rule)[1])  # fmt: skip
        unfinished, finished = store.run_counts(con, suite)
        names = store.metric_names(con, suite) if table.num_rows == 0 else []
    df = table.to_pandas()
    if df.empty and step_max is not None:
        raise UsageError(f"--step-max {step_max}: no finished run of suite {suite!r} has {metric!r} at or before "
                         f"that step; see rlbench fetch --suite {suite} --metric {metric}")  # fmt: skip
    if df.empty:
        raise _nothing_to_score(suite, metric, finished, names)
    if not (df["rows"] > df["nonfinite"]).any():
        raise _all_nonfinite(suite, metric)
    return df, unfinished


def step_kinds(store: Any, suite: str) -> dict[str, str]:
    """``{task: "online" | "offline"}`` of a suite's finished runs: offline where a run trained on a dataset,
    online where rlbench recorded none; tasks of runs imported without that (e.g. d3rlpy logs) are left out."""
    with store.reader() as con:
        return store.task_kinds(con, suite)


@dataclass
class SuiteScores:
    """What a suite's statistics start from (``load_suite``).

    Attributes:
        suite, metric, rule, drop_first: The suite and how its runs are scored (flags, else the suite's).
        frame: Metric rows (``load_metric``) or per-run scores (``load_scores``), finished runs only.
        unfinished: Runs of the suite not finished, left out.
        normalize: What the normalize flag means for the suite (``suite_normalize``).
        step_kinds: ``{task: "online" | "offline"}`` (``step_kinds``).
    """

    suite: str
    metric: str
    rule: str
    drop_first: int
    frame: Any
    unfinished: int
    normalize: str | dict[str, Any] | None
    step_kinds: dict[str, str]


def load_suite(
    store: Any,
    suite: str,
    *,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    normalize: str = "auto",
    rows: bool = True,
    kinds: bool = True,
) -> SuiteScores:
    """Everything ``rlbench plot`` and ``rlbench leaderboard`` read of a suite, on one connection: the
    scoring (``suite_scoring``), the metric rows (``rows=True``, for curves) or the per-run scores computed
    in the database (``rows=False``), the normalisation and, with ``kinds``, the tasks' step kinds (``{}``
    without; tens of ms on 10,000 runs). Raises what ``load_metric`` raises."""
    with shared_reader(store) as reads:  # one connection for the reads, closed before the statistics
        metric, rule, drop_first = suite_scoring(reads, suite, metric, rule, drop_first)
        if rows:
            frame, unfinished = load_metric(reads, suite, metric)
        else:
            frame, unfinished = load_scores(reads, suite, metric, rule, drop_first)
        norm = suite_normalize(reads, suite, normalize, metric)
        found = step_kinds(reads, suite) if kinds else {}
    return SuiteScores(suite=suite, metric=metric, rule=rule, drop_first=drop_first, frame=frame,
                       unfinished=unfinished, normalize=norm, step_kinds=found)  # fmt: skip


def score_table(
    store: Any,
    suite: str,
    *,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    normalize: str = "auto",
) -> Any:
    """A suite's ``stats.ScoreTable``: ``scores`` is ``{algo: ndarray of shape (runs, tasks)}``, rliable's
    contract (columns ``tasks``, rows the seeds in ``seeds[algo]``), normalised as ``normalize`` says, from
    per-run scores computed in the database. Raises what ``load_metric`` and ``stats.score_table`` raise."""
    from . import stats

    data = load_suite(store, suite, metric=metric, rule=rule, drop_first=drop_first, normalize=normalize,
                      rows=False, kinds=False)  # fmt: skip
    return stats.score_table(data.frame, rule=data.rule, drop_first=data.drop_first, normalize=data.normalize,
                             metric=data.metric)  # fmt: skip


SCORE_COLUMNS = ["run_id", "suite", "algo", "env", "seed", "status", "metric", "rule", "drop_first", "score"]


def score_runs(
    store: Any, filters: dict[str, Any], metric: str | None, rule: str | None, drop_first: int | None
) -> tuple[Any, list[str]]:
    """One score per run (``rlbench fetch --scores``): each suite's score rule (or the one given) applied to
    its runs' rows of one metric, in the database (``Store.run_scores``: the same numbers and warnings as
    ``stats.run_scores`` on the rows).

    Args:
        store: The store (or ``shared_reader``'s).
        filters: ``suite`` (None: every suite), and ``Store.run_scores``' filters (algos, envs, seeds,
            statuses, run_ids, step_min, step_max).
        metric, rule, drop_first: As ``suite_scoring`` (None: each suite's).

    Returns:
        A pyarrow Table with ``SCORE_COLUMNS``, ordered by suite, algo, env, seed, run_id; and the warnings,
        each ``suite 'NAME': ...`` (a suite whose runs have nothing left to score is left out with one).
    """
    import warnings

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from . import scoring
    from .arrowbuf import numbers, repeated_text

    parts, said = [], []
    with shared_reader(store) as reads, reads.reader() as con:
        suites = [filters["suite"]] if filters.get("suite") else store.suites(con)
        for name in suites:
            m, r, d = suite_scoring(reads, name, metric, rule, drop_first)
            rule_name, n = scoring.parse_rule(r)
            runs = store.run_scores(con, suite=name, metric=m, rule=rule_name, n=n, drop_first=d,
                                    phase=scoring.rule_phase(r)[1],
                                    **{k: v for k, v in filters.items() if k != "suite"})  # fmt: skip
            if runs.num_rows == 0:
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", scoring.StatsWarning)
                try:
                    order = scoring.finish_order(
                        {c: runs.column(c).to_pylist() for c in scoring.SCORED_COLUMNS}, r, d
                    )
                except scoring.StatsError as e:
                    if "no finite values" in str(e) or "No evaluation points left" in str(e):
                        said.append(f"suite {name!r}: {e}")
                        continue
                    raise
            said += [f"suite {name!r}: {w}" for w in dict.fromkeys(
                str(c.message) for c in caught if issubclass(c.category, scoring.StatsWarning))]  # fmt: skip
            kept = runs.take(numbers(np.asarray(order, np.int64)))
            k = kept.num_rows
            columns = {"run_id": kept["run_id"], "suite": repeated_text(name, k), "algo": kept["algo"],
                       "env": kept["env"], "seed": kept["seed"], "status": kept["status"],
                       "metric": repeated_text(m, k), "rule": repeated_text(r, k),
                       "drop_first": numbers(np.full(k, d, np.int64)), "score": kept["score"].cast(pa.float64())}  # fmt: skip
            parts.append(pa.Table.from_arrays(list(columns.values()), names=list(columns)))
    if not parts:
        return pa.Table.from_arrays([repeated_text("", 0)] * len(SCORE_COLUMNS), names=SCORE_COLUMNS), said
    out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    keys = [(c, "ascending") for c in ("suite", "algo", "env", "seed", "run_id")]
    return out.take(pc.sort_indices(out, sort_keys=keys)), said


# keys that name the task (its panel) or the run itself, never a legend entry of a figure against a key
_TASK_KEYS = ("env_id", "env_kwargs", "env_wrappers", "dataset", "dataset_path", "data_mix")


@dataclass
class KeyScores:
    """A suite's per-run scores against one config key (``key_scores``), for ``stats.key_intervals``.

    Attributes:
        suite, key, metric, rule, drop_first: What was scored how (flags, else the suite's).
        runs: One row per finished run that has the key: ``run_id, algo, env, seed, x`` (the key's value as
            text), ``legend`` and ``score`` (normalised as the leaderboard's).
        table: The ``stats.ScoreTable`` of the per-run scores (no matrices), for the score's label.
        legend_keys: The other keys that tell runs at one value of the key apart (shown in the legend).
        left_out: Finished runs without the key (an algorithm that does not take it), by algorithm.
        single: Algorithms (labels without the sweep's tag) left out as they have one value of the key on a
            task while others have several: ``{label: [that value]}``.
        within: Whether some algorithm has several values of the key on a task (else the key only tells
            algorithms apart, as a ``command:`` or an entry's own budget does).
        unfinished: Runs of the suite not finished.
    """

    suite: str
    key: str
    metric: str
    rule: str
    drop_first: int
    runs: Any
    table: Any
    legend_keys: list[str]
    left_out: dict[str, int]
    single: dict[str, list[str]]
    within: bool
    unfinished: int


def setting_keys(varying: Any) -> list[str]:
    """Of a suite's varying config keys (``Store.varying_config_keys``), those a score can be plotted against:
    not the task's (env, dataset, data_mix, wrappers) nor a seed, and named as ``--x`` takes a key (dotted
    names of letters, digits, ``_`` and ``-``)."""
    return [k for k in varying if k.split(".")[0] not in _TASK_KEYS and k != "seed" and not k.endswith(".seed")
            and CONFIG_KEY.match(k)]  # fmt: skip


def figure_keys(varying: Any, metrics: Any) -> list[str]:
    """What a score is drawn against (``key_scores``) by ``rlbench report`` and offered by the UI: the
    ``setting_keys`` of the config keys that vary, then each of ``SIZE_METRICS`` that the runs log."""
    logged = set(metrics)
    return setting_keys(varying) + [m for m in SIZE_METRICS if m in logged]


def suite_setting_keys(store: Any, suite: str) -> list[str]:
    """``figure_keys`` of a suite's runs: what ``rlbench report`` draws a figure against (``key_scores``)."""
    with store.reader() as con:
        store.require_suite(con, suite)
        return figure_keys(store.varying_config_keys(con, suite), store.metric_names(con, suite))


def logged_x(store: Any, suite: str, key: str) -> dict[str, str]:
    """``{run_id: value}`` of a metric the finished runs log, as the x of a figure against it: each run's last
    finite value, as text (a whole number without its ``.0``); runs without one are left out."""
    try:
        table, _ = load_scores(store, suite, key, "final", 0)
    except UnknownName:  # logged by unfinished runs only
        raise UsageError(f"--x {key!r}: no finished run of suite {suite!r} logged this metric yet; see rlbench "
                         f"status {suite}") from None  # fmt: skip
    out = {}
    for run, value in zip(table["run_id"].astype(str), table["score"], strict=True):
        if value is not None and math.isfinite(value):
            out[run] = str(int(value)) if float(value).is_integer() else repr(float(value))
    return out


def _check_logged_x(runs: Any, key: str) -> None:
    """A logged metric places a configuration on the axis only when all its seeds logged the same value."""
    spread = runs.groupby([runs["env"].astype(str), runs["algo"].astype(str)])["x"].nunique()
    if (spread > 1).any():
        env, algo = spread[spread > 1].index[0]
        seen = sorted(runs.loc[(runs["env"].astype(str) == env) & (runs["algo"].astype(str) == algo), "x"])
        raise UsageError(f"--x {key!r}: the seeds of {algo} on {env} logged different values of it "
                         f"({', '.join(seen[:4])}{', ...' if len(seen) > 4 else ''}), so it cannot place the "
                         f"configuration on an axis; plot against a config key, or a metric that a "
                         f"configuration fixes (e.g. model/parameters)")  # fmt: skip


def _base_label(algo: str) -> str:
    """An algorithm label without the sweep's ``[key=value,...]`` tag."""
    return algo.split("[", 1)[0] if algo.endswith("]") else algo


def key_scores(
    store: Any,
    suite: str,
    key: str,
    *,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    normalize: str = "auto",
) -> KeyScores:
    """Per-run scores (``load_scores``, normalised by ``stats.score_table`` as the leaderboard does) with the
    value of a config key (``params.learning_rate``, ``config.params.n_layer``, ``budget.steps``: the keys of
    ``Store.varying_config_keys``), or of a metric the runs log (``model/parameters``: its last value, the same
    for every seed of a configuration: ``logged_x``). The legend tells apart runs that share a task and a value
    of the key: the algorithm label (without its sweep tag) and every other key that differs among them. An
    algorithm with one value of the key on a task is left out there when another has several
    (``KeyScores.single``).

    Raises:
        UsageError: naming ``--x`` and the keys that vary, for a key no run has or a key with one value.
        What ``load_scores`` raises.
    """
    from . import stats

    key = key.removeprefix("config.")
    with shared_reader(store) as reads, reads.reader() as con:
        store.require_suite(con, suite)
        metric, rule, drop_first = suite_scoring(reads, suite, metric, rule, drop_first)
        scored, unfinished = load_scores(reads, suite, metric, rule, drop_first)
        norm = suite_normalize(reads, suite, normalize, metric)
        varying = store.varying_config_keys(con, suite)
        listed = ", ".join(varying) or "none (its runs differ by algorithm, task and seed only)"
        # a config key that varies is one; else a metric the runs log (the metrics are scanned only then)
        logged = key not in varying and key in store.metric_names(con, suite)
        if not logged and (key in PLAIN_COLUMNS or key.split(".")[0] in _TASK_KEYS or key.endswith(".seed")):
            raise UsageError(f"--x {key!r}: a run's algorithm, task or seed, not a setting to plot a score "
                             f"against; the keys that vary in suite {suite!r}: {listed}")  # fmt: skip
        candidates = [k for k in setting_keys(varying) if k != key]
        try:
            found = store.run_ids_where(con, suite, [], ([] if logged else [key]) + candidates)
        except ValueError as e:
            raise UsageError(f"--x {key!r}: {e}") from None
        x_of = logged_x(reads, suite, key) if logged else {str(r[0]): r[3] for r in found}
    first = 3 if logged else 4  # run_id, seed, status, [the key's value,] each candidate's value
    values = {str(r[0]): r[first:] for r in found}
    present = {v for v in x_of.values() if v is not None}
    if not present:
        raise UsageError(f"--x {key!r}: no run of suite {suite!r} has this config key (nor logs it as a "
                         f"metric); the keys that vary there: {listed}")  # fmt: skip
    if len(present) == 1:
        raise UsageError(f"--x {key!r}: every run of suite {suite!r} has the value {present.pop()}, so there is "
                         f"nothing to plot against; the keys that vary there: {listed}")  # fmt: skip
    table = stats.score_table(scored, rule=rule, drop_first=drop_first, normalize=norm, metric=metric,
                              matrices=False)  # fmt: skip
    runs = table.per_run[["run_id", "algo", "env", "seed", "norm_score"]].rename(
        columns={"norm_score": "score"}
    )
    runs = runs.assign(run_id=runs["run_id"].astype(str), x=runs["run_id"].astype(str).map(x_of))
    missing = runs["x"].isna()
    left_out = runs.loc[missing, "algo"].astype(str).value_counts().sort_index().to_dict()
    runs = runs.loc[~missing].copy()
    runs["x"] = runs["x"].astype(str)
    if logged:
        _check_logged_x(runs, key)
    runs["base"] = runs["algo"].astype(str).map(_base_label)
    # an algorithm with one value of the key on a task is left out when others have several (a point, no line)
    spread = runs.groupby([runs["env"].astype(str), runs["base"]])["x"].transform("nunique")
    single: dict[str, list[str]] = {}
    within = bool((spread > 1).any())
    if within:
        for base, x in runs.loc[spread == 1, ["base", "x"]].drop_duplicates().itertuples(index=False):
            single.setdefault(base, []).append(x)
        runs = runs.loc[spread > 1].copy()
    cell = runs["env"].astype(str) + "\0" + runs["base"] + "\0" + runs["x"]
    legend_keys = [k for i, k in enumerate(candidates)
                   if (runs["run_id"].map(lambda r, i=i: str(values[r][i])).groupby(cell).nunique() > 1).any()]  # fmt: skip
    shown = [(i, k) for i, k in enumerate(candidates) if k in legend_keys]
    with_base = runs["base"].nunique() > 1 or not legend_keys

    def legend_of(run: str, base: str) -> str:
        tags = [
            f"{k.removeprefix('params.')}={values[run][i]}" for i, k in shown if values[run][i] is not None
        ]
        return ", ".join(([base] if with_base else []) + tags) or base

    runs["legend"] = [legend_of(r, b) for r, b in zip(runs["run_id"], runs["base"])]
    return KeyScores(suite=suite, key=key, metric=metric, rule=rule, drop_first=drop_first,
                     runs=runs.drop(columns="base").reset_index(drop=True), table=table,
                     legend_keys=legend_keys, left_out=left_out, single=single,
                     within=within, unfinished=unfinished)  # fmt: skip
