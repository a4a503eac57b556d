"""What a text policy playing inside a world model is offered to choose from (``Offered``): the actions its
current, predicted observation lists, where the real env can read them from the text (``TextEnv.actions_in``:
TextNav's admissible commands), else the real env's list at reset (an env whose actions do not change), else
none (the policy decodes its action). Bound to a ``TextPolicy`` in place of the real envs by
``text_world_model``'s WM metric, the synthetic channel's rollouts and ``WorldModelEnv`` (warm start)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ActionsIn", "Offered", "offered_to"]

ActionsIn = Callable[[str], "list[str] | None"]


class Offered:
    """The actions offered to a policy that plays inside a world model (bound in place of a real env: it has
    ``unwrapped`` and ``valid_actions``): those the observation ``obs`` (set before each turn) lists, read by
    ``actions_in``, else the fixed ``actions`` (None: the policy decodes its action)."""

    def __init__(self, actions: list[str] | None, actions_in: ActionsIn | None = None):
        self.actions = None if actions is None else [str(a) for a in actions]
        self.actions_in = actions_in
        self.obs = ""

    @property
    def unwrapped(self) -> Offered:
        return self

    def valid_actions(self) -> list[str] | None:
        listed = self.actions_in(self.obs) if self.actions_in is not None else None
        if listed:
            return [str(a) for a in listed]
        return None if self.actions is None else list(self.actions)


def offered_to(envs: list[Any]) -> list[Offered]:
    """One ``Offered`` per real env: its list now (``valid_actions``) and its ``actions_in``."""
    out = []
    for env in envs:
        real = env.unwrapped
        acts = getattr(real, "valid_actions", lambda: None)()
        out.append(Offered(None if acts is None else list(acts), getattr(real, "actions_in", None)))
    return out
