"""Curves over training from metric rows: the IQM sample-efficiency curve (rliable's bootstrap) and the
learning curves (mean over seeds per task, with a bootstrap band of each point's mean)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from rlbench_cli.scoring import StatsError, _warn
from rlbench_cli.stats.intervals import _check_reps, bootstrap_seed
from rlbench_cli.stats.normalise import _normalise, _resolve_references
from rlbench_cli.stats.scores import _clean
from rlbench_cli.stats.tables import _check_unique_cells, _complete_seeds


def sample_efficiency(
    df: pd.DataFrame,
    normalize: str | None = "auto",
    reps: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """IQM over runs and tasks at each evaluation point, with stratified bootstrap intervals (rliable).

    Runs are aligned by evaluation index (the k-th evaluation of every run, ordered by step); the x value of
    point k is the median step of that point over the runs used. Runs are matched by seed across tasks as in
    ``score_table``, and every algorithm's curve keeps the evaluation indices all its runs have, i.e. stops
    at its shortest run (with a warning).
    Per algorithm, an array of shape (num_runs, num_tasks, num_points) is bootstrapped as rliable's
    ``get_interval_estimates`` does it, resampling runs independently per task and point (as rliable's own
    sample-efficiency curves do), from numpy's legacy generator seeded with ``bootstrap_seed(seed, algo)``:
    ``bootstrap.curve_interval`` replays exactly those replicates with the IQM of every point vectorised over
    a batch of them, so ``np.random.seed(bootstrap_seed(seed, algo))`` and rliable on the same array give
    the same curve and bands (up to floating-point summation order).

    Args:
        df: Tidy metric rows, columns ``run_id, algo, env, seed, step, value``.
        normalize: As in ``score_table`` (``"auto"``, ``None`` or a reference set name; a ``ScoreTable``'s
            ``resolved`` attribute can be passed to apply exactly its normalisation).
        reps: Bootstrap replications.
        seed: Bootstrap seed.
        confidence: Coverage of the percentile intervals.

    Returns:
        DataFrame with columns ``algo, step, estimate, lower, upper``, one row per algorithm and point.
    """
    from rlbench_cli import bootstrap

    _check_reps(reps, confidence)
    data = _clean(df)
    data["env"] = data["env"].astype(str)
    data["algo"] = data["algo"].astype(str)
    runs = data.groupby("run_id", sort=False)[["algo", "env", "seed"]].first().reset_index()
    _check_unique_cells(runs)
    tasks = sorted(runs["env"].unique())
    res = _resolve_references(tasks, normalize)
    data["norm"] = _normalise(data["value"], data["env"], res)
    seeds = _complete_seeds(runs, sorted(runs["algo"].unique()), tasks)
    cubes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for algo, algo_seeds in seeds.items():
        rows = data.loc[(data["algo"] == algo) & data["seed"].isin(algo_seeds)]
        n_runs = rows["run_id"].nunique()
        have = rows.groupby("index")["run_id"].nunique()
        common = have.index[have == n_runs]
        if len(common) < len(have):
            lengths = rows.groupby("run_id")["index"].max() + 1
            _warn(
                f"Algorithm {algo!r}: runs have {int(lengths.min())} to {int(lengths.max())} evaluation points "
                f"(or non-finite ones); its sample-efficiency curve keeps the {len(common)} evaluation "
                f"indices every run has."
            )
        if not len(common):
            continue
        rows = rows.loc[rows["index"].isin(common)]
        k = len(common)
        cube = (
            rows.set_index(["seed", "env", "index"])["norm"]
            .unstack("index")
            .reindex(pd.MultiIndex.from_product([algo_seeds, tasks], names=["seed", "env"]))
            .loc[:, common]
            .to_numpy(dtype=float)
            .reshape(len(algo_seeds), len(tasks), k)
        )
        cubes[algo] = (cube, rows.groupby("index")["step"].median().loc[common].to_numpy(dtype=float))
    if not cubes:
        raise StatsError(
            "No evaluation index is shared by all runs of any algorithm; no sample-efficiency curve."
        )

    def one(algo: str) -> pd.DataFrame:
        # rliable's get_interval_estimates({algo: cube}, IQM per point) after np.random.seed(bootstrap_seed),
        # replayed with a RandomState of that seed: the same replicates, one vectorised IQM per batch
        cube, steps = cubes[algo]
        est = bootstrap.curve_interval(
            cube, bootstrap.batch_iqm_per_point, reps=int(reps), confidence=confidence,
            seed=np.random.RandomState(bootstrap_seed(seed, algo)),
        )  # fmt: skip
        return pd.DataFrame({"algo": algo, "step": steps, "estimate": est.point, "lower": est.lower,
                             "upper": est.upper})  # fmt: skip

    # each algorithm has its own RandomState: independent, so on threads (an integer seed says so)
    return pd.concat(bootstrap.map_independent(one, cubes, int(seed)), ignore_index=True)


def learning_curves(
    df: pd.DataFrame, confidence: float = 0.95, reps: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Mean raw value over seeds at each evaluation point, per environment and algorithm.

    Runs are aligned by evaluation index (k-th evaluation, ordered by step); the step of point k is the
    median step over the runs that have it. The interval is a percentile bootstrap of the mean over the n
    runs that have point k (``reps`` resamples of the runs, seeded): unlike a t interval on 3 seeds it stays
    within the range of the observed values. Bounds equal the mean when n = 1. Values are raw, not normalised.

    Args:
        df: Tidy metric rows, columns ``run_id, algo, env, seed, step, value``.
        confidence: Coverage of the interval.
        reps: Bootstrap resamples per point.
        seed: Seed of the resampling (same seed, same bands).

    Returns:
        DataFrame with columns ``algo, env, step, mean, lower, upper, n``, sorted by env, algo, step.
    """
    if not 0 < confidence < 1:
        raise StatsError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")
    data = _clean(df)
    data["env"] = data["env"].astype(str)
    data["algo"] = data["algo"].astype(str)
    keys = ["env", "algo", "index"]
    # the points (env, algo, index) in sorted order, each point's runs in the table's order (a stable sort)
    data = data.sort_values(keys, kind="mergesort")
    cols = data[keys]
    starts = np.flatnonzero(cols.ne(cols.shift()).any(axis=1).to_numpy())
    counts = np.diff(np.append(starts, len(data)))
    values = data["value"].to_numpy(dtype=float)
    step_values = data["step"].to_numpy(dtype=float)
    mean, steps = np.empty(len(starts)), np.empty(len(starts))
    for sel, rows in _by_count(starts, counts):
        mean[sel] = values.take(rows).mean(axis=1)
        steps[sel] = np.median(step_values.take(rows), axis=1)
    lower, upper = _point_intervals(
        values, starts, counts, mean, confidence, reps, np.random.default_rng(seed)
    )
    first = data.iloc[starts]
    return pd.DataFrame({"algo": first["algo"].to_numpy(), "env": first["env"].to_numpy(), "step": steps,
                         "mean": mean, "lower": lower, "upper": upper, "n": counts.astype(np.int64)})  # fmt: skip


def _by_count(starts: np.ndarray, counts: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Points grouped by their number of rows n: (which points, their rows' positions, shape (points, n))."""
    for n in np.unique(counts):
        sel = np.flatnonzero(counts == n)
        yield sel, starts[sel, None] + np.arange(n)


# index draws of one batch of points (uint32, 4 MB; the take and the means hold 8 bytes a draw)
_POINT_DRAWS = 1 << 20


def _point_intervals(
    values: np.ndarray, starts: np.ndarray, counts: np.ndarray, mean: np.ndarray, confidence: float,
    reps: int, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A percentile bootstrap interval of each point's mean of ``values[starts[g]:starts[g] + counts[g]]``
    (``mean``, the bounds of single-run points), for all points at once.

    The numbers are those of one ``rng.integers(0, n, size=(reps, n))`` draw, ``values[idx].mean(axis=1)``
    and ``np.quantile`` per point with n > 1, in order: the draws of a batch of points come from one call
    (bounds repeated per point where n varies), which is the same stream, and as uint32 (the same 32-bit
    words as int64 draws below 2**32, in less time); means over the last axis of a (points, ..., n) array
    are the same sums as over each point's own array.
    """
    alpha = (1.0 - confidence) / 2.0
    lower, upper = mean.copy(), mean.copy()
    multi = np.flatnonzero(counts > 1)
    draws = reps * counts[multi]
    first_draw = np.cumsum(draws) - draws
    # a batch: the points whose first draw falls in the same _POINT_DRAWS-long stretch (at least one point)
    cuts = np.flatnonzero(np.diff(first_draw // _POINT_DRAWS)) + 1
    for batch in np.split(multi, cuts) if len(multi) else []:
        n_b = counts[batch]
        # a scalar bound where every point has the same n: the same draws, several times faster
        high = n_b[0] if (n_b == n_b[0]).all() else np.repeat(n_b, reps * n_b).astype(np.uint32)
        flat = rng.integers(0, high, size=int(reps * n_b.sum()), dtype=np.uint32)
        offsets = np.cumsum(reps * n_b) - reps * n_b
        for sel, pos in _by_count(offsets, reps * n_b):
            n = len(pos[0]) // reps
            means = values.take(starts[batch[sel], None, None] + flat.take(pos).reshape(len(sel), reps, n))
            q = np.quantile(means.mean(axis=2), [alpha, 1.0 - alpha], axis=1)
            lower[batch[sel]], upper[batch[sel]] = q[0], q[1]
    return lower, upper
