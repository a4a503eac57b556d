"""Every algorithm is evaluated on the suite's grid: rows at 0, eval_every, 2 eval_every, ..., the budget,
whatever its own step granularity (ppo reaches a point at its next batch boundary), with the step training
had reached beside each one as eval/actual_step."""

import pyarrow.parquet as pq
import pytest

from rlbench_cli.runner import run_one
from rlbench_cli.sink import list_shards
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite


@pytest.mark.parametrize(
    "algo",
    [{"name": "ppo", "params": {"num_envs": 4, "num_steps": 48}}, "random"],
    ids=["ppo", "random"],
)  # fmt: skip
def test_evaluations_land_on_the_suites_grid(tmp_path, algo):
    suite = parse_suite({"name": "g", "seeds": 1, "envs": ["CartPole-v1"], "algorithms": [algo],
                         "budget": {"steps": 1000, "eval_every": 300, "eval_episodes": 1}})  # fmt: skip
    (spec,) = expand(suite)
    assert run_one(spec, tmp_path)["status"] == "finished"
    rows = pq.read_table(list_shards(tmp_path / "metrics")).to_pandas()
    ret = rows[rows["name"] == "eval/return"].sort_values("step")
    actual = rows[rows["name"] == "eval/actual_step"].set_index("step")["value"]
    assert ret["step"].tolist() == [0, 300, 600, 900, 1000]
    assert all(actual[s] >= s for s in ret["step"]) and actual[0] == 0
    assert all(actual[s] < s + 192 for s in ret["step"][:-1])  # ppo: within one batch (4 x 48) of the point
