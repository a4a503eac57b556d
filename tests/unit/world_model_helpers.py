"""A kept text world model's JSON files, as the saved-world-model tests write them (no weights, no torch)."""

from __future__ import annotations

import json

MAZE = "rlbench/MazeFO-v0"


def json_model(folder, algo="text_world_model", env=MAZE, settings=None, tokens=("<pad>",)):
    """A kept policy's two JSON files as ``algos.keep`` and ``TextPolicy.save`` write them (no weights)."""
    (folder / "model").mkdir(parents=True)
    if settings is None:
        settings = {"outcome": "full", "policy_weight": 1.0}
    meta = {"tokenizer": {"kind": "text", "tokens": list(tokens)}, "settings": settings}
    (folder / "model" / "rlbench-text-policy.json").write_text(json.dumps(meta))
    info = {"format": "rlbench-saved-policy-1", "loader": "text.policy:load_policy", "file": "model",
            "algo": algo, "env_id": env}  # fmt: skip
    (folder / "policy.json").write_text(json.dumps(info))
    return folder
