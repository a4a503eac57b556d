"""ImagineBench's protocol, the pure parts: the encoder, the language env, data_mix, suites that name them,
ImagineBench's files (bad ones rejected in one line), and rlbench's generator on a few episodes."""

import pickle

import h5py
import numpy as np
import pytest

from rlbench_cli.datasets.data import OfflineData
from rlbench_cli.datasets.imaginebench import read_imaginebench
from rlbench_cli.datasets.mix import canonical_mix, mix_data
from rlbench_cli.envs.imagine.encoder import get_encoder
from rlbench_cli.errors import ImportInvalid, SuiteInvalid
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite


def test_encoder_is_deterministic_and_maps_a_rewording_close_and_another_task_far():
    enc = get_encoder()
    v = enc.encode(["go to the red ball", "navigate to the red ball", "go to the blue ball",
                    "put the red ball next to the blue box", "put the blue box next to the red ball"])  # fmt: skip
    assert v.shape == (5, enc.dim) and v.dtype == np.float32
    assert np.array_equal(v, get_encoder.__wrapped__().encode(["go to the red ball", "navigate to the red ball",
        "go to the blue ball", "put the red ball next to the blue box", "put the blue box next to the red ball"]))  # fmt: skip
    same, other, swapped = (np.linalg.norm(v[0] - v[i]) for i in (1, 2, 4))
    assert same < 0.1 * other
    assert np.linalg.norm(v[3] - v[4]) > 1.0  # word order matters
    assert swapped > 0


def test_babyai_lang_env_levels_embed_the_instruction_and_report_success():
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from rlbench_cli.envs import make_env

    for level in ("real", "rephrase", "easy", "hard"):
        env = make_env("rlbench/BabyAI-Lang-v0", {"level": level})
        obs, info = env.reset(seed=3)
        assert obs.shape == env.observation_space.shape
        emb = get_encoder().encode([info["instruction"]])[0]
        assert np.allclose(obs[env.unwrapped.state_dim :], emb)
        bot, done = BabyAIBot(env.unwrapped.inner), False
        while not done:
            obs, r, term, trunc, info = env.step(bot.replan())
            done = term or trunc
        assert info["success"] is True and r > 0, level
    with pytest.raises(ValueError, match="unknown level 'medium'"):
        make_env("rlbench/BabyAI-Lang-v0", {"level": "medium"})


def _data(n_eps, length, value, meta=None):
    n = n_eps * length
    ends = (np.arange(n) % length) == length - 1
    return OfflineData(np.full((n, 3), value, np.float32), np.zeros(n, np.int64), np.ones(n, np.float32), ends,
                       np.zeros(n, bool), meta=meta or {})  # fmt: skip


def test_data_mix_shares_whole_episodes_and_keeps_the_generator_label():
    real = _data(20, 5, 0.0, {"env_id": "x"})
    imagined = _data(40, 5, 1.0, {"generator": "rlbench-generator"})
    assert canonical_mix({"real": 0.7, "imagined": 0.3}) == "real=0.7,imagined=0.3"
    assert canonical_mix("real=7,imagined=3") == "real=0.7,imagined=0.3"
    mixed = mix_data(real, imagined, "real=0.7,imagined=0.3")
    share = (mixed.observations[:, 0] == 1.0).mean()
    assert abs(share - 0.3) < 0.06 and len(mixed) % 5 == 0
    assert mixed.meta["data_mix"] == "real=0.7,imagined=0.3"
    assert mixed.meta["imagined_generator"] == "rlbench-generator"
    assert len(mix_data(real, imagined, "real+imagined")) == 300
    assert (mix_data(None, imagined, "imagined").observations == 1.0).all()
    for bad in ("fake", {"real": -1}, {"synthetic": 1}):
        with pytest.raises(ValueError):
            canonical_mix(bad)


def _suite(**ds):
    return {
        "name": "im",
        "seeds": 1,
        "datasets": [{"name": "BabyAI-Lang-v0-imagine", **ds}],
        "algorithms": ["bc"],
    }


def test_data_mix_is_a_suite_axis_in_the_task_label_and_the_run_identity():
    suite = parse_suite(_suite(data_mix=["real", "imagined", {"real": 0.7, "imagined": 0.3}]))
    runs = expand(suite)
    assert [r.env for r in runs] == ["BabyAI-Lang-v0-imagine[mix=real]", "BabyAI-Lang-v0-imagine[mix=imagined]",
                                     "BabyAI-Lang-v0-imagine[mix=real=0.7,imagined=0.3]"]  # fmt: skip
    assert len({r.run_id for r in runs}) == 3 and runs[0].env_id == "rlbench/BabyAI-Lang-v0"
    assert type(runs[0]).from_dict(runs[0].to_dict()).run_id == runs[0].run_id
    plain = expand(
        parse_suite({"name": "p", "datasets": ["CartPole-v1-medium"], "algorithms": ["bc"], "seeds": 1})
    )
    assert "data_mix" not in plain[0].identity()  # runs of suites without it keep their ids


@pytest.mark.parametrize(
    ("ds", "message"),
    [
        ({"data_mix": "imaginary"}, "datasets[0].data_mix': unknown data_mix 'imaginary'"),
        ({"data_mix": ["real", "real"]}, "lists real twice"),
        ({"kwargs": {"level": "expert"}}, "datasets[0].kwargs': unknown instruction level 'expert'"),
        ({"kwargs": {"encoder": "/no/such/model"}}, "datasets[0].kwargs': encoder '/no/such/model'"),
        ({"imagine": {"real_episodes": 0}}, "imagine.real_episodes must be a positive whole number"),
    ],
)
def test_bad_imagine_suites_are_one_line_errors_naming_the_field(ds, message):
    with pytest.raises(SuiteInvalid) as err:
        parse_suite(_suite(**ds), "s.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_pickle_named_in_a_suite_is_refused_with_the_way_to_convert_it():
    with pytest.raises(SuiteInvalid, match="rlbench datasets import x.pkl .*--trust"):
        parse_suite({"name": "p", "datasets": [{"name": "ib", "path": "x.pkl", "env": "rlbench/BabyAI-Lang-v0"}],
                     "algorithms": ["bc"]}, "s.yaml")  # fmt: skip


def _ib_dict(n=6, nan=False):
    obs = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    if nan:
        obs[2, 1] = np.nan
    return {"observations": obs, "actions": np.arange(n) % 3, "rewards": np.ones(n, np.float32),
            "masks": np.array([1, 1, 0] * (n // 3), np.float32), "instructions": np.array(["go to the red ball"] * n)}  # fmt: skip


def _write_h5(path, d):
    with h5py.File(path, "w") as f:
        for k, v in d.items():
            f.create_dataset(k, data=v.astype("S") if v.dtype.kind == "U" else v)


def test_imaginebench_files_load_with_embedded_instructions(tmp_path):
    _write_h5(tmp_path / "a.hdf5", _ib_dict())
    data = read_imaginebench(tmp_path / "a.hdf5")
    enc = get_encoder()
    assert data.observations.shape == (6, 4 + enc.dim) and data.discrete
    assert np.allclose(data.observations[0, 4:], enc.encode(["go to the red ball"])[0])
    assert list(data.episode_ends()) == [2, 5] and data.terminals[2]
    with open(tmp_path / "a.pkl", "wb") as f:
        pickle.dump(_ib_dict(), f)
    assert np.array_equal(read_imaginebench(tmp_path / "a.pkl", trust=True).observations, data.observations)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("masks"), "key 'masks' is missing"),
        (lambda d: d.update(rewards=np.ones(5)), "key 'rewards' has 5 rows but 'observations' has 6"),
        (
            lambda d: d.update(_ib_dict(nan=True)),
            "key 'observations' has NaN or infinite values (first at row 2)",
        ),
    ],
)
def test_bad_imaginebench_files_name_the_file_and_key(tmp_path, change, message):
    d = _ib_dict()
    change(d)
    _write_h5(tmp_path / "bad.hdf5", d)
    with pytest.raises(ImportInvalid) as err:
        read_imaginebench(tmp_path / "bad.hdf5")
    assert str(err.value).startswith(str(tmp_path / "bad.hdf5")) and message in str(err.value)


def test_a_pickle_is_not_even_opened_without_trust(tmp_path):
    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / "ran"), "w"))

    with open(tmp_path / "evil.pkl", "wb") as f:
        pickle.dump({"x": Boom()}, f)
    with pytest.raises(ImportInvalid, match="loading a pickle can run any code hidden in it; pass --trust"):
        read_imaginebench(tmp_path / "evil.pkl")
    assert not (tmp_path / "ran").exists()


def test_generator_learns_from_real_episodes_and_imagines_rollouts_for_new_instructions():
    import torch

    from rlbench_cli.datagen.imagine import Episode, RolloutGenerator

    rng = np.random.default_rng(0)
    eps = [Episode(np.cumsum(rng.normal(size=(5, 3)), 0).astype(np.float32), rng.integers(4, size=4),
                   np.array([0, 0, 0, 1], np.float32), True, rng.normal(size=2).astype(np.float32)) for _ in range(12)]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = RolloutGenerator(3, 2, n_actions=4, n_layer=2, n_embd=16, context=4, seed=0)
        losses = gen.fit(eps, steps=40, batch_size=8)
        starts, embs = np.zeros((3, 3), np.float32), rng.normal(size=(3, 2))
        out, again = gen.generate(starts, embs, horizon=6), gen.generate(starts, embs, horizon=6)
    finally:
        torch.set_num_threads(threads)
    assert losses[-1] < losses[0]
    for e, e2 in zip(out, again):
        assert 1 <= len(e.actions) <= 6 and e.states.shape == (len(e.actions) + 1, 3)
        assert set(np.unique(e.actions)) <= {0, 1, 2, 3}
        assert np.array_equal(e.actions, e2.actions) and np.allclose(e.states, e2.states)  # seeded
    assert gen.describe()["generator"] == "rlbench-generator"


def test_halfcheetah_lang_success_test_per_part_and_sequence():
    from rlbench_cli.envs import make_env
    from rlbench_cli.envs.imagine.cheetah import part_success

    assert part_success("forward", 2.0, np.full(10, 1.8), np.zeros(10))
    assert not part_success("forward", 2.0, np.full(10, -1.8), np.zeros(10))
    assert part_success("backward", 1.0, np.full(10, -1.2), np.zeros(10))
    assert part_success("jump", 0.0, np.zeros(10), np.r_[np.zeros(9), 0.4])
    assert not part_success("jump", 0.0, np.zeros(10), np.full(10, 0.1))
    env = make_env("rlbench/HalfCheetah-Lang-v0", {"level": "hard", "max_steps": 10})
    obs, info = env.reset(seed=0)
    assert ", then " in info["instruction"] and obs.shape == (17 + get_encoder().dim,)
    done, steps = False, 0
    while not done:
        obs, r, term, trunc, info = env.step(np.zeros(6, np.float32))
        done, steps = term or trunc, steps + 1
    assert steps == 10 and info["success"] is False  # standing still carries out no sequence of two moves


def test_imagined_rollouts_are_built_for_the_language_envs_only_and_the_suite_says_so():
    with pytest.raises(SuiteInvalid, match=r"datasets\[0\]': dataset 'Hopper-v5-imagine': rlbench builds"):
        parse_suite({"name": "c", "datasets": ["Hopper-v5-imagine"], "algorithms": ["bc"]}, "s.yaml")
    suite = parse_suite(
        {"name": "c", "datasets": ["HalfCheetah-Lang-v0-imagine"], "algorithms": ["bc"]}, "s.yaml"
    )
    assert suite.datasets[0].env == "rlbench/HalfCheetah-Lang-v0"


def test_success_by_level_figure_has_a_bar_per_algorithm_task_and_level():
    import pandas as pd

    from rlbench_cli.plots import plot_success_by_level

    rows = [{"algo": a, "env": f"d[mix={m}]", "seed": s, "level": lv, "score": 0.1 * s}
            for a in ("bc", "cql") for m in ("real", "imagined") for s in range(3) for lv in ("real", "hard")]  # fmt: skip
    fig = plot_success_by_level(pd.DataFrame(rows), ["real", "hard"])
    ax = fig.axes[0]
    assert len(ax.patches) == 8 and [t.get_text() for t in ax.get_xticklabels()] == ["real", "hard"]
    assert {round(p.get_height(), 6) for p in ax.patches} == {0.1}  # the mean over seeds 0, 0.1, 0.2


def test_a_local_transformers_encoder_folder_embeds_instructions_and_is_named(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    from rlbench_cli.envs import make_env

    words = ["[PAD]", "[UNK]", "go", "to", "the", "red", "ball", "pick", "up"]
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(
        tmp_path
    )
    config = BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)  # fmt: skip
    BertModel(config).save_pretrained(tmp_path)
    env = make_env("rlbench/BabyAI-Lang-v0", {"encoder": str(tmp_path)})
    obs, info = env.reset(seed=0)
    assert obs.shape == (env.unwrapped.state_dim + 8,)
    assert env.unwrapped.encoder.name == f"transformers:{tmp_path.resolve()}"
    assert np.allclose(
        obs[env.unwrapped.state_dim :], get_encoder(str(tmp_path)).encode([info["instruction"]])[0]
    )


def test_halfcheetah_real_rollouts_follow_their_instruction_better_than_standing_still():
    from rlbench_cli.datagen.imagine import _cheetah_episodes, _cpg_return
    from rlbench_cli.envs import make_env

    eps, _ = _cheetah_episodes("rlbench/HalfCheetah-Lang-v0", {"max_steps": 20}, 5, 0, search=(24, 8))
    assert len(eps) == 5 and {e.instruction for e in eps} == {"run forward at speed 1", "run forward at speed 2",
        "move backward at speed 1", "move backward at speed 2", "jump"}  # fmt: skip
    for e in eps:
        assert e.states.shape == (21, 17) and e.actions.shape == (20, 6) and np.abs(e.actions).max() <= 1
        assert np.allclose(e.embedding, get_encoder().encode([e.instruction])[0])
    env = make_env("rlbench/HalfCheetah-Lang-v0", {"max_steps": 20})
    tasks = [(("forward", 1.0),), (("forward", 2.0),), (("backward", 1.0),), (("backward", 2.0),)]
    still = np.mean([_cpg_return(env, t, np.zeros(19), 0) for t in tasks])  # standing still on them
    moving = np.mean([e.rewards.sum() for e in eps if e.instruction != "jump"])
    assert moving > still


def test_oracle_is_a_mix_source_and_earlier_mixes_keep_their_text():
    assert canonical_mix("oracle+real") == canonical_mix("real+oracle") == "real+oracle"
    assert canonical_mix({"real": 0.7, "imagined": 0.3}) == "real=0.7,imagined=0.3"  # run ids of earlier runs
    assert canonical_mix({"real": 1, "oracle": 1}) == "real=0.5,imagined=0,oracle=0.5"
    real = _data(20, 5, 0.0, {"env_id": "x"})
    oracle = _data(10, 5, 2.0, {"source": "oracle: bot"})
    both = mix_data(real, None, "real+oracle", oracle=oracle)
    assert len(both) == 150 and (both.observations[:, 0] == 2.0).sum() == 50
    assert both.meta["env_id"] == "x" and both.meta["data_mix"] == "real+oracle"
    for bad in ("real+real", "real+synthetic"):
        with pytest.raises(ValueError, match="unknown data_mix"):
            canonical_mix(bad)


def test_oracle_rollouts_are_the_experts_real_rollouts_of_the_imagined_instructions(tmp_path):
    from rlbench_cli.datagen.imagine import _novel_seeds, build_oracle, oracle_path
    from rlbench_cli.datasets import load_dataset
    from rlbench_cli.datasets.hdf5 import read_hdf5
    from rlbench_cli.envs import make_env

    env_id, settings = "rlbench/BabyAI-Lang-v0", {"imagined_episodes": 2}
    path = build_oracle("BabyAI-Lang-v0-imagine", env_id, tmp_path, {}, settings, seed=0)
    assert path == oracle_path(tmp_path / "BabyAI-Lang-v0-imagine.hdf5") and path.name.endswith(
        ".oracle.hdf5"
    )
    data = read_hdf5(path)
    assert data.meta["level"] == "oracle" and data.meta["instruction_levels"] == ["rephrase", "easy", "hard"]
    ends = data.episode_ends()
    assert len(ends) == 6  # 2 per new level, from the imagined rollouts' starts
    start = 0
    for (level, seeds), first in zip(_novel_seeds(0, 2).items(), (0, 2, 4)):
        env = make_env(env_id, {"level": level})
        for k, s in enumerate(seeds):  # replayed in the real env: the same states, and the task is done
            obs, info = env.reset(seed=s)
            end = ends[first + k]
            np.testing.assert_array_equal(data.observations[start], obs)
            for t in range(start, end + 1):
                obs, r, term, trunc, info = env.step(int(data.actions[t]))
                np.testing.assert_array_equal(data.next_observations[t], obs)
            assert term and info["success"] and r > 0, (level, s)
            start = end + 1
    from rlbench_cli.datasets.hdf5 import write_hdf5

    write_hdf5(tmp_path / "mine.hdf5", _data(4, 5, 0.0, {"env_id": "x"}))  # a file without oracle rollouts
    with pytest.raises(
        FileNotFoundError,
        match=r"needs real rollouts of the new instructions \(oracle\) in .*mine.oracle.hdf5",
    ):
        load_dataset("mine", str(tmp_path / "mine.hdf5"), mix="real+oracle")


def test_halfcheetah_oracle_plays_each_parts_gait_in_its_part_of_a_sequence():
    from rlbench_cli.datagen.imagine import _cheetah_oracle

    seeds = {"rephrase": [1], "easy": [2, 3], "hard": [4, 5]}
    eps = _cheetah_oracle("rlbench/HalfCheetah-Lang-v0", {"max_steps": 20}, seeds, 0, search=(8, 4))
    assert len(eps) == 5 and all(e.actions.shape == (20, 6) for e in eps)
    hard = [e for e in eps if ", then " in e.instruction]
    assert len(hard) == 2  # a sequence: the first part's gait, then the second's
    for e in hard:
        assert not np.allclose(e.actions[:10].mean(0), e.actions[10:].mean(0), atol=0.05)
