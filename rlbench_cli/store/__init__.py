"""The results database: the ONLY code that imports duckdb.

One writer, nothing lost (see DESIGN.md): DuckDB lets one process hold a file for writing, and while it
does, no other process can open it at all. So the coordinator opens the file only for the moment it writes
(``Store.writer()``), and readers (``Store.reader()``) retry briefly on a lock instead of failing. Workers
never open the file: they write Parquet shards that ``ingest_shards`` loads, idempotently, in one
transaction with the record of which shards it loaded.

The package splits the one ``Store`` class by responsibility: ``connection`` (opening, lock retry,
transactions), ``writes`` (suites, runs, attempts, shard ingest), ``queries`` (reads), ``scores`` (score rules
in SQL), ``browse`` (the reads of ``rlbench ui``), ``transfer`` (bundles, merges, imports); ``schema`` holds the tables and migrations.
"""

from __future__ import annotations

from .browse import Browse
from .connection import default_db_path
from .queries import Queries
from .schema import RUN_COLUMNS, SCHEMA_VERSION, TERMINAL
from .scores import Scores
from .transfer import Transfer
from .writes import Writes

__all__ = ["Store", "default_db_path", "RUN_COLUMNS", "TERMINAL", "SCHEMA_VERSION"]


class Store(Writes, Transfer, Queries, Scores, Browse):
    """A DuckDB results file. Cheap to construct; connections are opened per operation."""
