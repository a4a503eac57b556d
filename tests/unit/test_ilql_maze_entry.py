"""ILQL on Maze FO (issue #44): the target network (heads and the transformer they read, Polyak-averaged, read
when acting), its twin Q heads, episodes cut by the time limit (no Q target for their last turn), and the
fresh-seed suite that holds lmrl-small's ilql Maze FO entry exactly, on seeds that chose nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlbench_cli.algos.text.common import settings_of, turn_samples
from rlbench_cli.algos.text.offline import ILQL
from rlbench_cli.algos.text.policy import build_model, build_tokenizer, context_ids, score_actions
from rlbench_cli.suite.loader import load_suite

pytestmark = pytest.mark.slow  # torch and transformers: their import alone is seconds of the fast tier

SUITES = Path(__file__).parents[2] / "suites"


def _model(value_model: str = "separate"):  # noqa: ANN202
    torch.manual_seed(0)
    settings = settings_of("ilql", {"n_embd": 16, "n_layer": 1, "n_head": 2, "value_model": value_model},
                           ILQL.own)  # fmt: skip
    tok = build_tokenizer(settings, ["The goal is at position 8, 6.", "move up", "move down"])
    return settings, tok, build_model(settings, tok, values=True, twin_q=True)


def _pairs(model) -> list[tuple[torch.nn.Module, torch.nn.Module]]:  # noqa: ANN001
    return [(model.target_q, model.q_head), (model.target_q2, model.q2_head),
            (model.target_body, model.value_body())]  # fmt: skip


@pytest.mark.parametrize("value_model", ["separate", "shared"])
@pytest.mark.parametrize("polyak", [0.0, 0.3, 1.0])
def test_polyak_moves_every_target_parameter_that_fraction_of_the_way_to_the_online_one(polyak, value_model):
    _, _, model = _model(value_model)
    with torch.no_grad():
        for _, online in _pairs(model):
            for p in online.parameters():
                p.add_(torch.randn_like(p))  # the online heads and body have moved away from their targets
    before = [
        ([p.clone() for p in t.parameters()], [p.clone() for p in o.parameters()]) for t, o in _pairs(model)
    ]
    model.update_target(polyak)
    for (target, _), (old, online) in zip(_pairs(model), before):
        for new, t, s in zip(target.parameters(), old, online):
            assert torch.allclose(new, t + polyak * (s - t), atol=1e-6)
        assert all(not p.requires_grad for p in target.parameters())


def _scores(model, tok) -> np.ndarray:  # noqa: ANN001
    model.eval()
    ctx = [context_ids(tok, [], "The goal is at position 8, 6.", 64, 0)]
    return score_actions(model, tok, ctx, [[tok.encode("move up"), tok.encode("move down")]], "cpu", 4.0)[0]


def test_acting_reads_the_target_network_not_the_online_value_transformer():
    """The target Q is the target heads on the target body: a step of the online value transformer changes
    what the policy does only through update_target (before, the target head read the online body)."""
    _, tok, model = _model("separate")
    with torch.no_grad():
        for p in model.target_q.parameters():
            p.normal_()
        model.target_q2.load_state_dict(model.target_q.state_dict())
    first = _scores(model, tok)
    with torch.no_grad():
        for p in model.vlm.parameters():
            p.add_(torch.randn_like(p))
    np.testing.assert_allclose(_scores(model, tok), first, rtol=1e-6)
    model.update_target(1.0)
    assert not np.allclose(_scores(model, tok), first)


def test_the_target_q_is_the_smaller_of_the_twin_target_heads():
    _, _, model = _model()
    h = torch.randn(3, 16)
    with torch.no_grad():
        model.target_q2[-1].bias.sub_(5.0)  # head 2 lower everywhere ...
        model.target_q2[-1].bias[0] += 10.0  # ... but on token 0
    q1, q2 = model.target_q(h), model.target_q2(h)
    got = model.target_values(h)
    assert torch.equal(got, torch.minimum(q1, q2)) and torch.equal(got[:, 1:], q2[:, 1:])
    assert torch.equal(got[:, 0], q1[:, 0])


def _losses(last: dict) -> dict[str, float]:  # noqa: ANN001
    episodes = [[{"observation": "The goal is at position 8, 6.", "action": "move up", "reward": -1.0,
                  "done": False}, {"observation": "The goal is at position 8, 6.", "action": "move down",
                                   "done": True, **last}]]  # fmt: skip
    settings, tok, model = _model()
    turns = turn_samples(episodes, tok, settings)
    with torch.no_grad():
        out = ILQL().losses(model, tok, turns, np.array([1]), settings, "cpu")
    return {k: float(v) for k, v in out.items()}


def test_the_last_turn_of_an_episode_the_time_limit_cut_gets_no_q_target():
    """A walk cut at 100 steps is not over: no terminal target (its last reward as its whole value) and no
    bootstrap (its next state is not in the data) for that turn's last token; a true end keeps its target."""
    cut = [_losses({"reward": r, "truncated": True})["q"] for r in (-2.0, -50.0)]
    assert cut[0] == pytest.approx(cut[1])
    ended = [_losses({"reward": r})["q"] for r in (-2.0, -50.0)]
    assert ended[0] != pytest.approx(ended[1])


def test_generated_text_episodes_mark_a_time_limit_end_and_keep_it_on_disk(tmp_path):
    from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset
    from rlbench_cli.datasets.text import load_text_dataset

    data = build_text_dataset("rlbench/MazeFO-v0", "mixed", 12, seed=3, env_kwargs={"max_steps": 4})
    cut = [ep for ep in data if ep[-1].get("truncated")]
    assert cut and len(cut) < len(data)  # some walks were cut, some reached the goal in 4 steps
    assert all(len(ep) == 4 and ep[-1]["done"] for ep in cut)
    assert not any(t.get("truncated") for ep in data for t in ep[:-1])
    assert all(ep[-1]["reward"] == 0.0 for ep in data if not ep[-1].get("truncated"))  # the goal's step
    back = load_text_dataset(save_text_dataset(data, tmp_path / "MazeFO-v0-mixed.jsonl"))
    assert back == data


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


def test_the_fixed_code_suite_holds_the_same_entry_on_seeds_that_chose_nothing():
    small, fresh = load_suite(SUITES / "lmrl-small.yaml"), load_suite(SUITES / "lmrl-maze-fresh.yaml")
    fixed = load_suite(SUITES / "lmrl-maze-fixed.yaml")
    assert len(fixed.algorithms) == 1 and fixed.algorithms[0].params == _maze_entry(small).params
    budget = {k: getattr(fixed.budget, k) for k in ("steps", "eval_every", "eval_episodes")}
    assert budget == {k: getattr(fresh.budget, k) for k in budget}
    assert (fixed.score, fixed.normalize) == (small.score, small.normalize)
    seeds = fixed.seed_list
    assert len(set(seeds)) == 10 and not set(seeds) & (set(range(1000)) | set(fresh.seed_list))
