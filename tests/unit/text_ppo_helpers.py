"""Text ppo runs in process on tiny models, as the warm-start and pre-training tests make them."""

from __future__ import annotations

import torch

from rlbench_cli.algos import get_algorithm
from rlbench_cli.algos.base import RunContext
from rlbench_cli.suite.grid import RunSpec

TINY = {"n_embd": 16, "n_layer": 1, "n_head": 1, "batch_size": 4, "max_context": 96}
PPO = {**TINY, "num_envs": 2, "n_steps": 4, "vocab_episodes": 2}


def maze_dataset(folder, episodes: int) -> str:
    """A generated Maze FO mixed dataset of ``episodes`` episodes, as a JSONL file in ``folder``."""
    from rlbench_cli.datagen.text import build_text_dataset, save_text_dataset

    path = folder / "maze.jsonl"
    save_text_dataset(build_text_dataset("rlbench/MazeFO-v0", "mixed", episodes, seed=0), path)
    return str(path)


def run_ppo(params: dict, steps: int = 8) -> list[tuple[int, dict]]:
    """Text ppo on a 6-turn Maze FO, seed 3, evaluations every 4 turns: every row its sink was given."""
    torch.set_num_threads(1)
    spec = RunSpec(suite="t", algo="ppo", algo_name="ppo", params=params, env_id="rlbench/MazeFO-v0",
                   env_kwargs={"max_steps": 6}, seed=3,
                   budget={"steps": steps, "eval_every": 4, "eval_episodes": 2})  # fmt: skip
    rows: list[tuple[int, dict]] = []

    class Sink:
        def log(self, step, **values):
            rows.append((step, values))

        def log_many(self, step, values):
            rows.append((step, dict(values)))

    get_algorithm("ppo", spec.env_id)().train(RunContext(spec=spec, sink=Sink()))
    return rows
