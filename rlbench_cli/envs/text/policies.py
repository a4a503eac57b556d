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


def _textnav(quality: str, rng: _random.Random) -> Policy:
    """Optimal: LMRL-Gym's walkthrough (walk to the living room, take the stale food, walk to the kitchen,
    open the fridge, insert the food, close it); random: a uniformly random admissible command."""
    from .textnav import admissible_from, shortest_path

    def act(obs: str, info: dict[str, Any]) -> str:
        if quality == "random" or (quality == "noisy" and rng.random() < NOISE):
            return rng.choice(admissible_from(obs))
        room, holding, fridge_open = info["room"], info["holding"], info["fridge_open"]
        if info["stale_food_in_fridge"]:
            return "close fridge"
        if "stale food" not in holding:
            if room != "living room":
                return "go " + shortest_path(room, "living room")[0]
            return "take stale food from table"
        if room != "kitchen":
            return "go " + shortest_path(room, "kitchen")[0]
        return "insert stale food into fridge" if fridge_open else "open fridge"

    return act


def _guessing(quality: str, rng: _random.Random) -> Policy:
    """Twenty Questions / Guess My City. Optimal: the unasked attribute question that splits the remaining
    candidates most evenly, then the guess once one is left; random: any question or guess."""
    from .oracle import CITIES, QUESTIONS, WORDS, guess_question

    state: dict[str, Any] = {}

    def act(obs: str, info: dict[str, Any]) -> str:
        task = info["task"]
        table, questions = (WORDS if task == "twenty_questions" else CITIES), QUESTIONS[task]
        if "reply" not in info:  # a new episode
            state.update(candidates=sorted(table), asked=set(), last=None)
        elif state["last"] in questions:
            attr, yes = state["last"], info["reply"].lower().startswith("yes")
            state["candidates"] = [c for c in state["candidates"] if (attr in table[c]) == yes]
        options = list(questions.values()) + [guess_question(task, n) for n in sorted(table)]
        if quality == "random" or (quality == "noisy" and rng.random() < NOISE):
            choice = rng.choice(options)
            state["last"] = next((a for a, q in questions.items() if q == choice), None)
            return choice
        cands = state["candidates"] or sorted(table)
        if len(cands) == 1:
            state["last"] = None
            return guess_question(task, cands[0])
        best = min(
            (a for a in questions if a not in state["asked"]),
            key=lambda a: abs(2 * sum(a in table[c] for c in cands) - len(cands)),
            default=None,
        )
        if best is None or all(best in table[c] for c in cands) or not any(best in table[c] for c in cands):
            state["last"] = None
            return guess_question(task, rng.choice(cands))
        state["asked"].add(best)
        state["last"] = best
        return questions[best]

    return act


def _car_dealer(quality: str, rng: _random.Random) -> Policy:
    """Optimal: start high ($45,000) and come down $3,000 a turn until the buyer takes it; random: any
    price of the offer list."""

    state = {"turn": 0}

    def act(obs: str, info: dict[str, Any]) -> str:
        state["turn"] = 0 if "reply" not in info else state["turn"] + 1
        if quality == "random" or (quality == "noisy" and rng.random() < NOISE):
            return f"I can sell it to you for ${rng.randrange(15, 51) * 1000:,}."
        return f"I can sell it to you for ${max(15, 45 - 3 * state['turn']) * 1000:,}."

    return act


DEPTH = 12


class _ChessPolicy:
    """Optimal: Stockfish at full strength (its own engine, searching ``DEPTH`` plies: deterministic, unlike a
    time limit on a busy machine); random: a uniformly random legal
    move. The engine starts on the first optimal move; ``close()`` stops it."""

    def __init__(self, quality: str, rng: _random.Random) -> None:
        self.quality, self.rng, self.engine = quality, rng, None

    def __call__(self, obs: str, info: dict[str, Any]) -> str:
        import chess

        board = chess.Board(info["fen"])
        if self.quality == "random" or (self.quality == "noisy" and self.rng.random() < NOISE):
            return board.san(self.rng.choice(sorted(board.legal_moves, key=str)))
        if self.engine is None:
            from .chess_env import _open_engine

            self.engine = _open_engine(info["stockfish"], elo=None, skill_level=None)
        return board.san(chess.Move.from_uci(self.engine.best_move(board.fen(), depth=DEPTH)))

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.quit()


_FACTORIES: dict[str, Callable[[str, _random.Random], Any]] = {
    "rlbench/MazeFO-v0": _maze,
    "rlbench/MazePO-v0": _maze,
    "rlbench/Wordle-v0": _wordle,
    "rlbench/TextNav-v0": _textnav,
    "rlbench/Chess-v0": _ChessPolicy,
    "rlbench/TwentyQuestions-v0": _guessing,
    "rlbench/GuessMyCity-v0": _guessing,
    "rlbench/CarDealer-v0": _car_dealer,
    "rlbench/Endgames-v0": _ChessPolicy,
}


def scripted_policy(env_id: str, quality: str, seed: int = 0) -> Policy:
    """A scripted policy for ``env_id`` of ``quality`` (optimal, noisy, random), seeded."""
    if quality not in QUALITIES:
        raise ValueError(f"policy quality {quality!r}: choose one of {', '.join(QUALITIES)}")
    if env_id not in _FACTORIES:
        raise ValueError(f"no scripted policy for {env_id!r}; known: {', '.join(sorted(_FACTORIES))}")
    return _FACTORIES[env_id](quality, _random.Random(seed))
