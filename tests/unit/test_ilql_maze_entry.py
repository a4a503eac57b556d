"""ILQL on Maze FO (issue #44): the target network's update direction, and the fresh-seed suite that holds
lmrl-small's ilql Maze FO entry exactly, on seeds that chose nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlbench_cli.algos.text.common import settings_of
from rlbench_cli.algos.text.offline import ILQL
from rlbench_cli.algos.text.policy import build_model, build_tokenizer
from rlbench_cli.suite.loader import load_suite

pytestmark = pytest.mark.fast

SUITES = Path(__file__).parents[2] / "suites"


def _heads(model) -> tuple[list[torch.Tensor], list[torch.Tensor]]:  # noqa: ANN001
    return ([p.detach().clone() for p in model.target_q.parameters()],
            [p.detach().clone() for p in model.q_head.parameters()])  # fmt: skip


@pytest.mark.parametrize("polyak", [0.0, 0.3, 1.0])
def test_polyak_moves_the_target_q_that_fraction_of_the_way_to_the_online_q(polyak):
    torch.manual_seed(0)
    settings = settings_of("ilql", {"n_embd": 16, "n_layer": 1, "n_head": 2}, ILQL.own)
    model = build_model(settings, build_tokenizer(settings, ["move up", "move down"]), values=True)
    with torch.no_grad():
        for p in model.q_head.parameters():
            p.add_(torch.randn_like(p))  # the online head has moved away from its target copy
    target, online = _heads(model)
    model.update_target(polyak)
    for new, t, s in zip(model.target_q.parameters(), target, online):
        assert torch.allclose(new, t + polyak * (s - t), atol=1e-6)
    assert all(not p.requires_grad for p in model.target_q.parameters())


def _maze_entry(suite):  # noqa: ANN001, ANN202
    return next(a for a in suite.algorithms if a.name == "ilql" and list(a.envs or []) == ["MazeFO-v0-mixed"])


def test_the_fresh_seed_suite_holds_lmrl_smalls_ilql_maze_fo_entry_on_untuned_seeds():
    small, fresh = load_suite(SUITES / "lmrl-small.yaml"), load_suite(SUITES / "lmrl-maze-fresh.yaml")
    ours = _maze_entry(small)
    assert len(fresh.algorithms) == 1 and fresh.algorithms[0].name == "ilql"
    entry = fresh.algorithms[0]
    assert entry.params == ours.params
    assert fresh.datasets and [d if isinstance(d, str) else d.name for d in fresh.datasets] == [
        "MazeFO-v0-mixed"
    ]
    budget = {k: getattr(fresh.budget, k) for k in ("steps", "eval_every", "eval_episodes")}
    assert budget == {k: getattr(ours.budget, k) for k in budget}
    assert (fresh.score, fresh.normalize) == (small.score, small.normalize)
    seeds = fresh.seed_list
    assert len(seeds) == 10 and not set(seeds) & set(range(1000))  # never the seeds the entry was chosen on
