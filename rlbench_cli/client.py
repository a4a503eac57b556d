"""The tiny metrics client for ``command:`` runs: your script logs, rlbench stores.

Inside a run started by ``rlbench run``, ``RLBENCH_METRICS`` names a JSON-lines file; each line is
``{"step": 1000, "eval/return": 123.4, ...}``. This module writes such lines (standard library only, so it
imports in any environment); a script can as well write them itself, or log with TensorBoard's
SummaryWriter: event files under the run's folder are read too. Outside rlbench, logging does nothing.

    from rlbench_cli import client
    client.log(global_step, **{"eval/return": mean_return, "train/loss/value": v_loss})
"""

from __future__ import annotations

import json
import math
import os

__all__ = ["log", "ENV_VAR"]

ENV_VAR = "RLBENCH_METRICS"
_fh = None


def log(step: int, **values: float) -> None:
    """Append one line of metrics at ``step``; flushed at once so nothing is lost if the script dies."""
    global _fh
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    if _fh is None:
        _fh = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the script
    clean = {k: (float(v) if math.isfinite(float(v)) else str(float(v))) for k, v in values.items()}
    _fh.write(json.dumps({"step": int(step), **clean}) + "\n")
