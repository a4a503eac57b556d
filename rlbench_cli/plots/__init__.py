"""Matplotlib figures of the statistics in ``rlbench_cli.stats``.

Every plot function takes ``ax=None`` (``axes=None`` where it draws several panels), draws into the given
axes or a new figure, and returns the ``matplotlib.figure.Figure``, so figures compose into subplots. New
figures are plain ``Figure`` objects rendered by the Agg canvas: no pyplot state, no GUI backend, no change
to the user's matplotlib backend. Matplotlib is imported inside the functions, so importing this module is
cheap.

Each algorithm has one colour in every figure: ``algo_colors`` maps the sorted algorithm names onto a fixed
colour-blind-safe palette (Okabe-Ito, then Paul Tol's muted set); pass the mapping of the suite's full list of
algorithms (``colors=``) to every function, as ``rlbench plot`` does, so that a figure of some of them keeps
their colours. Lines also differ by style and marker (``algo_styles``), so curves stay apart in greyscale.

Labels say what is drawn in words: ``Return`` or ``Normalised score (0 = random policy, 1 = reference
agent)`` rather than a metric path (``score_label``, ``metric_label``), and ``Environment steps`` or
``Gradient steps`` for the step axis (``steps_label``). ``save_figure`` writes PDF and PS with TrueType fonts
(``pdf.fonttype 42``), which conference submission systems accept, not matplotlib's default Type 3.

Layout: ``style`` (palette, line styles, labels, fonts and the shared drawing helpers), ``scores`` (figures of
a score table: aggregates, performance profile, probability of improvement, success per level), ``curves``
(sample efficiency, learning curves), ``sweeps`` (a score against a config key, per task) and ``write``
(task groups, saving, and every figure of a suite to files). Every public name is importable from this package.
"""

from rlbench_cli.plots.curves import plot_learning_curves, plot_sample_efficiency
from rlbench_cli.plots.scores import (
    plot_aggregates,
    plot_performance_profile,
    plot_probability_of_improvement,
    plot_success_by_level,
    rank_order,
)
from rlbench_cli.plots.style import (
    LABEL_SIZE,
    LEGEND_SIZE,
    LINESTYLES,
    MARKERS,
    METRIC_NAMES,
    PALETTE,
    STEP_LABELS,
    TICK_SIZE,
    TITLE_SIZE,
    FigureOptions,
    algo_colors,
    algo_styles,
    metric_label,
    score_label,
    steps_label,
)
from rlbench_cli.plots.sweeps import plot_by_key, plot_by_key_rows
from rlbench_cli.plots.write import (
    SCORE_FIGURES,
    TaskGroup,
    save_figure,
    task_groups,
    warm_up,
    write_all,
    write_learning_curves,
)

__all__ = [
    "PALETTE",
    "LINESTYLES",
    "MARKERS",
    "FigureOptions",
    "TaskGroup",
    "algo_colors",
    "algo_styles",
    "metric_label",
    "score_label",
    "steps_label",
    "rank_order",
    "task_groups",
    "save_figure",
    "plot_aggregates",
    "plot_performance_profile",
    "plot_probability_of_improvement",
    "plot_sample_efficiency",
    "plot_learning_curves",
    "write_all",
    "write_learning_curves",
    "plot_success_by_level",
    "plot_by_key",
    "plot_by_key_rows",
    "SCORE_FIGURES",
    "METRIC_NAMES",
    "STEP_LABELS",
    "TITLE_SIZE",
    "LABEL_SIZE",
    "TICK_SIZE",
    "LEGEND_SIZE",
    "warm_up",
]
