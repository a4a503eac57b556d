"""A tiny suite for rlbench ui's tests, run by the real `rlbench run`: random on two envs, a `command:` script
that logs through the JSON-lines client (slowly, when asked, so a test can watch it live), and one that fails
with HTML in its command line and in its error text."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RLBENCH = shutil.which("rlbench")
SCRIPT = """\
import sys, time
from rlbench_cli import client
steps, pause, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for step in range(0, steps + 1, 100):
    client.log(step, **{"eval/return": step / 10 + seed, "train/loss": 1.0 / (step + 1)})
    time.sleep(pause)
if "--fail" in sys.argv:
    print("<script>alert('xss')</script> diverged", file=sys.stderr)
    sys.exit(3)
"""
XSS = "<script>alert(2)</script>"


def write_suite(
    folder: Path, name: str = "uit", pause: float = 0.0, steps: int = 600, seeds: int = 2
) -> Path:
    """The suite file (and its script) in ``folder``; ``pause``: seconds the script sleeps per logged step."""
    (folder / "logger.py").write_text(SCRIPT)
    py = sys.executable
    suite = folder / f"{name}.yaml"
    suite.write_text(
        f"name: {name}\n"
        f"seeds: {seeds}\n"
        f"budget: {{steps: {steps}, eval_every: {steps // 3}, eval_episodes: 2}}\n"
        "envs: [CartPole-v1, Acrobot-v1]\n"
        "algorithms:\n"
        "  - random\n"
        f"  - {{name: script, command: '{py} {folder}/logger.py {{steps}} {pause} {{seed}} \"<b>bold</b>\"'}}\n"
        f"  - {{name: failing, command: '{py} {folder}/logger.py {{steps}} 0 {{seed}} --fail {XSS}'}}\n"
        "score: {metric: eval/return, rule: final}\n"
    )
    return suite


def run_suite(suite: Path, db: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`rlbench run SUITE --db DB` (its failing runs make it exit 1)."""
    return subprocess.run([RLBENCH, "run", str(suite), "--db", str(db)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "MPLBACKEND": "Agg"})  # fmt: skip
