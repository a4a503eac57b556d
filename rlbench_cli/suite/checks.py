"""A validated suite checked against the registries that need more than its own fields: gymnasium's (envs,
wrappers and their kwargs, ``envs``), the env families' kwargs checks (``envs.families``) and local
pretrained checkpoints (a ``pretrained`` param names a local folder: nothing is downloaded). Each problem is one ``SuiteInvalid`` line naming the file and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..envs import known_env, known_wrapper, wrapper_kwargs_problem
from ..envs.families import is_text_env, kwargs_problem
from ..envs.gymnax import drawn_in
from ..errors import SuiteInvalid
from .models import Suite, WrapperSpec

__all__ = ["TEXT_MIXES", "check_pretrained", "check_suite", "printable"]


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
    for i, a in enumerate(suite.algorithms):  # a local pretrained checkpoint (text policies) must exist
        problem = check_pretrained(a.params.get("pretrained"), f"algorithms[{i}].params.pretrained")
        if problem:
            raise SuiteInvalid(f"{path}: field {problem}")
