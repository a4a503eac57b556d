"""The pure readers of the importers (no database): run-name patterns, TensorBoard event files read whole,
SB3 monitor files and evaluations.npz, the zoo's YAML, tidy / wide / W&B CSV and Parquet files. Real files:
the samples in tests/fixtures (written by SummaryWriter and Stable-Baselines3, see make_import_fixtures.py),
and files written here by the same tools where they are installed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rlbench_cli.errors import ImportInvalid, UsageError
from rlbench_cli.importers import check_options, read_source, sb3_logs, table_file, tensorboard_logs
from rlbench_cli.importers.names import CLEANRL_PATTERN, parse_pattern
from rlbench_cli.tbevents import EventFileError, masked_crc32c, read_complete

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLEANRL = FIXTURES / "cleanrl_runs"
ZOO = FIXTURES / "sb3_zoo"


# -- run-name patterns -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pattern, name, expected",
    [
        (CLEANRL_PATTERN, "CartPole-v1__ppo__1__1700000001", {"algo": "ppo", "env": "CartPole-v1", "seed": 1}),
        (CLEANRL_PATTERN, "BreakoutNoFrameskip-v4__ppo_atari__3__17", {"algo": "ppo_atari", "env": "BreakoutNoFrameskip-v4", "seed": 3}),
        ("{env}/{algo}_{seed}", "CartPole-v1/PPO_2", {"algo": "PPO", "env": "CartPole-v1", "seed": 2}),
        ("{algo}_{seed}{env=CartPole-v1}", "PPO_1", {"algo": "PPO", "env": "CartPole-v1", "seed": 1}),
        ("{algo=ppo}{env=CartPole-v1}{seed=4}", "anything at all", {"algo": "ppo", "env": "CartPole-v1", "seed": 4}),
        ("{exp}-{algo}-{env}-s{seed}", "x-sac-Hopper-v5-s10", {"algo": "sac", "env": "Hopper-v5", "seed": 10}),
    ],
    ids=["cleanrl", "cleanrl-underscores", "zoo-tensorboard", "fixed-env", "all-fixed", "ignored-field"],
)  # fmt: skip
def test_patterns_read_run_names(pattern, name, expected):
    assert parse_pattern(pattern).match(name) == expected


@pytest.mark.parametrize("name", ["CartPole-v1__ppo__x__17", "CartPole-v1__ppo__1", "ppo", "a__b__1__2/x"])
def test_cleanrl_pattern_rejects_other_names(name):
    assert parse_pattern(CLEANRL_PATTERN).match(name) is None


@pytest.mark.parametrize(
    "pattern, needle",
    [
        ("{env}__{algo}", "no {seed}"),
        ("{env}_{env}_{algo}_{seed}", "field {env} appears twice"),
        ("{env}_{algo}_{seed=x}", "a fixed seed is a whole number"),
        ("{env}_{algo_{seed}", "unpaired brace"),
    ],
)
def test_bad_patterns_are_usage_errors(pattern, needle):
    with pytest.raises(UsageError) as e:
        parse_pattern(pattern)
    assert needle in str(e.value) and repr(pattern) in str(e.value)


def test_options_apply_only_to_the_formats_that_take_them():
    assert check_options("csv", {"columns": "run=a", "pattern": None}) == {"columns": "run=a", "kind": "csv"}
    with pytest.raises(UsageError, match="--columns applies to --from csv: / parquet: sources, not sb3:"):
        check_options("sb3", {"columns": "run=a"})
    with pytest.raises(UsageError, match="--pattern applies to"):
        check_options("d3rlpy", {"pattern": "{algo}"})


# -- TensorBoard ------------------------------------------------------------------------------------------
def test_masked_crc32c_is_tensorflows():
    # TensorFlow's crc32c test vectors: crc32c(b"") = 0, crc32c(32 zero bytes) = 0x8A9136AA; masked as TF does
    def mask(crc):
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    assert masked_crc32c(b"") == mask(0)
    assert masked_crc32c(bytes(32)) == mask(0x8A9136AA)


def test_cleanrl_fixture_reads_as_runs_with_renamed_tags():
    runs = tensorboard_logs.read(CLEANRL)
    assert [(r.algo, r.env, r.seed) for r in runs] == [("dqn", "CartPole-v1", 1), ("ppo", "CartPole-v1", 1),
                                                       ("ppo", "CartPole-v1", 2)]  # fmt: skip
    ppo1 = runs[1]
    assert set(ppo1.metrics) == {"train/episode_return", "train/episode_length", "losses/value_loss"}
    steps, values = ppo1.metrics["train/episode_return"]
    assert steps == [0, 500, 1000, 1500] and values == [11.0, 16.0, 21.0, 26.0]
    assert len(ppo1.wall_times["train/episode_return"]) == 4 and ppo1.wall_times["losses/value_loss"][0] > 1e9
    assert ppo1.key == "CartPole-v1__ppo__1__1700000001"


def test_summarywriter_files_written_here_read_back(tmp_path):
    SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter
    w = SummaryWriter(str(tmp_path / "runs" / "Acrobot-v1__dqn_jax__7__1700000000"))
    for step in range(0, 1000, 100):
        w.add_scalar("charts/episodic_return", -500.0 + step / 10, step)
        w.add_scalar("losses/td_loss", 0.5, step, new_style=True)
    w.close()
    (run,) = tensorboard_logs.read(tmp_path / "runs")
    assert (run.algo, run.env, run.seed) == ("dqn_jax", "Acrobot-v1", 7)
    assert run.metrics["train/episode_return"][1][-1] == pytest.approx(-410.0)
    assert run.metrics["losses/td_loss"][0] == list(range(0, 1000, 100))


def test_sb3_tensorboard_with_a_pattern():
    runs = tensorboard_logs.read(ZOO / "tensorboard", pattern="{env}/{algo}_{seed}")
    assert [(r.algo, r.env, r.seed, r.key) for r in runs] == [("PPO", "CartPole-v1", 1, "CartPole-v1/PPO_1"),
                                                              ("PPO", "CartPole-v1", 2, "CartPole-v1/PPO_2")]  # fmt: skip
    assert "rollout/ep_rew_mean" in runs[0].metrics and "eval/return" in runs[0].metrics  # eval/mean_reward


def _events(folder: Path) -> Path:
    return next(folder.glob("events.out.tfevents.*"))


def test_event_file_cut_mid_record_is_an_error_not_fewer_records(tmp_path):
    data = _events(CLEANRL / "CartPole-v1__ppo__1__1700000001").read_bytes()
    assert len(read_complete(_events(CLEANRL / "CartPole-v1__ppo__1__1700000001"))) == 12
    for cut in (len(data) - 3, len(data) - 40, 5):
        f = tmp_path / f"events.out.tfevents.{cut}"
        f.write_bytes(data[:cut])
        with pytest.raises(EventFileError, match="cut off mid-record at byte"):
            read_complete(f)
    f = tmp_path / "events.out.tfevents.junk"
    f.write_bytes(b"this is not an event file, only some text" * 3)
    with pytest.raises(EventFileError, match="not a TensorBoard event file"):
        read_complete(f)
    f.write_bytes(b"")
    with pytest.raises(EventFileError, match="empty file"):
        read_complete(f)


@pytest.mark.parametrize(
    "setup, needle",
    [
        ("missing", "no such folder"),
        ("empty", "no TensorBoard event files"),
        ("file", "a file, not a folder"),
        ("badname", "does not fit the pattern '{env}__{algo}__{seed}__{time}'; pass --pattern"),
        ("truncated", "cut off mid-record"),
    ],
)
def test_tensorboard_bad_input(tmp_path, setup, needle):
    root = tmp_path / "runs"
    if setup != "missing":
        root.mkdir()
    if setup == "file":
        root = root / "x.txt"
        root.write_text("x")
    if setup in ("badname", "truncated"):
        name = "my_run" if setup == "badname" else "CartPole-v1__ppo__1__17"
        (root / name).mkdir()
        data = _events(CLEANRL / "CartPole-v1__ppo__1__1700000001").read_bytes()
        (root / name / "events.out.tfevents.1").write_bytes(data if setup == "badname" else data[:-7])
    with pytest.raises(ImportInvalid) as e:
        tensorboard_logs.read(root)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


# -- Stable-Baselines3 / zoo -------------------------------------------------------------------------------
def test_zoo_fixture_reads_monitor_evaluations_config_and_seed():
    runs = sb3_logs.read(ZOO)
    assert [(r.algo, r.env, r.seed, r.key) for r in runs] == [("ppo", "CartPole-v1", 7, "ppo/CartPole-v1_1"),
                                                              ("ppo", "CartPole-v1", 8, "ppo/CartPole-v1_2")]  # fmt: skip
    run = runs[0]
    assert run.config == {"batch_size": 64, "n_epochs": 1, "n_steps": 128, "policy": "MlpPolicy"}
    steps, returns = run.metrics["train/episode_return"]
    _, lengths = run.metrics["train/episode_length"]
    assert steps == list(np.cumsum(lengths).astype(int)) and returns == lengths  # CartPole: reward 1 per step
    t_start, rows = sb3_logs.read_monitor(ZOO / "ppo" / "CartPole-v1_1" / "0.monitor.csv")
    assert [r[0] for r in rows] == returns
    assert run.wall_times["train/episode_return"][0] == pytest.approx(t_start + rows[0][2])
    ev_steps, ev = run.metrics["eval/return"]
    assert ev_steps == [128, 256, 384]
    assert set(run.metrics) == {"train/episode_return", "train/episode_length", "eval/return",
                                "eval/return_std", "eval/episode_length"}  # fmt: skip


def test_sb3_written_here_reads_back(tmp_path):
    pytest.importorskip(
        "stable_baselines3", reason="stable-baselines3 is not installed (pip install -e .[test])"
    )
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.monitor import Monitor

    run = tmp_path / "logs" / "ppo" / "CartPole-v1_3"
    run.mkdir(parents=True)
    env = Monitor(gym.make("CartPole-v1"), str(run / "0"))
    cb = EvalCallback(Monitor(gym.make("CartPole-v1")), eval_freq=100, n_eval_episodes=2, log_path=str(run))
    tb = tmp_path / "logs" / "tensorboard" / "CartPole-v1"
    model = PPO(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu", tensorboard_log=str(tb)
    )
    model.learn(200, callback=cb, tb_log_name="PPO")
    (got,) = sb3_logs.read(tmp_path / "logs")
    assert (got.algo, got.env, got.seed) == ("ppo", "CartPole-v1", 3)  # no args.yml: N is the seed
    data = np.load(run / "evaluations.npz")
    assert got.metrics["eval/return"][0] == data["timesteps"].tolist()
    assert got.metrics["eval/return"][1] == pytest.approx(data["results"].mean(axis=1).tolist())
    assert (
        0 < got.metrics["train/episode_return"][0][-1] <= model.num_timesteps
    )  # the end of the last episode


def _write_npz(path: Path, **arrays) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize(
    "setup, needle",
    [
        ("empty-folder", "no Stable-Baselines3 runs in it"),
        ("wrong-header", "0.monitor.csv: line 2: header 'reward,len,time' has no column r, l, t"),
        ("truncated-line", "0.monitor.csv: line 4: 1 field(s), the header has 3"),
        ("empty-monitor", "0.monitor.csv: empty file"),
        ("bad-name", "the folder name 'run' is not ENV_N"),
        ("npz-truncated", "evaluations.npz: not a readable .npz file"),
        ("npz-keys", "evaluations.npz: no array timesteps, results"),
        ("npz-pickle", "evaluations.npz: not a readable .npz file"),
        ("bad-yaml", "args.yml: not YAML the zoo writes"),
    ],
)
def test_sb3_bad_input(tmp_path, setup, needle):
    folder = tmp_path / "logs" / "ppo" / ("run" if setup == "bad-name" else "CartPole-v1_1")
    folder.mkdir(parents=True)
    good = (ZOO / "ppo" / "CartPole-v1_1" / "0.monitor.csv").read_text()
    monitor = {
        "wrong-header": good.replace("r,l,t", "reward,len,time"),
        "truncated-line": "\n".join(good.splitlines()[:3] + ["12.0"]) + "\n",
        "empty-monitor": "",
    }.get(setup, good)
    if setup != "empty-folder":
        (folder / "0.monitor.csv").write_text(monitor)
    npz = (ZOO / "ppo" / "CartPole-v1_1" / "evaluations.npz").read_bytes()
    if setup == "npz-truncated":
        (folder / "evaluations.npz").write_bytes(npz[: len(npz) // 2])
    elif setup == "npz-keys":
        _write_npz(folder / "evaluations.npz", steps=np.arange(3))
    elif setup == "npz-pickle":
        _write_npz(folder / "evaluations.npz", timesteps=np.arange(2), results=np.array([{"a": 1}, None]))
    elif setup == "bad-yaml":
        (folder / "CartPole-v1").mkdir()
        (folder / "CartPole-v1" / "args.yml").write_text("!!python/object/apply:os.system ['touch x']\n")
    root = tmp_path / "logs" if setup == "empty-folder" else folder
    with pytest.raises(ImportInvalid) as e:
        sb3_logs.read(root)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "x").exists()


def test_npz_reader_never_unpickles(tmp_path):
    f = tmp_path / "evaluations.npz"
    _write_npz(f, timesteps=np.arange(2), results=np.array([object(), None], dtype=object))
    with zipfile.ZipFile(f) as z:
        assert "results.npy" in z.namelist()
    with pytest.raises(ImportInvalid, match="not a readable .npz"):
        sb3_logs.read_evaluations(f)


def test_npz_with_trailing_length_one_axes_reads_as_evaluations_by_episodes(tmp_path):
    """SB3 writes results (evaluations, episodes, 1) when each episode's reward is a one-element array."""
    f = tmp_path / "evaluations.npz"
    results = np.array([[[1.0], [3.0]], [[2.0], [6.0]], [[5.0], [5.0]]])  # (3, 2, 1)
    lengths = np.array([[[10], [30]], [[20], [20]], [[50], [70]]])
    _write_npz(f, timesteps=np.array([100, 200, 300]), results=results, ep_lengths=lengths)
    got = sb3_logs.read_evaluations(f)
    assert got["eval/return"] == ([100, 200, 300], [2.0, 4.0, 5.0])
    assert got["eval/return_std"] == ([100, 200, 300], [1.0, 2.0, 0.0])
    assert got["eval/episode_length"] == ([100, 200, 300], [20.0, 20.0, 60.0])
    _write_npz(
        f, timesteps=np.array([[100], [200]]), results=np.array([[[[4.0]]], [[[8.0]]]])
    )  # (2, 1, 1, 1)
    assert sb3_logs.read_evaluations(f)["eval/return"] == ([100, 200], [4.0, 8.0])


@pytest.mark.parametrize(
    "arrays, needle",
    [
        (
            {"results": np.ones((3, 2, 2))},
            "results has shape (3, 2, 2) for 3 timesteps; expected (timesteps, episodes)",
        ),
        ({"results": np.ones((2, 2))}, "results has shape (2, 2) for 3 timesteps"),
        ({"results": np.ones((3, 2)), "ep_lengths": np.ones((3, 2, 3))}, "ep_lengths has shape (3, 2, 3);"),
        ({"results": np.array(["a", "b", "c"])}, "results holds <U1 values, not numbers"),
    ],
)
def test_npz_of_another_shape_is_refused_naming_the_file(tmp_path, arrays, needle):
    f = tmp_path / "evaluations.npz"
    _write_npz(f, timesteps=np.array([1, 2, 3]), **arrays)
    with pytest.raises(ImportInvalid) as e:
        sb3_logs.read_evaluations(f)
    assert str(e.value).startswith(f"{f}: ") and needle in str(e.value) and "\n" not in str(e.value)


# -- CSV / Parquet ----------------------------------------------------------------------------------------
def test_parse_columns():
    assert table_file.parse_columns("run=Name, step=_step") == {"run": "Name", "step": "_step"}
    for bad, needle in (
        ("run", "is not ROLE=COLUMN"),
        ("rn=x", "unknown role 'rn'"),
        ("run=a,run=b", "twice"),
    ):
        with pytest.raises(UsageError, match=needle):
            table_file.parse_columns(bad)


def test_tidy_csv_with_algo_env_seed_columns(tmp_path):
    f = tmp_path / "tidy.csv"
    f.write_text(
        "run,algo,env,seed,step,name,value\n"
        "a,ppo,CartPole-v1,0,100,eval/return,10\na,ppo,CartPole-v1,0,200,eval/return,20\n"
        "a,ppo,CartPole-v1,0,100,train/loss,0.5\nb,dqn,CartPole-v1,1,100,eval/return,5\n"
    )
    runs = table_file.read(f, kind="csv")
    assert [(r.key, r.algo, r.env, r.seed) for r in runs] == [
        ("a", "ppo", "CartPole-v1", 0),
        ("b", "dqn", "CartPole-v1", 1),
    ]
    assert runs[0].metrics == {"eval/return": ([100, 200], [10.0, 20.0]), "train/loss": ([100], [0.5])}


def test_wide_parquet_with_mapped_columns_and_names_through_the_pattern(tmp_path):
    import pandas as pd

    f = tmp_path / "wide.parquet"
    pd.DataFrame({"Name": ["CartPole-v1__ppo__1__17"] * 2 + ["CartPole-v1__ppo__2__18"], "t": [0, 10, 0],
                  "eval/return": [1.0, 2.0, np.nan], "sps": [100.0, 110.0, 90.0]}).to_parquet(f)  # fmt: skip
    runs = table_file.read(f, kind="parquet", columns="run=Name,step=t")
    assert [(r.algo, r.env, r.seed) for r in runs] == [("ppo", "CartPole-v1", 1), ("ppo", "CartPole-v1", 2)]
    assert runs[0].metrics["eval/return"] == ([0, 10], [1.0, 2.0])
    assert "eval/return" not in runs[1].metrics  # empty cells: not logged there
    assert runs[1].metrics["sps"] == ([0], [90.0])


def test_wandb_history_export():
    (run,) = table_file.read(FIXTURES / "wandb_history.csv", pattern="{algo=ppo}{env=CartPole-v1}{seed=3}")
    assert (run.algo, run.env, run.seed, run.key) == ("ppo", "CartPole-v1", 3, "wandb_history")
    assert run.metrics["charts/episodic_return"] == ([512, 1536, 2560], [22.0, 35.0, 61.0])  # global_step
    assert set(run.metrics) == {
        "charts/episodic_return",
        "charts/episodic_length",
        "losses/value_loss",
        "charts/SPS",
    }
    assert run.wall_times["losses/value_loss"] == [1700000011.3, 1700000012.6]  # _timestamp


def test_wandb_chart_export_is_one_run_per_prefix():
    runs = table_file.read(FIXTURES / "wandb_chart.csv")
    assert [(r.algo, r.seed) for r in runs] == [("dqn", 1), ("ppo", 1)]
    assert runs[1].metrics == {"charts/episodic_return": ([1000, 2000, 3000], [10.0, 30.0, 50.0])}
    assert runs[0].metrics["charts/episodic_return"][0] == [1000, 2000]


def test_read_source_passes_options():
    scheme, _, runs = read_source(
        f"csv:{FIXTURES / 'wandb_history.csv'}", {"pattern": "{algo=a}{env=e}{seed=0}"}
    )
    assert scheme == "csv" and runs[0].algo == "a"


@pytest.mark.parametrize(
    "text, kw, needle",
    [
        ("", {}, "empty file, no header and no rows"),
        ("run,step,value\n", {}, "no rows"),
        ("run,t,x\na,1,2\n", {}, "no step column (looked for step, global_step"),
        ("run,step,x\na,1,2\n", {"columns": "step=nope"}, "no column 'nope' (--columns step=nope); its columns: 'run', 'step', 'x'"),
        ("run,step,name\na,1,x\n", {}, "a tidy file needs both a name and a value column"),
        ("run,step,x\na,one,2\n", {}, "row 1: step (column 'step') 'one' is not a number"),
        ("run,step,x\na,1.5,2\n", {}, "row 1: step (column 'step') 1.5 is not a whole number"),
        ("run,step,x,note\nCartPole-v1__ppo__1__2,1,2,hi\n", {}, "column 'note' is not numeric"),
        ("run,step,x\nmyrun,1,2\n", {}, "run 'myrun': no algo, env, seed column, and its name does not fit"),
        ("run,algo,step,x\nCartPole-v1__ppo__1__2,a,1,2\nCartPole-v1__ppo__1__2,b,2,2\n", {}, "has 2 values in column 'algo'"),
        ('run,step,x\n"unclosed,1,2\n', {}, "line 2: 1 field(s), the header has 3"),
    ],
    ids=["empty", "header-only", "no-step", "mapped-missing", "tidy-half", "step-text", "step-fraction",
         "text-column", "name-no-fit", "algo-varies", "broken-quote"],
)  # fmt: skip
def test_csv_bad_input(tmp_path, text, kw, needle):
    f = tmp_path / "runs.csv"
    f.write_text(text)
    with pytest.raises(ImportInvalid) as e:
        table_file.read(f, kind="csv", **kw)
    assert str(e.value).startswith(f"{f}: ") and needle in str(e.value) and "\n" not in str(e.value)


def test_parquet_bad_input(tmp_path):
    f = tmp_path / "runs.parquet"
    f.write_bytes(b"PAR1 not really")
    with pytest.raises(ImportInvalid, match="not a readable parquet file"):
        table_file.read(f, kind="parquet")
    with pytest.raises(ImportInvalid, match="no such file"):
        table_file.read(tmp_path / "nope.parquet", kind="parquet")
    with pytest.raises(ImportInvalid, match="not a file"):
        table_file.read(tmp_path, kind="csv")


def test_cleanrl_hyperparameters_text_becomes_the_config(tmp_path):
    runs = tensorboard_logs.read(CLEANRL)
    assert runs[2].config == {"learning_rate": 0.00025, "seed": 2}
    text = "|param|value|\n|-|-|\n|env_id|CartPole-v1|\n|capture_video|False|\n|gamma|0.99|\n|target|None|\n|x|nan|"
    assert tensorboard_logs.hyperparameters([("hyperparameters/text_summary", text), ("notes/text_summary", "|a|1|")]) == {
        "env_id": "CartPole-v1", "capture_video": False, "gamma": 0.99, "target": None, "x": "nan"}  # fmt: skip
