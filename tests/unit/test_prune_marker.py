"""A run stops when rlbench tune's pruner leaves a PRUNE file in its folder, and ends with the status 'pruned'
(runner.run_one), neither finished nor failed; a run without one trains as before."""

import json
import threading
import time

import pytest

from rlbench_cli.algos.base import PRUNE_CHECK_S, PRUNE_FILE, RunContext
from rlbench_cli.runner import run_one
from rlbench_cli.sink import ShardSink
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast


def spec(tmp_path, entrypoint="stopper:train"):
    suite = parse_suite({"name": "p", "seeds": 1, "budget": {"steps": 1000, "eval_every": 100},
                         "envs": ["CartPole-v1"], "algorithms": [{"name": "x", "entrypoint": entrypoint}]}, "p.yaml")  # fmt: skip
    return expand(suite)[0]


def test_should_stop_sees_the_marker_and_the_step_it_names(tmp_path):
    ctx = RunContext(spec=spec(tmp_path), sink=ShardSink(tmp_path / "m", background=False), run_dir=tmp_path)
    assert not ctx.should_stop() and not ctx.pruned
    (tmp_path / PRUNE_FILE).write_text("3000\n")
    assert not ctx.should_stop()  # looked for at most every PRUNE_CHECK_S
    time.sleep(PRUNE_CHECK_S + 0.05)
    assert ctx.should_stop() and ctx.pruned and ctx.pruned_at == 3000
    assert ctx.should_stop()  # and stays stopped


def test_a_pruned_run_ends_with_its_own_status(tmp_path, monkeypatch):
    (tmp_path / "stopper.py").write_text(
        "import time\n"
        "def train(ctx):\n"
        "    for step in ctx.eval_schedule():\n"
        "        if ctx.should_stop():\n"
        "            return\n"
        "        ctx.sink.log(step, **{'eval/return': 1.0})\n"
        "        time.sleep(0.2)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "run" / "attempt-1"
    folder.mkdir(parents=True)
    threading.Timer(0.5, lambda: (folder / PRUNE_FILE).write_text("200\n")).start()
    result = run_one(spec(tmp_path), folder, stop_event=threading.Event())
    assert result["status"] == "pruned" and result["exit_code"] is None
    assert result["error"] == "pruned by rlbench tune: its trial fell behind at step 200"
    assert json.loads((folder / "result.json").read_text())["status"] == "pruned"
