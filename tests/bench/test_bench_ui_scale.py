"""benchmarks/ui_scale.py runs to the end on a tiny store (built as store_scale.py builds it) in Debian's headless
Chromium, and prints the server's and the browser's times with a verdict per target. No timing thresholds: the
machine running the tests decides those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args: object) -> subprocess.CompletedProcess:
    """benchmarks/NAME ARGS run to its end in a subprocess (the tests ask for Debian's chromium-driver)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *map(str, args)], capture_output=True,
                          text=True, timeout=900, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_ui_scale_small(tmp_path: Path, chromedriver: str) -> None:
    proc = script("ui_scale.py", "--runs", "40", "--rows", "20", "--repeat", "1", "--cache", tmp_path / "c",
                  "--json", tmp_path / "t.json")  # fmt: skip
    for name in ("runs table first paint", "curves by algo", "curves by algo x task"):
        assert any(
            line.strip().startswith(name) and "target <= 1 s" in line for line in proc.stdout.splitlines()
        )
    numbers = json.loads((tmp_path / "t.json").read_text())
    assert numbers["browser"]["groups_algo"] == 2 and numbers["browser"]["table_ms"] > 0


def test_ui_live_small(tmp_path: Path, chromedriver: str) -> None:
    proc = script("ui_live.py", "--points", "3", "--runs", "2", "--repeat", "1", "--idle", "2", "--json",
                  tmp_path / "t.json")  # fmt: skip
    assert "live lag on the run's page, 3 points" in proc.stdout and "target <= 2 s" in proc.stdout, (
        proc.stdout
    )
    assert "live lag on the suite's page, 2 points" in proc.stdout, proc.stdout
    assert "rlbench run wall time" in proc.stdout and "target <= x1.05" in proc.stdout, proc.stdout
    numbers = json.loads((tmp_path / "t.json").read_text())
    assert len(numbers["lags_s"]) == 3 and all(lag > 0 for lag in numbers["lags_s"])
    assert len(numbers["suite_lags_s"]) == 2 and all(lag > 0 for lag in numbers["suite_lags_s"])
    assert "CPU seconds per minute of an open page" in proc.stdout, proc.stdout
    assert len(numbers["cpu_suite_page"]) == 1 and all(c >= 0 for c in numbers["cpu_run_page"])
