"""benchmarks/worker_start.py still runs at a tiny size: both ways of starting workers, with a job killing its
worker (no timing thresholds). ppo alone: dqn would add d3rlpy's import (about 3 s) to each way, and the
script's path is the same for any algorithm."""

from __future__ import annotations

from pathlib import Path


def test_worker_start_benchmark_times_both_ways(tmp_path: Path) -> None:
    """benchmarks/worker_start.py at a tiny size: both ways of starting workers, with a job killing its worker."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "worker_start.py"), "--runs", "1", "--steps", "256",
         "--algos", "ppo", "--repeat", "1", "--faults", "--json", str(tmp_path / "w.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "forked from one zygote" in out.stdout and "spawned / forked: wall" in out.stdout
    figures = json.loads((tmp_path / "w.json").read_text())
    assert set(figures["median"]) == {"fork", "spawn"}
    assert all(wall > 0 and cpu > 0 for wall, cpu in figures["median"].values())
