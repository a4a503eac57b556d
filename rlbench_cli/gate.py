"""``rlbench check``: a regression gate. A suite's runs of a candidate (this commit) against a baseline (a bundle
folder or URL, another store, or a git commit recorded in the store), per algorithm, on the suite's score rule
and normalisation.

An algorithm got worse when, under ``--rule iqm``, its IQM interval lies entirely below the baseline's, or,
under ``--rule poi``, the interval of the probability that a candidate run beats a baseline run lies entirely
below 0.5. Both are computed and printed whatever the rule; only the chosen one decides. The intervals are
rlbench's stratified bootstrap (``rlbench_cli.bootstrap``) with a fixed seed, so a check gives the same verdict
every time it is run on the same runs.

A commit as the baseline: every run records the git commit it ran at, but run ids leave it out, so the runs of
a new commit would be the old ones, skipped as finished. ``rlbench check SUITE --record`` (``record_baseline``)
therefore moves the suite's finished runs into one suite per commit, ``SUITE.commit-<sha12>`` (the bundle
machinery's copy with new run ids, as ``fetch --from bundle: --into`` makes it; run folders moved along, so
nothing recorded is lost) and leaves SUITE empty for the next commit's runs. ``--baseline commit:SHA`` (a
prefix of 4 or more hex digits, unambiguous) compares the suite's finished runs at other commits with the runs
recorded at that commit, in SUITE and its commit suites.
"""

from __future__ import annotations

import re
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import RlbenchError, UsageError

__all__ = [
    "RULES", "COMMIT", "AlgoVerdict", "GateResult", "Recorded", "check_suite", "to_markdown", "record_baseline",
    "recorded_text",
    "commit_suite", "resolve_commit",
]  # fmt: skip

RULES = {
    "iqm": "the candidate's IQM interval lies entirely below the baseline's",
    "poi": "the interval of P(a candidate run beats a baseline run) lies entirely below 0.5",
}
POI_REPS = 2000  # rliable's default for the probability of improvement
COMMIT = "commit:"  # --baseline commit:SHA
COMMIT_SUITE = ".commit-"  # SUITE.commit-<sha12>: a suite's runs recorded at one commit (--record)
_SHA = re.compile(r"^[0-9a-f]{4,40}$")


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
    candidate_commits: list[str] = field(
        default_factory=list
    )  # --baseline commit:SHA: the candidate's commits

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
    at = _commit_runs(store, suite, baseline) if baseline.startswith(COMMIT) else None
    cand = load_suite(store, suite, rows=False, kinds=False)
    frame, commits = cand.frame, []
    if at is not None:
        frame, base_frame, label, commits = _commit_sides(store, baseline, cand, *at)
    else:
        with _baseline_store(baseline, suite) as (base_store, base_suite, label):
            try:
                base_frame = _frame(base_store, base_suite, cand.metric, cand.rule, cand.drop_first)
            except RlbenchError as e:
                raise UsageError(f"--baseline {baseline}: {e}") from None
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
                      notes=list(dict.fromkeys(notes)), candidate_commits=commits)  # fmt: skip


# -- a git commit recorded in the store as the baseline ---------------------------------------------------
@dataclass
class Recorded:
    """What ``record_baseline`` moved: per commit, its suite and the runs moved there; and the suite's runs
    not finished, left where they are (the next ``rlbench run`` of the suite runs them again)."""

    suite: str
    commits: list[dict[str, Any]]  # {"commit", "suite", "runs"}
    left: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def commit_suite(suite: str, commit: str) -> str:
    """``SUITE.commit-<sha12>``: where ``--record`` keeps a suite's runs of one commit."""
    return f"{suite}{COMMIT_SUITE}{commit[:12]}"


def resolve_commit(prefix: str, commits: dict[str, int], flag: str) -> str:
    """The one commit of ``commits`` (full sha -> runs) that ``prefix`` starts; UsageError (one line, listing
    the commits there are) when none or several do."""
    found = sorted(c for c in commits if c.startswith(prefix))
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{flag}: {prefix} is ambiguous, it begins {', '.join(c[:12] for c in found)}; give "
                         "more digits")  # fmt: skip
    there = ", ".join(f"{c[:12]} ({n} runs)" for c, n in commits.items()) or "none"
    raise UsageError(f"{flag}: no finished run of the suite was recorded at a commit starting with {prefix} "
                     f"(commits in the store: {there}); record a commit's runs with rlbench check SUITE "
                     "--record")  # fmt: skip


def _commit_runs(store: Any, suite: str, baseline: str) -> tuple[str, dict[str, str], list[dict[str, Any]]]:
    """``--baseline commit:SHA``: (the commit's full sha, the baseline's runs there: run id -> suite (the suite
    and its commit suites), the candidate's runs: the suite's finished runs at other commits)."""
    prefix = baseline[len(COMMIT) :].strip().lower()
    if not _SHA.match(prefix):
        raise UsageError(f"--baseline {baseline}: give a git commit's sha or a prefix of it (4 to 40 hex digits), "
                         "e.g. --baseline commit:$(git rev-parse origin/main)")  # fmt: skip
    with store.reader() as con:
        store.require_suite(con, suite)
        family = [s for s in store.suites(con) if s == suite or s.startswith(suite + COMMIT_SUITE)]
        runs = [r for s in family for r in store.runs(con, s) if r["status"] == "finished"]
    runs.sort(key=lambda r: str(r["started_at"] or ""), reverse=True)  # the latest commits first
    counts: dict[str, int] = {}
    for r in runs:
        if r["git_commit"]:
            counts[r["git_commit"]] = counts.get(r["git_commit"], 0) + 1
    full = resolve_commit(prefix, counts, f"--baseline {baseline}")
    mine = [r for r in runs if r["suite"] == suite and r["git_commit"] != full]
    if not mine:
        raise UsageError(f"--baseline {baseline}: suite {suite!r} has no finished run at another commit than "
                         f"{full[:12]} to check; record its runs (rlbench check {suite} --record), run the "
                         "suite at the new commit, then check")  # fmt: skip
    return full, {r["run_id"]: r["suite"] for r in runs if r["git_commit"] == full}, mine


def _commit_sides(store: Any, baseline: str, cand: Any, full: str, base: dict[str, str],
                  mine: list[dict[str, Any]]) -> tuple[Any, Any, str, list[str]]:  # fmt: skip
    """(the candidate's scores, the baseline's, a label, the candidate's commits) of ``_commit_runs``'s runs."""
    import pandas as pd

    frames = []
    for name in sorted(set(base.values())):
        try:
            part = _frame(store, name, cand.metric, cand.rule, cand.drop_first)
        except RlbenchError as e:
            raise UsageError(f"--baseline {baseline}: {e}") from None
        frames.append(part[part["run_id"].isin(base)])
    frame = cand.frame[cand.frame["run_id"].isin({r["run_id"] for r in mine})]
    commits = list(dict.fromkeys((r["git_commit"] or "unknown")[:12] for r in mine))
    return frame, pd.concat(frames, ignore_index=True), f"commit {full[:12]}", commits


def record_baseline(store: Any, suite: str) -> Recorded:
    """``rlbench check SUITE --record``: the suite's finished runs moved into ``SUITE.commit-<sha12>``, one
    suite per commit they ran at, so that the suite runs again at the next commit and ``--baseline
    commit:SHA`` finds them. The runs are copied as ``fetch --from bundle:... --into`` copies them (new run
    ids, manifests and metric rows kept), their run folders moved along (policies, videos, logs); then they
    leave SUITE, all in one transaction. Run again after a crash, it finishes what it began.

    Raises:
        UsageError: a commit suite, no finished run, or a finished run that records no git commit.
        StoreBusy: an ``rlbench run`` of the suite is under way.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .coordinator import RunLock, runs_root
    from .importers.bundle_source import artifacts_of, load, named_runs, rekey

    if COMMIT_SUITE in suite:
        raise UsageError(f"--record: {suite!r} is already a commit's runs; record the suite itself")
    with RunLock(store.path, suite):
        with store.reader() as con:
            store.require_suite(con, suite)
            runs = store.runs(con, suite)
        done = [r for r in runs if r["status"] == "finished"]
        if not done:
            raise UsageError(f"--record: suite {suite!r} has no finished run to record; run it first "
                             "(rlbench run SUITE.yaml)")  # fmt: skip
        if any(not r["git_commit"] for r in done):
            n = sum(not r["git_commit"] for r in done)
            raise UsageError(f"--record: {n} finished run(s) of suite {suite!r} record no git commit (their suite "
                             "file was not in a git checkout when they ran); nothing recorded")  # fmt: skip
        by_commit: dict[str, list[str]] = {}
        for r in done:
            by_commit.setdefault(r["git_commit"], []).append(r["run_id"])
        root, moves, out = runs_root(store), [], []
        with tempfile.TemporaryDirectory(prefix="rlbench-record-") as tmp:
            with store.reader() as con:
                store.export_bundle(con, suite, Path(tmp))
            doc, table, metrics = load(Path(tmp), f"suite {suite}")
            artifacts = artifacts_of(Path(tmp), f"suite {suite}")
            for commit, ids in by_commit.items():
                name, keep = commit_suite(suite, commit), pa.array(ids, pa.string())
                part, rows, files = (None if t is None else t.filter(pc.is_in(t["run_id"], value_set=keep))
                                     for t in (table, metrics, artifacts))  # fmt: skip
                new, rows, files = rekey(part, rows, files, name)
                moves.append((commit, name, named_runs(new, name), rows, files))
                for old_id, new_id in zip(part["run_id"].to_pylist(), new["run_id"].to_pylist()):
                    src, dest = root / suite / old_id, root / name / new_id
                    if src.is_dir() and not dest.exists():  # moved before the rows: a rerun finds it done
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        src.rename(dest)
            with store.writer() as con, store.batch(con):
                for commit, name, new, rows, files in moves:
                    store.import_bundle(con, {**doc, "name": name}, new, rows,
                                        source=f"{suite} at commit {commit}", artifacts=files)  # fmt: skip
                    out.append({"commit": commit, "suite": name, "runs": new.num_rows})
                store.remove_runs(con, [i for ids in by_commit.values() for i in ids])
    return Recorded(suite=suite, commits=out, left=len(runs) - len(done))


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
        *(
            [f"Candidate: the suite's runs at commit {', '.join(result.candidate_commits)}.", ""]
            if result.candidate_commits
            else []
        ),
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


def recorded_text(rec: Recorded) -> str:
    """``--record``'s lines: where each commit's runs went, and how to check against them."""
    lines = [f"recorded {c['runs']} run(s) of {rec.suite} at commit {c['commit'][:12]} as suite {c['suite']}"
             for c in rec.commits]  # fmt: skip
    if rec.left:
        lines.append(
            f"left {rec.left} unfinished run(s) in {rec.suite}: the next rlbench run runs them again"
        )
    sha = rec.commits[0]["commit"][:12]
    lines.append(f"{rec.suite} is empty of finished runs: run it at the next commit, then rlbench check "
                 f"{rec.suite} --baseline commit:{sha}")  # fmt: skip
    return "\n".join(lines)
