"""Datasets' names and their parsing, and where generated datasets live; a leaf of ``datasets`` that the
others import.

A dataset rlbench generates is named ``<EnvId>-<level>`` (``CartPole-v1-medium``, ``LEVELS``) and lives in the
datasets folder (``RLBENCH_DATASETS``, default ``results/datasets``) as ``<name>.hdf5`` (collected in a wrapped
env: ``<name>+<Wrapper>.hdf5``). A text env's is named ``<EnvName>-<level>`` with the env's name without its
``rlbench/`` prefix (dataset names hold no '/'; ``TEXT_LEVELS``) and lives there as ``<name>.jsonl``. A user's
own file is named by its path. An ``<EnvId>-imagine`` dataset's real rollouts ``<name>.hdf5`` have their
imagined rollouts beside them as ``<name>.imagined.hdf5`` and the oracle's (real rollouts of the new
instructions) as ``<name>.oracle.hdf5``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..envs.families import is_text_env
from ..envs.text import short_name

__all__ = [
    "IMAGINE_BUILD_DEFAULTS",
    "IMAGINED_SUFFIX",
    "LEVELS",
    "ORACLE_SUFFIX",
    "TEXT_LEVELS",
    "datasets_root",
    "generated_file_stem",
    "generated_name",
    "parse_generated_name",
    "parse_text_name",
    "text_dataset_name",
]

LEVELS = ("random", "medium", "expert", "medium-replay", "medium-expert", "conservative")
_GENERATED = re.compile(
    r"^(?P<env>.+?)-(?P<level>medium-replay|medium-expert|random|medium|expert|conservative)$"
)


def generated_name(env_id: str, level: str) -> str:
    return f"{env_id}-{level}"


def generated_file_stem(name: str, wrappers: list[dict[str, Any]] | None = None) -> str:
    """A generated dataset's file name without suffix: its name, plus ``+Wrapper`` per wrapper of the env it
    was collected in (``Pendulum-v1-conservative+Delay``)."""
    return name + "".join(f"+{w['name'].rpartition(':')[2]}" for w in wrappers or [])


def parse_generated_name(name: str) -> tuple[str, str] | None:
    """``CartPole-v1-medium-replay`` -> (``CartPole-v1``, ``medium-replay``); a text env's dataset
    ``MazeFO-v0-mixed`` -> (``rlbench/MazeFO-v0``, ``mixed``) (``datasets.text``); None if not such a name."""
    text = parse_text_name(name)
    if text is not None:
        return text
    m = _GENERATED.match(name)
    return (m.group("env"), m.group("level")) if m else None


TEXT_LEVELS = ("optimal", "noisy", "mixed", "random")
_TEXT = re.compile(r"^(?P<env>[A-Za-z0-9_.]+-v\d+)-(?P<level>optimal|noisy|mixed|random)$")


def text_dataset_name(env_id: str, level: str) -> str:
    return f"{short_name(env_id)}-{level}"


def parse_text_name(name: str) -> tuple[str, str] | None:
    """``MazeFO-v0-mixed`` -> (``rlbench/MazeFO-v0``, ``mixed``); None if not a generated text dataset name."""
    m = _TEXT.match(name)
    if not m or not is_text_env(f"rlbench/{m.group('env')}"):
        return None
    return f"rlbench/{m.group('env')}", m.group("level")


def datasets_root() -> Path:
    """Where generated datasets live: ``$RLBENCH_DATASETS`` or ``results/datasets``."""
    return Path(os.environ.get("RLBENCH_DATASETS") or "results/datasets")


# a dataset <name> of real rollouts has its imagined rollouts next to it as <name>.imagined.hdf5
IMAGINED_SUFFIX = ".imagined.hdf5"
ORACLE_SUFFIX = ".oracle.hdf5"  # real rollouts of the new instructions (datagen.imagine.build_oracle)

# how an <EnvId>-imagine dataset is built, recorded in its file: a suite asking for other settings is refused
# (datagen.imagine.settings_problem), never trained on a dataset other than the one it describes
IMAGINE_BUILD_DEFAULTS: dict[str, Any] = {
    "real_episodes": 200,  # bot episodes of real-level instructions
    "imagined_episodes": 60,  # generated episodes per new level (rephrase, easy, hard)
    "generator_steps": 300,  # generator updates
    "generator_layers": 2,
    "generator_width": 64,
    "horizon": 40,  # longest imagined episode
}
