"""Score rules and the checks on per-run scores computed in SQL, with numpy only (no pandas).

``stats`` builds on this module (and re-exports its names); ``rlbench fetch --scores`` uses it directly,
so a command that only prints per-run scores never imports pandas.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import UsageError

__all__ = [
    "StatsError",
    "StatsWarning",
    "SCORED_COLUMNS",
    "PHASE_METRIC",
    "rule_phase",
    "parse_rule",
    "finish_order",
]

SCORED_COLUMNS = ("run_id", "algo", "env", "seed", "score", "rows", "nonfinite", "points")
"""Columns of per-run scores computed in SQL (``Store.run_scores``), which ``score_table`` takes as well."""


class StatsError(UsageError, ValueError):
    """A score rule, reference set or metric table the statistics cannot use (also a ``ValueError``)."""


class StatsWarning(UserWarning):
    """Data was dropped or changed on the way to the statistics (non-finite values, incomplete seeds...)."""


def _warn(message: str) -> None:
    warnings.warn(message, StatsWarning, stacklevel=3)


def _short(items: Sequence[object], limit: int = 5) -> str:
    items = list(items)
    text = ", ".join(map(str, items[:limit]))
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


PHASE_METRIC = "train/phase"  # 0 from step 0, 1 from the phase boundary (the last offline step) on
_PHASE = re.compile(r"^(?P<rule>.*?)@(?P<phase>offline|online)$")


def rule_phase(rule: str) -> tuple[str, str | None]:
    """``"final@online"`` -> ``("final", "online")``; a rule without ``@offline`` / ``@online`` -> (rule, None).

    A phase scores part of each offline-to-online run: ``offline`` the evaluations up to and including its
    phase boundary (the last offline step; all of a run without one), ``online`` those after it (none for a
    run without one, which is then left out)."""
    m = _PHASE.match(rule.strip()) if isinstance(rule, str) else None
    return (m.group("rule"), m.group("phase")) if m else (rule, None)


def parse_rule(rule: str) -> tuple[str, int | None]:
    """Parses a score rule.

    Args:
        rule: ``final`` (last evaluation), ``best`` (maximum over evaluations), ``mean_last:N`` (mean of the
            last N evaluations, N >= 1) or ``auc`` (area under the (step, value) curve divided by the step
            span, i.e. the mean value over training); any of them may end in ``@offline`` or ``@online``
            (see ``rule_phase``), which this leaves out.

    Returns:
        ``(name, n)``: ``n`` is N for ``mean_last:N`` and ``None`` otherwise.

    Raises:
        StatsError: (a ``ValueError``) for anything else.
    """
    text = rule_phase(rule)[0].strip() if isinstance(rule, str) else rule
    if text in ("final", "best", "auc"):
        return text, None
    match = re.fullmatch(r"mean_last:(\d+)", text) if isinstance(text, str) else None
    if match and int(match.group(1)) >= 1:
        return "mean_last", int(match.group(1))
    raise StatsError(f"Unknown score rule {rule!r}. Use one of: final, best, mean_last:N (N >= 1), auc.")


def _sort_key(values: Any) -> np.ndarray:
    """A column as an array ``np.lexsort`` orders as pandas' ``sort_values`` does (missing values last)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iufb":
        return arr
    # text (or mixed) columns: rank the distinct values as Python sorts them, None last
    present = sorted({v for v in arr.tolist() if v is not None})
    rank = {v: i for i, v in enumerate(present)}
    return np.array([rank.get(v, len(present)) if v is not None else len(present) for v in arr.tolist()])


def finish_order(columns: Mapping[str, Any], rule: str = "final", drop_first: int = 0) -> np.ndarray:
    """Which per-run scores computed in SQL ``run_scores`` keeps, in its order, with its warnings and errors.

    ``Store.run_scores`` applies the rule in the database and counts, per run, its rows, the non-finite ones
    and the points the rule used; this says what ``stats.run_scores`` says about them (non-finite values
    dropped, runs emptied by ``drop_first``, runs shorter than ``mean_last:N``), in the same words and order.

    Args:
        columns: ``SCORED_COLUMNS`` as equal-length sequences (numpy arrays, lists, pandas columns), one
            entry per run.
        rule: The score rule the scores were computed with.
        drop_first: The evaluations dropped from the start of each run.

    Returns:
        Positions into ``columns`` of the runs kept, sorted by ``algo, env, seed, run_id`` (stable).
    """
    name, n = parse_rule(rule)
    if int(drop_first) != drop_first or drop_first < 0:
        raise StatsError(f"drop_first must be a non-negative integer, got {drop_first!r}.")
    missing = [c for c in SCORED_COLUMNS if c not in columns]
    if missing:
        raise StatsError(
            f"Per-run scores lack column(s) {', '.join(missing)}; expected {', '.join(SCORED_COLUMNS)}."
        )
    rows = np.asarray(columns["rows"], dtype=np.int64)
    nonfinite = np.asarray(columns["nonfinite"], dtype=np.int64)
    points = np.asarray(columns["points"], dtype=np.int64)
    run_ids = np.asarray(columns["run_id"], dtype=object)
    if not len(rows) or not int(rows.sum()):
        raise StatsError("Metric table is empty: no evaluation rows to score. Did the runs log this metric?")
    bad = nonfinite > 0
    if bad.any():
        _warn(
            f"Dropped {int(nonfinite[bad].sum())} non-finite value(s) (NaN/inf) from {int(bad.sum())} run(s): "
            f"{_short(sorted(map(str, run_ids[bad])))}."
        )
    keep = rows > nonfinite
    if not keep.any():
        raise StatsError("Metric table has no finite values left after dropping NaN/inf.")
    if drop_first:
        emptied = sorted(map(str, run_ids[keep & (points == 0)]))
        if emptied:
            _warn(
                f"{len(emptied)} run(s) have no more than {drop_first} evaluation point(s) and were dropped "
                f"by drop_first={drop_first}: {_short(emptied)}."
            )
        keep &= points > 0
        if not keep.any():
            raise StatsError(f"No evaluation points left after drop_first={drop_first}; lower --drop-first.")
    if name == "mean_last":
        short = run_ids[keep & (points < n)]
        if len(short):
            _warn(
                f"{len(short)} run(s) have fewer than {n} evaluation points; mean_last:{n} averages all the "
                f"points they have: {_short(sorted(map(str, short)))}."
            )
    kept = np.flatnonzero(keep)
    keys = [_sort_key(np.asarray(columns[c], dtype=object)[kept]) for c in ("run_id", "seed", "env", "algo")]
    seeds = np.asarray(columns["seed"])[kept]
    if seeds.dtype.kind in "iufb":
        keys[1] = seeds
    return kept[np.lexsort(keys)]
