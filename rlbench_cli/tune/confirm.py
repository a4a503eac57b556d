"""``rlbench tune``'s confirmation: the best configurations of the search and the algorithm's default, re-run on
seeds the search never used (the suite ``NAME.confirm``), compared with IQM intervals and the probability of
improving on the default. The search's score of a configuration is optimistic (it was picked for being high on
those seeds: the winner's curse); the confirmed score is not, and both are shown side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import RunFailed
from ..suite.models import Suite
from .search import trial_rows, trial_scores, tuned_from
from .study import CONFIRM_SUFFIX, derived_suite, entry_for, open_study

__all__ = ["Confirmed", "confirm", "confirmation", "default_label"]

POI_REPS = 2000


def default_label(label: str) -> str:
    return f"{label}[default]"


@dataclass
class Confirmed:
    """One configuration on the fresh seeds: its IQM with the interval, the search's score (None for the
    default, which the search did not run), and P(a run of it beats a run of the default) with its interval."""

    label: str
    params: dict[str, Any]
    search_value: float | None
    iqm: tuple[float, float, float] | None
    poi_vs_default: tuple[float, float, float] | None
    verdict: str
    adastop: str | None = None  # AdaStop's decisions against the default, with rlbench tune --adaptive

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _top(study: Any, label: str, k: int) -> list[dict[str, Any]]:
    done = [t for t in trial_rows(study, label) if t["state"] == "complete" and t["value"] is not None]
    return sorted(done, key=lambda t: (-t["value"], t["number"]))[:k]


def _entries(suite: Suite, study: Any) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    spec = suite.tune
    assert spec is not None and spec.confirm is not None
    label = spec.algorithm
    top = _top(study, label, spec.confirm.top)
    entries = [entry_for(suite, default_label(label), {})]
    entries += [entry_for(suite, t["label"], t["params"]) for t in top]
    return entries, {t["label"]: t for t in top}


def confirm(
    suite: Suite, source: str, store: Any, run: Callable[..., Any], workers: int | None = None,
    report: Callable[[str, dict[str, Any]], None] = lambda e, i: None, adaptive: Any = None, **run_kwargs: Any,
) -> list[Confirmed]:  # fmt: skip
    """Runs the confirmation (finished runs are skipped) and returns its comparison. With ``adaptive`` (an
    ``adaptive.AdaptiveSettings``), the fresh seeds run in AdaStop's batches until it has decided every pair
    (``sequential.run_adaptive``; its decisions are stored with the confirmation's suite)."""
    spec = suite.tune
    assert spec is not None and spec.confirm is not None
    study = open_study(store.path, suite)
    entries, _ = _entries(suite, study)
    csuite = derived_suite(suite, CONFIRM_SUFFIX, entries, spec.confirm.seed_list())

    def run_tuned(*args: Any, extra_config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return run(*args, extra_config={**(extra_config or {}), **tuned_from(suite)}, **kwargs)

    if adaptive is not None:
        from ..sequential import run_adaptive

        run_adaptive(csuite, source, store, adaptive, run_tuned, report=report, workers=workers, **run_kwargs)
        return confirmation(suite, store, study=study)
    summary = run_tuned(csuite, source, store, workers=workers, report=report, **run_kwargs)
    if summary.failed or summary.interrupted:
        what = f"{summary.failed} failed" if summary.failed else f"{summary.interrupted} interrupted"
        raise RunFailed(f"rlbench tune: the confirmation has {what} run(s); see rlbench status {csuite.name}, then run "
                        "the same command again to go on")  # fmt: skip
    return confirmation(suite, store, study=study)


def _adastop(store: Any, suite: str, label: str, base: str) -> str | None:
    """AdaStop's decisions between ``label`` and the default over the confirmation's tasks, from ``label``'s
    side ("better on CartPole-v1; equal on Acrobot-v1"), or None when the confirmation was not adaptive."""
    with store.reader() as con:
        rows, _ = store.decisions(con, suite)
    flip = {"larger": "smaller", "smaller": "larger"}
    said = []
    for r in rows:
        if {r["algo_a"], r["algo_b"]} != {label, base}:
            continue
        d = r["decision"] if r["algo_a"] == label else flip.get(r["decision"], r["decision"])
        word = {
            "larger": "better",
            "smaller": "worse",
            "equal": "no difference",
            "continue": "undecided",
        }.get(d, d)
        said.append(f"{word} on {r['task']}")
    return "; ".join(said) or None


def confirmation(
    suite: Suite, store: Any, reps: int = 50_000, seed: int = 0, study: Any = None
) -> list[Confirmed]:
    """The comparison of what ``NAME.confirm`` holds (``[]`` before the confirmation ran); ``study``: the suite's,
    when the caller has it open already."""
    from ..bootstrap import interval_estimates, poi_interval

    spec = suite.tune
    assert spec is not None and spec.confirm is not None
    study = study if study is not None else open_study(store.path, suite)
    entries, top = _entries(suite, study)
    scores, _ = trial_scores(store, suite.name + CONFIRM_SUFFIX)
    base = default_label(spec.algorithm)
    out = []
    for e in entries:
        m = scores.get(e.label)
        iqm = poi = None
        verdict = "not run yet"
        if m is not None:
            iv = interval_estimates({e.label: m}, ["iqm"], reps, 0.95, seed)[e.label]
            iqm = tuple(float(x[0]) for x in iv)
            verdict = "the default"
            if e.label != base and base in scores:
                p = poi_interval(m, scores[base], POI_REPS, 0.95, seed, key=f"{e.label}>{base}")
                poi = (float(p[0]), float(p[1]), float(p[2]))
                verdict = ("beats the default" if poi[1] > 0.5 else "worse than the default" if poi[2] < 0.5
                           else "no difference from the default shown")  # fmt: skip
        t = top.get(e.label)
        ada = (
            _adastop(store, suite.name + CONFIRM_SUFFIX, e.label, base)
            if e.label != base and scores
            else None
        )
        out.append(Confirmed(label=e.label, params=dict(t["params"]) if t else {}, search_value=t["value"] if t else None,
                             iqm=iqm, poi_vs_default=poi, verdict=verdict, adastop=ada))  # type: ignore[arg-type]  # fmt: skip
    return out
