"""Run names as other tools write them: a pattern such as ``{env}__{algo}__{seed}__{time}`` -> algo, env, seed.

A pattern is literal text with fields in braces. ``{algo}``, ``{env}`` and ``{seed}`` are what a run needs;
any other field (``{time}``, ``{exp}``, ...) matches text that is ignored. A field may be given a fixed value
instead of being read from the name, ``{env=CartPole-v1}``, for tools whose folder names leave it out.
``/`` in a pattern matches folder levels: ``{env}/{algo}_{seed}`` reads rl-baselines3-zoo's TensorBoard
folders ``tensorboard/CartPole-v1/PPO_1``. Fields match as little text as the rest of the name allows, and
``{seed}`` only digits. A pattern of fixed fields only (``{algo=ppo}{env=CartPole-v1}{seed=0}``) fits any
name: every run gets those values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["CLEANRL_PATTERN", "RunNamePattern", "parse_pattern"]

CLEANRL_PATTERN = (
    "{env}__{algo}__{seed}__{time}"  # CleanRL's run_name: f"{env_id}__{exp_name}__{seed}__{int(time.time())}"
)
NEEDED = ("algo", "env", "seed")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:=([^{}]*))?\}")


@dataclass(frozen=True)
class RunNamePattern:
    """A parsed ``--pattern``: ``match(name)`` gives ``{"algo", "env", "seed"}`` or None."""

    text: str
    regex: re.Pattern[str]
    fixed: dict[str, str]
    levels: int

    def match(self, name: str) -> dict[str, str | int] | None:
        """The run's algo, env and seed from ``name`` (its last ``levels`` path parts, ``/``-separated)."""
        if not self.regex.pattern:  # every field fixed and nothing else: any name is that run
            return {"algo": self.fixed["algo"], "env": self.fixed["env"], "seed": int(self.fixed["seed"])}
        m = self.regex.fullmatch(name)
        if m is None:
            return None
        got = {**self.fixed, **{k: v for k, v in m.groupdict().items() if k in NEEDED}}
        if not got["algo"] or not got["env"]:
            return None
        return {"algo": got["algo"], "env": got["env"], "seed": int(got["seed"])}


def parse_pattern(text: str) -> RunNamePattern:
    """Compiles a run-name pattern (see the module docstring).

    Raises:
        UsageError: a field that is neither read nor fixed among algo, env, seed; a field twice; a fixed seed
            that is not a whole number; braces that do not pair.
    """
    regex, fixed, seen, pos = [], {}, set(), 0
    for m in _FIELD.finditer(text):
        literal = text[pos : m.start()]
        if "{" in literal or "}" in literal:
            raise UsageError(f"--pattern {text!r}: unpaired brace in {literal!r}; fields look like {{env}}")
        regex.append(re.escape(literal))
        name, value = m.group(1), m.group(2)
        if name in seen:
            raise UsageError(f"--pattern {text!r}: field {{{name}}} appears twice")
        seen.add(name)
        if value is not None:
            if name == "seed" and not value.isdigit():
                raise UsageError(f"--pattern {text!r}: a fixed seed is a whole number, e.g. {{seed=0}}")
            fixed[name] = value
        elif name == "seed":
            regex.append(r"(?P<seed>[0-9]+)")
        else:
            regex.append(f"(?P<{name}>[^/]+?)")
        pos = m.end()
    tail = text[pos:]
    if "{" in tail or "}" in tail:
        raise UsageError(f"--pattern {text!r}: unpaired brace in {tail!r}; fields look like {{env}}")
    regex.append(re.escape(tail))
    missing = [f for f in NEEDED if f not in seen]
    if missing:
        raise UsageError(
            f"--pattern {text!r}: no {', '.join('{' + f + '}' for f in missing)}; a run needs algo, env and "
            f"seed, read from the name or fixed, e.g. {{{missing[0]}={'0' if missing[0] == 'seed' else 'NAME'}}}"
        )
    return RunNamePattern(
        text=text, regex=re.compile("".join(regex)), fixed=fixed, levels=text.count("/") + 1
    )
