"""benchmarks/store_scale.py runs to the end in its quick mode (a tiny store, every command timed once) and
prints a line per command, with its verdict (met / NOT met). No timing thresholds: the machine running the
tests decides those."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_store_scale_quick(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "store_scale.py"), "--quick", "--cache", str(tmp_path / "c"),
         "--json", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("fetch filtered", "fetch --scores", "fetch --format parquet", "leaderboard", "plot --no-curves",
                 "fetch --from d3rlpy"):  # fmt: skip
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), proc.stdout
    assert (tmp_path / "t.json").is_file()
    lines = {line.split("  ")[0].strip(): line for line in proc.stdout.splitlines()}
    assert all(
        "met" in line for name, line in lines.items() if name.startswith(("fetch ", "leaderboard", "plot"))
    )
    assert "targets met:" in proc.stdout, proc.stdout
