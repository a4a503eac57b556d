"""`rlbench tune` end to end: a tiny Optuna search of ppo on CartPole-v1 through the real command, its
confirmation on fresh seeds, --status with its figures, a kill -9 in the middle of the study, and bad input."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from e2e_cli import RLBENCH, rl, slow_algorithm

from rlbench_cli.store import Store

pytestmark = pytest.mark.slow

SUITE = {
    "name": "tiny-tune",
    "seeds": 3,
    "budget": {"steps": 1024, "eval_every": 512, "eval_episodes": 3},
    "envs": ["CartPole-v1"],
    "algorithms": [{"name": "ppo", "params": {"num_envs": 4, "num_steps": 128}}],
    "score": {"metric": "eval/return", "rule": "final"},
    "tune": {
        "algorithm": "ppo",
        "params": {"learning_rate": {"log": [1.0e-4, 1.0e-1]}, "num_minibatches": {"choice": [2, 4]}},
        "trials": 3,
        "seeds_per_trial": 1,
        "confirm": {"top": 1, "seeds": 2},
    },
}


def write(tmp_path: Path, file: str = "tune.yaml", **tune) -> Path:
    spec = {**SUITE, "tune": {**SUITE["tune"], **tune}}
    path = tmp_path / file
    path.write_text(yaml.safe_dump(spec))
    return path


def runs_of(db: Path, suite: str) -> list[dict]:
    store = Store(db)
    with store.reader() as con:
        return store.runs(con, suite)


def test_a_search_then_its_confirmation_on_fresh_seeds(tmp_path):
    suite, db = write(tmp_path), tmp_path / "t.duckdb"
    r = rl("tune", suite, "--db", db, "--workers", "3", "--json")  # the 3 trials in one batch
    out = json.loads(r.stdout)
    assert [t["state"] for t in out["trials"]] == ["complete"] * 3
    assert all(t["value"] is not None for t in out["trials"])
    search = runs_of(db, "tiny-tune.tune")
    assert len(search) == 3 and {r["seed"] for r in search} == {0}  # 3 trials x 1 seed x 1 task
    assert sorted(r["algo"] for r in search) == ["ppo[t000]", "ppo[t001]", "ppo[t002]"]
    confirm = runs_of(db, "tiny-tune.confirm")
    assert {r["seed"] for r in confirm} == {1000, 1001}  # fresh seeds, not the search's
    best = max(out["trials"], key=lambda t: t["value"])
    assert sorted({r["algo"] for r in confirm}) == sorted(["ppo[default]", best["label"]])
    (default, tuned) = out["confirmed"]
    assert default["label"] == "ppo[default]" and default["poi_vs_default"] is None
    assert tuned["label"] == best["label"] and tuned["search_value"] == best["value"]
    lo, hi = tuned["iqm"][1], tuned["iqm"][2]
    assert lo <= tuned["iqm"][0] <= hi and len(tuned["poi_vs_default"]) == 3
    assert tuned["verdict"] in (
        "beats the default",
        "worse than the default",
        "no difference from the default shown",
    )

    again = rl("tune", suite, "--db", db, "--workers", "2")  # done: nothing runs again
    assert "start " not in again.stdout and "3 of 3 trials: 3 complete" in again.stdout
    status = rl("tune", suite, "--db", db, "--status", "--out", tmp_path / "figs")
    assert "Confirmation on fresh seeds 1000..1001" in status.stdout and "search score" in status.stdout
    for name in ("tune_history.png", "tune_importance.png", "tune_slice.png"):
        assert (tmp_path / "figs" / name).stat().st_size > 5_000
    assert len(runs_of(db, "tiny-tune.tune")) == 3  # --status ran nothing
    for name in ("tiny-tune.tune", "tiny-tune.confirm"):  # the report of either suite shows the study
        rl("report", name, "--db", db, "-o", tmp_path / f"{name}.html")
        page = (tmp_path / f"{name}.html").read_text()
        assert '<section id="tuning">' in page and 'class="tune-trials"' in page or "tune-trials" in page
        for fig in ("tune_history", "tune_importance", "tune_slice"):
            assert f'data-check="figure:{fig}"' in page
        assert "Confirmation on fresh seeds 1000..1001" in page and best["label"] in page

    from starlette.testclient import TestClient

    from rlbench_cli.ui.app import create_app

    client = TestClient(create_app(Store(db, wait=10)))
    for name in ("tiny-tune.tune", "tiny-tune.confirm"):  # rlbench ui's suite page shows the same study
        ui = client.get(f"/api/suite/{name}/tuning").json()
        assert ui["study"]["tuned"] == "tiny-tune" and ui["study"]["confirm_seeds"] == [1000, 1001]
        assert [(t["number"], t["value"]) for t in ui["trials"]] == [
            (t["number"], t["value"]) for t in out["trials"]
        ]
        assert [c["label"] for c in ui["confirmed"]] == [c["label"] for c in out["confirmed"]]
        assert ui["confirmed"][1]["iqm"] == out["confirmed"][1]["iqm"]


def test_a_study_killed_mid_trial_goes_on_with_no_trial_lost_or_doubled(tmp_path):
    """4 trials in batches of 2: killed once the second batch's runs (trials 2 and 3) have started."""
    suite, db = write(tmp_path, trials=4, confirm=None), tmp_path / "k.duckdb"
    log = (tmp_path / "first.log").open("w")
    proc = subprocess.Popen([RLBENCH, "tune", str(suite), "--db", str(db), "--workers", "2"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "MPLBACKEND": "Agg"})  # fmt: skip
    deadline = time.monotonic() + 300
    while not any(f"start  ppo[t00{i}]" in (text := (tmp_path / "first.log").read_text()) for i in (2, 3)):
        assert time.monotonic() < deadline, text
        assert proc.poll() is None, text
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # trials 0 and 1 told, trials 2 and 3 mid-run
    proc.wait(timeout=30)
    first = (tmp_path / "first.log").read_text()
    assert "trial 1: objective" in first and "trial 2: objective" not in first, first
    r = rl("tune", suite, "--db", db, "--workers", "2", "--json")
    trials = json.loads(r.stdout)["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2, 3]
    assert all(t["state"] == "complete" for t in trials)
    configs = [json.dumps(t["params"], sort_keys=True) for t in trials]
    assert len(set(configs)) == len(configs), configs  # a resumed sampler does not replay earlier draws
    runs = runs_of(db, "tiny-tune.tune")
    assert sorted(r["algo"] for r in runs) == [f"ppo[t00{i}]" for i in range(4)]  # one run each, none twice
    assert all(r["status"] == "finished" for r in runs)


def test_bad_input_is_one_line_exit_2_and_records_nothing(tmp_path):
    db = tmp_path / "bad.duckdb"
    cases = [
        (write(tmp_path, "a.yaml", params={"learning_rte": {"log": [1e-4, 1e-2]}}),
         "tune.params: algorithm 'ppo' on CartPole-v1: unknown ppo param(s) 'learning_rte'; valid params are: learning_rate"),
        (write(tmp_path, "b.yaml", params={"learning_rate": {"log": [0, 1e-2]}}), "field 'tune.params.learning_rate': log"),
        (write(tmp_path, "c.yaml", seeds_per_trial=0), "field 'tune.seeds_per_trial'"),
    ]  # fmt: skip
    for suite, says in cases:
        r = rl("tune", suite, "--db", db, check=False)
        assert r.returncode == 2, r.stdout + r.stderr
        assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({k: v for k, v in SUITE.items() if k != "tune"}))
    r = rl("tune", plain, "--db", db, check=False)
    assert r.returncode == 2 and "the suite has no tune: block" in r.stderr
    r = rl("tune", write(tmp_path), "--db", db, "--status", check=False)
    assert r.returncode == 2 and "has not been tuned" in r.stderr
    assert not db.exists() and not Path(f"{db}.tune").exists()


def _prune_suite(tmp_path: Path, name: str, trials: int, eval_s: float, resources=None) -> Path:
    """A study of a toy landscape whose runs log an evaluation every ``eval_s`` seconds (9 per run), with a
    median pruner; ``resources``: the suite's (the executor)."""
    entrypoint = slow_algorithm(tmp_path, eval_s)
    spec = {"name": name, "budget": {"steps": 90_000, "eval_every": 10_000, "eval_episodes": 1},
            "envs": ["CartPole-v1"], "normalize": {"references": {"CartPole-v1": [0, 100]}},
            "algorithms": [{"name": "toy", "entrypoint": entrypoint, "params": {"learning_rate": 3e-4}}],
            "tune": {"algorithm": "toy", "params": {"learning_rate": {"log": [1e-6, 1e-1]}}, "trials": trials,
                     "seeds_per_trial": 1, "sampler": "random", "pruner": "median", "confirm": None}}  # fmt: skip
    if resources:
        spec["resources"] = resources
    suite = tmp_path / f"{name}.yaml"
    suite.write_text(yaml.safe_dump(spec))
    return suite


def _pruned_study(trials: list[dict], runs: dict[str, dict], n: int) -> list[dict]:
    """Checks a pruned study's trials against its runs: ``n`` trials, each one run of its own (no trial
    doubled or lost), complete ones finished, pruned ones pruned (or finished, when pruned at their last
    evaluation). Returns the runs recorded as pruned."""
    states = [t["state"] for t in trials]
    assert [t["number"] for t in trials] == list(range(n)) and set(states) <= {"complete", "pruned"}, states
    assert sorted(runs) == sorted(t["label"] for t in trials)  # one run per trial, none twice
    params = [json.dumps(t["params"], sort_keys=True) for t in trials]
    assert len(set(params)) == n, params
    for t in trials:
        run = runs[t["label"]]
        if t["state"] == "complete":
            assert run["status"] == "finished"
        elif run["status"] == "pruned":  # stopped mid-way: recorded as pruned, neither finished nor failed
            assert "pruned by rlbench tune: its trial fell behind at step" in run["error"]
        else:  # pruned at its last evaluation, when its run was ending anyway
            assert run["status"] == "finished"
    return [r for r in runs.values() if r["status"] == "pruned"]


def test_a_median_pruner_stops_trials_that_fall_behind_and_their_runs_are_pruned_not_failed(tmp_path):
    # an evaluation a second (as on Ray and Slurm): a run is told to stop up to ~2.5 s after its first
    # evaluation past the warm-up (a shard flushed each second, read each second, PRUNE looked for every
    # 0.5 s), so at 0.3 s an evaluation a 2.7 s run could end first on a loaded machine, pruned at its end only
    suite, db = _prune_suite(tmp_path, "prune", trials=8, eval_s=1.0), tmp_path / "p.duckdb"
    # two batches of 4 trials: the second's runs are pruned against the median of the first's
    r = rl("tune", suite, "--db", db, "--workers", "4", "--json", cwd=tmp_path)
    trials = json.loads(r.stdout)["trials"]
    states = [t["state"] for t in trials]
    assert "pruned" in states, states
    pruned = _pruned_study(trials, {r["algo"]: r for r in runs_of(db, "prune.tune")}, 8)
    assert pruned
    best = max((t for t in trials if t["state"] == "complete"), key=lambda t: t["value"])
    assert all(t["value"] is None or t["value"] <= best["value"] for t in trials)
    status = rl("status", "prune.tune", "--db", db)
    assert f"{len(pruned)} pruned" in status.stdout  # runs: one pruned at its last evaluation finished


def _study_on(tmp_path: Path, name: str, resources: dict) -> tuple[Path, Path, list[dict], list[dict]]:
    """6 trials of the toy landscape (1 s an evaluation) on the executor ``resources`` names, 2 at a time:
    (suite, db, its trials, its runs recorded as pruned), after ``_pruned_study``'s checks and one that
    every run ran there; and at least one run was pruned mid-way."""
    suite, db = _prune_suite(tmp_path, name, trials=6, eval_s=1.0, resources=resources), tmp_path / "t.duckdb"
    r = rl("tune", suite, "--db", db, "--workers", "2", "--json", cwd=tmp_path, timeout=400)
    trials = json.loads(r.stdout)["trials"]
    runs = {r["algo"]: r for r in runs_of(db, f"{name}.tune")}
    assert {r["executor"] for r in runs.values()} == {resources["executor"]}
    pruned = _pruned_study(trials, runs, 6)
    assert pruned, [(t["state"], runs[t["label"]]["status"]) for t in trials]
    for run in pruned:  # stopped before its 90,000 steps
        assert int(run["error"].split("at step ")[1].split()[0].replace(",", "")) < 90_000
    return suite, db, trials, pruned


def test_on_ray_the_pruner_stops_runs_on_their_actors_from_evaluations_as_they_arrive(tmp_path, ray_head):
    """The actors write node-locally: the evaluations come to the coordinator with the pulls, and the PRUNE
    file the pruner writes there goes to the actor running the run."""
    _study_on(
        tmp_path, "rayprune", {"executor": "ray", "cpus_per_job": 1, "ray": {"address": ray_head.address}}
    )
    assert ray_head.wait_all_free(), "actors outlived the study"


def test_on_slurm_a_study_completes_with_every_trial_once_and_pruned_runs_end_pruned(tmp_path, slurm):
    """Each run an array task on a real Slurm, the attempt folders shared: the study has its trials, none
    doubled, and a run the pruner stopped is recorded 'pruned' there too."""
    suite, db, trials, _ = _study_on(tmp_path, "slurmprune", {"executor": "slurm"})
    again = json.loads(rl("tune", suite, "--db", db, "--json", cwd=tmp_path, timeout=120).stdout)
    assert again["trials"] == trials and len(runs_of(db, "slurmprune.tune")) == 6  # done: nothing ran again


def test_an_adaptive_confirmation_runs_adastops_batches_and_says_its_decision(tmp_path):
    suite, db = write(tmp_path, trials=2, confirm={"top": 1, "seeds": 2}), tmp_path / "a.duckdb"
    r = rl(
        "tune",
        suite,
        "--db",
        db,
        "--workers",
        "2",
        "--adaptive",
        "--batch",
        "2",
        "--max-batches",
        "2",
        "--json",
    )
    out = json.loads(r.stdout)
    tuned = next(c for c in out["confirmed"] if c["label"] != "ppo[default]")
    assert tuned["adastop"] and tuned["adastop"].endswith("on CartPole-v1")
    assert tuned["adastop"].split(" on ")[0] in ("better", "worse", "no difference", "undecided")
    seeds = {r["seed"] for r in runs_of(db, "tiny-tune.confirm")}
    assert seeds <= {1000, 1001, 1002, 1003} and {1000, 1001} <= seeds  # batches of fresh seeds, 2 at a time
    status = rl("compare", "tiny-tune.confirm", "--db", db)
    assert "AdaStop decisions" in status.stdout
