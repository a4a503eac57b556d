"""``rlbench tune``'s pruning: the evaluations of a batch's runs read from their metric shards as they arrive,
each trial's objective reported to Optuna at every evaluation step all its runs have reached, and the runs of a
trial Optuna prunes asked to stop (a ``PRUNE`` file in each running attempt's folder, which ``RunContext``
looks for; the run ends with the status ``pruned``, neither finished nor failed, never scored)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..algos.base import PRUNE_FILE
from ..sink import list_shards
from ..suite.grid import expand
from ..suite.models import Suite

__all__ = ["Pruning"]

READ_EVERY_S = 1.0


def _shard_values(shard: Path, metric: str) -> dict[int, float] | None:
    """``{step: value}`` of ``metric`` in one shard, None if it cannot be read yet."""
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(shard, columns=["step", "name", "value"], filters=[("name", "=", metric)])
    except (OSError, ValueError):
        return None
    return dict(zip(t.column("step").to_pylist(), t.column("value").to_pylist()))


def _normaliser(suite: Suite, tasks: list[str]) -> Any:
    """value, task -> the suite's normalised value (raw when its references cannot be known in advance, e.g.
    ``low_from``)."""
    from ..references import normalise, resolve

    block = suite.normalize.model_dump(exclude_none=True) if suite.normalize is not None else "auto"
    try:
        res = resolve(tasks, block)
    except Exception:  # noqa: BLE001 - references measured from runs: rank on raw values
        res = None
    if res is None or not res.refs:
        return lambda value, task: value
    return lambda value, task: normalise(value, res.refs[task], res.scale)


class Pruning:
    """``run_suite``'s ``watch`` for one batch: ``trials`` maps trial numbers to (Optuna ``Trial``, label)."""

    def __init__(self, tsuite: Suite, trials: dict[int, tuple[Any, str]], objective: Any):
        self.trials, self.objective = trials, objective
        self.metric = tsuite.score.metric
        labels = {label for _, label in trials.values()}
        self.number_of = {label: n for n, (_, label) in trials.items()}
        self.cells: dict[str, set[tuple[str, int]]] = {label: set() for label in labels}
        self.cell_of: dict[str, tuple[str, str, int]] = {}  # run id -> (label, task, seed)
        for s in expand(tsuite):
            if s.algo in labels:
                self.cells[s.algo].add((s.env, s.seed))
                self.cell_of[s.run_id] = (s.algo, s.env, s.seed)
        tasks = sorted({task for cells in self.cells.values() for task, _ in cells})
        self.norm = _normaliser(tsuite, tasks)
        self.folders: dict[str, Path] = {}
        self.running: set[str] = set()
        self.reported: dict[int, set[int]] = {n: set() for n in trials}
        self.pruned: dict[int, int] = {}  # trial number -> the step it was pruned at
        self.next_read = 0.0
        self.shards: dict[
            Path, dict[int, float]
        ] = {}  # a shard is written once (renamed into place): read once

    def __call__(self, running: list[Any]) -> None:
        self.running = set()
        for job in running:
            for m in job.members:
                if m.spec.run_id in self.cell_of:
                    self.folders[m.spec.run_id] = m.folder
                    self.running.add(m.spec.run_id)
        for rid in self.running:  # a pruned trial's run that started only now stops at once
            number = self.number_of.get(self.cell_of[rid][0])
            if number in self.pruned and not (self.folders[rid] / PRUNE_FILE).exists():
                (self.folders[rid] / PRUNE_FILE).write_text(f"{self.pruned[number]}\n")
        now = time.monotonic()
        if now < self.next_read:
            return
        self.next_read = now + READ_EVERY_S
        for number, (trial, label) in self.trials.items():
            if number not in self.pruned:
                self._look(number, trial, label)

    def _evaluations(self, folder: Path) -> dict[int, float]:
        """``{step: value}`` of the metric in an attempt folder's shards so far; each shard is read once."""
        out: dict[int, float] = {}
        for shard in list_shards(folder / "metrics"):
            if shard not in self.shards:
                values = _shard_values(shard, self.metric)
                if values is None:
                    continue
                self.shards[shard] = values
            out.update(self.shards[shard])
        return out

    def _look(self, number: int, trial: Any, label: str) -> None:
        import numpy as np

        runs = {rid: cell for rid, cell in self.cell_of.items() if cell[0] == label}
        if len(runs) != len(self.cells[label]) or not all(rid in self.folders for rid in runs):
            return  # a run not started yet: no step all of them have reached
        evals = {rid: self._evaluations(self.folders[rid]) for rid in runs}
        common = set.intersection(*(set(e) for e in evals.values())) - self.reported[number]
        tasks = sorted({task for _, task, _ in runs.values()})
        seeds = sorted({seed for _, _, seed in runs.values()})
        for step in sorted(common):
            matrix = np.empty((len(seeds), len(tasks)))
            for rid, (_, task, seed) in runs.items():
                matrix[seeds.index(seed), tasks.index(task)] = self.norm(float(evals[rid][step]), task)
            trial.report(self.objective(matrix), int(step))
            self.reported[number].add(step)
            if trial.should_prune():
                self.pruned[number] = int(step)
                for rid in runs:
                    if rid in self.running:
                        (self.folders[rid] / PRUNE_FILE).write_text(f"{step}\n")
                return
