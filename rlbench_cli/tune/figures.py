"""``rlbench tune --status``'s figures: the optimisation history, Optuna's parameter importances and a slice
of the objective against each param."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["write_figures"]


def _done(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in trials if t["state"] == "complete" and t["value"] is not None]


def _history(trials: list[dict[str, Any]], objective: str, out: Path, fmt: str) -> Path:
    from matplotlib.ticker import MaxNLocator

    from ..plots.style import _new_figure
    from ..plots.write import save_figure

    done = _done(trials)
    fig = _new_figure(6.0, 3.6)
    ax = fig.subplots()
    xs = [t["number"] for t in done]
    ys = [t["value"] for t in done]
    best = [max(ys[: i + 1]) for i in range(len(ys))]
    ax.scatter(xs, ys, s=18, color="#0072B2", label="trial", zorder=3)
    ax.step(xs, best, where="post", color="#D55E00", label="best so far")
    failed = [t["number"] for t in trials if t["state"] in ("fail", "pruned")]
    if failed and ys:
        ax.scatter(failed, [min(ys)] * len(failed), marker="x", color="#999999", label="failed or pruned")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"{objective.upper() if objective == 'iqm' else objective} of the trial's runs")
    ax.set_title("Optimisation history")
    ax.legend(frameon=False, fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, out / f"tune_history.{fmt}")


def _importance(study: Any, out: Path, fmt: str) -> Path | None:
    from ..plots.style import _new_figure
    from ..plots.write import save_figure

    try:
        import optuna

        imp = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError, ImportError):  # fewer than two complete trials, or one param value only
        return None
    if not imp:
        return None
    names = list(imp)[::-1]
    fig = _new_figure(6.0, 0.6 + 0.45 * len(names))
    ax = fig.subplots()
    ax.barh(names, [imp[n] for n in names], color="#0072B2")
    ax.set_xlabel("importance (Optuna's fANOVA; sums to 1)")
    ax.set_title("Parameter importances")
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, out / f"tune_importance.{fmt}")


def _slice(trials: list[dict[str, Any]], params: dict[str, Any], out: Path, fmt: str) -> Path | None:
    import numpy as np
    from matplotlib.ticker import NullFormatter

    from ..plots.style import _new_figure
    from ..plots.write import save_figure

    done = _done(trials)
    if not done:
        return None
    names = list(params)
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = _new_figure(3.2 * cols, 2.8 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        xs = [t["params"].get(name) for t in done]
        ys = [t["value"] for t in done]
        kind = params[name].kind
        if kind == "choice":
            cats = [str(v) for v in params[name].values()]
            ax.scatter(
                [cats.index(str(x)) for x in xs], ys, s=16, c=[t["number"] for t in done], cmap="viridis"
            )
            ax.set_xticks(range(len(cats)), cats)
        else:
            ax.scatter(xs, ys, s=16, c=[t["number"] for t in done], cmap="viridis")
            if (
                kind == "log"
            ):  # three labelled ticks over the trials' range, which may span less than a decade
                ax.set_xscale("log")
                ticks = np.geomspace(min(xs), max(xs), 3) if min(xs) < max(xs) else [xs[0]]
                ax.set_xticks(ticks, [f"{t:.2g}" for t in ticks])
                ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(names) :]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("objective")
    fig.suptitle("Objective against each param (colour: trial number)")
    return save_figure(fig, out / f"tune_slice.{fmt}")


def write_figures(
    study: Any, trials: list[dict[str, Any]], spec: Any, out: Path, fmt: str = "png"
) -> list[Path]:
    """The three figures in ``out`` (those that can be drawn: importances need two complete trials)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [_history(trials, spec.objective, out, fmt), _importance(study, out, fmt),
             _slice(trials, spec.params, out, fmt)]  # fmt: skip
    return [p for p in paths if p is not None]
