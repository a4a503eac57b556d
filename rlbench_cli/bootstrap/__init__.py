"""Vectorised, seeded stratified bootstrap for rliable's statistics.

rliable (the reference implementation, see ``rlbench_cli.stats``) computes its intervals with one Python-level
call of the statistic per bootstrap replicate: ``scipy.stats.trim_mean`` for every IQM replicate and a
``scipy.stats.mannwhitneyu`` test per task for every probability-of-improvement replicate. Its
``StratifiedBootstrap`` also draws the resampling indices from numpy's GLOBAL generator
(``np.random.choice``), whatever ``random_state`` says. This module computes the same statistics for a whole
batch of replicates at once with numpy, from a generator of its own.

Semantics matched to rliable 1.2.0 / arch 7.2 (read from their source):

* Stratified bootstrap (``library.StratifiedBootstrap``, ``task_bootstrap=False``): one replicate of a score
  matrix of shape (num_runs, num_tasks) draws an index array of the same shape,
  ``np.random.choice(num_runs, (num_runs, num_tasks), replace=True)``, and takes ``scores[idx[k, j], j]``:
  runs are resampled with replacement, independently within each task (column); tasks are never resampled.
* Probability of improvement (``library.StratifiedIndependentBootstrap`` on the pair ``[x, y]``): per
  replicate, ``x`` and ``y`` get independent index arrays (first x's, then y's), each stratified by task.
* Curves (``StratifiedBootstrap`` of a (num_runs, num_tasks, num_points) array, as rliable's sample-efficiency
  curves call it): the index array has the array's whole shape, ``np.random.choice(num_runs, (num_runs,
  num_tasks, num_points))``, and a replicate takes ``scores[idx[i, j, k], j, k]``: runs are resampled
  independently within every task and every point.
* Intervals (``arch``'s ``conf_int(method="percentile")``): ``np.percentile`` (linear interpolation) of the
  bootstrap distribution at ``100 * alpha`` and ``100 * (1 - alpha)``, ``alpha = (1 - confidence) / 2``.
  Point estimates are the statistic on the original data.

Seeding: an integer ``seed`` and a key (an algorithm name, or ``"x|y"`` for a pair) give a
``numpy.random.Generator(PCG64(SeedSequence(seed, spawn_key=blake2b(key))))`` (``derive_rng``), so an
algorithm's interval depends only on its own scores and ``seed``, never on the other algorithms loaded, and
numpy's global generator is never touched. Indices are drawn as ``uint32`` (Lemire's method, one 32-bit word
per index), a stream that does not depend on how the replicates are split into chunks.

Passing a ``numpy.random.RandomState`` instead of an integer seed replays rliable exactly: indices are then
drawn with ``RandomState.randint`` in rliable's order, which is the stream ``np.random.choice`` produces, so
``np.random.seed(s)`` followed by an rliable call and the same call here with ``RandomState(s)`` give the same
bootstrap replicates (intervals equal up to floating-point summation order).

Only numpy is needed; nothing here imports scipy, arch or rliable.

Layout: ``core`` (validation, seeding, index draws, percentile intervals), ``aggregates`` (rliable's four
aggregates and ``interval_estimates``), ``poi`` (probability of improvement), ``profiles`` (performance
profiles), ``curves`` (statistics over training; ``run_curve_interval`` resamples whole runs) and ``threads`` (independent bootstraps on threads). Every
public name is importable from this package.
"""

from rlbench_cli.bootstrap.aggregates import (
    METRICS,
    BatchFunc,
    batch_iqm,
    batch_mean,
    batch_median,
    batch_optimality_gap,
    bootstrap_distribution,
    interval_estimates,
)
from rlbench_cli.bootstrap.core import (
    Interval,
    Rng,
    derive_rng,
    percentile_interval,
    resample,
    stratified_indices,
)
from rlbench_cli.bootstrap.curves import (
    batch_iqm_per_point,
    curve_distribution,
    curve_interval,
    run_counts,
    run_curve_interval,
    run_curve_intervals,
)
from rlbench_cli.bootstrap.poi import poi_distribution, poi_interval, probability_of_improvement
from rlbench_cli.bootstrap.profiles import performance_profile
from rlbench_cli.bootstrap.threads import map_independent, workers

__all__ = [
    "METRICS",
    "Interval",
    "Rng",
    "BatchFunc",
    "derive_rng",
    "stratified_indices",
    "resample",
    "batch_median",
    "batch_iqm",
    "batch_mean",
    "batch_optimality_gap",
    "bootstrap_distribution",
    "percentile_interval",
    "interval_estimates",
    "probability_of_improvement",
    "poi_distribution",
    "poi_interval",
    "performance_profile",
    "batch_iqm_per_point",
    "curve_distribution",
    "curve_interval",
    "run_counts",
    "run_curve_interval",
    "run_curve_intervals",
    "map_independent",
    "workers",
]
