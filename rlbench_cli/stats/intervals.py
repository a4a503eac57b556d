"""rliable's statistics of a score table with stratified bootstrap intervals (aggregates, probability of
improvement, performance profiles), computed by ``rlbench_cli.bootstrap``, and the bootstrap seeds."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pandas as pd

from rlbench_cli.scoring import StatsError
from rlbench_cli.stats.tables import METRICS, OPTIMALITY_GAP_GAMMA, ScoreTable


def bootstrap_seed(seed: int, key: str) -> list[int]:
    """The seed for numpy's global generator before bootstrapping ``key`` (an algorithm or ``"x|y"``).

    Derived from ``seed`` and a CRC32 of ``key``, so each algorithm (or pair) gets its own stream that does
    not depend on the other algorithms loaded. Pass it to ``np.random.seed``.
    """
    if int(seed) != seed or seed < 0 or seed >= 2**32:
        raise StatsError(f"Bootstrap seed must be an integer in [0, 2**32), got {seed!r}.")
    return [int(seed), zlib.crc32(key.encode("utf-8"))]


@contextmanager
def global_seed(seed: int | list[int]) -> Iterator[None]:
    """Seeds numpy's global generator (which rliable uses) and restores the previous state afterwards; for
    calling rliable itself reproducibly (the tests and the side-by-side benchmark)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _check_reps(reps: int, confidence: float = 0.95) -> None:
    if int(reps) != reps or reps < 1:
        raise StatsError(f"reps must be a positive integer, got {reps!r}.")
    if not 0 < confidence < 1:
        raise StatsError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")


def aggregates(table: ScoreTable, reps: int = 50000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """rliable's aggregates with stratified bootstrap confidence intervals, vectorised (``bootstrap``).

    Point estimates equal rliable's; intervals agree with rliable's within Monte Carlo error (tests compare
    them, and ``benchmarks/stats_speed.py`` times both). Each algorithm's replicates come from its own
    generator, ``bootstrap.derive_rng(seed, algo)``: the same seed gives identical intervals, and adding an
    algorithm leaves the others' intervals as they were.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs, num_tasks).
        reps: Bootstrap replications (rliable's default: 50,000).
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo, metric, estimate, lower, upper``: four rows per algorithm, metric in
        ``median, iqm, mean, optimality_gap``. Median and mean are of per-task means (rliable), IQM is the
        25% trimmed mean over all runs and tasks, optimality gap uses gamma = 1.0 x the table's scale (the
        high reference) and is NaN for raw scores (a fixed threshold means nothing on an unnormalised scale).
    """
    from rlbench_cli import bootstrap

    _check_reps(reps, confidence)
    gamma = OPTIMALITY_GAP_GAMMA * table.scale
    # raw scores have no optimality gap (NaN below): not bootstrapped. The other statistics do not depend on
    # which are computed together (the same replicates, each statistic on its own), so they are unchanged.
    funcs = METRICS if table.normalized is not None else tuple(m for m in METRICS if m != "optimality_gap")
    est = bootstrap.interval_estimates(
        {a: table.scores[a] for a in table.algos}, funcs, reps=int(reps), confidence=confidence, seed=seed,
        gamma=gamma,
    )  # fmt: skip
    rows = []
    for algo in table.algos:
        point, lower, upper = est[algo]
        for metric in METRICS:
            if metric not in funcs:
                rows.append((algo, metric, np.nan, np.nan, np.nan))
            else:
                i = funcs.index(metric)
                rows.append((algo, metric, float(point[i]), float(lower[i]), float(upper[i])))
    return pd.DataFrame(rows, columns=["algo", "metric", "estimate", "lower", "upper"])


def probability_of_improvement(
    table: ScoreTable, reps: int = 2000, seed: int = 0, confidence: float = 0.95
) -> pd.DataFrame:
    """Probability that a run of ``algo_x`` beats a run of ``algo_y`` on a task, averaged over tasks.

    rliable's estimator (Mann-Whitney U / (n_x n_y) per task, averaged over tasks), bootstrapped by the
    vectorised ``bootstrap.poi_interval`` (runs of x and y resampled independently per task, as rliable's
    StratifiedIndependentBootstrap does). Each unordered pair is bootstrapped once, with x before y in
    ``table.algos`` order and the generator ``derive_rng(seed, "x|y")``; the reverse pair reuses those
    replicates, since
    P(y > x) = 1 - P(x > y) on every replicate: its interval is ``[1 - upper, 1 - lower]`` and its point
    estimate is computed on (y, x). The two directions stay consistent.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs_algo, num_tasks).
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo_x, algo_y, estimate, lower, upper``, one row per ordered pair x != y.
        Empty when the table has fewer than two algorithms.
    """
    from rlbench_cli import bootstrap

    _check_reps(reps, confidence)
    rows = []
    algos = table.algos
    pairs = [(x, y) for i, x in enumerate(algos) for y in algos[i + 1 :]]
    intervals = bootstrap.map_independent(
        lambda p: bootstrap.poi_interval(table.scores[p[0]], table.scores[p[1]], reps=int(reps),
                                         confidence=confidence, seed=seed, key=f"{p[0]}|{p[1]}"),
        pairs, seed,
    )  # fmt: skip
    for (x, y), (point, lo, hi) in zip(pairs, intervals):
        sx, sy = table.scores[x], table.scores[y]
        rows.append((x, y, float(point), float(lo), float(hi)))
        rows.append(
            (y, x, float(bootstrap.probability_of_improvement(sy, sx)), 1.0 - float(hi), 1.0 - float(lo))
        )
    out = pd.DataFrame(rows, columns=["algo_x", "algo_y", "estimate", "lower", "upper"])
    order = {a: k for k, a in enumerate(algos)}
    out = out.sort_values(["algo_x", "algo_y"], key=lambda c: c.map(order), kind="mergesort")
    return out.reset_index(drop=True)


def default_taus(table: ScoreTable, num: int = 81) -> np.ndarray:
    """Thresholds for a performance profile: 0..max(1, best score) when normalised, else the score range."""
    values = np.concatenate([s.ravel() for s in table.scores.values()])
    if table.normalized:
        low, high = min(0.0, float(values.min())), max(table.scale, float(values.max()))
    else:
        low, high = float(values.min()), float(values.max())
        if high == low:
            low, high = low - 1.0, high + 1.0
    return np.linspace(low, high, num)


def performance_profile(
    table: ScoreTable,
    taus: Sequence[float] | np.ndarray | None = None,
    reps: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    variant: str = "run",
) -> pd.DataFrame:
    """Performance profiles with stratified bootstrap bands (rliable's, vectorised in ``bootstrap``).

    ``variant="run"``: the run-score distribution, the fraction of all runs x tasks scoring above tau
    (rliable's default). ``variant="mean"``: the average-score distribution, the fraction of tasks whose mean
    over runs is above tau. Each algorithm is resampled with its own generator ``derive_rng(seed, algo)``.

    Args:
        table: Scores, ``table.scores[algo]`` of shape (num_runs, num_tasks).
        taus: 1-D thresholds, shape (num_taus,); defaults to ``default_taus(table)``.
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile bands.
        variant: ``"run"`` or ``"mean"`` (see above).

    Returns:
        DataFrame with columns ``algo, tau, estimate, lower, upper``, num_taus rows per algorithm.
    """
    from rlbench_cli import bootstrap

    _check_reps(reps, confidence)
    tau_arr = default_taus(table) if taus is None else np.asarray(taus, dtype=float).ravel()
    if tau_arr.size == 0:
        raise StatsError("performance_profile needs at least one threshold tau.")
    prof = bootstrap.performance_profile(
        {a: table.scores[a] for a in table.algos}, tau_arr, reps=int(reps), confidence=confidence, seed=seed,
        variant=variant,
    )  # fmt: skip
    frames = []
    for algo in table.algos:
        point, lower, upper = prof[algo]
        frames.append(pd.DataFrame({"algo": algo, "tau": tau_arr, "estimate": np.asarray(point, float),
                                    "lower": np.asarray(lower, float), "upper": np.asarray(upper, float)}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)
