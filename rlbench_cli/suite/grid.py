"""Grid expansion: a Suite becomes a list of RunSpecs. Pure: no I/O, no randomness.

The product is seeds x (algorithm entries x their sweep values) x tasks, less the tasks an entry leaves
out with ``envs:`` (say, continuous tasks for a discrete-action algorithm). A run's budget is the suite's,
with the ``budget:`` fields of its task's entry and then of its algorithm's entry over it
(``Suite.run_budget``); entries that share a label (on disjoint ``envs:``) are one algorithm with other
settings per task. Tasks are the suite's envs
(for online algorithms) and datasets (for offline ones; evaluated in the dataset's env). Each RunSpec has a
run_id: a hash of its canonical JSON, so the same cell always gets the same id and re-running a suite
can tell which cells are already done.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

from .ids import run_id_of
from .models import AlgoSpec, DatasetSpec, EnvSpec, Suite, env_label

__all__ = ["RunSpec", "expand", "grid_shape", "steps_summary"]


# how often a run saves checkpoints or records an episode changes what it leaves on disk, not what it trains
NOT_IDENTITY_BUDGET = ("checkpoint_every", "video_every")


@dataclass(frozen=True)
class RunSpec:
    """One cell of the grid. Round-trips through JSON (``to_dict`` / ``from_dict``)."""

    suite: str
    algo: str  # label shown in results (algorithm name, or its label, plus sweep values)
    algo_name: str  # registry name
    params: dict[str, Any]
    env_id: str
    env_kwargs: dict[str, Any]
    seed: int
    budget: dict[str, Any]
    score: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    entrypoint: str | None = None  # "package.module:function" for user code; algo_name is then a label
    command: str | None = None  # a command-line template for user scripts; algo_name is then a label
    env_wrappers: list[dict[str, Any]] = field(default_factory=list)  # [{name, kwargs}], applied in order
    dataset: str | None = None  # offline runs: the dataset's name (the task); env_id is where it is evaluated
    dataset_path: str | None = None  # a user's own dataset file; None: a generated dataset, found by name
    finetune: dict[str, Any] | None = (
        None  # offline-to-online: {steps, eval_every} online after the offline steps
    )
    data_mix: str | None = None  # offline runs on real and imagined rollouts: which (datasets.mix), canonical

    @property
    def env(self) -> str:
        """The task label: the dataset's name for offline runs, else the env id plus kwargs, if any."""
        if self.dataset is not None:
            label = env_label(self.dataset, {}, [w["name"] for w in self.env_wrappers])
            return label if self.data_mix is None else f"{label}[mix={self.data_mix}]"
        return env_label(self.env_id, self.env_kwargs, [w["name"] for w in self.env_wrappers])

    @property
    def offline(self) -> bool:
        return self.dataset is not None

    def identity(self) -> dict[str, Any]:
        """What makes a run this run. Score rule and resources do not change what is trained."""
        ident = {
            "suite": self.suite,
            "algo": self.algo,
            "algo_name": self.algo_name,
            "params": self.params,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "seed": self.seed,
            "budget": {k: v for k, v in self.budget.items() if k not in NOT_IDENTITY_BUDGET},
        }
        if self.entrypoint is not None:
            ident["entrypoint"] = self.entrypoint
        if self.command is not None:
            ident["command"] = self.command
        if self.env_wrappers:
            ident["env_wrappers"] = self.env_wrappers
        if self.dataset is not None:
            ident["dataset"] = self.dataset
            ident["dataset_path"] = self.dataset_path
        if self.finetune is not None:
            ident["finetune"] = self.finetune
        if self.data_mix is not None:
            ident["data_mix"] = self.data_mix
        return ident

    @property
    def run_id(self) -> str:
        return run_id_of(self.identity())

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSpec:
        d = {k: v for k, v in d.items() if k != "run_id"}
        return cls(**d)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _finetune(entry: AlgoSpec, task: EnvSpec | DatasetSpec) -> dict[str, Any] | None:
    """The entry's online fine-tuning on an offline task ({steps, eval_every}), or None."""
    if entry.finetune is None or not isinstance(task, DatasetSpec):
        return None
    ft = entry.finetune.model_dump()
    if ft["eval_every"] is None:
        ft["eval_every"] = max(1, ft["steps"] // 10)
    return ft


def expand(suite: Suite) -> list[RunSpec]:
    """All runs of a suite, ordered seed-major so a partial grid already covers every algorithm and env."""
    # (label, entry) per variant; entries may share a label when they run on different tasks (models checks)
    algo_variants: list[tuple[str, AlgoSpec, dict[str, Any]]] = []
    for a in suite.algorithms:
        label = a.label or a.name
        keys = [k for k in suite.sweep if k.partition(".")[0] == label]
        if not keys:
            algo_variants.append((label, a, dict(a.params)))
            continue
        for values in itertools.product(*(suite.sweep[k] for k in keys)):
            params = dict(a.params)
            tags = []
            for k, v in zip(keys, values):
                p = k.partition(".")[2]
                params[p] = v
                tags.append(f"{p}={_fmt(v)}")
            algo_variants.append((f"{label}[{','.join(tags)}]", a, params))

    # a dataset with data_mix is one task per mix
    tasks: list[tuple[EnvSpec | DatasetSpec, str | None]] = [(e, None) for e in suite.envs]
    tasks += [(d, m) for d in suite.datasets for m in (d.mixes or [None])]
    score = suite.score.model_dump()
    resources = suite.resources.model_dump()
    return [
        RunSpec(
            suite=suite.name,
            algo=label,
            algo_name=entry.name,
            params=params,
            env_id=task.id if isinstance(task, EnvSpec) else str(task.env),
            env_kwargs=dict(task.kwargs),
            env_wrappers=[w.model_dump() for w in task.wrappers],
            seed=seed,
            budget=suite.run_budget(entry, task),
            score=score,
            resources=resources,
            entrypoint=entry.entrypoint,
            command=entry.command,
            dataset=task.name if isinstance(task, DatasetSpec) else None,
            dataset_path=task.path if isinstance(task, DatasetSpec) else None,
            finetune=_finetune(entry, task),
            data_mix=mix,
        )
        for seed in suite.seed_list
        for label, entry, params in algo_variants
        for task, mix in tasks
        if entry.runs_on(task)
    ]


def steps_summary(runs: list[RunSpec]) -> str:
    """How long the runs train, for a one-line summary: "500 steps each", or the range where entries' budgets
    differ ("500 to 4,000 steps (entries' budgets)")."""
    steps = sorted({int(r.budget["steps"]) for r in runs})
    if len(steps) <= 1:
        return f"{steps[0] if steps else 0:,} steps each"
    return f"{steps[0]:,} to {steps[-1]:,} steps (entries' budgets)"


def grid_shape(suite: Suite, runs: list[RunSpec]) -> str:
    """How ``runs`` (``expand(suite)``) make up the grid, after its seeds: "3 algorithm configs x 2 envs + 1
    datasets", or, where some algorithms run on some tasks only (their kind, their ``envs:``), "5 (algorithm
    config, task) pairs of 3 configs and 2 envs + 1 datasets"."""
    variants = len({r.algo for r in runs})
    seeds = len(suite.seed_list)
    what = " + ".join(
        f"{n} {kind}" for n, kind in ((len(suite.envs), "envs"), (len(suite.datasets), "datasets")) if n
    )
    if len(runs) == seeds * variants * (len(suite.envs) + len(suite.datasets)):
        return f"{variants} algorithm configs x {what}"
    return f"{len(runs) // seeds} (algorithm config, task) pairs of {variants} configs and {what}"
