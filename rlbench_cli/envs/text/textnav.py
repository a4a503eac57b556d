"""Text-Nav after LMRL-Gym (llm_rl_scripts/text_nav): a house of eight rooms, doors between them, objects on
tables and in containers; the task is "put the stale food on the table in the living room into the fridge in
the kitchen". LMRL-Gym builds it with TextWorld; it is implemented here in plain Python with the same house:

- rooms and doors: bedroom (west: living room, south: bathroom), living room (west: dining room, south:
  office), dining room (west: kitchen), kitchen (north: garden, west: backyard), office (east: bathroom);
- a table in the bedroom (a bowl), the living room (the stale food, a fresh food), the dining room (a coffee
  cup, a plate); a closed chest in the office (utensils); a closed fridge in the kitchen (a fruit);
- the player starts in a room drawn by the reset seed.

Reward as LMRL-Gym's TextWorld quest: 1 when the stale food is in the fridge and the fridge is closed (the
episode ends, won); eating the stale food ends it lost (0); every other step 0. ``max_steps`` (50) truncates.

Commands (LMRL-Gym's admissible commands, less examine/look/inventory): ``go <direction>``, ``take <thing>
from <table|chest|fridge>``, ``take <thing>``, ``open|close <chest|fridge>``, ``insert <thing> into
<chest|fridge>``, ``put <thing> on table``, ``drop <thing>``, ``eat <food>``. Each observation ends with
``Admissible commands: ...``; the observation is the whole history (objective, then commands and feedback).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .base import TextEnv

__all__ = ["TextNavEnv", "ROOMS", "DOORS", "OBJECTIVE", "shortest_path", "admissible_from"]

ROOMS = ("bedroom", "office", "bathroom", "living room", "kitchen", "dining room", "garden", "backyard")
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
_LINKS = [
    ("bedroom", "west", "living room"),
    ("living room", "west", "dining room"),
    ("dining room", "west", "kitchen"),
    ("kitchen", "north", "garden"),
    ("living room", "south", "office"),
    ("office", "east", "bathroom"),
    ("bedroom", "south", "bathroom"),
    ("kitchen", "west", "backyard"),
]
DOORS: dict[str, dict[str, str]] = {r: {} for r in ROOMS}
for _a, _d, _b in _LINKS:
    DOORS[_a][_d] = _b
    DOORS[_b][_OPPOSITE[_d]] = _a
FOODS = {"stale food", "fresh food", "fruit"}
OBJECTIVE = (
    "Your objective is to put the stale food on the table in the living room into the fridge in the kitchen."
)
MAX_STEPS = 50


def shortest_path(start: str, goal: str) -> list[str]:
    """The directions of a shortest walk from ``start`` to ``goal``."""
    prev: dict[str, tuple[str, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        room = queue.popleft()
        for direction, nxt in DOORS[room].items():
            if nxt not in prev:
                prev[nxt] = (room, direction)
                queue.append(nxt)
    path: list[str] = []
    while prev[goal] is not None:
        room, direction = prev[goal]  # type: ignore[misc]
        path.append(direction)
        goal = room
    return path[::-1]


def admissible_from(observation: str) -> list[str]:
    """The admissible commands the last line of an observation lists."""
    last = observation.rsplit("Admissible commands: ", 1)[-1].split("\n", 1)[0]
    return [c for c in last.split(", ") if c]


def _listing(things: list[str]) -> str:
    items = [f"a {t}" for t in things]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class TextNavEnv(TextEnv):
    def __init__(self, max_steps: int = MAX_STEPS) -> None:
        super().__init__()
        self.max_steps = int(max_steps)
        self.history: list[str] = []

    # --------------------------------------------------------------------------------------------- state
    def _new_world(self, room: str) -> None:
        self.room, self.steps, self.holding = room, 0, []
        self.tables = {"bedroom": ["bowl"], "living room": ["stale food", "fresh food"],
                       "dining room": ["coffee cup", "plate"]}  # fmt: skip
        self.containers = {"chest": {"room": "office", "open": False, "items": ["utensils"]},
                           "fridge": {"room": "kitchen", "open": False, "items": ["fruit"]}}  # fmt: skip
        self.floor: dict[str, list[str]] = {r: [] for r in ROOMS}

    def _container_here(self) -> str | None:
        return next((c for c, v in self.containers.items() if v["room"] == self.room), None)

    def _describe(self) -> str:
        parts = [f"You are in the {self.room}."]
        if self.room in self.tables:
            on = self.tables[self.room]
            parts.append(f"There is a table; on it {'is ' + _listing(on) if on else 'is nothing'}.")
        c = self._container_here()
        if c:
            box = self.containers[c]
            if box["open"]:
                inside = _listing(box["items"]) if box["items"] else "nothing"
                parts.append(f"There is an open {c}; in it is {inside}.")
            else:
                parts.append(f"There is a closed {c}.")
        if self.floor[self.room]:
            parts.append(f"On the floor is {_listing(self.floor[self.room])}.")
        exits = ", ".join(f"{d} to the {r}" for d, r in DOORS[self.room].items())
        parts.append(f"Exits: {exits}.")
        if self.holding:
            parts.append(f"You are carrying {_listing(self.holding)}.")
        return " ".join(parts)

    def admissible_commands(self) -> list[str]:
        cmds = [f"go {d}" for d in DOORS[self.room]]
        if self.room in self.tables:
            cmds += [f"take {t} from table" for t in self.tables[self.room]]
            cmds += [f"put {t} on table" for t in self.holding]
        c = self._container_here()
        if c:
            box = self.containers[c]
            if box["open"]:
                cmds += [f"take {t} from {c}" for t in box["items"]]
                cmds += [f"insert {t} into {c}" for t in self.holding]
                cmds.append(f"close {c}")
            else:
                cmds.append(f"open {c}")
        cmds += [f"take {t}" for t in self.floor[self.room]]
        cmds += [f"drop {t}" for t in self.holding]
        cmds += [f"eat {t}" for t in self.holding if t in FOODS]
        return sorted(cmds)

    def _feedback(self, text: str) -> str:
        return f"{text}\n{self._describe()}\nAdmissible commands: {', '.join(self.admissible_commands())}"

    # ------------------------------------------------------------------------------------------ gym API
    def _observation(self) -> str:
        self._last_obs = "\n".join(self.history)
        return self._last_obs

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"room": self.room, "holding": list(self.holding), "fridge_open": self.containers["fridge"]["open"],
                "stale_food_in_fridge": "stale food" in self.containers["fridge"]["items"], "steps": self.steps,
                **extra}  # fmt: skip

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        room = (options or {}).get("room") or ROOMS[int(self.np_random.integers(len(ROOMS)))]
        if room not in ROOMS:
            raise ValueError(f"options room {room!r}: choose one of {', '.join(ROOMS)}")
        self._new_world(room)
        self.history = [self._feedback(OBJECTIVE)]
        return self._observation(), self._info()

    def _act(self, cmd: str) -> tuple[str, bool]:
        """Apply a command: (feedback, lost)."""
        if cmd not in self.admissible_commands():
            return "You can't do that.", False
        verb, _, rest = cmd.partition(" ")
        c = self._container_here()
        if verb == "go":
            self.room = DOORS[self.room][rest]
            return f"You go {rest}.", False
        if verb in ("open", "close"):
            self.containers[rest]["open"] = verb == "open"
            return f"You {verb} the {rest}.", False
        if verb == "take":
            thing, _, source = rest.partition(" from ")
            pile = (self.tables[self.room] if source == "table" else self.containers[source]["items"]) if source \
                else self.floor[self.room]  # fmt: skip
            pile.remove(thing)
            self.holding.append(thing)
            return f"You take the {thing}.", False
        if verb == "insert":
            thing = rest.split(" into ")[0]
            self.holding.remove(thing)
            self.containers[c]["items"].append(thing)  # type: ignore[index]
            return f"You put the {thing} into the {c}.", False
        if verb == "put":
            thing = rest[: -len(" on table")]
            self.holding.remove(thing)
            self.tables[self.room].append(thing)
            return f"You put the {thing} on the table.", False
        if verb == "drop":
            self.holding.remove(rest)
            self.floor[self.room].append(rest)
            return f"You drop the {rest}.", False
        self.holding.remove(rest)  # eat
        return f"You eat the {rest}.", rest == "stale food"

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        cmd = " ".join(str(action).strip().lower().split())
        self.steps += 1
        feedback, lost = self._act(cmd)
        fridge = self.containers["fridge"]
        won = "stale food" in fridge["items"] and not fridge["open"]
        self.history += [cmd, self._feedback(feedback)]
        if won or lost:
            self.history.append("You won!" if won else "You lost!")
            return self._observation(), 1.0 if won else 0.0, True, False, self._info(success=won)
        truncated = self.steps >= self.max_steps
        return self._observation(), 0.0, False, truncated, self._info(success=False)

    def valid_actions(self) -> list[str]:
        return self.admissible_commands()

    def actions_in(self, observation: str) -> list[str] | None:
        """The admissible commands the observation's last line lists (a predicted one's too)."""
        return admissible_from(observation) or None
