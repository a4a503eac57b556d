"""rlbench: run reinforcement-learning benchmark suites, track every metric in DuckDB, compare with rliable."""

__version__ = "0.1.0"
