"""The suite: its schema (``models``), its checks against the registries (``checks``), loading a suite file
(``loader``), its expansion into runs (``grid``) and the runs' ids (``ids``, a leaf).

Import what you need from its module (``from rlbench_cli.suite.loader import load_suite``): this package
imports none of them, so ``suite.ids`` stays free of pydantic and YAML.
"""
