"""Paired comparisons by seed: one configuration against a baseline, where a seed fixes what both are scored on.

When two configurations share their seeds' evaluation episodes (the same games, starts or datasets per seed),
the per-seed difference ``b - a`` removes what the seed decides, and the tests below ask about that difference:

- ``sign_test``: how many seeds end above and below (ties dropped), exact binomial.
- ``wilcoxon``: the signed-rank test, as ``scipy.stats.wilcoxon``'s defaults compute it (zero differences
  dropped, no continuity correction, ``method="auto"``): the exact null distribution when no difference is zero
  or tied and there are at most 50; an exact enumeration of the 2^n sign flips (scipy's permutation test, which
  it runs for up to 13 differences) when some are; else the normal approximation with the tie correction.
- ``mean_diff_interval``: the mean difference with a seeded percentile bootstrap over the pairs.
- ``holm``: Holm's step-down adjustment of a family of p-values (``tests_in_family``: its size;
  ``joint_family``: one family of several steps' comparisons).
- ``paired_family``: every task (or algorithm) against a baseline one, within each algorithm (or task), from
  per-run scores; Holm's adjustment over the family. ``rlbench compare --paired`` prints it.

numpy and the standard library only; ``tests/unit/test_paired.py`` proves the tests equal to scipy's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..scoring import StatsError

ALTERNATIVES = ("two-sided", "greater", "less")
_EXACT_MAX = (
    50  # scipy's method="auto": the exact distribution up to this many differences, none zero or tied
)
_FLIPS_MAX = 13  # ... and all 2^n sign flips enumerated up to this many when some are
_CHUNK_ELEMENTS = 1 << 22


def _alternative(alternative: str) -> str:
    if alternative not in ALTERNATIVES:
        raise StatsError(f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}.")
    return alternative


def _tails(p_greater: float, p_less: float, alternative: str) -> float:
    if alternative == "greater":
        return p_greater
    if alternative == "less":
        return p_less
    return min(1.0, 2.0 * min(p_greater, p_less))


def sign_test(diffs: Sequence[float], alternative: str = "two-sided") -> float:
    """The exact sign test of the differences (zeros dropped): ``greater`` asks whether more are above zero.
    1.0 when every difference is zero."""
    d = np.asarray(diffs, dtype=np.float64)
    above, n = int((d > 0).sum()), int((d != 0).sum())
    if n == 0:
        return 1.0
    total = 2.0**n
    p_greater = sum(math.comb(n, i) for i in range(above, n + 1)) / total
    p_less = sum(math.comb(n, i) for i in range(0, above + 1)) / total
    return _tails(p_greater, p_less, _alternative(alternative))


def _midranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given the mean of their ranks."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _flip_counts(doubled: np.ndarray) -> np.ndarray:
    """How many of the 2^n sign assignments give each sum of the positive (doubled, integer) ranks."""
    counts = np.zeros(int(doubled.sum()) + 1, dtype=np.float64)  # at most 2^50 ways: exact in float64
    counts[0] = 1.0
    top = 0
    for r in doubled.astype(np.int64):
        top += int(r)
        counts[r : top + 1] = counts[r : top + 1] + counts[: top + 1 - r].copy()
    return counts


def wilcoxon(diffs: Sequence[float], alternative: str = "two-sided") -> float:
    """The Wilcoxon signed-rank test's p-value of the differences, equal to ``scipy.stats.wilcoxon(diffs,
    alternative=alternative)`` (see the module's note). ``greater``: the differences lean above zero. 1.0 when
    every difference is zero."""
    alternative = _alternative(alternative)
    d = np.asarray(diffs, dtype=np.float64)
    if not np.all(np.isfinite(d)):
        raise ValueError("differences must be finite.")
    total = len(d)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks = _midranks(np.abs(d))
    r_plus = float(ranks[d > 0].sum())
    tied = len(np.unique(np.abs(d))) < n
    exact = total <= _EXACT_MAX and not tied and n == total
    if exact or (total <= _FLIPS_MAX):
        doubled = np.rint(2.0 * ranks)
        counts = _flip_counts(doubled)
        whole = counts.sum()
        observed = 2.0 * r_plus
        sums = np.arange(len(counts), dtype=np.float64)
        tolerance = 1e-9 * max(1.0, observed)
        p_greater = float(counts[sums >= observed - tolerance].sum() / whole)
        p_less = float(counts[sums <= observed + tolerance].sum() / whole)
        return _tails(p_greater, p_less, alternative)
    mean = n * (n + 1) / 4.0
    _, tie_sizes = np.unique(np.abs(d), return_counts=True)
    variance = (n * (n + 1) * (2 * n + 1) - np.sum(tie_sizes**3 - tie_sizes) / 2.0) / 24.0
    z = (r_plus - mean) / math.sqrt(variance)
    p_greater, p_less = 0.5 * math.erfc(z / math.sqrt(2.0)), 0.5 * math.erfc(-z / math.sqrt(2.0))
    return _tails(p_greater, p_less, alternative)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values of one family, in the order given (None stays None and is not
    counted in the family)."""
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for k, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - k) * float(p)))
        out[i] = running
    return out


def tests_in_family(rows: Sequence[dict[str, Any]]) -> int:
    """How many of ``paired_family``'s rows Holm's correction counts: those with a test (not a comparison
    without a paired seed, or with every seed level)."""
    return sum(r.get("wilcoxon_p") is not None for r in rows)


def mean_diff_interval(
    diffs: Sequence[float], reps: int = 50_000, seed: int = 0, key: str = "", confidence: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean difference, the pairs resampled with replacement from
    ``bootstrap.derive_rng(seed, key)``."""
    from ..bootstrap import derive_rng, percentile_interval

    d = np.asarray(diffs, dtype=np.float64)
    if len(d) == 0:
        raise ValueError("no differences to resample.")
    rng = derive_rng(seed, key)
    means = np.empty(int(reps), dtype=np.float64)
    step = max(1, _CHUNK_ELEMENTS // len(d))
    for start in range(0, int(reps), step):
        stop = min(int(reps), start + step)
        means[start:stop] = d[rng.integers(0, len(d), size=(stop - start, len(d)))].mean(axis=1)
    lower, upper = percentile_interval(means, float(d.mean()), confidence)
    return float(lower), float(upper)


def smallest_p(off_level: int, alternative: str = "two-sided") -> float:
    """The smallest p-value the sign and exact Wilcoxon tests can give with ``off_level`` non-zero differences
    (all of them one way): ``1 / 2^n`` one-sided, ``2 / 2^n`` two-sided, at most 1 (the Wilcoxon test's normal
    approximation, used from 14 differences with ties, gives about as little)."""
    sides = 2.0 if _alternative(alternative) == "two-sided" else 1.0
    return min(1.0, sides / 2.0**off_level)


def _snap(diffs: np.ndarray, scale: float) -> np.ndarray:
    """Differences rounded to 10 significant digits of the scores' scale, so that the subtraction's last bits
    neither break a tie nor make a zero (0.6 - 0.45 and 0.35 - 0.2 differ there)."""
    if scale == 0 or not math.isfinite(scale):
        return diffs
    return np.round(diffs, 10 - math.ceil(math.log10(scale))) + 0.0


@dataclass(frozen=True)
class PairedTest:
    """One configuration (b) against its baseline (a) over the seeds both have. ``min_p``: the smallest p-value
    the tests could give with these seeds (``smallest_p``); at or above alpha, no outcome of them could have
    shown a difference."""

    seeds: tuple[int, ...]
    mean_a: float
    mean_b: float
    mean_diff: float
    lower: float
    upper: float
    above: int
    below: int
    tied: int
    sign_p: float | None  # None: every pair level, nothing to test (n = 0), and out of Holm's family
    wilcoxon_p: float | None
    min_p: float

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "seeds": list(self.seeds)}


def paired_test(
    a: dict[int, float],
    b: dict[int, float],
    alternative: str = "two-sided",
    reps: int = 50_000,
    seed: int = 0,
    key: str = "",
) -> PairedTest:
    """``b - a`` over the seeds in both (``{seed: score}``), in seed order: means, the mean difference with its
    95% bootstrap interval, the seeds above / below / level, the sign and Wilcoxon tests (None when every seed
    is level: no test, so not one of Holm's family). The differences are rounded to 10 significant digits of
    the scores' scale first (``_snap``), so ties are ties."""
    seeds = tuple(sorted(set(a) & set(b)))
    if not seeds:
        raise ValueError("no seed in both.")
    x = np.array([a[s] for s in seeds], dtype=np.float64)
    y = np.array([b[s] for s in seeds], dtype=np.float64)
    d = _snap(y - x, max(float(np.abs(x).max()), float(np.abs(y).max())))
    lower, upper = mean_diff_interval(d, reps, seed, key)
    off = int((d != 0).sum())  # none: nothing to test (scipy's binomtest refuses n = 0), no p-value
    return PairedTest(seeds=seeds, mean_a=float(x.mean()), mean_b=float(y.mean()), mean_diff=float(d.mean()),
                      lower=lower, upper=upper, above=int((d > 0).sum()), below=int((d < 0).sum()),
                      tied=int((d == 0).sum()), sign_p=sign_test(d, alternative) if off else None,
                      wilcoxon_p=wilcoxon(d, alternative) if off else None, min_p=smallest_p(off, alternative))  # fmt: skip


def _close(name: str, names: Sequence[str]) -> list[str]:
    """Up to 3 names that contain ``name``, else that difflib finds close."""
    import difflib

    return [n for n in sorted(names) if name in n][:3] or difflib.get_close_matches(name, list(names), 3, 0.5)


def resolve_baseline(baseline: str, tasks: Sequence[str], algos: Sequence[str]) -> tuple[str, str]:
    """``(dimension, name)``: whether ``baseline`` names a task or an algorithm (``task:NAME`` / ``algo:NAME``
    say which when a name is both).

    Raises:
        StatsError: it names neither (with the close names) or both, in one line.
    """
    for dimension in ("task", "algo"):
        if baseline.startswith(dimension + ":"):
            name = baseline[len(dimension) + 1 :]
            names = tasks if dimension == "task" else algos
            if name not in names:
                close = _close(name, names)
                hint = f"; close: {', '.join(close)}" if close else f"; there: {', '.join(sorted(names))}"
                raise StatsError(f"--paired {baseline!r}: no {dimension} {name!r} has finished runs{hint}")
            return dimension, name
    in_tasks, in_algos = baseline in tasks, baseline in algos
    if in_tasks and in_algos:
        raise StatsError(f"--paired {baseline!r} names both a task and an algorithm; write task:{baseline} or "
                         f"algo:{baseline}")  # fmt: skip
    if in_tasks or in_algos:
        return ("task" if in_tasks else "algo"), baseline
    close = _close(baseline, [*tasks, *algos])
    hint = (
        f"close: {', '.join(close)}"
        if close
        else f"tasks: {', '.join(sorted(tasks))}; algorithms: " + ", ".join(sorted(algos))
    )
    raise StatsError(f"--paired {baseline!r} names no task or algorithm with finished runs; {hint}")


def paired_family(
    scores: Any, baseline: str, alternative: str = "two-sided", reps: int = 50_000, seed: int = 0
) -> tuple[str, str, list[dict[str, Any]]]:
    """Every other task against the baseline task within each algorithm (or every other algorithm against the
    baseline algorithm within each task), paired by seed, with Holm's adjustment of the Wilcoxon p-values over
    all of them (the family).

    Args:
        scores: Per-run scores, a DataFrame with ``algo, env, seed, score`` (non-finite scores are left out).
        baseline: A task or algorithm label (see ``resolve_baseline``).
        alternative: Of both tests; ``greater``: the others score above the baseline.
        reps, seed: The mean difference's bootstrap (the generator keyed by group, baseline and other).

    Returns:
        ``(dimension, baseline, rows)``: ``"task"`` or ``"algo"``, the baseline's label, and one dict per comparison: ``group`` (the algorithm,
        or task, held fixed), ``baseline``, ``other``, ``pairs``, ``unpaired`` (seeds in one of the two only),
        ``PairedTest``'s fields and ``holm_p``; sorted by group and other.

    Raises:
        StatsError: an unknown baseline, or two runs of one configuration with the same seed.
    """
    _alternative(alternative)
    frame = scores.loc[np.isfinite(scores["score"].astype(float)), ["algo", "env", "seed", "score"]]
    tasks, algos = sorted(set(map(str, frame["env"]))), sorted(set(map(str, frame["algo"])))
    dimension, name = resolve_baseline(baseline, tasks, algos)
    across, within = ("env", "algo") if dimension == "task" else ("algo", "env")
    cells: dict[tuple[str, str], dict[int, float]] = {}
    for (algo, env, run_seed), score in zip(
        zip(frame["algo"], frame["env"], frame["seed"], strict=True), frame["score"], strict=True
    ):
        cell = cells.setdefault((str(algo), str(env)), {})
        if int(run_seed) in cell:
            raise StatsError(f"{algo} on {env} has two finished runs with seed {int(run_seed)}; pairing by seed "
                             f"needs one run per seed (fetch such runs into suites of their own)")  # fmt: skip
        cell[int(run_seed)] = float(score)
    rows: list[dict[str, Any]] = []
    groups = sorted({str(v) for v in frame.loc[frame[across] == name, within]})

    def cell(group: str, varied: str) -> dict[int, float]:
        return cells[(group, varied) if dimension == "task" else (varied, group)]

    for group in groups:
        base = cell(group, name)
        others = sorted({str(v) for v in frame.loc[frame[within] == group, across]} - {name})
        for other in others:
            mine = cell(group, other)
            row: dict[str, Any] = {"group": group, "baseline": name, "other": other,
                                   "pairs": len(set(base) & set(mine)),
                                   "unpaired": sorted(set(base) ^ set(mine))}  # fmt: skip
            if row["pairs"]:
                test = paired_test(base, mine, alternative, reps, seed, key=f"{group}|{name}|{other}")
                row.update(test.as_dict())
            rows.append(row)
    return dimension, name, _with_holm(rows)


def _with_holm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``holm_p``: Holm's adjustment of their Wilcoxon p-values as one family."""
    for row, p in zip(rows, holm([r.get("wilcoxon_p") for r in rows]), strict=True):
        row["holm_p"] = p
    return rows


def joint_family(families: Sequence[tuple[Any, Sequence[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """One family of several ``paired_family`` row lists, given as ``(step, rows)``: copies of the rows with
    ``step``, Holm's correction over all of them (``rlbench compare --paired`` with ``--step-max`` repeated)."""
    return _with_holm([{**r, "step": step} for step, rows in families for r in rows])
