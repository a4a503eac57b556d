"""Statistics over training (a (num_runs, num_tasks, num_points) array) with a stratified bootstrap interval
at every point, as rliable resamples such an array for its sample-efficiency curves."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlbench_cli.bootstrap.aggregates import _iqm_cuts
from rlbench_cli.bootstrap.core import (
    Interval,
    Rng,
    _check_common,
    _check_positive_int,
    _chunk_reps,
    _draw,
    _rng,
    percentile_interval,
)


def _check_curves(scores: object) -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 3 or min(arr.shape) < 1:
        raise ValueError(
            f"curve scores must be a 3-D array of shape (num_runs, num_tasks, num_points) with at least one of "
            f"each, got shape {arr.shape}."
        )
    if not np.isfinite(arr).all():
        raise ValueError("curve scores contain NaN or infinite values; drop or fix them before resampling.")
    return np.ascontiguousarray(arr)


def batch_iqm_per_point(batch: np.ndarray) -> np.ndarray:
    """IQM over runs and tasks at every point: (..., num_runs, num_tasks, num_points) -> (..., num_points).

    At each point the same trimming as ``scipy.stats.trim_mean(scores[..., k], 0.25, axis=None)``
    (``rliable.metrics.aggregate_iqm``); sorts ``batch`` in place when it is a float64 array.
    """
    arr = np.asarray(batch, dtype=np.float64)
    flat = arr.reshape(*arr.shape[:-3], -1, arr.shape[-1])
    flat.sort(axis=-2)
    low, high = _iqm_cuts(flat.shape[-2])
    return flat[..., low:high, :].mean(axis=-2)


def curve_distribution(
    scores: np.ndarray,
    func: Callable[[np.ndarray], np.ndarray] = batch_iqm_per_point,
    reps: int = 2000,
    rng: Rng | int = 0,
    chunk_reps: int | None = None,
) -> np.ndarray:
    """A statistic of ``reps`` stratified bootstrap replicates of scores over training.

    Replicate ``r`` is ``scores[idx[r, i, j, k], j, k]`` (see the module's notes on curves): what rliable's
    ``get_interval_estimates`` resamples when given a 3-D array, drawn from ``rng`` in rliable's order.

    Args:
        scores: Shape (num_runs, num_tasks, num_points), finite.
        func: Batch (reps, num_runs, num_tasks, num_points) -> (reps, num_points); may modify the batch.
        reps: Replicates.
        rng: Generator or RandomState (used as is), or an integer seed (``derive_rng(seed)``).
        chunk_reps: Replicates resampled at once (memory bound); the result does not depend on it.

    Returns:
        Shape (reps, num_points).
    """
    arr = _check_curves(scores)
    reps = _check_positive_int(reps, "reps")
    gen = _rng(rng, "")
    n, m, points = arr.shape
    step = _chunk_reps(n * m * points, chunk_reps)
    cell = np.arange(m * points, dtype=np.intp).reshape(m, points)  # (task j, point k) within a run's row
    values = arr.ravel()
    out = np.empty((reps, points), dtype=np.float64)
    for start in range(0, reps, step):
        stop = min(reps, start + step)
        flat = _draw(gen, n, (stop - start, n, m, points)).astype(np.intp)
        flat *= m * points
        flat += cell
        out[start:stop] = func(values.take(flat))
    return out


def curve_interval(
    scores: np.ndarray,
    func: Callable[[np.ndarray], np.ndarray] = batch_iqm_per_point,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | Rng = 0,
    method: str = "percentile",
    *,
    key: str = "",
    chunk_reps: int | None = None,
) -> Interval:
    """A statistic over training with its stratified bootstrap interval at every point: rliable's
    ``get_interval_estimates({key: scores}, func)`` for a (num_runs, num_tasks, num_points) array, without
    its Python call per replicate.

    Args:
        scores: Shape (num_runs, num_tasks, num_points), finite.
        func: Batch (..., num_runs, num_tasks, num_points) -> (..., num_points); ``batch_iqm_per_point``
            gives rliable's IQM sample-efficiency curve.
        reps: Replicates.
        confidence: Coverage of the intervals.
        seed: Integer (``derive_rng(seed, key)``), or a ``RandomState`` / ``Generator`` used as is:
            ``RandomState(s)`` replays ``np.random.seed(s)`` + rliable on the same array.
        method: ``"percentile"`` (rliable's default) or ``"basic"``.
        key: What is resampled (an algorithm), for an integer ``seed``.
        chunk_reps: Replicates resampled at once; the result does not depend on it.

    Returns:
        ``Interval(point, lower, upper)``, each of shape (num_points,).
    """
    reps = _check_common(reps, confidence, method)
    arr = _check_curves(scores)
    point = np.asarray(func(arr[None].copy()), dtype=np.float64).reshape(-1)
    dist = curve_distribution(arr, func, reps, _rng(seed, key), chunk_reps)
    lower, upper = percentile_interval(dist, point, confidence, method)
    return Interval(point, lower, upper)
