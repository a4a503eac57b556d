"""benchmarks/seeds_vectorised.py still runs at its tiny size: the packed job, CleanRL's script and the scaling
table print their figures (no timing or score thresholds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_seeds_vectorised_benchmark_runs_quick(tmp_path: Path) -> None:
    """benchmarks/seeds_vectorised.py at its tiny size: the packed job, CleanRL's script and the scaling table."""
    import os
    import subprocess
    import sys

    pytest.importorskip("tyro", reason="CleanRL's ppo.py needs tyro: pip install -e '.[bench]'")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(root))
    out_json = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "seeds_vectorised.py"), "--quick", "--sides", "packed",
         "cleanrl", "scaling", "--scaling", "2", "--json", str(out_json)],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "IQM" in proc.stdout and "target:" in proc.stdout and "seeds/job" in proc.stdout
    figures = json.loads(out_json.read_text())
    assert len(figures["packed"]["finals"]) == 2 and all(1 <= f <= 500 for f in figures["packed"]["finals"])
    assert figures["cleanrl"]["train_s"] > 0
    assert [r["seeds"] for r in figures["scaling"]] == [2] and figures["scaling"][0]["steps_per_s"] > 0
