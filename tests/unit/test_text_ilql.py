"""Prefix-shared candidate scoring, and ILQL's Q-learning on a toy 2-turn text task that behaviour cloning on
the same data cannot solve.

From ``start`` the data mostly says ``go left`` (a dead end: no reward whatever follows) and rarely ``go right``;
after ``go right`` it mostly says ``wait`` (reward 0) and rarely ``open`` (reward 1, the only reward). BC copies
the frequent actions (return 0); ILQL's Q and V heads (expectile V, TD targets through the turn boundary,
Polyak target Q) make the policy BC logits + beta * Q take ``go right`` then ``open`` (return 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlbench_cli.algos.text.common import settings_of, turn_samples
from rlbench_cli.algos.text.offline import ILQL, TextBC
from rlbench_cli.algos.text.policy import TextPolicy, build_model, build_tokenizer, context_ids

FIRST, SECOND = ["go left", "go right"], ["wait", "open"]


def _episodes() -> list[list[dict]]:
    def ep(a1: str, obs2: str, a2: str, r: float) -> list[dict]:
        return [{"observation": "start", "action": a1, "reward": 0.0, "done": False},
                {"observation": obs2, "action": a2, "reward": r, "done": True}]  # fmt: skip

    return (
        [ep("go left", "a dead end", a, 0.0) for a in ("wait", "open") for _ in range(6)]
        + [ep("go right", "a door", "wait", 0.0)] * 3
        + [ep("go right", "a door", "open", 1.0)]
    )


def _train(algo, steps: int, value_model: str = "separate"):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    params = {"n_embd": 32, "n_layer": 1, "n_head": 2, "batch_size": 32, "learning_rate": 3e-3,
              "max_context": 32, "history": 0}  # fmt: skip
    if algo.values:
        params |= {"polyak": 0.1, "tau": 0.9, "beta": 4.0, "gamma": 0.99, "value_model": value_model}
    settings = settings_of(algo.name, params, algo.own)
    episodes = _episodes()
    tok = build_tokenizer(settings, [t[k] for e in episodes for t in e for k in ("observation", "action")])
    turns = turn_samples(episodes, tok, settings)
    model = build_model(settings, tok, values=algo.values)
    optim = torch.optim.AdamW(model.parameters(), lr=float(settings["learning_rate"]))
    rng = np.random.default_rng(0)
    for _ in range(steps):
        batch = rng.integers(len(turns), size=int(settings["batch_size"]))
        loss = sum(algo.losses(model, tok, turns, batch, settings, "cpu").values())
        optim.zero_grad()
        loss.backward()
        optim.step()
        if algo.values:
            model.update_target(float(settings["polyak"]))
    policy = TextPolicy(
        model, tok, settings, "cpu", beta=float(settings.get("beta", 0.0)) if algo.values else 0.0
    )
    ctx = [context_ids(tok, [], obs, 32, 0) for obs in ("start", "a door")]
    actions, _ = policy.choose(ctx, [FIRST, SECOND])
    return actions


@pytest.fixture(scope="module")
def bc_actions():
    return _train(TextBC(), 150)


def test_bc_copies_the_frequent_actions(bc_actions):
    assert bc_actions == ["go left", "wait"]


@pytest.mark.parametrize("value_model", ["separate", "shared"])
def test_ilql_takes_the_rewarded_path_bc_misses(value_model):
    assert _train(ILQL(), 300, value_model) == ["go right", "open"]


def _tiny(value_model: str):
    settings = settings_of("ilql", {"n_embd": 32, "n_layer": 2, "n_head": 2, "value_model": value_model},
                           ILQL.own)  # fmt: skip
    tok = build_tokenizer(settings, ["The goal is at position 8, 6.", "move up", "move down", "go"])
    torch.manual_seed(0)
    return settings, tok, build_model(settings, tok, values=True)


def test_a_separate_value_model_shares_no_weights_or_gradients_with_the_lm():
    """LMRL-Gym keeps ILQL's value model apart from the behaviour policy: the LM's loss moves only the LM,
    the value losses only the value transformer and its heads."""
    from rlbench_cli.algos.text.policy import action_batch

    settings, tok, model = _tiny("separate")
    assert model.vlm is not None and _tiny("shared")[2].vlm is None
    lm_params = {id(p) for p in model.lm.parameters()}
    assert lm_params.isdisjoint(id(p) for p in model.vlm.parameters())
    b = action_batch(tok, [context_ids(tok, [], "a door", 32, 0)], [tok.encode("move up")], "cpu")
    logits, hidden = model(b.ids, b.mask)
    (logits.sum() + model.v_head(hidden).sum()).backward()
    lm_moved = {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert any(n.startswith("lm.") for n in lm_moved) and any(n.startswith("vlm.") for n in lm_moved)
    model.zero_grad()
    model(b.ids, b.mask)[0].sum().backward()  # the LM's output alone
    assert all(p.grad is None or not p.grad.abs().sum() for p in model.vlm.parameters())
    with pytest.raises(ValueError, match="value_model"):
        build_model({**settings, "value_model": "both"}, tok, values=True)


# transformers 5.2x deprecates `past_key_values` (gone in 5.40): the cache is passed as `cache`
@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("value_model", ["separate", "shared"])
def test_candidates_scored_with_a_shared_context_match_scoring_each_pair(value_model):
    from rlbench_cli.algos.text.policy import action_batch, action_logprobs, score_actions

    settings, tok, model = _tiny(value_model)
    model.eval()
    for p in model.target_q.parameters():  # Q values that matter next to the logits
        p.data.normal_()
    for p in model.target_body.parameters():  # Q reads the target transformer, a copy of the LM's at first
        p.data.add_(torch.randn_like(p) * 0.5)
    contexts = [context_ids(tok, [], obs, 64, 0) for obs in ("The goal is at position 8, 6.", "a door", "")]
    cands = [["move up", "move down"], ["go", "move up zz", "wait"], ["go"]]  # unequal lengths, unknown words
    got = score_actions(model, tok, contexts, [[tok.encode(a) for a in c] for c in cands], "cpu", beta=2.0)
    for ctx, acts, scores in zip(contexts, cands, got):
        b = action_batch(tok, [ctx] * len(acts), [tok.encode(a) for a in acts], "cpu")
        np.testing.assert_allclose(
            scores, action_logprobs(model, b, 2.0).detach().numpy(), rtol=1e-5, atol=1e-4
        )


# each new token is one step on the contexts' key/value cache: the same tokens as reading every sequence whole
@pytest.mark.filterwarnings("error::FutureWarning")
@pytest.mark.parametrize("value_model", ["separate", "shared"])
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_decoding_on_the_cache_gives_the_tokens_of_decoding_whole_sequences(value_model, beta):
    from rlbench_cli.algos.text.policy import decode_tokens, decode_tokens_uncached

    settings, tok, model = _tiny(value_model)
    model.eval()
    for p in model.target_q.parameters():
        p.data.normal_()
    for p in model.target_body.parameters():
        p.data.add_(torch.randn_like(p) * 0.5)
    obs = ["The goal is at position 8, 6.", "a door", "", "move up move down go " * 3]
    contexts = [context_ids(tok, [], o, 64, 0) for o in obs]  # unequal lengths
    banned = [tok.pad_id, tok.bos_id, tok.act_id, tok.unk_id]
    for limit in (0, 1, 7, 25):  # a limit of 0 still reads one token (its log-probability), keeps none
        want = decode_tokens_uncached(model, tok, contexts, limit, banned, "cpu", beta=beta)
        got = decode_tokens(model, tok, contexts, limit, banned, "cpu", beta=beta)
        assert [g for g, _ in got] == [g for g, _ in want]
        assert all(len(g) <= limit for g, _ in got)
        np.testing.assert_allclose([lp for _, lp in got], [lp for _, lp in want], rtol=1e-5, atol=1e-4)
    # sampled: the same draws from torch's generator, as the live rows are sampled alone in both
    eoa = tok.eoa_id
    torch.manual_seed(3)
    want = decode_tokens_uncached(model, tok, contexts, 12, banned, "cpu", sample=True, beta=beta)
    torch.manual_seed(3)
    got = decode_tokens(model, tok, contexts, 12, banned, "cpu", sample=True, beta=beta)
    assert [g for g, _ in got] == [g for g, _ in want] and eoa not in sum((g for g, _ in got), [])
    assert decode_tokens(model, tok, [], 5, banned, "cpu") == []


def test_lmrl_table_knows_a_text_env_run_with_kwargs():
    from rlbench_cli import references

    table = references.BUILTIN["lmrl"]
    assert table.lookup("rlbench/Endgames-v0[max_moves=50,movetime=0.01]") == table.lookup(
        "rlbench/Endgames-v0"
    )
    assert table.lookup("rlbench/Endgames-v0") is not None
