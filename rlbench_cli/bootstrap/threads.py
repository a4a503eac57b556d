"""Independent bootstraps (one per algorithm, or pair) on threads: how many, and the map over them."""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

_T = TypeVar("_T")


def workers(jobs: int) -> int:
    """Threads for ``jobs`` independent bootstraps: the CPUs this process may use (``$RLBENCH_THREADS``
    caps them; 1 turns threads off), at most ``jobs``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    cap = os.environ.get("RLBENCH_THREADS", "")
    if cap.strip().isdigit() and int(cap) > 0:
        cpus = min(cpus, int(cap))
    return max(1, min(cpus, jobs))


def map_independent(fn: Callable[[Any], _T], items: Iterable[Any], seed: object) -> list[_T]:
    """``[fn(item) for item in items]``, on threads when ``seed`` is an integer.

    With an integer seed every item resamples from its own generator (``derive_rng(seed, key)``), so the
    items are independent and each result is the same whichever thread computes it, in whatever order:
    numpy's generators, ``take``, sorts and reductions release the GIL, so on N cores the bootstraps of N
    algorithms (or pairs) run at once. A ``RandomState`` / ``Generator`` seed is one stream shared by the
    items in order (rliable replay): then they run one after another. The first call tunes glibc's malloc
    for these buffers (``allocator.tune``).
    """
    from rlbench_cli.allocator import tune

    tune()
    items = list(items)
    n = workers(len(items)) if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) else 1
    if n <= 1:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n, thread_name_prefix="rlbench-bootstrap") as pool:
        return list(pool.map(fn, items))
