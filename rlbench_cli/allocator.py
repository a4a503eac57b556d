"""glibc malloc settings for rlbench's statistics: keep freed buffers in the heap instead of unmapping them.

The bootstraps allocate and free arrays of 100 KB to 1 MB thousands of times per command, on several threads.
glibc serves blocks above its mmap threshold (128 KB, raised only after a large block is freed, and per thread
arena trimmed back to the kernel above 128 KB free) with fresh pages, which the kernel zero-fills on first
touch. Measured on ``rlbench plot`` over 10,000 runs (``benchmarks/store_scale.py``): 240,000-490,000 minor
page faults and 0.8-1.5 s of system time; with the thresholds below, 75,000 and 0.35 s. Nothing else changes:
the same computations on the same numbers.
"""

from __future__ import annotations

import os
import sys

__all__ = ["tune"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h
_tuned: bool | None = None


def tune() -> bool:
    """Sets glibc's ``M_MMAP_THRESHOLD`` to 32 MiB (its own ceiling for the dynamic threshold) and
    ``M_TRIM_THRESHOLD`` to 64 MiB, once per process, on Linux with glibc; ``RLBENCH_MALLOPT=0`` leaves malloc
    as it is. Returns whether the thresholds are set. A forked child (``figure_worker``) inherits them."""
    global _tuned
    if _tuned is None:
        _tuned = False
        if os.environ.get("RLBENCH_MALLOPT", "1").strip() != "0" and sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL("libc.so.6")
                _tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
                    libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
                )
            except (OSError, AttributeError):  # not glibc (musl, ...): its allocator as it is
                pass
    return _tuned
