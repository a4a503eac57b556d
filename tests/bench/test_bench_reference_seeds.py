"""benchmarks/reference_seeds.py prints, per reference bundle, its claims, how many are legacy and the seeds of
every algorithm x task; a claims file that cannot be read is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rlbench_cli import claims

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "reference_seeds.py"
CLAIMS = ROOT / "results" / "reference" / "claims.yaml"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_it_prints_every_bundle_with_its_seeds_per_cell() -> None:
    proc = run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == claims.report(CLAIMS)
    published = claims.load_claims(CLAIMS)
    for bundle in published.bundles:
        assert f"\n{bundle}: " in f"\n{proc.stdout}"
    assert proc.stdout.splitlines()[-1].startswith("legacy claims: ")


def test_a_claims_file_that_is_not_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "a" / "b" / "claims.yaml"
    bad.parent.mkdir(parents=True)
    bad.write_text("bundles: [1, 2]\n")
    proc = run(bad)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "no bundles: mapping" in proc.stderr


def test_a_bundle_the_file_names_but_the_folder_lacks_is_said(tmp_path: Path) -> None:
    listed = tmp_path / "results" / "reference" / "claims.yaml"
    listed.parent.mkdir(parents=True)
    listed.write_text(
        "bundles:\n  gone:\n    quotes:\n      - {doc: README.md, text: x, claims: [{stat: runs, printed: '3', seeds: [0]}]}\n"
    )
    proc = run(listed)
    assert proc.returncode == 0, proc.stderr
    assert "gone: 1 claims; no bundle at" in proc.stdout
