"""LMRL-Gym's Maze: the double-T maze, fully (``MazeFO``) and partially (``MazePO``) observed.

As in LMRL-Gym (llm_rl_scripts/maze/env): a 10 x 13 grid (1 = wall), the goal at (8, 6), the start drawn
uniformly among the other free cells (or ``options={"init_position": (r, c)}``). Actions are ``move up``,
``move down``, ``move left``, ``move right`` (a trailing newline, as LMRL-Gym writes them, is accepted).
Reward (LMRL-Gym's ``standard_reward``): 0 for the step that reaches the goal, -4 for a text that is not one of
the four moves (an invalid action: nothing moves), -1 for any other step (a move into a wall leaves the agent
where it is). The episode ends at the goal (terminated) or after 100 steps (truncated), where LMRL-Gym's
extra "Failure" step costs -1 more: so returns lie in [-401, 0] and a random walk scores about -101.

Observations (LMRL-Gym's text): fully observed, ``describe_observation_give_position``::

    The goal is at position 8, 6. Your current position is at position 1, 2. There are walls above you, below you.

with multi-digit coordinates spelt digit by digit (``1 0``) as LMRL-Gym does. Partially observed,
``describe_observation_only_walls`` (``There are walls above you, below you.``), and the observation is the
whole history so far: each observation and action on its own line.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from .base import TextEnv

__all__ = ["MAZE", "GOAL", "ACTIONS", "MazeFO", "MazePO", "optimal_moves", "describe_fo", "describe_po"]

MAZE = np.array(
    [
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1],
        [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1],
        [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1],
        [1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1],
        [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    ],
    dtype=np.uint8,
)
GOAL = (8, 6)
MAX_STEPS = 100
ACTIONS: dict[str, tuple[int, int]] = {
    "move left": (0, -1),
    "move right": (0, 1),
    "move up": (-1, 0),
    "move down": (1, 0),
}
_DIRECTIONS = {"to your right": (0, 1), "to your left": (0, -1), "above you": (-1, 0), "below you": (1, 0)}
FREE = [tuple(int(v) for v in p) for p in np.argwhere(MAZE == 0)]


def _digits(n: int) -> str:
    return " ".join(str(n))


def _walls(pos: tuple[int, int]) -> str:
    walls = [k for k, (dr, dc) in _DIRECTIONS.items() if MAZE[pos[0] + dr, pos[1] + dc] == 1]
    if not walls:
        return "There are no walls near you."
    if len(walls) == 1:
        return f"There is a wall {walls[0]}."
    return f"There are walls {', '.join(walls)}."


def describe_fo(pos: tuple[int, int], goal: tuple[int, int] = GOAL) -> str:
    return (
        f"The goal is at position {_digits(goal[0])}, {_digits(goal[1])}. "
        f"Your current position is at position {_digits(pos[0])}, {_digits(pos[1])}. {_walls(pos)}"
    )


def describe_po(pos: tuple[int, int]) -> str:
    return _walls(pos)


def optimal_moves(goal: tuple[int, int] = GOAL) -> dict[tuple[int, int], str]:
    """The shortest-path move from every free cell (breadth-first search from the goal)."""
    names = {v: k for k, v in ACTIONS.items()}
    policy: dict[tuple[int, int], str] = {}
    queue, seen = deque([goal]), {goal}
    while queue:
        r, c = queue.popleft()
        for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
            nxt = (r + dr, c + dc)
            if nxt in seen or MAZE[nxt] == 1:
                continue
            seen.add(nxt)
            queue.append(nxt)
            policy[nxt] = names[(-dr, -dc)]
    return policy


def parse_action(action: str) -> str | None:
    a = " ".join(str(action).strip().lower().split())
    return a if a in ACTIONS else None


class _Maze(TextEnv):
    partially_observed = False

    def __init__(self, max_steps: int = MAX_STEPS) -> None:
        super().__init__()
        self.max_steps = int(max_steps)
        self.position: tuple[int, int] = (1, 1)
        self.steps = 0
        self.history: list[str] = []

    def _describe(self) -> str:
        return describe_po(self.position) if self.partially_observed else describe_fo(self.position)

    def _observation(self) -> str:
        self._last_obs = "\n".join(self.history) if self.partially_observed else self.history[-1]
        return self._last_obs

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"position": self.position, "steps": self.steps, **extra}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        start = (options or {}).get("init_position")
        if start is not None:
            start = tuple(int(v) for v in start)
            if start not in FREE or start == GOAL:
                raise ValueError(f"init_position {start} is not a free cell other than the goal {GOAL}")
        else:
            cells = [p for p in FREE if p != GOAL]
            start = cells[int(self.np_random.integers(len(cells)))]
        self.position, self.steps = start, 0
        self.history = [self._describe()]
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        move = parse_action(action)
        self.steps += 1
        if move is None:
            reward = -4.0
        else:
            dr, dc = ACTIONS[move]
            nxt = (self.position[0] + dr, self.position[1] + dc)
            if MAZE[nxt] == 0:
                self.position = nxt
            reward = 0.0 if self.position == GOAL else -1.0
        self.history.append(move if move is not None else str(action).strip())
        if self.position == GOAL:
            self.history.append("Success")
            return self._observation(), reward, True, False, self._info(success=True, invalid=move is None)
        if self.steps >= self.max_steps:
            self.history.append("Failure")
            return (
                self._observation(),
                reward - 1.0,
                False,
                True,
                self._info(success=False, invalid=move is None),
            )
        self.history.append(self._describe())
        return self._observation(), reward, False, False, self._info(invalid=move is None)

    def valid_actions(self) -> list[str]:
        return list(ACTIONS)


class MazeFO(_Maze):
    """Fully observed: the goal, the position and the walls around it."""


class MazePO(_Maze):
    """Partially observed: only the walls around; the observation is the history of walls and moves."""

    partially_observed = True
