"""What makes a run reproducible besides its config, recorded with each attempt: code version (git commit,
dirty or not), interpreter, package versions, host."""

from __future__ import annotations

import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["manifest_base", "PACKAGES"]

PACKAGES = ("rlbench-cli", "torch", "gymnasium", "d3rlpy", "numpy", "duckdb", "rliable", "transformers")


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def manifest_base(cwd: Path) -> dict[str, Any]:
    """What makes a run reproducible, besides its config: code version, interpreter, packages, host."""
    from importlib import metadata

    pkgs = {}
    for name in PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    commit = _git(["rev-parse", "HEAD"], cwd)
    dirty = None
    if commit is not None:
        status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
        dirty = bool(status)
    return {
        "host": socket.gethostname(),
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "packages": pkgs,
    }
