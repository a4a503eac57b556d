"""benchmarks/gpu_packing.py: its suites are valid rlbench suites that differ only in gpus_per_job, and on a
machine without a GPU it says it measured nothing instead of reporting CPU figures as GPU packing."""

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_packing.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_packing", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_two_suites_are_the_same_runs_packed_differently():
    mod = _module()
    for algo in ("ppo", "dqn"):
        whole = parse_suite(mod.suite("a", algo, 8, 1000, 1.0, {}))
        quarter = parse_suite(mod.suite("a", algo, 8, 1000, 0.25, {}))
        assert (whole.resources.gpus_per_job, quarter.resources.gpus_per_job) == (1.0, 0.25)
        assert [r.run_id for r in expand(whole)] == [r.run_id for r in expand(quarter)]
        assert len(expand(whole)) == 8


def test_without_a_gpu_it_measures_nothing_and_says_so():
    env = {"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2", "--steps", "100"], capture_output=True,
                       text=True, timeout=120, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "no NVIDIA GPU visible" in r.stdout and "steps/s" not in r.stdout


def test_params_from_the_command_line_reach_both_suites():
    mod = _module()
    suite = parse_suite(mod.suite("a", "ppo", 2, 1000, 0.25, {"cuda_graph": False}))
    assert suite.algorithms[0].params == {"num_envs": 4, "num_steps": 128, "cuda_graph": False}
    r = subprocess.run([sys.executable, str(SCRIPT), "--param", "cuda_graph"], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 2 and "--param 'cuda_graph': write KEY=VALUE" in r.stderr


def test_each_run_gets_cleanrls_ppo_budget_unless_steps_says_otherwise():
    mod = _module()
    # CleanRL ppo.py's total_timesteps on CartPole-v1, with its num_envs and num_steps
    assert mod.parse_args([]).steps == 500_000
    assert mod.PARAMS["ppo"] == {"num_envs": 4, "num_steps": 128}
    assert mod.parse_args(["--algo", "dqn"]).steps == 50_000
    assert mod.parse_args(["--steps", "200000", "--param", "cuda_graph=false"]).steps == 200_000
    assert mod.parse_args(["--param", "cuda_graph=false"]).params == {"cuda_graph": False}


def test_the_report_gives_the_commands_ratio_and_the_ratio_within_the_runs():
    mod = _module()
    # the H200's figures for graphed ppo: 8 runs of 1.4 s one at a time, four sharing the GPU at 5.2 s each
    whole = mod.Side(1.0, 20.07, [1.4] * 8, gpu_util=31.0, cpu_percent=97.6, before=5.5, after=0.6)
    lines = mod.report([whole, mod.Side(0.25, 16.6, [5.2] * 8)], 8 * 50_000)
    assert len(lines) == 4
    assert (
        "gpus_per_job=1 " in lines[0]
        and "19,930 env steps/s" in lines[0]
        and lines[0].endswith(
            "~8.9 s outside runs (5.5 before the first, 0.6 after the last), GPU 31% busy, a run's CPU 98%"
        )
    )
    assert "gpus_per_job=0.25" in lines[1] and lines[1].endswith("~6.2 s outside runs")  # nothing sampled
    assert lines[2] == "packing 4 runs per GPU: 1.21x the throughput of one run per GPU (target >= 3x)"
    assert lines[3].startswith("within the runs: 1.08x (4 sharing the GPU take 5.2 s each, one alone 1.4 s;")


def test_the_report_gives_the_ratio_on_warm_workers_where_both_sides_have_runs_there():
    """The H200's figures of 8 graphed ppo runs of 200k steps under MPS: each worker's first run spent about
    6 s before its first step; the runs after it took as long alone as four sharing the GPU."""
    mod = _module()
    whole = mod.Side(1.0, 75.1, [13.9, 6.5, 7.9, 7.9, 7.4, 8.7, 7.4, 7.9], cold=[6.2],
                     warm=[6.5, 7.9, 7.9, 7.4, 8.7, 7.4, 7.9])  # fmt: skip
    packed = mod.Side(0.25, 29.9, [14.8, 14.5, 12.1, 14.5, 7.6, 8.7, 7.5, 8.5], cold=[5.5, 6.2, 5.3, 5.5],
                      warm=[7.6, 8.7, 7.5, 8.5])  # fmt: skip
    lines = mod.report([whole, packed], 8 * 200_000)
    assert "a worker's first run 6.2 s to its first step" in lines[0]
    assert "a worker's first run 5.5 s to its first step" in lines[1]
    assert lines[2] == "packing 4 runs per GPU: 2.51x the throughput of one run per GPU (target >= 3x)"
    assert (
        lines[4]
        == "on warm workers (each worker's first run left out): 3.93x (4 sharing take 8.1 s each, one alone 7.9 s)"
    )
    # a side whose every run was a worker's first has no warm runs: no such line
    assert (
        len(mod.report([whole, mod.Side(0.25, 29.9, [14.8] * 4, cold=[5.5] * 4, warm=[])], 4 * 200_000)) == 4
    )


def test_main_prints_each_side_as_it_is_measured_then_the_ratios(monkeypatch, capsys):
    import rlbench_cli.executors.base as base

    mod = _module()
    monkeypatch.setattr(base, "detect_gpus", lambda: 1)  # the printing, not a GPU's figures
    sides = {1.0: mod.Side(1.0, 20.07, [1.4] * 8, 31.0), 0.25: mod.Side(0.25, 16.6, [5.2] * 8, 88.0)}
    monkeypatch.setattr(mod, "measure", lambda folder, algo, runs, steps, g, executor, params, mps: sides[g])
    assert mod.main(["--runs", "8", "--steps", "50000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("8 x ppo CartPole-v1 x 50,000 steps on 1 GPU(s)")
    assert out[1:] == mod.report([sides[1.0], sides[0.25]], 8 * 50_000)


def test_mps_asks_rlbench_for_it_in_both_suites_on_the_local_executor_only():
    """``--mps`` is ``resources.mps: true`` on both sides (``rlbench run`` starts and stops the daemon;
    tests/e2e/test_mps_run.py); rlbench starts MPS for its local pool only, so with Ray it is refused."""
    mod = _module()
    for g in (1.0, 0.25):
        assert parse_suite(mod.suite("a", "ppo", 8, 1000, g, {}, mps=True)).resources.mps is True
        assert parse_suite(mod.suite("a", "ppo", 8, 1000, g, {})).resources.mps is False
    r = subprocess.run([sys.executable, str(SCRIPT), "--mps", "--executor", "ray"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "--mps: rlbench starts CUDA MPS for the local executor only" in r.stderr


def con_rows(db: Path) -> list[tuple[float, float]]:
    """Each run's seconds and the seconds from its start to its first metric past step 0, in start order."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT duration_s, (SELECT min(wall_time) FROM metrics m WHERE m.run_id = r.run_id AND step > 0 "
            "AND name NOT LIKE 'sys/%') - epoch(started_at) FROM runs r ORDER BY started_at"
        ).fetchall()
    finally:
        con.close()


def test_a_side_is_read_from_the_store_rlbench_run_wrote(tmp_path):
    """Each run's seconds, the GPU's mean busy share and a run's median CPU share from the runs' ``sys/``
    metrics, and the command's seconds before the first run and after the last, from a real store."""
    import duckdb

    mod = _module()
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(mod.suite("s", "ppo", 2, 512, 0.0, {})))
    db = tmp_path / "s.duckdb"
    started = time.time()
    r = subprocess.run(["rlbench", "run", str(suite), "--db", str(db), "--workers", "1", "--json"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    ended = time.time()
    assert r.returncode == 0, r.stderr
    side = mod.read_side(db, 0.25, started, ended)
    con = duckdb.connect(str(db), read_only=True)
    secs = [v for (v,) in con.execute("SELECT duration_s FROM runs ORDER BY run_id").fetchall()]
    cpu = sorted(v for (v,) in con.execute("SELECT avg(value) FROM metrics WHERE name = 'sys/cpu_percent' "
                                           "GROUP BY run_id").fetchall())  # fmt: skip
    starts, ends = zip(*con.execute("SELECT epoch(started_at), epoch(ended_at) FROM runs").fetchall())
    con.close()
    assert side.before == pytest.approx(min(starts) - started) and side.after == pytest.approx(
        ended - max(ends)
    )
    assert side.gpus_per_job == 0.25 and side.wall == ended - started and side.secs == secs and len(secs) == 2
    assert side.gpu_util is None  # a CPU run samples no GPU
    assert len(cpu) == 2 and side.cpu_percent == pytest.approx(sum(cpu) / 2)
    assert 0 < side.before < side.wall and 0 < side.after < side.wall
    assert side.before + min(secs) < side.wall
    # one worker: its first run pays the worker's start-up (torch's first optimiser, ...), the second does not
    first, second = con_rows(db)
    assert side.cold == [pytest.approx(first[1])] and side.warm == [second[0]]
    assert 0 < first[1] < first[0] and second[1] < first[1]
    # the same store with a GPU's samples added
    con = duckdb.connect(str(db))
    run_id = con.execute("SELECT min(run_id) FROM runs").fetchone()[0]
    con.execute("INSERT INTO metrics (run_id, step, name, value) VALUES (?, 1, 'sys/gpu_util', 20), "
                "(?, 2, 'sys/gpu_util', 40)", [run_id, run_id])  # fmt: skip
    con.close()
    assert mod.read_side(db, 0.25, started, ended).gpu_util == 30.0
