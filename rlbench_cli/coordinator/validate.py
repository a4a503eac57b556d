"""``rlbench validate``: a suite checked as ``rlbench run`` checks it before anything is recorded, without
running anything: its fields, its grid, each distinct algorithm config's params (through the adapters' own
parsing: this imports torch, d3rlpy or transformers) and how its seeds pack into jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..algos import first_refusal, to_check
from ..algos.registry import packable
from ..errors import UsageError
from ..packed import plan_packs, unpackable
from ..suite.grid import expand, grid_shape, steps_summary
from ..suite.loader import load_suite

__all__ = ["Validation", "validate"]


@dataclass(frozen=True)
class Validation:
    """What ``validate`` found in one suite file.

    Attributes:
        suite: the suite's name.
        runs: its number of runs.
        seeds: its number of seeds.
        grid: the grid's shape, e.g. "2 algorithms x 3 envs".
        steps: the runs' steps, e.g. "50000 steps each".
        seeds_per_job: ``resources.seeds_per_job``.
        jobs: how many jobs the runs pack into (``runs`` when seeds_per_job is 1).
        unpackable: the algorithms whose runs cannot be packed (each seed a job of its own).
        packable: the registered algorithms whose seeds can share a job.
    """

    suite: str
    runs: int
    seeds: int
    grid: str
    steps: str
    seeds_per_job: int
    jobs: int
    unpackable: list[str] = field(default_factory=list)
    packable: list[str] = field(default_factory=list)


def validate(path: str | Path) -> Validation:
    """Check the suite file at ``path``. Raises ``SuiteInvalid`` (a field) or ``UsageError`` (an algorithm's
    params), each one line naming the file."""
    suite = load_suite(path)
    runs = expand(suite)
    refused = first_refusal(to_check(runs))
    if refused:
        raise UsageError(f"{path}: {refused}")
    n = suite.resources.seeds_per_job
    return Validation(
        suite=suite.name,
        runs=len(runs),
        seeds=len(suite.seed_list),
        grid=grid_shape(suite, runs),
        steps=steps_summary(runs),
        seeds_per_job=n,
        jobs=len(plan_packs(runs, n)) if n > 1 else len(runs),
        unpackable=unpackable(runs) if n > 1 else [],
        packable=list(packable()),
    )
