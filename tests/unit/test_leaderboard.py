"""Ranked tables of rlbench_cli.leaderboard."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import leaderboard as lb
from rlbench_cli import stats

pytestmark = pytest.mark.fast

COLS = ["run_id", "algo", "env", "seed", "step", "value"]


def table_and_stats(normalize: str | None = "auto"):
    rng = np.random.default_rng(0)
    finals = {"a2c": 0.3, "dqn": 0.9, "ppo": 0.6}
    rows = []
    for algo, final in finals.items():
        for env in ("Acrobot-v1", "CartPole-v1"):
            low, high = stats.REFERENCES["classic-control"][env]
            for s in range(4):
                value = low + (final + rng.normal(0, 0.1)) * (high - low)
                rows.append((f"{algo}/{env}/{s}", algo, env, s, 1000, value))
    df = pd.DataFrame(rows, columns=COLS)
    df["name"] = "eval/return"
    table = stats.score_table(df, normalize=normalize)
    return table, stats.aggregates(table, reps=200), stats.probability_of_improvement(table, reps=50)


@pytest.fixture(scope="module")
def board_inputs():
    return table_and_stats()


def test_leaderboard_is_ranked_by_iqm(board_inputs) -> None:
    table, agg, poi = board_inputs
    board = lb.leaderboard(table, agg, poi)
    assert list(board.columns) == list(lb.COLUMNS)
    assert board["algo"].tolist() == ["dqn", "ppo", "a2c"]
    assert board["rank"].tolist() == [1, 2, 3]
    assert board["iqm"].is_monotonic_decreasing
    assert (board["iqm_lower"] <= board["iqm"]).all() and (board["iqm"] <= board["iqm_upper"]).all()
    assert board["runs"].tolist() == [8, 8, 8] and board["tasks"].tolist() == [2, 2, 2]
    p = poi.set_index(["algo_x", "algo_y"])["estimate"]
    assert board["p_improve_over_next"].iloc[0] == p[("dqn", "ppo")]
    assert board["p_improve_over_next"].iloc[1] == p[("ppo", "a2c")]
    assert np.isnan(board["p_improve_over_next"].iloc[2])
    iqm = agg.loc[agg["metric"] == "iqm"].set_index("algo")["estimate"]
    assert board.set_index("algo")["iqm"].to_dict() == iqm.to_dict()


def test_leaderboard_without_poi_leaves_nan(board_inputs) -> None:
    table, agg, _ = board_inputs
    assert lb.leaderboard(table, agg)["p_improve_over_next"].isna().all()


def test_header_lines_state_what_the_table_shows(board_inputs) -> None:
    table, _, _ = board_inputs
    lines = lb.header_lines("quickstart", table, reps=50000, seed=3)
    text = "\n".join(lines)
    for needle in (
        "Suite: quickstart",
        "Metric: eval/return; score rule: final",
        "classic-control reference scores",
        "Runs: 24 in the table (3 algorithms x 2 tasks: Acrobot-v1, CartPole-v1)",
        "95% stratified bootstrap (rliable), 50,000 reps, seed 3",
    ):
        assert needle in text


def test_to_markdown_is_a_plain_table(board_inputs) -> None:
    table, agg, poi = board_inputs
    board = lb.leaderboard(table, agg, poi)
    md = lb.to_markdown(board, lb.header_lines("quickstart", table, reps=200, seed=0))
    lines = md.splitlines()
    assert lines[0] == "- Suite: quickstart"
    head = lines.index("") + 1
    assert lines[head].startswith("| rank | algo | iqm [lower, upper] | median |")
    assert lines[head + 1].startswith("|---:|:---|---:|")
    rows = lines[head + 2 :]
    assert len(rows) == 3
    assert all(r.count("|") == lines[head].count("|") for r in rows)
    assert rows[0].startswith("| 1 | dqn | ")
    assert rows[-1].rstrip().endswith("| n/a | 8 | 2 |")


def test_to_markdown_formats_and_escapes() -> None:
    df = pd.DataFrame({"algo": ["a|b"], "x": [1234.5678], "y": [np.nan], "z": [0.123456]})
    md = lb.to_markdown(df)
    assert md == "| algo | x | y | z |\n|:---|---:|---:|---:|\n| a\\|b | 1,234.6 | n/a | 0.123 |\n"


def test_to_csv_round_trips(board_inputs, tmp_path) -> None:
    table, agg, poi = board_inputs
    board = lb.leaderboard(table, agg, poi)
    path = tmp_path / "out" / "leaderboard.csv"
    text = lb.to_csv(board, path)
    assert path.read_text() == text
    back = pd.read_csv(io.StringIO(text))
    pd.testing.assert_frame_equal(back, board, check_dtype=False)


def test_raw_scores_have_no_optimality_gap() -> None:
    table, agg, poi = table_and_stats(normalize=None)
    board = lb.leaderboard(table, agg, poi)
    assert board["optimality_gap"].isna().all()
    assert "raw scores, not normalised" in "\n".join(lb.header_lines("s", table, 200, 0))


def test_poi_estimates_are_the_bootstraps_estimates_bit_for_bit(board_inputs) -> None:
    table, agg, poi = board_inputs
    points = lb.poi_estimates(table)
    assert points[["lower", "upper"]].isna().all().all()
    boot = poi.set_index(["algo_x", "algo_y"])["estimate"].to_dict()
    assert points.set_index(["algo_x", "algo_y"])["estimate"].to_dict() == boot  # every ordered pair, exactly
    # so build's board (no bootstrap of the pairs) is the board of the bootstrapped statistics
    board = lb.leaderboard(table, agg, poi)
    pd.testing.assert_frame_equal(lb.leaderboard(table, agg, points), board)
