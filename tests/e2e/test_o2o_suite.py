"""End to end, as a user would: offline-to-online fine-tuning (``finetune: {steps: N}``) and a realism-wrapped
env (``SafetyCost``, ``Delay``) in one tiny suite through the real `rlbench run`, scored by phase with
`rlbench leaderboard --score final@offline|@online` and `fetch --scores`, plotted with the phase boundary."""

import json
import sys
from pathlib import Path

import pytest
from e2e_cli import rl

from rlbench_cli.datasets.hdf5 import write_hdf5

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from offline_helpers import pendulum_controller, rollouts  # noqa: E402

pytestmark = pytest.mark.slow

OFFLINE, ONLINE = 40, 60
TASK = "pend+SafetyCost"  # the dataset's task: evaluated and fine-tuned in Pendulum-v1 with a safety cost


@pytest.fixture(scope="module")
def o2o(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("o2o")
    data = rollouts(
        "Pendulum-v1", pendulum_controller, 2, 0.2, meta={"ref_random": -1200.0, "ref_expert": -140.0}
    )
    write_hdf5(tmp / "pend.hdf5", data)
    suite = tmp / "o2o.yaml"
    suite.write_text(
        "name: o2o-tiny\nseeds: 1\n"
        f"budget: {{steps: {OFFLINE}, eval_every: 20, eval_episodes: 2}}\n"
        f"datasets: [{{name: pend, path: {tmp / 'pend.hdf5'}, env: Pendulum-v1, kwargs: {{max_episode_steps: 50}},\n"
        "             wrappers: [{name: SafetyCost, kwargs: {index: 2, low: -1.0, high: 1.0, limit: 10}}]}]\n"
        "envs: [{id: Pendulum-v1, wrappers: [{name: Delay, kwargs: {obs_steps: 1}},\n"
        "        {name: SafetyCost, kwargs: {index: 2, low: -1.0, high: 1.0, limit: 10}}]}]\n"
        "algorithms:\n"
        f"  - {{name: iql, finetune: {{steps: {ONLINE}, eval_every: 30}}, params: {{hidden_units: [16, 16], batch_size: 32}}}}\n"
        f"  - {{name: td3_plus_bc, finetune: {{steps: {ONLINE}, eval_every: 30}}, params: {{hidden_units: [16, 16], batch_size: 32}}}}\n"
        "  - random\n"
        "score: {phase: online}\n"
    )  # fmt: skip
    db = tmp / "r.duckdb"
    rl("run", suite, "--db", db, "--workers", "2")
    return tmp, db


def test_fine_tuned_runs_log_both_phases_on_one_step_axis(o2o):
    tmp, db = o2o
    status = json.loads(rl("status", "o2o-tiny", "--db", db, "--json").stdout)["suites"]["o2o-tiny"]
    assert status["all_finished"] and status["total"] == 3
    rows = json.loads(rl("fetch", "--suite", "o2o-tiny", "--algo", "iql", "--metric", "eval/return", "--format", "json",
                         "--db", db).stdout)  # fmt: skip
    assert sorted({r["step"] for r in rows}) == [0, 20, 40, 70, 100]  # offline 0..40, online 40 + 30, 40 + 60
    phase = json.loads(rl("fetch", "--suite", "o2o-tiny", "--metric", "train/phase", "--format", "json",
                          "--db", db).stdout)  # fmt: skip
    assert sorted((r["algo"], r["step"], r["value"]) for r in phase) == [
        ("iql", 0, 0.0), ("iql", OFFLINE, 1.0), ("td3_plus_bc", 0, 0.0), ("td3_plus_bc", OFFLINE, 1.0)
    ]  # fmt: skip


def test_scores_by_phase_in_leaderboard_and_fetch(o2o):
    tmp, db = o2o

    def board(score):
        out = json.loads(rl("leaderboard", "o2o-tiny", "--db", db, "--per-task", "--format", "json", "--reps", "100",
                            *(["--score", score] if score else [])).stdout)  # fmt: skip
        return out, {(r["algo"], r["task"]): r["mean"] for r in out["rows"]}

    online_meta, online = board(None)  # the suite's phase: online
    assert online_meta["meta"]["score_rule"] == "final@online"
    assert set(online) == {("iql", TASK), ("td3_plus_bc", TASK)}  # no online phase: not in it
    _, offline = board("final@offline")
    assert ("random", "Pendulum-v1+Delay+SafetyCost") in offline
    scores = json.loads(rl("fetch", "--suite", "o2o-tiny", "--scores", "--score", "final@offline", "--format", "json",
                           "--db", db).stdout)  # fmt: skip
    rows = json.loads(rl("fetch", "--suite", "o2o-tiny", "--metric", "eval/return", "--format", "json",
                         "--db", db).stdout)  # fmt: skip
    at = {(r["run_id"], r["step"]): r["value"] for r in rows}
    for s in scores:
        if s["algo"] != "random":
            assert s["rule"] == "final@offline" and s["score"] == at[(s["run_id"], OFFLINE)]
    assert offline[("iql", TASK)] != online[("iql", TASK)]
    rl("plot", "o2o-tiny", "--db", db, "--out", tmp / "fig", "--reps", "100")
    assert (tmp / "fig" / "learning_curves.png").stat().st_size > 0


def test_safety_cost_is_reported_beside_the_return(o2o):
    _, db = o2o
    rows = json.loads(
        rl("fetch", "--suite", "o2o-tiny", "--algo", "random", "--format", "json", "--db", db).stdout
    )
    names = {r["metric"] if "metric" in r else r["name"] for r in rows}
    assert {"eval/return", "eval/cost", "eval/violations"} <= names
    violations = [r["value"] for r in rows if (r.get("metric") or r.get("name")) == "eval/violations"]
    assert all(0.0 <= v <= 1.0 for v in violations)


def test_a_wrapped_dataset_task_reports_costs_offline_and_while_fine_tuning(o2o):
    _, db = o2o
    rows = json.loads(
        rl("fetch", "--suite", "o2o-tiny", "--algo", "iql", "--format", "json", "--db", db).stdout
    )
    assert {r["env"] for r in rows} == {TASK}
    at = {}
    for r in rows:
        at.setdefault(r.get("metric") or r.get("name"), []).append(r["step"])
    assert sorted(at["eval/cost"]) == [0, 20, 40, 70, 100]  # the eval env is wrapped, in both phases
    # the online training env is wrapped too: its 50-step episode (kwargs) ends at step 40 + 50 with a cost
    assert at["train/episode_cost"] == [OFFLINE + 50] == at["train/episode_return"]


@pytest.mark.parametrize(
    "algo, expect",
    [
        (
            "{name: bc, finetune: {steps: 10}}",
            "field 'algorithms[0]': finetune: bc cannot go on learning online",
        ),
        (
            "{name: iql, finetune: {steps: 0}}",
            "field 'algorithms[0].finetune.steps': Input should be greater than 0",
        ),
        (
            "{name: iql, finetune: {stpes: 10}}",
            "field 'algorithms[0].finetune.steps': Field required; add it",
        ),
    ],
)
def test_bad_finetune_is_one_line_exit_2_nothing_recorded(tmp_path, algo, expect):
    suite = tmp_path / "bad.yaml"
    suite.write_text(f"name: bad\ndatasets: [Pendulum-v1-medium]\nalgorithms: [{algo}]\n")
    db = tmp_path / "r.duckdb"
    r = rl("run", suite, "--db", db, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{suite}: {expect}" in lines[0]
    assert not db.exists()
