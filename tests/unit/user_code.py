"""A user's module of entrypoints for one test: written to the test's folder, importable by its name while the
test runs, forgotten after it (the module and ``entrypoint_packs``' cache of which functions pack)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: str) -> Iterator[None]:
    """For a fixture to ``yield from``: module ``name`` holding ``code``, until the test ends."""
    from rlbench_cli.algos.entrypoint import entrypoint_packs

    (tmp_path / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    entrypoint_packs.cache_clear()
    yield
    sys.modules.pop(name, None)
    entrypoint_packs.cache_clear()
