"""Every error rlbench reports to a user. One line, naming what is wrong, where, and how to fix it."""

from __future__ import annotations

__all__ = [
    "RlbenchError",
    "SuiteInvalid",
    "UsageError",
    "StoreError",
    "StoreBusy",
    "RunFailed",
    "UnknownName",
    "ImportInvalid",
    "FetchFailed",
    "error_line",
]


def error_line(err: BaseException, last: bool = False) -> str:
    """An error's first (or ``last``) line of text, or its type's name when it has none: for one-line messages
    that quote another library's error."""
    text = str(err).strip()
    return text.splitlines()[-1 if last else 0] if text else type(err).__name__


class RlbenchError(Exception):
    """Base class: the CLI prints ``str(err)`` on one line and exits with ``exit_code``."""

    exit_code = 2


class SuiteInvalid(RlbenchError):
    """A suite file cannot be read or does not validate."""


class UsageError(RlbenchError):
    """A flag or argument has a bad value."""


class UnknownName(RlbenchError):
    """An algorithm, environment, metric or suite name that does not exist."""


class ImportInvalid(RlbenchError):
    """Runs written by another tool (d3rlpy logs, ...) that cannot be imported: the file and what is wrong."""


class FetchFailed(RlbenchError):
    """A bundle URL that cannot be read: refused, not found, timed out (the URL and what happened)."""


class StoreError(RlbenchError):
    """The results database cannot be used (not DuckDB, newer schema, ...)."""


class StoreBusy(StoreError):
    """Another process holds the results database and did not let go in time."""


class RunFailed(RlbenchError):
    """One or more runs of a suite failed (exit code 1: the command worked, the runs did not)."""

    exit_code = 1
