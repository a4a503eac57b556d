"""The resampling core of the stratified bootstrap: argument checks, seeding (``derive_rng``), index draws
in rliable's order, stratified resampling and percentile intervals (see the package's notes)."""

from __future__ import annotations

import hashlib
import numbers
from typing import NamedTuple

import numpy as np

Rng = np.random.Generator | np.random.RandomState
"""A generator for the resampling indices: ``Generator`` (seeded mode) or ``RandomState`` (rliable replay)."""

# Elements (reps * runs * tasks) resampled at once: a chunk stays in the CPU caches (1 MB of float64), which
# measured about twice as fast as 1M-element chunks; results do not depend on it.
_CHUNK_ELEMENTS = 1 << 17
_METHODS = ("percentile", "basic")


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


def sorted_percentiles(ascending: np.ndarray, q: list[float]) -> list[np.ndarray]:
    """``np.percentile(a, q, axis=0)`` (its default, linear method) of ``ascending``, ``a`` sorted along its
    first axis, to the bit: numpy's virtual index ``(n - 1) * (q / 100)`` and its two-sided interpolation
    (``numpy.lib._function_base_impl._lerp``), from the two rows around it instead of a partition of all."""
    n = ascending.shape[0]
    out = []
    for quantile in np.true_divide(q, 100):
        virtual = (n - 1) * quantile
        below = np.floor(virtual)
        lo = hi = n - 1 if virtual >= n - 1 else int(below)
        if virtual < n - 1:
            hi = lo + 1
        gamma = virtual - below
        a, b = ascending[lo], ascending[hi]
        diff = b - a
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


def percentile_interval(
    distribution: np.ndarray,
    point: np.ndarray | float,
    confidence: float = 0.95,
    method: str = "percentile",
    presorted: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends from a bootstrap distribution, as arch's ``IIDBootstrap.conf_int`` computes them.

    Args:
        distribution: Shape (reps, ...), one row per replicate.
        point: Point estimate(s), shape (...) (used by ``"basic"`` only).
        confidence: Coverage, in (0, 1).
        method: ``"percentile"``: ``np.percentile`` at ``100 * alpha`` and ``100 * (1 - alpha)`` with
            ``alpha = (1 - confidence) / 2`` (rliable's default). ``"basic"``: ``2 * point`` minus those,
            swapped.
        presorted: The replicates are sorted along the first axis already: the same numbers, read from the
            two rows around each percentile (``sorted_percentiles``).

    Returns:
        ``(lower, upper)``, each of shape (...).
    """
    alpha = (1.0 - float(confidence)) / 2.0
    qs = [100 * alpha, 100 * (1.0 - alpha)]
    lower, upper = (
        sorted_percentiles(distribution, qs) if presorted else np.percentile(distribution, qs, axis=0)
    )
    if method == "basic":
        point_arr = np.asarray(point, dtype=np.float64)
        lower, upper = 2.0 * point_arr - upper, 2.0 * point_arr - lower
    elif method != "percentile":
        raise ValueError(f"method must be one of {', '.join(_METHODS)}, got {method!r}.")
    return lower, upper
