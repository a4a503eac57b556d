"""Curves of one metric for a selection of runs, grouped by config keys: per group the mean or IQM over its
runs at every step with a 95% bootstrap band that resamples the group's runs (``bootstrap.run_curve_interval``,
rlbench's own), and each run's own line on demand. Numpy only; the rows come from ``Store.curve_rows``."""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import bootstrap

STATS = ("iqm", "mean")
MAX_RUN_LINES = 400  # per-run lines sent at most (every group's band is still computed from all its runs)


def smooth(matrix: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing of each row (a run; NaN where it has no value) over its own values: an
    exponential moving average with its start debiased; 0 leaves the values."""
    if weight <= 0:
        return matrix
    out = np.full_like(matrix, np.nan)
    last, norm = np.zeros(len(matrix)), np.zeros(len(matrix))
    for p in range(matrix.shape[1]):  # one column at a time, every run at once
        v = matrix[:, p]
        ok = ~np.isnan(v)
        last[ok] = last[ok] * weight + (1 - weight) * v[ok]
        norm[ok] = norm[ok] * weight + (1 - weight)
        out[ok, p] = last[ok] / norm[ok]
    return out


def _rows(table: Any, num_runs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(run position, step, value, wall seconds since the run's first row) of each finite row, one row per
    run and step (the last of several), in run and step order."""
    position = table.column("run").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    steps = table.column("step").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    values = table.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    wall = table.column("wall_time").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    keep = np.isfinite(values)
    if not keep.all():
        position, steps, values, wall = position[keep], steps[keep], values[keep], wall[keep]
    key = position * (int(steps.max()) + 1 if len(steps) else 1) + (
        steps - (steps.min() if len(steps) else 0)
    )
    if len(key) and (np.diff(key) < 0).any():  # the store hands them in run and step order, mostly
        order = np.argsort(key, kind="stable")  # stable: of several rows at one step the last stays last
        position, steps, values, wall, key = (
            position[order],
            steps[order],
            values[order],
            wall[order],
            key[order],
        )
    last = np.r_[key[1:] != key[:-1], True] if len(key) else keep[:0]
    if not last.all():
        position, steps, values, wall = position[last], steps[last], values[last], wall[last]
    first = np.full(num_runs, np.inf)
    if len(position):
        starts = np.flatnonzero(np.r_[True, position[1:] != position[:-1]])
        first[position[starts]] = np.minimum.reduceat(np.where(np.isfinite(wall), wall, np.inf), starts)
    return position, steps, values, wall - first[position]


def _label(keys: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values)) if keys else "all runs"


_CACHE: OrderedDict[bytes, tuple[np.ndarray, ...]] = OrderedDict()
_CACHE_SIZE = 512  # groups' bands kept: while a suite runs, only the groups whose runs logged are recomputed
_LOCK = threading.Lock()


def _key(matrix: np.ndarray, stat: str, reps: int, seed: int, label: str) -> bytes:
    digest = hashlib.blake2b(f"{stat}|{reps}|{seed}|{label}|{matrix.shape}".encode(), digest_size=16)
    digest.update(np.ascontiguousarray(matrix).tobytes())
    return digest.digest()


def _bands(built: list[tuple], stat: str, reps: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """Each group's point, lower and upper at every column; the columns with the same runs present share one
    bootstrap (live, runs are at different steps). The same group's same values give the same band: it is
    kept. The missing bands are computed together (``bootstrap.run_curve_intervals``: blocks of one shape at
    once, on threads), each block resampled from ``derive_rng(seed, its group's label)``."""
    keys = [_key(b[4], stat, reps, seed, b[0]) for b in built]
    with _LOCK:
        found = {k: _CACHE[k] for k in keys if k in _CACHE}
        for k in found:
            _CACHE.move_to_end(k)
    todo = [i for i, k in enumerate(keys) if k not in found]
    jobs: list[tuple[int, np.ndarray, str, np.ndarray]] = []  # group, columns, label, block
    for i in todo:
        matrix = built[i][4]
        for cols in _patterns(~np.isnan(matrix)):
            rows = np.flatnonzero(~np.isnan(matrix[:, cols[0]]))
            if len(rows):
                jobs.append((i, cols, built[i][0], matrix[np.ix_(rows, cols)]))
    share = max(1, -(-len(jobs) // bootstrap.workers(len(jobs))))  # one slice of the blocks per thread
    slices = [jobs[s : s + share] for s in range(0, len(jobs), share)]
    done = bootstrap.map_independent(
        lambda js: bootstrap.run_curve_intervals(
            [j[3] for j in js], [j[2] for j in js], stat, reps, seed=seed
        ),
        slices,
        int(seed),
    )
    computed = {i: tuple(np.full(built[i][4].shape[1], np.nan) for _ in range(3)) for i in todo}
    for js, ests in zip(slices, done):
        for (i, cols, _, _), est in zip(js, ests):
            point, lower, upper = computed[i]
            point[cols], lower[cols], upper[cols] = est.point, est.lower, est.upper
    with _LOCK:
        for i in todo:
            _CACHE[keys[i]] = computed[i]
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return [found[k] if k in found else computed[i] for i, k in enumerate(keys)]


def _patterns(present: np.ndarray) -> list[np.ndarray]:
    """The columns of each distinct pattern of runs present (one pattern when every run has every column)."""
    if present.all():
        return [np.arange(present.shape[1])]
    _, inverse = np.unique(np.packbits(present, axis=0), axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [np.flatnonzero(inverse == u) for u in np.unique(inverse)]


def group_curves(
    table: Any,
    runs: Sequence[tuple],
    group_by: Sequence[str],
    stat: str = "iqm",
    smoothing: float = 0.0,
    per_run: bool = False,
    reps: int = 1000,
    seed: int = 0,
    packed: bool = False,
) -> dict[str, Any]:
    """Grouped curves of one metric.

    Args:
        table: ``Store.curve_rows``: run (a position in ``runs``), step, value, wall_time.
        runs: ``Store.run_ids_where`` rows (run_id, seed, status, value of each ``group_by`` key), by run_id.
        group_by: Config keys (or run columns) whose values make a group; never the seed.
        stat: ``iqm`` or ``mean`` over a group's runs at each step.
        smoothing: TensorBoard's EMA weight in [0, 1), applied to each run before the statistic.
        per_run: Also each run's own (smoothed) line (``MAX_RUN_LINES`` at most in all).
        reps: Bootstrap replicates of the band.
        seed: Bootstrap seed; a group's draws come from ``derive_rng(seed, its label)``; a group's steps with
            the same runs present share one ``bootstrap.run_curve_interval``.
        packed: Each list of numbers (step, wall, y, lower, upper) as ``_packed`` text instead.

    Returns:
        ``{"groups": [{label, values, runs, step, wall, y, lower, upper, lines}], "runs": n}``; x values are
        the steps where any run of the group has a value, wall the median seconds since each run's first row
        there; a step where only some runs have a value is computed over those.
    """
    floats = _packed if packed else _floats
    steps_of = _packed if packed else (lambda a: a.tolist())
    run_ids = [str(r[0]) for r in runs]
    position, steps, values, wall = _rows(table, len(run_ids))
    has_rows = np.zeros(len(run_ids), bool)
    has_rows[position] = True
    members: dict[tuple, list[int]] = {}
    for i, row in enumerate(runs):
        if has_rows[i]:
            members.setdefault(tuple(str(v) for v in row[3:]), []).append(i)
    group_of = np.full(len(run_ids), -1)
    keys = sorted(members)
    for g, k in enumerate(keys):
        group_of[members[k]] = g
    row_group = group_of[position]
    order = np.argsort(row_group, kind="stable")  # rows by group, each run's rows still in step order
    bounds = np.searchsorted(row_group[order], np.arange(len(keys) + 1))
    all_steps, step_col = _distinct(steps)  # once, not a sort per group
    rank = np.zeros(len(run_ids), np.int64)  # each run's row in its group's matrix
    for k in keys:
        rank[members[k]] = np.arange(len(members[k]))
    in_group = np.zeros(len(all_steps), bool)
    built = []
    for g, k in enumerate(keys):
        sel = order[bounds[g] : bounds[g + 1]]
        in_group[:] = False
        in_group[step_col[sel]] = True
        xs = all_steps[in_group]
        col = (np.cumsum(in_group) - 1)[step_col[sel]]
        who = members[k]
        matrix = np.full((len(who), len(xs)), np.nan)
        walls = np.full((len(who), len(xs)), np.nan)
        row = rank[position[sel]]
        matrix[row, col] = values[sel]
        walls[row, col] = wall[sel]
        built.append((_label(group_by, k), k, who, xs, smooth(matrix, smoothing), walls))
    # each group resamples from its own generator (derive_rng(seed, label)): on threads, the same bands
    bands = _bands(built, stat, reps, seed)
    out, lines_left = [], MAX_RUN_LINES
    for (label, k, who, xs, matrix, walls), (point, lower, upper) in zip(built, bands):
        wall_x = np.median(walls, axis=0) if not np.isnan(walls).any() else np.nanmedian(walls, axis=0)
        group = {"label": label, "values": list(k), "runs": len(who), "step": steps_of(xs),
                 "wall": floats(wall_x), "y": floats(point), "lower": floats(lower), "upper": floats(upper),
                 "lines": []}  # fmt: skip
        if per_run:
            for i in range(min(len(who), lines_left)):
                ok = ~np.isnan(matrix[i])
                r = runs[who[i]]
                group["lines"].append({"run_id": r[0], "seed": r[1], "status": r[2], "step": steps_of(xs[ok]),
                                       "wall": floats(walls[i, ok]), "y": floats(matrix[i, ok])})  # fmt: skip
            lines_left -= len(group["lines"])
        out.append(group)
    return {"groups": out, "runs": sum(g["runs"] for g in out), "stat": stat, "reps": reps, "packed": packed}


def _packed(a: np.ndarray) -> str:
    """The values as base64 of little-endian float64 (NaN where there is none): exact, and ~20x faster to
    write and to read than JSON numbers."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def _distinct(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(steps, return_inverse=True)``, without its sort when the steps span a range not much
    longer than their number (a table of the range: 1M rows of 100 steps in ~5 ms instead of ~80)."""
    if len(steps):
        low, high = int(steps.min()), int(steps.max())
        if high - low <= 4 * len(steps) + 4096:
            seen = np.zeros(high - low + 1, bool)
            at = steps - low
            seen[at] = True
            return np.flatnonzero(seen) + low, (np.cumsum(seen) - 1)[at]
    return np.unique(steps, return_inverse=True)


def _floats(a: np.ndarray) -> list[float | None]:
    """The values as JSON numbers, None where not finite (``tolist`` in C, then only the gaps patched)."""
    out: list[float | None] = np.asarray(a, dtype=np.float64).tolist()
    bad = ~np.isfinite(a)
    if bad.any():
        for i in np.flatnonzero(bad).tolist():
            out[i] = None
    return out
