"""Vectorised, seeded stratified bootstrap for rliable's statistics.

rliable (the reference implementation, see ``rlbench_cli.stats``) computes its intervals with one Python-level
call of the statistic per bootstrap replicate: ``scipy.stats.trim_mean`` for every IQM replicate and a
``scipy.stats.mannwhitneyu`` test per task for every probability-of-improvement replicate. Its
``StratifiedBootstrap`` also draws the resampling indices from numpy's GLOBAL generator
(``np.random.choice``), whatever ``random_state`` says. This module computes the same statistics for a whole
batch of replicates at once with numpy, from a generator of its own.

Semantics matched to rliable 1.2.0 / arch 7.2 (read from their source):

* Stratified bootstrap (``library.StratifiedBootstrap``, ``task_bootstrap=False``): one replicate of a score
  matrix of shape (num_runs, num_tasks) draws an index array of the same shape,
  ``np.random.choice(num_runs, (num_runs, num_tasks), replace=True)``, and takes ``scores[idx[k, j], j]``:
  runs are resampled with replacement, independently within each task (column); tasks are never resampled.
* Probability of improvement (``library.StratifiedIndependentBootstrap`` on the pair ``[x, y]``): per
  replicate, ``x`` and ``y`` get independent index arrays (first x's, then y's), each stratified by task.
* Curves (``StratifiedBootstrap`` of a (num_runs, num_tasks, num_points) array, as rliable's sample-efficiency
  curves call it): the index array has the array's whole shape, ``np.random.choice(num_runs, (num_runs,
  num_tasks, num_points))``, and a replicate takes ``scores[idx[i, j, k], j, k]``: runs are resampled
  independently within every task and every point.
* Intervals (``arch``'s ``conf_int(method="percentile")``): ``np.percentile`` (linear interpolation) of the
  bootstrap distribution at ``100 * alpha`` and ``100 * (1 - alpha)``, ``alpha = (1 - confidence) / 2``.
  Point estimates are the statistic on the original data.

Seeding: an integer ``seed`` and a key (an algorithm name, or ``"x|y"`` for a pair) give a
``numpy.random.Generator(PCG64(SeedSequence(seed, spawn_key=blake2b(key))))`` (``derive_rng``), so an
algorithm's interval depends only on its own scores and ``seed``, never on the other algorithms loaded, and
numpy's global generator is never touched. Indices are drawn as ``uint32`` (Lemire's method, one 32-bit word
per index), a stream that does not depend on how the replicates are split into chunks.

Passing a ``numpy.random.RandomState`` instead of an integer seed replays rliable exactly: indices are then
drawn with ``RandomState.randint`` in rliable's order, which is the stream ``np.random.choice`` produces, so
``np.random.seed(s)`` followed by an rliable call and the same call here with ``RandomState(s)`` give the same
bootstrap replicates (intervals equal up to floating-point summation order).

Only numpy is needed; nothing here imports scipy, arch or rliable.
"""

from __future__ import annotations

import hashlib
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np

__all__ = [
    "METRICS",
    "Interval",
    "Rng",
    "derive_rng",
    "stratified_indices",
    "resample",
    "batch_median",
    "batch_iqm",
    "batch_mean",
    "batch_optimality_gap",
    "bootstrap_distribution",
    "percentile_interval",
    "interval_estimates",
    "probability_of_improvement",
    "poi_distribution",
    "poi_interval",
    "performance_profile",
    "batch_iqm_per_point",
    "curve_distribution",
    "curve_interval",
    "map_independent",
    "workers",
]

METRICS: tuple[str, ...] = ("median", "iqm", "mean", "optimality_gap")
"""Names of the built-in aggregates, in rliable's usual order."""

Rng = np.random.Generator | np.random.RandomState
"""A generator for the resampling indices: ``Generator`` (seeded mode) or ``RandomState`` (rliable replay)."""

BatchFunc = Callable[[np.ndarray], np.ndarray]
"""A vectorised statistic: batch of shape (reps, num_runs, num_tasks) -> values of shape (reps,)."""

# Elements (reps * runs * tasks) resampled at once: a chunk stays in the CPU caches (1 MB of float64), which
# measured about twice as fast as 1M-element chunks; results do not depend on it.
_CHUNK_ELEMENTS = 1 << 17
_METHODS = ("percentile", "basic")
_VARIANTS = ("run", "mean")


class Interval(NamedTuple):
    """A point estimate with its bootstrap confidence interval.

    For ``interval_estimates`` each field has shape (n_metrics,); for ``performance_profile`` shape
    (num_taus,); for ``poi_interval`` each is a float.
    """

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


# ------------------------------------------------------------------------------------------- validation
def _check_scores(scores: object, name: str = "scores") -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (num_runs, num_tasks), got shape {arr.shape}.")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} needs at least one run and one task, got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values; drop or fix them before bootstrapping.")
    return np.ascontiguousarray(arr)


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _check_common(reps: object, confidence: float, method: str) -> int:
    reps = _check_positive_int(reps, "reps")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1 (e.g. 0.95), got {confidence!r}.")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(_METHODS)}, got {method!r}.")
    return reps


def _chunk_reps(elements_per_rep: int, chunk_reps: int | None) -> int:
    if chunk_reps is not None:
        return _check_positive_int(chunk_reps, "chunk_reps")
    return max(1, _CHUNK_ELEMENTS // max(1, elements_per_rep))


# ---------------------------------------------------------------------------------------------- seeding
def derive_rng(seed: int, key: str = "") -> np.random.Generator:
    """A generator derived stably from ``seed`` and ``key`` (e.g. an algorithm name).

    ``Generator(PCG64(SeedSequence(seed, spawn_key=k)))`` where ``k`` is the BLAKE2b-128 digest of the UTF-8
    key as four 32-bit words: the same on every machine and Python process (unlike ``hash``), and distinct keys
    give independent streams.

    Args:
        seed: Non-negative integer.
        key: What is resampled, e.g. ``"ppo"`` or ``"ppo|dqn"``.

    Returns:
        A fresh ``numpy.random.Generator``.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}.")
    digest = hashlib.blake2b(str(key).encode("utf-8"), digest_size=16).digest()
    words = tuple(int(w) for w in np.frombuffer(digest, dtype="<u4"))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=words)))


_T = TypeVar("_T")


def workers(jobs: int) -> int:
    """Threads for ``jobs`` independent bootstraps: the CPUs this process may use (``$RLBENCH_THREADS``
    caps them; 1 turns threads off), at most ``jobs``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    cap = os.environ.get("RLBENCH_THREADS", "")
    if cap.strip().isdigit() and int(cap) > 0:
        cpus = min(cpus, int(cap))
    return max(1, min(cpus, jobs))


def map_independent(fn: Callable[[Any], _T], items: Iterable[Any], seed: object) -> list[_T]:
    """``[fn(item) for item in items]``, on threads when ``seed`` is an integer.

    With an integer seed every item resamples from its own generator (``derive_rng(seed, key)``), so the
    items are independent and each result is the same whichever thread computes it, in whatever order:
    numpy's generators, ``take``, sorts and reductions release the GIL, so on N cores the bootstraps of N
    algorithms (or pairs) run at once. A ``RandomState`` / ``Generator`` seed is one stream shared by the
    items in order (rliable replay): then they run one after another. The first call tunes glibc's malloc
    for these buffers (``allocator.tune``).
    """
    from .allocator import tune

    tune()
    items = list(items)
    n = workers(len(items)) if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) else 1
    if n <= 1:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n, thread_name_prefix="rlbench-bootstrap") as pool:
        return list(pool.map(fn, items))


def _rng(seed: int | Rng, key: str) -> Rng:
    if isinstance(seed, (np.random.Generator, np.random.RandomState)):
        return seed
    return derive_rng(seed, key)  # type: ignore[arg-type]


def _draw(rng: Rng, high: int | np.ndarray, size: tuple[int, ...]) -> np.ndarray:
    """Uniform integers in [0, high) (``high`` may broadcast against ``size``), in C order of ``size``."""
    if isinstance(rng, np.random.RandomState):
        # rliable's np.random.choice(n, shape, replace=True) is RandomState.randint(0, n, size=shape); the
        # stream does not depend on how the draws are split into calls, nor on scalar vs broadcast bounds.
        # For a scalar bound below 2**32, int64 and uint32 draws take the same 32-bit words (one per index):
        # the same values and the same state after, in half the time (tests/unit/test_bootstrap.py).
        if isinstance(high, numbers.Integral) and 0 < int(high) < 2**32:
            return rng.randint(0, high, size=size, dtype=np.uint32)
        return rng.randint(0, high, size=size)
    if isinstance(rng, np.random.Generator):
        return rng.integers(0, high, size=size, dtype=np.uint32)
    raise TypeError(f"rng must be a numpy Generator or RandomState, got {type(rng).__name__}.")


# ---------------------------------------------------------------------------------------------- indices
def stratified_indices(rng: Rng, num_runs: int, num_tasks: int, reps: int) -> np.ndarray:
    """Run indices of ``reps`` stratified bootstrap replicates (rliable's ``StratifiedBootstrap``).

    Replicate ``r`` of a (num_runs, num_tasks) score matrix is ``scores[idx[r, k, j], j]``: runs are drawn
    with replacement, independently for every task and every position ``k``; tasks are kept.

    Args:
        rng: ``numpy.random.Generator`` (draws ``uint32``; chunk-invariant stream) or ``RandomState`` (draws
            ``int64`` exactly as rliable's ``np.random.choice`` does on a global generator in that state).
        num_runs: Runs per task, N >= 1.
        num_tasks: Tasks, M >= 1.
        reps: Replicates, R >= 1.

    Returns:
        Integer array of shape (reps, num_runs, num_tasks) with values in [0, num_runs).
    """
    num_runs = _check_positive_int(num_runs, "num_runs")
    num_tasks = _check_positive_int(num_tasks, "num_tasks")
    reps = _check_positive_int(reps, "reps")
    return _draw(rng, num_runs, (reps, num_runs, num_tasks))


def _flat_indices(indices: np.ndarray, num_tasks: int) -> np.ndarray:
    """Stratified indices (reps, k, num_tasks) -> positions in a raveled (num_runs, num_tasks) matrix."""
    flat = indices.astype(np.intp)
    flat *= num_tasks
    flat += np.arange(num_tasks, dtype=np.intp)
    return flat


def resample(scores: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Applies stratified indices to a score matrix.

    Args:
        scores: Shape (num_runs, num_tasks) (any dtype).
        indices: Shape (reps, k, num_tasks), values in [0, num_runs); ``k`` is usually num_runs.

    Returns:
        Shape (reps, k, num_tasks): ``out[r, i, j] = scores[indices[r, i, j], j]``.
    """
    scores = np.ascontiguousarray(scores)
    return scores.ravel().take(_flat_indices(indices, scores.shape[1]))


# ------------------------------------------------------------------------------------------- aggregates
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


def percentile_interval(
    distribution: np.ndarray, point: np.ndarray | float, confidence: float = 0.95, method: str = "percentile"
) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends from a bootstrap distribution, as arch's ``IIDBootstrap.conf_int`` computes them.

    Args:
        distribution: Shape (reps, ...), one row per replicate.
        point: Point estimate(s), shape (...) (used by ``"basic"`` only).
        confidence: Coverage, in (0, 1).
        method: ``"percentile"``: ``np.percentile`` at ``100 * alpha`` and ``100 * (1 - alpha)`` with
            ``alpha = (1 - confidence) / 2`` (rliable's default). ``"basic"``: ``2 * point`` minus those,
            swapped.

    Returns:
        ``(lower, upper)``, each of shape (...).
    """
    alpha = (1.0 - float(confidence)) / 2.0
    q = np.percentile(distribution, [100 * alpha, 100 * (1.0 - alpha)], axis=0)
    lower, upper = q[0], q[1]
    if method == "basic":
        point_arr = np.asarray(point, dtype=np.float64)
        lower, upper = 2.0 * point_arr - upper, 2.0 * point_arr - lower
    elif method != "percentile":
        raise ValueError(f"method must be one of {', '.join(_METHODS)}, got {method!r}.")
    return lower, upper


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


# ----------------------------------------------------------------------------- probability of improvement
def _poi_batch(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Average over tasks of P(X > Y) + P(X = Y) / 2: (reps, nx, T), (reps, ny, T) -> (reps,)."""
    nx, ny = xs.shape[1], ys.shape[1]
    a = xs[:, :, None, :]
    b = ys[:, None, :, :]
    greater = np.add.reduce(a > b, axis=(1, 2), dtype=np.int64)
    equal = np.add.reduce(a == b, axis=(1, 2), dtype=np.int64)
    u = greater + 0.5 * equal  # Mann-Whitney U of x, per replicate and task (exact in float64)
    return (u / (nx * ny)).mean(axis=-1)


def _twice_u(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per task, 2 x [x_a > y_b] + [x_a = y_b] for every pair of runs: shape (num_tasks, nx, ny), float64."""
    a, b = x.T[:, :, None], y.T[:, None, :]
    return 2.0 * (a > b) + (a == b)


def _counts(idx: np.ndarray, size: int) -> np.ndarray:
    """How often each run is drawn, per replicate and task: (reps, k, T) indices in [0, size) ->
    (T, reps, size) counts, float64."""
    reps, _, tasks = idx.shape
    lanes = (np.arange(tasks, dtype=np.intp) * reps)[None, None, :] + np.arange(reps, dtype=np.intp)[
        :, None, None
    ]
    flat = lanes * size + idx
    return (
        np.bincount(flat.ravel(), minlength=tasks * reps * size).reshape(tasks, reps, size).astype(np.float64)
    )


def _poi_counts(s2: np.ndarray, ix: np.ndarray, iy: np.ndarray, nx: int, ny: int) -> np.ndarray:
    """``_poi_batch`` of the replicates drawn by ``ix`` (reps, nx, T) and ``iy`` (reps, ny, T), without
    building them: a replicate's U statistic on task t is ``cx @ S_t @ cy``, where ``cx``, ``cy`` count how
    often each run was drawn and ``S_t`` (``_twice_u`` / 2) scores every pair of original runs. Every term is
    a small integer (or half of one), so the sums are exact and the result equals ``_poi_batch`` bit for bit.
    """
    cx, cy = _counts(ix, nx), _counts(iy, ny)
    twice = np.einsum("trb,trb->rt", np.matmul(cx, s2), cy)  # (reps, T): 2U, exact integers
    u = np.ascontiguousarray(twice) / 2.0
    return (u / (nx * ny)).mean(axis=-1)


def _check_pair(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    xa, ya = _check_scores(x, "x"), _check_scores(y, "y")
    if xa.shape[1] != ya.shape[1]:
        raise ValueError(f"x and y must have the same number of tasks, got shapes {xa.shape} and {ya.shape}.")
    return xa, ya


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(a run of X beats a run of Y on a task), averaged over tasks (``metrics.probability_of_improvement``).

    Per task, the Mann-Whitney U statistic of x divided by nx * ny, i.e. P(X > Y) + P(X = Y) / 2 over all
    pairs of runs; then the mean over tasks.

    Args:
        x: Shape (nx, num_tasks).
        y: Shape (ny, num_tasks).

    Returns:
        A probability in [0, 1].
    """
    xa, ya = _check_pair(x, y)
    return float(_poi_batch(xa[None], ya[None])[0])


def poi_distribution(
    x: np.ndarray, y: np.ndarray, reps: int = 2000, rng: Rng | int = 0, chunk_reps: int | None = None
) -> np.ndarray:
    """Probability of improvement on ``reps`` bootstrap replicates of the pair (x, y).

    As rliable's ``StratifiedIndependentBootstrap``: every replicate resamples the runs of x and of y
    independently, each stratified by task (indices for x first, then for y).

    Args:
        x: Shape (nx, num_tasks).
        y: Shape (ny, num_tasks).
        reps: Replicates.
        rng: Generator or RandomState (used as is), or an integer seed (``derive_rng(seed)``).
        chunk_reps: Replicates at once (memory bound); the result does not depend on it.

    Returns:
        Shape (reps,).
    """
    xa, ya = _check_pair(x, y)
    reps = _check_positive_int(reps, "reps")
    gen = _rng(rng, "")
    nx, ny, m = xa.shape[0], ya.shape[0], xa.shape[1]
    # one draw per replicate of shape (nx + ny, m): x's rows first, then y's, each row bounded by its size
    high: int | np.ndarray = nx if nx == ny else np.repeat([nx, ny], [nx, ny])[:, None]
    step = _chunk_reps((nx + ny) * m, chunk_reps)
    s2 = _twice_u(xa, ya)
    out = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, step):
        stop = min(reps, start + step)
        idx = _draw(gen, high, (stop - start, nx + ny, m))
        out[start:stop] = _poi_counts(s2, idx[:, :nx], idx[:, nx:], nx, ny)
    return out


def poi_interval(
    x: np.ndarray,
    y: np.ndarray,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | Rng = 0,
    method: str = "percentile",
    *,
    key: str = "",
    chunk_reps: int | None = None,
) -> Interval:
    """Probability of improvement of X over Y with a stratified bootstrap interval.

    Args:
        x: Shape (nx, num_tasks).
        y: Shape (ny, num_tasks).
        reps: Bootstrap replicates.
        confidence: Coverage of the interval.
        seed: Integer (the generator is ``derive_rng(seed, key)``) or a Generator / RandomState used as is;
            ``RandomState(s)`` replays ``np.random.seed(s)`` + rliable's ``get_interval_estimates`` on
            ``{key: [x, y]}``.
        method: ``"percentile"`` (rliable's default) or ``"basic"``.
        key: Name of the pair for seed derivation, e.g. ``"ppo|dqn"``.
        chunk_reps: Replicates at once; the result does not depend on it.

    Returns:
        ``Interval(point, lower, upper)`` of floats.
    """
    reps = _check_common(reps, confidence, method)
    point = probability_of_improvement(x, y)
    dist = poi_distribution(x, y, reps, _rng(seed, key), chunk_reps)
    lower, upper = percentile_interval(dist, point, confidence, method)
    return Interval(point, float(lower), float(upper))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- performance profiles
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


# ------------------------------------------------------------------------------------------------ curves
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
