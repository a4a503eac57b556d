"""The numbers published about the reference bundles, as data, checked against the bundles they come from.

``results/reference/claims.yaml`` lists every number the manual (README.md, docs/) and
results/reference/README.md print about a bundle in results/reference/: which bundle, algorithm, task,
statistic, seeds, and the number as printed, with the sentence it is printed in. This module reads that list (``load_claims``) and checks it the way a reader
would: each bundle's MANIFEST.sha256 (``check_manifest``), each claim re-scored from its bundle with rlbench's
own score path (``BundleScores``: the bundle imported into a store, ``analysis.load_scores`` /
``Store.run_scores``, ``stats.score_table``, ``leaderboard.per_task_table``, ``stats.aggregates`` with 50,000
reps and seed 0, as ``rlbench leaderboard`` does; ``check_value``), the seeds a claim names against the
bundle's runs (``check_seeds``) and the sentence against its document (``check_quote``). Every check returns
one line saying what is wrong, or None. ``seeds_per_cell`` counts the seeds per algorithm x task of a bundle,
to plan re-runs (``benchmarks/reference_seeds.py`` prints it).

Example::

    from rlbench_cli import claims

    published = claims.load_claims("results/reference/claims.yaml")
    with claims.BundleScores.opened("results/reference/lmrl-maze") as scores:
        for c in published.of("lmrl-maze"):
            print(c.label, claims.check_value(c, scores) or "ok")
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ImportInvalid, RlbenchError, UsageError

__all__ = [
    "AGGREGATES",
    "BOOTSTRAP_REPS",
    "BOOTSTRAP_SEED",
    "COUNTS",
    "PAIRED",
    "STATS",
    "BundleScores",
    "Claim",
    "Claims",
    "Skipped",
    "check_manifest",
    "check_quote",
    "check_cheap",
    "check_rule",
    "check_seeds",
    "check_value",
    "load_claims",
    "parse_printed",
    "report",
    "seeds_per_cell",
]

BOOTSTRAP_REPS = 50_000  # rlbench leaderboard's --reps default
BOOTSTRAP_SEED = 0  # rlbench leaderboard's --seed default
AGGREGATES = ("mean", "median", "iqm")
COUNTS = ("runs", "metric_rows", "seeds_per_cell", "total_duration_s", "duration_s")
PAIRED = ("mean_diff", "above", "below", "tied", "sign_p", "wilcoxon_p", "holm_p")  # rlbench compare --paired
STATS = (*AGGREGATES, "seed", *COUNTS, *PAIRED)
_KEYS = frozenset(
    "algo task stat metric rule step normalised percent seeds printed legacy baseline alternative family_steps".split()
)
_NUM = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?"
_INTERVAL = re.compile(rf"^({_NUM}) \[({_NUM}), ({_NUM})\]$")
_RANGE = re.compile(rf"^({_NUM})-(\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)$")


# -- the list -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """One published number (or list, range, interval) about one bundle.

    Attributes:
        bundle: The bundle's folder name in results/reference/.
        doc, quote: The document (a path from the repository root) and the sentence printing it.
        algo, task: Algorithm labels and task labels (``("all",)``: every task; empty: no filter).
        stat: One of ``STATS``.
        metric, rule: What is scored; None: the suite's (its stored score block).
        step: Score runs as if they ended at this step (None: their end).
        normalised: The suite's normalisation (``--normalize auto``) or raw scores.
        percent: Values x 100.
        seeds: The seeds the number is over.
        printed: The number as printed.
        legacy: Published before the rule (``check_rule``); counted, not enforced.
        baseline, alternative: Of a ``PAIRED`` statistic: the task (or algorithm) the claim's one task (or
            algorithm) is paired against by seed, as ``rlbench compare --paired BASELINE --alternative ...``
            prints it (Holm's family: every comparison against the baseline over the claim's seeds); raw
            scores (``normalised: false``), differences x 100 with ``percent``, p-values and counts as they are.
        family_steps: Of a ``holm_p`` claim: the steps whose comparisons form Holm's family (``rlbench compare
            --paired B --step-max S1 --step-max S2``), the claim's ``step`` among them; empty: one step's.
    """

    bundle: str
    doc: str
    quote: str
    algo: tuple[str, ...]
    task: tuple[str, ...]
    stat: str
    metric: str | None
    rule: str | None
    step: int | None
    normalised: bool
    percent: bool
    seeds: tuple[int, ...]
    printed: str
    legacy: bool
    baseline: str | None = None
    alternative: str = "two-sided"
    family_steps: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """What the claim is about, e.g. ``ilql on MazeFO-v0-mixed: iqm (normalised, seeds 0,1,2)``."""
        what = [self.stat]
        if self.stat not in COUNTS:
            what.append("normalised" if self.normalised else "raw")
        for key in ("metric", "rule"):
            if getattr(self, key):
                what.append(f"{key} {getattr(self, key)}")
        if self.step is not None:
            what.append(f"at step {self.step}")
        what.append("seeds " + ",".join(map(str, self.seeds)))
        if self.baseline is not None:
            what.append(f"against {self.baseline}, {self.alternative}")
        where = "/".join(self.algo) or "all algorithms"
        if self.task:
            where += " on " + "/".join(self.task)
        return f"{where}: {what[0]} ({', '.join(what[1:])})"

    @property
    def interval(self) -> bool:
        """Printed as ``X [LO, HI]``."""
        return bool(_INTERVAL.match(self.printed))


@dataclass(frozen=True)
class Skipped:
    """A number in a document not checked against a bundle, and why."""

    doc: str
    quote: str
    why: str


@dataclass
class Claims:
    """``claims.yaml`` read: the claims, the numbers skipped, the rule's minimum seeds, the repository root, and
    the rule for cheap runs (``cheap_run_s``: a bundle whose runs' median duration_s is under it needs
    ``cheap_min_seeds`` seeds in every cell, unless ``cheap_exempt`` names it with why), and the bundles each
    bundle's claims may pair against (``joins``: imported into its suite beside it)."""

    claims: list[Claim]
    skipped: list[Skipped]
    min_seeds: int
    root: Path
    bundles: list[str] = field(default_factory=list)
    cheap_run_s: float | None = None
    cheap_min_seeds: int = 10
    cheap_exempt: dict[str, str] = field(default_factory=dict)
    joins: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, bundle: str) -> list[Claim]:
        """The claims about one bundle, in file order."""
        return [c for c in self.claims if c.bundle == bundle]


def _as_tuple(value: Any, where: str, key: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, (str, int)):
        return (value,)
    raise UsageError(f"{where}: {key} must be a name or a list, not {value!r}")


def _claim(bundle: str, doc: str, quote: str, fields: dict[str, Any], where: str) -> Claim:
    unknown = sorted(set(fields) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    stat = fields.get("stat")
    if stat not in STATS:
        raise UsageError(f"{where}: stat {stat!r}; use one of {', '.join(STATS)}")
    printed = fields.get("printed")
    if not isinstance(printed, str) or not parse_printed(printed)[1]:
        raise UsageError(f'{where}: printed must be the number as printed, quoted (e.g. printed: "94.7")')
    algo = tuple(map(str, _as_tuple(fields.get("algo"), where, "algo")))
    if stat not in COUNTS and not algo:
        raise UsageError(f"{where}: a {stat} claim names its algo")
    seeds = _as_tuple(fields.get("seeds"), where, "seeds")
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise UsageError(f"{where}: seeds must be a list of integers, e.g. seeds: [0, 1, 2]")
    step = fields.get("step")
    if step is not None and not isinstance(step, int):
        raise UsageError(f"{where}: step must be an integer")
    task = tuple(map(str, _as_tuple(fields.get("task"), where, "task")))
    baseline, alternative = fields.get("baseline"), str(fields.get("alternative", "two-sided"))
    if (stat in PAIRED) != (baseline is not None):
        raise UsageError(f"{where}: baseline (a task or algorithm to pair against) goes with the paired stats "
                         f"{', '.join(PAIRED)}, and only with them")  # fmt: skip
    if stat in PAIRED and (len(algo) != 1 or len(task) != 1 or fields.get("normalised", True)):
        raise UsageError(f"{where}: a {stat} claim names one algo and one task, and is of raw scores "
                         f"(normalised: false)")  # fmt: skip
    if alternative not in ("two-sided", "greater", "less"):
        raise UsageError(f"{where}: alternative {alternative!r}; use two-sided, greater or less")
    family = _as_tuple(fields.get("family_steps"), where, "family_steps")
    if family and (stat != "holm_p" or step not in family or not all(isinstance(x, int) for x in family)):
        raise UsageError(f"{where}: family_steps (integer steps whose comparisons form Holm's family) goes with "
                         f"stat holm_p, and lists the claim's step")  # fmt: skip
    return Claim(bundle=bundle, doc=doc, quote=quote, algo=algo, task=task, stat=stat,
                 metric=fields.get("metric"), rule=fields.get("rule"), step=step,
                 normalised=bool(fields.get("normalised", True)), percent=bool(fields.get("percent", False)),
                 seeds=tuple(seeds), printed=printed, legacy=bool(fields.get("legacy", False)),
                 baseline=None if baseline is None else str(baseline), alternative=alternative,
                 family_steps=tuple(family))  # fmt: skip


def _defaults(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k in _KEYS}


def load_claims(path: str | Path) -> Claims:
    """Read a claims file (``results/reference/claims.yaml``'s layout: its header comment says it).

    Raises:
        UsageError: a key, statistic, printed number or seed list that is not what the file's layout says,
            naming the bundle and the quote.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"{path}: cannot be read as YAML ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("bundles"), dict):
        raise UsageError(f"{path}: no bundles: mapping; see the file's header for its layout")
    top = _defaults(data.get("defaults") or {})
    claims: list[Claim] = []
    joins: dict[str, tuple[str, ...]] = {}
    for bundle, node in data["bundles"].items():
        base = {**top, **_defaults(node)}
        joined = _as_tuple(node.get("joins"), f"{path}: {bundle}", "joins")
        unknown = [str(j) for j in joined if j not in data["bundles"] or j == bundle]
        if unknown:
            raise UsageError(f"{path}: {bundle}: joins {unknown[0]!r} is not another bundle of the file; "
                             f"list the bundles its claims pair against by their folder names")  # fmt: skip
        if joined:
            joins[bundle] = tuple(map(str, joined))
        for i, quote in enumerate(node.get("quotes") or [], 1):
            where = f"{path}: {bundle}, quote {i}"
            doc, text = quote.get("doc"), quote.get("text")
            if not doc or not text:
                raise UsageError(f"{where}: a quote needs doc (the document's path) and text (the sentence)")
            shared = {**base, **_defaults(quote)}
            for j, fields in enumerate(quote.get("claims") or [], 1):
                claims.append(
                    _claim(bundle, str(doc), str(text), {**shared, **fields}, f"{where}, claim {j}")
                )
    skipped = [Skipped(str(s["doc"]), str(s["text"]), str(s["why"])) for s in data.get("skipped") or []]
    rule = data.get("rule") or {}
    cheap = rule.get("cheap") or {}
    if not isinstance(cheap, dict) or not isinstance(cheap.get("exempt") or {}, dict):
        raise UsageError(
            f"{path}: rule.cheap must be a mapping (median_run_s, min_seeds, exempt: {{bundle: why}})"
        )
    return Claims(claims=claims, skipped=skipped, min_seeds=int(rule.get("min_seeds", 5)),
                  root=path.resolve().parents[2], bundles=list(data["bundles"]),
                  cheap_run_s=float(cheap["median_run_s"]) if "median_run_s" in cheap else None,
                  cheap_min_seeds=int(cheap.get("min_seeds", 10)),
                  cheap_exempt={str(k): str(v) for k, v in (cheap.get("exempt") or {}).items()},
                  joins=joins)  # fmt: skip


# -- printed numbers ------------------------------------------------------------------------------------
def _number(text: str) -> tuple[float, float]:
    """``"-1,172"`` -> (-1172.0, 0.5): the value and half a unit of its last printed digit."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return float(text.replace(",", "")), 0.5 * 10.0**-decimals


def parse_printed(printed: str) -> tuple[str, list[tuple[float, float]]]:
    """A printed number -> its form and numbers: ``("interval", [est, lower, upper])`` for ``X [LO, HI]``,
    ``("range", [lo, hi])`` for ``LO-HI``, else ``("values", [...])``: every number in it, in order
    (``A, B, C``, ``A / B``, ``A and B``). Each number comes with half a unit of its last printed digit."""
    text = printed.strip()
    m = _INTERVAL.match(text)
    if m:
        return "interval", [_number(g) for g in m.groups()]
    m = _RANGE.match(text)
    if m:
        return "range", [_number(g) for g in m.groups()]
    return "values", [_number(g) for g in re.findall(_NUM, text)]


def _matches(value: float, printed: tuple[float, float]) -> bool:
    number, half = printed
    return math.isfinite(value) and abs(value - number) <= half + 1e-9 * max(1.0, abs(number))


def _show(values: list[float]) -> str:
    return ", ".join(f"{v:.6g}" if abs(v) < 1e5 else f"{v:,.1f}" for v in values)


# -- checks ---------------------------------------------------------------------------------------------
def check_manifest(folder: str | Path) -> tuple[bool, str | None]:
    """``(has a manifest, problem)``: the bundle's files against its MANIFEST.sha256 (``bundle.verify``).
    The problem is one line naming the bundle and the file, or None."""
    from .bundle import verify

    folder = Path(folder)
    try:
        return verify(folder, folder.name), None
    except ImportInvalid as e:
        return True, f"bundle {folder.name}: {e}"


def _normalise_space(text: str) -> str:
    return " ".join(text.split())


def check_quote(claim: Claim | Skipped, root: str | Path) -> str | None:
    """The claim's sentence is in its document (whitespace aside), and its printed numbers are in the sentence;
    else one line saying which is not."""
    doc = Path(root) / claim.doc
    try:
        text = _normalise_space(doc.read_text(encoding="utf-8"))
    except OSError:
        return f"{claim.doc}: cannot be read"
    quote = _normalise_space(claim.quote)
    bundle = getattr(claim, "bundle", "skipped")
    if quote not in text:
        return f'bundle {bundle}: {claim.doc} no longer says "{quote}"'
    if isinstance(claim, Claim) and not re.search(
        rf"(?<![\d.,]){re.escape(claim.printed)}(?!\d|[.,]\d)", quote
    ):
        return f'bundle {bundle}: "{claim.printed}" is not in its quote "{quote}"'
    return None


def check_rule(claim: Claim, min_seeds: int) -> str | None:
    """The rule for new claims: an aggregate is an IQM with its interval over at least ``min_seeds`` seeds.
    None when the claim meets it (or is not an aggregate), else why not."""
    if claim.stat not in AGGREGATES:
        return None
    why = []
    if claim.stat != "iqm" or not claim.interval:
        why.append("an IQM without its interval" if claim.stat == "iqm" else f"a {claim.stat}")
    if len(claim.seeds) < min_seeds:
        why.append(f"over {len(claim.seeds)} seeds")
    if not why:
        return None
    reasons = " and ".join(why)
    return (f'bundle {claim.bundle}: {claim.label} "{claim.printed}": {reasons}; publish an IQM with its 95% '
            f"interval over at least {min_seeds} seeds (or mark it legacy: true)")  # fmt: skip


def median_run_s(folder: str | Path) -> float | None:
    """The median duration_s of a bundle's finished runs (None: no run records one)."""
    import statistics

    import pyarrow.parquet as pq

    table = pq.read_table(Path(folder) / "runs.parquet")
    columns = [c for c in ("duration_s", "status") if c in table.column_names]
    rows = table.select(columns).to_pylist()
    durations = [r["duration_s"] for r in rows
                 if r.get("status", "finished") == "finished" and r.get("duration_s") is not None]  # fmt: skip
    return statistics.median(durations) if durations else None


def _cheap(median: float | None, run_s: float | None) -> bool:
    """Runs of this median duration_s are cheap under a ``rule.cheap.median_run_s`` of ``run_s``."""
    return median is not None and run_s is not None and median < run_s


def check_cheap(folder: str | Path, run_s: float, min_seeds: int) -> list[str]:
    """The rule for cheap runs: a bundle whose runs' median duration_s is under ``run_s`` has at least
    ``min_seeds`` seeds in every algorithm x task cell. One line per cell short of it (empty: it holds, or the
    runs are not cheap)."""
    folder = Path(folder)
    median = median_run_s(folder)
    if not _cheap(median, run_s):
        return []
    return [f"bundle {folder.name}: {algo} on {task} has {len(seeds)} seeds, and a run takes {median:.1f} s (the "
            f"median, under {run_s:g} s: cheap); run {min_seeds} seeds, or name the bundle under rule.cheap.exempt "
            f"with why"
            for algo, task, seeds in seeds_per_cell(folder) if len(seeds) < min_seeds]  # fmt: skip


def seeds_per_cell(folder: str | Path) -> list[tuple[str, str, list[int]]]:
    """``[(algo, task, seeds)]`` of a bundle's finished runs, sorted by algo and task."""
    import pyarrow.parquet as pq

    table = pq.read_table(Path(folder) / "runs.parquet")
    columns = [c for c in ("algo", "env", "seed", "status") if c in table.column_names]
    runs = table.select(columns).to_pylist()
    cells: dict[tuple[str, str], set[int]] = {}
    for r in runs:
        if r.get("status", "finished") == "finished":
            cells.setdefault((str(r["algo"]), str(r["env"])), set()).add(int(r["seed"]))
    return [(a, t, sorted(s)) for (a, t), s in sorted(cells.items())]


def check_seeds(claim: Claim, cells: list[tuple[str, str, list[int]]]) -> list[str]:
    """One line for each seed the claim names that no finished run of its algorithms and tasks has."""
    tasks = {t for _, t, _ in cells} if claim.task in ((), ("all",)) else set(claim.task)
    algos = {a for a, _, _ in cells} if not claim.algo else set(claim.algo)
    have = {(a, t): set(s) for a, t, s in cells}
    out = []
    for algo in sorted(algos):
        for task in sorted(tasks):
            if claim.stat in COUNTS and (algo, task) not in have:
                continue  # counts filter: a label list need not cover every task
            for seed in claim.seeds:
                if seed not in have.get((algo, task), set()):
                    out.append(f'bundle {claim.bundle}: seed {seed} of {algo} on {task} is missing '
                               f'({claim.label} "{claim.printed}")')  # fmt: skip
    return out


# -- re-scoring -----------------------------------------------------------------------------------------
class BundleScores:
    """A bundle imported (``bundle:``, its suite config kept) into a store, scored as ``rlbench leaderboard``
    scores it; per-run tables are computed once per (metric, rule, step, normalisation)."""

    def __init__(self, store: Any, suite: str, folder: Path):
        self.store, self.suite, self.folder = store, suite, folder
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._runs: Any = None

    @classmethod
    @contextmanager
    def opened(cls, folder: str | Path, joins: tuple[str | Path, ...] = ()) -> Iterator[BundleScores]:
        """The bundle at ``folder`` imported into a temporary store, removed on exit; the bundles at ``joins``
        go into its suite beside it (``rlbench fetch --from bundle:DIR --into SUITE``), so a claim can pair
        a run of one with the run of the same seed in another (a control study against the study it
        controls). Counts stay the bundle's own.

        Raises:
            UsageError: a joined bundle has an algorithm label of the bundle's (their runs would mix).
        """
        from .analysis import shared_reader
        from .importers import import_source
        from .store import Store

        folder = Path(folder)
        labels = {algo for algo, _, _ in seeds_per_cell(folder)}
        for other in map(Path, joins):
            theirs = {algo for algo, _, _ in seeds_per_cell(other)}
            shared = sorted(labels & theirs)
            if shared:
                raise UsageError(f"{other.name} joins {folder.name}, but both have algorithm {shared[0]!r}: "
                                 f"a joined bundle's labels must differ from the bundle's")  # fmt: skip
            labels |= theirs
        with tempfile.TemporaryDirectory(prefix="rlbench-claims-") as tmp:
            store = Store(Path(tmp) / "claims.duckdb")
            result = import_source(store, f"bundle:{folder}", None)
            for other in joins:
                import_source(store, f"bundle:{other}", result.suite)
            with shared_reader(store) as reads:  # one connection for every claim's reads
                yield cls(reads, result.suite, folder)

    def runs(self) -> Any:
        """The bundle's runs.parquet as a DataFrame."""
        if self._runs is None:
            import pyarrow.parquet as pq

            columns = ["run_id", "algo", "env", "seed", "duration_s"]
            self._runs = pq.read_table(self.folder / "runs.parquet", columns=columns).to_pandas()
        return self._runs

    def _scored(self, claim: Claim) -> tuple[Any, ...]:
        """(per-run scores, rule, drop_first, normalisation, metric) of the claim's scoring, computed once."""
        from . import analysis

        metric, rule, drop_first = analysis.suite_scoring(
            self.store, self.suite, claim.metric, claim.rule, None
        )
        key = ("scores", metric, rule, drop_first, claim.step, claim.normalised)
        if key not in self._cache:  # what rlbench leaderboard scores, the rows bounded by the claim's step
            frame, _ = analysis.load_scores(self.store, self.suite, metric, rule, drop_first, claim.step)
            norm = (
                analysis.suite_normalize(self.store, self.suite, "auto", metric) if claim.normalised else None
            )
            self._cache[key] = (frame, rule, drop_first, norm, metric)
        return self._cache[key]

    def table(self, claim: Claim, matrices: bool = False, algos: tuple[str, ...] = (),
              tasks: tuple[str, ...] = ()) -> Any:  # fmt: skip
        """``stats.score_table`` of the claim's metric and rule over its seeds (and ``algos`` / ``tasks``
        when given), normalised as the claim says."""
        import warnings

        from . import stats

        frame, rule, drop_first, norm, metric = self._scored(claim)
        key = ("table", id(frame), claim.seeds, matrices, algos, tasks)
        if key not in self._cache:
            keep = frame["seed"].isin(claim.seeds)
            if algos:
                keep &= frame["algo"].isin(algos)
            if tasks:
                keep &= frame["env"].isin(tasks)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", stats.StatsWarning)
                self._cache[key] = stats.score_table(frame.loc[keep], rule=rule, drop_first=drop_first,
                                                     normalize=norm, metric=metric, matrices=matrices)  # fmt: skip
        return self._cache[key]

    def per_task(self, claim: Claim) -> Any:
        """``leaderboard.per_task_table`` (what ``rlbench leaderboard --per-task`` prints) of the claim's
        scoring over its seeds, indexed by (algo, task)."""
        from .leaderboard import per_task_table

        table = self.table(claim)
        key = ("per_task", id(table), claim.normalised)
        if key not in self._cache:
            frame = per_task_table(table.per_run, normalized=claim.normalised)
            self._cache[key] = frame.set_index(["algo", "task"])
        return self._cache[key]

    def values(self, claim: Claim) -> list[float]:
        """The claim's numbers recomputed: one per label (or per seed for ``seed``, per run for
        ``duration_s``), three (estimate, lower, upper) for an IQM printed with its interval."""
        if claim.stat in COUNTS:
            return self._count(claim)
        scale = 100.0 if claim.percent else 1.0
        if claim.stat in PAIRED:
            return self._paired(claim, scale)
        if claim.stat == "iqm":
            from . import stats

            tasks = () if claim.task == ("all",) else claim.task
            table = self.table(claim, matrices=True, algos=claim.algo, tasks=tasks)
            agg = stats.aggregates(table, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED)
            iqm = agg.loc[agg["metric"] == "iqm"].set_index("algo")
            if claim.interval:
                (algo,) = claim.algo
                return [scale * float(iqm.loc[algo, c]) for c in ("estimate", "lower", "upper")]
            return [scale * float(iqm.loc[a, "estimate"]) for a in claim.algo]
        (task,) = claim.task
        if claim.stat == "seed":
            (algo,) = claim.algo
            per_run = self.table(claim).per_run
            rows = per_run.loc[(per_run["algo"] == algo) & (per_run["env"] == task)].set_index("seed")
            missing = [s for s in claim.seeds if s not in rows.index]
            if missing:
                raise KeyError(f"no finished run of {algo} on {task} with seed {missing[0]}")
            column = "norm_score" if claim.normalised else "score"
            return [scale * float(rows.loc[s, column]) for s in claim.seeds]
        column = ("norm_" if claim.normalised else "") + claim.stat
        frame = self.per_task(claim)
        for algo in claim.algo:
            if (algo, task) not in frame.index:
                raise KeyError(f"no finished run of {algo} on {task} with the metric")
        return [scale * float(frame.loc[(a, task), column]) for a in claim.algo]

    def _family(self, claim: Claim) -> tuple[str, str, list[dict[str, Any]]]:
        """``stats.paired_family`` of the claim's seeds' raw scores (at its step), computed once."""
        from . import stats

        frame = self._scored(claim)[0]
        key = ("paired", id(frame), claim.seeds, claim.baseline, claim.alternative)
        if key not in self._cache:
            mine = frame.loc[frame["seed"].isin(claim.seeds)]
            self._cache[key] = stats.paired_family(mine, str(claim.baseline), claim.alternative,
                                                   BOOTSTRAP_REPS, BOOTSTRAP_SEED)  # fmt: skip
        return self._cache[key]

    def _paired(self, claim: Claim, scale: float) -> list[float]:
        """A ``PAIRED`` claim's numbers from ``stats.paired_family`` of its seeds' raw scores."""
        from . import stats

        dimension, _, rows = self._family(claim)
        (algo,), (task,) = claim.algo, claim.task
        group, other = (algo, task) if dimension == "task" else (task, algo)
        row = next((r for r in rows if r["group"] == group and r["other"] == other), None)
        if row is None:
            raise KeyError(f"no comparison of {other} against {claim.baseline} within {group}")
        if row["pairs"] != len(claim.seeds):
            raise KeyError(f"{row['pairs']} of the claim's {len(claim.seeds)} seeds are paired "
                           f"(unpaired: {', '.join(map(str, row['unpaired']))})")  # fmt: skip
        if claim.stat == "mean_diff":
            fields = ("mean_diff", "lower", "upper") if claim.interval else ("mean_diff",)
            return [scale * float(row[f]) for f in fields]
        if claim.family_steps:  # Holm over every step's comparisons, as compare --paired with --step-max each
            joint = stats.joint_family(
                [(s, self._family(replace(claim, step=s))[2]) for s in claim.family_steps]
            )
            (row,) = [r for r in joint if (r["step"], r["group"], r["other"]) == (claim.step, group, other)]
        return [float(row[claim.stat])]

    def _count(self, claim: Claim) -> list[float]:
        runs = self.runs()
        runs = runs.loc[runs["seed"].isin(claim.seeds)]
        if claim.algo:
            runs = runs.loc[runs["algo"].isin(claim.algo)]
        if claim.task not in ((), ("all",)):
            runs = runs.loc[runs["env"].isin(claim.task)]
        if claim.stat == "runs":
            return [float(len(runs))]
        if claim.stat == "metric_rows":
            import pyarrow.parquet as pq

            ids = pq.read_table(self.folder / "metrics.parquet", columns=["run_id"]).to_pandas()["run_id"]
            return [float(ids.isin(set(runs["run_id"])).sum())]
        if claim.stat == "seeds_per_cell":
            return sorted({float(n) for n in runs.groupby(["algo", "env"])["seed"].nunique()})
        if claim.stat == "total_duration_s":
            return [float(runs["duration_s"].sum())]
        return sorted(float(d) for d in runs["duration_s"])


def check_value(claim: Claim, scores: BundleScores) -> str | None:
    """The claim's printed number against its bundle, re-scored; one line naming the bundle, the claim and
    both numbers when they differ, else None."""
    try:
        got = scores.values(claim)
    except (KeyError, ValueError, RlbenchError) as e:
        why = e.args[0] if isinstance(e, KeyError) and e.args else e
        return f"bundle {claim.bundle}: {claim.label}: cannot be recomputed ({type(e).__name__}: {why})"
    form, printed = parse_printed(claim.printed)
    if form == "range":
        got = [min(got), max(got)] if got else []
    ok = len(got) == len(printed) and all(_matches(v, p) for v, p in zip(got, printed, strict=True))
    if ok:
        return None
    return f"bundle {claim.bundle}: {claim.label}: printed {claim.printed}, recomputed {_show(got)}"


def _seed_list(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def report(path: str | Path) -> str:
    """What is left to re-run: per bundle of a claims file, its claims (how many are legacy, i.e. do not meet
    the rule yet), its runs' median duration and the seeds of each algorithm x task, flagging cells under the
    rule's minimum (``rule.cheap``'s where the runs are cheap)."""
    published = load_claims(path)
    reference = Path(path).parent
    lines = []
    for bundle in published.bundles:
        mine = published.of(bundle)
        legacy = sum(c.legacy for c in mine)
        if not (reference / bundle / "runs.parquet").is_file():
            lines.append(f"{bundle}: {len(mine)} claims; no bundle at {reference / bundle} (no runs.parquet)")
            continue
        has, problem = check_manifest(reference / bundle)
        manifest = problem or ("MANIFEST.sha256 checks" if has else "no MANIFEST.sha256")
        lines.append(
            f"{bundle}: {len(mine)} claims, {legacy} legacy (aggregates not meeting the rule); {manifest}"
        )
        median = median_run_s(reference / bundle)
        cheap = _cheap(median, published.cheap_run_s)
        need = published.cheap_min_seeds if cheap else published.min_seeds
        if median is not None:
            why = published.cheap_exempt.get(bundle)
            note = f" (cheap: {need} seeds{f'; exempt: {why}' if why else ''})" if cheap else ""
            lines.append(f"  runs: a median of {median:.1f} s{note}")
        cells = seeds_per_cell(reference / bundle)
        width = max([4] + [len(a) for a, _, _ in cells])
        twidth = max([4] + [len(t) for _, t, _ in cells])
        lines.append(f"  {'algo':<{width}}  {'task':<{twidth}}  seeds")
        for algo, task, seeds in cells:
            short = f"  (< {need})" if len(seeds) < need else ""
            lines.append(f"  {algo:<{width}}  {task:<{twidth}}  {len(seeds)}: {_seed_list(seeds)}{short}")
    total = len(published.claims)
    legacy = sum(c.legacy for c in published.claims)
    lines.append(f"legacy claims: {legacy} of {total} (the rule: an aggregate is an IQM with its 95% interval "
                 f"over >= {published.min_seeds} seeds; counts and per-seed values are exempt)")  # fmt: skip
    return "\n".join(lines) + "\n"
