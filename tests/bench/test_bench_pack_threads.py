"""benchmarks/pack_threads.py runs to the end at its quickest (2 ppo_jax seeds x 1,024 steps, no warm-up pack)
and prints its figures: one flusher (and its few helpers) and one monitor thread for the pack; no timing
thresholds."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlbench_cli.sink import FLUSH_WORKERS

if importlib.util.find_spec("gymnax") is None:  # found, not imported: the JAX work runs in another process
    pytest.skip("needs the jax extra: pip install -e '.[jax]'", allow_module_level=True)
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "pack_threads.py"


def test_pack_threads_quick(tmp_path):
    out = tmp_path / "figures.json"
    p = subprocess.run([sys.executable, str(BENCH), "--seeds", "2", "--steps", "1024", "--cold", "--json", str(out)],
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 seeds x 1,024 steps of ppo_jax in one pack: {'finished': 2}" in p.stdout, p.stdout
    figures = json.loads(out.read_text())
    threads = figures["rlbench_threads"]
    assert threads["rlbench-sink"] == 1 and threads["rlbench-sysmon"] == 1
    assert set(threads) <= {"rlbench-sink", "rlbench-sysmon", "rlbench-sink-io"}
    assert threads.get("rlbench-sink-io", 0) <= FLUSH_WORKERS
    assert figures["cpu_s"] > 0 and len(figures["rows_per_seed"]) >= 1
