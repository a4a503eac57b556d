"""The PPO benchmark scripts still run: CleanRL's vendored ppo.py (benchmarks/peers/cleanrl_ppo.py) and
benchmarks/ppo_vs_cleanrl.py in its quickest speed and parity modes (2,048 steps, one run per side).

No timing or score thresholds: what is checked is that each script runs to the end and prints its figures, that
CleanRL's script records episode returns, and that the gymnasium 1.0 adaptation in it steps as gymnasium 0.29
did (same-step autoreset, infos["final_info"]). CleanRL's script needs tyro (the ``bench`` extra).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tyro", reason="CleanRL's ppo.py needs tyro: pip install -e '.[bench]'")
pytest.importorskip("tensorboard", reason="CleanRL's ppo.py logs to TensorBoard")

ROOT = Path(__file__).resolve().parents[2]
CLEANRL = ROOT / "benchmarks" / "peers" / "cleanrl_ppo.py"
BENCH = ROOT / "benchmarks" / "ppo_vs_cleanrl.py"


def run(*args: str | Path, cwd: Path | None = None) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_cleanrl_ppo_runs_and_records_episode_returns(tmp_path: Path) -> None:
    out = run(CLEANRL, "--no-cuda", "--total-timesteps", "2048", "--seed", "1", cwd=tmp_path)
    returns = [float(m) for m in re.findall(r"^global_step=\d+, episodic_return=([-+0-9.eE]+)$", out, re.M)]
    assert len(returns) > 10, out[-2000:]  # an untrained CartPole policy: episodes of about 10-50 steps
    assert all(1 <= r <= 500 for r in returns)
    assert len(re.findall(r"^SPS: \d+$", out, re.M)) == 2048 // 512  # one line per iteration
    assert any((tmp_path / "runs").iterdir()), "its TensorBoard logs go to ./runs/"


def test_cleanrl_vector_env_steps_like_gymnasium_029() -> None:
    spec = importlib.util.spec_from_file_location("cleanrl_ppo_vendored", CLEANRL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the training code is under `if __name__ == "__main__"`
    envs = mod.SameStepSyncVectorEnv([mod.make_env("CartPole-v1", i, False, "t") for i in range(2)])
    obs, _ = envs.reset(seed=1)
    ended_seen = 0
    for _ in range(200):
        # always push left: the pole falls within about 10 steps
        obs, reward, term, trunc, infos = envs.step(np.zeros(2, dtype=np.int64))
        assert (reward == 1.0).all(), "no reward-0 reset step (gymnasium 1.0's next-step autoreset)"
        ended = np.logical_or(term, trunc)
        if ended.any():
            ended_seen += int(ended.sum())
            assert (infos["_final_info"] == ended).all()
            for i in np.flatnonzero(ended):
                assert infos["final_info"][i]["episode"]["r"] == infos["final_info"][i]["episode"]["l"] > 0
                # the observation returned is the new episode's first one (|x| <= 0.05 at reset)
                assert np.abs(obs[i]).max() <= 0.05
                assert np.abs(infos["final_observation"][i]).max() > 0.05
        else:
            assert "final_info" not in infos
    assert ended_seen >= 4
    envs.close()


def test_ppo_vs_cleanrl_speed_quick(tmp_path: Path) -> None:
    out = run(BENCH, "--steps", "2048", "--repeats", "1", "--json", tmp_path / "speed.json")
    assert "2,048 steps" in out
    assert re.search(r"^cleanrl\s+[\d.]+\s+[\d,]+", out, re.M), out
    assert re.search(r"^rlbench\s+[\d.]+\s+[\d,]+\s+[\d.]+", out, re.M), out
    assert re.search(r"ratio rlbench/CleanRL, training steps/s: [\d.]+x", out), out
    assert (tmp_path / "speed.json").exists()


def test_ppo_vs_cleanrl_parity_quick() -> None:
    out = run(BENCH, "--parity", "--steps", "2048", "--seeds", "1")
    assert "490.04 +- 6.12" in out
    for label in ("CleanRL ppo.py, run here", "rlbench ppo, run here", "rlbench ppo, final eval/return"):
        assert re.search(rf"^{re.escape(label)}\s+[-\d.]+ \+- [\d.]+", out, re.M), out
    assert re.search(r"^parity .*: (met|NOT met)", out, re.M), out


@pytest.mark.engine  # side (c) starts a Ray head
def test_launch_overhead_quick(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="launcher (c) needs Ray: pip install -e '.[ray]'")
    out = run(ROOT / "benchmarks" / "launch_overhead.py", "--runs", "2", "--steps", "20", "--workers", "1",
              "--json", tmp_path / "overhead.json")  # fmt: skip
    labels = ("(a) fresh python per run", "(b) rlbench local", "(c) rlbench ray (local Ray)",
              "(d) rlbench ray (running)")  # fmt: skip
    for label in labels:
        assert re.search(rf"^{re.escape(label)}\s+2\s+[\d.]+\s+[\d.]+\s+-?[\d.]+\s", out, re.M), out
    assert re.search(
        r"^ratio \(a\)/\(b\), per-run overhead: [\d.]+x \(target >= 50x: (met|NOT met)\)$", out, re.M
    )
    assert re.search(r"^ray per-run overhead: -?[\d.]+ ms all-in, -?[\d.]+ ms steady", out, re.M), out
    assert re.search(r"^ray per-run overhead on a running head: -?[\d.]+ ms all-in, -?[\d.]+ ms steady \(target "
                     r"<= 50 ms all-in: (met|NOT met)\)$", out, re.M), out  # fmt: skip
    for label in labels[1:]:  # where the per-run time goes
        parts = ("start-up", "dispatch", "return", "idle between runs", "shut-down")
        line = "".join(rf",? {p} -?[\d.]+" for p in parts)
        assert re.search(rf"^breakdown {re.escape(label)}, ms per run:{line}$", out, re.M), out
    assert (
        len(re.findall(r"^  database writes: \d+ transactions for \d+ writes, \d+ connections", out, re.M))
        == 3
    )
    figures = json.loads((tmp_path / "overhead.json").read_text())
    assert set(figures["sides"]) == {"a", "b", "c", "d"} and all(
        s["finished"] == 2 for s in figures["sides"].values()
    )


def test_launch_overhead_repeat_shows_the_median_repetition(tmp_path: Path) -> None:
    out = run(ROOT / "benchmarks" / "launch_overhead.py", "--runs", "2", "--steps", "20", "--workers", "1",
              "--sides", "b", "--repeat", "3", "--json", tmp_path / "overhead.json")  # fmt: skip
    tries = [
        float(x)
        for x in re.findall(r"^  repetition \d: \(b\) rlbench local: (-?[\d.]+) ms per run$", out, re.M)
    ]
    assert len(tries) == 3, out
    m = re.search(r"^\(b\) rlbench local\s+2\s+[\d.]+\s+[\d.]+\s+(-?[\d.]+)\s.*\(median of 3: (-?[\d.]+)-(-?[\d.]+)\)$",
                  out, re.M)  # fmt: skip
    assert m, out
    assert float(m.group(1)) == sorted(tries)[1]
    assert (float(m.group(2)), float(m.group(3))) == (min(tries), max(tries))
    side = json.loads((tmp_path / "overhead.json").read_text())["sides"]["b"]
    assert len(side["repetitions_ms"]) == 3 and side["overhead_ms"] == sorted(side["repetitions_ms"])[1]


def test_stats_speed_runs_every_workload_and_replays_rliable(tmp_path: Path) -> None:
    out = run(ROOT / "benchmarks" / "stats_speed.py", "--reps", "200", "--poi-reps", "50", "--profile-reps", "100",
              "--algos", "3", "--runs", "3", "--tasks", "4", "--pairs", "2", "--taus", "9", "--repeat", "1", "--curve-reps", "60", "--points", "5", cwd=tmp_path)  # fmt: skip
    assert (
        "(1) aggregates" in out
        and "(2) probability of improvement" in out
        and "(3) performance profiles" in out
        and "(4) IQM sample-efficiency curves" in out
    )
    replays = [float(m) for m in re.findall(r"replay\s+([0-9.e+-]+)", out)]
    assert len(replays) == 4 and max(replays) < 1e-9, (
        out
    )  # the same replicates as rliable, the same intervals
