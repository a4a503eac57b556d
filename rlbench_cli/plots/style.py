"""The look shared by every figure: one colour, line style and marker per algorithm, labels in words, font
sizes, and the helpers that make a figure, style its axes and place its legend."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from rlbench_cli import stats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# Okabe & Ito's colour-blind-safe palette (black and yellow last: yellow is faint on white), then 8 hues of
# Paul Tol's "muted" set. Every pair of the first 8 stays apart under deuteranopia, protanopia and tritanopia
# (CIELAB distance > 15, tested). Past 8 algorithms the line style and marker tell curves apart.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
    "#332288",  # indigo
    "#117733",  # green
    "#882255",  # wine
    "#44AA99",  # teal
    "#999933",  # olive
    "#AA4499",  # purple
    "#DDCC77",  # sand
    "#CC6677",  # rose
)
# the second cue of each algorithm's line, so curves stay apart in greyscale: the i-th colour of PALETTE
# takes LINESTYLES[i % 4] and MARKERS[i % 8]
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")

# what the x axis of curves counts, by the kinds of task drawn (see ``steps_label``)
STEP_LABELS = {
    "online": "Environment steps",
    "offline": "Gradient steps",
    "mixed": "Training steps (environment steps online, gradient steps offline)",
    None: "Training steps",
}
# readable names of common metrics, for axis labels; other metrics keep their own name
METRIC_NAMES = {
    "eval/return": "Return",
    "eval/success": "Success rate",
    "eval/length": "Episode length",
    "train/episode_return": "Training episode return",
    # a text world model's (algos.text.world_model)
    "eval/em": "EM (exact next observation)",
    "eval/em_end": "EM on episode ends (end and reward)",
    "eval/real": "Real success",
    "eval/wm": "Success in the world model",
    "eval/w2r": "W2R success",
    "eval/cr": "CR (W2R / Real)",
}

TITLE_SIZE = 13
LABEL_SIZE = 11
TICK_SIZE = 10
LEGEND_SIZE = 10


def algo_colors(algos: Sequence[str]) -> dict[str, str]:
    """One colour per algorithm: the sorted unique names take ``PALETTE`` in order (cycling past 16).

    Derive it from the suite's FULL list of algorithms and pass it to every figure: an algorithm then keeps
    its colour in a figure that shows only some of them (a task group, a subset).

    Args:
        algos: Algorithm names, in any order, duplicates allowed.

    Returns:
        ``{algo: hex colour}``; the same list of names always gives the same mapping.
    """
    names = sorted(set(map(str, algos)))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def algo_styles(colors: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The second cue of each algorithm's line, ``{algo: (linestyle, marker)}``, tied to its colour.

    The i-th colour of ``PALETTE`` always gets ``LINESTYLES[i % 4]`` and ``MARKERS[i % 8]``, so the cue is as
    stable as the colour; a colour used again (past 16 algorithms) shifts both, and a colour not in
    ``PALETTE`` takes them by its position in ``colors``.
    """
    index = {c.upper(): i for i, c in enumerate(PALETTE)}
    seen: dict[str, int] = {}
    out = {}
    for pos, (algo, color) in enumerate(colors.items()):
        key = str(color).upper()
        i = index.get(key, pos)
        again = seen.get(key, 0)
        seen[key] = again + 1
        out[algo] = (LINESTYLES[(i + again) % len(LINESTYLES)], MARKERS[(i + 3 * again) % len(MARKERS)])
    return out


def metric_label(metric: str) -> str:
    """A readable axis label for a metric: ``eval/return`` -> ``Return``; unknown names are kept as they are."""
    return METRIC_NAMES.get(metric, metric)


def score_label(table: stats.ScoreTable) -> tuple[str, str | None]:
    """What the scores of a table are, for an axis: ``(name, note)``.

    ``("Return", None)`` for raw returns (``metric_label`` of other metrics), ``("Normalised score", "0 =
    random policy, 1 = reference agent")`` for scores normalised by a reference table, and for a suite's own
    references the range and where they came from.
    """
    if not table.normalized:
        return metric_label(table.metric), None
    desc = table.norm_description
    if "; 0 = " in desc:  # a built-in table: "...; 0 = random policy, 1 = reference agent (x 100, ...)"
        note = desc.rsplit("; ", 1)[1].split(" (")[0]
    elif desc.startswith("suite references (") and "):" in desc:
        note = f"0 to {table.scale:g}: " + desc[len("suite references (") : desc.index("):")]
    else:
        note = f"{table.normalized} references" + (f", x{table.scale:g}" if table.scale != 1 else "")
    return "Normalised score", note


def _score_text(table: stats.ScoreTable, sep: str = " ") -> str:
    name, note = score_label(table)
    return name if note is None else f"{name}{sep}({note})"


def _iqm_label(table: stats.ScoreTable) -> str:
    name, note = score_label(table)
    name = (
        name[:1].lower() + name[1:] if name in METRIC_NAMES.values() or name == "Normalised score" else name
    )
    return f"IQM of {name}" + (f"\n({note})" if note else "")


def steps_label(kinds: Iterable[str | None]) -> str:
    """The x label of curves over training: what a step is for the kinds of task drawn.

    Args:
        kinds: ``"online"`` (environment steps) or ``"offline"`` (gradient steps on a dataset) per task drawn;
            None where unknown.

    Returns:
        ``"Environment steps"`` when every task is online, ``"Gradient steps"`` when every task is offline,
        the mixed text only when both are there, ``"Training steps"`` when it is not known.
    """
    found = {k for k in kinds if k in ("online", "offline")}
    if len(found) == 2:
        return STEP_LABELS["mixed"]
    return STEP_LABELS[found.pop()] if found else STEP_LABELS[None]


@dataclass(frozen=True)
class FigureOptions:
    """What a user sets on the figures of a suite (``rlbench plot --title --xlabel --ylabel --figsize``).

    None keeps the default of each figure.

    Attributes:
        title: The figure title (suptitle) in place of the suite name and counts; a task group's figures add
            the group.
        xlabel: The step axis: x label of the learning curves and of sample efficiency.
        ylabel: The score axis: y label of the learning curves and of sample efficiency, x label of the
            aggregate panels.
        figsize: ``(width, height)`` in inches of every figure.
        share_y: The figure against a key (``--x``): one y range across its tasks' panels (each row's).
    """

    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    figsize: tuple[float, float] | None = None
    share_y: bool = False


# --------------------------------------------------------------------------------------------- helpers
def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colors(colors: Mapping[str, str] | None, algos: Sequence[str]) -> Mapping[str, str]:
    if colors is None:
        return algo_colors(algos)
    missing = [a for a in algos if a not in colors]
    if missing:
        extra = algo_colors(list(colors) + list(missing))
        return {**extra, **colors}
    return colors


def _style(ax: Axes, title: str | None = None, xlabel: str | None = None, ylabel: str | None = None) -> None:
    if title is not None:
        ax.set_title(title, fontsize=TITLE_SIZE)
    if xlabel is not None:
        ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.tick_params(labelsize=TICK_SIZE)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, alpha=0.3, linewidth=0.8)
    ax.set_axisbelow(True)


def _legend(ax: Axes, outside: bool) -> None:
    """Legend outside the plot area (right) on figures made here, inside ("best") on a caller's axes."""
    if outside:
        ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="best")


def _rule(table: stats.ScoreTable) -> str:
    return table.rule + (f" (first {table.drop_first} evals dropped)" if table.drop_first else "")


def _step_axis(ax: Axes) -> None:
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10]))  # fewer on small axes


def _algo_order(frame: pd.DataFrame, column: str, table: stats.ScoreTable | None) -> list[str]:
    present = list(dict.fromkeys(frame[column].astype(str)))
    if table is not None:
        return [a for a in table.algos if a in present] + [a for a in present if a not in table.algos]
    return sorted(present)
