"""Ray executor: warm worker actors on a Ray cluster (``--executor ray [--address ...]``).

Each actor imports torch once (not at all when no run uses it) and then runs job after job (``run_one``), as a
local worker does. It reserves
``resources.cpus_per_job`` CPUs and ``resources.gpus_per_job`` GPUs for its lifetime, so Ray packs actors on
nodes (0.25 GPU: four actors share a GPU) and sets CUDA_VISIBLE_DEVICES to the GPU each one got.

Metric shards travel through Ray, never through a shared filesystem: an actor always runs its job in a
node-local temporary folder, and the coordinator pulls the shards it has not seen yet (``poll``) at least once
a second, plus the last ones with the result, writing them into ``job.folder`` on the coordinator's machine
under the same names. So ingestion is the same as for local runs, and works across machines. Checkpoints
(``budget.checkpoint_every``) travel the same way: the latest one a run saved comes back with its shards into
the run folder on the coordinator's side (``<run_id>/checkpoint/``, read before the shards are listed, so it
never arrives without the rows it continues), and an attempt that resumes is sent that checkpoint and its
earlier attempts' shards, so it goes on from there on whichever node it lands. ``resources.seeds_per_job``
packs seeds into one actor call (``packed.run_packed``), each seed still its own run and folder.

Faults: a job that raises is reported by its actor; an actor that dies (segfault, out-of-memory kill) makes
the job ``failed`` with the cause, and a fresh actor takes its place; a job past its timeout has its actor
killed. An actor lost with its node (Ray says the node died, the GCS lists it dead, or its raylet's port no
longer answers) ends the attempt ``failed`` with the cause ``node lost: Ray node <id> at <ip> ...`` (also
noted at the end of the attempt's ``output.log``) and ``result["node_lost"]`` set: the coordinator runs it
again as a new attempt on a surviving node (from its checkpoint, when it sent one) without counting it
against ``--retries``, at most ``NODE_LOSS_RETRIES`` times per run. On Ctrl-C the actors are asked to stop
(the run flushes and ends ``interrupted``), given a few seconds, then killed, after their new shards and
their ``output.log`` so far have come over. ``import ray`` happens in this package
only, when it is used: never when rlbench itself (or ``rlbench_cli.executors``, or this package) is imported.

One module per part: ``cluster`` (importing Ray, checking and joining a cluster, rlbench's own lean Ray
instance), ``actor`` (the worker on a node), ``transfer`` (files between the actors' nodes and the run
folders), ``failures`` (why an actor's job ended, node loss), ``executor`` (the scheduler, and ``create``).
"""

from __future__ import annotations

from .cluster import RAY_ENV
from .executor import RayExecutor, create

__all__ = ["RayExecutor", "create", "RAY_ENV"]
