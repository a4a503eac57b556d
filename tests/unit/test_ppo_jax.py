"""ppo_jax (``algos.gymnax``): the compiled training of a pack of seeds on a gymnax task, on a tiny budget.
Each test that computes with JAX runs in its own spawned process with a deadline (``jax_isolated``: XLA's CPU
runtime can wedge).

Every seed of the pack gets finite metrics and its own evaluations on the suite's grid; the same pack gives the
same numbers bit for bit (CPU); a seed whose learning rate makes it diverge fails alone while the others
finish; the seeds' runs go through ``packed.run_packed`` like torch ppo's. Each test compiles the same
program shape (4 seeds, the same params and budget), so JAX's persistent cache compiles it once."""

import importlib.util
import json
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in other processes
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)

from jax_isolated import isolated  # noqa: E402

from rlbench_cli import checkpoint  # noqa: E402
from rlbench_cli.algos.base import RunContext  # noqa: E402
from rlbench_cli.algos.gymnax import PPOJax, PPOJaxConfig  # noqa: E402
from rlbench_cli.algos.gymnax.loop import train as train_pack  # noqa: E402
from rlbench_cli.envs.gymnax import GYMNAX_ENVS  # noqa: E402
from rlbench_cli.packed import run_packed  # noqa: E402
from rlbench_cli.runner import attempt_dir  # noqa: E402
from rlbench_cli.sink import ShardSink  # noqa: E402
from rlbench_cli.suite.grid import RunSpec  # noqa: E402

pytestmark = pytest.mark.slow
PARAMS = {"num_envs": 4, "num_steps": 32, "num_minibatches": 2, "update_epochs": 2}
BUDGET = {"steps": 1024, "eval_every": 512, "eval_episodes": 3}


@pytest.fixture(autouse=True)
def _jax_cache(jax_cache):
    """The session's one JAX compilation cache (tests/conftest.py)."""


def _spec(seed, env="gymnax/CartPole-v1"):
    return RunSpec(suite="t", algo="ppo_jax", algo_name="ppo_jax", params=dict(PARAMS), env_id=env,
                   env_kwargs={}, seed=seed, budget=dict(BUDGET))  # fmt: skip


def _rows(folder):
    t = pa.concat_tables([pq.read_table(p) for p in sorted((folder / "metrics").glob("*.parquet"))])
    rows = sorted(zip(t["name"].to_pylist(), t["step"].to_pylist(), t["value"].to_pylist()))
    return [r for r in rows if not r[0].startswith("sys/")]


def _train(tmp_path, seeds, lr_scale=None):
    ctxs = []
    for s in seeds:
        folder = tmp_path / f"seed{s}"
        ctxs.append(RunContext(spec=_spec(s), sink=ShardSink(folder / "metrics"), run_dir=folder))
    outcome = train_pack(ctxs, "ppo", PPOJaxConfig.from_params, lr_scale=lr_scale)
    for c in ctxs:
        c.sink.close()
    return outcome, [_rows(tmp_path / f"seed{s}") for s in seeds]


@isolated
def test_every_seed_has_finite_rows_and_the_same_pack_gives_the_same_numbers(tmp_path):
    outcome, rows = _train(tmp_path / "a", [0, 1, 2, 3])
    assert outcome == {0: None, 1: None, 2: None, 3: None}
    for r in rows:
        evals = [(step, v) for name, step, v in r if name == "eval/return"]
        assert [s for s, _ in evals] == [0, 512, 1024]  # the suite's grid
        assert all(np.isfinite(v) for _, _, v in r)
        names = {name for name, _, _ in r}
        assert {"train/loss/policy", "train/loss/value", "train/entropy", "train/episode_return"} <= names
        assert max(step for name, step, _ in r if name == "train/loss/policy") == 1024  # 8 iterations of 128
    assert rows[0] != rows[1]  # seeds differ
    _, again = _train(tmp_path / "b", [0, 1, 2, 3])
    assert again == rows  # bitwise, every row of every seed


@isolated
def test_a_diverging_seed_fails_alone(tmp_path):
    outcome, rows = _train(tmp_path, [0, 1, 2, 3], lr_scale=[1.0, 1e30, 1.0, 1.0])
    assert outcome[0] is None and outcome[2] is None
    assert (
        outcome[1] is not None and outcome[1].startswith("diverged: NaN in ") and "loss at step" in outcome[1]
    )
    for k in (0, 2, 3):
        assert [s for name, s, _ in rows[k] if name == "eval/return"] == [0, 512, 1024]
    assert max(s for name, s, _ in rows[1] if name == "eval/return") < 1024  # no evaluation after it diverged


@isolated
def test_packed_seeds_are_runs_of_their_own_through_run_packed(tmp_path):
    import sys

    specs = [_spec(s) for s in (0, 1, 2, 3)]
    folders = [tmp_path / s.run_id / "attempt-1" for s in specs]
    assert "torch" not in sys.modules
    results = run_packed(specs, folders)
    assert "torch" not in sys.modules  # a JAX pack does not pay torch's import (seconds before its job)
    assert [r["status"] for r in results] == ["finished"] * 4
    assert len({r["run_id"] for r in results}) == 4
    for folder in folders:
        saved = json.loads((folder / "result.json").read_text())
        assert saved["pack"] == [s.run_id for s in specs] and saved["final_eval"] is not None
        t = pa.concat_tables([pq.read_table(p) for p in sorted((folder / "metrics").glob("*.parquet"))])
        pack_size = [v for n, v in zip(t["name"].to_pylist(), t["value"].to_pylist()) if n == "sys/pack_size"]
        assert pack_size == [4.0]


def test_its_params_are_torch_ppos_names_and_defaults():
    from rlbench_cli.algos.gymnax.ppo_config import CONTINUOUS_DEFAULTS as JAX_CONTINUOUS
    from rlbench_cli.algos.gymnax.ppo_config import NOT_HERE
    from rlbench_cli.algos.ppo import CONTINUOUS_DEFAULTS, PPOConfig

    torch_cfg, jax_cfg = PPOConfig(), PPOJaxConfig()
    assert set(vars(torch_cfg)) == set(vars(jax_cfg)) | set(NOT_HERE)
    assert {k: getattr(torch_cfg, k) for k in vars(jax_cfg)} == vars(jax_cfg)
    assert JAX_CONTINUOUS == CONTINUOUS_DEFAULTS


@isolated
def test_its_orthogonal_init_is_jaxs_without_lapack():
    """``common.orthogonal`` draws what jax.nn.initializers.orthogonal draws (the same Q, up to rounding)."""
    import jax
    import jax.numpy as jnp

    from rlbench_cli.algos.gymnax.common import orthogonal

    for i, shape in enumerate([(4, 64), (64, 64), (64, 2), (64, 1), (3, 8)]):
        key = jax.random.PRNGKey(i)
        want = np.asarray(jax.nn.initializers.orthogonal(1.4)(key, shape, jnp.float32))
        got = np.asarray(orthogonal(key, shape, 1.4))
        assert got.shape == shape and np.allclose(got, want, atol=1e-5), (shape, np.abs(got - want).max())


@isolated
def test_a_pack_of_256_seeds_initialises():
    """jax's orthogonal init (batched LAPACK QR) hung this init for ever on 2 cores, in every run of it here:
    jaxlib's QR kernels wait on XLA's intra-op pool for pieces of their batch that no free thread can run."""
    import jax

    from rlbench_cli.algos.gymnax.ppo import build
    from rlbench_cli.envs.gymnax import make

    prog = build(PPOJaxConfig.from_params(PARAMS, continuous=False), *make("gymnax/CartPole-v1"), 1024, 8)
    for first in (0, 256):
        seeds = np.arange(first, first + 256, dtype=np.int32)
        state = jax.block_until_ready(prog.init(seeds, np.full(256, 2.5e-4, np.float32)))
        assert jax.tree_util.tree_leaves(state)[0].shape[0] == 256


def test_every_gymnax_task_is_one_gymnax_makes():
    import gymnax

    assert set(GYMNAX_ENVS.values()) <= set(gymnax.registered_envs)


class StopAtCheckpoint(threading.Event):
    """Set once the first seed's run folder holds a checkpoint: the pack stops there, as a job killed then."""

    def __init__(self, folder):
        super().__init__()
        self.folder = folder

    def is_set(self):
        return super().is_set() or checkpoint.latest_step(self.folder) is not None


@isolated
def test_an_interrupted_pack_resumes_every_seed_bitwise(tmp_path):
    from dataclasses import replace

    RunContext.checkpoint_on_stop = False  # only the checkpoint_every ones (in this test's own process)
    specs = [replace(_spec(s), budget={**BUDGET, "checkpoint_every": 512}) for s in (0, 1, 2, 3)]

    def run(root, attempt, stop=None):
        folders = [attempt_dir(root, s, attempt=attempt) for s in specs]
        results = run_packed(specs, folders, stop_event=stop)
        return folders, results

    root = tmp_path / "resumed"
    _, first = run(root, 1, StopAtCheckpoint(attempt_dir(root, specs[0]).parent / "checkpoint"))
    assert [r["status"] for r in first] == ["interrupted"] * 4
    resumed, second = run(root, 2)
    assert [r["status"] for r in second] == ["finished"] * 4
    assert {r["resumed_from_step"] for r in second} == {512}
    straight, _ = run(tmp_path / "straight", 1)
    for a2, a in zip(resumed, straight):
        assert _rows(a2) == _rows(a)  # bitwise, every row of every seed, none twice
        assert not (a2.parent / "checkpoint").exists()


PARITY = {
    "num_steps": 64,
    "learning_rate": 1e-3,
}  # at 6,144 steps, trained returns are told from untrained ones


def _finals(tmp_path, seeds, pack, env="gymnax/CartPole-v1", params=PARITY, steps=6144):
    """ppo_jax's final and step-0 eval/return of ``seeds`` on ``env`` (by default gymnax's CartPole-v1, 6,144
    steps, PARITY), trained ``pack`` seeds per job."""
    from dataclasses import replace

    from test_ppo_packed import make_spec, read_rows

    for i in range(0, len(seeds), pack):
        ctxs = []
        for s in seeds[i : i + pack]:
            spec = make_spec(env, params, s, steps, steps, 5)
            spec = replace(spec, algo="ppo_jax", algo_name="ppo_jax")
            ctxs.append(RunContext(spec=spec, sink=ShardSink(tmp_path / f"jax-{s}", background=False)))
        assert PPOJax.train_packed(ctxs) == {c.seed: None for c in ctxs}
        for c in ctxs:
            c.sink.close()
    rows = [read_rows(tmp_path / f"jax-{s}") for s in seeds]
    return _final_and_first(rows)


def _final_and_first(rows):
    """Each run's final and step-0 eval/return (of ``rows``, one frame a run), as two arrays."""
    from test_ppo_packed import finals

    rows = list(rows)
    return np.array([finals(r) for r in rows]), np.array([finals(r, 0) for r in rows])


def _sign_p(after, before) -> float:
    """Two-sided sign test of paired values (ties dropped): how likely as many seeds or more moved one way if
    training moved none."""
    from math import comb

    up, down = int(np.sum(after > before)), int(np.sum(after < before))
    n, k = up + down, min(up, down)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0


def _compatible(x, x0, y, y0):
    """The packed-ppo test's check on two implementations' final returns ``x`` and ``y`` (``x0``, ``y0``: the
    same seeds' untrained ones): a permutation test of equal means, overlapping IQM intervals, and power: each
    seed's final return told apart from its own untrained one, paired by seed over both (on Acrobot an untrained
    policy can reach the goal and a seed may still be at -500 after 50k steps, so two unpaired samples of 10
    told nothing apart on some CPUs' arithmetic)."""
    from test_ppo_packed import permutation_p

    from rlbench_cli.bootstrap import interval_estimates

    assert permutation_p(x, y) > 0.05, (x, y)
    ci = interval_estimates({"x": x[:, None], "y": y[:, None]}, ["iqm"], reps=2000, seed=0)
    assert ci["x"].lower[0] <= ci["y"].upper[0] and ci["y"].lower[0] <= ci["x"].upper[0], (x, y)
    after, before = np.concatenate([x, y]), np.concatenate([x0, y0])
    assert _sign_p(after, before) < 0.05 and np.sum(after > before) > np.sum(after < before), (after, before)


@isolated
def test_ppo_jax_on_cartpole_is_statistically_compatible_with_torch_ppo_and_with_packs_of_one(tmp_path):
    """ppo_jax seeds 0..5 on gymnax's CartPole-v1 (one pack) against packed torch ppo seeds 100..105 on
    gymnasium's, at the same params; and against ppo_jax seeds 20..25 in six packs of one seed each: a seed's
    numbers may differ in their last bits with the size of its pack (XLA's batched kernels; the pack is
    recorded as sys/pack_size), its returns not. The pack of six is trained once for both comparisons."""
    import torch
    from test_ppo_packed import make_spec, packed

    # one thread, as the Acrobot test and xdist's workers (OMP_NUM_THREADS=1) have it: under `pytest -n 0` two
    # spun on the tiny networks (29 CPU-s instead of 2 on 2 loaded cores, for the same numbers)
    torch.set_num_threads(1)
    x, x0 = _finals(tmp_path, list(range(6)), pack=6)
    (tmp_path / "torch").mkdir()
    _, torch_rows = packed(tmp_path / "torch", [make_spec("CartPole-v1", PARITY, 100 + s, 6144, 6144, 5)
                                                for s in range(6)])  # fmt: skip
    _compatible(x, x0, *_final_and_first(torch_rows.values()))
    y, y0 = _finals(tmp_path, list(range(20, 26)), pack=1)
    _compatible(x, x0, y, y0)


@isolated(deadline_s=420)
def test_ppo_jax_and_torch_ppo_are_statistically_compatible_on_acrobot(tmp_path):
    """ppo_jax seeds 0..9 on gymnax's Acrobot-v1 (one pack) against packed torch ppo seeds 100..109 on
    gymnasium's, 50k steps at learning rate 1e-3 (about 50 s of CPU; benchmarks/jax_parity.py prints the
    figures): equal means not rejected, IQM intervals overlapping, and the finals told apart from step 0."""
    import torch
    from test_ppo_packed import make_spec, packed

    torch.set_num_threads(1)
    params, steps = {"learning_rate": 1e-3}, 50_000
    x, x0 = _finals(tmp_path, list(range(10)), 10, "gymnax/Acrobot-v1", params, steps)
    (tmp_path / "torch").mkdir()
    _, torch_rows = packed(tmp_path / "torch", [make_spec("Acrobot-v1", params, 100 + s, steps, steps, 5)
                                                for s in range(10)])  # fmt: skip
    _compatible(x, x0, *_final_and_first(torch_rows.values()))


@isolated
def test_pqn_jax_trains_every_seed_of_a_pack_with_finite_rows(tmp_path):
    from rlbench_cli.algos.gymnax import PQNJax

    ctxs = []
    for s in range(4):
        spec = RunSpec(suite="t", algo="pqn_jax", algo_name="pqn_jax", params={"num_envs": 8, "num_steps": 16,
                       "num_minibatches": 4, "update_epochs": 2, "hidden_sizes": [32, 32]}, env_id="gymnax/CartPole-v1",
                       env_kwargs={}, seed=s, budget=dict(BUDGET))  # fmt: skip
        ctxs.append(RunContext(spec=spec, sink=ShardSink(tmp_path / f"s{s}" / "metrics"), run_dir=tmp_path / f"s{s}",
                               keep_artifacts=True))  # fmt: skip
    assert PQNJax.train_packed(ctxs) == {s: None for s in range(4)}
    for c in ctxs:
        c.sink.close()
    rows = [_rows(tmp_path / f"s{s}") for s in range(4)]
    for r in rows:
        assert [s for name, s, _ in r if name == "eval/return"] == [0, 512, 1024]
        assert all(np.isfinite(v) for _, _, v in r)
        assert {"train/loss/q", "train/q_mean", "train/epsilon"} <= {name for name, _, _ in r}
    assert rows[0] != rows[1]
    # each seed's kept final policy, rebuilt, plays its last evaluation's episodes again (in gymnax)
    from rlbench_cli.algos.base import eval_seeds
    from rlbench_cli.algos.keep import load_saved

    for s in (0, 3):
        policy, info = load_saved(tmp_path / f"s{s}" / "policy" / "final")
        assert info["seed"] == s and info["step"] == 1024
        returns, _ = policy.play(eval_seeds(s, 3))
        last = [v for name, step, v in rows[s] if name == "eval/return" and step == 1024]
        assert returns.mean() == pytest.approx(last[0], rel=1e-5)


@isolated
def test_a_policy_trained_in_gymnax_scores_in_gymnasium_what_it_scores_in_gymnax():
    """The simulators agree: 4 seeds of ppo_jax trained on gymnax's CartPole-v1 (100k steps), each policy's
    10 evaluation episodes played in gymnax (inside the program) and in gymnasium's CartPole-v1 (NumPy
    forward pass of the same weights, the same episode seeds): the mean returns differ by less than three
    standard errors of their difference."""
    from rlbench_cli.algos.base import eval_seeds
    from rlbench_cli.algos.gymnax.loop import prepare_jax
    from rlbench_cli.envs import make_env
    from rlbench_cli.envs.gymnax import make

    jax = prepare_jax("cpu")
    from rlbench_cli.algos.gymnax.ppo import build

    cfg, n, steps, episodes = PPOJaxConfig(), 4, 100_000, 10
    iters = -(-steps // cfg.batch_size)
    prog = build(cfg, *make("gymnax/CartPole-v1"), steps, iters)
    state = prog.init(np.arange(n, dtype=np.int32), np.full(n, cfg.learning_rate, np.float32))
    keys = np.stack(
        [np.asarray(jax.vmap(jax.random.PRNGKey)(np.array(eval_seeds(s, episodes)))) for s in range(n)]
    )
    state, _, in_gymnax, _ = prog.chunk(state, np.int32(iters), keys)
    actor = [(np.asarray(w), np.asarray(b)) for w, b in state["params"]["actor"]]
    in_gymnasium = np.zeros((n, episodes))
    for s in range(n):
        for i, seed in enumerate(eval_seeds(s, episodes)):
            env = make_env("CartPole-v1")
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                x = obs.astype(np.float32)
                for j, (w, b) in enumerate(actor):
                    x = x @ w[s] + b[s]
                    x = np.tanh(x) if j < len(actor) - 1 else x
                obs, r, term, trunc, _ = env.step(int(np.argmax(x)))
                in_gymnasium[s, i] += r
                done = term or trunc
    a, b = np.asarray(in_gymnax, np.float64).ravel(), in_gymnasium.ravel()
    assert a.mean() > 200  # trained policies, or the comparison says little
    se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(a.mean() - b.mean()) <= 3 * se + 1e-9, (a.mean(), b.mean(), se)


@isolated
def test_a_stalled_chunk_ends_the_pack_through_the_watchdog_naming_the_wedge(tmp_path):
    """A real sleep in the second chunk's thread (the test hook) stands for XLA's wedge: the watchdog gives up
    on it long before the sleep ends, every seed fails with the cause, the rows before it are kept, and the
    job says its worker must be replaced."""
    import os

    from rlbench_cli.algos import base
    from rlbench_cli.packed import run_job

    os.environ.update(
        RLBENCH_JAX_WATCHDOG="1", RLBENCH_JAX_TEST_STALL="2:3600", RLBENCH_JAX_WATCHDOG_FLOOR_S="5"
    )
    specs = [_spec(s) for s in (0, 1, 2, 3)]
    folders = [tmp_path / s.run_id / "attempt-1" for s in specs]
    result = run_job(specs, folders)
    assert result["status"] == "failed" and result["restart_worker"].startswith("XLA's runtime wedged")
    assert base.process_spoiled() == result["restart_worker"]
    for r, folder in zip(result["pack_results"], folders):
        assert r["error"].startswith("XlaWedged: XLA's runtime wedged: the chunk of 4 iteration(s) to step 512 "
                                     "and its evaluation made no progress for"), r["error"]  # fmt: skip
        assert [s for name, s, _ in _rows(folder) if name == "eval/return"] == [0]  # the chunk before it


@isolated
def test_a_packs_best_policies_are_the_evaluations_with_the_highest_return_whoever_wrote_them(tmp_path):
    # a pack holds its seeds' best policies back (thousands of seeds improve at every evaluation) and writes
    # them while the device runs the next chunk and at the end: each seed keeps the evaluation with the highest
    # return, the earliest of equal ones, and its final policy. Both ways of sending chunks (a GPU's thread)
    import os

    from rlbench_cli.algos.keep import load_saved
    from rlbench_cli.artifacts import current, read_index

    for how in ("0", "1"):
        os.environ["RLBENCH_JAX_SEND_THREAD"] = how
        ctxs = []
        for s in range(4):
            folder = tmp_path / how / f"seed{s}"
            ctxs.append(RunContext(spec=_spec(s), sink=ShardSink(folder / "metrics"), run_dir=folder,
                                   keep_artifacts=True))  # fmt: skip
        assert train_pack(ctxs, "ppo", PPOJaxConfig.from_params) == {s: None for s in range(4)}
        for c in ctxs:
            c.sink.close()
            evals = [(step, v) for name, step, v in _rows(c.run_dir) if name == "eval/return"]
            best_step = max(evals, key=lambda e: (e[1], -e[0]))[0]
            listed = sorted({(r["kind"], r["path"].split("/")[-2]) for r in current(read_index(c.run_dir))})
            assert listed == [("policy_best", f"best-{best_step:09d}"), ("policy_final", "final")]
            assert sorted(p.name for p in (c.run_dir / "policy").iterdir()) == [
                f"best-{best_step:09d}",
                "final",
            ]
            _, info = load_saved(c.run_dir / "policy" / f"best-{best_step:09d}")
            assert info["step"] == best_step and info["value"] == max(v for _, v in evals)
    os.environ.pop("RLBENCH_JAX_SEND_THREAD")
