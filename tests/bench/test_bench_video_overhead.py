"""benchmarks/video_overhead.py still runs and prints its figures (its quickest size, one run per side). No
timing threshold: what is checked is that both sides ran, the side with videos listed them, and the ratios
are printed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_video_overhead_quick(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "video_overhead.py", "--steps", "4096", "--repeats", "1",
         "--json", tmp_path / "v.json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"^no videos\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0$", out.stdout, re.M), out.stdout
    assert re.search(r"^video_every: 5\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+1$", out.stdout, re.M), out.stdout
    assert re.search(r"ratio with videos / without: wall [\d.]+x .* CPU [\d.]+x", out.stdout), out.stdout
    assert json.loads((tmp_path / "v.json").read_text())["every"] == 5
