"""What every importer shares: ``ImportedRun`` (one run read from another tool's files, what each format's
``read`` returns) and ``ImportResult`` (what an import did). A leaf module: the format modules and the
package's ``import_source`` import it, it imports none of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ImportedRun", "ImportResult"]


@dataclass
class ImportedRun:
    """One run read from another tool's files.

    Attributes:
        key: The run's name within its source (a d3rlpy folder name); with the suite, it makes the run id.
        algo: Algorithm label.
        env: Task (environment or dataset) name.
        seed: Seed.
        config: Hyperparameters, stored as the run's config JSON.
        metrics: ``{metric name: (steps, values)}``, e.g. ``{"eval/return": ([1000, 2000], [12.0, 30.5])}``.
        source: Where it was read from (a folder), recorded as the run's ``source`` artifact.
        wall_times: ``{metric name: wall-clock times}`` (seconds since the epoch) where the tool logged them,
            one per step of ``metrics[name]``; metrics without them get NULL.
    """

    key: str
    algo: str
    env: str
    seed: int
    config: dict[str, Any]
    metrics: Mapping[str, tuple[Sequence[int], Sequence[float]]]
    source: str = ""
    wall_times: Mapping[str, Sequence[float]] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return sum(len(steps) for steps, _ in self.metrics.values())


@dataclass
class ImportResult:
    """What ``import_source`` did: runs found, newly added, and already in the database (``suites``: every
    suite a ``duckdb:FILE`` merge touched)."""

    suite: str
    source: str
    found: int
    new_runs: int
    new_rows: int
    present: int
    warnings: list[str] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)

    def summary(self) -> str:
        into = f"suite {self.suite!r}"
        if len(self.suites) > 1 or (self.suites and self.suites != [self.suite]):
            into = (
                f"suites {', '.join(map(repr, self.suites))}"
                if len(self.suites) > 1
                else f"suite {self.suites[0]!r}"
            )
        return (
            f"imported {self.new_runs} runs ({self.new_rows} metric rows) into {into} "
            f"from {self.source}, {self.present} already present"
        )
