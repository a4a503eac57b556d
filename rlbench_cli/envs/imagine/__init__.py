"""Language-conditioned environments of ImagineBench's protocol, registered with gymnasium on first use.

``rlbench/BabyAI-Lang-v0`` (minigrid) and ``rlbench/HalfCheetah-Lang-v0`` (MuJoCo). Each episode draws a
task of the env's ``level`` (``real``, ``rephrase``, ``easy``, ``hard``; see ``tasks``); the
observation is the flat state vector followed by the instruction's embedding (``encoder``: rlbench's
default, or a local model folder), so offline algorithms run on it unchanged; ``info["success"]`` says at
an episode's last step whether the instruction was carried out, and ``info["instruction"]`` gives its words.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LANG_ENVS", "LANG_LEVELS", "check_kwargs", "register", "lang_levels"]

# the instruction levels every language task has, ImagineBench's: the training instructions, the same tasks
# worded differently, new simple tasks, new composed tasks
LANG_LEVELS = ("real", "rephrase", "easy", "hard")

LANG_ENVS = {
    "rlbench/BabyAI-Lang-v0": "rlbench_cli.envs.imagine.babyai:make_babyai",
    "rlbench/HalfCheetah-Lang-v0": "rlbench_cli.envs.imagine.cheetah:make_cheetah",
}
_done = False


def register() -> None:
    """Register the language envs with gymnasium (once; entry points are strings, nothing heavy runs)."""
    global _done
    if _done:
        return
    import gymnasium

    for env_id, entry in LANG_ENVS.items():
        if env_id not in gymnasium.envs.registry:
            gymnasium.register(id=env_id, entry_point=entry, disable_env_checker=True)
    _done = True


def check_kwargs(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """A problem with a language env's ``level`` or ``encoder`` kwarg (or its missing package), or None."""
    if env_id not in LANG_ENVS:
        return None
    import importlib.util

    from .encoder import check_encoder

    needs = "minigrid" if "BabyAI" in env_id else "mujoco"
    if importlib.util.find_spec(needs) is None:
        return f"{env_id} needs the {needs} package; install it with: pip install 'rlbench-cli[imagine]'"
    level = kwargs.get("level")
    if level is not None and level not in LANG_LEVELS:
        return f"unknown instruction level {level!r}; choose one of: {', '.join(LANG_LEVELS)} (or leave it out for all)"
    return check_encoder(kwargs.get("encoder"))


def lang_levels(env_id: str, kwargs: dict | None = None) -> tuple[str, ...]:
    """The levels an evaluation in ``env_id`` covers: all four for a language env whose kwargs fix no
    ``level``, that one where they do, none for any other env."""
    if env_id not in LANG_ENVS:
        return ()
    level = (kwargs or {}).get("level")
    return (level,) if level else LANG_LEVELS
