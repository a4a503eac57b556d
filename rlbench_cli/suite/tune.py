"""A suite's ``tune:`` block (``rlbench tune``): the search space over one algorithm entry's params, the search
budget, the sampler and pruner, and the confirmation on fresh seeds. Plain data checked here; the search itself
is ``rlbench_cli.tune``."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ConfirmSpec",
    "ParamSpace",
    "TuneSpec",
    "SAMPLERS",
    "PRUNERS",
    "OBJECTIVES",
    "DEFAULT_CONFIRM_SEED",
]

SAMPLERS = ("random", "tpe", "cmaes", "grid")
PRUNERS = ("none", "median", "hyperband")
OBJECTIVES = ("iqm", "mean", "median")
KINDS = ("log", "range", "int", "choice")
DEFAULT_CONFIRM_SEED = 1000  # fresh seeds start here unless confirm.seeds lists them


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamSpace(_Model):
    """One param's range: exactly one of ``log: [low, high]`` (floats, sampled on a log scale), ``range: [low,
    high]`` (floats, uniform), ``int: [low, high]`` (integers, both ends included) or ``choice: [a, b, ...]``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    log: list[float] | None = None
    range_: list[float] | None = Field(None, alias="range")
    int_: list[int] | None = Field(None, alias="int")
    choice: list[Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> ParamSpace:
        given = [k for k in KINDS if self._get(k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of log: [low, high], range: [low, high], int: [low, high] or "
                             "choice: [values]")  # fmt: skip
        kind = given[0]
        values = self._get(kind)
        if kind == "choice":
            if not values:
                raise ValueError("choice: is empty; list at least one value")
            if len({repr(v) for v in values}) != len(values):
                raise ValueError("choice: lists a value twice; list each once")
            return self
        if len(values) != 2:
            raise ValueError(f"{kind}: give [low, high], two numbers")
        low, high = values
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{kind}: [{low}, {high}] must be finite numbers")
        if low >= high:
            raise ValueError(f"{kind}: [{low}, {high}] is empty or reversed; give low < high")
        if kind == "log" and low <= 0:
            raise ValueError(
                f"log: [{low}, {high}] includes 0 or less; a log range needs low > 0 (or use range:)"
            )
        return self

    def _get(self, kind: str) -> Any:
        return getattr(self, {"range": "range_", "int": "int_"}.get(kind, kind))

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if self._get(k) is not None)

    def values(self) -> list[Any]:
        return list(self._get(self.kind))


class ConfirmSpec(_Model):
    """Re-run the ``top`` configurations and the algorithm's default on seeds never used in the search."""

    top: int = Field(3, ge=1, description="best configurations of the search to confirm")
    seeds: int | list[int] = Field(
        10, description="a count (seeds 1000..) or an explicit list of fresh seeds"
    )

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, bool):
            raise ValueError("confirm.seeds must be a count or a list of integers")
        if isinstance(v, int) and v < 1:
            raise ValueError("confirm.seeds must be at least 1")
        if isinstance(v, list) and (not v or len(set(v)) != len(v) or any(s < 0 for s in v)):
            raise ValueError("confirm.seeds must list distinct non-negative seeds")
        return v

    def seed_list(self) -> list[int]:
        s = self.seeds
        return list(range(DEFAULT_CONFIRM_SEED, DEFAULT_CONFIRM_SEED + s)) if isinstance(s, int) else list(s)


class TuneSpec(_Model):
    """What ``rlbench tune`` searches: ``algorithm`` (the label of one of the suite's algorithm entries), its
    ``params`` space, ``trials`` configurations, each run on ``seeds_per_trial`` seeds x the suite's tasks."""

    algorithm: str
    params: dict[str, ParamSpace] = Field(min_length=1)
    trials: int = Field(20, ge=1)
    seeds_per_trial: int = Field(3, ge=1)
    seeds: list[int] | None = Field(None, description="the search's seeds; default 0..seeds_per_trial-1")
    sampler: str = "tpe"
    pruner: str = "none"
    objective: str = "iqm"
    seed: int = Field(0, ge=0, description="the sampler's seed")
    confirm: ConfirmSpec | None = Field(default_factory=ConfirmSpec)

    @field_validator("sampler", "pruner", "objective")
    @classmethod
    def _known(cls, v: str, info: Any) -> str:
        allowed = {"sampler": SAMPLERS, "pruner": PRUNERS, "objective": OBJECTIVES}[info.field_name]
        if v not in allowed:
            raise ValueError(f"unknown {info.field_name} {v!r}; use one of {', '.join(allowed)}")
        return v

    @model_validator(mode="after")
    def _seeds_and_grid(self) -> TuneSpec:
        if self.seeds is not None:
            if len(self.seeds) != self.seeds_per_trial or len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"tune.seeds lists {len(self.seeds)} seed(s); list {self.seeds_per_trial} distinct "
                                 "ones (seeds_per_trial), or leave it out")  # fmt: skip
        if self.confirm is not None:
            both = sorted(set(self.search_seeds()) & set(self.confirm.seed_list()))
            if both:
                raise ValueError(f"confirm.seeds {both} were used in the search (seeds {self.search_seeds()}); "
                                 "confirmation needs fresh seeds: list others or give a count (seeds 1000..)")  # fmt: skip
        if self.sampler == "grid":
            loose = [k for k, p in self.params.items() if p.kind in ("log", "range")]
            if loose:
                raise ValueError(f"sampler grid needs a finite set of values per param; {', '.join(loose)} "
                                 "has a continuous range: give choice: [values] or int: [low, high]")  # fmt: skip
        return self

    def search_seeds(self) -> list[int]:
        return list(self.seeds) if self.seeds is not None else list(range(self.seeds_per_trial))
