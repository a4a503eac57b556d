"""Text environments after LMRL-Gym (Abdulhai et al., 2023): observations and actions are strings.

Registered with gymnasium on first use (``register()``, called by ``rlbench_cli.envs``) under ``rlbench/<Name>-v0``.
This module imports nothing heavy; each env's module is imported when the env is made.

Every env's ``reset()`` returns ``(str, info)`` and ``step(str)`` returns ``(str, float, terminated, truncated,
info)``; the observation is the text a multi-turn policy conditions on. ``env.unwrapped.valid_actions()`` lists
the candidate actions (None where the action set is open).
"""

from __future__ import annotations

__all__ = ["TEXT_ENVS", "ORACLE_ENVS", "register", "short_name"]

# gymnasium id -> entry point
TEXT_ENVS: dict[str, str] = {
    "rlbench/MazeFO-v0": "rlbench_cli.envs.text.maze:MazeFO",
    "rlbench/MazePO-v0": "rlbench_cli.envs.text.maze:MazePO",
    "rlbench/Wordle-v0": "rlbench_cli.envs.text.wordle:WordleEnv",
    "rlbench/TextNav-v0": "rlbench_cli.envs.text.textnav:TextNavEnv",
    "rlbench/Endgames-v0": "rlbench_cli.envs.text.chess_env:EndgamesEnv",
    "rlbench/Chess-v0": "rlbench_cli.envs.text.chess_env:ChessEnv",
    "rlbench/TwentyQuestions-v0": "rlbench_cli.envs.text.oracle:TwentyQuestionsEnv",
    "rlbench/GuessMyCity-v0": "rlbench_cli.envs.text.oracle:GuessMyCityEnv",
    "rlbench/CarDealer-v0": "rlbench_cli.envs.text.oracle:CarDealerEnv",
}
ORACLE_ENVS = ("rlbench/TwentyQuestions-v0", "rlbench/GuessMyCity-v0", "rlbench/CarDealer-v0")


def short_name(env_id: str) -> str:
    """``rlbench/MazeFO-v0`` -> ``MazeFO-v0`` (the form dataset names use: names hold no '/')."""
    return env_id.split("/", 1)[1] if env_id.startswith("rlbench/") else env_id


def register() -> None:
    """Register every text env with gymnasium (idempotent)."""
    import gymnasium

    for env_id, entry in TEXT_ENVS.items():
        if env_id not in gymnasium.envs.registry:
            gymnasium.register(id=env_id, entry_point=entry, disable_env_checker=True)
