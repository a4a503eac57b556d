"""rliable's four aggregates (median, IQM, mean, optimality gap) on batches of stratified bootstrap replicates,
and their intervals (``interval_estimates``, rliable's ``get_interval_estimates``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from rlbench_cli.bootstrap.core import (
    Interval,
    Rng,
    _check_common,
    _check_positive_int,
    _check_scores,
    _chunk_reps,
    _draw,
    _flat_indices,
    _rng,
    percentile_interval,
)
from rlbench_cli.bootstrap.threads import map_independent

METRICS: tuple[str, ...] = ("median", "iqm", "mean", "optimality_gap")
"""Names of the built-in aggregates, in rliable's usual order."""

BatchFunc = Callable[[np.ndarray], np.ndarray]
"""A vectorised statistic: batch of shape (reps, num_runs, num_tasks) -> values of shape (reps,)."""


def _median_last(values: np.ndarray) -> np.ndarray:
    """``np.median(values, axis=-1)`` for finite values: the middle element, or the mean of the two middle."""
    s = np.sort(values, axis=-1)
    m = s.shape[-1]
    if m % 2:
        return s[..., m // 2].copy()
    return (s[..., m // 2 - 1] + s[..., m // 2]) / 2.0


def batch_mean(batch: np.ndarray) -> np.ndarray:
    """Mean over tasks of the per-task mean over runs (``rliable.metrics.aggregate_mean``).

    Args:
        batch: Shape (..., num_runs, num_tasks).

    Returns:
        Shape (...).
    """
    return np.asarray(batch, dtype=np.float64).mean(axis=-2).mean(axis=-1)


def batch_median(batch: np.ndarray) -> np.ndarray:
    """Median over tasks of the per-task mean over runs (``rliable.metrics.aggregate_median``).

    Args:
        batch: Shape (..., num_runs, num_tasks), finite.

    Returns:
        Shape (...).
    """
    return _median_last(np.asarray(batch, dtype=np.float64).mean(axis=-2))


def _iqm_cuts(n: int) -> tuple[int, int]:
    # scipy.stats.trim_mean(a, 0.25, axis=None): lowercut = int(0.25 * n), keeps sorted[lowercut:n - lowercut]
    low = int(0.25 * n)
    return low, n - low


def batch_iqm(batch: np.ndarray) -> np.ndarray:
    """Interquartile mean over all runs and tasks (``rliable.metrics.aggregate_iqm``).

    Same trimming as ``scipy.stats.trim_mean(scores, 0.25, axis=None)``: of the n = num_runs * num_tasks
    sorted scores, drops ``int(0.25 * n)`` from each end and averages the rest.

    Args:
        batch: Shape (..., num_runs, num_tasks).

    Returns:
        Shape (...).
    """
    arr = np.asarray(batch, dtype=np.float64)
    flat = np.sort(arr.reshape(*arr.shape[:-2], -1), axis=-1)
    low, high = _iqm_cuts(flat.shape[-1])
    return flat[..., low:high].mean(axis=-1)


def batch_optimality_gap(batch: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``gamma - mean(min(scores, gamma))`` over all runs and tasks (``aggregate_optimality_gap``).

    Args:
        batch: Shape (..., num_runs, num_tasks).
        gamma: Threshold: scores above it count as ``gamma``.

    Returns:
        Shape (...).
    """
    arr = np.asarray(batch, dtype=np.float64)
    return gamma - np.minimum(arr, gamma).mean(axis=(-2, -1))


def _check_funcs(funcs: Sequence[str | BatchFunc] | str | BatchFunc) -> list[str | BatchFunc]:
    items = [funcs] if isinstance(funcs, str) or callable(funcs) else list(funcs)
    if not items:
        raise ValueError("funcs is empty: name at least one statistic.")
    for f in items:
        if isinstance(f, str) and f not in METRICS:
            raise ValueError(f"Unknown aggregate {f!r}; use one of {', '.join(METRICS)} or a callable.")
        if not isinstance(f, str) and not callable(f):
            raise TypeError(f"funcs items must be metric names or callables, got {type(f).__name__}.")
    return items


class _Ranks(NamedTuple):
    """A score matrix's values by rank: ``codes[i, j]`` is the rank of ``scores[i, j]`` among all its values
    (ties in row-major order), ``values`` those values sorted, so ``values[codes] == scores``."""

    codes: np.ndarray
    values: np.ndarray


def _ranks(arr: np.ndarray) -> _Ranks:
    size = arr.size
    dtype = np.uint16 if size <= np.iinfo(np.uint16).max + 1 else np.uint32
    order = np.argsort(arr.ravel(), kind="stable")
    codes = np.empty(size, dtype=dtype)
    codes[order] = np.arange(size, dtype=dtype)
    return _Ranks(codes.reshape(arr.shape), arr.ravel()[order])


def _aggregate(
    batch: np.ndarray,
    funcs: Sequence[str | BatchFunc],
    gamma: float,
    ranked: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """All statistics of a batch (reps, runs, tasks) -> (reps, len(funcs)), sharing the work between them.

    Consumes ``batch`` (sorts it in place for the IQM). With ``ranked`` = (the batch's rank codes, shape
    (reps, runs, tasks), and the sorted values, ``_Ranks``) the IQM sorts the small integer codes instead of
    the float64 values (several times faster) and reads the middle values back: the same sorted values in the
    same order, so the same mean, bit for bit.
    """
    reps = batch.shape[0]
    out = np.empty((reps, len(funcs)), dtype=np.float64)
    task_means = None
    iqm_cols = []
    for col, f in enumerate(funcs):
        if callable(f):
            out[:, col] = np.asarray(f(batch), dtype=np.float64).reshape(reps)
        elif f in ("mean", "median"):
            if task_means is None:
                task_means = batch.mean(axis=1)
            out[:, col] = task_means.mean(axis=1) if f == "mean" else _median_last(task_means)
        elif f == "optimality_gap":
            out[:, col] = gamma - np.minimum(batch, gamma).mean(axis=(1, 2))
        else:
            iqm_cols.append(col)
    if iqm_cols and ranked is not None:
        codes = ranked[0].reshape(reps, -1)
        # uint16 codes: numpy's stable sort is a radix sort, ~10% faster here (and the same order, of integers)
        codes.sort(axis=1, kind="stable" if codes.dtype.itemsize <= 2 else None)
        low, high = _iqm_cuts(codes.shape[1])
        out[:, iqm_cols] = ranked[1].take(codes[:, low:high]).mean(axis=1)[:, None]
    elif iqm_cols:  # last: sorts the batch in place
        flat = batch.reshape(reps, -1)
        flat.sort(axis=1)
        low, high = _iqm_cuts(flat.shape[1])
        out[:, iqm_cols] = flat[:, low:high].mean(axis=1)[:, None]
    return out


def bootstrap_distribution(
    scores: np.ndarray,
    funcs: Sequence[str | BatchFunc] | str | BatchFunc = METRICS,
    reps: int = 50000,
    rng: Rng | int = 0,
    gamma: float = 1.0,
    chunk_reps: int | None = None,
) -> np.ndarray:
    """Statistics of ``reps`` stratified bootstrap replicates of one score matrix.

    Args:
        scores: Shape (num_runs, num_tasks), finite.
        funcs: Metric names from ``METRICS`` (computed together, sharing sorts and per-task means) and/or
            callables mapping a batch (reps, num_runs, num_tasks) to (reps,) (``batch_iqm`` and friends work).
        reps: Replicates.
        rng: Generator or RandomState (used as is), or an integer seed (``derive_rng(seed)``).
        gamma: Threshold of ``"optimality_gap"``.
        chunk_reps: Replicates resampled at once (memory bound); the result does not depend on it.

    Returns:
        Shape (reps, len(funcs)).
    """
    arr = _check_scores(scores)
    items = _check_funcs(funcs)
    reps = _check_positive_int(reps, "reps")
    gen = _rng(rng, "")
    n, m = arr.shape
    step = _chunk_reps(n * m, chunk_reps)
    ranks = _ranks(arr) if "iqm" in items else None
    values = arr.ravel()
    out = np.empty((reps, len(items)), dtype=np.float64)
    for start in range(0, reps, step):
        stop = min(reps, start + step)
        flat = _flat_indices(_draw(gen, n, (stop - start, n, m)), m)
        ranked = None if ranks is None else (ranks.codes.ravel().take(flat), ranks.values)
        out[start:stop] = _aggregate(values.take(flat), items, float(gamma), ranked)
    return out


def interval_estimates(
    scores: Mapping[str, np.ndarray],
    funcs: Sequence[str | BatchFunc] | str | BatchFunc = METRICS,
    reps: int = 50000,
    confidence: float = 0.95,
    seed: int | Rng = 0,
    method: str = "percentile",
    *,
    gamma: float = 1.0,
    chunk_reps: int | None = None,
) -> dict[str, Interval]:
    """Point estimates and stratified bootstrap intervals (``rliable.library.get_interval_estimates``).

    Args:
        scores: ``{algo: ndarray of shape (num_runs, num_tasks)}``; algorithms may have different run counts.
        funcs: Statistics, see ``bootstrap_distribution``; ``METRICS`` gives rliable's four aggregates.
        reps: Bootstrap replicates per algorithm.
        confidence: Coverage of the intervals.
        seed: Integer: each algorithm gets ``derive_rng(seed, algo)``, so its interval does not depend on the
            other algorithms. A ``RandomState`` (or ``Generator``) is used for all algorithms in turn, in
            the order of ``scores``: ``RandomState(s)`` replays ``np.random.seed(s)`` + rliable on ``scores``.
        method: ``"percentile"`` (rliable's default) or ``"basic"``.
        gamma: Threshold of ``"optimality_gap"``.
        chunk_reps: Replicates resampled at once; the result does not depend on it.

    Returns:
        ``{algo: Interval(point, lower, upper)}``, each of shape (len(funcs),).
    """
    reps = _check_common(reps, confidence, method)
    items = _check_funcs(funcs)
    arrays = {algo: _check_scores(raw, f"scores[{algo!r}]") for algo, raw in scores.items()}

    def one(algo: str) -> Interval:
        arr = arrays[algo]
        point = _aggregate(arr[None].copy(), items, float(gamma))[0]
        dist = bootstrap_distribution(arr, items, reps, _rng(seed, str(algo)), gamma, chunk_reps)
        lower, upper = percentile_interval(dist, point, confidence, method)
        return Interval(point, lower, upper)

    return dict(zip(arrays, map_independent(one, arrays, seed)))
