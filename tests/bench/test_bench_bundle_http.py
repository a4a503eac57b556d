"""benchmarks/bundle_http.py still runs: its quick mode exports, serves, downloads, verifies and imports."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bundle_http_benchmark_quick_mode():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bundle_http.py"), "--quick"],
                       capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    for what in ("export", "download + verify", "import", "rows/s", "lossless: every runs column"):
        assert what in p.stdout, p.stdout
