"""Text ppo's KL penalty to its reference (``kl_coef``, ``algos.text.ppo``), in process on tiny models: logged
at each update and never negative; it keeps the policy nearer the clone than the same run without it; the
reference is the cloned policy and a resumed run keeps it (from the checkpoint, not a copy of the resumed
model); a negative weight is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from text_ppo_helpers import PPO, maze_dataset, run_ppo

from rlbench_cli import checkpoint
from rlbench_cli.algos import check_params
from rlbench_cli.algos.text import ppo as text_ppo

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def maze_data(tmp_path_factory):
    return maze_dataset(tmp_path_factory.mktemp("data"), 8)


def _kl(rows):
    return [(s, v["train/loss/kl_ref"]) for s, v in rows if "train/loss/kl_ref" in v]


def test_the_penalty_is_logged_at_each_update_and_only_when_asked(maze_data):
    pre = {"bc_steps": 10, "dataset": maze_data, "train_episodes": 4}
    rows = run_ppo({**PPO, "pretrain": pre, "kl_coef": 0.5}, steps=16)
    kl = _kl(rows)
    updates = [s for s, v in rows if "train/loss/policy" in v]
    assert [s for s, _ in kl] == updates and len(updates) == 4
    assert all(np.isfinite(v) and v >= 0 for _, v in kl) and max(v for _, v in kl) > 0
    assert _kl(run_ppo({**PPO, "pretrain": pre}, steps=16)) == []  # kl_coef 0: nothing computed


def test_a_heavy_penalty_keeps_the_policy_nearer_its_clone(maze_data):
    pre = {"bc_steps": 20, "dataset": maze_data, "train_episodes": 4}
    fast = {**PPO, "pretrain": pre, "learning_rate": 1e-2, "update_epochs": 4}
    # a weight too small to act still measures the drift
    free = np.mean([v for _, v in _kl(run_ppo({**fast, "kl_coef": 1e-12}, steps=32))])
    held = np.mean([v for _, v in _kl(run_ppo({**fast, "kl_coef": 20.0}, steps=32))])
    assert free > 0 and held < free / 2, (free, held)


def test_the_reference_is_the_clone_and_a_resumed_run_keeps_it(maze_data, tmp_path, monkeypatch):
    from test_checkpoint import _spec, interrupted_and_resumed

    torch.set_num_threads(1)
    seen: list[torch.Tensor] = []
    update = text_ppo.TextPPO.update

    def spy(self, model, *args, **kwargs):
        seen.append(next(iter(self.ref.state_dict().values())).clone())
        return update(self, model, *args, **kwargs)

    monkeypatch.setattr(text_ppo.TextPPO, "update", spy)
    made: list[torch.Tensor] = []
    reference = text_ppo.reference

    def made_from(model):
        made.append(next(iter(model.state_dict().values())).clone())
        return reference(model)

    monkeypatch.setattr(text_ppo, "reference", made_from)
    pre = {"bc_steps": 10, "dataset": maze_data, "train_episodes": 4}
    spec = _spec("ppo", "rlbench/MazeFO-v0", steps=24, eval_every=8, every=8,
                 params={**PPO, "pretrain": pre, "kl_coef": 0.5, "learning_rate": 1e-2})  # fmt: skip
    saved: list[dict] = []
    load = checkpoint.load_latest

    def keep(folder):
        out = load(folder)
        if out is not None:
            saved.append(out["state"])
        return out

    monkeypatch.setattr(checkpoint, "load_latest", keep)
    interrupted_and_resumed(tmp_path, spec, after=1)
    clone = made[0]  # the first run's reference: its model right after cloning
    assert torch.equal(seen[0], clone)
    (state,) = [s for s in saved if s]
    first = next(iter(state["ref"].values()))
    assert torch.equal(first, clone) and not torch.equal(next(iter(state["model"].values())), clone)
    assert torch.equal(seen[-1], clone)  # after the resume: the clone still, not the resumed model


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError) as e:
        check_params("ppo", "rlbench/MazeFO-v0", {"kl_coef": -0.1})
    assert "kl_coef -0.1: a penalty's weight is 0 (none) or more" in str(e.value)
    check_params("ppo", "rlbench/MazeFO-v0", {"kl_coef": 0.1})
