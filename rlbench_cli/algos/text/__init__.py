"""Algorithms for text tasks (the ``rlbench/...`` envs of ``envs.text`` and their datasets): transformer
policies built from a ``transformers`` config with a tokenizer built from the task's text (``policy``,
``tokenizer``), offline ``bc`` / ``filtered_bc`` / ``mc_returns`` / ``ilql`` (``offline``), online ``ppo``
(``ppo``) and ``online_filtered_bc`` (``online``), and ``text_world_model`` (``world_model``).

A ``pretrained`` param names a local folder (nothing is downloaded): ``suite.checks.check_pretrained`` checks
it when a suite loads, and again when a run parses its params.
"""
