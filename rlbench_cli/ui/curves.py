"""Curves of one metric for a selection of runs, grouped by config keys: per group the mean or IQM over its
runs at every step with a 95% stratified bootstrap band (``bootstrap.curve_interval``, rlbench's own), and
each run's own line on demand. Numpy only; the rows come from ``Store.curve_rows``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import bootstrap

STATS = ("iqm", "mean")
MAX_RUN_LINES = 400  # per-run lines sent at most (every group's band is still computed from all its runs)


def batch_mean_per_point(batch: np.ndarray) -> np.ndarray:
    """Mean over runs and tasks at every point: (..., runs, tasks, points) -> (..., points)."""
    arr = np.asarray(batch, dtype=np.float64)
    return arr.reshape(*arr.shape[:-3], -1, arr.shape[-1]).mean(axis=-2)


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average with its start debiased; 0 leaves the values."""
    if weight <= 0 or len(values) < 2:
        return values
    out = np.empty_like(values)
    last, norm = 0.0, 0.0
    for i, v in enumerate(values):
        last = last * weight + (1 - weight) * v
        norm = norm * weight + (1 - weight)
        out[i] = last / norm
    return out


def _runs(table: Any) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{run_id: (steps, values, wall seconds since the run's first row)}`` of finite values, in step order."""
    ids = np.asarray(table.column("run_id").to_numpy(zero_copy_only=False), dtype=object)
    steps = table.column("step").to_numpy(zero_copy_only=False).astype(np.int64)
    values = table.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    wall = table.column("wall_time").to_numpy(zero_copy_only=False).astype(np.float64)
    out = {}
    if len(ids) == 0:
        return out
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(ids)]):
        v = values[start:stop]
        ok = np.isfinite(v)
        s, w = steps[start:stop][ok], wall[start:stop][ok]
        # one value per step: the last row logged at it
        keep = np.r_[s[1:] != s[:-1], True] if len(s) else np.zeros(0, bool)
        s, v, w = s[keep], v[ok][keep], w[keep]
        if len(s):
            first = np.nanmin(w) if np.isfinite(w).any() else 0.0
            out[str(ids[start])] = (s, v, w - first)
    return out


def _label(keys: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values)) if keys else "all runs"


def group_curves(
    table: Any,
    runs: Sequence[tuple],
    group_by: Sequence[str],
    stat: str = "iqm",
    smoothing: float = 0.0,
    per_run: bool = False,
    reps: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Grouped curves of one metric.

    Args:
        table: ``Store.curve_rows``: run_id, step, value, wall_time ordered by run and step.
        runs: ``Store.run_ids_where`` rows: (run_id, seed, status, value of each ``group_by`` key).
        group_by: Config keys (or run columns) whose values make a group; never the seed.
        stat: ``iqm`` or ``mean`` over a group's runs at each step.
        smoothing: TensorBoard's EMA weight in [0, 1), applied to each run before the statistic.
        per_run: Also each run's own (smoothed) line.
        reps: Bootstrap replicates of the band.
        seed: Bootstrap seed; a group's draws come from ``derive_rng(seed, its label)``.

    Returns:
        ``{"groups": [{label, values, runs, step, wall, y, lower, upper, lines}], "runs": n}``; x values are
        the steps where any run of the group has a value, wall the median seconds since each run's first row
        there; a step where only some runs have a value is computed over those.
    """
    func = bootstrap.batch_iqm_per_point if stat == "iqm" else batch_mean_per_point
    data = _runs(table)
    groups: dict[tuple, list[tuple]] = {}
    for row in runs:
        if row[0] in data:
            groups.setdefault(tuple(str(v) for v in row[3:]), []).append(row)
    out, lines_left = [], MAX_RUN_LINES
    for values, members in sorted(groups.items()):
        label = _label(group_by, values)
        curves = [(r, *data[r[0]]) for r in members]
        curves = [(r, s, smooth(v, smoothing), w) for r, s, v, w in curves]
        steps = np.unique(np.concatenate([c[1] for c in curves]))
        matrix = np.full((len(curves), len(steps)), np.nan)
        walls = np.full((len(curves), len(steps)), np.nan)
        for i, (_, s, v, w) in enumerate(curves):
            at = np.searchsorted(steps, s)
            matrix[i, at], walls[i, at] = v, w
        point, lower, upper = np.empty(len(steps)), np.empty(len(steps)), np.empty(len(steps))
        present = ~np.isnan(matrix)
        # the steps with the same runs present are bootstrapped together (runs finish at different steps live)
        patterns, which = np.unique(present, axis=1, return_inverse=True)
        for p in range(patterns.shape[1]):
            cols = np.flatnonzero(which.ravel() == p)
            rows = np.flatnonzero(patterns[:, p])
            cube = matrix[np.ix_(rows, cols)][:, None, :]
            if len(rows) == 1:
                point[cols] = lower[cols] = upper[cols] = cube[0, 0]
                continue
            est = bootstrap.curve_interval(cube, func, reps=reps, seed=seed, key=label)
            point[cols], lower[cols], upper[cols] = est.point, est.lower, est.upper
        wall = np.nanmedian(walls, axis=0)
        group = {"label": label, "values": list(values), "runs": len(curves), "step": steps.tolist(),
                 "wall": _floats(wall), "y": _floats(point), "lower": _floats(lower), "upper": _floats(upper),
                 "lines": []}  # fmt: skip
        if per_run:
            for r, s, v, w in curves[:lines_left]:
                group["lines"].append({"run_id": r[0], "seed": r[1], "status": r[2], "step": s.tolist(),
                                       "wall": _floats(w), "y": _floats(v)})  # fmt: skip
            lines_left -= len(group["lines"])
        out.append(group)
    return {"groups": out, "runs": sum(g["runs"] for g in out), "stat": stat, "reps": reps}


def _floats(a: np.ndarray) -> list[float | None]:
    return [float(x) if np.isfinite(x) else None for x in a]
