"""Every reference bundle in results/reference/ imports, and its numbers are the ones published: each suite's
per-task table (runs, mean, std, median, min, max, raw and normalised) equals the one recorded in
tests/fixtures/reference_per_task/ when the bundles were last published, to the last digit."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p for p in (ROOT / "results" / "reference").iterdir() if p.is_dir())
RECORDED = ROOT / "tests" / "fixtures" / "reference_per_task"

pytestmark = pytest.mark.fast

runner = CliRunner()


def invoke(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def test_every_reference_bundle_has_a_recorded_table():
    assert [b.name for b in BUNDLES] == sorted(p.stem for p in RECORDED.glob("*.csv"))


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_a_reference_bundle_imports_with_its_published_numbers(bundle, tmp_path):
    db = tmp_path / "r.duckdb"
    # a bundle written before bundle.json existed (none is left in results/reference/) would be recorded as
    # rlbench: reads it, without its suite's config
    source = f"bundle:{bundle}" if (bundle / "bundle.json").exists() else f"rlbench:{bundle}"
    assert "imported" in invoke("fetch", "--from", source, "--into", bundle.name, "--db", db)
    out = tmp_path / "per_task.csv"
    invoke("leaderboard", bundle.name, "--db", db, "--per-task", "--format", "csv", "-o", out)
    assert out.read_text(encoding="utf-8") == (RECORDED / f"{bundle.name}.csv").read_text(encoding="utf-8")
