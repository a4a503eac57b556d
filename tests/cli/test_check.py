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
        assert "| ppo | 1 | 5 / 5 |" in r.stdout and "worse" in r.stdout
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


# -- a git commit recorded in the store as the baseline -----------------------------------------------------
GATE_SHA = "c04e23e9dfdd2b2b00963713fe1a7735f0b6b8c3"  # what results/reference/ppo-gate's runs record
CC_SHA = "11ece1420784672a4f08506e3045edbee4319d87"  # and classic-control's seeds 0-2
CC_SHA_NEW = "06170af8a3be9f2f6f2be5b65c6b36a68c9f68dd"  # its seeds 3 and 4


def _runs(db: Path) -> dict[str, list[dict]]:
    from rlbench_cli.store import Store

    store = Store(db)
    with store.reader() as con:
        out: dict[str, list[dict]] = {}
        for r in store.runs(con):
            out.setdefault(r["suite"], []).append(r)
        return out


def test_record_moves_a_suites_runs_into_their_commits_suite_and_a_commit_is_a_baseline(tmp_path):
    db = tmp_path / "ci.duckdb"
    assert cli("fetch", "--from", f"bundle:{GATE}", "--db", db).exit_code == 0
    r = cli("check", "ppo-gate", "--db", db, "--record")
    assert r.exit_code == 0, r.output
    snap = f"ppo-gate.commit-{GATE_SHA[:12]}"
    assert f"recorded 5 run(s) of ppo-gate at commit {GATE_SHA[:12]} as suite {snap}" in r.stdout
    runs = _runs(db)
    assert "ppo-gate" not in runs and len(runs[snap]) == 5  # moved, not copied: the suite can run again
    assert {r["git_commit"] for r in runs[snap]} == {GATE_SHA} and {r["status"] for r in runs[snap]} == {
        "finished"
    }
    # the same scores as the bundle's own: nothing lost on the way
    leader = cli("leaderboard", snap, "--db", db, "--format", "json")
    assert leader.exit_code == 0, leader.output

    # no candidate yet: the suite holds no run at another commit
    r = cli("check", "ppo-gate", "--db", db, "--baseline", f"commit:{GATE_SHA[:7]}")
    assert r.exit_code == 2 and "has no finished run at another commit" in r.output, r.output

    # a stronger candidate at another commit (classic-control's 50k-step ppo) passes; its commit is named
    assert (
        cli(
            "fetch", "--from", f"bundle:{REF / 'classic-control'}", "--into", "ppo-gate", "--db", db
        ).exit_code
        == 0
    )
    r = cli("check", "ppo-gate", "--db", db, "--baseline", f"commit:{GATE_SHA[:7]}", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["baseline"] == f"commit {GATE_SHA[:12]}"
    assert out["candidate_commits"] == [CC_SHA_NEW[:12], CC_SHA[:12]]  # the latest first
    (ppo,) = out["algos"]
    assert ppo["verdict"] == "better" and ppo["runs_candidate"] == 5 and ppo["runs_baseline"] == 5
    md = cli("check", "ppo-gate", "--db", db, "--baseline", f"commit:{GATE_SHA}")
    assert f"against commit {GATE_SHA[:12]}" in md.stdout
    assert f"at commit {CC_SHA_NEW[:12]}, {CC_SHA[:12]}" in md.stdout

    # the other way round: record the strong runs, bring the weak ones back, check against the strong commit
    assert cli("check", "ppo-gate", "--db", db, "--record").exit_code == 0
    assert cli("fetch", "--from", f"bundle:{GATE}", "--db", db).exit_code == 0
    r = cli("check", "ppo-gate", "--db", db, "--baseline", f"commit:{CC_SHA[:8]}")
    assert r.exit_code == 1, r.output
    assert "**FAILED**: 1 algorithm(s) got worse: ppo." in r.stdout
    # the weak runs' commit is in the store twice now (recorded, and back in the suite): no candidate
    r = cli("check", "ppo-gate", "--db", db, "--baseline", f"commit:{GATE_SHA[:8]}")
    assert r.exit_code == 2 and "has no finished run at another commit" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "commit:zz12"], "--baseline commit:zz12: give a git commit's sha or a prefix of it"),
        (["--baseline", "commit:abc"], "--baseline commit:abc: give a git commit's sha"),
        (["--baseline", "commit:deadbeef"], f"no finished run of the suite was recorded at a commit starting "
         f"with deadbeef (commits in the store: {GATE_SHA[:12]} (5 runs))"),
        ([], "give --baseline SOURCE to check the suite, or --record"),
        (["--record", "--baseline", "x"], "give --baseline SOURCE to check the suite, or --record"),
    ],
)  # fmt: skip
def test_bad_commits_and_flags_are_one_line_and_exit_2(gate_db, args, message):
    r = cli("check", "ppo-gate", "--db", gate_db, *args)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_record_refuses_runs_without_a_commit_and_suites_with_nothing_finished(tmp_path):
    db = tmp_path / "x.duckdb"
    tidy = tmp_path / "runs.csv"
    tidy.write_text("run,algo,env,seed,step,name,value\na,ppo,CartPole-v1,0,1,eval/return,1.0\n")
    assert cli("fetch", "--from", f"csv:{tidy}", "--into", "mine", "--db", db).exit_code == 0
    r = cli("check", "mine", "--db", db, "--record")
    assert r.exit_code == 2 and "record no git commit" in r.output and "nothing recorded" in r.output
    assert set(_runs(db)) == {"mine"}
    r = cli("check", "mine.commit-0123456789ab", "--db", db, "--record")
    assert r.exit_code == 2 and "is already a commit's runs" in r.output


def test_a_commit_prefix_must_name_one_commit():
    from rlbench_cli.errors import UsageError
    from rlbench_cli.gate import resolve_commit

    commits = {"abcd1234" + "0" * 32: 3, "abcd9876" + "0" * 32: 2}
    assert resolve_commit("abcd12", commits, "--baseline commit:abcd12").startswith("abcd1234")
    with pytest.raises(UsageError, match="abcd is ambiguous, it begins abcd12340000, abcd98760000"):
        resolve_commit("abcd", commits, "--baseline commit:abcd")
