"""ImagineBench's protocol in rlbench: language-conditioned tasks at four levels, instruction embeddings,
imagined rollouts from rlbench's own generator, and readers for ImagineBench's own data files.

Light modules (``tasks``, ``encoder``: numpy only) sit above ``envs`` in the module flow, since the
language environments embed their instructions with them. ``generator`` (torch, transformers) and
``build`` (datasets of real and imagined rollouts) sit at ``datagen``'s level and are imported lazily.
ImagineBench's own HDF5 / pickle files are read by ``datasets.imaginebench``.
"""

from __future__ import annotations

__all__ = ["LANG_LEVELS", "IMAGINED_SUFFIX", "ORACLE_SUFFIX", "GENERATOR_LABEL"]

# the instruction levels every language task has, ImagineBench's: the training instructions, the same tasks
# worded differently, new simple tasks, new composed tasks
LANG_LEVELS = ("real", "rephrase", "easy", "hard")
# a dataset <name> of real rollouts has its imagined rollouts next to it as <name>.imagined.hdf5
IMAGINED_SUFFIX = ".imagined.hdf5"
ORACLE_SUFFIX = ".oracle.hdf5"  # real rollouts of the new instructions (imagine.build.build_oracle)
# how rlbench's own rollout generator is labelled in dataset metadata (ImagineBench's come from an LLM)
GENERATOR_LABEL = "rlbench-generator"
