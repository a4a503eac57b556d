"""``data_mix``: which rollouts a run on a dataset with imagined rollouts trains on.

A dataset ``<name>`` of real rollouts may have imagined ones beside it (``<name>.imagined.hdf5``, written by
``datagen.imagine`` or imported from ImagineBench's files), and ``oracle`` ones (``<name>.oracle.hdf5``, written
by ``datagen.imagine``: REAL rollouts of the new instructions the generator imagined, the upper bound ImagineBench
compares imagined rollouts with). A mix is one source (``real``, ``imagined``, ``oracle``), sources joined by
``+`` (all of each: ``real+imagined``, ``real+oracle``) or shares of transitions, ``{real: 0.7, imagined: 0.3}``
(written ``real=0.7,imagined=0.3``): whole episodes are drawn from each, in a fixed order, until each has its
share of a dataset as large as the sources allow. Pure numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import OfflineData
from .names import IMAGINED_SUFFIX, ORACLE_SUFFIX

__all__ = ["MIX_SOURCES", "SUFFIXES", "canonical_mix", "parse_mix", "mix_sources", "mix_data", "concat"]

MIX_SOURCES = ("real", "imagined", "oracle")
SUFFIXES = {"imagined": IMAGINED_SUFFIX, "oracle": ORACLE_SUFFIX}  # beside <name>.hdf5 (the real rollouts)


def canonical_mix(value: Any) -> str:
    """A mix as written in a suite -> its canonical text; raises ValueError naming the problem."""
    if isinstance(value, str):
        v = value.strip()
        parts = v.split("+")
        if all(p in MIX_SOURCES for p in parts) and len(set(parts)) == len(parts):
            return "+".join(k for k in MIX_SOURCES if k in parts)  # real+imagined, real+oracle, ...
        if "=" in v:
            return canonical_mix(dict(part.split("=", 1) for part in v.split(",")))
        raise ValueError(f"unknown data_mix {value!r}; use real, imagined, oracle, sources joined by + "
                         "(real+imagined, real+oracle) or shares like {real: 0.7, imagined: 0.3}")  # fmt: skip
    if isinstance(value, dict):
        bad = [k for k in value if k not in MIX_SOURCES]
        if bad:
            raise ValueError(f"data_mix names {bad[0]!r}; its keys are {', '.join(MIX_SOURCES)}")
        try:
            shares = {k: float(value.get(k, 0.0)) for k in MIX_SOURCES}
        except (TypeError, ValueError):
            raise ValueError(f"data_mix shares must be numbers (got {value!r})") from None
        if any(not np.isfinite(x) or x < 0 for x in shares.values()) or sum(shares.values()) <= 0:
            raise ValueError(f"data_mix shares must be non-negative numbers, not all 0 (got {value!r})")
        total = sum(shares.values())
        # real and imagined always written (the mixes' text before oracle existed, part of run ids), oracle when used
        keys = [k for k in MIX_SOURCES if k != "oracle" or shares[k] > 0]
        return ",".join(f"{k}={shares[k] / total:g}" for k in keys)
    raise ValueError(f"data_mix must be a text or a mapping (got {type(value).__name__})")


def parse_mix(mix: str) -> dict[str, float] | None:
    """Canonical text -> shares by source; None for sources joined by ``+`` (all of each)."""
    if mix in MIX_SOURCES:
        return {mix: 1.0}
    if "+" in mix:
        return None
    return {k: float(v) for k, v in (p.split("=", 1) for p in mix.split(","))}


def mix_sources(mix: str) -> list[str]:
    """The sources a canonical mix draws from, in ``MIX_SOURCES`` order."""
    shares = parse_mix(mix)
    if shares is None:
        return [k for k in MIX_SOURCES if k in mix.split("+")]
    return [k for k in MIX_SOURCES if shares.get(k, 0) > 0]


def concat(parts: list[OfflineData], meta: dict[str, Any]) -> OfflineData:
    """Datasets one after the other (each ends with a whole episode)."""
    has_next = all(p.next_observations is not None for p in parts)

    def cat(k: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(p, k)) for p in parts])

    return OfflineData(cat("observations"), cat("actions"), cat("rewards"), cat("terminals"), cat("timeouts"),
                       meta=meta, next_observations=cat("next_observations") if has_next else None)  # fmt: skip


def _episodes(data: OfflineData, want: int, seed: int) -> OfflineData:
    """Whole episodes of ``data`` in a seeded order until ``want`` transitions (at least one episode)."""
    ends = data.episode_ends()
    starts = np.concatenate([[0], ends[:-1] + 1])
    order = np.random.default_rng(seed).permutation(len(ends))
    take, n = [], 0
    for i in order:
        if n >= want and take:
            break
        take.append(i)
        n += ends[i] - starts[i] + 1
    idx = np.concatenate([np.arange(starts[i], ends[i] + 1) for i in sorted(take)])
    pick = lambda a: None if a is None else np.asarray(a)[idx]  # noqa: E731
    term, tout = np.asarray(data.terminals, bool)[idx], np.asarray(data.timeouts, bool)[idx]
    return OfflineData(pick(data.observations), pick(data.actions), pick(data.rewards), term, tout,
                       meta=data.meta, next_observations=pick(data.next_observations))  # fmt: skip


def mix_data(
    real: OfflineData | None,
    imagined: OfflineData | None,
    mix: str,
    seed: int = 0,
    oracle: OfflineData | None = None,
) -> OfflineData:
    """The data a run on ``mix`` trains on (see the module docstring); the real data's metadata (else the
    first source's), plus the mix and the generator of the imagined part."""
    shares = parse_mix(mix)
    sources = {"real": real, "imagined": imagined, "oracle": oracle}
    used = mix_sources(mix)
    first = next(sources[k] for k in ("real", *used) if sources[k] is not None)
    meta = dict(first.meta)  # type: ignore[union-attr]
    meta["data_mix"] = mix
    if imagined is not None and "imagined" in used:
        for k in ("generator", "source"):
            if k in imagined.meta:
                meta[f"imagined_{k}"] = imagined.meta[k]
    parts = [sources[k] for k in used]
    if shares is None or len(used) == 1:
        return concat(parts, meta) if len(parts) > 1 else concat(parts, meta)  # type: ignore[arg-type]
    size = min(len(sources[k]) / shares[k] for k in used)  # type: ignore[arg-type]
    picked = [_episodes(sources[k], int(round(shares[k] * size)), seed + j) for j, k in enumerate(used)]  # type: ignore[arg-type]
    return concat(picked, meta)
