"""Options shared by several commands, declared once, and the one place errors become messages."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..errors import RlbenchError

F = TypeVar("F", bound=Callable[..., Any])

DbOpt = Annotated[
    Path | None,
    typer.Option("--db", help="results database [default: $RLBENCH_DB or results/rlbench.duckdb]",
                 show_default=False),
]  # fmt: skip
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable JSON on stdout")]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed", min=0, max=2**32 - 1, help="seed of the bootstrap resampling (same seed, same intervals)"
    ),
]
RepsOpt = Annotated[
    int, typer.Option("--reps", min=100, help="bootstrap replicates for confidence intervals")
]


def debug() -> bool:
    return os.environ.get("RLBENCH_DEBUG", "") not in ("", "0")


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"rlbench: error: {message}", err=True)
    return typer.Exit(code)


def stdout_closed() -> bool:
    """Whether whoever reads stdout has gone (``| head``); if so, stdout goes to /dev/null from here on, so
    that nothing more, not even Python's last flush at exit, complains about it."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0)):
            return False
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        return True
    except (OSError, ValueError, AttributeError):  # no real stdout (captured, closed): not a reader gone away
        return False


def handle_errors(fn: F) -> F:
    """Turn RlbenchError into one line on stderr and its exit code; RLBENCH_DEBUG=1 shows the traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RlbenchError as e:
            if debug():
                raise
            raise fail(str(e), e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("rlbench: interrupted", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BrokenPipeError:
            if not stdout_closed():  # another pipe (a worker's, a socket): not the reader going away
                raise fail("internal error: a pipe closed early (set RLBENCH_DEBUG=1 for the traceback, and "
                           "please report it)", 1) from None  # fmt: skip
            # `rlbench ... | head` stopped reading: stop quietly, with the status SIGPIPE gives
            raise typer.Exit(141) from None
        except OSError as e:  # a path the user gave (--out, --output, ...) that cannot be written or read
            if debug():
                raise
            what = f"{e.filename}: {e.strerror or e}" if e.filename else " ".join(str(e).split())
            raise fail(f"{what}; check the path and its permissions") from None
        except Exception as e:  # a bug of ours: say so in one line; the traceback is one variable away
            if debug():
                raise
            raise fail(
                f"internal error: {type(e).__name__}: {e} (set RLBENCH_DEBUG=1 for the traceback, "
                "and please report it)",
                1,
            ) from None

    return wrapper  # type: ignore[return-value]


ScoreOpt = Annotated[
    str | None,
    typer.Option("--score", help="final | best | mean_last:N | auc (default: the suite's score rule)"),
]
DropFirstOpt = Annotated[
    int | None,
    typer.Option("--drop-first", help="ignore each run's first N evaluations (default: the suite's)"),
]
MetricOpt = Annotated[
    str | None,
    typer.Option("--metric", help="metric to score runs by (default: the suite's, else eval/return)"),
]


SuiteArg = Annotated[str, typer.Argument(help="suite name, as in rlbench status")]
NormalizeOpt = Annotated[
    str,
    typer.Option(
        "--normalize",
        help="auto (the suite's normalize block, else a built-in table covering every task) | none | suite | "
        "classic-control | d4rl | atari",
    ),
]


ShareYOpt = Annotated[
    bool,
    typer.Option(
        "--share-y",
        help="in a figure against a key (plot --x, the report's figures against the settings that vary): one y "
        "range across the tasks' panels (each metric's row), so that tasks compare by eye (default: each panel "
        "fitted to its task)",
    ),
]
PairedOpt = Annotated[
    str | None,
    typer.Option(
        "--paired",
        metavar="BASELINE",
        help="a task (or algorithm) to compare every other one against, within each algorithm (or task), paired "
        "by seed: sign and Wilcoxon tests, mean difference, Holm (task:NAME or algo:NAME when a name is both)",
    ),
]
AlternativeOpt = Annotated[
    str | None,
    typer.Option("--alternative", help="with --paired: two-sided | greater | less [default: two-sided]"),
]
PairedStepsOpt = Annotated[
    list[int] | None,
    typer.Option(
        "--step-max",
        help="with --paired: score each run as if it ended at this step (0: before its real training); "
        "repeated, one family over the steps' rows (Holm over all of them)",
    ),
]


def check_paired_flags(paired: str | None, alternative: str | None, **only_paired: Any) -> None:
    """``--alternative`` (and ``only_paired``: ``{flag: value}``, e.g. ``{"--reps": 100}``) given without
    ``--paired``, or an alternative the tests do not know: one line, exit 2."""
    from ..errors import UsageError
    from ..stats.paired import ALTERNATIVES

    if paired is None:
        given = [flag for flag, v in {"--alternative": alternative, **only_paired}.items() if v is not None]
        if given:
            raise UsageError(f"{given[0]} applies to --paired BASELINE only; add --paired or drop {given[0]}")
    if alternative is not None and alternative not in ALTERNATIVES:
        raise UsageError(f"--alternative {alternative!r}: use one of {', '.join(ALTERNATIVES)}")


def check_score_flags(score: str | None, drop_first: int | None) -> None:
    from ..errors import UsageError
    from ..suite.models import SCORE_RULE_RE

    rule, at, phase = (score or "").partition("@")
    if score is not None and (
        not SCORE_RULE_RE.match(rule) or (at and phase not in ("offline", "online", "all"))
    ):
        raise UsageError(f"--score {score!r}: use final, best, auc or mean_last:N (N a positive integer), "
                         "optionally @offline, @online or @all for a phase of fine-tuned runs")  # fmt: skip
    if drop_first is not None and drop_first < 0:
        raise UsageError(f"--drop-first must be 0 or more (got {drop_first})")


def store_for(db: Path | None) -> Any:
    from ..store import Store

    return Store(db)


def is_tty() -> bool:
    return sys.stdout.isatty()
