"""Score rules, normalisation and rliable aggregates: from tidy metric rows to numbers with confidence intervals.

Data flow::

    metric rows (run_id, algo, env, seed, step, value)      one metric, e.g. ``eval/return``
      -> run_scores(df, rule)        one score per run by a declared rule (final, best, mean_last:N, auc)
      -> score_table(df, rule, ...)  ScoreTable: {algo: ndarray(num_runs x num_tasks)}, rliable's contract,
                                     normalised by FIXED reference scores (never by the loaded runs)
      -> aggregates / probability_of_improvement / performance_profile    rliable, stratified bootstrap

Curves over training (``sample_efficiency``, ``learning_curves``) start again from the metric rows.

Reproducible bootstrap: every statistic of rliable's here is ``rlbench_cli.bootstrap``'s vectorised one,
proven equal to rliable on the same data (``tests/unit/test_stats.py``, ``tests/unit/test_bootstrap.py``).
The generator of each is derived from ``seed`` and the name of what is resampled (an algorithm, or a pair of
algorithms), so an algorithm's interval depends only on its own runs and ``seed``, not on which other
algorithms happen to be loaded: ``bootstrap.derive_rng(seed, key)`` for the aggregates, probability of
improvement and performance profiles; for the sample-efficiency curve, numpy's legacy generator seeded with
``bootstrap_seed(seed, key)``, the stream rliable draws from after ``np.random.seed(bootstrap_seed(seed,
algo))``, so a direct rliable call on the same array reproduces that curve's bands. The learning curves'
bands (a bootstrap of each point's mean over runs, not one of rliable's) come from one
``numpy.random.default_rng(seed)`` drawn point after point. Numpy's global generator is never touched.

Neither rliable nor scipy is imported here, so importing this package is cheap.

Layout: ``scores`` (metric rows -> one score per run), ``normalise`` (fixed reference scores), ``tables``
(``ScoreTable`` and ``score_table``), ``intervals`` (aggregates, probability of improvement, performance
profiles, the bootstrap seeds), ``curves`` (sample efficiency, learning curves), ``sweeps`` (a score
against a config key, per task: ``key_intervals``, ``x_axis``) and ``paired`` (one configuration against a
baseline, paired by seed: sign and Wilcoxon tests equal to scipy's, the mean difference's bootstrap interval,
Holm's adjustment; ``paired_family``). Every public name is importable from this package.
"""

from rlbench_cli.scoring import (
    PHASE_METRIC,
    SCORED_COLUMNS,
    StatsError,
    StatsWarning,
    finish_order,
    parse_rule,
    rule_phase,
)
from rlbench_cli.stats.curves import learning_curves, sample_efficiency
from rlbench_cli.stats.intervals import (
    aggregates,
    bootstrap_seed,
    default_taus,
    global_seed,
    performance_profile,
    probability_of_improvement,
)
from rlbench_cli.stats.normalise import REFERENCES
from rlbench_cli.stats.paired import (
    ALTERNATIVES,
    PairedTest,
    holm,
    joint_family,
    mean_diff_interval,
    paired_family,
    paired_test,
    resolve_baseline,
    sign_test,
    smallest_p,
    tests_in_family,
    wilcoxon,
)
from rlbench_cli.stats.scores import (
    COLUMNS,
    RULES,
    finish_run_scores,
    is_scored,
    per_run_scores,
    phase_rows,
    run_scores,
)
from rlbench_cli.stats.sweeps import KEY_STATS, XAxis, key_intervals, natural_order, x_axis
from rlbench_cli.stats.tables import (
    METRIC_LABELS,
    METRICS,
    OPTIMALITY_GAP_GAMMA,
    ScoreTable,
    score_label,
    score_table,
)

__all__ = [
    "REFERENCES",
    "RULES",
    "METRICS",
    "ScoreTable",
    "StatsError",
    "StatsWarning",
    "parse_rule",
    "run_scores",
    "SCORED_COLUMNS",
    "rule_phase",
    "phase_rows",
    "PHASE_METRIC",
    "is_scored",
    "finish_run_scores",
    "per_run_scores",
    "score_table",
    "aggregates",
    "probability_of_improvement",
    "performance_profile",
    "sample_efficiency",
    "learning_curves",
    "bootstrap_seed",
    "score_label",
    "COLUMNS",
    "METRIC_LABELS",
    "OPTIMALITY_GAP_GAMMA",
    "default_taus",
    "finish_order",
    "global_seed",
    "KEY_STATS",
    "XAxis",
    "key_intervals",
    "natural_order",
    "x_axis",
    "ALTERNATIVES",
    "PairedTest",
    "holm",
    "joint_family",
    "tests_in_family",
    "mean_diff_interval",
    "paired_family",
    "paired_test",
    "resolve_baseline",
    "sign_test",
    "smallest_p",
    "wilcoxon",
]
