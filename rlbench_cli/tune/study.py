"""The Optuna side of ``rlbench tune``: the study's storage beside the database, samplers, the search space and
the algorithm entry each trial runs as. Optuna is imported here only, lazily (``rlbench-cli[tune]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..suite.models import AlgoSpec, Suite
from ..suite.tune import ParamSpace, TuneSpec

__all__ = [
    "optuna",
    "storage_path",
    "open_study",
    "entry_for",
    "trial_label",
    "TUNE_SUFFIX",
    "CONFIRM_SUFFIX",
]

TUNE_SUFFIX = ".tune"  # the search's runs are a suite of their own: NAME.tune
CONFIRM_SUFFIX = ".confirm"  # and the confirmation's: NAME.confirm


def optuna() -> Any:
    """The optuna module, or a one-line UsageError naming the install command."""
    try:
        import optuna as mod
    except ImportError:
        raise UsageError(
            "rlbench tune needs Optuna: pip install 'rlbench-cli[tune]' (or pip install optuna)"
        ) from None
    mod.logging.set_verbosity(mod.logging.WARNING)
    return mod


def storage_path(db: Path, suite: str) -> Path:
    """The study's journal: ``DB.tune/SUITE.journal`` beside the database (an append-only log that a killed
    process leaves readable)."""
    return Path(f"{db}.tune") / f"{suite}.journal"


def _distribution(opt: Any, space: ParamSpace) -> Any:
    d = opt.distributions
    lo_hi = space.values()
    if space.kind == "log":
        return d.FloatDistribution(lo_hi[0], lo_hi[1], log=True)
    if space.kind == "range":
        return d.FloatDistribution(lo_hi[0], lo_hi[1])
    if space.kind == "int":
        return d.IntDistribution(lo_hi[0], lo_hi[1])
    return d.CategoricalDistribution(lo_hi)


def distributions(spec: TuneSpec) -> dict[str, Any]:
    opt = optuna()
    return {name: _distribution(opt, space) for name, space in spec.params.items()}


def _sampler(opt: Any, spec: TuneSpec, seed: int) -> Any:
    s = opt.samplers
    if spec.sampler == "random":
        return s.RandomSampler(seed=seed)
    if spec.sampler == "tpe":
        return s.TPESampler(seed=seed, constant_liar=True)  # trials run in parallel batches
    if spec.sampler == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise UsageError(
                "tune.sampler cmaes needs the cmaes package: pip install 'rlbench-cli[tune]'"
            ) from None
        return s.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    grid = {name: (space.values() if space.kind == "choice" else list(range(space.values()[0], space.values()[1] + 1)))
            for name, space in spec.params.items()}  # fmt: skip
    return s.GridSampler(grid, seed=seed)


def _pruner(opt: Any, suite: Suite) -> Any:
    """Optuna's pruner for the suite's ``tune.pruner``: median (a trial below the median of the others at the same
    evaluation step, once a few are complete) or hyperband (resource: env steps, from the first evaluation to
    the budget)."""
    spec = suite.tune
    assert spec is not None
    if spec.pruner == "median":
        # as rl-baselines3-zoo: no pruning in the first third of a run's steps, nor before a few trials are complete
        return opt.pruners.MedianPruner(n_startup_trials=min(5, max(1, spec.trials // 4)),
                                        n_warmup_steps=int(suite.budget.steps) // 3)  # fmt: skip
    if spec.pruner == "hyperband":
        steps, every = (
            int(suite.budget.steps),
            int(suite.budget.eval_every or max(1, suite.budget.steps // 10)),
        )
        return opt.pruners.HyperbandPruner(min_resource=every, max_resource=steps, reduction_factor=3)
    return opt.pruners.NopPruner()


def open_study(db: Path, suite: Suite) -> Any:
    """The suite's study, created on first use, loaded as it was left otherwise (its trials, finished or not)."""
    assert suite.tune is not None
    opt = optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = storage_path(db, suite.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(path)))
    spec = suite.tune
    study = opt.create_study(study_name=suite.name, storage=storage, direction="maximize", load_if_exists=True,
                             sampler=opt.samplers.RandomSampler(0), pruner=_pruner(opt, suite))  # fmt: skip
    # the sampler's seed goes on from the trials already there: a study resumed after a kill does not replay
    # the random draws its first trials had (the same configurations again, under new trial numbers)
    study.sampler = _sampler(opt, spec, spec.seed + 1_000_003 * len(study.get_trials(deepcopy=False)))
    return study


def trial_label(label: str, number: int) -> str:
    return f"{label}[t{number:03d}]"


def entry_for(suite: Suite, label: str, params: dict[str, Any]) -> AlgoSpec:
    """The tuned entry with ``params`` over its own, shown as ``label``."""
    entry = suite.tuned_entry()
    return entry.model_copy(update={"label": label, "params": {**entry.params, **params}})


def derived_suite(suite: Suite, suffix: str, entries: list[AlgoSpec], seeds: list[int]) -> Suite:
    """The suite the search (``NAME.tune``) or the confirmation (``NAME.confirm``) records its runs in: the same
    tasks, budget, score rule and normalisation, with ``entries`` for algorithms and ``seeds``."""
    return suite.model_copy(update={"name": suite.name + suffix, "algorithms": entries, "seeds": list(seeds),
                                    "sweep": {}, "tune": None})  # fmt: skip
