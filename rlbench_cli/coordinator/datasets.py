"""The suite's datasets on disk before its runs start (``rlbench run`` builds the generated ones missing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..suite.models import Suite

__all__ = ["prepare_datasets"]


def prepare_datasets(
    suite: Suite, source: str = "<suite>", report: Callable[[str, dict[str, Any]], None] = lambda e, i: None
) -> dict[str, list[float]]:
    """Make sure every dataset of ``suite`` is on disk, building the generated ones that are missing (their
    behaviour policy is trained once per environment and reused), and point the workers at them
    (``RLBENCH_DATASETS``, absolute). Returns {dataset: [random return, expert return]} for the datasets that
    record their references: an offline suite is normalised by them (D4RL's convention, x 100). Which kind of
    dataset a name means, and its files, are datagen's."""
    from ..datagen import prepare
    from ..executors.base import detect_gpus

    return prepare(suite, source, report, gpus=detect_gpus)
