"""The Slurm executor's pure parts, without a cluster: time limits and GRES as sinfo prints them, the cause
recorded for each way a job can end, requeued attempts found from placement.json, and the pre-flight
errors that need no Slurm at all (no sbatch on PATH)."""

import json
import signal

import pytest

from rlbench_cli.errors import UsageError
from rlbench_cli.executors.slurm import (
    CANCEL_MARKER,
    SlurmState,
    _gpus,
    _minutes,
    create,
    describe_state,
    latest_attempt,
    outcome_of,
)
from rlbench_cli.runner import attempt_dir
from rlbench_cli.suite.models import Suite

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "text, minutes",
    [("infinite", None), ("UNLIMITED", None), ("30", 30), ("30:00", 30), ("2:00:00", 120), ("1-00:00:00", 1440),
     ("2-12", 3600), ("0:30", 1)],
)  # fmt: skip
def test_time_limits_as_sinfo_prints_them(text, minutes):
    assert _minutes(text) == minutes


@pytest.mark.parametrize(
    "gres, n", [("(null)", 0), ("gpu:fake:2", 2), ("gpu:4", 4), ("gpu:a100:4(S:0-1),shard:8", 4), ("gpu", 1)]
)
def test_gpus_counted_from_gres(gres, n):
    assert _gpus(gres) == n


def _folder(tmp_path, result=None, cancelled=False):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if result is not None:
        (tmp_path / "result.json").write_text(json.dumps(result))
    if cancelled:
        (tmp_path / CANCEL_MARKER).write_text("1")
    return tmp_path


def test_outcome_comes_from_result_json_when_the_run_wrote_one(tmp_path):
    f = _folder(tmp_path, {"status": "failed", "exit_code": 1, "error": "ValueError: nan", "duration_s": 3})
    o = outcome_of(SlurmState("COMPLETED", 0), f)
    assert (o.status, o.error, o.duration_s) == ("failed", "ValueError: nan", 3)
    f = _folder(tmp_path / "b", {"status": "finished", "exit_code": 0, "duration_s": 2})
    assert outcome_of(SlurmState("COMPLETED", 0), f).status == "finished"


@pytest.mark.parametrize(
    "state, words",
    [(SlurmState("FAILED", 9, signal.SIGKILL), "killed by SIGKILL"),
     (SlurmState("FAILED", 3), "exited with code 3"),
     (SlurmState("OUT_OF_MEMORY", 0), "--mem-gb"),
     (SlurmState("TIMEOUT", 0), "--time-min"),
     (SlurmState("CANCELLED", 0), "cancelled in Slurm"),
     (SlurmState("NODE_FAIL", 0, node="n1"), "node failure"),
     (SlurmState("UNKNOWN"), "no record"),
     (SlurmState("COMPLETED", 0), "without writing result.json")],
)  # fmt: skip
def test_every_way_a_job_ends_without_a_result_has_its_cause(tmp_path, state, words):
    o = outcome_of(state, _folder(tmp_path))
    assert o.status == "failed" and words in o.error and state.state in o.error


def test_a_cancel_asked_for_ends_interrupted_even_after_sigterm_wrote_its_result(tmp_path):
    f = _folder(tmp_path, {"status": "interrupted", "duration_s": 1}, cancelled=True)
    assert outcome_of(SlurmState("CANCELLED", 0), f).status == "interrupted"


def test_a_requeued_task_is_found_in_its_next_attempt_folder(tmp_path):
    for k, jid in ((1, "7_0"), (2, "7_0"), (3, "9_0")):
        d = attempt_dir(tmp_path, "s", "r1", k)
        d.mkdir(parents=True)
        (d / "placement.json").write_text(json.dumps({"job_id": jid}))
    assert latest_attempt(tmp_path, "s", "r1", 1, "7_0") == 2  # attempt 3 is another job's (a retry)
    assert latest_attempt(tmp_path, "s", "r1", 1, "8_0") == 1


def test_states_shown_by_status():
    assert [describe_state(s) for s in ("PENDING", "REQUEUED", "RUNNING", "COMPLETING")] == [
        "queued", "queued", "running", "running"]  # fmt: skip


def test_no_sbatch_on_path_is_one_line_before_anything_happens(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PATH", str(tmp_path))
    suite = Suite.model_validate({"name": "t", "envs": ["CartPole-v1"], "algorithms": ["random"]})
    with pytest.raises(UsageError, match="no 'sbatch' on PATH"):
        create(suite, 1, None, None, {"runs_root": str(tmp_path / "runs")})


TASK_IN_A_FRESH_PROCESS = """
import json, sys
from pathlib import Path
from rlbench_cli.executors.slurm import _Task
from rlbench_cli.suite.grid import RunSpec
spec = RunSpec(suite="t", algo="random", algo_name="random", params={}, env_id="CartPole-v1", env_kwargs={},
               seed=0, budget={"steps": 20, "eval_every": 10, "eval_episodes": 1})
out = _Task()(spec, sys.argv[1], 1, 1)
print(json.dumps({"status": out["status"], "torch": "torch" in sys.modules}))
"""


def test_a_slurm_task_of_runs_without_torch_does_not_import_it(tmp_path):
    """An array task of a torch-free run (random, ppo_jax, a command) starts without torch's seconds of import,
    as a Ray actor does; it is imported only for a run that uses it or a GPU to check."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_VISIBLE"))}
    r = subprocess.run([sys.executable, "-c", TASK_IN_A_FRESH_PROCESS, str(tmp_path / "runs")], env=env,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"status": "finished", "torch": False}
