"""A score against a config key (``rlbench plot SUITE --x KEY``): per task, per legend entry (an algorithm,
or the values of the other keys that vary) and per value of the key, the IQM or mean of the runs' scores
over seeds with a stratified bootstrap interval (``bootstrap.interval_estimates``, rliable's
``get_interval_estimates`` on a (seeds, 1) matrix), and how the key's values line up on an axis."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlbench_cli.scoring import StatsError

__all__ = ["KEY_STATS", "XAxis", "x_axis", "key_intervals", "natural_order"]

KEY_STATS = ("iqm", "mean")
LOG_DECADES = 2.0  # positive numeric values spanning this many decades or more get a log axis
CROWDED = 0.06  # neighbouring values closer than this share of the axis' span get no label each


@dataclass(frozen=True)
class XAxis:
    """How a key's values line up: ``values`` in axis order (as text, as stored), ``positions`` (the numbers
    for a numeric key, else 0, 1, 2, ... for categories), ``numeric``, ``log``, and ``crowded``: two
    neighbouring values closer than ``CROWDED`` of the axis' span (on the log scale where it is one), too
    close for a label each (logged sizes, 50,112 and 50,880): a figure then takes its own ticks."""

    values: list[str]
    positions: list[float]
    numeric: bool
    log: bool
    crowded: bool = False


def _number(text: str) -> float | None:
    """A value's number (``3``, ``1e-3``, ``"0.5"``), None for anything else (booleans, text, NaN)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = text
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _natural(text: str) -> list[tuple[int, float, str]]:
    """Sort key of a category: runs of digits compare as numbers (``w8`` before ``w16``)."""
    return [(0, float(p), "") if p.isdigit() else (1, 0.0, p) for p in re.split(r"(\d+)", text) if p]


def natural_order(values: Sequence[str]) -> list[str]:
    """Distinct texts in natural order (``n_layer=2`` before ``n_layer=10``): legend entries, categories."""
    return sorted(dict.fromkeys(map(str, values)), key=_natural)


def x_axis(values: Sequence[str]) -> XAxis:
    """The axis of a key's distinct values: numeric when every value is a number (sorted by value; a log
    axis when all are positive and the largest is at least 100 x the smallest), else categories in natural
    order (``w8`` before ``w16``), placed at 0, 1, 2, ..."""
    distinct = list(dict.fromkeys(str(v) for v in values))
    numbers = [_number(v) for v in distinct]
    if distinct and all(n is not None for n in numbers):
        pairs = sorted(zip(numbers, distinct))  # type: ignore[arg-type]
        nums = [float(n) for n, _ in pairs]
        log = nums[0] > 0 and math.log10(nums[-1] / nums[0]) >= LOG_DECADES - 1e-9
        at = np.log10(nums) if log else np.asarray(nums)
        span = float(at[-1] - at[0]) if len(at) > 2 else 0.0
        crowded = span > 0 and float(np.min(np.diff(at))) < CROWDED * span
        return XAxis([v for _, v in pairs], nums, True, log, crowded)
    ordered = natural_order(distinct)
    return XAxis(ordered, [float(i) for i in range(len(ordered))], False, False)


def key_intervals(
    runs: pd.DataFrame,
    stat: str = "iqm",
    reps: int = 50_000,
    seed: int | np.random.RandomState = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One point with its bootstrap interval per (task, legend entry, value of the key).

    Args:
        runs: One row per run: ``env`` (the task), ``legend``, ``x`` (the key's value as text) and ``score``
            (the run's score, normalised as the leaderboard's); NaN scores are left out.
        stat: ``iqm`` (rliable's ``aggregate_iqm``) or ``mean`` (``aggregate_mean``) over the cell's runs.
        reps: Bootstrap replicates per cell.
        seed: An integer: each cell resamples from ``derive_rng(seed, "env|legend|x")``, so a cell's interval
            depends on its own runs only. A ``numpy.random.RandomState``: the cells in the output's order draw
            from it in turn, which replays ``np.random.seed`` + rliable's ``get_interval_estimates`` on the
            dict of the cells' (runs, 1) matrices in that order.
        confidence: Coverage of the percentile intervals.

    Returns:
        A DataFrame ``env, legend, x, position, estimate, lower, upper, runs``, by task, legend entry and
        ``x_axis`` order; ``position`` is the value's place on the axis.
    """
    from rlbench_cli import bootstrap

    if stat not in KEY_STATS:
        raise StatsError(f"stat {stat!r}: use one of {', '.join(KEY_STATS)}")
    frame = runs.loc[np.isfinite(runs["score"].astype(float))]
    columns = ["env", "legend", "x", "position", "estimate", "lower", "upper", "runs"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    axis = x_axis(frame["x"].astype(str))
    place = dict(zip(axis.values, axis.positions))
    rank = {v: i for i, v in enumerate(axis.values)}
    cells: dict[str, np.ndarray] = {}
    keys: list[tuple[str, str, str]] = []
    grouped = frame.groupby([frame["env"].astype(str), frame["legend"].astype(str), frame["x"].astype(str)])
    for env, legend, x in sorted(grouped.groups, key=lambda k: (k[0], k[1], rank[k[2]])):
        scores = grouped.get_group((env, legend, x))["score"].to_numpy(float)
        cells[f"{env}|{legend}|{x}"] = scores[:, None]
        keys.append((env, legend, x))
    est = bootstrap.interval_estimates(cells, [stat], reps=int(reps), confidence=confidence, seed=seed)
    rows = []
    for (env, legend, x), (name, matrix) in zip(keys, cells.items()):
        point, lower, upper = est[name]
        rows.append(
            (env, legend, x, place[x], float(point[0]), float(lower[0]), float(upper[0]), len(matrix))
        )
    return pd.DataFrame(rows, columns=columns)
