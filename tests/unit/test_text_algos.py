"""Text policies and algorithms: tokenizer, ILQL's loss pieces, GAE, the world model's outcome format and
metrics, and a few steps of each text algorithm on a tiny Maze FO dataset (a 2-layer, 32-wide GPT-2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlbench_cli.algos import get_algorithm
from rlbench_cli.algos.base import RunContext
from rlbench_cli.algos.text.losses import expectile_loss, ilql_q_targets, returns_to_go
from rlbench_cli.algos.text.ppo import gae
from rlbench_cli.algos.text.tokenizer import TextTokenizer
from rlbench_cli.algos.text.world_model import outcome_ids, parse_outcome, world_model_metrics
from rlbench_cli.suite.checks import check_pretrained
from rlbench_cli.suite.grid import RunSpec

TINY = {"n_embd": 32, "n_layer": 2, "n_head": 2, "batch_size": 8, "logging_steps": 2, "max_context": 96}


def test_tokenizer_round_trip_and_fallback():
    texts = ["The goal is at position 8, 6. Your current position is at position 1 0, 2.", "move up"]
    tok = TextTokenizer.build(texts)
    for s in [*texts, "unseen words: zebra!\n\tquux  ", "move   left\n", ""]:
        assert tok.decode(tok.encode(s)) == s
    # a word of the task's text is one token; an unseen one is spelt out
    assert len(tok.encode(" position")) == 1
    assert len(tok.encode(" zebra")) == len(" zebra")
    assert tok.decode(tok.encode("naïve")) == "nave"  # a non-ASCII character unseen in the task: <unk>
    assert tok.encode("é")[0] == tok.unk_id
    again = TextTokenizer(tok.to_dict()["tokens"])
    assert again.encode(texts[0]) == tok.encode(texts[0])


def test_expectile_loss():
    diff = torch.tensor([1.0, -2.0])
    assert math.isclose(float(expectile_loss(diff, 0.7)), (0.7 * 1 + 0.3 * 4) / 2, rel_tol=1e-6)
    assert math.isclose(float(expectile_loss(diff, 0.5)), 0.5 * 5 / 2, rel_tol=1e-6)
    mask = torch.tensor([1.0, 0.0])
    assert math.isclose(float(expectile_loss(diff, 0.7, mask)), 0.7, rel_tol=1e-6)


def test_ilql_q_targets():
    # row 0: a 3-token action (2 tokens + <eoa>), not terminal; row 1: a 1-token action, terminal
    v = torch.tensor([[1.0, 2.0, 3.0], [5.0, 0.0, 0.0]])
    valid = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    target = ilql_q_targets(v, valid, torch.tensor([-1.0, 0.5]), torch.tensor([0.0, 1.0]),
                            torch.tensor([10.0, 99.0]), gamma=0.9)  # fmt: skip
    assert torch.allclose(target, torch.tensor([[2.0, 3.0, -1.0 + 0.9 * 10.0], [0.5, 0.0, 0.0]]))


def test_returns_to_go_and_gae():
    assert returns_to_go([-1.0, -1.0, 0.0], 0.5) == [-1.5, -1.0, 0.0]
    # lambda 1, values 0: GAE is the discounted return; an episode end cuts it
    adv = gae(np.array([1.0, 1.0, 1.0]), np.zeros(3), np.zeros(3), np.array([0, 1, 0]), np.array([0, 1, 0]),
              gamma=0.5, lam=1.0)  # fmt: skip
    assert np.allclose(adv, [1.5, 1.0, 1.0])


def test_outcome_round_trip_and_metrics():
    tok = TextTokenizer.build(["There is a wall above you.", "move up"])
    ids = outcome_ids(tok, "There is a wall above you.", -1.0, False)
    assert parse_outcome(tok, ids) == ("There is a wall above you.", -1.0, False)
    assert parse_outcome(tok, outcome_ids(tok, "", 0.0, True)) == ("", 0.0, True)
    assert parse_outcome(tok, [tok.obs_id, *tok.encode("x")]) == ("x", 0.0, False)  # cut short
    m = world_model_metrics(real=0.8, w2r_successes=3, episodes=5, errors=1)
    assert m["eval/w2r"] == 0.75 and math.isclose(m["eval/cr"], 0.75 / 0.8)
    assert "eval/cr" not in world_model_metrics(real=0.0, w2r_successes=0, episodes=5, errors=0)


def test_check_pretrained(tmp_path):
    assert check_pretrained(None) is None
    assert check_pretrained(str(tmp_path)) is None
    problem = check_pretrained(str(tmp_path / "nope"), "algorithms[0].params.pretrained")
    assert problem.startswith("algorithms[0].params.pretrained: no checkpoint at") and "\n" not in problem


def test_registry_dispatches_text_variants():
    assert get_algorithm("bc", "rlbench/MazeFO-v0").__name__ == "TextBC"
    assert get_algorithm("bc", "CartPole-v1").__name__ == "BC"
    assert get_algorithm("ppo", "rlbench/MazeFO-v0").__name__ == "TextPPO"
    assert get_algorithm("ppo", "CartPole-v1").__name__ == "PPO"


# -- a few steps of each algorithm ----------------------------------------------------------------------------


class ListSink:
    def __init__(self):
        self.rows: list[tuple[int, dict[str, float]]] = []

    def log(self, step, **values):
        self.rows.append((step, values))

    def values(self, name):
        return [(s, v[name]) for s, v in self.rows if name in v]


@pytest.fixture(scope="module")
def maze_dataset(tmp_path_factory):
    from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

    path = tmp_path_factory.mktemp("text") / "MazeFO-v0-mixed.jsonl"
    save_text_dataset(build_text_dataset("rlbench/MazeFO-v0", "mixed", 12, seed=0), path)
    return path


def _run(algo, params, steps, dataset=None, eval_episodes=2):
    torch.set_num_threads(1)
    spec = RunSpec(suite="t", algo=algo, algo_name=algo, params={**TINY, **params}, env_id="rlbench/MazeFO-v0",
                   env_kwargs={"max_steps": 8}, seed=0,
                   budget={"steps": steps, "eval_every": steps, "eval_episodes": eval_episodes},
                   dataset=None if dataset is None else "MazeFO-v0-mixed",
                   dataset_path=None if dataset is None else str(dataset))  # fmt: skip
    sink = ListSink()
    ctx = RunContext(spec=spec, sink=sink)
    get_algorithm(algo, spec.env_id)().train(ctx)
    return sink


@pytest.mark.parametrize("algo", ["bc", "filtered_bc", "mc_returns", "ilql"])
def test_offline_text_algorithms_train_and_evaluate(maze_dataset, algo):
    sink = _run(algo, {}, 4, maze_dataset)
    assert [s for s, _ in sink.values("eval/return")] == [0, 4]
    assert all(v in (0.0, 0.5, 1.0) for _, v in sink.values("eval/success"))
    assert len(sink.values("eval/normalized_return")) == 2  # the lmrl table knows Maze FO
    losses = {k for _, v in sink.rows for k in v if k.startswith("train/loss/")}
    if algo in ("bc", "filtered_bc"):
        assert losses == {"train/loss/bc"}
    elif algo == "ilql":
        assert losses == {"train/loss/bc", "train/loss/q", "train/loss/v", "train/loss/cql"}
    else:
        assert losses == {"train/loss/bc", "train/loss/q", "train/loss/v"}


@pytest.mark.parametrize("algo", ["ppo", "online_filtered_bc"])
def test_online_text_algorithms(algo):
    params = {"num_envs": 2, "vocab_episodes": 2}
    params |= {"n_steps": 8} if algo == "ppo" else {"rollout_episodes": 2, "updates_per_round": 2}
    sink = _run(algo, params, 16)
    steps = [s for s, _ in sink.values("eval/return")]
    assert steps[0] == 0 and steps[-1] == 16
    assert sink.values("train/episode_return")


def test_world_model_metrics_on_a_tiny_model(maze_dataset):
    sink = _run("text_world_model", {"em_turns": 6, "max_turns": 4, "max_outcome_tokens": 40,
                                     "holdout_fraction": 0.25}, 3, maze_dataset)  # fmt: skip
    last = {k: v for _, row in sink.rows for k, v in row.items()}
    assert 0.0 <= last["eval/em"] <= 1.0 and 0.0 <= last["eval/em_end"] <= 1.0
    assert last["train/outcome_mode"] == 0.0  # Maze FO: whole observations, as before
    (step, size), *_ = [(s, r) for s, r in sink.rows if "model/parameters" in r]
    assert step == 0
    d, layers = TINY["n_embd"], TINY["n_layer"]
    # GPT-2's blocks: attention 4 d^2 + 4 d, MLP 8 d^2 + 5 d, two layer norms 4 d; the final layer norm 2 d
    assert size["model/parameters_non_embedding"] == layers * (12 * d * d + 13 * d) + 2 * d
    assert size["model/parameters"] > size["model/parameters_non_embedding"]
    for k in ("eval/real", "eval/wm", "eval/w2r"):
        assert 0.0 <= last[k] <= 1.0
    if last["eval/real"] > 0:
        assert math.isclose(last["eval/cr"], last["eval/w2r"] / last["eval/real"])
    else:
        assert "eval/cr" not in last


def test_world_model_trains_on_the_first_train_episodes_and_holds_out_the_same_ones():
    from rlbench_cli.algos.text.world_model import TextWorldModel

    episodes = [[{"observation": str(i)}] for i in range(9)]
    assert TextWorldModel.first_episodes(episodes, 3, "d") == episodes[:3]
    assert TextWorldModel.first_episodes(episodes, 0, "d") == episodes
    with pytest.raises(ValueError, match="train_episodes 10: dataset 'd' has 9 episodes to train on"):
        TextWorldModel.first_episodes(episodes, 10, "d")
    TextWorldModel.check_params({"train_episodes": 800, "policy_weight": 0.1})
    from rlbench_cli.algos.text.warm_start import check_warm_start

    with pytest.raises(
        ValueError, match="unknown parameter.*policy_weight"
    ):  # its world model has no agent loss
        check_warm_start({"imagined_steps": 0, "policy_weight": 0.1})
    with pytest.raises(ValueError, match="train_episodes"):
        TextWorldModel.check_params({"train_episodes": "many"})


def test_world_model_learns_maze_po_histories_longer_than_its_positions():
    """A partially observed maze's next observation is its whole history (over 1,000 tokens after 100 turns):
    each turn's training sequence is cut to the model's n_positions, and a longest sequence that cannot fit
    is refused when the suite is checked."""
    from rlbench_cli.algos.text.common import settings_of, texts_of
    from rlbench_cli.algos.text.policy import build_model, build_tokenizer
    from rlbench_cli.algos.text.world_model import TextWorldModel
    from rlbench_cli.datagen.text import build_text_dataset

    torch.set_num_threads(1)
    data = build_text_dataset("rlbench/MazePO-v0", "mixed", 20, seed=0)
    params = {**TINY, "n_positions": 160, "max_context": 64, "max_outcome_tokens": 60}
    TextWorldModel.check_params(params)
    settings = settings_of("text_world_model", params, TextWorldModel.own)
    tok = build_tokenizer(settings, texts_of(data))
    samples = TextWorldModel.samples(tok, list(data), settings)
    assert (
        max(len(tok.encode(t["observation"])) for ep in data for t in ep) > 1000
    )  # the long walks' histories
    assert max(len(c) + len(a) + 1 for c, a, _ in samples) == 160  # + the <eoa> the batch adds
    model = build_model(settings, tok)
    longest = np.argsort([-len(a) for _, a, _ in samples])[:4]
    l_pi, l_wm = TextWorldModel.losses(model, tok, samples, longest, "cpu")
    assert torch.isfinite(l_pi) and torch.isfinite(l_wm)
    with pytest.raises(
        ValueError, match=r"max_outcome_tokens \(160\) \+ 2 = 242 is more than n_positions \(160\)"
    ):
        TextWorldModel.check_params({**params, "max_outcome_tokens": 160})


def test_po_world_model_learns_the_new_lines_and_reads_back_whole_observations():
    """Maze PO's next observation is its observation, the action written back and the new walls: the world
    model's target is the new text alone (``outcome: auto`` picks echo; suffix keeps the action's line), and
    a prediction reads back as the whole next observation; Maze FO's whole observations stay as they were."""
    from rlbench_cli.algos.text.common import settings_of, texts_of
    from rlbench_cli.algos.text.policy import build_model, build_tokenizer
    from rlbench_cli.algos.text.world_model import (
        TextWorldModel,
        fits,
        known_prefix,
        next_observation,
        outcome_mode,
        outcome_text,
        strict_outcome,
    )
    from rlbench_cli.datagen.text import build_text_dataset

    po = list(build_text_dataset("rlbench/MazePO-v0", "mixed", 4, seed=0))
    fo = list(build_text_dataset("rlbench/MazeFO-v0", "mixed", 4, seed=0))
    assert fits(po, "echo") and fits(po, "suffix") and not fits(fo, "suffix") and not fits(fo, "echo")
    assert not fits([[{"observation": "a", "action": "b"}]], "suffix")  # no next observation at all
    base = settings_of("text_world_model", {**TINY, "max_outcome_tokens": 40}, TextWorldModel.own)
    assert base["outcome"] == "auto"
    settings, fo_settings = dict(base), dict(base)
    assert outcome_mode(settings, po, "outcome") == "echo" and settings["outcome"] == "echo"
    assert outcome_mode(fo_settings, fo, "outcome") == "full" and fo_settings["outcome"] == "full"
    tok = build_tokenizer(settings, texts_of(po))
    for mode in ("echo", "suffix"):
        samples = TextWorldModel.samples(tok, po, {**settings, "outcome": mode})
        k = 0
        for ep in po:
            for i, t in enumerate(ep):
                obs, end = t["observation"], i + 1 == len(ep)
                nxt = "" if end else ep[i + 1]["observation"]
                known = known_prefix(obs, t["action"], mode)
                assert known == (f"{obs}\n{t['action']}\n" if mode == "echo" else obs)
                text = outcome_text(known, nxt)
                assert text == ("" if end else nxt[len(known) :])
                assert end or text.startswith("There") == (mode == "echo")  # the new walls line, or "\nmove"
                tail = samples[k][1][samples[k][2] + 1 :]  # after the action and its <eoa>
                got = strict_outcome(tok, tail)
                assert got == (text, t["reward"], bool(t["done"]) or end)
                assert next_observation(known, got[0]) == nxt
                k += 1
        assert k == len(samples) and max(len(a) for _, a, _ in samples) < 40  # not a 1,000-token history
    assert po[0][-1]["done"] and not po[0][-1].get(
        "truncated"
    )  # an episode end: no next observation, reward 0
    # the model's outcome is read back as the whole next observation (any parse: here a fixed one)
    model = build_model(settings, tok)
    obs = [po[0][1]["observation"], po[1][0]["observation"]]
    walls = "There are walls above you."

    def predict(conf, parse, n=2):
        return TextWorldModel.predict(
            model, tok, obs[:n], ["move up", "move left"][:n], conf, "cpu", parse=parse
        )

    got = predict(settings, lambda _t, _ids: (walls, -1.0, False))
    assert got == [
        (obs[0] + "\nmove up\n" + walls, -1.0, False),
        (obs[1] + "\nmove left\n" + walls, -1.0, False),
    ]
    got = predict({**settings, "outcome": "suffix"}, lambda _t, _ids: ("\nmove up\n" + walls, -1.0, False))
    assert [g[0] for g in got] == [o + "\nmove up\n" + walls for o in obs]
    assert predict(settings, lambda _t, _ids: ("", 0.0, True), 1) == [("", 0.0, True)]  # an end: no next obs
    assert predict(settings, lambda _t, _ids: None, 1) == [None]  # an unreadable outcome stays unreadable
    assert predict(fo_settings, lambda _t, _ids: ("x", 0.0, False), 1) == [("x", 0.0, False)]  # full: as read
    # Maze FO: the targets are the whole next observations, as before the outcome setting
    fo_tok = build_tokenizer(fo_settings, texts_of(fo))
    old = {k: v for k, v in fo_settings.items() if k != "outcome"}
    assert TextWorldModel.samples(fo_tok, fo, fo_settings) == TextWorldModel.samples(fo_tok, fo, old)


def test_world_model_outcome_settings_are_checked(wamerican):  # Wordle's data needs its word list
    from rlbench_cli.algos.text.imagined import check_imagination
    from rlbench_cli.algos.text.verifier import check_verifier
    from rlbench_cli.algos.text.warm_start import check_warm_start
    from rlbench_cli.algos.text.world_model import TextWorldModel, outcome_mode, outcome_text
    from rlbench_cli.datagen.text import build_text_dataset

    with pytest.raises(ValueError, match=r"^outcome must be one of auto, full, suffix, echo .*got 'prefix'"):
        TextWorldModel.check_params({"outcome": "prefix"})
    with pytest.raises(ValueError, match=r"^verifier.outcome must be one of"):
        check_verifier({"outcome": "whole"})
    with pytest.raises(ValueError, match=r"^imagination.outcome must be one of"):
        check_imagination({"outcome": "shape"})
    with pytest.raises(ValueError, match=r"^warm_start.outcome must be one of"):
        check_warm_start({"imagined_steps": 0, "outcome": "line"})
    fo = list(build_text_dataset("rlbench/MazeFO-v0", "mixed", 3, seed=0))
    with pytest.raises(ValueError, match=r"^warm_start.outcome suffix: the data has a next observation that does "
                                         r"not start with its turn's observation .*use outcome: full or auto"):  # fmt: skip
        outcome_mode({"outcome": "suffix"}, fo, "warm_start.outcome")
    wordle = list(build_text_dataset("rlbench/Wordle-v0", "mixed", 3, seed=0))  # writes "t h a n k" back
    with pytest.raises(ValueError, match=r"^outcome echo: .*observation and action on a line of its own"):
        outcome_mode({"outcome": "echo"}, wordle, "outcome")
    assert outcome_mode({"outcome": "auto"}, wordle, "outcome") == "suffix"
    po = build_text_dataset("rlbench/MazePO-v0", "mixed", 2, seed=0)
    assert outcome_mode({"outcome": "full"}, po, "o") == "full"
    with pytest.raises(ValueError, match="does not start with the known"):
        outcome_text("abc", "xbcd")


def test_ilql_stops_with_a_checkpoint_and_resumes(maze_dataset, tmp_path):
    import threading

    from rlbench_cli.sink import ShardSink

    torch.set_num_threads(1)
    spec = RunSpec(suite="t", algo="ilql", algo_name="ilql", params={**TINY, "logging_steps": 1},
                   env_id="rlbench/MazeFO-v0", env_kwargs={"max_steps": 4}, seed=0,
                   budget={"steps": 4, "eval_every": 4, "eval_episodes": 1, "checkpoint_every": 100},
                   dataset="MazeFO-v0-mixed", dataset_path=str(maze_dataset))  # fmt: skip
    stop = threading.Event()

    class StopAt2(ShardSink):
        def log(self, step, **values):
            super().log(step, **values)
            if step == 2 and "train/loss/q" in values:
                stop.set()  # as a SIGTERM would: the run saves a checkpoint and stops

    first = RunContext(spec=spec, sink=StopAt2(tmp_path / "attempt-1" / "metrics"), run_dir=tmp_path / "attempt-1",
                       stop_event=stop)  # fmt: skip
    get_algorithm("ilql")().train(first)
    first.sink.close()
    sink = ShardSink(tmp_path / "attempt-2" / "metrics")
    second = RunContext(spec=spec, sink=sink, run_dir=tmp_path / "attempt-2")
    get_algorithm("ilql")().train(second)
    sink.close()
    assert second.resumed_from_step == 2
    import pyarrow.parquet as pq

    rows = [r for p in sorted((tmp_path / "attempt-2" / "metrics").glob("*.parquet"))
            for r in pq.read_table(p).to_pylist()]  # fmt: skip
    q_steps = sorted(r["step"] for r in rows if r["name"] == "train/loss/q")
    assert q_steps == [1, 2, 3, 4]  # the first attempt's rows carried over, no step twice
    assert sorted(r["step"] for r in rows if r["name"] == "eval/return") == [0, 4]
