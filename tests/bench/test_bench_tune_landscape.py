"""benchmarks/tune_landscape.py still runs (its --quick sizes) and prints every figure it reports: both
budgets, the grid's best with its interval, the tuned configuration's search and confirmed scores, the study's
overhead. No score or timing threshold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_landscape_benchmark_runs_and_prints_its_figures(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tune_landscape.py"), "--quick", "--keep",
                           str(tmp_path / "work")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for line in ("grid   2 x 2 configurations x 5 seeds = 20 runs", "tune   2 trials x 3 seeds", "grid's best",
                 "search score", "confirmed IQM", "study overhead"):  # fmt: skip
        assert line in out, out
    assert (tmp_path / "work" / "figs" / "tune_history.png").exists()
