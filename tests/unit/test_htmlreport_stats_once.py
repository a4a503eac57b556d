"""The HTML report bootstraps a suite's statistics once: its leaderboard is the one make_report computed for
the figures, and equals `rlbench leaderboard`'s (leaderboard.build) on the same rows."""

from __future__ import annotations

import numpy as np
import pytest

from rlbench_cli import leaderboard, stats
from rlbench_cli.htmlreport import _e, _table, build_html
from rlbench_cli.store import Store


def _runs(left_out: bool) -> list:
    rng = np.random.default_rng(1)
    runs = [(algo, env, seed, [(s, float(mu + 10 * s / 1000 + rng.normal(0, 5))) for s in (0, 500, 1000)])
            for algo, mu in (("ppo", 100.0), ("dqn", 60.0)) for env in ("CartPole-v1", "Acrobot-v1")
            for seed in range(3)]  # fmt: skip
    if left_out:  # a task only ppo ran: left out of the ranking, said in the board's header
        runs += [("ppo", "Pendulum-v1", seed, [(1000, -150.0 + seed)]) for seed in range(3)]
    return runs


def _page(tmp_path, make_results_db, monkeypatch, left_out: bool) -> tuple[str, list[str], int]:
    db = tmp_path / "r.duckdb"
    make_results_db(db, _runs(left_out), suite="s")
    calls = []
    real = stats.aggregates
    monkeypatch.setattr(stats, "aggregates", lambda *a, **k: calls.append(1) or real(*a, **k))
    page, notes = build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None,
                             reps=500, seed=0)  # fmt: skip
    return page, notes, len(calls)


def _expected(tmp_path) -> leaderboard.Board:
    store = Store(tmp_path / "r.duckdb")
    with store.reader() as con:
        df = store.query_metrics(con, suite="s", metrics=["eval/return"], statuses=["finished"]).to_pandas()
    return leaderboard.build("s", df[["run_id", "algo", "env", "seed", "step", "value"]], metric="eval/return",
                             rule="final", normalize=None, reps=500, seed=0)  # fmt: skip


def test_the_report_bootstraps_once_and_shows_the_leaderboards_numbers(
    tmp_path, make_results_db, monkeypatch
):
    page, _, calls = _page(tmp_path, make_results_db, monkeypatch, left_out=False)
    assert calls == 1  # the figures' aggregates, reused for the leaderboard
    board = _expected(tmp_path)
    assert board.frame[["iqm", "iqm_lower", "iqm_upper"]].notna().all().all()
    assert _table(board.frame, "leaderboard", ("algo",)) in page  # the same numbers, cell for cell
    assert "".join(f"<li>{_e(h)}</li>" for h in board.header) in page


def test_a_left_out_task_is_said_and_no_curves_shows_the_same_tables(tmp_path, make_results_db, monkeypatch):
    page, notes, calls = _page(tmp_path, make_results_db, monkeypatch, left_out=True)
    assert calls == 2  # one per task group drawn (all algorithms; ppo alone), none for the leaderboard
    assert _table(_expected(tmp_path).frame, "leaderboard", ("algo",)) in page
    assert "Tasks left out, as not every algorithm has runs there: Pendulum-v1 (no runs of dqn)" in page
    assert any("Pendulum-v1" in n for n in notes)
    # --no-curves: scores from the database, the same tables and notes, no curves over training
    lean, lean_notes = build_html(Store(tmp_path / "r.duckdb"), "s", metric="eval/return", rule="final",
                                  drop_first=0, normalize=None, reps=500, seed=0, curves=False)  # fmt: skip

    def section(html: str, anchor: str) -> str:
        start = html.index(f'<section id="{anchor}">')
        return html[start : html.index("</section>", start)]

    for anchor in ("leaderboard", "per-task", "runs"):
        assert section(lean, anchor) == section(page, anchor)
    assert 'data-check="figure:aggregates"' in lean and 'data-check="figure:learning_curves"' not in lean
    assert 'data-check="figure:learning_curves"' in page
    assert lean_notes == notes


def test_without_common_tasks_the_leaderboard_section_says_why(tmp_path, make_results_db):
    """No task has runs of every algorithm: the page says so where the ranking would be (make_report's
    per-task fallback is not a ranked board)."""
    runs = [("ppo", "CartPole-v1", s, [(1000, 100.0 + s)]) for s in range(3)]
    runs += [("dqn", "Acrobot-v1", s, [(1000, -90.0 + s)]) for s in range(3)]
    make_results_db(tmp_path / "r.duckdb", runs, suite="s")
    page, _ = build_html(Store(tmp_path / "r.duckdb"), "s", metric="eval/return", rule="final", drop_first=0,
                         normalize=None, reps=200, seed=0)  # fmt: skip
    start = page.index('<section id="leaderboard">')
    section = page[start : page.index("</section>", start)]
    assert '<p class="note">' in section and "no task has runs of every algorithm" in section


def test_a_paired_section_shows_compare_paireds_numbers_and_a_bad_baseline_stops_first(
    tmp_path, make_results_db, monkeypatch
):
    from rlbench_cli.sequential import paired_suite

    db = tmp_path / "r.duckdb"
    make_results_db(db, _runs(False), suite="s")
    page, _ = build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None,
                         reps=500, seed=0, paired="dqn", alternative="greater")  # fmt: skip
    section = page.split('<section id="paired">', 1)[1].split("</section>", 1)[0]
    assert "Each algo against <b>dqn</b> within each task" in section and "one-sided (greater" in section
    rows, _ = paired_suite(Store(db), "s", "dqn", "eval/return", "final", 0, "greater", 500, 0)
    assert [(r["group"], r["other"]) for r in rows] == [("Acrobot-v1", "ppo"), ("CartPole-v1", "ppo")]
    for r in rows:  # the page's cells are compare --paired's numbers
        cells = (f'<td class="text">{r["group"]}</td><td class="text">{r["other"]}</td><td class="">3</td>'
                 f'<td class="">0</td><td class="">{r["mean_a"]:.4g}</td><td class="">{r["mean_b"]:.4g}</td>'
                 f'<td class="">{r["mean_diff"]:.4g}</td><td class="">{r["lower"]:.4g}</td>')  # fmt: skip
        assert cells in section and f'<td class="">{r["wilcoxon_p"]:.4g}</td>' in section
    drawn = []
    monkeypatch.setattr("rlbench_cli.report.make_report", lambda *a, **k: drawn.append(1))
    with pytest.raises(stats.StatsError, match=r"--paired 'sac' names no task or algorithm"):
        build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None, reps=500,
                   seed=0, paired="sac")  # fmt: skip
    assert drawn == []  # refused before any figure


def test_a_paired_section_at_several_steps_is_compare_paireds_one_family(
    tmp_path, make_results_db, monkeypatch
):
    from rlbench_cli.errors import UsageError
    from rlbench_cli.sequential import paired_suite

    db = tmp_path / "r.duckdb"
    make_results_db(db, _runs(False), suite="s")
    page, _ = build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None,
                         reps=500, seed=0, paired="dqn", paired_steps=[0, 500])  # fmt: skip
    section = page.split('<section id="paired">', 1)[1].split("</section>", 1)[0]
    assert "at each of steps 0, 500: one family" in section and "over the 4 tested rows" in section
    assert "rlbench compare SUITE --paired 'dqn' --step-max 0 --step-max 500</code>" in section
    assert '<th class="">step</th>' in section
    rows, settings = paired_suite(
        Store(db), "s", "dqn", "eval/return", "final", 0, "two-sided", 500, 0, [0, 500]
    )
    assert settings["tested"] == 4 and [r["step"] for r in rows] == [0, 0, 500, 500]
    at_zero = paired_suite(Store(db), "s", "dqn", "eval/return", "final", 0, "two-sided", 500, 0, 0)[0]
    for r, alone in zip(rows, at_zero + [None, None], strict=True):  # each step's rows, Holm over all four
        cells = (f'<td class="">{r["step"]}</td><td class="text">{r["group"]}</td><td class="text">{r["other"]}'
                 f'</td><td class="">3</td><td class="">0</td><td class="">{r["mean_a"]:.4g}</td>')  # fmt: skip
        assert cells in section and f'<td class="">{r["holm_p"]:.4g}</td>' in section
        if alone is not None:  # step 0 alone: the same difference, a smaller family
            assert alone["mean_diff"] == r["mean_diff"] and alone["holm_p"] <= r["holm_p"]
    one, _ = build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None,
                        reps=500, seed=0, paired="dqn", paired_steps=[500])  # fmt: skip
    one = one.split('<section id="paired">', 1)[1].split("</section>", 1)[0]
    assert "as if it ended at step 500." in one and '<th class="">step</th>' not in one
    drawn = []
    monkeypatch.setattr("rlbench_cli.report.make_report", lambda *a, **k: drawn.append(1))
    with pytest.raises(UsageError, match="--step-max 500 is given twice"):
        build_html(Store(db), "s", metric="eval/return", rule="final", drop_first=0, normalize=None, reps=500,
                   seed=0, paired="dqn", paired_steps=[500, 500])  # fmt: skip
    assert drawn == []  # refused before any figure
