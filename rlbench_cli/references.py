"""Fixed reference scores for normalisation, and how a task name finds its references.

Normalised score = scale * (score - low) / (high - low). The references are FIXED numbers (published
tables, a suite's own ``normalize:`` block, or the mean score of designated reference algorithms such as
``random`` and an expert in the same suite) and never the min/max of whatever runs happen to be loaded: adding
a run must not change the normalised score of another.

Built-in sets:

- ``classic-control``: gymnasium classic control; low = uniform random policy (1,000 seeded episodes,
  gymnasium 1.0.0), high = the best pretrained agent of rl-baselines3-zoo's benchmark (CartPole: 500, the
  maximum). Fraction scale (1 = reference). gymnax's versions of the same tasks (``gymnax/CartPole-v1``) find
  the same references.
- ``d4rl``: D4RL's REF_MIN_SCORE / REF_MAX_SCORE (d4rl/infos.py): random and expert returns per environment
  family; keyed by dataset name (``hopper-medium-v2``), family (``hopper``) or gymnasium id (``Hopper-v5``).
  Scale 100, D4RL's convention (100 = expert). Gymnasium's MuJoCo v4/v5 environments are close to, not
  identical with, D4RL's mujoco-py v2 environments; the references are the convention all papers use.
- ``atari``: random and professional-human scores of Atari-57 (DQN Nature / DeepMind dqn_zoo atari_data.py);
  keyed by game (``pong``, ``BankHeist``, ``ALE/Pong-v5``, ``PongNoFrameskip-v4``). Fraction scale
  (1 = human), as rliable reports it.
- ``lmrl``: LMRL-Gym's normalisation of its text tasks (Abdulhai et al., 2023): three references, min -> 0,
  the average of the task's offline dataset -> 50, max -> 100, piecewise linear between them (and extended
  linearly beyond). Keyed by rlbench's text env ids (``rlbench/MazeFO-v0``) and their dataset names
  (``MazeFO-v0-mixed``). Scale 100.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReferenceSet", "Resolved", "BUILTIN", "resolve", "lookup", "NormalizeError", "normalise"]


class NormalizeError(ValueError):
    """A reference set or normalisation setting that cannot be applied (message: one line with the fix)."""


@dataclass(frozen=True)
class ReferenceSet:
    name: str
    scale: float
    low_label: str
    high_label: str
    table: Mapping[str, tuple[float, ...]]  # (low, high), or (low, mid, high): piecewise, mid -> scale / 2
    key: Any = None  # task -> candidate keys, most specific first

    def lookup(self, task: str) -> tuple[float, ...] | None:
        for k in (self.key or _exact)(task):
            if k in self.table:
                return self.table[k]
        return None


def _exact(task: str) -> list[str]:
    return [task]


_VERSION = re.compile(r"-v\d+$")


def _dash_prefixes(task: str) -> list[str]:
    """``Hopper-medium-replay-v2`` -> hopper-medium-replay, hopper-medium, hopper."""
    base = _VERSION.sub("", task.strip().lower())
    parts = base.split("-")
    return ["-".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _atari_key(task: str) -> list[str]:
    t = task.strip()
    t = t.split("/", 1)[1] if t.upper().startswith("ALE/") else t
    t = _VERSION.sub("", t)
    t = re.sub(r"(NoFrameskip|Deterministic)$", "", t)
    return [re.sub(r"[^a-z0-9]", "", t.lower())]


def _classic_key(task: str) -> list[str]:
    """``gymnax/CartPole-v1`` -> gymnax/CartPole-v1, CartPole-v1: another simulator's version of a task."""
    t = task.strip()
    return [t, t.removeprefix("gymnax/")]


CLASSIC_CONTROL = ReferenceSet(
    "classic-control", 1.0, "random policy", "reference agent",
    {
        "CartPole-v1": (22.197, 500.0),  # random: 22.197 +- 0.358 (SE); high: the maximum return
        "Acrobot-v1": (-499.093, -69.135),  # high: QR-DQN, rl-baselines3-zoo benchmark
        "MountainCar-v0": (-200.0, -100.849),  # high: DQN, rl-baselines3-zoo benchmark
        "Pendulum-v1": (-1230.653, -151.855),  # high: TD3, rl-baselines3-zoo benchmark
    },
    _classic_key,
)  # fmt: skip

_D4RL = {
    "halfcheetah": (-280.178953, 12135.0),
    "hopper": (-20.272305, 3234.3),
    "walker2d": (1.629008, 4592.3),
    "ant": (-325.6, 3879.7),
    "maze2d-open": (0.01, 20.66),
    "maze2d-umaze": (23.85, 161.86),
    "maze2d-medium": (13.13, 277.39),
    "maze2d-large": (6.7, 273.99),
    "maze2d-open-dense": (11.17817, 27.166538620695782),
    "maze2d-umaze-dense": (68.537689, 193.66285642381482),
    "maze2d-medium-dense": (44.264742, 297.4552547777125),
    "maze2d-large-dense": (30.569041, 303.4857382709002),
    "antmaze": (0.0, 1.0),
    "pen": (96.262799, 3076.8331017826877),
    "hammer": (-274.856578, 12794.134825156867),
    "relocate": (-6.425911, 4233.877797728884),
    "door": (-56.512833, 2880.5693087298737),
    "kitchen": (0.0, 4.0),
}
D4RL = ReferenceSet("d4rl", 100.0, "random policy", "expert policy", _D4RL, _dash_prefixes)

_ATARI_RANDOM_HUMAN = {
    "alien": (227.8, 7127.7), "amidar": (5.8, 1719.5), "assault": (222.4, 742.0), "asterix": (210.0, 8503.3),
    "asteroids": (719.1, 47388.7), "atlantis": (12850.0, 29028.1), "bank_heist": (14.2, 753.1),
    "battle_zone": (2360.0, 37187.5), "beam_rider": (363.9, 16926.5), "berzerk": (123.7, 2630.4),
    "bowling": (23.1, 160.7), "boxing": (0.1, 12.1), "breakout": (1.7, 30.5), "centipede": (2090.9, 12017.0),
    "chopper_command": (811.0, 7387.8), "crazy_climber": (10780.5, 35829.4), "defender": (2874.5, 18688.9),
    "demon_attack": (152.1, 1971.0), "double_dunk": (-18.6, -16.4), "enduro": (0.0, 860.5),
    "fishing_derby": (-91.7, -38.7), "freeway": (0.0, 29.6), "frostbite": (65.2, 4334.7),
    "gopher": (257.6, 2412.5), "gravitar": (173.0, 3351.4), "hero": (1027.0, 30826.4),
    "ice_hockey": (-11.2, 0.9), "jamesbond": (29.0, 302.8), "kangaroo": (52.0, 3035.0),
    "krull": (1598.0, 2665.5), "kung_fu_master": (258.5, 22736.3), "montezuma_revenge": (0.0, 4753.3),
    "ms_pacman": (307.3, 6951.6), "name_this_game": (2292.3, 8049.0), "phoenix": (761.4, 7242.6),
    "pitfall": (-229.4, 6463.7), "pong": (-20.7, 14.6), "private_eye": (24.9, 69571.3),
    "qbert": (163.9, 13455.0), "riverraid": (1338.5, 17118.0), "road_runner": (11.5, 7845.0),
    "robotank": (2.2, 11.9), "seaquest": (68.4, 42054.7), "skiing": (-17098.1, -4336.9),
    "solaris": (1236.3, 12326.7), "space_invaders": (148.0, 1668.7), "star_gunner": (664.0, 10250.0),
    "surround": (-10.0, 6.5), "tennis": (-23.8, -8.3), "time_pilot": (3568.0, 5229.2),
    "tutankham": (11.4, 167.6), "up_n_down": (533.4, 11693.2), "venture": (0.0, 1187.5),
    "video_pinball": (16256.9, 17667.9), "wizard_of_wor": (563.5, 4756.5), "yars_revenge": (3092.9, 54576.9),
    "zaxxon": (32.5, 9173.3),
}  # fmt: skip
ATARI = ReferenceSet(
    "atari", 1.0, "random policy", "human",
    {k.replace("_", ""): v for k, v in _ATARI_RANDOM_HUMAN.items()}, _atari_key,
)  # fmt: skip


# The env kwargs that make a task another task than its lmrl row measured (the row was measured without them):
# Wordle's references come from the default word list's dataset and optimal policy, with six tries
LMRL_ROW_KWARGS: dict[str, tuple[str, ...]] = {"wordle": ("word_list", "max_tries")}


def _lmrl_key(task: str) -> list[str]:
    """``rlbench/MazeFO-v0``, ``MazeFO-v0`` and ``MazeFO-v0-mixed`` -> ``mazefo``; an env label's wrappers and
    kwargs (``rlbench/Endgames-v0[max_moves=50]+Wrapper``) do not change the task's row, except the kwargs of
    ``LMRL_ROW_KWARGS``: a label that names one (``rlbench/Wordle-v0[word_list=...]``) is another task, with no
    row."""
    t = re.split(r"[\[+]", task.strip(), maxsplit=1)[0]
    t = t.split("/", 1)[1] if t.startswith("rlbench/") else t
    t = re.sub(r"-(optimal|noisy|mixed|random)$", "", t)
    key = _VERSION.sub("", t).lower()
    kwargs = re.search(r"\[([^\]]*)\]", task)
    named = {part.split("=", 1)[0].strip() for part in kwargs.group(1).split(",")} if kwargs else set()
    return [] if named & set(LMRL_ROW_KWARGS.get(key, ())) else [key]


def lmrl_row_kwargs(task: str, kwargs: Mapping[str, Any]) -> list[str]:
    """The kwargs in ``kwargs`` of a dataset or env ``task`` (its name or id) that make lmrl's row for it wrong."""
    keys = _lmrl_key(task)
    return [k for k in LMRL_ROW_KWARGS.get(keys[0], ()) if kwargs.get(k) is not None] if keys else []


# (min, dataset average, max). Maze, Chess, Endgames: LMRL-Gym's paper (its normalisation table). MazePO: the
# same maze and rewards as Maze, so Maze's row. Wordle and TextNav: min = the lowest return the task allows,
# average and max MEASURED here: the mean return of rlbench's generated "mixed" dataset and of its scripted
# optimal policy (1,000 seeded episodes each; see envs/text/policies.py).
_LMRL = {
    "mazefo": (-101.0, -83.0, -6.84),
    "mazepo": (-101.0, -83.0, -6.84),
    "chess": (-401.0, 0.21, 1.0),
    "endgames": (-1.0, 0.586, 1.0),
    "wordle": (-6.0, -4.499, -3.503),  # measured: seed 0, the Debian wamerican five-letter words
    "textnav": (0.0, 0.544, 1.0),  # min and max: lost / won; average measured (seed 0)
    # the oracle tasks, measured with the SCRIPTED oracle (seed 0); a language-model oracle changes them.
    # min: 20 questions without finding it (-20); Car Dealer: no sale (0)
    "twentyquestions": (-20.0, -8.489, -4.425),
    "guessmycity": (-20.0, -7.386, -3.656),
    "cardealer": (0.0, 24.545, 28.2),
}
LMRL = ReferenceSet("lmrl", 100.0, "min", "max", _LMRL, _lmrl_key)

BUILTIN: dict[str, ReferenceSet] = {s.name: s for s in (CLASSIC_CONTROL, D4RL, ATARI, LMRL)}


def normalise(score: Any, ref: tuple[float, ...], scale: float) -> Any:
    """``scale * (score - low) / (high - low)`` for ``ref = (low, high)``; for ``(low, mid, high)``
    piecewise linear through low -> 0, mid -> scale / 2, high -> scale (LMRL-Gym's rule), each piece extended
    linearly past its end. ``score`` is a number or a numpy array / pandas Series."""
    import numpy as np

    if len(ref) == 2:
        low, high = ref
        return scale * (score - low) / (high - low)
    low, mid, high = ref
    below = scale / 2 * (score - low) / (mid - low)
    above = scale / 2 + scale / 2 * (score - mid) / (high - mid)
    out = np.where(np.asarray(score) <= mid, below, above)
    return float(out) if np.ndim(out) == 0 else out


def lookup(task: str) -> tuple[str, tuple[float, float]] | None:
    """The first built-in set that knows ``task``: (set name, (low, high)), or None."""
    for s in BUILTIN.values():
        ref = s.lookup(task)
        if ref is not None:
            return s.name, ref
    return None


@dataclass
class Resolved:
    """References chosen for a list of tasks. ``name`` None means raw scores."""

    name: str | None
    refs: dict[str, tuple[float, ...]] = field(default_factory=dict)  # (low, high) or (low, mid, high)
    scale: float = 1.0
    description: str = "raw scores, not normalised"


def _measured(label: str, per_run: Any, tasks: list[str], which: str) -> dict[str, float]:
    rows = per_run.loc[per_run["algo"].astype(str) == label]
    if rows.empty:
        algos = ", ".join(sorted(per_run["algo"].astype(str).unique()))
        raise NormalizeError(
            f"normalize.{which}_from names algorithm {label!r}, which has no finished runs "
            f"(algorithms: {algos}); name one of them or give fixed references"
        )
    means = rows.groupby(rows["env"].astype(str))["score"].mean()
    missing = [t for t in tasks if t not in means.index]
    if missing:
        raise NormalizeError(
            f"normalize.{which}_from: algorithm {label!r} has no runs on {', '.join(missing)}; "
            "run it there or give fixed references for those tasks"
        )
    return {t: float(means[t]) for t in tasks}


def resolve(tasks: list[str], normalize: Any, per_run: Any = None) -> Resolved:
    """Pick references for ``tasks``.

    Args:
        tasks: Task (environment or dataset) names.
        normalize: ``None``/``"none"``: raw. ``"auto"``: the first built-in set covering every task, else raw
            (the caller warns). A built-in set name. Or a suite's ``normalize`` mapping with any of ``table``
            (a built-in set), ``references`` ({task: [low, high]}), ``low_from`` / ``high_from`` (algorithm
            labels whose mean per-task score is the reference), ``scale``.
        per_run: Per-run scores (columns ``algo, env, score``), needed only for ``low_from``/``high_from``.
    """
    if normalize is None or normalize in ("none", "raw"):
        return Resolved(None)
    if isinstance(normalize, str):
        if normalize == "auto":
            for s in BUILTIN.values():
                refs = {t: s.lookup(t) for t in tasks}
                if all(v is not None for v in refs.values()):
                    return _from_set(s, refs)  # type: ignore[arg-type]
            return Resolved(None)
        if normalize not in BUILTIN:
            raise NormalizeError(
                f"unknown reference set {normalize!r}; use one of: {', '.join(BUILTIN)}, auto, or none"
            )
        s = BUILTIN[normalize]
        refs = {t: s.lookup(t) for t in tasks}
        missing = [t for t, r in refs.items() if r is None]
        if missing:
            raise NormalizeError(
                f"reference set {normalize!r} has no scores for {', '.join(missing)}; "
                "use --normalize none, or give references in the suite's normalize block"
            )
        return _from_set(s, refs)  # type: ignore[arg-type]
    return _from_spec(tasks, dict(normalize), per_run)


def _from_set(s: ReferenceSet, refs: dict[str, tuple[float, ...]]) -> Resolved:
    lo, hi = s.low_label, s.high_label
    desc = f"{s.name} reference scores: {s.scale:g} x (score - {lo}) / ({hi} - {lo}); 0 = {lo}, {s.scale:g} = {hi}"
    if any(len(r) == 3 for r in refs.values()):
        desc = (
            f"{s.name} reference scores, piecewise linear: 0 = {lo}, {s.scale / 2:g} = the dataset average, "
            f"{s.scale:g} = {hi} (LMRL-Gym's convention)"
        )
    elif s.scale == 100:
        desc += " (x 100, the D4RL convention)"
    return Resolved(s.name, refs, s.scale, desc)


def _from_spec(tasks: list[str], spec: dict[str, Any], per_run: Any) -> Resolved:
    base = BUILTIN.get(spec["table"]) if spec.get("table") else None
    if spec.get("table") and base is None:
        raise NormalizeError(
            f"normalize.table {spec['table']!r} is unknown; use one of: {', '.join(BUILTIN)}"
        )
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    mids: dict[
        str, float
    ] = {}  # a built-in piecewise table's middle reference, while low and high are its own
    sources: list[str] = []
    if base is not None:
        for t in tasks:
            r = base.lookup(t)
            if r is not None:
                lows[t], highs[t] = r[0], r[-1]
                if len(r) == 3:
                    mids[t] = r[1]
        sources.append(f"{base.name} table")
    for t, pair in (spec.get("references") or {}).items():
        lows[t], highs[t] = float(pair[0]), float(pair[1])
        mids.pop(t, None)
    if spec.get("references"):
        sources.append(spec.get("source") or "the suite's references")
    if spec.get("low_from"):
        lows.update(_measured(spec["low_from"], per_run, tasks, "low"))
        mids.clear()
        sources.append(f"low = mean score of {spec['low_from']!r}")
    if spec.get("high_from"):
        highs.update(_measured(spec["high_from"], per_run, tasks, "high"))
        mids.clear()
        sources.append(f"high = mean score of {spec['high_from']!r}")
    missing = [t for t in tasks if t not in lows or t not in highs]
    if missing:
        raise NormalizeError(
            f"the suite's normalize block gives no {'low' if missing[0] not in lows else 'high'} reference for "
            f"{', '.join(missing)}; add it under normalize.references as [low, high]"
        )
    flat = [t for t in tasks if highs[t] == lows[t]]
    if flat:
        raise NormalizeError(
            f"normalize: low and high references are equal for {', '.join(flat)}; they must differ"
        )
    scale = float(spec.get("scale") or (base.scale if base is not None else 1.0))
    desc = f"suite references ({'; '.join(sources)}): {scale:g} x (score - low) / (high - low)"
    refs = {t: (lows[t], mids[t], highs[t]) if t in mids else (lows[t], highs[t]) for t in tasks}
    return Resolved("suite", refs, scale, desc)
