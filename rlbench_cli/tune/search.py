"""``rlbench tune``'s search: Optuna asks for configurations, each trial is ordinary rlbench runs (the tuned
entry with the trial's params, on the search seeds x the suite's tasks) in the suite ``NAME.tune``, and its
score, the objective over those runs, is told back.

Trials run in batches of up to ``workers`` trials (one coordinator call per batch, every run of the batch in
parallel on the suite's executor). Nothing is lost or doubled when the process dies: a trial Optuna handed out
but never got a value for is RUNNING in the study's journal, and the next ``rlbench tune`` re-runs exactly that
trial first (its runs have the same run ids, so finished ones are skipped) before asking for new ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import RunFailed, UsageError
from ..suite.models import Suite
from .study import TUNE_SUFFIX, derived_suite, distributions, entry_for, open_study, optuna, trial_label

__all__ = ["SearchResult", "search", "trial_scores", "objective_of"]


@dataclass
class SearchResult:
    trials: list[dict[str, Any]]  # number, state, params, value, label
    new: int = 0  # trials run by this call
    resumed: list[int] = field(default_factory=list)  # trials a dead process had started, finished here


def objective_of(name: str, matrix: Any) -> float:
    """The trial's score from its (seeds x tasks) matrix of scores: rliable's IQM, mean or median."""
    import numpy as np

    from ..bootstrap import batch_iqm, batch_mean, batch_median

    fn = {"iqm": batch_iqm, "mean": batch_mean, "median": batch_median}[name]
    return float(fn(np.asarray(matrix, dtype=np.float64)[None])[0])


def trial_scores(store: Any, suite: str) -> tuple[dict[str, Any], Any]:
    """``({label: (seeds x tasks) scores}, table)`` of a tune or confirm suite's finished runs, scored and
    normalised as the suite says (``analysis.score_table``); ``({}, None)`` when nothing is finished yet."""
    import warnings

    from .. import stats
    from ..analysis import score_table

    if not store.exists():
        return {}, None
    with store.reader() as con:
        if suite not in store.suites(con) or not store.run_counts(con, suite)[1]:
            return {}, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        table = score_table(store, suite)
    return dict(table.scores), table


def _check_params(suite: Suite, source: str) -> None:
    """An unknown param, or a value the algorithm refuses, at the edges of the space: one line, before
    anything is recorded (the same check ``rlbench run`` makes)."""
    from ..algos import first_refusal, to_check
    from ..suite.grid import expand

    assert suite.tune is not None
    label = suite.tune.algorithm
    corners = []
    for pick in (0, -1):
        params = {k: p.values()[pick] for k, p in suite.tune.params.items()}
        corners.append(entry_for(suite, label, params))
    probe = derived_suite(suite, TUNE_SUFFIX, corners[:1], suite.tune.search_seeds()[:1])
    refused = first_refusal(to_check(expand(probe)))
    if refused is None:
        probe = derived_suite(suite, TUNE_SUFFIX, corners[1:], suite.tune.search_seeds()[:1])
        refused = first_refusal(to_check(expand(probe)))
    if refused:
        raise UsageError(f"{source}: tune.params: {refused}")


def _tell(study: Any, number: int, scores: dict[str, Any], label: str, objective: str,
          failed: set[str]) -> float | None:  # fmt: skip
    opt = optuna()
    if label in failed or label not in scores:
        study.tell(number, state=opt.trial.TrialState.FAIL)
        return None
    value = objective_of(objective, scores[label])
    study.tell(number, value)
    return value


def search(
    suite: Suite,
    source: str,
    store: Any,
    run: Callable[..., Any],
    workers: int | None = None,
    report: Callable[[str, dict[str, Any]], None] = lambda e, i: None,
    **run_kwargs: Any,
) -> SearchResult:
    """Run the suite's search until ``tune.trials`` trials are complete or failed; ``run`` is
    ``coordinator.run_suite`` (passed in, as ``sequential.run_adaptive`` takes it)."""
    spec = suite.tune
    assert spec is not None
    opt = optuna()
    _check_params(suite, source)
    space = distributions(spec)
    study = open_study(store.path, suite)
    label = spec.algorithm
    seeds = spec.search_seeds()
    resumed = [t.number for t in study.get_trials(deepcopy=False) if t.state == opt.trial.TrialState.RUNNING]
    new = 0
    batch_size = max(1, workers or 1)
    while True:
        trials = study.get_trials(deepcopy=False)
        running = [t for t in trials if t.state == opt.trial.TrialState.RUNNING]
        room = spec.trials - len(trials)
        batch = [(t.number, t.params) for t in running[:batch_size]]
        handles = {t.number: opt.trial.Trial(study, t._trial_id) for t in running[:batch_size]}
        while len(batch) < batch_size and room > 0:
            t = study.ask(space)
            room -= 1
            new += 1
            twin = _same_as(study, t.params)
            if twin is not None:  # a configuration already run (a categorical space): its score, not again
                study.tell(t.number, twin.value)
                report("tune_trial", {"number": t.number, "value": twin.value, "same_as": twin.number})
                continue
            batch.append((t.number, t.params))
            handles[t.number] = t
        if not batch:
            break
        entries = [entry_for(suite, trial_label(label, n), p) for n, p in batch]
        known = [entry_for(suite, trial_label(label, t.number), t.params) for t in trials
                 if t.params and t.number not in {n for n, _ in batch}]  # fmt: skip
        tsuite = derived_suite(suite, TUNE_SUFFIX, known + entries, seeds)
        labels = {e.label for e in entries}
        report("tune_batch", {"trials": [n for n, _ in batch]})
        pruning = None
        if spec.pruner != "none":
            from .prune import Pruning

            pruning = Pruning(tsuite, {n: (handles[n], trial_label(label, n)) for n, _ in batch},
                              lambda m: objective_of(spec.objective, m))  # fmt: skip
        summary = run(tsuite, source, store, workers=workers, report=report, watch=pruning, extra_config=tuned_from(suite),
                      select=lambda s, labels=labels: s.algo in labels, **run_kwargs)  # fmt: skip
        if summary.interrupted:
            raise RunFailed(f"rlbench tune: {summary.interrupted} run(s) interrupted; run the same command again "
                            "to go on (the trials in flight are re-run, finished runs skipped)")  # fmt: skip
        failed = {s.algo for s, _ in summary.failures}
        scores, _ = trial_scores(store, tsuite.name)
        for number, _params in batch:
            if pruning is not None and number in pruning.pruned:
                study.tell(number, state=opt.trial.TrialState.PRUNED)
                report("tune_trial", {"number": number, "value": None, "pruned_at": pruning.pruned[number]})
                continue
            value = _tell(study, number, scores, trial_label(label, number), spec.objective, failed)
            report("tune_trial", {"number": number, "value": value})
    return SearchResult(trials=trial_rows(study, label), new=new, resumed=resumed)


def tuned_from(suite: Suite) -> dict[str, Any]:
    """What the search's and the confirmation's suites store beside their config: the tuned suite itself, so
    ``rlbench report NAME.tune`` can read the study without the suite file."""
    return {"tune_of": suite.model_dump(mode="json")}


def _same_as(study: Any, params: dict[str, Any]) -> Any:
    """A complete trial with exactly these params, or None."""
    opt = optuna()
    done = study.get_trials(deepcopy=False, states=(opt.trial.TrialState.COMPLETE,))
    return next((t for t in done if t.params == params), None)


def trial_rows(study: Any, label: str) -> list[dict[str, Any]]:
    """The study's trials as rows: number, label, state, params, value."""
    return [{"number": t.number, "label": trial_label(label, t.number), "state": t.state.name.lower(),
             "params": dict(t.params), "value": t.value} for t in study.get_trials(deepcopy=False)]  # fmt: skip
