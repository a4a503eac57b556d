"""rlbench: run reinforcement-learning benchmark suites, track every metric in DuckDB, compare with rliable."""

__version__ = "0.1.0"

from .algos.entrypoint import seeds_per_job  # noqa: E402 - user code marks multi-seed entrypoints with it

__all__ = ["__version__", "seeds_per_job"]
