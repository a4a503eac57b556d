"""``rlbench export``: one suite as a results bundle folder, to share by folder, web server or S3."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import UnknownName, UsageError
from .common import DbOpt, SuiteArg, handle_errors, store_for

WithPoliciesOpt = Annotated[
    bool,
    typer.Option("--with-policies", help="carry the runs' saved policy files (checked by the manifest too)"),
]
WithVideosOpt = Annotated[
    bool,
    typer.Option(
        "--with-videos",
        help="carry the runs' episode videos and transcripts (checked by the manifest too), so the importer's "
        "report and UI show them",
    ),
]


def write(
    db: Path | None, suite: str, out: Path, flag: str, with_policies: bool = False, with_videos: bool = False
) -> None:
    """Write ``suite`` as a bundle at ``out`` (``bundle.export_suite``) and say what was written; ``flag``
    names the option that gave the suite, for the message when there is no such suite."""
    from ..bundle import MANIFEST, export_suite

    store = store_for(db)
    try:
        n_runs, n_rows, size = export_suite(store, suite, out, with_policies, with_videos)
    except UnknownName as e:
        raise UsageError(f"{flag} {e}") from None
    typer.echo(f"wrote {n_runs} finished runs ({n_rows} metric rows) of suite {suite!r} to {out}/ "
               f"({size / 1e6:.2f} MB, checksums in {MANIFEST})")  # fmt: skip


@handle_errors
def export(
    suite: SuiteArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="bundle folder to write (a new folder, or a bundle to replace)",
            show_default=False,
        ),
    ],  # fmt: skip
    db: DbOpt = None,
    with_policies: WithPoliciesOpt = False,
    with_videos: WithVideosOpt = False,
) -> None:
    """Write a suite's finished runs as a results bundle folder: runs.parquet (every run with its full
    manifest), metrics.parquet (every metric row), suite.json, the suite file when it still exists,
    artifacts.parquet (the runs' listed files; --with-policies carries their saved policies as
    policy-<sha256>, --with-videos their episode videos and transcripts), bundle.json and MANIFEST.sha256 (check it with sha256sum -c). Written to a temporary folder and renamed
    into place, so a half-written bundle never looks complete. Share the folder as it is, over a web server
    or in S3; rlbench fetch --from bundle:PATH_OR_URL checks every file and imports it (idempotent).

    Example: rlbench export classic-control --out shared/classic-control

    Then: python -m http.server -d shared ; rlbench fetch --from bundle:http://HOST:8000/classic-control --db other.duckdb

    S3: aws s3 sync shared/classic-control s3://my-bucket/classic-control ;
    rlbench fetch --from bundle:s3://my-bucket/classic-control --into my-study
    """
    write(db, suite, out, "suite", with_policies, with_videos)
