"""Data edge cases on the way from stored metrics to figures and leaderboards.

NaN and inf values, runs of unequal length, a single seed, an algorithm missing a task, a suite with no
finished runs: figures and leaderboards are still produced with a clear warning, or one clear line says why
not (exit code 2).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from typer.testing import CliRunner

from rlbench_cli import leaderboard as lb
from rlbench_cli import report, stats
from rlbench_cli.cli.app import app

COLS = ["run_id", "algo", "env", "seed", "step", "value"]
NAN, INF = float("nan"), float("inf")
TASKS = ("Acrobot-v1", "CartPole-v1")
FIGURES = ("aggregates", "performance_profile", "sample_efficiency", "learning_curves")


def rows(runs) -> pd.DataFrame:
    """``runs``: (algo, env, seed, [values at steps 1000, 2000, ...]) -> tidy metric rows."""
    out = [(f"{a}/{e}/{s}", a, e, s, 1000 * (k + 1), v) for a, e, s, vals in runs for k, v in enumerate(vals)]
    return pd.DataFrame(out, columns=COLS).assign(name="eval/return")


def curve(final: float, n: int = 5) -> list[float]:
    return list(np.linspace(final / 4, final, n))


def full_grid(seeds=(0, 1, 2), algos=("ppo", "random")) -> list:
    finals = {"ppo": 400.0, "random": 20.0, "dqn": 200.0}
    return [(a, e, s, curve(finals[a] + 10 * s)) for a in algos for e in TASKS for s in seeds]


def run_report(df, tmp_path, **kw):
    kw = {"metric": "eval/return", "rule": "final", "drop_first": 0, "normalize": "auto", "reps": 200,
          "seed": 0, **kw}  # fmt: skip
    return report.make_report("edge", df, out_dir=tmp_path, **kw)


def assert_figures(result, out_dir, with_poi=True):
    names = FIGURES + (("probability_of_improvement",) if with_poi else ())
    for name in names:
        path = out_dir / f"{name}.png"
        assert path in result.paths
        with Image.open(path) as im:
            assert im.size[0] > 100 and im.size[1] > 100
    assert (out_dir / "leaderboard.md").read_text().startswith("- Suite: edge")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr and "internal error" not in r.stderr
    return lines[0]


def warning_lines(r) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]


# -- NaN and inf ---------------------------------------------------------------------------------------------
def nan_runs():
    runs = full_grid()
    runs[0] = (*runs[0][:3], [10.0, NAN, 30.0, INF, -INF])  # ppo/Acrobot/0 ends on non-finite values
    runs[1] = (*runs[1][:3], [NAN, 40.0, 50.0])
    return runs


def test_non_finite_values_are_dropped_with_a_count_and_the_rest_is_scored():
    df = rows(nan_runs())
    with pytest.warns(
        stats.StatsWarning, match=r"Dropped 4 non-finite value\(s\) \(NaN/inf\) from 2 run\(s\)"
    ):
        per_run = stats.run_scores(df, "final").set_index("run_id")["score"]
    assert per_run["ppo/Acrobot-v1/0"] == 30.0  # the last finite evaluation
    assert per_run["ppo/Acrobot-v1/1"] == 50.0
    assert np.isfinite(per_run).all() and len(per_run) == 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.StatsWarning)
        for rule in ("best", "auc", "mean_last:2"):
            assert np.isfinite(stats.run_scores(df, rule)["score"]).all()


def test_report_with_non_finite_values_writes_every_figure_and_warns_once(tmp_path):
    result = run_report(rows(nan_runs()), tmp_path)
    assert_figures(result, tmp_path)
    dropped = [w for w in result.warnings if w.startswith("Dropped 4 non-finite value(s)")]
    assert len(dropped) == 1, result.warnings  # said once, not once per figure
    assert len(result.warnings) == len(set(result.warnings))
    assert "nan" not in (tmp_path / "leaderboard.md").read_text().lower()


def test_cli_plot_and_leaderboard_with_non_finite_values(tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [(a, e, s, list(enumerate(v, 1))) for a, e, s, v in nan_runs()], suite="edge")
    r = invoke("plot", "edge", "--db", db, "--reps", 200, "--out", tmp_path / "fig")
    assert r.exit_code == 0, r.output + r.stderr
    assert sum("Dropped 4 non-finite value(s)" in ln for ln in warning_lines(r)) == 1
    r = invoke("leaderboard", "edge", "--db", db, "--reps", 200, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert any("non-finite" in ln for ln in warning_lines(r))
    assert '"algo": "ppo"' in r.stdout and "NaN" not in r.stdout


# -- unequal lengths ------------------------------------------------------------------------------------------
def test_runs_of_unequal_length_are_scored_each_on_its_own_points():
    df = rows([("a", "T", 0, [1.0, 5.0]), ("a", "T", 1, [2.0, 9.0, 4.0, 3.0, 6.0]), ("a", "T", 2, [7.0])])
    scores = {rule: stats.run_scores(df, rule).set_index("seed")["score"].to_dict()
              for rule in ("final", "best", "auc")}  # fmt: skip
    assert scores["final"] == {0: 5.0, 1: 6.0, 2: 7.0}
    assert scores["best"] == {0: 5.0, 1: 9.0, 2: 7.0}
    # trapezoids over each run's own steps, divided by its own span; one point: its value
    assert scores["auc"] == pytest.approx({0: 3.0, 1: (5.5 + 6.5 + 3.5 + 4.5) / 4, 2: 7.0})
    with pytest.warns(stats.StatsWarning, match="2 run\\(s\\) have fewer than 3 evaluation points"):
        last3 = stats.run_scores(df, "mean_last:3").set_index("seed")["score"].to_dict()
    assert last3 == pytest.approx({0: 3.0, 1: 13 / 3, 2: 7.0})


def test_report_with_runs_of_unequal_length(tmp_path):
    runs = full_grid()
    runs = [(a, e, s, v[: 2 + (s + len(a)) % 4]) for a, e, s, v in runs]  # 2 to 5 evaluations each
    result = run_report(rows(runs), tmp_path, rule="mean_last:3")
    assert_figures(result, tmp_path)
    assert any("fewer than 3 evaluation points" in w for w in result.warnings)


# -- a single seed --------------------------------------------------------------------------------------------
def test_a_single_seed_gives_degenerate_intervals_and_every_figure(tmp_path):
    df = rows(full_grid(seeds=(0,)))
    table = stats.score_table(df)
    assert table.num_runs == {"ppo": 1, "random": 1}
    agg = stats.aggregates(table, reps=200, seed=0)
    for _, row in agg.iterrows():
        if row["metric"] == "optimality_gap" and not table.normalized:
            continue
        assert np.isfinite([row["estimate"], row["lower"], row["upper"]]).all(), row
        assert row["lower"] <= row["estimate"] + 1e-9 and row["estimate"] <= row["upper"] + 1e-9
    result = run_report(df, tmp_path)
    assert_figures(result, tmp_path)
    board = lb.build("edge", df, metric="eval/return", reps=200)
    assert board.frame["runs"].tolist() == [2, 2]


def test_a_single_run_of_a_single_algorithm(tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(1000, 50.0)])], suite="one")
    r = invoke("plot", "one", "--db", db, "--reps", 100, "--out", tmp_path / "fig")
    assert r.exit_code == 0, r.output + r.stderr
    assert (tmp_path / "fig" / "aggregates.png").exists()
    assert not (tmp_path / "fig" / "probability_of_improvement.png").exists()  # needs two algorithms
    r = invoke("leaderboard", "one", "--db", db, "--reps", 100)
    assert r.exit_code == 0 and "| 1 | ppo |" in r.stdout


# -- an algorithm missing a task ------------------------------------------------------------------------------
def missing_task_runs():
    return [
        r for r in full_grid(algos=("ppo", "random", "dqn")) if not (r[0] == "dqn" and r[1] == "Acrobot-v1")
    ]


def test_report_with_an_algorithm_missing_a_task_warns_and_still_draws(tmp_path):
    result = run_report(rows(missing_task_runs()), tmp_path)
    assert_figures(result, tmp_path)
    # the same rule as the leaderboard: every algorithm is kept, the task some lack is left out (and said)
    assert any("Acrobot-v1 (no runs of dqn)" in w for w in result.warnings), result.warnings
    assert "| dqn |" in result.leaderboard_md


def test_leaderboard_with_an_algorithm_missing_a_task_ranks_common_tasks_and_warns():
    board = lb.build("edge", rows(missing_task_runs()), metric="eval/return", reps=200)
    assert sorted(board.frame["algo"]) == ["dqn", "ppo", "random"]
    assert board.frame["tasks"].tolist() == [1, 1, 1]
    assert any("Acrobot-v1 (no runs of dqn)" in w for w in board.warnings), board.warnings
    assert any("Acrobot-v1 (no runs of dqn)" in h for h in board.header)


def test_cli_with_an_algorithm_missing_a_task(tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [(a, e, s, list(enumerate(v, 1))) for a, e, s, v in missing_task_runs()], suite="gap")
    r = invoke("leaderboard", "gap", "--db", db, "--reps", 200)
    assert r.exit_code == 0, r.stderr
    assert any("Acrobot-v1 (no runs of dqn)" in ln for ln in warning_lines(r)), r.stderr
    r = invoke("plot", "gap", "--db", db, "--reps", 200, "--out", tmp_path / "fig")
    assert r.exit_code == 0, r.stderr
    assert any("Acrobot-v1 (no runs of dqn)" in ln for ln in warning_lines(r)), r.stderr
    assert (tmp_path / "fig" / "aggregates.png").exists()
    r = invoke("leaderboard", "gap", "--db", db, "--per-task")
    assert r.exit_code == 0 and r.stdout.count("| dqn |") == 1


def test_algorithms_with_no_task_in_common_is_a_clear_error():
    df = rows([("a", "T1", 0, [1.0]), ("b", "T2", 0, [2.0])])
    with pytest.raises(stats.StatsError, match="no task has runs of every algorithm.*--per-task"):
        lb.build("edge", df, metric="eval/return", reps=200)


# -- nothing to score -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["plot", "leaderboard"])
def test_no_finished_runs_is_one_clear_line(command, tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    runs = [("ppo", "CartPole-v1", s, [(1000, 1.0)]) for s in (0, 1)] + [("random", "CartPole-v1", 0, [])]
    make_results_db(db, runs, suite="nothing", status=["failed", "interrupted", "failed"])
    line = one_line_error(invoke(command, "nothing", "--db", db))
    assert "suite 'nothing' has no finished runs yet; see rlbench status nothing" in line


@pytest.mark.parametrize("command", ["plot", "leaderboard"])
def test_failed_runs_that_logged_nothing_say_no_finished_runs(command, tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [])], suite="crashed", status="failed")
    line = one_line_error(invoke(command, "crashed", "--db", db))
    assert "has no finished runs yet" in line  # not "no metric eval/return": that is not the problem


@pytest.mark.parametrize("command", ["plot", "leaderboard"])
def test_only_non_finite_values_is_one_clear_line(command, tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(1, NAN), (2, INF)]), ("dqn", "CartPole-v1", 0, [(1, NAN)])],
                    suite="nans")  # fmt: skip
    line = one_line_error(invoke(command, "nans", "--db", db))
    assert "every 'eval/return' value of its finished runs is NaN or inf" in line
    assert "rlbench fetch --suite nans --metric eval/return" in line


def test_drop_first_beyond_every_run_is_one_clear_line(tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(1, 1.0), (2, 2.0)])], suite="short")
    line = one_line_error(invoke("leaderboard", "short", "--db", db, "--drop-first", 5))
    assert "drop_first=5" in line and "lower --drop-first" in line


def test_report_with_no_task_common_to_all_algorithms_writes_curves_and_per_task_table(tmp_path):
    data = rows(missing_task_runs())
    only = data.loc[
        ~((data["algo"] != "dqn") & (data["env"] != "Acrobot-v1"))
    ]  # dqn elsewhere, others on Acrobot
    only = only.loc[~((only["algo"] == "dqn") & (only["env"] == "Acrobot-v1"))]
    assert set(only.loc[only["algo"] == "dqn", "env"]).isdisjoint(set(only.loc[only["algo"] != "dqn", "env"]))
    result = run_report(only, tmp_path)
    assert any("no task has runs of every algorithm" in w for w in result.warnings), result.warnings
    assert (tmp_path / "learning_curves.png").exists() and not (tmp_path / "aggregates.png").exists()
    assert "| dqn |" in result.leaderboard_md and "ddof=0" in result.leaderboard_md
