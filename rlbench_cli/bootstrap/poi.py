"""Probability of improvement (rliable's Mann-Whitney estimator) and its stratified bootstrap over pairs of
algorithms, without building the replicates (run counts times a pair matrix)."""

from __future__ import annotations

import numpy as np

from rlbench_cli.bootstrap.core import (
    Interval,
    Rng,
    _check_common,
    _check_positive_int,
    _check_scores,
    _chunk_reps,
    _draw,
    _rng,
    percentile_interval,
)


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
