"""Algorithms for text tasks (the ``rlbench/...`` envs of ``envs.text`` and their datasets): transformer
policies built from a ``transformers`` config with a tokenizer built from the task's text (``policy``,
``tokenizer``), offline ``bc`` / ``filtered_bc`` / ``mc_returns`` / ``ilql`` (``offline``), online ``ppo``
(``ppo``) and ``online_filtered_bc`` (``online``), and ``text_world_model`` (``world_model``).

This module stays light (no torch): ``spec`` calls ``check_pretrained`` when it loads a suite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_pretrained"]


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
