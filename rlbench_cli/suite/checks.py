"""A validated suite checked against the registries that need more than its own fields: gymnasium's (envs,
wrappers and their kwargs, ``envs``), the env families' kwargs checks (``envs.families``) and local
pretrained checkpoints (a ``pretrained`` param names a local folder: nothing is downloaded) and saved world
models (``world_model:``, ``suite.world_models``). Each problem is one ``SuiteInvalid`` line naming the file and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..algos.registry import ALGORITHMS, pretrainable, warm_startable
from ..envs import known_env, known_wrapper, wrapper_kwargs_problem
from ..envs.families import is_text_env, kwargs_problem
from ..envs.gymnax import drawn_in
from ..errors import SuiteInvalid
from ..references import lmrl_row_kwargs
from .models import Suite, WrapperSpec
from .world_models import CHANNELS, env_problem, find_world_model

__all__ = ["TEXT_MIXES", "check_pretrained", "check_suite", "printable", "warm_start_dataset"]

WARM_START_LEVEL = "mixed"  # the generated dataset a warm start's world model learns from when none is named


def check_pretrained(path: Any, where: str = "params.pretrained") -> str | None:
    """None when ``path`` is unset or a folder that exists, else a one-line problem naming the setting."""
    if path in (None, ""):
        return None
    p = Path(str(path)).expanduser()
    if not p.exists():
        return (
            f"{where}: no checkpoint at {p}; give a local folder saved with save_pretrained(), or remove it"
        )
    if not p.is_dir():
        return f"{where}: {p} is a file; give the folder a transformers model was saved to with save_pretrained()"
    return None


def printable(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, so that a message stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _check_wrappers(wrappers: list[WrapperSpec], where: str) -> None:
    """Each wrapper exists and takes its kwargs; ``where`` is "<file>: field 'envs[0].wrappers"."""
    for j, w in enumerate(wrappers):
        problem = known_wrapper(w.name)
        if problem:
            raise SuiteInvalid(f"{where}[{j}]': {problem}")
        problem = wrapper_kwargs_problem(w.name, w.kwargs)
        if problem:
            raise SuiteInvalid(f"{where}[{j}].kwargs': {printable(problem)}")


def _check_videos(suite: Suite, path: str) -> None:
    """``video_every`` only where frames can be drawn: a gymnax task's in its gymnasium version
    (``envs.gymnax.drawn_in``); the field named is the budget that sets it (an algorithm's, an env's, the
    suite's)."""
    for i, a in enumerate(suite.algorithms):
        for j, env in enumerate(suite.envs):
            if not a.runs_on(env) or not suite.run_budget(a, env).get("video_every"):
                continue
            try:
                drawn_in(env.id)
            except ValueError as e:
                where = next((f"{name}.budget.video_every" for name, b in
                              ((f"algorithms[{i}]", a.budget), (f"envs[{j}]", env.budget))
                              if b is not None and b.video_every), "budget.video_every")  # fmt: skip
                raise SuiteInvalid(f"{path}: field '{where}': {e}; set video_every in the budget: of the tasks "
                                   "that have one, or remove it") from None  # fmt: skip


TEXT_MIXES = ("real", "imagined", "real+imagined")  # a text dataset's data_mix (algos.text.imagined)


def _check_text_mixes(suite: Suite, path: str) -> None:
    """A text dataset's ``data_mix`` is real, imagined or real+imagined, and a mix with imagined episodes
    needs a world model to imagine them: ``imagination:`` in the params of every algorithm entry that runs on
    it (or swept), the ``algos.text.imagined`` channel."""
    for j, ds in enumerate(suite.datasets):
        if not ds.mixes or not is_text_env(ds.env or ""):
            continue
        bad = next((m for m in ds.mixes if m not in TEXT_MIXES), None)
        if bad is not None:
            raise SuiteInvalid(f"{path}: field 'datasets[{j}].data_mix': {bad} on a text dataset; its mixes are "
                               f"{', '.join(TEXT_MIXES)} (imagined episodes come from a world model the run "
                               "trains)")  # fmt: skip
        mix = next((m for m in ds.mixes if "imagined" in m), None)
        if mix is None:
            continue
        for i, a in enumerate(suite.algorithms):
            label = a.label or a.name
            if a.entrypoint or a.command or not a.runs_on(ds):
                continue
            if "imagination" not in a.params and f"{label}.imagination" not in suite.sweep:
                raise SuiteInvalid(f"{path}: field 'algorithms[{i}].params.imagination': datasets[{j}] "
                                   f"({ds.name}) has data_mix {mix}, and {label} has no world model to imagine "
                                   "episodes with; add imagination: {world_model_steps: 300} (bc, filtered_bc, "
                                   "mc_returns, ilql) or use data_mix: real")  # fmt: skip


def warm_start_dataset(env_id: str, given: Any) -> str:
    """The dataset a ``warm_start`` on ``env_id`` trains its world model on: ``given`` (a dataset name, or a
    path to a JSONL file of the env's episodes), else the env's generated ``<EnvName>-mixed``."""
    from ..datasets.names import text_dataset_name

    return str(given) if given not in (None, "") else text_dataset_name(env_id, WARM_START_LEVEL)


def _number(value: Any) -> float | None:
    """``value`` as a number (YAML 1.1 reads ``1e3`` as a string), None when it is none: the algorithm's own
    check names a value it cannot take."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _warm_start_problem(suite: Suite, i: int) -> str | None:
    """What is wrong with ``algorithms[i].params.warm_start`` in ``suite`` (the field first), or None: an
    algorithm or env that takes no warm start, no dataset of the run's env to train the world model on, or
    more imagined steps than the run's own budget.steps (see ``algos.text.warm_start``)."""
    a, where = suite.algorithms[i], f"algorithms[{i}].params.warm_start"
    ws = a.params["warm_start"]
    takers = ", ".join(warm_startable())
    if a.entrypoint or a.command or not ALGORITHMS[a.name].warm_start:
        return f"{where}: {a.name} does not take it; warm start is an option of {takers} on a text env"
    if not isinstance(ws, dict):
        return f"{where}: must be a mapping, e.g. {{world_model_steps: 300, imagined_steps: 1000}}"
    for e in (e for e in suite.envs if a.runs_on(e)):
        if not is_text_env(e.id):
            return (
                f"{where}: a warm start learns inside a text world model and {e.id} is not a text env "
                f"(rlbench/MazeFO-v0, ...); give algorithms[{i}] an envs: list of text envs, or remove it"
            )
        problem = _text_dataset_problem(suite, where, e.id, ws.get("dataset"), "train the world model on")
        if problem:
            return problem
        steps, imagined = int(suite.run_budget(a, e)["steps"]), _number(ws.get("imagined_steps"))
        if imagined is not None and imagined > steps:
            return (
                f"{where}.imagined_steps: {imagined:g} imagined steps is more than the run's budget.steps "
                f"({steps}) on {e.label}; imagined steps come on top of the real ones and may be at most as "
                "many: lower imagined_steps or raise the budget's steps"
            )
    return None


def _text_dataset_problem(suite: Suite, where: str, env_id: str, given: Any, role: str) -> str | None:
    """What is wrong with the dataset a run on ``env_id`` reads for ``where`` (``warm_start``'s world model,
    ``pretrain``'s cloning): ``given`` or the env's generated ``<EnvName>-mixed``, which must be a JSONL file
    or a generated dataset of that env the suite lists (so ``rlbench run`` builds it first)."""
    names = {d.name: d for d in suite.datasets}
    field = where.rpartition(".")[2]
    ds = warm_start_dataset(env_id, given)
    if ds.endswith(".jsonl") or "/" in ds:
        if not Path(ds).expanduser().is_file():
            return f"{where}.dataset: no file at {ds}; give a JSONL file of {env_id}'s episodes or a dataset name"
    elif ds not in names:
        how = (
            f"{field}.dataset names one the suite does not list"
            if given
            else f"the suite has no dataset {ds}"
        )
        return (f"{where}: {env_id} has no dataset to {role} ({how}); add {ds} to the suite's datasets: (rlbench "
                f"run builds it) or name one of them in {field}.dataset")  # fmt: skip
    elif names[ds].path:
        return f"{where}.dataset: {ds} is a file of yours; give its path ({names[ds].path}) instead"
    elif names[ds].env != env_id:
        return (
            f"{where}.dataset: {ds} is a dataset of {names[ds].env}, not of {env_id}; name one of {env_id}'s"
        )
    return None


def _pretrain_problem(suite: Suite, i: int) -> str | None:
    """What is wrong with ``algorithms[i].params.pretrain`` in ``suite`` (the field first), or None: an entry
    that is not ppo, an env that is not a text env, or no dataset of the run's env to clone
    (``algos.text.pretrain``)."""
    a, where = suite.algorithms[i], f"algorithms[{i}].params.pretrain"
    pre = a.params["pretrain"]
    if a.entrypoint or a.command or not ALGORITHMS[a.name].pretrain:
        return f"{where}: {a.name} does not take it; pretrain is an option of {', '.join(pretrainable())} on a text env"
    if not isinstance(pre, dict):
        return f"{where}: must be a mapping, e.g. {{bc_steps: 500}}"
    for e in (e for e in suite.envs if a.runs_on(e)):
        if not is_text_env(e.id):
            return (f"{where}: behaviour cloning needs a text dataset and {e.id} is not a text env "
                    f"(rlbench/MazeFO-v0, ...); give algorithms[{i}] an envs: list of text envs, or remove it")  # fmt: skip
        problem = _text_dataset_problem(suite, where, e.id, pre.get("dataset"), "clone")
        if problem:
            return problem
    return None


def _world_model_problem(suite: Suite, i: int) -> str | None:
    """What is wrong with a saved world model that ``algorithms[i]`` names (``world_model:`` in its
    ``verifier``, ``imagination`` or ``warm_start``, or in a value of a sweep over one of them:
    ``sweep: {bc.verifier: [{world_model: A}, {world_model: B}]}``; ``suite.world_models``), the field first,
    or None: no such folder, no saved ``text_world_model`` in it, or one kept by a run on another env than a
    task it runs on."""
    a = suite.algorithms[i]
    label = a.label or a.name
    given = [(a.params.get(c), f"algorithms[{i}].params.{c}.world_model") for c in CHANNELS]
    for c in CHANNELS:  # sweep values replace the entry's whole setting (suite.grid.expand)
        values = suite.sweep.get(f"{label}.{c}") or []
        given += [(v, f"sweep.{label}.{c}[{j}].world_model") for j, v in enumerate(values)]
    tasks = [t for t in (*suite.envs, *suite.datasets) if a.runs_on(t)]
    env_ids = list(dict.fromkeys(str(getattr(t, "env", None) or getattr(t, "id", "")) for t in tasks))
    for value, where in given:
        if not isinstance(value, dict) or value.get("world_model") in (None, ""):
            continue
        try:
            saved = find_world_model(value["world_model"], where)
        except ValueError as e:
            return str(e)
        for env_id in env_ids:
            problem = env_problem(saved, env_id, where)
            if problem:
                return problem
    return None


def _check_reference_rows(suite: Suite, path: str) -> None:
    """A dataset played with env kwargs that make lmrl's reference row for it wrong (Wordle's ``word_list``:
    the row's dataset average and optimum were measured on the default list) needs its own references when the
    suite's scores may be normalised by the lmrl table (no normalize block: ``auto`` may choose it; or
    ``table: lmrl``; with ``low_from`` or ``high_from`` alone the row still gives the other end): its label
    names the dataset only, so the table would give it the row silently. An env's label carries its kwargs, and
    such a label has no row."""
    norm = suite.normalize
    # the row is used when the table is lmrl's (or auto may choose it), for each end no *_from measures
    if norm is not None and (norm.table != "lmrl" or (norm.low_from and norm.high_from)):
        return
    for i, ds in enumerate(suite.datasets):
        kwargs = lmrl_row_kwargs(ds.name, ds.kwargs)
        if not kwargs or (norm is not None and ds.label in norm.references):
            continue
        raise SuiteInvalid(f"{path}: field 'datasets[{i}].kwargs.{kwargs[0]}': lmrl's reference row for {ds.name} was "
                           f"measured without {kwargs[0]}, so its normalised scores would be wrong; give this task "
                           f"its own: normalize: {{table: lmrl, references: {{{ds.label}: [LOW, HIGH]}}}} (e.g. "
                           "the lowest return and the optimal policy's mean return on it)")  # fmt: skip


def check_suite(suite: Suite, path: str) -> None:
    """Raise SuiteInvalid for the first env, dataset env, env kwargs, wrapper or pretrained folder of ``suite``
    that its registry refuses; ``path`` is the suite file's, for the message."""
    for i, env in enumerate(suite.envs):
        problem = known_env(env.id)
        if problem:
            raise SuiteInvalid(f"{path}: field 'envs[{i}]': {problem}")
        problem = kwargs_problem(env.id, env.kwargs)
        if problem:
            raise SuiteInvalid(f"{path}: field 'envs[{i}].kwargs': {problem}")
        _check_wrappers(env.wrappers, f"{path}: field 'envs[{i}].wrappers")
    for i, ds in enumerate(suite.datasets):
        problem = known_env(ds.env or "")
        if problem:
            raise SuiteInvalid(f"{path}: field 'datasets[{i}].env': {problem}")
        problem = kwargs_problem(ds.env or "", ds.kwargs)
        if problem:
            raise SuiteInvalid(f"{path}: field 'datasets[{i}].kwargs': {problem}")
        if ds.wrappers and (ds.imagined or is_text_env(ds.env or "")):
            kind = "an <EnvId>-imagine dataset" if ds.imagined else "a text env's dataset"
            raise SuiteInvalid(f"{path}: field 'datasets[{i}].wrappers': {kind} takes no wrappers; wrap a "
                               "gymnasium env's dataset, or remove wrappers:")  # fmt: skip
        _check_wrappers(ds.wrappers, f"{path}: field 'datasets[{i}].wrappers")
    _check_videos(suite, path)
    _check_text_mixes(suite, path)
    _check_reference_rows(suite, path)
    for i, a in enumerate(suite.algorithms):  # a local pretrained checkpoint (text policies) must exist
        problem = check_pretrained(a.params.get("pretrained"), f"algorithms[{i}].params.pretrained")
        if problem:
            raise SuiteInvalid(f"{path}: field {problem}")
        problem = _warm_start_problem(suite, i) if "warm_start" in a.params else None
        problem = problem or (_pretrain_problem(suite, i) if "pretrain" in a.params else None)
        if problem:
            raise SuiteInvalid(f"{path}: field {printable(problem)}")
        problem = None if a.entrypoint or a.command else _world_model_problem(suite, i)
        if problem:
            raise SuiteInvalid(f"{path}: field {printable(problem)}")
