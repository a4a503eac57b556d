"""Bootstrap speed: rlbench's vectorised bootstrap (rlbench_cli.bootstrap) vs rliable, side by side.

Two workloads, the defaults of ``rlbench_cli.stats``:

1. The four aggregates (median, IQM, mean, optimality gap) with 95% percentile intervals for 5 algorithms x
   10 runs x 20 tasks at 50,000 stratified bootstrap replicates. Target: rlbench < 1 s.
2. Probability of improvement with 95% intervals for 4 pairs of algorithms at 2,000 replicates.
   Target: rlbench < 1 s.
3. Performance profiles (rliable's run-score distribution) with 95% bands, 81 thresholds over the score range,
   2,000 replicates (rliable's default; ``--profile-reps``).
4. IQM sample-efficiency curves (``rlbench plot``'s sample_efficiency figure) with 95% bands: 5 algorithms x
   10 runs x 20 tasks x 50 evaluation points, 2,000 replicates (``--curve-reps``, ``--points``). rliable's side
   is its documented recipe, ``get_interval_estimates`` of ``[aggregate_iqm(scores[..., k]) for k in points]``.

rliable is called as ``rlbench_cli.stats`` calls it: one ``get_interval_estimates`` per algorithm (per pair),
numpy's global generator seeded with ``[seed, crc32(key)]`` before each call (and restored afterwards).

    python benchmarks/stats_speed.py                        # same reps on both sides (several minutes)
    python benchmarks/stats_speed.py --rliable-reps 5000 --rliable-poi-reps 200   # quicker, extrapolated

Both sides are timed the same way: --repeat runs each (default 3), the median compared, the spread (fastest ..
slowest) printed beside it. With fewer rliable replicates its time is extrapolated linearly in reps (its cost is one Python-level call per
replicate) and marked as such. Agreement is printed three ways: point estimates (same data, should agree to
~1e-16); interval ends of rlbench's own seeded generator vs rliable (independent Monte Carlo samples of the
same bootstrap distribution: they differ by Monte Carlo error, printed in units of its standard error); and
interval ends of rlbench replaying rliable's generator (``numpy.random.RandomState`` with rliable's seed: the
same replicates, so they agree to floating-point summation order; only when both sides use the same reps).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np

from rlbench_cli import bootstrap as bs
from rlbench_cli.stats import bootstrap_seed as global_seed
from rlbench_cli.stats import global_seed as seeded_global

TARGET_S = 1.0
ALPHA = 0.025  # 95% two-sided


def make_scores(algos: int, runs: int, tasks: int, seed: int) -> dict[str, np.ndarray]:
    """Normalised-looking scores: algorithm skill + task difficulty + run noise, some above 1."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 0.3, size=tasks)
    return {
        f"algo{i}": 0.4 + 0.1 * i + difficulty + rng.normal(0.0, 0.25, size=(runs, tasks))
        for i in range(algos)
    }


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[object, Timing]:
    """(result of the last call, the timing of ``repeat`` calls)."""
    times = []
    out: object = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, Timing(times)


class Timing:
    """Seconds of repeated calls, reported the same way for every side: median, and the spread (min..max)."""

    def __init__(self, times: list[float]):
        self.times = sorted(times)

    def scaled(self, factor: float) -> Timing:
        return Timing([t * factor for t in self.times])

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def __str__(self) -> str:
        return (f"{self.median:8.3f} s   (median of {len(self.times)}; "
                f"spread {self.times[0]:.3f} .. {self.times[-1]:.3f} s)")  # fmt: skip


def quantile_se(dist: np.ndarray, p: float, reps_a: int, reps_b: int) -> float:
    """Standard error of the difference of two independent p-quantile estimates from reps_a and reps_b
    replicates: sqrt(p (1 - p) (1/reps_a + 1/reps_b)) * dQ/dp, dQ/dp by a central difference on ``dist``."""
    h = 0.01
    lo, hi = np.quantile(dist, [p - h, p + h])
    return float(np.sqrt(p * (1 - p) * (1 / reps_a + 1 / reps_b)) * (hi - lo) / (2 * h))


def report_time(label: str, ours: Timing, theirs: Timing, extrapolated_from: int | None) -> None:
    note = f"  extrapolated from {extrapolated_from} reps" if extrapolated_from else ""
    print(f"  rlbench  {ours}")
    print(f"  rliable  {theirs}{note}")
    print(f"  speed-up {theirs.median / ours.median:8.0f} x   (median over median)")
    verdict = "MET" if ours.median < TARGET_S else "NOT MET"
    print(f"  target: rlbench < {TARGET_S:.0f} s for {label}: {verdict}")


def rliable_per_key(data: dict[str, object], func: Callable, reps: int, seed: int) -> dict:
    """rliable as ``rlbench_cli.stats`` calls it: one ``get_interval_estimates`` per key (an algorithm, a pair),
    numpy's global generator seeded with ``[seed, crc32(key)]`` before each call and restored after."""
    from rliable import library as rly

    out = {}
    for key, scores in data.items():
        with seeded_global(global_seed(seed, key)):
            out[key] = rly.get_interval_estimates({key: scores}, func, reps=reps)
    return out


def bench_aggregates(scores: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    from rliable import metrics

    reps, rreps = args.reps, args.rliable_reps or args.reps
    algos = list(scores)
    runs, tasks = scores[algos[0]].shape
    print(f"\n(1) aggregates {', '.join(bs.METRICS)}: {len(algos)} algorithms x {runs} runs x {tasks} tasks")
    print(f"    rlbench reps {reps}, rliable reps {rreps}")

    def func(s: np.ndarray) -> np.ndarray:
        return np.array(
            [
                metrics.aggregate_median(s),
                metrics.aggregate_iqm(s),
                metrics.aggregate_mean(s),
                metrics.aggregate_optimality_gap(s, 1.0),
            ]
        )

    ours, t_ours = timed(lambda: bs.interval_estimates(scores, bs.METRICS, reps, seed=args.seed), args.repeat)

    theirs, t_rly = timed(lambda: rliable_per_key(scores, func, rreps, args.seed), args.repeat)
    report_time("the aggregates", t_ours, t_rly.scaled(reps / rreps), rreps if rreps != reps else None)

    point_diff = max(np.max(np.abs(ours[a].point - theirs[a][0][a])) for a in algos)
    end_diff, end_z, width = 0.0, 0.0, 0.0
    for a in algos:
        dist = bs.bootstrap_distribution(scores[a], bs.METRICS, reps, bs.derive_rng(args.seed, a))
        ci = theirs[a][1][a]
        for i in range(len(bs.METRICS)):
            for row, p, mine in [(0, ALPHA, ours[a].lower[i]), (1, 1 - ALPHA, ours[a].upper[i])]:
                diff = abs(ci[row, i] - mine)
                end_diff = max(end_diff, diff)
                end_z = max(end_z, diff / quantile_se(dist[:, i], p, reps, rreps))
            width = max(width, ours[a].upper[i] - ours[a].lower[i])
    print(f"  max |point estimate diff|           {point_diff:.3g}")
    print(
        f"  max |interval end diff|, seeded     {end_diff:.3g}  (Monte Carlo; max {end_z:.2f} standard errors; "
        f"widest interval {width:.3f})"
    )
    if rreps == reps:
        replay_diff = 0.0
        for a in algos:
            r = bs.interval_estimates(
                {a: scores[a]}, bs.METRICS, reps, seed=np.random.RandomState(global_seed(args.seed, a))
            )
            ci = theirs[a][1][a]
            replay_diff = max(replay_diff, np.max(np.abs(np.stack([r[a].lower, r[a].upper]) - ci)))
        print(
            f"  max |interval end diff|, replay     {replay_diff:.3g}  (rlbench on rliable's RandomState stream)"
        )


def bench_poi(scores: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    from rliable import metrics

    reps, rreps = args.poi_reps, args.rliable_poi_reps or args.poi_reps
    algos = list(scores)
    pairs = [(algos[0], b) for b in algos[1 : args.pairs + 1]]
    print(f"\n(2) probability of improvement: {len(pairs)} pairs, {scores[algos[0]].shape[1]} tasks")
    print(f"    rlbench reps {reps}, rliable reps {rreps}")

    def run_ours() -> dict[str, bs.Interval]:
        return {
            f"{x}|{y}": bs.poi_interval(scores[x], scores[y], reps, seed=args.seed, key=f"{x}|{y}")
            for x, y in pairs
        }

    ours, t_ours = timed(run_ours, args.repeat)

    pair_scores = {f"{x}|{y}": [scores[x], scores[y]] for x, y in pairs}
    theirs, t_rly = timed(
        lambda: rliable_per_key(pair_scores, metrics.probability_of_improvement, rreps, args.seed),
        args.repeat,
    )
    report_time(
        "probability of improvement", t_ours, t_rly.scaled(reps / rreps), rreps if rreps != reps else None
    )

    point_diff = max(abs(ours[k].point - float(theirs[k][0][k])) for k in ours)
    end_diff, end_z = 0.0, 0.0
    for (x, y), key in zip(pairs, ours):
        dist = bs.poi_distribution(scores[x], scores[y], reps, bs.derive_rng(args.seed, key))
        ci = np.ravel(theirs[key][1][key])
        for value, p, mine in [(ci[0], ALPHA, ours[key].lower), (ci[1], 1 - ALPHA, ours[key].upper)]:
            end_diff = max(end_diff, abs(value - mine))
            end_z = max(end_z, abs(value - mine) / quantile_se(dist, p, reps, rreps))
    print(f"  max |point estimate diff|           {point_diff:.3g}")
    print(
        f"  max |interval end diff|, seeded     {end_diff:.3g}  (Monte Carlo; max {end_z:.2f} standard errors)"
    )
    if rreps == reps:
        replay_diff = 0.0
        for (x, y), key in zip(pairs, ours):
            r = bs.poi_interval(
                scores[x], scores[y], reps, seed=np.random.RandomState(global_seed(args.seed, key))
            )
            ci = np.ravel(theirs[key][1][key])
            replay_diff = max(replay_diff, abs(r.lower - ci[0]), abs(r.upper - ci[1]))
        print(
            f"  max |interval end diff|, replay     {replay_diff:.3g}  (rlbench on rliable's RandomState stream)"
        )


def bench_profile(scores: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    from rliable import library as rly

    reps, rreps = args.profile_reps, args.rliable_profile_reps or args.profile_reps
    algos = list(scores)
    runs, tasks = scores[algos[0]].shape
    values = np.concatenate([v.ravel() for v in scores.values()])
    taus = np.linspace(values.min(), values.max(), args.taus)  # rlbench's default: 81 over the score range
    print(f"\n(3) performance profiles (run-score distribution): {len(algos)} algorithms x {runs} runs x {tasks} "
          f"tasks, {len(taus)} thresholds")  # fmt: skip
    print(f"    rlbench reps {reps}, rliable reps {rreps}")
    ours, t_ours = timed(lambda: bs.performance_profile(scores, taus, reps, seed=args.seed), args.repeat)

    def run_rliable() -> tuple:
        with seeded_global(global_seed(args.seed, "profile")):
            return rly.create_performance_profile(scores, taus, reps=rreps)

    theirs, t_rly = timed(run_rliable, args.repeat)
    report_time(
        "the performance profiles", t_ours, t_rly.scaled(reps / rreps), rreps if rreps != reps else None
    )
    point_diff = max(np.max(np.abs(ours[a].point - theirs[0][a])) for a in algos)
    print(f"  max |point estimate diff|           {point_diff:.3g}")
    if rreps == reps:  # rlbench replaying rliable's stream: the same replicates, the same bands
        replay = bs.performance_profile(
            scores, taus, reps, seed=np.random.RandomState(global_seed(args.seed, "profile"))
        )
        diff = max(np.max(np.abs(np.stack([replay[a].lower, replay[a].upper]) - theirs[1][a])) for a in algos)
        print(f"  max |band end diff|, replay         {diff:.3g}  (rlbench on rliable's RandomState stream)")


def bench_curves(scores: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    from rliable import metrics

    reps, rreps = args.curve_reps, args.rliable_curve_reps or args.curve_reps
    algos = list(scores)
    rng = np.random.default_rng(args.seed + 1)
    # a curve per run rising to its final score: (runs, tasks) -> (runs, tasks, points)
    ramp = (1 - np.exp(-3 * np.linspace(0, 1, args.points))) / (1 - np.exp(-3))
    curves = {
        a: s[..., None] * ramp + rng.normal(0, 0.05, s.shape + (args.points,)) for a, s in scores.items()
    }
    runs, tasks, points = curves[algos[0]].shape
    print(f"\n(4) IQM sample-efficiency curves: {len(algos)} algorithms x {runs} runs x {tasks} tasks x {points} "
          f"points")  # fmt: skip
    print(f"    rlbench reps {reps}, rliable reps {rreps}")

    def run_ours() -> dict[str, bs.Interval]:  # as stats.sample_efficiency bootstraps each algorithm
        return dict(zip(algos, bs.map_independent(
            lambda a: bs.curve_interval(curves[a], reps=reps, seed=np.random.RandomState(global_seed(args.seed, a))),
            algos, args.seed)))  # fmt: skip

    ours, t_ours = timed(run_ours, args.repeat)

    def iqm_per_point(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(x[..., k]) for k in range(x.shape[-1])])

    theirs, t_rly = timed(lambda: rliable_per_key(curves, iqm_per_point, rreps, args.seed), args.repeat)
    report_time(
        "the sample-efficiency curves", t_ours, t_rly.scaled(reps / rreps), rreps if rreps != reps else None
    )
    point_diff = max(np.max(np.abs(ours[a].point - theirs[a][0][a])) for a in algos)
    print(f"  max |point estimate diff|           {point_diff:.3g}")
    if rreps == reps:  # the same stream: the same replicates, the same bands
        diff = max(np.max(np.abs(np.stack([ours[a].lower, ours[a].upper]) - theirs[a][1][a])) for a in algos)
        print(f"  max |band end diff|, replay         {diff:.3g}  (rlbench on rliable's RandomState stream)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50000, help="aggregate bootstrap replicates (rlbench)")
    parser.add_argument("--rliable-reps", type=int, default=None, help="for rliable; default --reps")
    parser.add_argument("--poi-reps", type=int, default=2000, help="probability-of-improvement replicates")
    parser.add_argument("--rliable-poi-reps", type=int, default=None, help="for rliable; default --poi-reps")
    parser.add_argument("--algos", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; each side's median is compared")
    parser.add_argument("--profile-reps", type=int, default=2000, help="performance-profile replicates")
    parser.add_argument(
        "--rliable-profile-reps", type=int, default=None, help="for rliable; default --profile-reps"
    )
    parser.add_argument("--taus", type=int, default=81, help="performance-profile thresholds")
    parser.add_argument("--curve-reps", type=int, default=2000, help="sample-efficiency curve replicates")
    parser.add_argument(
        "--rliable-curve-reps", type=int, default=None, help="for rliable; default --curve-reps"
    )
    parser.add_argument(
        "--points", type=int, default=50, help="evaluation points of each sample-efficiency curve"
    )
    parser.add_argument("--skip", choices=["aggregates", "poi", "profile", "curves"], action="append", default=[],
                        help="leave a workload out (repeatable)")  # fmt: skip
    args = parser.parse_args()
    if args.pairs >= args.algos:
        parser.error("--pairs must be smaller than --algos (pairs are algo0 vs each other algorithm)")
    warnings.filterwarnings("ignore", category=FutureWarning)
    scores = make_scores(args.algos, args.runs, args.tasks, args.seed)
    print(f"numpy {np.__version__}; rlbench_cli.bootstrap vs rliable; seed {args.seed}")
    if "aggregates" not in args.skip:
        bench_aggregates(scores, args)
    if "poi" not in args.skip:
        bench_poi(scores, args)
    if "profile" not in args.skip:
        bench_profile(scores, args)
    if "curves" not in args.skip:
        bench_curves(scores, args)


if __name__ == "__main__":
    main()
