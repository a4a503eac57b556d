"""The real engines' session fixtures, defined once here for every e2e module: ``ray_head`` (a Ray head on
loopback) and ``slurm`` (a single-node Slurm). A fixture imported into each test module would be a fixture of
its own there, so each module would start (and keep until the session ends) an engine of its own."""

from ray_engine import ray_head  # noqa: F401
from slurm_engine import slurm  # noqa: F401
