"""``rlbench tune``: search an algorithm entry's params with Optuna, every trial ordinary rlbench runs (suite
``NAME.tune``), then confirm the best configurations and the default on fresh seeds (suite ``NAME.confirm``).

Modules: ``study`` (Optuna: storage, samplers, the space, trial entries), ``search`` (the ask / run / tell loop
and its resumption), ``confirm`` (fresh seeds, intervals, the verdict), ``figures`` (history, importances,
slice). The coordinator's ``run_suite`` is passed in, as ``sequential.run_adaptive`` takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..suite.models import Suite

__all__ = ["TuneStatus", "tune_suite", "tune_status", "status_text", "tuned_suite"]


@dataclass
class TuneStatus:
    suite: str
    trials: list[dict[str, Any]]
    confirmed: list[Any] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "trials": self.trials, "confirmed": [c.to_dict() for c in self.confirmed],
                "figures": [str(p) for p in self.figures], "resumed": self.resumed}  # fmt: skip


def _need_tune(suite: Suite, source: str) -> None:
    if suite.tune is None:
        raise UsageError(f"{source}: the suite has no tune: block; add one (tune: {{algorithm: LABEL, params: "
                         "{NAME: {log: [LOW, HIGH]}}, trials: N}) to search its params")  # fmt: skip


def tune_suite(suite: Suite, source: str, store: Any, run: Callable[..., Any], workers: int | None = None,
               report: Callable[[str, dict[str, Any]], None] = lambda e, i: None, adaptive: Any = None,
               **run_kwargs: Any) -> TuneStatus:  # fmt: skip
    """The search (until ``tune.trials`` trials are done), then the confirmation when the suite asks for one
    (in AdaStop's batches with ``adaptive``, an ``adaptive.AdaptiveSettings``)."""
    from .confirm import confirm
    from .search import search

    _need_tune(suite, source)
    found = search(suite, source, store, run, workers=workers, report=report, **run_kwargs)
    confirmed = []
    if suite.tune.confirm is not None:  # type: ignore[union-attr]
        confirmed = confirm(suite, source, store, run, workers=workers, report=report, adaptive=adaptive,
                            **run_kwargs)  # fmt: skip
    return TuneStatus(suite.name, found.trials, confirmed, resumed=found.resumed)


def tune_status(
    suite: Suite, source: str, store: Any, figures: Path | None = None, fmt: str = "png"
) -> TuneStatus:
    """What the study holds (its trials) and the confirmation so far, read only; with ``figures`` a folder,
    the history, importance and slice figures are written there."""
    from .confirm import confirmation
    from .search import trial_rows
    from .study import open_study, storage_path

    _need_tune(suite, source)
    if not storage_path(store.path, suite.name).exists():
        raise UsageError(
            f"suite {suite.name!r} has not been tuned in {store.path}; run rlbench tune {source}"
        )
    study = open_study(store.path, suite)
    trials = trial_rows(study, suite.tune.algorithm)  # type: ignore[union-attr]
    confirmed = confirmation(suite, store, study=study) if suite.tune.confirm is not None else []  # type: ignore[union-attr]
    paths = []
    if figures is not None:
        from .figures import write_figures

        paths = write_figures(study, trials, suite.tune, figures, fmt)
    return TuneStatus(suite.name, trials, confirmed, paths)


def _num(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _iv(t: tuple[float, float, float] | None, digits: int = 3) -> str:
    return "-" if t is None else f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def status_text(suite: Suite, status: TuneStatus) -> str:
    """The trial table and the confirmation table, markdown."""
    spec = suite.tune
    assert spec is not None
    states: dict[str, int] = {}
    for t in status.trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    lines = [f"## {suite.name}: tuning {spec.algorithm} ({len(status.trials)} of {spec.trials} trials: {counts})", "",
             f"Search: {spec.sampler} sampler, seeds {spec.search_seeds()} x the suite's tasks per trial; objective: "
             f"{spec.objective} of the scores ({suite.score.metric}, rule {suite.score.rule}); runs in suite "
             f"{suite.name}.tune.", "", "| trial | state | " + " | ".join(spec.params) + " | objective |",
             "|--:|:--|" + "--:|" * len(spec.params) + "--:|"]  # fmt: skip
    done = [t["value"] for t in status.trials if t["state"] == "complete" and t["value"] is not None]
    best = max(done, default=None)
    for t in status.trials:
        vals = " | ".join(f"{t['params'][k]:.4g}" if isinstance(t["params"].get(k), float) else str(t["params"].get(k, "-"))
                          for k in spec.params)  # fmt: skip
        mark = " (best)" if t["state"] == "complete" and t["value"] == best else ""
        mark += " (at the step it was pruned)" if t["state"] == "pruned" and t["value"] is not None else ""
        lines.append(f"| {t['number']} | {t['state']} | {vals} | {_num(t['value'])}{mark} |")
    if status.confirmed:
        seeds = spec.confirm.seed_list()  # type: ignore[union-attr]
        lines += ["", f"### Confirmation on fresh seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} seeds, never used in "
                  f"the search; runs in suite {suite.name}.confirm)", "",
                  "| configuration | search score | confirmed IQM [95% CI] | P(beats default) [95% CI] | verdict |",
                  "|:--|--:|--:|--:|:--|"]  # fmt: skip
        for c in status.confirmed:
            lines.append(
                f"| {c.label} | {_num(c.search_value)} | {_iv(c.iqm)} | {_iv(c.poi_vs_default)} | {c.verdict}"
                + (f" (AdaStop: {c.adastop})" if c.adastop else "")
                + " |"
            )
        tuned = [c for c in status.confirmed if c.poi_vs_default is not None]
        if tuned:
            top = tuned[0]
            lines += ["", f"The search's best, {top.label}, scored {_num(top.search_value)} on the search seeds and "
                      f"{_iv(top.iqm)} on fresh ones; against the default: {top.verdict} (P(beats default) "
                      f"{_iv(top.poi_vs_default)})."]  # fmt: skip
    return "\n".join(lines)


def tuned_suite(config: dict[str, Any]) -> Suite | None:
    """The tuned suite a search's or confirmation's suite was made for (stored with its config), or None."""
    found = config.get("tune_of")
    return Suite.model_validate(found) if isinstance(found, dict) else None
