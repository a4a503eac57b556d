"""benchmarks/jax_seeds.py runs to the end at its quickest (2 seeds x 2,048 steps, a scaling table of one
row) and prints its figures, and its progress while each run goes; no timing or score thresholds."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in other processes
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "jax_seeds.py"


def test_jax_seeds_quick(tmp_path):
    out = tmp_path / "figures.json"
    p = subprocess.run([sys.executable, str(BENCH), "--seeds", "2", "--steps", "2048", "--no-cleanrl",
                        "--scaling", "2", "--warm-cache", "--json", str(out)], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "2 seeds x 2,048 steps in one job" in p.stdout and "final eval/return over 2 seeds: IQM" in p.stdout
    )
    assert "env steps/s" in p.stdout
    # progress as it goes: the compilation, then every evaluation chunk with its seconds and env steps/s
    assert "[2 seeds x 2,048 steps" in p.stdout and "compiled in" in p.stdout, p.stdout
    last = re.findall(r"chunk (\d+)/(\d+) \(to step ([\d,]+)\): [\d.]+ s, [\d,]+ env steps/s", p.stdout)
    assert last and last[-1][0] == last[-1][1] and last[-1][2] == "2,048", p.stdout
    figures = json.loads(out.read_text())
    assert figures["rlbench"]["status"] == {"finished": 2} and len(figures["scaling"]) == 1
