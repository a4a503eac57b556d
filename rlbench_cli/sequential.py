"""``rlbench run --adaptive`` and ``rlbench compare``: seeds in batches until AdaStop has decided.

The suite's grid is expanded over the adaptive seed schedule (``adaptive.seed_schedule``: batch x max-batches
seeds). Look by look, each task runs the next batch of seeds of the algorithms still in an undecided pair,
through the ordinary coordinator (so on any executor, skipping what is finished, resuming after a kill), then
the runs' scores (the suite's score rule) go through ``adaptive.decide`` and the decisions are stored. A
killed ``rlbench run --adaptive`` picks up where it stopped: the decisions are recomputed from the stored runs
by the same seeded procedure, so they are the ones stored before, and the settings must be the same.

``rlbench compare --paired`` asks another question of the same scores: one task (or algorithm) against a baseline,
paired by seed (``paired_suite``, ``stats.paired_family``), for configurations whose seeds fix what both are
scored on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from .adaptive import AdaptiveSettings, TaskTest, check_settings, decide, seed_schedule
from .errors import RunFailed, UsageError
from .store import Store
from .suite.grid import RunSpec, expand
from .suite.models import Suite

__all__ = [
    "run_adaptive",
    "stored_scores",
    "compare_suite",
    "decision_rows",
    "paired_suite",
    "paired_scores",
    "paired_family_at",
    "paired_steps",
    "AdaptiveResult",
]


class AdaptiveResult:
    def __init__(self, tests: list[TaskTest], runs: int, budget: int, batches_run: int):
        self.tests, self.runs, self.budget, self.batches_run = tests, runs, budget, batches_run

    @property
    def saved(self) -> int:
        """Runs a fixed budget of batch x max-batches seeds per algorithm and task would have added."""
        return self.budget - self.runs


def stored_scores(
    store: Store, suite: str, metric: str, rule: str, drop_first: int, seeds: list[int] | None = None
) -> tuple[dict[str, dict[str, list[float]]], dict[str, list[str]]]:
    """Each finished run's score by the rule, as ``{task: {algo: [scores in seed order]}}``, plus the
    algorithms with runs on each task. ``seeds``: keep only these (the adaptive schedule), in that order."""
    import warnings

    from . import stats
    from .analysis import metric_rows

    df = metric_rows(store, suite, metric)  # with offline-to-online runs' phase boundary
    if df.empty:
        return {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        scored = stats.run_scores(df, rule, drop_first)
    rank = {s: i for i, s in enumerate(seeds)} if seeds is not None else None
    if rank is not None:
        scored = scored[scored["seed"].isin(rank)]
    scored = scored.assign(order=scored["seed"].map(rank) if rank is not None else scored["seed"])
    out: dict[str, dict[str, list[float]]] = {}
    for (task, algo), g in scored.sort_values("order").groupby(["env", "algo"], sort=False):
        out.setdefault(str(task), {})[str(algo)] = [float(v) for v in g["score"]]
    return out, {t: sorted(a) for t, a in out.items()}


def _algos_per_task(specs: list[RunSpec]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for s in specs:
        names = out.setdefault(s.env, [])
        if s.algo not in names:
            names.append(s.algo)
    return out


def _store_decisions(store: Store, suite: str, tests: list[TaskTest], settings: AdaptiveSettings) -> None:
    with store.writer() as con:
        store.save_decisions(
            con, suite, [asdict(c) for t in tests for c in t.comparisons], settings.to_dict()
        )


def run_adaptive(
    suite: Suite,
    source: str,
    store: Store,
    settings: AdaptiveSettings,
    run: Callable[..., Any],
    report: Callable[[str, dict[str, Any]], None] = lambda e, i: None,
    **run_kwargs: Any,
) -> AdaptiveResult:
    """Run ``suite`` adaptively; ``run`` is ``coordinator.run_suite`` (passed in, so this module stays above
    the coordinator in the import order), called once per look with the runs of that look selected."""
    schedule = seed_schedule(suite.seed_list, settings)
    full = suite.model_copy(update={"seeds": schedule})
    specs = expand(full)
    algos = _algos_per_task(specs)
    check_settings(settings, max(len(a) for a in algos.values()))
    before = None
    if store.exists():
        with store.reader() as con:
            if suite.name in store.suites(con):
                _, before = store.decisions(con, suite.name)
    if before is not None and before != settings.to_dict():
        changed = ", ".join(
            f"{k} {before.get(k)} -> {v}" for k, v in settings.to_dict().items() if before.get(k) != v
        )
        raise UsageError(f"suite {suite.name!r} was run adaptively with other settings ({changed}); pass the same "
                         "--alpha/--batch/--max-batches/--permutations/--seed to go on, or use another --db")  # fmt: skip
    metric, rule, drop = suite.score.metric, suite.score.rule, suite.score.drop_first
    batches_run = 0
    while True:
        scores = stored_scores(store, suite.name, metric, rule, drop, schedule)[0] if store.exists() else {}
        tests = decide({t: scores.get(t, {}) for t in algos}, algos, settings)
        if store.exists():
            _store_decisions(store, suite.name, tests, settings)
        report("adaptive_look", {"tests": tests})
        todo: set[tuple[str, str, int]] = set()  # (task, algo, seed) of the next look
        for t in tests:
            if t.finished or t.looks >= settings.max_batches:
                continue
            seeds = schedule[t.looks * settings.batch : (t.looks + 1) * settings.batch]
            todo |= {(t.task, a, s) for a in t.needs_more for s in seeds}
        if not todo:
            break
        summary = run(full, source, store, select=lambda s, todo=todo: (s.env, s.algo, s.seed) in todo,
                      extra_config={"adaptive": settings.to_dict()}, report=report, **run_kwargs)  # fmt: skip
        batches_run += 1
        if summary.failed or summary.interrupted:
            what = f"{summary.failed} failed" if summary.failed else f"{summary.interrupted} interrupted"
            raise RunFailed(f"--adaptive: {what} in this batch, so AdaStop cannot look at it; see rlbench status "
                            f"{suite.name}, then run the same command again to go on")  # fmt: skip
    runs = sum(c for t in tests for c in _runs_per_algo(t).values())
    budget = settings.batch * settings.max_batches * sum(len(a) for a in algos.values())
    return AdaptiveResult(tests, runs, budget, batches_run)


def _runs_per_algo(test: TaskTest) -> dict[str, int]:
    runs: dict[str, int] = {}
    for c in test.comparisons:
        runs[c.algo_a] = max(runs.get(c.algo_a, 0), c.runs_a)
        runs[c.algo_b] = max(runs.get(c.algo_b, 0), c.runs_b)
    return runs


def decision_rows(tests: list[TaskTest]) -> list[dict[str, Any]]:
    """AdaStop's decisions as plain rows, one per pair and task (the fields of ``adaptive.Comparison``)."""
    return [c.__dict__ for t in tests for c in t.comparisons]


def compare_suite(
    store: Store,
    suite: str,
    settings: AdaptiveSettings | None = None,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The decisions ``rlbench compare`` shows, as rows (``decision_rows``) and the settings they were made
    with: the stored ones of an adaptive run when no settings are given, else AdaStop on the finished runs
    there are (imported runs too), in seed order. ``metric``, ``rule``, ``drop_first``: as
    ``analysis.suite_scoring`` (None: the suite's)."""
    from .analysis import suite_scoring

    metric, rule, drop_first = suite_scoring(store, suite, metric, rule, drop_first)
    with store.reader() as con:
        rows, stored = store.decisions(con, suite)
    if settings is None and stored is not None:
        return rows, stored
    settings = settings or AdaptiveSettings()
    scores, algos = stored_scores(store, suite, metric, rule, drop_first)
    if not scores:
        raise UsageError(f"suite {suite!r} has no finished runs with metric {metric!r} to compare")
    check_settings(settings, max(len(a) for a in algos.values()))
    return decision_rows(decide(scores, algos, settings)), settings.to_dict()


def _check_reps(reps: int) -> None:
    if reps < 1:
        raise UsageError(f"--reps {reps}: the bootstrap needs at least 1 replicate (default 50000)")


def paired_scores(
    store: Store,
    suite: str,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    steps: Sequence[int | None] = (None,),
) -> tuple[list[Any], tuple[str, str, int]]:
    """The per-run scores ``paired_suite`` pairs, one frame per step (``analysis.load_scores`` with it as
    ``step_max``; None: each run's end), and the scoring they were made by (``analysis.suite_scoring``:
    ``metric, rule, drop_first``, read once)."""
    from .analysis import load_scores, suite_scoring

    scoring = suite_scoring(store, suite, metric, rule, drop_first)
    return [load_scores(store, suite, *scoring, at)[0] for at in steps], scoring


def _paired_rows(
    frame: Any,
    suite: str,
    baseline: str,
    scoring: tuple[str, str, int],
    alternative: str = "two-sided",
    reps: int = 50_000,
    seed: int = 0,
    step_max: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One step's comparisons of ``paired_family_at`` and its settings."""
    from . import stats

    _check_reps(reps)
    dimension, name, rows = stats.paired_family(frame, baseline, alternative, reps, seed)
    if not rows:
        other, held = ("task", "an algorithm") if dimension == "task" else ("algorithm", "a task")
        raise UsageError(f"--paired {baseline!r}: no other {other} of suite {suite!r} shares {held} with it, so "
                         f"there is nothing to pair; pass {held} to compare those instead")  # fmt: skip
    metric, rule, drop_first = scoring
    settings = {"baseline": name, "dimension": dimension,
                "metric": metric, "rule": rule, "drop_first": drop_first, "alternative": alternative,
                "reps": reps, "seed": seed, "step_max": step_max, "comparisons": len(rows),
                "tested": stats.tests_in_family(rows)}  # fmt: skip
    return rows, settings


def paired_suite(
    store: Store,
    suite: str,
    baseline: str,
    metric: str | None = None,
    rule: str | None = None,
    drop_first: int | None = None,
    alternative: str = "two-sided",
    reps: int = 50_000,
    seed: int = 0,
    step_max: int | Sequence[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What ``rlbench compare --paired BASELINE`` shows: ``stats.paired_family`` of the suite's finished runs,
    scored as ``rlbench leaderboard`` scores them (``analysis.load_scores``; ``metric``, ``rule``,
    ``drop_first``: as ``analysis.suite_scoring``), or with ``step_max`` as if each run ended at that step
    (``fetch --scores``' ``--step-max``: e.g. 0, a policy before its real training), and the settings (the
    dimension compared across included). Several steps make one family: each step's rows (with ``step``),
    Holm's correction over all of them (the tests a suite states at, say, step 0 and at its end).

    Raises:
        UsageError: no finished run with the metric (at or before a step), an unknown baseline or one with
            nothing to pair, two runs of a configuration with one seed, a step given twice, or an unknown
            alternative (``stats.StatsError``).
    """
    _check_reps(reps)  # before the scores are read
    steps = paired_steps(step_max)
    frames, scoring = paired_scores(store, suite, metric, rule, drop_first, steps)
    return paired_family_at(frames, steps, suite, baseline, scoring, alternative, reps, seed)


def paired_steps(step_max: int | Sequence[int | None] | None) -> list[int | None]:
    """``paired_suite``'s ``step_max`` as the list of steps to score at (``[None]``: each run's end).

    Raises:
        UsageError: a step given twice.
    """
    steps = [step_max] if step_max is None or isinstance(step_max, int) else list(step_max)
    if len(set(steps)) < len(steps):
        twice = next(x for x in steps if steps.count(x) > 1)
        raise UsageError(f"--step-max {twice} is given twice; give each step once")
    return steps


def paired_family_at(
    frames: Sequence[Any],
    steps: Sequence[int | None],
    suite: str,
    baseline: str,
    scoring: tuple[str, str, int],
    alternative: str = "two-sided",
    reps: int = 50_000,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``paired_suite`` of the frames ``paired_scores`` loaded (the UI lists the baselines from them first): the
    comparisons of each step's frame, several steps joined into one family (rows with
    ``step``, Holm over all of them; ``settings["step_max"]`` the list of steps), one step as it is."""
    from . import stats

    found = [_paired_rows(frame, suite, baseline, scoring, alternative, reps, seed, at)
             for frame, at in zip(frames, steps, strict=True)]  # fmt: skip
    if len(steps) == 1:
        return found[0]
    family = stats.joint_family([(at, rows) for at, (rows, _) in zip(steps, found, strict=True)])
    settings = {**found[-1][1], "step_max": list(steps), "comparisons": len(family),
                "tested": stats.tests_in_family(family)}  # fmt: skip
    return family, settings
