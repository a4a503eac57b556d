"""`rlbench check` as a library's CI uses it: run the gate suite on the code as it is, and with ppo's updates
broken, and compare each with the committed baseline bundle (results/reference/ppo-gate)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from e2e_cli import rl

from rlbench_cli.store import Store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "results" / "reference" / "ppo-gate"


def _run(tmp_path: Path, params: dict) -> Path:
    spec = yaml.safe_load((ROOT / "suites" / "ppo-gate.yaml").read_text())
    spec["algorithms"][0]["params"].update(params)
    tmp_path.mkdir()
    suite = tmp_path / "gate.yaml"
    suite.write_text(yaml.safe_dump(spec))
    db = tmp_path / "ci.duckdb"
    rl("run", suite, "--db", db, "--workers", "2")
    return db


def test_unchanged_ppo_passes_the_gate_and_broken_ppo_fails_it(tmp_path):
    good = _run(tmp_path / "good", {})
    r = rl("check", "ppo-gate", "--db", good, "--baseline", GATE, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no change detected" in r.stdout and "**passed**" in r.stdout

    broken = _run(tmp_path / "broken", {"learning_rate": 0.5})
    for rule in ("iqm", "poi"):
        r = rl("check", "ppo-gate", "--db", broken, "--baseline", GATE, "--rule", rule, check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "**FAILED**: 1 algorithm(s) got worse: ppo." in r.stdout


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "ci", "GIT_AUTHOR_EMAIL": "ci@example.org",
           "GIT_COMMITTER_NAME": "ci", "GIT_COMMITTER_EMAIL": "ci@example.org"}  # fmt: skip
    r = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, check=True)
    return r.stdout.strip()


def _commit(repo: Path, params: dict, message: str) -> str:
    """The gate suite with ``params`` committed in ``repo``: its sha (what the runs of that suite record). Its
    runs have half the suite's steps (4,096): the baseline is a commit in the store, not the committed bundle,
    and there too a learning rate of 0.5 scores about 9 (one seed 80) against 70-164."""
    spec = yaml.safe_load((ROOT / "suites" / "ppo-gate.yaml").read_text())
    spec["algorithms"][0]["params"].update(params)
    spec["budget"] = {**spec["budget"], "steps": 4096, "eval_every": 4096}
    (repo / "gate.yaml").write_text(yaml.safe_dump(spec))
    _git(repo, "add", "gate.yaml")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_a_commit_recorded_in_the_store_is_the_baseline_of_the_next_commits(tmp_path):
    """main's CI records its runs (check --record); a later commit's CI runs the same suite into the same
    store and checks it with --baseline commit:SHA: a broken learning rate fails, the unchanged ppo passes."""
    repo, db = tmp_path / "lib", tmp_path / "ci.duckdb"
    repo.mkdir()
    _git(repo, "init", "-q")
    main = _commit(repo, {}, "main")
    rl("run", repo / "gate.yaml", "--db", db, "--workers", "2")
    r = rl("check", "ppo-gate", "--db", db, "--record")
    snap = f"ppo-gate.commit-{main[:12]}"
    assert f"recorded 5 run(s) of ppo-gate at commit {main[:12]} as suite {snap}" in r.stdout
    store = Store(db)
    with store.reader() as con:
        kept = store.runs(con, snap)
        assert not store.runs(con, "ppo-gate")
    assert len(kept) == 5 and {k["git_commit"] for k in kept} == {main}
    assert all((db.parent / "runs" / snap / k["run_id"]).is_dir() for k in kept)  # run folders moved along
    assert not any((db.parent / "runs" / "ppo-gate").iterdir())

    broken = _commit(repo, {"learning_rate": 0.5}, "a broken learning rate")
    rl("run", repo / "gate.yaml", "--db", db, "--workers", "2")
    r = rl("check", "ppo-gate", "--db", db, "--baseline", f"commit:{main[:7]}", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "**FAILED**: 1 algorithm(s) got worse: ppo." in r.stdout
    assert f"against commit {main[:12]}" in r.stdout and f"at commit {broken[:12]}" in r.stdout
    rl("check", "ppo-gate", "--db", db, "--record")

    fixed = _commit(repo, {}, "the learning rate back")  # the same runs (ids) as main's: they run again
    r = rl("run", repo / "gate.yaml", "--db", db, "--workers", "2")
    r = rl("check", "ppo-gate", "--db", db, "--baseline", f"commit:{main[:7]}", "--json", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    (ppo,) = out["algos"]
    assert out["passed"] and out["candidate_commits"] == [fixed[:12]] and ppo["runs_candidate"] == 5
    assert ppo["iqm_candidate"] == ppo["iqm_baseline"]  # trained again from scratch, to the same bits on CPU
    with store.reader() as con:
        assert {r["git_commit"] for r in store.runs(con, "ppo-gate")} == {fixed}

    for baseline, says in [
        (
            "commit:0000000",
            f"commits in the store: {fixed[:12]} (5 runs), {broken[:12]} (5 runs), {main[:12]} ",
        ),
        ("commit:xyz1", "give a git commit's sha or a prefix of it"),
        (f"commit:{fixed[:8]}", "has no finished run at another commit"),
    ]:
        r = rl("check", "ppo-gate", "--db", db, "--baseline", baseline, check=False)
        assert r.returncode == 2 and says in r.stderr, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
