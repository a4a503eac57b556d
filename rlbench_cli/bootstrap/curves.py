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


_CURVE_BLOCK = 1 << 21  # counts handled at once by run_curve_interval's IQM (8 MB an int32 buffer)


def run_counts(rng: Rng, num_runs: int, reps: int) -> np.ndarray:
    """How often each run is drawn in each of ``reps`` replicates that draw ``num_runs`` runs with
    replacement: shape (reps, num_runs), from ``_draw(rng, num_runs, (reps, num_runs))``'s indices."""
    idx = _draw(rng, num_runs, (reps, num_runs)).astype(np.intp)
    idx += (np.arange(reps, dtype=np.intp) * num_runs)[:, None]
    return np.bincount(idx.ravel(), minlength=reps * num_runs).reshape(reps, num_runs)


def run_curve_interval(
    curves: np.ndarray,
    stat: str = "iqm",
    reps: int = 1000,
    confidence: float = 0.95,
    seed: int | Rng = 0,
    *,
    key: str = "",
) -> Interval:
    """The IQM or mean over runs at every point with a bootstrap interval that resamples whole runs: a
    replicate draws ``num_runs`` runs with replacement (``run_counts``) and keeps each drawn run's whole
    curve, the same draw at every point (``curve_interval`` draws each point apart, rliable's way). What a
    replicate's statistic is: ``batch_iqm_per_point`` / the mean of ``curves[idx[r]][:, None, :]``, computed
    from the counts without building the resampled array (a weighted mean of each point's sorted values over
    the IQM's positions), so a band over 1,000 runs x 100 points costs milliseconds per 100 replicates.

    Args:
        curves: Shape (num_runs, num_points), finite.
        stat: ``iqm`` or ``mean``.
        reps: Replicates.
        confidence: Coverage of the percentile intervals.
        seed: Integer (``derive_rng(seed, key)``), or a generator used as is.
        key: What is resampled (a group of runs), for an integer ``seed``.

    Returns:
        ``Interval(point, lower, upper)``, each of shape (num_points,).
    """
    reps = _check_common(reps, confidence, "percentile")
    arr = _check_curves(np.asarray(curves, dtype=np.float64)[:, None, :])[:, 0, :]
    if stat not in ("iqm", "mean"):
        raise ValueError(f"stat must be 'iqm' or 'mean', got {stat!r}.")
    n, points = arr.shape
    counts = run_counts(_rng(seed, key), n, reps)
    if stat == "mean":
        point = arr.mean(axis=0)
        dist = counts.astype(np.float64) @ arr / n
    else:
        low, high = _iqm_cuts(n)
        order = np.argsort(arr, axis=0, kind="stable")
        ranked = np.take_along_axis(arr, order, axis=0)
        point = ranked[low:high].mean(axis=0)
        # A replicate's sorted sample is value k (in the point's order) repeated c[k] times; the IQM sums the
        # positions [low, high) of it. With E[k] = c[0] + ... + c[k] and C[k] = clip(E[k], low, high), value k
        # fills C[k] - C[k-1] of them, and summing by parts, sum_k (C[k] - C[k-1]) v[k] = high v[n-1] -
        # low v[0] + sum_{k < n-1} C[k] (v[k] - v[k+1]): a cumsum, a clip and a product per count.
        dist = np.empty((reps, points))
        gaps = ranked[:-1] - ranked[1:]  # (runs - 1, points)
        ends = high * ranked[-1] - low * ranked[0]
        by_rep = np.ascontiguousarray(counts, dtype=np.int32)  # (reps, runs)
        step = max(1, _CURVE_BLOCK // (n * reps))  # points at once: few numpy calls for small groups
        for q in range(0, points, step):
            cols = slice(q, min(points, q + step))
            c = np.take(by_rep, order[:, cols].T, axis=1)  # (reps, points, runs in the point's value order)
            np.cumsum(c, axis=-1, dtype=np.int32, out=c)  # along the last, contiguous axis: fast
            np.clip(c, low, high, out=c)
            weights = c[:, :, :-1].transpose(1, 0, 2).astype(np.float64)  # (points, reps, runs - 1)
            dist[:, cols] = np.matmul(weights, gaps[:, cols].T[:, :, None])[:, :, 0].T + ends[cols]
        dist /= high - low
    lower, upper = percentile_interval(dist, point, confidence, "percentile")
    return Interval(point, lower, upper)


_GEMM_RUNS = 32  # up to this many runs, a replicate's cumulative counts come from one matrix product
_BATCH_CELLS = 1 << 20  # replicate x point x run cells of the blocks computed together (8 MB of float64:
# smaller than 32 MB kept the products in cache, 15% less CPU for 500 groups of 20 seeds)


def run_curve_intervals(
    blocks: list[np.ndarray],
    keys: list[str],
    stat: str = "iqm",
    reps: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[Interval]:
    """``run_curve_interval`` of each block (with its key), the same intervals to the bit, faster for many
    small blocks (a UI's 500 groups of 20 seeds): blocks of one shape with at most ``_GEMM_RUNS`` runs are
    stacked and each replicate's cumulative counts (``E`` in ``run_curve_interval``) come from one batched
    matrix product of its counts with each point's "ranked at or below" table, instead of a gather and a
    cumulative sum per block, and their percentiles are taken together from sorted replicates. Other blocks go
    one by one.

    Args:
        blocks: Each of shape (num_runs, num_points), finite.
        keys: Each block's key (``derive_rng(seed, key)`` draws its replicates).
        stat: ``iqm`` or ``mean``.
        reps: Replicates.
        confidence: Coverage of the percentile intervals.
        seed: Integer seed.

    Returns:
        One ``Interval`` per block, in order.
    """
    reps = _check_common(reps, confidence, "percentile")
    out: list[Interval | None] = [None] * len(blocks)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, block in enumerate(blocks):
        shape = np.shape(block)
        if stat == "iqm" and len(shape) == 2 and 2 <= shape[0] <= _GEMM_RUNS and shape[1] >= 1:
            shapes.setdefault(shape, []).append(i)
        else:
            out[i] = run_curve_interval(block, stat, reps, confidence, seed, key=keys[i])
    for (n, points), members in shapes.items():
        per = max(1, _BATCH_CELLS // (reps * points * n))
        for start in range(0, len(members), per):
            chunk = members[start : start + per]
            stack = _check_curves(
                np.stack([blocks[i] for i in chunk]).transpose(1, 0, 2)
            )  # (runs, G, points)
            # float32: the counts, the 0/1 table and their products' sums are small whole numbers, exact in
            # float32 (at most _GEMM_RUNS), and its matrix product takes half the time of float64's
            counts = np.stack([run_counts(_rng(seed, keys[i]), n, reps) for i in chunk]).astype(np.float32)
            for i, est in zip(chunk, _stacked_iqm_bands(stack.transpose(1, 0, 2), counts, confidence)):
                out[i] = est
    return out  # type: ignore[return-value]


def _stacked_iqm_bands(arr: np.ndarray, counts: np.ndarray, confidence: float) -> list[Interval]:
    """``run_curve_interval``'s IQM for G blocks of one shape (G, runs, points) with their counts (G, reps,
    runs): ``E[g, p, r, k]`` (runs drawn among the k+1 smallest at point p) is counts[g, r] @ below[g, p]."""
    g, n, points = arr.shape
    low, high = _iqm_cuts(n)
    order = np.argsort(arr, axis=1, kind="stable")
    ranked = np.take_along_axis(arr, order, axis=1)
    point = ranked[:, low:high].mean(axis=1)
    gaps = (ranked[:, :-1] - ranked[:, 1:]).transpose(0, 2, 1)[..., None]  # (G, points, runs - 1, 1)
    ends = high * ranked[:, -1] - low * ranked[:, 0]  # (G, points)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n)[None, :, None], axis=1)
    below = (rank.transpose(0, 2, 1)[..., None] <= np.arange(n - 1)).astype(np.float32)  # (G, points, n, n-1)
    cum = np.matmul(counts[:, None], below)  # (G, points, reps, runs - 1): exact whole numbers
    weights = np.empty(cum.shape)  # float64, as run_curve_interval's, for the same products to the bit
    np.clip(cum, low, high, out=weights)
    dist = np.matmul(weights, gaps)[..., 0]  # (G, points, reps)
    dist += ends[..., None]
    dist /= high - low
    # sorted (each point's replicates are contiguous), then read at the two ranks around each percentile:
    # np.percentile's numbers without its partition of every replicate
    dist.sort(axis=-1)
    lower, upper = percentile_interval(
        dist.transpose(2, 0, 1), point, confidence, "percentile", presorted=True
    )
    return [Interval(point[b], lower[b], upper[b]) for b in range(g)]
