"""Wordle after LMRL-Gym: feedback, rewards, the 6-try limit, word lists and their errors."""

from __future__ import annotations

import statistics

import pytest

from rlbench_cli.datagen.text import build_text_dataset
from rlbench_cli.datasets.text import episode_returns
from rlbench_cli.envs import make_env
from rlbench_cli.envs.text.wordle import feedback, load_word_list
from rlbench_cli.errors import UsageError


@pytest.fixture
def words(tmp_path):
    p = tmp_path / "words.txt"
    p.write_text("apple\ncrane\nslate\nplate\nbrick\n\nmound\n")
    return str(p)


def test_feedback_marks_in_place_elsewhere_and_absent():
    assert feedback("crane", "apple") == "bbybg"
    assert feedback("plate", "apple") == "yyybg"
    assert feedback("apple", "apple") == "ggggg"


def test_observation_format_rewards_and_success(words):
    env = make_env("rlbench/Wordle-v0", {"word_list": words})
    obs, info = env.reset(seed=0, options={"word": "plate"})
    assert obs == "Wordle:" and env.unwrapped.valid_actions() == sorted(info["words"])
    obs, r, term, trunc, info = env.step("slate")
    assert obs == "Wordle:\ns l a t e\nb g g g g" and (r, term, trunc) == (-1.0, False, False)
    obs, r, term, trunc, info = env.step("zzzzz")  # not a word of the list: a bad word, no feedback
    assert obs.endswith("z z z z z\n") and r == -1.0 and info["bad_word"] and not term
    obs, r, term, trunc, info = env.step("plate\n")
    assert (r, term, info["success"]) == (0.0, True, True)


def test_six_tries_end_the_episode(words):
    env = make_env("rlbench/Wordle-v0", {"word_list": words})
    env.reset(seed=0, options={"word": "mound"})
    results = [env.step("crane") for _ in range(6)]
    assert [r[2] for r in results] == [False] * 5 + [True]
    assert sum(r[1] for r in results) == -6.0


@pytest.mark.usefixtures("wamerican")
def test_default_word_list_is_debians_five_letter_words():
    words = load_word_list()
    assert len(words) > 1000 and all(len(w) == 5 and w.isalpha() and w.islower() for w in words)


def test_word_list_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("apple\ncranes\n")
    with pytest.raises(UsageError, match=r"word_list .*bad\.txt:2: 'cranes' is not a five-letter word"):
        load_word_list(str(bad))
    with pytest.raises(UsageError, match=r"word_list .*nope\.txt: cannot read it"):
        load_word_list(str(tmp_path / "nope.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(UsageError, match="holds no words"):
        load_word_list(str(empty))


@pytest.mark.usefixtures("wamerican")
def test_scripted_policies_are_ordered_and_optimal_solves_small_lists(words):
    data = build_text_dataset("rlbench/Wordle-v0", "optimal", 20, seed=0, env_kwargs={"word_list": words})
    assert all(ep[-1]["reward"] == 0.0 for ep in data)  # six words: always found within 6 tries
    rand = build_text_dataset("rlbench/Wordle-v0", "random", 20, seed=0)
    opt = build_text_dataset("rlbench/Wordle-v0", "optimal", 20, seed=0)
    assert statistics.mean(episode_returns(opt)) > statistics.mean(episode_returns(rand))


def test_a_built_dataset_is_checked_against_the_suites_env_kwargs(words, tmp_path):
    from rlbench_cli.datagen import text
    from rlbench_cli.suite.models import DatasetSpec

    path = text.ensure_text_dataset("rlbench/Wordle-v0", "mixed", n_episodes=2, root=tmp_path,
                                    env_kwargs={"word_list": words})  # fmt: skip
    assert text.check(DatasetSpec(name="Wordle-v0-mixed", kwargs={"word_list": words}), path) is None
    field, problem = text.check(DatasetSpec(name="Wordle-v0-mixed"), path)
    assert field == "kwargs" and "asks for {}" in problem and str(path) in problem
    plain = text.ensure_text_dataset("rlbench/MazeFO-v0", "mixed", n_episodes=2, root=tmp_path)
    assert "env_kwargs" not in plain.read_text().splitlines()[0]  # files without kwargs are as before
    assert text.check(DatasetSpec(name="MazeFO-v0-mixed"), plain) is None
