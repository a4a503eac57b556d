"""benchmarks/ui_scale.py runs to the end on a tiny store (built as store_scale.py builds it) in Debian's headless
Chromium, and prints the server's and the browser's times with a verdict per target. No timing thresholds: the
machine running the tests decides those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ui_scale_small(tmp_path: Path, chromium: str) -> None:
    if not os.path.exists("/usr/bin/chromedriver"):
        pytest.skip("needs Debian's chromium-driver: apt-get install chromium-driver")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ui_scale.py"), "--runs", "40", "--rows", "20", "--repeat", "1",
         "--cache", str(tmp_path / "c"), "--json", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("runs table first paint", "curves by algo", "curves by algo x task"):
        assert any(
            line.strip().startswith(name) and "target <= 1 s" in line for line in proc.stdout.splitlines()
        )
    numbers = json.loads((tmp_path / "t.json").read_text())
    assert numbers["browser"]["groups_algo"] == 2 and numbers["browser"]["table_ms"] > 0
