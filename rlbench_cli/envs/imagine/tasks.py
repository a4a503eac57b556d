"""The instructions of rlbench's language-conditioned tasks, by level (numpy only, no gymnasium).

BabyAI (``rlbench/BabyAI-Lang-v0``, minigrid's goto / pickup / open / put-next families in two small rooms):

- ``real``: the training instructions: go to / pick up an object of a *seen* colour and type, open a door,
  put one seen object next to another;
- ``rephrase``: the same tasks in other words ("navigate to", "grab", "pull open", "place ... beside");
- ``easy``: new simple tasks: go to / pick up objects of colour and type combinations never instructed in
  training;
- ``hard``: new composed tasks: two training tasks in sequence ("go to the red ball, then pick up the blue
  box").

HalfCheetah (``rlbench/HalfCheetah-Lang-v0``): ``real``: run forward at a training speed, move backward at a
training speed, jump; ``rephrase``: the same in other words; ``easy``: speeds never instructed in training;
``hard``: two of them in sequence (first half of the episode, then the second).
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = [
    "COLORS",
    "TYPES",
    "SEEN",
    "UNSEEN",
    "BABYAI_TEMPLATES",
    "CHEETAH_TEMPLATES",
    "CHEETAH_SPEEDS",
    "babyai_text",
    "cheetah_tasks",
    "cheetah_text",
    "corpus",
]

COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
TYPES = ("ball", "box", "key")
# (colour, type) pairs instructed in training, and the ones only the ``easy`` level asks for
SEEN = tuple((c, t) for i, c in enumerate(COLORS) for j, t in enumerate(TYPES) if (i + j) % 3 != 0)
UNSEEN = tuple((c, t) for i, c in enumerate(COLORS) for j, t in enumerate(TYPES) if (i + j) % 3 == 0)

# family -> wording; {o}, {o2}: "the red ball"; {c}: a door colour
BABYAI_TEMPLATES: dict[str, dict[str, str]] = {
    "real": {
        "goto": "go to {o}",
        "pickup": "pick up {o}",
        "open": "open the {c} door",
        "putnext": "put {o} next to {o2}",
    },
    "rephrase": {
        "goto": "navigate to {o}",
        "pickup": "grab {o}",
        "open": "pull open the {c} door",
        "putnext": "place {o} beside {o2}",
    },
}
BABYAI_TEMPLATES["easy"] = {k: BABYAI_TEMPLATES["real"][k] for k in ("goto", "pickup")}
SEQUENCE = "{a}, then {b}"


def _obj(color: str, typ: str) -> str:
    return f"the {color} {typ}"


def babyai_text(level: str, family: str, **slots: Any) -> str:
    """The instruction's words: ``family`` of ``level`` with its slots (``o``/``o2`` as (colour, type))."""
    words = {k: _obj(*v) if isinstance(v, tuple) else v for k, v in slots.items()}
    return BABYAI_TEMPLATES[level][family].format(**words)


# HalfCheetah: speeds (m/s of the torso along x) instructed in training and new ones for ``easy``
CHEETAH_SPEEDS = {"real": (1.0, 2.0), "easy": (0.5, 1.5)}
CHEETAH_TEMPLATES: dict[str, dict[str, str]] = {
    "real": {"forward": "run forward at speed {v}", "backward": "move backward at speed {v}", "jump": "jump"},
    "rephrase": {
        "forward": "sprint ahead at a speed of {v}",
        "backward": "go in reverse at a speed of {v}",
        "jump": "leap up high",
    },
}
CHEETAH_TEMPLATES["easy"] = CHEETAH_TEMPLATES["real"]


def cheetah_tasks(level: str) -> list[tuple[tuple[str, float], ...]]:
    """Every HalfCheetah task of ``level``: a sequence of (kind, speed) parts (one part, two for ``hard``)."""
    speeds = CHEETAH_SPEEDS["easy" if level == "easy" else "real"]
    simple = [(k, v) for k in ("forward", "backward") for v in speeds]
    if level != "easy":
        simple.append(("jump", 0.0))
    if level != "hard":
        return [(p,) for p in simple]
    return [(a, b) for a, b in itertools.permutations(simple, 2)]


def cheetah_text(level: str, task: tuple[tuple[str, float], ...]) -> str:
    wording = "real" if level == "hard" else level
    parts = [CHEETAH_TEMPLATES[wording][k].format(v=f"{v:g}") for k, v in task]
    return parts[0] if len(parts) == 1 else SEQUENCE.format(a=parts[0], b=parts[1])


Part = tuple[str, str, str, float]  # (family, colour, type, speed); "" where it has none


def corpus() -> list[tuple[str, tuple[Part, ...]]]:
    """Every instruction of every level, with what it asks for (one part, or two: a put-next's object and
    where it goes, or a sequence's two tasks): the sentences the default encoder is trained on."""
    out: list[tuple[str, tuple[Part, ...]]] = []
    objs = [*SEEN, *UNSEEN]
    for level in ("real", "rephrase"):
        for o in objs:
            out.append((babyai_text(level, "goto", o=o), (("goto", *o, 0.0),)))
            out.append((babyai_text(level, "pickup", o=o), (("pickup", *o, 0.0),)))
        for c in COLORS:
            out.append((babyai_text(level, "open", c=c), (("open", c, "door", 0.0),)))
        for o, o2 in itertools.permutations(objs, 2):
            out.append(
                (babyai_text(level, "putnext", o=o, o2=o2), (("putnext", *o, 0.0), ("putnext", *o2, 0.0)))
            )
    for fa, fb in itertools.product(("goto", "pickup"), repeat=2):
        for o, o2 in itertools.permutations(SEEN, 2):
            a, b = babyai_text("real", fa, o=o), babyai_text("real", fb, o=o2)
            out.append((SEQUENCE.format(a=a, b=b), ((fa, *o, 0.0), (fb, *o2, 0.0))))
    for level in ("real", "rephrase", "easy", "hard"):
        for t in cheetah_tasks(level):
            out.append((cheetah_text(level, t), tuple((k, "", "", float(v)) for k, v in t)))
    return out
