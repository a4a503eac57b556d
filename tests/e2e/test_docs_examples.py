"""Every runnable example of the manual runs: the ``rlbench`` lines of the code blocks marked
``<!-- runnable -->`` in README.md and docs/*.md (``rlbench_cli.cli.docgen.runnable_examples``), in that
order, through the real ``rlbench`` in a subprocess, in one temporary folder whose ``suites/`` holds shrunken
copies of the suites they name (the same names and grids, 2 seeds of 512 steps) and whose ``results/reference``
is the repository's. A command that exits non-zero fails the test naming its file, line and output."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from e2e_cli import RLBENCH

from rlbench_cli.cli import docgen

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = {"seeds": 2, "budget": {"steps": 512, "eval_every": 256, "eval_episodes": 2}}
TIMEOUT = 300  # seconds a single example may take before it counts as hung


def shrunk(suite_file: Path) -> str:
    """The suite with TINY's seeds and budget, its entries' own budgets and fine-tuning dropped."""
    suite = yaml.safe_load(suite_file.read_text())
    suite.update(TINY)
    for key in ("envs", "datasets", "algorithms"):
        for entry in suite.get(key) or []:
            if isinstance(entry, dict):
                entry.pop("budget", None)
                entry.pop("finetune", None)
    return yaml.safe_dump(suite, sort_keys=False)


def workspace(folder: Path, examples: list[docgen.Example]) -> dict[str, str]:
    """Lay out ``folder`` for the examples; the environment they run in (no RLBENCH_DB / RLBENCH_DATASETS
    of the caller's, so the defaults under ``folder`` hold)."""
    (folder / "suites").mkdir()
    (folder / "results").mkdir()
    (folder / "results" / "reference").symlink_to(ROOT / "results" / "reference")
    for example in examples:
        for arg in example.argv:
            if arg.startswith("suites/") and arg.endswith(".yaml"):
                (folder / arg).write_text(shrunk(ROOT / arg))
    env = {k: v for k, v in os.environ.items() if k not in ("RLBENCH_DB", "RLBENCH_DATASETS")}
    return {**env, "MPLBACKEND": "Agg"}


def run_example(example: docgen.Example, cwd: Path, env: dict[str, str]) -> str | None:
    """None when the example exits 0, else one message naming it, its exit code and its output's tail."""
    try:
        r = subprocess.run([RLBENCH, *example.argv[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"{example} -> still running after {TIMEOUT} s"
    if r.returncode == 0:
        return None
    return f"{example} -> exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"


def test_every_runnable_example_of_the_manual_runs(tmp_path):
    examples = [e for page in docgen.manual_pages(ROOT) for e in docgen.runnable_examples(page, ROOT)]
    assert len(examples) >= 12
    env = workspace(tmp_path, examples)
    for example in examples:
        failure = run_example(example, tmp_path, env)
        assert failure is None, failure
    assert (tmp_path / "results" / "figures" / "quickstart" / "aggregates.png").is_file()
    assert (tmp_path / "returns.csv").read_text().splitlines()[0].strip('"').startswith("run_id")


def test_a_broken_example_fails_naming_its_place(tmp_path):
    example = docgen.Example("README.md", 7, "rlbench fetch --suite nope  # no such suite")
    env = workspace(tmp_path, [example])
    message = run_example(example, tmp_path, env)
    assert message is not None
    assert message.startswith("README.md:7: rlbench fetch --suite nope  # no such suite -> exit 2"), message
