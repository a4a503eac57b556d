"""`rlbench check`: the regression gate against committed reference bundles (real runs' data)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.gate import _verdict

pytestmark = pytest.mark.fast

REF = Path(__file__).resolve().parents[2] / "results" / "reference"
GATE = REF / "ppo-gate"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def gate_db(tmp_path_factory) -> Path:
    """The committed ppo-gate baseline imported into a store of its own: a candidate equal to it."""
    db = tmp_path_factory.mktemp("gate") / "cand.duckdb"
    r = cli("fetch", "--from", f"bundle:{GATE}", "--db", db)
    assert r.exit_code == 0, r.output
    return db


def test_an_unchanged_candidate_passes_with_equal_intervals(gate_db):
    r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", GATE, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["passed"] and out["worse"] == [] and out["rule"] == "iqm"
    (ppo,) = out["algos"]
    assert ppo["algo"] == "ppo" and ppo["tasks"] == ["CartPole-v1"]
    assert ppo["runs_candidate"] == ppo["runs_baseline"] == 5
    assert ppo["iqm_candidate"] == ppo["iqm_baseline"]  # the same runs: the same interval, bit for bit
    assert ppo["poi"][0] == 0.5 and ppo["verdict"] == "same"
    assert out["normalized"] == "classic-control"


def test_a_weaker_candidate_fails_under_both_rules_and_the_summary_says_which(gate_db):
    # classic-control's ppo trained 50k steps on CartPole-v1 (returns of 500): against it, ppo-gate's 8k-step
    # runs are clearly worse, on the task the two suites share
    for rule in ("iqm", "poi"):
        r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", REF / "classic-control", "--rule", rule)
        assert r.exit_code == 1, r.output
        assert "| ppo | 1 | 5 / 3 |" in r.stdout and "worse" in r.stdout
        assert "**FAILED**: 1 algorithm(s) got worse: ppo." in r.stdout
        assert f"Rule `{rule}`" in r.stdout


def test_a_stronger_candidate_passes_and_is_called_better(tmp_path):
    db = tmp_path / "strong.duckdb"
    assert (
        cli(
            "fetch", "--from", f"bundle:{REF / 'classic-control'}", "--into", "ppo-gate", "--db", db
        ).exit_code
        == 0
    )
    r = cli("check", "ppo-gate", "--db", db, "--baseline", GATE, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [a["verdict"] for a in out["algos"]] == ["better"]
    # the candidate's other algorithms have no baseline: named, not checked
    assert "dqn" in out["only_candidate"] and out["only_baseline"] == []


def test_another_store_is_a_baseline_too(gate_db, tmp_path):
    r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", gate_db, "--rule", "poi")
    assert r.exit_code == 0, r.output
    assert "against store" in r.stdout and "**passed**" in r.stdout


@pytest.mark.parametrize(
    ("baseline", "message"),
    [
        ("no/such/folder", "--baseline no/such/folder: no such store, bundle folder or URL"),
        ("http://127.0.0.1:9/bundle", "--baseline http://127.0.0.1:9/bundle:"),
        (REF / "lmrl-small", "holds no run of suite 'ppo-gate''s algorithms on the suite's tasks"),
    ],
)
def test_bad_baselines_are_one_line_and_exit_2(gate_db, baseline, message):
    r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", baseline)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_file_that_is_not_a_store_and_an_unknown_suite_exit_2(gate_db, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", tmp_path / "notes.txt")
    assert r.exit_code == 2 and "not a DuckDB store" in r.output
    r = cli("check", "nope", "--db", gate_db, "--baseline", GATE)
    assert r.exit_code == 2 and "no suite 'nope'" in r.output
    r = cli("check", "ppo-gate", "--db", gate_db, "--baseline", GATE, "--rule", "median")
    assert r.exit_code == 2


def test_the_rules_decide_on_interval_positions():
    same, low, high = (0.5, 0.4, 0.6), (0.2, 0.1, 0.3), (0.8, 0.7, 0.9)
    assert _verdict("iqm", low, high, same) == "worse"
    assert _verdict("iqm", high, low, same) == "better"
    assert _verdict("iqm", same, (0.55, 0.45, 0.65), low) == "same"  # overlapping intervals: no verdict
    assert _verdict("poi", same, same, low) == "worse"  # poi decides alone under its rule
    assert _verdict("poi", low, high, (0.45, 0.3, 0.6)) == "same"
    assert _verdict("poi", same, same, high) == "better"
