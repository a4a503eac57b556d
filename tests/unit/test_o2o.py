"""Offline-to-online pieces that need no training: finetune in the suite and the run identity, the evaluation
schedule over both phases, the conservative dataset level, and the --score phase flag."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

from rlbench_cli.algos.base import RunContext
from rlbench_cli.cli.common import check_score_flags
from rlbench_cli.datagen import d4rl as B
from rlbench_cli.datasets.names import parse_generated_name
from rlbench_cli.errors import UsageError
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite


def _suite(algo):
    return parse_suite({"name": "o", "seeds": 1, "datasets": ["Pendulum-v1-conservative"], "algorithms": [algo]},
                       "o.yaml")  # fmt: skip


def test_finetune_is_part_of_the_run_identity():
    (plain,) = expand(_suite("iql"))
    (tuned,) = expand(_suite({"name": "iql", "finetune": {"steps": 300}}))
    (other,) = expand(_suite({"name": "iql", "finetune": {"steps": 400}}))
    assert "finetune" not in plain.identity()  # runs without it keep their ids
    assert tuned.finetune == {"steps": 300, "eval_every": 30}
    assert len({plain.run_id, tuned.run_id, other.run_id}) == 3
    assert type(tuned).from_dict(tuned.to_dict()) == tuned


def test_evaluation_schedule_spans_both_phases():
    (spec,) = expand(_suite({"name": "iql", "finetune": {"steps": 250, "eval_every": 100}}))
    spec = dataclasses.replace(spec, budget={**spec.budget, "steps": 1000, "eval_every": 400})
    ctx = RunContext(spec=spec, sink=None)  # type: ignore[arg-type]
    assert ctx.eval_schedule() == [0, 400, 800, 1000, 1100, 1200, 1250]
    assert (ctx.steps, ctx.finetune_steps, ctx.total_steps) == (1000, 250, 1250)


def test_conservative_level_is_the_medium_policy_greedy_with_small_noise():
    assert parse_generated_name("Pendulum-v1-conservative") == ("Pendulum-v1", "conservative")
    cps = [
        {"step": 1000 * i, "return": r, "file": f"c{i}.pt"} for i, r in enumerate([-1500, -1000, -800, -150])
    ]
    parts, n, meta = B._plan(
        "conservative", {"checkpoints": cps}, {"random": -1200, "expert": -150}, 500, True
    )
    medium, _ = B.select_medium(cps, -1200, -150)
    assert n == 500 and len(parts) == 1 and parts[0][1] == 500
    assert meta["policy"]["kind"] == "conservative" and meta["policy"]["step"] == cps[medium]["step"]
    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    obs = np.zeros((4000, 3), np.float32)
    act = B._conservative(lambda o: np.full((len(o), 1), 1.0, np.float32), box, seed=5)(obs)
    assert abs(act.std() - B.CONSERVATIVE_NOISE * 2.0) < 0.01 and abs(act.mean() - 1.0) < 0.01  # narrow
    again = B._conservative(lambda o: np.full((len(o), 1), 1.0, np.float32), box, seed=5)(obs)
    np.testing.assert_array_equal(act, again)
    flips = B._conservative(lambda o: np.ones(len(o), np.int64), gym.spaces.Discrete(2), seed=1)(obs)
    assert 0.01 < (flips == 0).mean() < 0.05  # half the 5% random actions land on the other action


@pytest.mark.parametrize("score", ["final@online", "best@offline", "mean_last:3@all", "auc"])
def test_score_flag_takes_a_phase(score):
    check_score_flags(score, None)


@pytest.mark.parametrize("score", ["final@later", "final@", "@online"])
def test_score_flag_with_a_bad_phase_names_the_flag(score):
    with pytest.raises(UsageError, match=rf"--score '{score}': .*optionally @offline, @online or @all"):
        check_score_flags(score, None)


def test_learning_curves_mark_the_phase_boundary(tmp_path):
    import pandas as pd

    from rlbench_cli import plots

    rows = [{"run_id": f"r{s}", "algo": "iql", "env": "pend", "seed": s, "step": st, "value": float(st + s),
             "boundary": 100.0} for s in range(2) for st in (0, 50, 100, 150, 200)]  # fmt: skip
    path = plots.write_learning_curves("o", pd.DataFrame(rows), "eval/return", tmp_path, reps=100)
    assert path.stat().st_size > 0
    lc = pd.DataFrame(rows).groupby(["algo", "env", "step"], as_index=False)["value"].mean()
    lc = lc.rename(columns={"value": "mean"}).assign(lower=lc["value"], upper=lc["value"], n=2)
    fig = plots.plot_learning_curves(lc, boundaries={"pend": [100.0]})
    (ax,) = fig.axes
    vertical = [ln for ln in ax.lines if list(ln.get_xdata()) == [100.0, 100.0]]
    assert len(vertical) == 1 and ax.get_xlabel() == "Gradient steps, then env steps"
    assert any(t.get_text() == "offline | online" for t in ax.texts)
