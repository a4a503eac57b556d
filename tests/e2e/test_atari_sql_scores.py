"""On real d3rlpy logs (d3rlpy-benchmarks' Atari runs): `rlbench leaderboard`, `fetch --scores` and
`plot --no-curves`, which score runs in SQL, print exactly what the metric rows scored in pandas give."""

import csv
import io
import math
from pathlib import Path

import pytest
from e2e_cli import rl

from rlbench_cli import leaderboard as lb
from rlbench_cli import stats
from rlbench_cli.analysis import load_metric, suite_normalize
from rlbench_cli.store import Store

FIXTURE = Path(__file__).parents[2].parent / "shared" / "fixtures" / "d3rlpy-benchmarks-atari"
RUNS = FIXTURE / "atari"
pytestmark = pytest.mark.skipif(
    not RUNS.is_dir(), reason=f"d3rlpy-benchmarks Atari fixture not found at {FIXTURE}"
)
CASES = [("final", 0), ("best", 1), ("mean_last:5", 0), ("auc", 2)]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    db = tmp_path_factory.mktemp("atari-sql") / "rlbench.duckdb"
    rl("fetch", "--from", f"d3rlpy:{RUNS}", "--into", "atari", "--db", db)
    return db


def _rows_board(db, rule, drop_first, per_task=False):
    store = Store(db)
    df, _ = load_metric(store, "atari", "eval/return")
    return lb.build("atari", df, metric="eval/return", rule=rule, drop_first=drop_first, reps=2000, seed=0,
                    normalize=suite_normalize(store, "atari", "auto"), per_task=per_task)  # fmt: skip


@pytest.mark.parametrize(("rule", "drop_first"), CASES)
def test_leaderboard_same_as_from_rows(db, rule, drop_first):
    r = rl("leaderboard", "atari", "--db", db, "--reps", "2000", "--score", rule, "--drop-first", drop_first)
    board = _rows_board(db, rule, drop_first)
    assert r.stdout == lb.render(board, "md")
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")] == [
        f"warning: {w}" for w in board.warnings
    ]
    per_task = rl("leaderboard", "atari", "--db", db, "--per-task", "--format", "json", "--score", rule,
                  "--drop-first", drop_first)  # fmt: skip
    assert per_task.stdout == lb.render(_rows_board(db, rule, drop_first, per_task=True), "json")


def test_fetch_scores_same_as_run_scores(db):
    r = rl("fetch", "--db", db, "--suite", "atari", "--scores", "--score", "best", "--drop-first", "1",
           "--format", "csv")  # fmt: skip
    got = {row["run_id"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    df, _ = load_metric(Store(db), "atari", "eval/return")
    ref = stats.run_scores(df, "best", 1)
    assert len(got) == len(ref) == 230
    for row in ref.itertuples(index=False):
        assert float(got[row.run_id]["score"]) == row.score or math.isclose(
            float(got[row.run_id]["score"]), row.score, rel_tol=1e-15
        )
        assert (got[row.run_id]["algo"], got[row.run_id]["env"]) == (row.algo, row.env)


def test_plot_no_curves_same_leaderboard(db, tmp_path):
    rl("plot", "atari", "--db", db, "--reps", "2000", "--no-curves", "--out", tmp_path / "fast")
    rl("plot", "atari", "--db", db, "--reps", "2000", "--out", tmp_path / "all")
    for name in ("leaderboard.md", "leaderboard.csv"):
        assert (tmp_path / "fast" / name).read_text() == (tmp_path / "all" / name).read_text()
    fast = {p.name for p in (tmp_path / "fast").iterdir()}
    assert not any(n.startswith(("learning_curves", "sample_efficiency")) for n in fast)
    assert any(n.startswith("aggregates") for n in fast)
