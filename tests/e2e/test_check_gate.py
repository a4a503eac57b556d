"""`rlbench check` as a library's CI uses it: run the gate suite on the code as it is, and with ppo's updates
broken, and compare each with the committed baseline bundle (results/reference/ppo-gate)."""

from pathlib import Path

import pytest
import yaml
from e2e_cli import rl

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "results" / "reference" / "ppo-gate"


def _run(tmp_path: Path, params: dict) -> Path:
    spec = yaml.safe_load((ROOT / "suites" / "ppo-gate.yaml").read_text())
    spec["algorithms"][0]["params"].update(params)
    tmp_path.mkdir()
    suite = tmp_path / "gate.yaml"
    suite.write_text(yaml.safe_dump(spec))
    db = tmp_path / "ci.duckdb"
    rl("run", suite, "--db", db, "--workers", "2")
    return db


def test_unchanged_ppo_passes_the_gate_and_broken_ppo_fails_it(tmp_path):
    good = _run(tmp_path / "good", {})
    r = rl("check", "ppo-gate", "--db", good, "--baseline", GATE, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no change detected" in r.stdout and "**passed**" in r.stdout

    broken = _run(tmp_path / "broken", {"learning_rate": 0.5})
    for rule in ("iqm", "poi"):
        r = rl("check", "ppo-gate", "--db", broken, "--baseline", GATE, "--rule", rule, check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "**FAILED**: 1 algorithm(s) got worse: ppo." in r.stdout
