"""Synthetic trajectories of a text world model (``algos.text.imagined``): rollouts in an exact world model
(the real Maze FO env, its time limit left to the rollout's turn cap) are the real episodes from the same
starts; a world model that writes garbage ends episodes, counted; only well-formed outcomes are read; the
real-data budget and the mixes of a tiny bc run; bad params refused in one line."""

from __future__ import annotations

import pytest
import torch

from rlbench_cli.algos import check_params, get_algorithm
from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.text.imagined import real_budget, rollouts, strict_outcome
from rlbench_cli.algos.text.tokenizer import TextTokenizer
from rlbench_cli.algos.text.world_model import outcome_ids
from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset
from rlbench_cli.envs import make_env
from rlbench_cli.suite.grid import RunSpec

TINY = {"n_embd": 16, "n_layer": 1, "n_head": 1, "batch_size": 8, "max_context": 96}
MAZE = "rlbench/MazeFO-v0"


def _replay(episodes):
    """The behaviour that played ``episodes``: each one's recorded actions, in order."""
    done = [0] * len(episodes)

    def act(idx, obs):
        out = []
        for i, o in zip(idx, obs):
            turn = episodes[i][done[i]]
            assert turn["observation"] == o  # the imagined episode is where the real one was
            out.append(turn["action"])
            done[i] += 1
        return out

    return act


def test_an_exact_world_model_imagines_the_real_episodes_from_the_same_starts():
    kwargs = {"max_steps": 12}
    real = build_text_dataset(MAZE, "mixed", 12, seed=0, env_kwargs=kwargs)
    assert any(ep[-1].get("truncated") for ep in real) and any(not ep[-1].get("truncated") for ep in real)
    envs = [make_env(MAZE, kwargs) for _ in real]  # the env's dynamics; its time limit: the rollout's cap
    starts = [
        str(env.reset(seed=i)[0]) for i, env in enumerate(envs)
    ]  # datagen.text's episode seeds (seed 0)
    assert starts == [ep[0]["observation"] for ep in real]

    def exact(idx, obs, actions):
        out = []
        for i, a in zip(idx, actions):
            o, r, term, _, _ = envs[i].step(a)  # a time limit's end is not the world's: not done
            out.append((str(o), float(r), bool(term)))
        return out

    imagined, errors = rollouts(starts, _replay(real), exact, max_turns=12)
    assert errors == 0
    assert all(t.pop("imagined") is True for ep in imagined for t in ep)
    assert imagined == list(real)  # turns, rewards, ends and time-limit cuts alike


def test_a_world_model_that_writes_garbage_ends_episodes_and_counts_them():
    def step(idx, obs, actions):  # episode 0 unreadable at once, 1 at its third turn, 2 never
        return [None if (i == 0 or (i == 1 and o == "s2")) else (f"s{int(o[1:]) + 1}", -1.0, False)
                for i, o in zip(idx, obs)]  # fmt: skip

    episodes, errors = rollouts(["s0", "s0", "s0"], lambda idx, obs: ["go"] * len(idx), step, max_turns=5)
    assert errors == 2
    assert [len(ep) for ep in episodes] == [2, 5]  # episode 0 had no turn: dropped
    for ep in episodes:  # an error's end and the cap's end: no terminal state, nothing follows
        assert ep[-1]["done"] and ep[-1]["truncated"] and not any(t["done"] for t in ep[:-1])
    assert [t["observation"] for t in episodes[0]] == ["s0", "s1"]


def test_only_well_formed_outcomes_are_read():
    tok = TextTokenizer.build(["There are walls above you.", "move up", "-1", "0"])
    good = outcome_ids(tok, "There are walls above you.", -1.0, False)
    assert strict_outcome(tok, good) == ("There are walls above you.", -1.0, False)
    assert strict_outcome(tok, outcome_ids(tok, "", 0.0, True)) == ("", 0.0, True)  # an end: no next text
    assert strict_outcome(tok, outcome_ids(tok, "", 0.0, False)) is None  # going on with no observation
    rew = good.index(tok.rew_id)
    assert strict_outcome(tok, good[:-1]) is None  # cut before <done|cont> (the token limit)
    assert strict_outcome(tok, good[1:]) is None  # no <obs>
    assert strict_outcome(tok, good[:rew] + good[rew + 1 :]) is None  # no <rew>
    assert strict_outcome(tok, good[:rew] + [tok.rew_id, *tok.encode(" up"), tok.cont_id]) is None
    assert strict_outcome(tok, good[:rew] + [tok.rew_id, *tok.encode(" nan"), tok.cont_id]) is None
    assert strict_outcome(tok, [tok.obs_id, tok.act_id, *good[1:]]) is None  # a special token in the text


def test_the_real_budget_holds_out_the_last_episodes_and_refuses_too_many():
    eps = [[{"i": i}] for i in range(20)]
    real, held = real_budget(eps, 5, 0.1, "d")
    assert real == eps[:5] and held == eps[18:]
    assert real_budget(eps, 0, 0.1, "d")[0] == eps[:18] and real_budget(eps, 0, 0.0, "d") == (eps, [])
    with pytest.raises(ValueError, match="train_episodes 19: dataset 'd' has 18 episodes to train on"):
        real_budget(eps, 19, 0.1, "d")


class Sink:
    def __init__(self):
        self.rows: list[tuple[int, dict]] = []

    def log(self, step, **values):
        self.rows.append((step, values))


def test_a_bc_run_trains_on_each_mix_of_one_real_budget(tmp_path):
    path = tmp_path / "MazeFO-v0-mixed.jsonl"
    save_text_dataset(build_text_dataset(MAZE, "mixed", 20, seed=0), path)
    torch.set_num_threads(1)
    imagination = {**TINY, "learning_rate": 3e-3, "world_model_steps": 200, "max_outcome_tokens": 60,
                   "max_turns": 6, "episodes": 8, "em_turns": 20}  # fmt: skip
    got = {}
    for mix in ("real", "imagined", "real+imagined"):
        spec = RunSpec(suite="t", algo="bc", algo_name="bc", env_id=MAZE, env_kwargs={"max_steps": 5}, seed=0,
                       params={**TINY, "train_episodes": 5, "imagination": imagination},
                       budget={"steps": 2, "eval_every": 2, "eval_episodes": 2}, dataset="MazeFO-v0-mixed",
                       dataset_path=str(path), data_mix=mix)  # fmt: skip
        sink = Sink()
        ctx = RunContext(spec=spec, sink=sink)
        get_algorithm("bc", MAZE)().train(ctx)
        got[mix] = ({k: v for _, row in sink.rows for k, v in row.items()}, ctx.dataset())
    (real, real_data), (imag, imag_data), (both, both_data) = (
        got["real"],
        got["imagined"],
        got["real+imagined"],
    )
    assert (
        real["train/real_episodes"] == 5 == both["train/real_episodes"] and imag["train/real_episodes"] == 0
    )
    assert "train/imagined_episodes" not in real and "eval/world_model/em" not in real
    for values in (imag, both):
        assert values["train/world_model_episodes"] == 5
        assert values["train/imagined_episodes"] + values["train/imagined_errors"] >= 8
        assert 0.0 <= values["eval/world_model/em"] <= 1.0 and "eval/world_model/wm" in values
    assert imag["train/imagined_episodes"] > 0
    assert both_data[:5] == real_data == build_text_dataset(MAZE, "mixed", 20, seed=0)[:5]
    assert both_data[5:] == imag_data and all(t["imagined"] for ep in imag_data for t in ep)
    assert all(len(ep) <= 6 for ep in imag_data)
    assert imag_data[0][0]["observation"] == real_data[0][0]["observation"]  # starts: the real episodes'


@pytest.mark.parametrize(
    ("algo", "env", "params", "says"),
    [
        (
            "bc",
            "CartPole-v1",
            {"imagination": {}},
            "imagines episodes only on a text task",
        ),
        ("text_world_model", MAZE, {"imagination": {}}, "imagination: text_world_model does not take it"),
        ("bc", MAZE, {"train_episodes": -1}, "train_episodes must be 0 (all) to"),
        ("ilql", MAZE, {"train_episodes": 2.5}, "train_episodes must be a whole number"),
        ("bc", MAZE, {"imagination": {"world_model_steps": 0}}, "imagination.world_model_steps must be 1 to"),
        ("filtered_bc", MAZE, {"imagination": {"episodes": -3}}, "imagination.episodes must be 0"),
        ("bc", MAZE, {"imagination": {"holdout_fraction": 0.0}}, "imagination.holdout_fraction must be in"),
        ("bc", MAZE, {"imagination": {"steps": 3}}, "unknown parameter(s) for imagination: steps"),
        ("bc", MAZE, {"imagination": 300}, "imagination must be a mapping"),
    ],
)
def test_bad_data_params_are_refused(algo, env, params, says):
    with pytest.raises(ValueError) as e:
        check_params(algo, env, params)
    assert says in str(e.value) and "\n" not in str(e.value)
    check_params(
        "ilql", MAZE, {"train_episodes": 10, "imagination": {"world_model_steps": 10, "episodes": 5}}
    )


def test_a_swept_budget_larger_than_the_dataset_names_the_sweep(tmp_path):
    from rlbench_cli.datagen.text import check_budgets
    from rlbench_cli.errors import SuiteInvalid
    from rlbench_cli.suite.loader import parse_suite

    path = tmp_path / "maze.jsonl"
    save_text_dataset(build_text_dataset(MAZE, "mixed", 20, seed=0), path)
    data = {"name": "s", "datasets": [{"name": "maze", "path": str(path), "env": MAZE, "data_mix": ["real"]}],
            "algorithms": [{"name": "bc", "params": {"imagination": {}}}, {"name": "ilql", "params": {}}],
            "sweep": {"bc.train_episodes": [4, 18]}}  # fmt: skip
    check_budgets(parse_suite(data, "s.yaml"), {"maze": path}, "s.yaml")  # 18 of 20 less 2 held out: fine
    data["sweep"] = {"bc.train_episodes": [4, 19]}
    with pytest.raises(SuiteInvalid, match=r"s.yaml: field 'sweep.bc.train_episodes': 19 real episodes, and "
                                           r"dataset 'maze' has 18 to train on \(20 less 2 held out"):  # fmt: skip
        check_budgets(parse_suite(data, "s.yaml"), {"maze": path}, "s.yaml")
    data["algorithms"][1]["params"] = {"train_episodes": 21}  # no imagination: nothing held out
    data["sweep"] = {}
    with pytest.raises(
        SuiteInvalid, match=r"'algorithms\[1\].params.train_episodes': 21 .* has 20 to train on;"
    ):
        check_budgets(parse_suite(data, "s.yaml"), {"maze": path}, "s.yaml")
