"""The oracle tasks (Twenty Questions, Guess My City, Car Dealer): the scripted oracle, rewards, the scripted
policies, and a local transformers model as the oracle (a tiny one built from a config: nothing downloaded)."""

from __future__ import annotations

import statistics

import pytest

from rlbench_cli.datagen.text import build_text_dataset
from rlbench_cli.datasets.text import episode_returns
from rlbench_cli.envs import make_env
from rlbench_cli.errors import UsageError


def test_twenty_questions_answers_and_rewards():
    env = make_env("rlbench/TwentyQuestions-v0")
    obs, info = env.reset(seed=0, options={"secret": {"name": "eagle"}})
    assert obs.startswith("Twenty Questions:") and "Can it fly?" in env.unwrapped.valid_actions()
    obs, r, term, trunc, info = env.step("Can it fly?")
    assert (info["reply"], r, term) == ("Yes.", -1.0, False)
    obs, r, term, trunc, info = env.step("Is it a mammal?")
    assert (info["reply"], r) == ("No.", -1.0) and obs.endswith("Is it a mammal? No.")
    obs, r, term, trunc, info = env.step("Is it an eagle?")
    assert (r, term, info["success"]) == (0.0, True, True)


def test_guess_my_city_twenty_question_limit():
    env = make_env("rlbench/GuessMyCity-v0", {"max_turns": 3})
    env.reset(seed=0, options={"secret": {"name": "paris"}})
    assert env.step("Is the city in Europe?")[4]["reply"] == "Yes."
    assert env.step("Is the city on the coast?")[4]["reply"] == "No."
    _, r, term, trunc, _ = env.step("Is the city Berlin?")
    assert (r, term, trunc) == (-1.0, False, True)


def test_car_dealer_buyer_takes_a_price_within_budget():
    env = make_env("rlbench/CarDealer-v0")
    env.reset(seed=0, options={"secret": {"budget": 30000}})
    _, r, term, _, info = env.step("I can sell it to you for $35,000.")
    assert (r, term, info["reply"]) == (0.0, False, "That's too expensive for me.")
    _, r, term, _, info = env.step("How about $29,000?")
    assert (r, term) == (29.0, True)


@pytest.mark.parametrize(
    "env_id", ["rlbench/TwentyQuestions-v0", "rlbench/GuessMyCity-v0", "rlbench/CarDealer-v0"]
)
def test_scripted_optimal_beats_random(env_id):
    mean = {q: statistics.mean(episode_returns(build_text_dataset(env_id, q, 40, seed=0)))
            for q in ("optimal", "random")}  # fmt: skip
    assert mean["optimal"] > mean["random"]


def test_checkpoint_path_that_does_not_exist_is_one_line_naming_the_setting(tmp_path):
    with pytest.raises(UsageError, match=r"^oracle: no transformers model at .*missing-model"):
        make_env("rlbench/TwentyQuestions-v0", {"oracle": str(tmp_path / "missing-model")})


def test_a_local_transformers_model_answers_as_the_oracle(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = "[UNK] [PAD] yes no is it a an the city can fly ? . twenty questions answer eagle".split()
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[PAD]"
    )
    fast.save_pretrained(tmp_path)
    cfg = GPT2Config(vocab_size=len(words), n_positions=128, n_embd=8, n_layer=1, n_head=2)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    env = make_env("rlbench/TwentyQuestions-v0", {"oracle": str(tmp_path)})
    env.reset(seed=0, options={"secret": {"name": "eagle"}})
    obs, r, term, _, info = env.step("Can it fly?")
    assert isinstance(info["reply"], str) and info["reply"] and (r, term) == (-1.0, False)
    assert obs.endswith(info["reply"])
