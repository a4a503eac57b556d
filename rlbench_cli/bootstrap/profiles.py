"""Performance profiles (fraction of runs, or of task means, above each threshold) with stratified bootstrap
bands (rliable's ``create_performance_profile``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rlbench_cli.bootstrap.core import (
    Interval,
    Rng,
    _check_common,
    _check_scores,
    _chunk_reps,
    _draw,
    _rng,
    percentile_interval,
    resample,
)
from rlbench_cli.bootstrap.threads import map_independent

_VARIANTS = ("run", "mean")


def _fraction_above(values: np.ndarray, taus_sorted: np.ndarray) -> np.ndarray:
    """Fraction of each row's values strictly above each tau: (reps, k) x (num_taus,) -> (reps, num_taus).

    ``searchsorted(taus, v, 'left')`` counts the taus strictly below v, i.e. v > taus[t] exactly for t below
    it; a per-row histogram of those counts, summed from the top, gives #(v > tau_t) for every t at once.
    """
    reps, k = values.shape
    below = np.searchsorted(taus_sorted, values.ravel(), side="left").reshape(reps, k)
    return _fraction_above_bins(below, taus_sorted.shape[0])


def _fraction_above_bins(below: np.ndarray, num_taus: int) -> np.ndarray:
    """``_fraction_above`` from each value's bin, ``searchsorted(taus_sorted, v, 'left')``: (reps, k) ->
    (reps, num_taus). A resampled run's bin is the bin of the run it copies, so the bins of a score matrix
    are computed once and resampled like its scores (a searchsorted of every resampled value is most of the
    cost otherwise). ``below`` is modified."""
    reps, k = below.shape
    below += (np.arange(reps, dtype=np.intp) * (num_taus + 1))[:, None]
    hist = np.bincount(below.ravel(), minlength=reps * (num_taus + 1)).reshape(reps, num_taus + 1)
    above = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]  # above[:, t] = #(count > t) = #(v > tau_t)
    return above[:, 1:] / k


def performance_profile(
    scores: Mapping[str, np.ndarray],
    taus: Sequence[float] | np.ndarray,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | Rng = 0,
    variant: str = "run",
    method: str = "percentile",
    *,
    chunk_reps: int | None = None,
) -> dict[str, Interval]:
    """Performance profiles with stratified bootstrap bands (``library.create_performance_profile``).

    Args:
        scores: ``{algo: ndarray of shape (num_runs, num_tasks)}``.
        taus: Thresholds, shape (num_taus,), any order.
        reps: Bootstrap replicates per algorithm.
        confidence: Coverage of the bands.
        seed: As in ``interval_estimates``.
        variant: ``"run"``: run-score distribution, the fraction of all runs x tasks scoring above tau
            (rliable's ``use_score_distribution=True``, its default). ``"mean"``: average-score distribution,
            the fraction of tasks whose mean over runs is above tau (``use_score_distribution=False``).
        method: ``"percentile"`` (rliable's default) or ``"basic"``.
        chunk_reps: Replicates resampled at once; the result does not depend on it.

    Returns:
        ``{algo: Interval(profile, lower, upper)}``, each of shape (num_taus,), in the order of ``taus``.
    """
    reps = _check_common(reps, confidence, method)
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(_VARIANTS)}, got {variant!r}.")
    tau_arr = np.asarray(taus, dtype=np.float64).ravel()
    if tau_arr.size == 0 or np.isnan(tau_arr).any():
        raise ValueError("taus must be a non-empty sequence of thresholds without NaN.")
    order = np.argsort(tau_arr, kind="stable")
    taus_sorted = tau_arr[order]
    unsort = np.empty_like(order)
    unsort[order] = np.arange(order.size)

    def profile(batch: np.ndarray) -> np.ndarray:  # (r, n, m) -> (r, num_taus), in sorted-tau order
        values = batch.reshape(batch.shape[0], -1) if variant == "run" else batch.mean(axis=1)
        return _fraction_above(values, taus_sorted)

    arrays = {algo: _check_scores(raw, f"scores[{algo!r}]") for algo, raw in scores.items()}

    def one(algo: str) -> Interval:
        arr = arrays[algo]
        n, m = arr.shape
        gen = _rng(seed, str(algo))
        point = profile(arr[None])[0]
        step = _chunk_reps(n * m, chunk_reps)
        dist = np.empty((reps, tau_arr.size), dtype=np.float64)
        bins = np.searchsorted(taus_sorted, arr, side="left") if variant == "run" else None
        for start in range(0, reps, step):
            stop = min(reps, start + step)
            idx = _draw(gen, n, (stop - start, n, m))
            if bins is not None:  # the same numbers as profile(resample(arr, idx)), without a searchsorted
                dist[start:stop] = _fraction_above_bins(
                    resample(bins, idx).reshape(stop - start, -1), taus_sorted.size
                )
            else:
                dist[start:stop] = profile(resample(arr, idx))
        lower, upper = percentile_interval(dist, point, confidence, method)
        return Interval(point[unsort], lower[unsort], upper[unsort])

    return dict(zip(arrays, map_independent(one, arrays, seed)))
