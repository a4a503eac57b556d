"""The suite's schema: pydantic models with their defaults, ``Suite`` at the top.

A suite names algorithms, environments, seeds and a budget; ``suite.grid.expand`` turns it into runs.
Every field has a default a researcher would expect and unknown keys are rejected, so a typo is an
error, not a silently ignored setting. A field naming a registered thing (an algorithm, a reference table, a
generated dataset) is checked against its registry here, so the error names the field; the checks that
need gymnasium's registry (envs, wrappers) are in ``suite.checks``. Nothing here imports torch, gymnasium
or d3rlpy.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..algos.registry import ALGORITHMS, finetunable, is_discrete_only, is_jax, is_offline, jax_names
from ..envs.families import family_of, is_continuous, is_jax_env, jax_twin, namespace_problem
from ..executors import NAMES
from ..references import BUILTIN
from .tune import TuneSpec

__all__ = [
    "Budget",
    "EntryBudget",
    "EnvSpec",
    "DatasetSpec",
    "AlgoSpec",
    "FinetuneSpec",
    "ScoreSpec",
    "NormalizeSpec",
    "Resources",
    "RayResources",
    "SlurmResources",
    "WrapperSpec",
    "Suite",
    "env_label",
    "SCORE_RULE_RE",
    "NAME_RE",
]

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
IMAGINE_SUFFIX = "-imagine"  # <EnvId>-imagine: a language env's real and imagined rollouts (datagen.imagine)
SCORE_RULE_RE = re.compile(r"^(final|best|auc|mean_last:[1-9][0-9]*)$")
MAX_SEED = 2**31 - 1  # runs.seed is a 32-bit INTEGER column
MAX_SEEDS = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def env_label(env_id: str, kwargs: dict[str, Any], wrappers: list[str] = ()) -> str:  # type: ignore[assignment]
    """How a task is named in results: the env id, plus its kwargs when it has any, plus ``+Wrapper`` for each
    wrapper (its class name)."""
    label = env_id
    if kwargs:
        label += f"[{','.join(f'{k}={v}' for k, v in sorted(kwargs.items()))}]"
    return label + "".join(f"+{w.rpartition(':')[2]}" for w in wrappers)


def _checkpoint_every(v: Any) -> Any:
    """A budget's ``checkpoint_every``: a positive number of steps or minutes like '10m' (or None)."""
    if v is None:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)) or (isinstance(v, int) and v < 1):
        raise ValueError("checkpoint_every must be a positive number of steps or minutes like '10m'")
    if isinstance(v, str) and not re.fullmatch(r"[0-9]+(\.[0-9]+)?m", v.strip()):
        raise ValueError(f"checkpoint_every {v!r}: give steps (an integer) or minutes like '10m'")
    return v


class Budget(_Model):
    """How long each run trains and how it is evaluated."""

    steps: int = Field(100_000, gt=0, description="environment steps (online) or gradient steps (offline)")
    eval_every: int | None = Field(
        None, gt=0, description="evaluate every N steps; default: steps / 10 (and always at the end)"
    )
    eval_episodes: int = Field(10, gt=0, le=10_000, description="episodes per evaluation")
    timeout: float | None = Field(None, gt=0, description="seconds before a run is killed; default none")
    checkpoint_every: int | str | None = Field(
        None,
        description="save a checkpoint every N steps (an integer) or every so many minutes ('10m'); an "
        "interrupted, pre-empted or retried run resumes from it. Default: none",
    )

    video_every: int | None = Field(
        None,
        gt=0,
        description="record one seeded evaluation episode at every Nth evaluation (the Nth, the 2Nth, ...; "
        "1: each) as an MP4 for envs that render rgb_array, as a transcript for text envs. Default: none",
    )

    @field_validator("checkpoint_every", mode="before")
    @classmethod
    def _checkpoint_every(cls, v: Any) -> Any:
        return _checkpoint_every(v)

    @model_validator(mode="after")
    def _eval_every_default(self) -> Budget:
        if self.eval_every is None:
            object.__setattr__(self, "eval_every", max(1, self.steps // 10))
        return self


class EntryBudget(_Model):
    """``budget:`` on an algorithm, env or dataset entry: the fields it gives replace the suite's for that
    entry's runs (``Suite.run_budget``); the others come from the suite's budget."""

    steps: int | None = Field(
        None, gt=0, description="environment steps (online) or gradient steps (offline)"
    )
    eval_every: int | None = Field(
        None, gt=0, description="evaluate every N steps; default: the suite's, else the merged steps / 10"
    )
    eval_episodes: int | None = Field(None, gt=0, le=10_000, description="episodes per evaluation")
    checkpoint_every: int | str | None = Field(
        None, description="save a checkpoint every N steps or every so many minutes ('10m')"
    )
    video_every: int | None = Field(
        None, gt=0, description="record an evaluation episode every Nth evaluation"
    )

    @field_validator("checkpoint_every", mode="before")
    @classmethod
    def _checkpoint_every(cls, v: Any) -> Any:
        return _checkpoint_every(v)

    @model_validator(mode="before")
    @classmethod
    def _no_timeout(cls, v: Any) -> Any:
        if isinstance(v, dict) and "timeout" in v:
            raise ValueError("timeout is the suite's alone (one limit for every run): set it in the suite's "
                             "budget, not an entry's")  # fmt: skip
        return v

    @model_validator(mode="after")
    def _not_empty(self) -> EntryBudget:
        if not self.given():
            raise ValueError("an entry's budget is empty: give steps, eval_every, eval_episodes, "
                             "checkpoint_every or video_every, or remove it")  # fmt: skip
        return self

    def given(self) -> dict[str, Any]:
        """The fields this entry sets (a field written as null is not set)."""
        return self.model_dump(exclude_unset=True, exclude_none=True)


class WrapperSpec(_Model):
    """A gymnasium wrapper: a class of gymnasium.wrappers by name, or 'package.module:Class', with kwargs."""

    name: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)


def _wrapper_list(v: Any) -> Any:
    """``wrappers:`` entries: a name alone is a wrapper without kwargs."""
    if isinstance(v, list):
        return [{"name": w} if isinstance(w, str) else w for w in v]
    return v


class EnvSpec(_Model):
    """A gymnasium environment id with optional constructor kwargs and wrappers (applied in order)."""

    id: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    wrappers: list[WrapperSpec] = Field(default_factory=list)
    budget: EntryBudget | None = Field(
        None, description="this env's runs: budget fields over the suite's (an algorithm entry's win)"
    )

    _wrappers = field_validator("wrappers", mode="before")(_wrapper_list)

    @property
    def label(self) -> str:
        return env_label(self.id, self.kwargs, [w.name for w in self.wrappers])


class DatasetSpec(_Model):
    """An offline dataset: one rlbench generates (``CartPole-v1-medium``: ``<EnvId>-<level>``) or a file of
    your own (``path``: a D4RL-format HDF5 file or a Minari dataset folder, with ``env`` to evaluate in)."""

    name: str = Field(description="the task name in results; for a generated dataset <EnvId>-<level>")
    path: str | None = Field(None, description="your own D4RL-format .hdf5 file or Minari dataset folder")
    env: str | None = Field(None, description="gymnasium id runs are evaluated in; default: from the name")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="kwargs of the evaluation env")
    data_mix: Any = Field(
        None,
        description="real and imagined rollouts: real | imagined | real+imagined | {real: 0.7, imagined: 0.3}, "
        "or a list of these (one task per mix); for <EnvId>-imagine datasets, files with imagined rollouts, and "
        "text datasets (real, imagined, real+imagined: episodes a world model the run trains imagines)",
    )
    imagine: dict[str, Any] | None = Field(
        None,
        description="how an <EnvId>-imagine dataset is built (datasets.names.IMAGINE_BUILD_DEFAULTS keys)",
    )
    wrappers: list[WrapperSpec] = Field(
        default_factory=list,
        description="gymnasium wrappers (applied in order) of the env runs are evaluated and fine-tuned in; a "
        "dataset rlbench generates is also collected in the wrapped env",
    )
    budget: EntryBudget | None = Field(
        None, description="this dataset's runs: budget fields over the suite's (an algorithm entry's win)"
    )

    _wrappers = field_validator("wrappers", mode="before")(_wrapper_list)

    @property
    def label(self) -> str:
        """The task's name in results: the dataset's name, plus ``+Wrapper`` per wrapper."""
        return env_label(self.name, {}, [w.name for w in self.wrappers])

    @property
    def wrapper_dicts(self) -> list[dict[str, Any]]:
        return [w.model_dump() for w in self.wrappers]

    @field_validator("data_mix")
    @classmethod
    def _data_mix(cls, v: Any) -> Any:
        if v is None:
            return v
        from ..datasets.mix import canonical_mix  # lazy: imports numpy

        values = v if isinstance(v, list) else [v]
        if not values:
            raise ValueError("data_mix is an empty list; give at least one mix, e.g. [real, imagined]")
        out = [canonical_mix(x) for x in values]
        dup = next((x for i, x in enumerate(out) if x in out[:i]), None)
        if dup:
            raise ValueError(f"data_mix lists {dup} twice; list each mix once")
        return out

    @field_validator("imagine")
    @classmethod
    def _imagine(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is None:
            return v
        from ..datasets.names import IMAGINE_BUILD_DEFAULTS  # lazy: the datasets package imports numpy

        for k, x in v.items():
            if k not in IMAGINE_BUILD_DEFAULTS:
                raise ValueError(
                    f"imagine.{k} is not a build setting; use {', '.join(IMAGINE_BUILD_DEFAULTS)}"
                )
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"imagine.{k} must be a positive whole number (got {x!r})")
        return v

    @property
    def mixes(self) -> list[str]:
        return list(self.data_mix or [])

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(
                "dataset names use letters, digits, '_', '.', '-' and start with a letter or digit"
            )
        return v

    @model_validator(mode="after")
    def _env_known(self) -> DatasetSpec:
        from ..datasets.names import LEVELS, parse_generated_name  # lazy: the datasets package imports numpy

        if self.env is None and self.name.endswith(IMAGINE_SUFFIX) and not self.path:
            object.__setattr__(self, "env", "rlbench/" + self.name[: -len(IMAGINE_SUFFIX)])
        family = family_of(self.env or "")
        if self.imagined and not (family is not None and family.imagined_datasets):
            raise ValueError(f"dataset {self.name!r}: rlbench builds real and imagined rollouts for "
                             "BabyAI-Lang-v0-imagine and HalfCheetah-Lang-v0-imagine; bring your own with "
                             "rlbench datasets import")  # fmt: skip
        if self.imagine is not None and not (self.name.endswith(IMAGINE_SUFFIX) and not self.path):
            raise ValueError(f"dataset {self.name!r}: imagine: settings are for <EnvId>-imagine datasets rlbench "
                             "builds; remove them")  # fmt: skip
        if self.path and self.path.endswith((".pkl", ".pickle", ".npy")):
            raise ValueError(f"dataset {self.name!r}: {self.path} is a pickle, which a suite never loads (loading "
                             "a pickle can run any code in it); convert it once with: rlbench datasets import "
                             f"{self.path} --name NAME --env ENV --trust, and name NAME here")  # fmt: skip
        if self.env is None:
            parsed = parse_generated_name(self.name)
            if parsed is None:
                if self.path:
                    raise ValueError(
                        f"dataset {self.name!r} is a file of your own: add env: <gymnasium id> to evaluate in"
                    )
                raise ValueError(
                    f"dataset {self.name!r} is neither <EnvId>-<level> (levels: {', '.join(LEVELS)}) nor a "
                    "file: write e.g. CartPole-v1-medium, or {name: ..., path: my.hdf5, env: Hopper-v5}"
                )
            object.__setattr__(self, "env", parsed[0])
        return self

    @property
    def generated(self) -> bool:
        return self.path is None

    @property
    def imagined(self) -> bool:
        """An ``<EnvId>-imagine`` dataset: real and imagined rollouts that rlbench builds."""
        return self.path is None and self.name.endswith(IMAGINE_SUFFIX)


PHASES = ("offline", "online")


class FinetuneSpec(_Model):
    """Offline-to-online: after its offline budget, the agent goes on learning online in the dataset's env."""

    steps: int = Field(gt=0, description="online environment steps after the offline training")
    eval_every: int | None = Field(
        None, gt=0, description="evaluate every N online steps; default: steps / 10 (and at the end)"
    )


class AlgoSpec(_Model):
    """An algorithm from the registry (or your own function), its parameters, and its label in results."""

    entrypoint: str | None = Field(
        None, description="your own training function, 'package.module:function', called with a RunContext"
    )
    command: str | None = Field(
        None,
        description="any training script as a command line: 'python train.py --env {env} --seed {seed}'",
    )
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(None, description="name shown in results; default: the algorithm name")
    envs: list[str] | None = Field(
        None,
        min_length=1,
        description="the suite's envs or datasets this algorithm runs on (ids, labels for an env with "
        "kwargs, dataset names); default: all of its kind (envs for online algorithms, datasets for offline "
        "ones, both for your own code; JAX algorithms on gymnax/ tasks, the others on the rest). E.g. a "
        "discrete-action algorithm in a suite with continuous tasks",
    )
    budget: EntryBudget | None = Field(
        None, description="this algorithm's runs: budget fields over the suite's and the task's"
    )
    finetune: FinetuneSpec | None = Field(
        None,
        description="offline-to-online: {steps: N} online steps after offline training, on one step axis "
        f"(offline algorithms {', '.join(finetunable())})",
    )

    def runs_on(self, task: EnvSpec | DatasetSpec) -> bool:
        """Whether this entry runs on ``task``: an env for online algorithms, a dataset for offline ones,
        either for your own code; and ``envs`` unset, or listing its id, label or dataset name."""
        offline_task = isinstance(task, DatasetSpec)
        if not (self.entrypoint or self.command) and is_offline(self.name) != offline_task:
            return False
        if not (self.entrypoint or self.command or offline_task) and is_jax(self.name) != is_jax_env(task.id):
            return False  # a JAX algorithm on JAX envs (gymnax), any other on gymnasium's
        if self.envs is None:
            return True
        return task.name in self.envs if offline_task else (task.id in self.envs or task.label in self.envs)

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", v):
            raise ValueError("entrypoint must look like 'package.module:function'")
        return v

    @field_validator("name")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("entrypoint") and info.data.get("command"):
            raise ValueError("give either entrypoint or command, not both")
        if info.data.get("entrypoint") or info.data.get("command"):
            if not NAME_RE.match(v):
                raise ValueError("names use letters, digits, '_', '.', '-' and start with a letter or digit")
            return v
        if v not in ALGORITHMS:
            raise ValueError(
                f"unknown algorithm {v!r}; choose one of: {', '.join(sorted(ALGORITHMS))}, "
                "or give your own with entrypoint: 'package.module:function' or command: 'python train.py ...'"
            )
        return v

    @model_validator(mode="after")
    def _finetunable(self) -> AlgoSpec:
        if self.finetune is not None and (self.entrypoint or self.command or self.name not in finetunable()):
            raise ValueError(
                f"finetune: {self.name} cannot go on learning online; fine-tuning is for the offline "
                f"algorithms {', '.join(finetunable())} (remove finetune or use one of them)"
            )
        return self

    @field_validator("label")
    @classmethod
    def _safe_label(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-+=\[\],:]{0,99}", v):
            raise ValueError("labels use letters, digits and _ . - + = [ ] , : (at most 100 characters)")
        return v


class ScoreSpec(_Model):
    """How a run becomes one number per task: which metric, which rule."""

    metric: str = "eval/return"
    rule: str = Field("final", description="final | best | mean_last:N | auc")
    drop_first: int = Field(0, ge=0, description="ignore the first N evaluation points of each run")
    phase: str | None = Field(
        None,
        description="offline | online: score only the offline phase of fine-tuned runs (up to the boundary, "
        "all of a run without one) or only their online phase (after it); default: the whole run",
    )

    @field_validator("phase")
    @classmethod
    def _phase(cls, v: str | None) -> str | None:
        if v is not None and v not in PHASES:
            raise ValueError("phase must be offline or online, or left out to score whole runs")
        return v

    @field_validator("rule")
    @classmethod
    def _rule(cls, v: str) -> str:
        if not SCORE_RULE_RE.match(v):
            raise ValueError("rule must be final, best, auc or mean_last:N (N a positive integer)")
        return v


class NormalizeSpec(_Model):
    """How scores are normalised: fixed references only, never the min/max of the loaded runs."""

    table: str | None = Field(None, description="built-in reference set: classic-control, d4rl or atari")
    references: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="task -> [low, high]; overrides the table for that task"
    )
    low_from: str | None = Field(
        None, description="algorithm label whose mean score per task is the low reference"
    )
    high_from: str | None = Field(
        None, description="algorithm label whose mean score per task is the high one"
    )
    scale: float | None = Field(
        None, gt=0, description="score of the high reference: 1 or 100 (default: the table's)"
    )

    @field_validator("table")
    @classmethod
    def _table(cls, v: str | None) -> str | None:
        if v is not None and v not in BUILTIN:
            raise ValueError(f"unknown reference table {v!r}; choose one of: {', '.join(BUILTIN)}")
        return v

    @field_validator("references")
    @classmethod
    def _pairs(cls, v: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for task, (low, high) in v.items():
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"references for {task!r} must be finite numbers (got [{low}, {high}])")
            if low == high:
                raise ValueError(f"references for {task!r}: low and high must differ")
        return v


class RayResources(_Model):
    """Where ``--executor ray`` sends runs: an existing cluster, or none to start a local Ray instance."""

    address: str | None = Field(
        None, description="auto | HOST:PORT | ray://HOST:PORT; default: start one here"
    )


class SlurmResources(_Model):
    """How ``--executor slurm`` asks Slurm for each run (one job-array task per run)."""

    partition: str | None = None
    time_min: int | None = Field(None, gt=0, description="time limit per run in minutes")
    cpus_per_task: int | None = Field(None, gt=0, description="default: threads_per_job, else 1")
    mem_gb: float | None = Field(None, gt=0)
    gpus_per_task: int | None = Field(None, ge=0, description="default: ceil(gpus_per_job)")
    qos: str | None = None
    account: str | None = None
    array_parallelism: int | None = Field(None, gt=0, description="at most this many tasks at once")
    folder: str | None = Field(
        None, description="shared folder for submission files; default: next to the database"
    )
    additional: dict[str, Any] = Field(
        default_factory=dict, description="extra sbatch options, e.g. {constraint: a100}"
    )


class Resources(_Model):
    """What one run needs, and where it runs. gpus_per_job: 0 = CPU only, 0.25 = four runs share a GPU."""

    gpus_per_job: float = Field(0.0, ge=0, le=8)
    threads_per_job: int | None = Field(
        None, gt=0, description="torch threads per run; default cores / workers"
    )
    cpus_per_job: float | None = Field(
        None, gt=0, description="CPUs a run reserves on Ray or Slurm; default threads_per_job, else 1"
    )
    seeds_per_job: int = Field(
        1,
        description="seeds of one (algorithm, task, params) cell trained together in one job (ppo, ppo_jax, pqn_jax); "
        "algorithms that cannot be packed run one seed per job",
    )
    executor: str = Field("local", description="local | ray | slurm; the --executor flag overrides it")
    mps: bool = Field(
        False,
        description="local executor: runs on GPUs under a CUDA MPS daemon rlbench starts and stops, so that "
        "runs sharing a GPU run their kernels side by side; --mps / --no-mps override it",
    )
    ray: RayResources = Field(default_factory=RayResources)
    slurm: SlurmResources = Field(default_factory=SlurmResources)

    @field_validator("seeds_per_job", mode="before")
    @classmethod
    def _seeds_per_job(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError("seeds_per_job must be a positive integer")
        return v

    @field_validator("executor")
    @classmethod
    def _executor(cls, v: str) -> str:
        if v not in NAMES:
            raise ValueError(f"unknown executor {v!r}; choose one of: {', '.join(NAMES)}")
        return v


class Suite(_Model):
    name: str
    description: str = ""
    seeds: int | list[int] = Field(3, description="a count (seeds 0..N-1) or an explicit list")
    budget: Budget = Field(default_factory=Budget)
    envs: list[EnvSpec] = Field(default_factory=list, description="online tasks: gymnasium ids")
    datasets: list[DatasetSpec] = Field(
        default_factory=list, description="offline tasks: generated dataset names or your own files"
    )
    algorithms: list[AlgoSpec] = Field(min_length=1)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    score: ScoreSpec = Field(default_factory=ScoreSpec)
    normalize: NormalizeSpec | None = None
    resources: Resources = Field(default_factory=Resources)
    tune: TuneSpec | None = Field(
        None, description="rlbench tune: the search over one algorithm entry's params"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("names use letters, digits, '_', '.', '-' and start with a letter or digit")
        return v

    @field_validator("seeds", mode="before")
    @classmethod
    def _no_bool_seeds(cls, v: Any) -> Any:
        if isinstance(v, bool) or (isinstance(v, list) and any(isinstance(s, bool) for s in v)):
            raise ValueError("seeds must be a count or a list of integers, not true/false")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, int):
            if v < 1:
                raise ValueError("seeds must be a positive count or a list of non-negative integers")
            if v > MAX_SEEDS:
                raise ValueError(f"at most {MAX_SEEDS:,} seeds; use a smaller count")
        else:
            if not v:
                raise ValueError("the list of seeds is empty")
            if any(s < 0 for s in v):
                raise ValueError("seeds must be non-negative integers; use 0 or more")
            if any(s > MAX_SEED for s in v):
                raise ValueError(f"seeds must be at most {MAX_SEED} (2**31 - 1)")
            if len(set(v)) != len(v):
                raise ValueError("seeds are listed twice; list each seed once")
        return v

    @field_validator("envs", mode="before")
    @classmethod
    def _envs(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"id": e} if isinstance(e, str) else e for e in v]
        return v

    @field_validator("datasets", mode="before")
    @classmethod
    def _datasets(cls, v: Any) -> Any:
        if isinstance(v, list):
            out = []
            for d in v:
                if isinstance(d, str) and (d.endswith((".hdf5", ".h5")) or "/" in d):
                    d = {"name": Path(d).name.rsplit(".", 1)[0], "path": d}
                out.append({"name": d} if isinstance(d, str) else d)
            return out
        return v

    @field_validator("algorithms", mode="before")
    @classmethod
    def _algos(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": a} if isinstance(a, str) else a for a in v]
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Suite:
        labels = [a.label or a.name for a in self.algorithms]
        if not self.envs and not self.datasets:
            raise ValueError("a suite needs envs (online tasks) or datasets (offline tasks); add one of them")
        env_labels = [e.label for e in self.envs]
        dup = sorted({x for x in env_labels if env_labels.count(x) > 1})
        if dup:
            raise ValueError(f"environment {dup[0]!r} is listed twice; list it once")
        ds_names = [d.label for d in self.datasets]
        dup = sorted({x for x in [*ds_names, *env_labels] if [*ds_names, *env_labels].count(x) > 1})
        if dup:
            raise ValueError(f"dataset {dup[0]!r} is listed twice (or shares an env's name); list it once")
        for i, a in enumerate(self.algorithms):
            if a.entrypoint or a.command:
                continue
            if is_offline(a.name) and not self.datasets:
                raise ValueError(f"algorithms[{i}]: {a.name} is an offline algorithm and the suite has no "
                                 "datasets; add datasets: [e.g. CartPole-v1-medium]")  # fmt: skip
            if not is_offline(a.name) and not self.envs:
                raise ValueError(f"algorithms[{i}]: {a.name} is an online algorithm and the suite has no "
                                 "envs; add envs: [...] or use an offline algorithm")  # fmt: skip
        known = {e.id for e in self.envs} | set(env_labels) | set(ds_names)
        for i, a in enumerate(self.algorithms):
            bad = [x for x in a.envs or [] if x not in known]
            if bad:
                names = ", ".join(
                    map(repr, [*env_labels, *ds_names])
                )  # repr: one line whatever the kwargs hold
                raise ValueError(
                    f"algorithms[{i}].envs names {bad[0]!r}, which is not one of the suite's envs or datasets "
                    f"({names}); list only those"
                )
        self._check_simulators()
        self._shared_labels(labels)
        for key, values in self.sweep.items():
            algo, _, param = key.partition(".")
            if not param:
                raise ValueError(f"sweep key {key!r} must look like ALGO.PARAM, e.g. dqn.learning_rate")
            if algo not in labels:
                raise ValueError(
                    f"sweep key {key!r} names algorithm {algo!r}, which the suite does not list; "
                    "add it to algorithms or fix the key"
                )
            if not values:
                raise ValueError(f"sweep {key!r} has an empty list of values; give at least one")
            tags = [f"{x:g}" if isinstance(x, float) else str(x) for x in values]  # as grid labels them
            same = next((i for i, t in enumerate(tags) if t in tags[:i]), None)
            if same is not None:
                first = values[tags.index(tags[same])]
                raise ValueError(
                    f"sweep {key!r} lists {first!r} and {values[same]!r}, which give runs the same label "
                    f"{algo}[{param}={tags[same]}]; list each value once"
                )
        if self.score.phase == "online" and not any(a.finetune for a in self.algorithms):
            raise ValueError("score.phase is online but no algorithm has an online phase; add finetune: "
                             "{steps: N} to an offline algorithm entry, or use phase: offline")  # fmt: skip
        n_seeds = len(self.seed_list)
        if self.resources.seeds_per_job > n_seeds:
            raise ValueError(
                f"resources.seeds_per_job is {self.resources.seeds_per_job} but the suite has {n_seeds} seed(s); "
                f"use at most {n_seeds}"
            )
        if self.tune is not None:
            self._check_tune(labels)
        if self.normalize is not None:
            for which in ("low_from", "high_from"):
                label = getattr(self.normalize, which)
                if label is not None and label not in labels:
                    raise ValueError(
                        f"normalize.{which} names algorithm {label!r}, which the suite does not list "
                        f"(algorithms: {', '.join(labels)})"
                    )
        return self

    def _check_simulators(self) -> None:
        """A JAX algorithm (``ppo_jax``) trains on JAX envs (``gymnax/...``) only, any other registered online
        algorithm on gymnasium's: an entry naming an env of the other kind, or left with none of its own
        kind, is refused; so is a discrete-only algorithm on a task its env family knows is continuous."""
        jax = ", ".join(jax_names())
        for i, a in enumerate(self.algorithms):
            if a.entrypoint or a.command or is_offline(a.name):
                continue
            named = [
                e
                for e in self.envs
                if (a.envs is None or e.id in a.envs or e.label in a.envs) and namespace_problem(e.id) is None
            ]  # an unknown gymnax/ id: suite.checks names it
            if is_discrete_only(a.name):
                cont = next((e for e in named if is_continuous(e.id)), None)
                if cont is not None:
                    raise ValueError(f"algorithms[{i}]: {a.name} acts on discrete actions and {cont.id} has continuous "
                                     f"ones; give algorithms[{i}] an envs: list without it")  # fmt: skip
            wrong = [e for e in named if is_jax_env(e.id) != is_jax(a.name)]
            if not wrong or (a.envs is None and len(wrong) < len(named)):
                continue
            e = wrong[0]
            if is_jax(a.name):
                twin = jax_twin(e.id)
                fix = f"use {twin}" if twin else "use a gymnax/ task"
                raise ValueError(f"algorithms[{i}]: {a.name} trains on gymnax tasks only and {e.id} is a gymnasium "
                                 f"env; {fix}, or another algorithm for {e.id}")  # fmt: skip
            raise ValueError(f"algorithms[{i}]: {a.name} cannot run on {e.id}: gymnax tasks need a JAX algorithm "
                             f"({jax}); use one, or the gymnasium id {e.id.partition('/')[2]}")  # fmt: skip

    def _check_tune(self, labels: list[str]) -> None:
        t = self.tune
        assert t is not None
        if t.algorithm not in labels:
            raise ValueError(f"tune.algorithm {t.algorithm!r} is not one of the suite's algorithm entries "
                             f"({', '.join(labels)}); name the label of the entry to tune")  # fmt: skip
        if labels.count(t.algorithm) > 1:
            raise ValueError(f"tune.algorithm {t.algorithm!r} names {labels.count(t.algorithm)} entries (one label "
                             "with other settings per task); give the entry to tune a label of its own")  # fmt: skip
        swept = sorted(k for k in self.sweep if k.partition(".")[0] == t.algorithm)
        if swept:
            raise ValueError(f"tune.algorithm {t.algorithm!r} is also swept ({', '.join(swept)}); tune those params "
                             "too (tune.params) or sweep another entry")  # fmt: skip

    def tuned_entry(self) -> AlgoSpec:
        """The algorithm entry ``tune.algorithm`` names."""
        assert self.tune is not None
        return next(a for a in self.algorithms if (a.label or a.name) == self.tune.algorithm)

    def run_budget(self, entry: AlgoSpec, task: EnvSpec | DatasetSpec) -> dict[str, Any]:
        """The budget of ``entry``'s runs on ``task``: the suite's, then the task's ``budget:`` fields, then the
        algorithm entry's (each over the last). eval_every left unset everywhere is the merged steps / 10."""
        if entry.budget is None and task.budget is None:
            return self.budget.model_dump()
        fields = self.budget.model_dump(exclude_unset=True)
        for over in (task.budget, entry.budget):
            if over is not None:
                fields.update(over.given())
        return Budget(**fields).model_dump()

    def _shared_labels(self, labels: list[str]) -> None:
        """Entries may share a label (one algorithm with other settings on other tasks) when each lists its
        tasks in ``envs:`` and no task is in two of them; otherwise a label is one entry's."""
        tasks: list[EnvSpec | DatasetSpec] = [*self.envs, *self.datasets]
        for x in sorted({x for x in labels if labels.count(x) > 1}):
            idx = [i for i, y in enumerate(labels) if y == x]
            if any(self.algorithms[i].envs is None for i in idx):
                raise ValueError(f"two algorithm entries are both called {x!r}: give one a different 'label', or "
                                 "give each an envs: list of its own tasks (one algorithm, other settings per "
                                 "task)")  # fmt: skip
            if len({self.algorithms[i].name for i in idx}) > 1:
                raise ValueError(f"algorithm entries called {x!r} are different algorithms "
                                 f"({', '.join(sorted({self.algorithms[i].name for i in idx}))}): give one a "
                                 "different 'label'")  # fmt: skip
            for t in tasks:
                on = [i for i in idx if self.algorithms[i].runs_on(t)]
                if len(on) > 1:
                    raise ValueError(f"algorithms[{on[0]}] and algorithms[{on[1]}] are both called {x!r} and both "
                                     f"run on {t.label!r}: list each task in one of their envs: lists, or give "
                                     "one a different 'label'")  # fmt: skip

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)
