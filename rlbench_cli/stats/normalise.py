"""Normalisation of scores by FIXED reference scores (``references``), never by the loaded runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from rlbench_cli.references import BUILTIN, NormalizeError, Resolved, resolve
from rlbench_cli.scoring import StatsError, _short, _warn

# Fixed reference scores live in ``references`` (classic-control, d4rl, atari, and a suite's own block);
# this mapping exposes each built-in set's table for callers that want the raw numbers.
REFERENCES: dict[str, dict[str, tuple[float, float]]] = {name: dict(rs.table) for name, rs in BUILTIN.items()}


def _resolve_references(
    tasks: Sequence[str], normalize: Any, per_run: pd.DataFrame | None = None
) -> Resolved:
    """References for ``tasks`` (see ``references.resolve``); warns when "auto" falls back to raw scores."""
    if isinstance(normalize, Resolved):
        return normalize
    try:
        res = resolve(list(tasks), normalize, per_run)
    except NormalizeError as e:
        raise StatsError(str(e)) from None
    if normalize == "auto" and res.name is None:
        _warn(
            f"No built-in reference scores cover every task ({_short(list(tasks))}); reporting RAW scores "
            "(not normalised). Add a normalize block to the suite or pass --normalize NAME."
        )
    return res


def _normalise(values: pd.Series, tasks: pd.Series, res: Resolved) -> pd.Series:
    if not res.refs:
        return values.astype(float)
    if any(len(r) == 3 for r in res.refs.values()):
        from rlbench_cli.references import normalise

        out = [normalise(float(v), res.refs[t], res.scale) for v, t in zip(values, tasks, strict=True)]
        return pd.Series(out, index=values.index, dtype=float)
    low = tasks.map(lambda t: res.refs[t][0]).astype(float)
    high = tasks.map(lambda t: res.refs[t][1]).astype(float)
    return res.scale * (values - low) / (high - low)
