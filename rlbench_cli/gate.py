"""``rlbench check``: a regression gate. A suite's runs of a candidate (this commit) against a baseline (a bundle
folder or URL, or another store), per algorithm, on the suite's score rule and normalisation.

An algorithm got worse when, under ``--rule iqm``, its IQM interval lies entirely below the baseline's, or,
under ``--rule poi``, the interval of the probability that a candidate run beats a baseline run lies entirely
below 0.5. Both are computed and printed whatever the rule; only the chosen one decides. The intervals are
rlbench's stratified bootstrap (``rlbench_cli.bootstrap``) with a fixed seed, so a check gives the same verdict
every time it is run on the same runs.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import RlbenchError, UsageError

__all__ = ["RULES", "AlgoVerdict", "GateResult", "check_suite", "to_markdown"]

RULES = {
    "iqm": "the candidate's IQM interval lies entirely below the baseline's",
    "poi": "the interval of P(a candidate run beats a baseline run) lies entirely below 0.5",
}
POI_REPS = 2000  # rliable's default for the probability of improvement


@dataclass
class AlgoVerdict:
    """One algorithm's comparison: IQM intervals of both sides, the probability of improvement of the
    candidate over the baseline with its interval, and the verdict (``worse``, ``better`` or ``same``:
    no difference the rule can see)."""

    algo: str
    tasks: list[str]
    runs_candidate: int
    runs_baseline: int
    iqm_candidate: tuple[float, float, float]
    iqm_baseline: tuple[float, float, float]
    poi: tuple[float, float, float]
    verdict: str


@dataclass
class GateResult:
    suite: str
    baseline: str
    rule: str
    metric: str
    score_rule: str
    normalized: str | None
    reps: int
    seed: int
    confidence: float
    algos: list[AlgoVerdict]
    only_candidate: list[str] = field(default_factory=list)
    only_baseline: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def worse(self) -> list[str]:
        return [a.algo for a in self.algos if a.verdict == "worse"]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["worse"] = self.worse
        out["passed"] = not self.worse
        out["rule_says"] = RULES[self.rule]
        return out


def _triple(interval: Any) -> tuple[float, float, float]:
    """(point, lower, upper) as floats, from an ``Interval`` of scalars or of one-element arrays."""
    import numpy as np

    return tuple(float(np.ravel(x)[0]) for x in interval)  # type: ignore[return-value]


def _verdict(rule: str, cand: tuple[float, float, float], base: tuple[float, float, float],
             poi: tuple[float, float, float]) -> str:  # fmt: skip
    if rule == "iqm":
        return "worse" if cand[2] < base[1] else "better" if cand[1] > base[2] else "same"
    return "worse" if poi[2] < 0.5 else "better" if poi[1] > 0.5 else "same"


@contextmanager
def _baseline_store(source: str, suite: str) -> Iterator[tuple[Any, str, str]]:
    """The baseline's store, its suite name and a label: another store (a ``.duckdb`` file, read as is), or a
    bundle (folder, ``http(s)://`` or ``s3://`` URL, ``bundle:`` prefix optional) imported into a temporary
    store that is removed afterwards."""
    from .importers.bundle_source import import_bundle
    from .store import Store

    text = source[len("bundle:"):] if source.startswith("bundle:") else source  # fmt: skip
    path = Path(text)
    if "://" not in text and path.is_file():
        if path.suffix not in (".duckdb", ".db"):
            raise UsageError(f"--baseline {source}: a file that is not a DuckDB store (.duckdb); give a store, "
                             "a bundle folder or a bundle URL")  # fmt: skip
        yield Store(path), suite, f"store {path}"
        return
    if "://" not in text and not path.exists():
        raise UsageError(f"--baseline {source}: no such store, bundle folder or URL; give a .duckdb file, a "
                         "bundle folder (rlbench fetch --format bundle) or an http(s):// or s3:// bundle URL")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rlbench-check-") as tmp:
        store = Store(Path(tmp) / "baseline.duckdb")
        try:
            imported = import_bundle(store, text, into=None)
        except RlbenchError as e:
            raise UsageError(f"--baseline {source}: {e}") from None
        yield store, imported.suite, f"bundle {text}"


def _frame(store: Any, suite: str, metric: str, rule: str, drop_first: int) -> Any:
    from .analysis import load_scores, shared_reader

    with shared_reader(store) as reads:
        frame, _ = load_scores(reads, suite, metric, rule, drop_first)
    return frame


def check_suite(
    store: Any,
    suite: str,
    baseline: str,
    *,
    rule: str = "iqm",
    reps: int = 50_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> GateResult:
    """Compares a suite's finished runs in ``store`` (the candidate) with the same suite's runs in
    ``baseline``, per algorithm label, on the tasks both have, scored by the candidate suite's metric, score
    rule and normalisation (the baseline's runs are scored the same way).

    Raises:
        UsageError: an unknown rule, an unreachable baseline, or no algorithm of the suite in the baseline.
    """
    from . import bootstrap, stats
    from .analysis import load_suite

    if rule not in RULES:
        raise UsageError(f"--rule {rule}: use one of {', '.join(RULES)}")
    cand = load_suite(store, suite, rows=False, kinds=False)
    with _baseline_store(baseline, suite) as (base_store, base_suite, label):
        try:
            base_frame = _frame(base_store, base_suite, cand.metric, cand.rule, cand.drop_first)
        except RlbenchError as e:
            raise UsageError(f"--baseline {baseline}: {e}") from None
    frame = cand.frame
    cand_tasks = frame.groupby("algo", observed=True)["env"].agg(lambda s: set(map(str, s))).to_dict()
    base_tasks = base_frame.groupby("algo", observed=True)["env"].agg(lambda s: set(map(str, s))).to_dict()
    shared = sorted(a for a in cand_tasks if a in base_tasks and cand_tasks[a] & base_tasks[a])
    if not shared:
        raise UsageError(
            f"--baseline {baseline}: it holds no run of suite {suite!r}'s algorithms on the suite's tasks "
            f"(candidate: {', '.join(sorted(map(str, cand_tasks))) or 'none'}; baseline: "
            f"{', '.join(sorted(map(str, base_tasks))) or 'none'}); point it at this suite's baseline"
        )
    import pandas as pd

    verdicts, notes, normalized = [], [], None
    for algo in shared:
        tasks = sorted(cand_tasks[algo] & base_tasks[algo])
        sides = []
        for side, rows in (("candidate", frame), ("baseline", base_frame)):
            part = rows[(rows["algo"].astype(str) == algo) & rows["env"].astype(str).isin(tasks)].copy()
            part["algo"] = side
            sides.append(part)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", stats.StatsWarning)
            table = stats.score_table(pd.concat(sides, ignore_index=True), rule=cand.rule,
                                      drop_first=cand.drop_first, normalize=cand.normalize, metric=cand.metric)  # fmt: skip
        notes += [f"{algo}: {w.message}" for w in caught if issubclass(w.category, stats.StatsWarning)]
        normalized = table.normalized
        c, b = table.scores.get("candidate"), table.scores.get("baseline")
        if c is None or b is None:
            notes.append(f"{algo}: left out (no seed on every shared task on one side)")
            continue
        ivs = bootstrap.interval_estimates({f"{algo}|candidate": c, f"{algo}|baseline": b}, ["iqm"], reps,
                                           confidence, seed)  # fmt: skip
        iv_c, iv_b = (ivs[f"{algo}|{s}"] for s in ("candidate", "baseline"))
        p = bootstrap.poi_interval(
            c, b, min(reps, POI_REPS), confidence, seed, key=f"{algo}|candidate>baseline"
        )
        ic, ib, pp = _triple(iv_c), _triple(iv_b), _triple(p)
        verdicts.append(AlgoVerdict(algo=algo, tasks=tasks, runs_candidate=int(c.shape[0]),
                                    runs_baseline=int(b.shape[0]), iqm_candidate=ic, iqm_baseline=ib, poi=pp,
                                    verdict=_verdict(rule, ic, ib, pp)))  # fmt: skip
    return GateResult(suite=suite, baseline=label, rule=rule, metric=cand.metric, score_rule=cand.rule,
                      normalized=normalized, reps=reps, seed=seed, confidence=confidence, algos=verdicts,
                      only_candidate=sorted(str(a) for a in cand_tasks if a not in base_tasks),
                      only_baseline=sorted(str(a) for a in base_tasks if a not in cand_tasks),
                      notes=list(dict.fromkeys(notes)))  # fmt: skip


def _iv(t: tuple[float, float, float], digits: int = 2) -> str:
    return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def to_markdown(result: GateResult) -> str:
    """A short markdown summary, fit for a pull-request comment."""
    pct = f"{result.confidence:.0%}"
    scores = f"{result.metric}, rule {result.score_rule}, " + (
        f"normalised ({result.normalized})" if result.normalized else "raw scores"
    )
    symbol = {"worse": "❌ worse", "better": "✅ better", "same": "no change detected"}
    lines = [
        f"### rlbench check: {result.suite} against {result.baseline}",
        "",
        f"Scores: {scores}. Intervals: {pct} stratified bootstrap ({result.reps:,} reps for the IQM, "
        f"{min(result.reps, POI_REPS):,} for P(improve)), seed {result.seed}. Rule `{result.rule}`: an "
        f"algorithm got worse when {RULES[result.rule]}.",
        "",
        "| algo | tasks | runs (candidate / baseline) | IQM candidate | IQM baseline | P(candidate > baseline) "
        "| verdict |",
        "|:--|--:|--:|--:|--:|--:|:--|",
    ]
    for a in result.algos:
        lines.append(f"| {a.algo} | {len(a.tasks)} | {a.runs_candidate} / {a.runs_baseline} | "
                     f"{_iv(a.iqm_candidate)} | {_iv(a.iqm_baseline)} | {_iv(a.poi, 3)} | {symbol[a.verdict]} |")  # fmt: skip
    lines.append("")
    if result.only_candidate:
        lines.append(f"Not in the baseline (not checked): {', '.join(result.only_candidate)}.")
    if result.only_baseline:
        lines.append(f"In the baseline only (no candidate runs): {', '.join(result.only_baseline)}.")
    lines += [f"Note: {n}" for n in result.notes]
    worse = result.worse
    lines.append(
        f"**FAILED**: {len(worse)} algorithm(s) got worse: {', '.join(worse)}."
        if worse
        else f"**passed**: no algorithm got worse ({len(result.algos)} checked)."
    )
    return "\n".join(lines)
