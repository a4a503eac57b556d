"""Results bundles: `fetch --format bundle` writes a suite as Parquet, `fetch --from rlbench:DIR` reads it back."""

import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _logs(root):
    for seed, (a, b) in enumerate([(10.0, 30.0), (20.0, 50.0)]):
        folder = root / f"CQL_my_game_{seed}_2024010112000{seed}"
        folder.mkdir(parents=True)
        (folder / "environment.csv").write_text(f"1,1000,{a}\n2,2000,{b}\n")
        (folder / "loss.csv").write_text("1,1000,0.5\n2,2000,0.25\n")
        (folder / "params.json").write_text('{"lr": 0.001}')
    return root


def test_bundle_round_trip_keeps_every_row_and_imports_once(tmp_path):
    src, dst, out = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "bundle"
    assert (
        invoke(
            "fetch", "--from", f"d3rlpy:{_logs(tmp_path / 'logs')}", "--into", "mine", "--db", src
        ).exit_code
        == 0
    )
    r = invoke("fetch", "--suite", "mine", "--format", "bundle", "-o", out, "--db", src)
    assert r.exit_code == 0, r.output
    assert "wrote 2 finished runs (8 metric rows) of suite 'mine'" in r.output
    assert pq.read_table(out / "metrics.parquet").num_rows == 8
    assert json.loads((out / "suite.json").read_text())["name"] == "mine"

    r = invoke("fetch", "--from", f"rlbench:{out}", "--into", "study", "--db", dst)
    assert r.exit_code == 0, r.output
    assert "imported 2 runs (8 metric rows) into suite 'study'" in r.output
    r = invoke("fetch", "--from", f"rlbench:{out}", "--into", "study", "--db", dst)
    assert "imported 0 runs" in r.output and "2 already present" in r.output

    a = invoke("fetch", "--suite", "mine", "--format", "json", "--db", src)
    b = invoke("fetch", "--suite", "study", "--format", "json", "--db", dst)
    key = lambda r: (r["algo"], r["env"], r["seed"], r["name"], r["step"], r["value"])  # noqa: E731
    assert sorted(map(key, json.loads(a.output))) == sorted(map(key, json.loads(b.output)))


def test_bundle_errors_are_one_line(tmp_path):
    db = tmp_path / "a.duckdb"
    assert (
        invoke(
            "fetch", "--from", f"d3rlpy:{_logs(tmp_path / 'logs')}", "--into", "mine", "--db", db
        ).exit_code
        == 0
    )
    r = invoke("fetch", "--format", "bundle", "--db", db)
    assert r.exit_code == 2 and "add --suite NAME and --output DIR" in r.output
    r = invoke("fetch", "--suite", "nope", "--format", "bundle", "-o", tmp_path / "x", "--db", db)
    assert r.exit_code == 2 and "no such suite" in r.output
    r = invoke("fetch", "--suite", "s", "--format", "bundle", "-o", tmp_path / "x", "--algo", "a", "--db", db)
    assert r.exit_code == 2 and "drop --algo" in r.output
    r = invoke("fetch", "--from", f"rlbench:{tmp_path / 'missing'}", "--into", "s", "--db", db)
    assert r.exit_code == 2 and "not a folder" in r.output and "\n" not in r.output.strip()
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "runs.parquet").write_bytes(b"not parquet")
    r = invoke("fetch", "--from", f"rlbench:{tmp_path / 'half'}", "--into", "s", "--db", db)
    assert r.exit_code == 2 and "not a readable Parquet file" in r.output


def test_the_committed_classic_control_reference_imports(tmp_path):
    ref = Path(__file__).parents[2] / "results" / "reference" / "classic-control"
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"rlbench:{ref}", "--into", "study", "--db", db)
    assert r.exit_code == 0, r.output
    assert "imported 65 runs" in r.output
    r = invoke("leaderboard", "study", "--per-task", "--format", "json", "--db", db)
    rows = {(x["algo"], x["task"]): x for x in json.loads(r.output)["rows"]}
    assert rows[("ppo", "CartPole-v1")]["mean"] == 500.0 and rows[("ppo", "CartPole-v1")]["runs"] == 5
    assert rows[("sac", "Pendulum-v1")]["mean"] > -300


def test_the_committed_offline_classic_reference_imports_normalised(tmp_path):
    ref = Path(__file__).parents[2] / "results" / "reference" / "offline-classic"
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"rlbench:{ref}", "--into", "study", "--db", db)
    assert r.exit_code == 0 and "imported 420 runs" in r.output, r.output
    r = invoke("fetch", "--suite", "study", "--algo", "bc", "--metric", "eval/normalized_return", "--format", "json",
               "--db", db)  # fmt: skip
    finals = {}
    for row in json.loads(r.output):
        if row["step"] == 1000:
            finals.setdefault(row["env"], []).append(row["value"])
    assert min(finals["CartPole-v1-expert"]) == 100.0 and len(finals) == 6


def test_the_committed_lmrl_maze_reference_imports_with_its_normalisation(tmp_path):
    """The bundle imports with the suite's lmrl normalisation: every algorithm on Maze FO over 5 seeds, scores on
    the table's 0-100 scale (its numbers are claims, tests/unit/test_reference_claims.py)."""
    ref = Path(__file__).parents[2] / "results" / "reference" / "lmrl-maze"
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"bundle:{ref}", "--db", db)
    assert r.exit_code == 0 and "imported 20 runs" in r.output, r.output
    r = invoke("leaderboard", "lmrl-maze", "--per-task", "--format", "json", "--db", db)
    out = json.loads(r.output)
    rows = {x["algo"]: x for x in out["rows"]}
    assert set(rows) == {"bc", "filtered_bc", "ilql", "ilql-shared"}
    assert all(x["runs"] == 5 and x["task"] == "MazeFO-v0-mixed" for x in rows.values())
    assert all(0 <= x["norm_min"] <= x["norm_mean"] <= x["norm_max"] <= 102 for x in rows.values())
    assert "normalised by fixed suite references (lmrl table)" in " ".join(out["meta"]["header"])


def test_the_committed_lmrl_small_reference_keeps_ilqls_entry_budget_on_maze_fo(tmp_path):
    """lmrl-small's ilql entry on Maze FO (its own value transformer, 4,000 steps: an entry budget) beside the
    suite's 500 steps for every other cell; 10 seeds of every algorithm on each task."""
    ref = Path(__file__).parents[2] / "results" / "reference" / "lmrl-small"
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"bundle:{ref}", "--db", db)
    assert r.exit_code == 0 and "imported 160 runs" in r.output, r.output
    r = invoke("leaderboard", "lmrl-small", "--per-task", "--format", "json", "--db", db)
    rows = [x for x in json.loads(r.output)["rows"] if x["task"] == "MazeFO-v0-mixed"]
    by_algo = {x["algo"]: x for x in rows}
    assert set(by_algo) == {"bc", "filtered_bc", "ilql"}
    assert all(x["runs"] == 10 for x in by_algo.values())
    from rlbench_cli.suite.loader import load_suite

    steps = {
        (a.name, tuple(a.envs or ())): (a.budget.steps if a.budget else None)
        for a in load_suite(ref / "suite.yaml").algorithms
    }
    assert steps[("ilql", ("MazeFO-v0-mixed",))] == 4000
