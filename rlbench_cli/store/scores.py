"""Per-run scores by a score rule, computed in SQL (one aggregate per run), and phase boundaries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# each offline-to-online run's phase boundary: the first step its train/phase metric is 1
_BOUNDARIES_SQL = "SELECT run_id, min(step) AS boundary FROM metrics WHERE name = 'train/phase' AND value = 1 GROUP BY run_id"


class Scores:
    """Score rules in SQL (a mixin of ``Store``)."""

    def run_scores(
        self,
        con: Any,
        *,
        suite: str,
        metric: str,
        rule: str,
        n: int | None = None,
        drop_first: int = 0,
        statuses: Sequence[str] = ("finished",),
        envs: Sequence[str] = (),
        algos: Sequence[str] = (),
        seeds: Sequence[int] = (),
        run_ids: Sequence[str] | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
        phase: str | None = None,
    ) -> Any:
        """One score per run by a score rule, computed in SQL (one aggregate per run), as a pyarrow Table.

        The same numbers as ``stats.run_scores`` on the runs' rows of ``metric`` (``stats.finish_run_scores``
        turns this table into its output, warnings and errors included), without loading the rows: a run's
        evaluations are numbered by step before non-finite values (NULL, NaN, inf) are left out, the first
        ``drop_first`` are dropped, then the rule: ``final`` is the value at the largest step (``arg_max``),
        ``best`` the maximum, ``mean_last`` the mean of the last ``n`` points and ``auc`` the trapezoids over
        consecutive points (``lag``) divided by the step span (the mean when the span is 0). Sums are
        exactly rounded (DuckDB's ``fsum``, 2.0.1 and later), as ``stats.run_scores`` sums them (``math.fsum``), so
        they agree to the bit.

        Args:
            suite: Suite whose runs are scored.
            metric: Metric name, e.g. ``eval/return``.
            rule: ``final``, ``best``, ``mean_last`` or ``auc`` (parsed: ``stats.parse_rule``).
            n: N of ``mean_last``.
            drop_first: Evaluations dropped from the start of each run.
            statuses: Run statuses kept (all when empty).
            envs, algos, seeds, run_ids, step_min, step_max: Other filters, as in ``query_metrics``
                (the steps bound the rows, before the evaluations are numbered).
            phase: ``offline`` or ``online``: only the rows of that phase of each run, by its phase boundary
                (``phase_boundaries``), before the evaluations are numbered, as ``stats.phase_rows``.

        Returns:
            Columns ``run_id, algo, env, seed, score, rows, nonfinite, points, status``: one row per run with at least
            one row of the metric; ``rows`` counts them, ``nonfinite`` those left out as non-finite,
            ``points`` the finite ones the rule used (0: the run is emptied by ``drop_first``; ``score`` is
            then NULL). Ordered by ``run_id``.
        """
        if rule not in ("final", "best", "mean_last", "auc"):
            raise ValueError(f"unknown score rule {rule!r}")
        if rule == "mean_last" and (n is None or int(n) < 1):
            raise ValueError("mean_last needs n >= 1")
        where, params = ["r.suite = ?"], [suite]
        for col, values in (("r.status", statuses), ("r.env", envs), ("r.algo", algos), ("r.seed", seeds)):
            if values:
                where.append(f"{col} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if run_ids is not None:
            where.append("list_contains(?::VARCHAR[], r.run_id)")
            params.append(list(run_ids))
        steps, step_params = "", []
        if step_min is not None:
            steps += " AND m.step >= ?"
            step_params.append(step_min)
        if step_max is not None:
            steps += " AND m.step <= ?"
            step_params.append(step_max)
        join = ""
        if phase is not None:
            if phase not in ("offline", "online"):
                raise ValueError(f"unknown phase {phase!r}")
            join = f" LEFT JOIN ({_BOUNDARIES_SQL}) pb ON pb.run_id = m.run_id"
            steps += (
                " AND (pb.boundary IS NULL OR m.step <= pb.boundary)"
                if phase == "offline"
                else (" AND m.step > pb.boundary")
            )
        ok = "(m.value IS NOT NULL AND isfinite(m.value))"
        # the k-th evaluation of a run by step, counted before non-finite values are left out (stats.scores._clean)
        k = "row_number() OVER (PARTITION BY m.run_id ORDER BY m.step)" if drop_first else "1"
        rows = (
            f"SELECT m.run_id, m.step, m.value, {ok} AS ok, {k} AS k FROM metrics m{join} "
            f"WHERE m.name = ?{steps} AND m.run_id IN (SELECT r.run_id FROM runs r WHERE {' AND '.join(where)})"
        )
        params = [metric, *step_params, *params]
        keep = f"ok AND k > {int(drop_first)}"
        if rule in ("final", "best"):
            score = "arg_max(value, step)" if rule == "final" else "max(value)"
            per_run = (
                f"SELECT run_id, count(*) AS rows, count(*) FILTER (NOT ok) AS nonfinite, "
                f"count(*) FILTER ({keep}) AS points, {score} FILTER ({keep}) AS score FROM ({rows}) GROUP BY run_id"
            )
        else:
            if rule == "mean_last":
                kept = (
                    f"SELECT run_id, step, value, row_number() OVER (PARTITION BY run_id ORDER BY step DESC) "
                    f"AS back FROM ({rows}) WHERE {keep}"
                )
                score = f"fsum(value ORDER BY step) FILTER (back <= {int(n)}) / count(*) FILTER (back <= {int(n)})"
            else:  # trapezoids over consecutive kept points; their first has no area (pandas: fillna(0))
                kept = (
                    f"SELECT run_id, step, value, coalesce((value + lag(value) OVER w) / 2.0 * "
                    f"(step::DOUBLE - (lag(step) OVER w)::DOUBLE), 0.0) AS area FROM ({rows}) WHERE {keep} "
                    "WINDOW w AS (PARTITION BY run_id ORDER BY step)"
                )
                span = "(max(step)::DOUBLE - min(step)::DOUBLE)"
                score = (
                    f"CASE WHEN {span} > 0 THEN fsum(area ORDER BY step) / {span} "
                    "ELSE fsum(value ORDER BY step) / count(*) END"
                )
            per_run = (
                f"SELECT a.run_id, a.rows, a.nonfinite, coalesce(b.points, 0) AS points, b.score FROM "
                f"(SELECT run_id, count(*) AS rows, count(*) FILTER (NOT ok) AS nonfinite FROM ({rows}) "
                f"GROUP BY run_id) a LEFT JOIN (SELECT run_id, count(*) AS points, {score} AS score "
                f"FROM ({kept}) GROUP BY run_id) b USING (run_id)"
            )
            params = params * 2
        sql = (
            "SELECT s.run_id, r.algo, r.env, r.seed, s.score::DOUBLE AS score, s.rows, s.nonfinite, s.points, "
            "r.status "
            f"FROM ({per_run}) s JOIN runs r USING (run_id) ORDER BY s.run_id"
        )
        return con.sql(sql, params=params).to_arrow_table()

    def phase_boundaries(self, con: Any, suite: str) -> dict[str, int]:
        """``{run_id: step}``: the phase boundary (last offline step) of each offline-to-online run of a
        suite, the first step its ``train/phase`` metric is 1; runs without one are not listed."""
        rows = con.execute(
            f"SELECT b.run_id, b.boundary FROM ({_BOUNDARIES_SQL}) b JOIN runs r USING (run_id) WHERE r.suite = ?",
            [suite],
        ).fetchall()
        return {str(run_id): int(step) for run_id, step in rows}
