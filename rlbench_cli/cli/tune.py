from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import UsageError
from .common import DbOpt, JsonOpt, handle_errors, is_tty, store_for
from .run import Progress, _StopOnSignal


class _TuneProgress(Progress):
    """``rlbench run``'s progress lines, plus one line per trial handed out and per trial scored."""

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "tune_batch":
            self._print(f"trials {', '.join(map(str, info['trials']))}: running")
        elif event == "tune_trial":
            if "pruned_at" in info:
                self._print(f"trial {info['number']}: pruned at step {info['pruned_at']:,}")
                return
            value, twin = info["value"], ""
            if "same_as" in info:
                twin = f" (the configuration of trial {info['same_as']}: its score, not run again)"
            self._print(
                f"trial {info['number']}: " + ("failed" if value is None else f"objective {value:.4f}") + twin
            )
        else:
            super().__call__(event, info)


@handle_errors
def tune(
    suite_file: Annotated[Path, typer.Argument(help="suite YAML file with a tune: block")],
    db: DbOpt = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            "-w",
            help="trials in parallel (each trial's runs too) [default: 1]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor", help="where the trials' runs go [default: resources.executor]", show_default=False
        ),
    ] = None,  # fmt: skip
    status: Annotated[
        bool,
        typer.Option(
            "--status", help="show the study (trials, confirmation) and write its figures; runs nothing"
        ),
    ] = False,  # fmt: skip
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="--status: folder for the figures [default: results/figures/SUITE.tune]",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive", help="confirm in AdaStop's batches of fresh seeds until every pair is decided"
        ),
    ] = False,  # fmt: skip
    alpha: Annotated[float, typer.Option("--alpha", help="--adaptive: family-wise error")] = 0.05,
    batch: Annotated[
        int, typer.Option("--batch", help="--adaptive: seeds per configuration and task per look")
    ] = 5,
    max_batches: Annotated[int, typer.Option("--max-batches", help="--adaptive: looks at most")] = 5,
    json_out: JsonOpt = False,
) -> None:
    """Tune an algorithm entry's params with Optuna: every trial is ordinary rlbench runs (suite NAME.tune),
    scored by the suite's rule; then the best configurations and the default are re-run on fresh seeds
    (suite NAME.confirm) and compared with IQM intervals and the probability of improvement. Kill it and run
    the same command again: the study goes on where it stopped, no trial lost or doubled.

    Example: rlbench tune suites/tune-cartpole.yaml --workers 2 ; rlbench tune suites/tune-cartpole.yaml --status
    """
    from ..suite.loader import load_suite
    from ..tune import status_text, tune_status, tune_suite

    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")
    settings = None
    if adaptive:
        from ..adaptive import AdaptiveSettings, check_settings

        settings = AdaptiveSettings(alpha, batch, max_batches)
        check_settings(settings, 2)
    suite = load_suite(suite_file)
    store = store_for(db)
    if status:
        folder = out or Path("results") / "figures" / f"{suite.name}.tune"
        found = tune_status(suite, str(suite_file), store, figures=folder)
    else:
        from ..coordinator import run_suite

        progress = _TuneProgress(live=is_tty(), quiet=json_out)
        try:
            with _StopOnSignal() as stopper:
                found = tune_suite(suite, str(suite_file), store, run_suite, workers=workers, report=progress,
                                   executor=executor, stop=stopper.event, adaptive=settings)  # fmt: skip
        finally:
            progress.close()
    if json_out:
        typer.echo(json.dumps(found.to_dict(), indent=1, default=str))
        return
    typer.echo(status_text(suite, found))
    for p in found.figures:
        typer.echo(f"wrote {p}")
