"""Scripted policies for the text envs, of several qualities, to generate offline datasets and reference scores.

``scripted_policy(env_id, quality, seed)`` returns a callable ``(observation, info) -> action`` (a string);
one that holds a resource (the chess policies' engine) has ``close()``.
Qualities: ``optimal`` (the env's best scripted play), ``noisy`` (optimal, but a random valid action with
probability ``NOISE``), ``random`` (a uniformly random valid action). A policy may read the env's ``info``
(scripted policies are privileged; a learned one sees only the observation).
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from typing import Any

__all__ = ["QUALITIES", "NOISE", "Policy", "scripted_policy"]

QUALITIES = ("optimal", "noisy", "random")
NOISE = 0.3
Policy = Callable[[str, dict[str, Any]], str]


def _maze(quality: str, rng: _random.Random) -> Policy:
    from .maze import ACTIONS, optimal_moves

    best, moves = optimal_moves(), list(ACTIONS)

    def act(obs: str, info: dict[str, Any]) -> str:
        if quality == "random" or (quality == "noisy" and rng.random() < NOISE):
            return rng.choice(moves)
        return best[tuple(info["position"])]

    return act


def _wordle(quality: str, rng: _random.Random) -> Policy:
    """Optimal: a word consistent with every feedback so far (uniformly among them); random: any word."""
    from .wordle import feedback

    state: dict[str, Any] = {"seen": 0, "candidates": []}

    def act(obs: str, info: dict[str, Any]) -> str:
        words, history = info["words"], info["history"]
        if not history:
            state["seen"], state["candidates"] = 0, list(words)
        if quality == "random" or (quality == "noisy" and rng.random() < NOISE):
            return rng.choice(words)
        for guess, fb in history[state["seen"] :]:  # narrow by the feedback not seen yet
            state["candidates"] = [w for w in state["candidates"] if feedback(guess, w) == fb]
        state["seen"] = len(history)
        return rng.choice(state["candidates"] or list(words))

    return act


class _ChessPolicy:
    """Optimal: Stockfish at full strength (its own engine, 20 ms a move); random: a uniformly random legal
    move. The engine starts on the first optimal move; ``close()`` stops it."""

    def __init__(self, quality: str, rng: _random.Random) -> None:
        self.quality, self.rng, self.engine = quality, rng, None

    def __call__(self, obs: str, info: dict[str, Any]) -> str:
        import chess
        import chess.engine

        board = chess.Board(info["fen"])
        if self.quality == "random" or (self.quality == "noisy" and self.rng.random() < NOISE):
            return board.san(self.rng.choice(sorted(board.legal_moves, key=str)))
        if self.engine is None:
            from .chess_env import _open_engine

            self.engine = _open_engine(info["stockfish"], elo=None, skill_level=None)
        return board.san(self.engine.play(board, chess.engine.Limit(time=0.02)).move)

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.quit()


_FACTORIES: dict[str, Callable[[str, _random.Random], Any]] = {
    "rlbench/MazeFO-v0": _maze,
    "rlbench/MazePO-v0": _maze,
    "rlbench/Wordle-v0": _wordle,
    "rlbench/Chess-v0": _ChessPolicy,
    "rlbench/Endgames-v0": _ChessPolicy,
}


def scripted_policy(env_id: str, quality: str, seed: int = 0) -> Policy:
    """A scripted policy for ``env_id`` of ``quality`` (optimal, noisy, random), seeded."""
    if quality not in QUALITIES:
        raise ValueError(f"policy quality {quality!r}: choose one of {', '.join(QUALITIES)}")
    if env_id not in _FACTORIES:
        raise ValueError(f"no scripted policy for {env_id!r}; known: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[env_id](quality, _random.Random(seed))
