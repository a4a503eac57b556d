"""`command:` runs: an unmodified CleanRL-style script (TensorBoard) and a script using the JSON-lines client."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

RLBENCH = shutil.which("rlbench")
SCRIPTS = Path(__file__).parent / "scripts"
pytestmark = pytest.mark.slow
pytest.importorskip("torch.utils.tensorboard")


def test_cleanrl_style_script_runs_unmodified_and_its_tensorboard_scalars_are_stored(tmp_path):
    shutil.copy(SCRIPTS / "cleanrl_style.py", tmp_path / "train.py")
    shutil.copy(SCRIPTS / "jsonl_client.py", tmp_path / "client_script.py")
    py = sys.executable
    (tmp_path / "own.yaml").write_text(
        "name: own\nseeds: [1, 2]\nbudget: {steps: 1500}\nenvs: [CartPole-v1]\n"
        "score: {metric: charts/episodic_return, rule: mean_last:3}\nalgorithms:\n"
        f"  - {{name: cleanrl, command: '{py} train.py --env-id {{env}} --seed {{seed}} "
        "--total-timesteps {steps} --learning-rate {lr}', params: {lr: 0.001}}\n"
        f"  - {{name: client, command: '{py} client_script.py {{steps}}'}}\n"
        f"  - {{name: failing, command: '{py} client_script.py {{steps}} --fail'}}\n"
    )
    db = tmp_path / "db.duckdb"
    # --db relative, as a user types it: the scripts run in their run folders and still find their files
    r = subprocess.run([RLBENCH, "run", "own.yaml", "--db", "db.duckdb"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr  # one run fails on purpose
    status = json.loads(subprocess.run([RLBENCH, "status", "own", "--db", str(db), "--json"], capture_output=True,
                                       text=True, check=True).stdout)  # fmt: skip
    runs = {(x["algo"], x["seed"]): x for x in status["runs"]}
    assert runs[("cleanrl", 1)]["status"] == runs[("cleanrl", 2)]["status"] == "finished"
    assert runs[("client", 1)]["status"] == "finished"
    bad = runs[("failing", 1)]
    assert bad["status"] == "failed" and "command exited with code 3" in bad["error"]
    assert "diverged at the end" in bad["error"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = dict(con.execute("""SELECT r.algo || '/' || m.name, count(*) FROM metrics m JOIN runs r
                                    USING (run_id) WHERE r.seed = 1 GROUP BY ALL""").fetchall())  # fmt: skip
        lr = con.execute("""SELECT DISTINCT value FROM metrics m JOIN runs r USING (run_id)
                            WHERE r.algo = 'cleanrl' AND m.name = 'charts/learning_rate'""").fetchall()  # fmt: skip
    finally:
        con.close()
    assert names["cleanrl/charts/episodic_return"] >= 30  # ~1500 / 22 random CartPole episodes
    assert names["cleanrl/charts/learning_rate"] == 6  # steps 250 .. 1500
    assert len(lr) == 1 and lr[0][0] == pytest.approx(0.001)  # params fill the template (float32 in TB)
    assert names["client/eval/return"] == 16 and names["client/train/loss/value"] == 16
    # the script's own TensorBoard folder stays with the run, not in the directory rlbench was started from
    assert not (tmp_path / "runs" / "own").exists() or not list((tmp_path / "runs").glob("CartPole*"))
    assert list((tmp_path / "runs" / "own").rglob("events.out.tfevents.*"))
    lb = subprocess.run([RLBENCH, "leaderboard", "own", "--db", str(db), "--reps", "1000", "--per-task"],
                        capture_output=True, text=True)  # fmt: skip
    assert lb.returncode == 0, lb.stderr
    assert "cleanrl" in lb.stdout and "mean_last:3" in lb.stdout
