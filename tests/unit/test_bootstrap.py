"""rlbench_cli.bootstrap against rliable (the reference implementation) and its own seeding contract."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from rlbench_cli import bootstrap as bs
from rlbench_cli.bootstrap.core import _draw

rly = pytest.importorskip("rliable.library")
metrics = pytest.importorskip("rliable.metrics")

GAMMA = 1.0
RTOL = 1e-12
ATOL = 1e-14


@pytest.fixture(autouse=True)
def _keep_global_rng() -> Iterator[None]:
    """rliable draws from numpy's global generator: leave it as each test found it."""
    state = np.random.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arch / absl noise
        yield
    np.random.set_state(state)


def rliable_aggregates(scores: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    return np.array(
        [
            metrics.aggregate_median(scores),
            metrics.aggregate_iqm(scores),
            metrics.aggregate_mean(scores),
            metrics.aggregate_optimality_gap(scores, gamma),
        ]
    )


def rliable_intervals(scores: dict[str, np.ndarray], func, reps: int, seed: int, **kw):
    np.random.seed(seed)
    return rly.get_interval_estimates(scores, func, reps=reps, **kw)


def table(shape: tuple[int, int], seed: int = 0, ties: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ties:  # few distinct values: ties within and across tasks, some exactly at gamma = 1
        return rng.integers(0, 5, size=shape) / 4.0
    return rng.normal(0.6, 0.5, size=shape)


SHAPES = [(10, 20), (1, 1), (1, 7), (7, 1), (2, 3), (3, 3), (4, 5), (5, 5), (6, 7), (3, 9)]


# ---------------------------------------------------------------------------------------- indices
def test_stratified_indices_shape_range_and_replay_of_rliable() -> None:
    idx = bs.stratified_indices(bs.derive_rng(0, "a"), 4, 3, 1000)
    assert idx.shape == (1000, 4, 3) and idx.dtype == np.uint32
    assert idx.min() == 0 and idx.max() == 3
    # each (position, task) cell is uniform over runs and the tasks are drawn independently
    counts = np.stack([(idx == k).mean(axis=0) for k in range(4)])
    np.testing.assert_allclose(counts, 0.25, atol=0.07)
    assert not np.array_equal(idx[:, :, 0], idx[:, :, 1])

    # RandomState mode = what rliable's StratifiedBootstrap draws from the global generator, rep by rep,
    # and resample() = its resampled data, scores[idx[k, j], j]: runs resampled within each task
    scores = table((5, 3))
    np.random.seed(11)
    theirs = np.stack([pos[0] for pos, _ in rly.StratifiedBootstrap(scores).bootstrap(20)])
    ours = bs.stratified_indices(np.random.RandomState(11), 5, 3, 20)
    np.testing.assert_array_equal(bs.resample(scores, ours), theirs)


@pytest.mark.parametrize("high", [1, 2, 3, 5, 10, 17, 1000, 65537, 2**31 + 5, 2**32 - 1])
def test_randomstate_indices_are_rliables_stream_and_leave_its_state(high: int) -> None:
    """Replay draws run indices as uint32 (half the time of int64): the same values as rliable's
    ``np.random.choice(high, shape)`` on the global generator, which is left where rliable leaves it."""
    ours_rs = np.random.RandomState([3, 9])
    ours = _draw(ours_rs, high, (4, 5, 3))
    np.random.seed([3, 9])
    theirs = np.random.choice(high, (4, 5, 3), replace=True)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours_rs.randint(0, 2**40, size=8), np.random.randint(0, 2**40, size=8))


# ------------------------------------------------------------------------------------ point estimates
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_point_estimates_equal_rliable(shape: tuple[int, int], ties: bool) -> None:
    scores = table(shape, seed=sum(shape), ties=ties)
    expected = rliable_aggregates(scores)
    got = bs.interval_estimates({"a": scores}, reps=10, seed=0)["a"].point
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    # the public batch functions, on a batch of several matrices at once
    batch = np.stack([table(shape, seed=s, ties=ties) for s in range(4)])
    for func, ref in [
        (bs.batch_median, metrics.aggregate_median),
        (bs.batch_iqm, metrics.aggregate_iqm),
        (bs.batch_mean, metrics.aggregate_mean),
    ]:
        np.testing.assert_allclose(func(batch), [ref(b) for b in batch], rtol=RTOL, atol=ATOL)
    for gamma in (1.0, 0.5):
        np.testing.assert_allclose(
            bs.batch_optimality_gap(batch, gamma),
            [metrics.aggregate_optimality_gap(b, gamma) for b in batch],
            rtol=RTOL,
            atol=ATOL,
        )


@pytest.mark.parametrize("n", range(1, 14))
def test_iqm_trimming_matches_scipy_for_odd_and_even_sizes(n: int) -> None:
    values = np.random.default_rng(n).permutation(np.arange(n, dtype=float) ** 2)[None, :]  # 1 run, n tasks
    np.testing.assert_allclose(bs.batch_iqm(values), metrics.aggregate_iqm(values), rtol=RTOL)
    np.testing.assert_allclose(bs.batch_iqm(values.T), metrics.aggregate_iqm(values.T), rtol=RTOL)


def test_custom_callable_and_gamma() -> None:
    scores = table((6, 4))
    funcs = ["optimality_gap", bs.batch_iqm]
    out = bs.interval_estimates({"a": scores}, funcs, reps=200, seed=1, gamma=0.5)["a"]
    np.testing.assert_allclose(
        out.point,
        [metrics.aggregate_optimality_gap(scores, 0.5), metrics.aggregate_iqm(scores)],
        rtol=RTOL,
    )
    # a callable gives the same replicates as the built-in name
    named = bs.interval_estimates({"a": scores}, ["iqm"], reps=200, seed=1)["a"]
    np.testing.assert_allclose(named.lower, out.lower[1:], rtol=RTOL)
    np.testing.assert_allclose(named.upper, out.upper[1:], rtol=RTOL)


# ------------------------------------------------------------------------------------------ intervals
@pytest.mark.parametrize("method", ["percentile", "basic"])
def test_randomstate_replays_rliable_exactly(method: str) -> None:
    """Same global seed, same replicates: rliable's intervals up to floating-point summation order."""
    scores = {"b": table((5, 6), 1), "a": table((3, 6), 2), "c": table((1, 2), 3)}
    point, interval = rliable_intervals(scores, rliable_aggregates, reps=400, seed=5, method=method)
    ours = bs.interval_estimates(scores, reps=400, seed=np.random.RandomState(5), method=method)
    for algo in scores:
        np.testing.assert_allclose(ours[algo].point, point[algo], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours[algo].lower, interval[algo][0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ours[algo].upper, interval[algo][1], rtol=1e-12, atol=1e-14)


def quantile_checks(q: float, p: float, ref: np.ndarray, reps: int) -> None:
    """``q``, the ``p``-quantile of ``reps`` bootstrap replicates, is within Monte Carlo error of ``ref``.

    ``ref`` is a much larger sample of the same bootstrap distribution. Distribution-free: the number of the
    ``reps`` replicates below the true p-quantile is Binomial(reps, p), so F(q) - p has standard error
    sqrt(p (1 - p) / reps); F estimated by ``ref`` adds variance p (1 - p) / len(ref). ``F_ref(q)`` (with
    atoms: anywhere between F_ref(q-) and F_ref(q)) must lie within 5 standard errors of p, a false-alarm
    rate of 6e-7 per check.
    """
    se = np.sqrt(p * (1 - p) * (1 / reps + 1 / ref.size))
    below, at_or_below = np.mean(ref < q), np.mean(ref <= q)
    assert below - 5 * se <= p <= at_or_below + 5 * se, (q, p, below, at_or_below, se)


def test_intervals_agree_with_rliable_within_monte_carlo_error() -> None:
    reps, ref_reps, z = 5000, 200_000, 5.0
    scores = table((10, 8), 7)
    _, interval = rliable_intervals({"a": scores}, rliable_aggregates, reps=reps, seed=3)
    ours = bs.interval_estimates({"a": scores}, reps=reps, seed=3)["a"]
    ref = bs.bootstrap_distribution(scores, bs.METRICS, ref_reps, bs.derive_rng(99, "reference"))
    alpha = 0.025
    for i in range(len(bs.METRICS)):
        for p, theirs, mine in [
            (alpha, interval["a"][0, i], ours.lower[i]),
            (1 - alpha, interval["a"][1, i], ours.upper[i]),
        ]:
            quantile_checks(theirs, p, ref[:, i], reps)
            quantile_checks(mine, p, ref[:, i], reps)
            # in value units: sd of a sample p-quantile = sqrt(p (1 - p) / reps) * dQ/dp (asymptotic), dQ/dp by
            # a central difference of the reference quantile function; the two estimates are independent
            h = 0.01
            slope = np.diff(np.quantile(ref[:, i], [p - h, p + h]))[0] / (2 * h)
            se_diff = np.sqrt(p * (1 - p) * 2 / reps) * slope
            assert abs(theirs - mine) <= z * se_diff, (bs.METRICS[i], p, theirs, mine, se_diff)


# -------------------------------------------------------------------------------------------- seeding
def test_seeding_contract() -> None:
    scores = {"ppo": table((5, 4), 1), "dqn": table((5, 4), 2)}
    state = np.random.get_state()
    first = bs.interval_estimates(scores, reps=300, seed=0)
    again = bs.interval_estimates(scores, reps=300, seed=0)
    other = bs.interval_estimates(scores, reps=300, seed=1)
    more = bs.interval_estimates({"sac": table((5, 4), 3), **scores}, reps=300, seed=0)
    chunked = bs.interval_estimates(scores, reps=300, seed=0, chunk_reps=7)
    for algo in scores:
        for same in (again[algo], more[algo], chunked[algo]):
            np.testing.assert_array_equal(same.lower, first[algo].lower)
            np.testing.assert_array_equal(same.upper, first[algo].upper)
        assert not np.array_equal(other[algo].lower, first[algo].lower)
    # each algorithm has its own stream: same scores under two names, different replicates
    twins = bs.interval_estimates({"x": scores["ppo"], "y": scores["ppo"]}, reps=300, seed=0)
    assert not np.array_equal(twins["x"].lower, twins["y"].lower)
    bs.poi_interval(scores["ppo"], scores["dqn"], reps=100, seed=0, key="ppo|dqn")
    bs.performance_profile(scores, [0.0, 0.5], reps=100, seed=0)
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]


def test_derive_rng_is_stable() -> None:
    a = bs.derive_rng(3, "ppo").integers(0, 2**31, size=4)
    np.testing.assert_array_equal(a, bs.derive_rng(3, "ppo").integers(0, 2**31, size=4))
    assert not np.array_equal(a, bs.derive_rng(3, "dqn").integers(0, 2**31, size=4))
    assert not np.array_equal(a, bs.derive_rng(4, "ppo").integers(0, 2**31, size=4))
    # pinned: the stream must not change between versions, or published intervals change
    pinned = [8, 2, 6, 0, 8, 9, 9, 4]
    assert bs.derive_rng(0, "ppo").integers(0, 10, size=8, dtype=np.uint32).tolist() == pinned


def test_bootstrap_distribution_is_pinned() -> None:
    # the replicates of a benchmark-shaped table, hashed: a faster implementation must give them bit for bit
    import hashlib

    scores = np.round(np.random.default_rng(7).normal(size=(20, 50)), 1)  # ties, as real returns have
    dist = bs.bootstrap_distribution(scores, bs.METRICS, 3000, bs.derive_rng(0, "ppo"))
    digest = hashlib.sha256(dist.tobytes()).hexdigest()
    assert digest == "da004a12d4e05f5c0dad84f4a8141f96cccae2cefe95409d5c3b8bfb7ea14f47"


# ------------------------------------------------------------------------------ probability of improvement
@pytest.mark.parametrize(
    ("shape_x", "shape_y", "ties"),
    [
        ((10, 20), (10, 20), False),
        ((5, 3), (7, 3), False),
        ((1, 4), (3, 4), True),
        ((6, 5), (6, 5), True),
        ((1, 1), (1, 1), False),
    ],
)
def test_poi_point_equals_rliable(shape_x, shape_y, ties) -> None:
    x, y = table(shape_x, 1, ties), table(shape_y, 2, ties)
    for a, b in [(x, y), (y, x)]:
        assert bs.probability_of_improvement(a, b) == pytest.approx(
            metrics.probability_of_improvement(a, b), rel=RTOL
        )
    # identical columns: rliable's array_equal shortcut (0.5) is what U / (n * n) gives anyway
    assert bs.probability_of_improvement(x, x) == metrics.probability_of_improvement(x, x) == 0.5


@pytest.mark.parametrize(("nx", "ny"), [(4, 4), (3, 5)])
def test_poi_randomstate_replays_rliable_exactly(nx: int, ny: int) -> None:
    x, y = table((nx, 3), 1, ties=True), table((ny, 3), 2)
    point, interval = rliable_intervals({"k": [x, y]}, metrics.probability_of_improvement, reps=150, seed=9)
    ours = bs.poi_interval(x, y, reps=150, seed=np.random.RandomState(9))
    assert ours.point == pytest.approx(float(point["k"]), rel=RTOL)
    np.testing.assert_allclose([ours.lower, ours.upper], np.ravel(interval["k"]), rtol=1e-12)


def test_poi_interval_within_monte_carlo_error() -> None:
    reps = 1000
    x, y = table((6, 4), 4), table((5, 4), 5) + 0.2
    _, interval = rliable_intervals({"k": [x, y]}, metrics.probability_of_improvement, reps=reps, seed=2)
    ours = bs.poi_interval(x, y, reps=reps, seed=2, key="x|y")
    ref = bs.poi_distribution(x, y, 200_000, bs.derive_rng(99, "reference"))
    for p, theirs, mine in [
        (0.025, interval["k"][0, 0], ours.lower),
        (0.975, interval["k"][1, 0], ours.upper),
    ]:
        quantile_checks(theirs, p, ref, reps)
        quantile_checks(mine, p, ref, reps)


# ---------------------------------------------------------------------------------- performance profiles
@pytest.mark.parametrize("variant", ["run", "mean"])
@pytest.mark.parametrize("ties", [False, True])
def test_performance_profile_equals_rliable(variant: str, ties: bool) -> None:
    scores = {"a": table((5, 7), 1, ties), "b": table((2, 7), 2, ties)}
    taus = np.array([1.0, -0.5, 0.25, 0.5, 0.25, 0.0, 2.0, 0.75])  # unsorted, repeated, at tie values
    np.random.seed(4)
    profile, cis = rly.create_performance_profile(
        scores, taus, use_score_distribution=variant == "run", reps=300
    )
    ours = bs.performance_profile(scores, taus, reps=300, seed=np.random.RandomState(4), variant=variant)
    for algo in scores:
        np.testing.assert_array_equal(ours[algo].point, profile[algo])
        np.testing.assert_allclose(ours[algo].lower, cis[algo][0], rtol=1e-12)
        np.testing.assert_allclose(ours[algo].upper, cis[algo][1], rtol=1e-12)
    seeded = bs.performance_profile(scores, taus, reps=300, seed=0, variant=variant)
    assert all(np.all(seeded[a].lower <= seeded[a].upper) for a in scores)


# --------------------------------------------------------------------------------------------- curves
def rliable_iqm_per_point(x: np.ndarray) -> np.ndarray:
    """rliable's own formulation of an IQM sample-efficiency curve: one ``aggregate_iqm`` per point."""
    return np.array([metrics.aggregate_iqm(x[..., k]) for k in range(x.shape[-1])])


def cube(shape: tuple[int, int, int], seed: int = 0, ties: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ties:
        return rng.integers(0, 4, size=shape) / 3.0
    return rng.normal(0.0, 1.0, size=shape).cumsum(axis=-1) / 4.0  # curves: each point near the last


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("shape", [(10, 3, 12), (1, 1, 1), (1, 4, 3), (5, 1, 6), (3, 2, 1), (7, 5, 9)])
def test_curve_interval_replays_rliable_on_a_3d_array(shape: tuple[int, int, int], ties: bool) -> None:
    """rliable bootstraps a (runs, tasks, points) array with an index per run, task AND point; a RandomState
    with the seed of rliable's global generator gives the same replicates, whatever the chunking."""
    scores = cube(shape, sum(shape), ties)
    point, interval = rliable_intervals({"a": scores}, rliable_iqm_per_point, reps=300, seed=11)
    for chunk in (None, 1, 7):
        ours = bs.curve_interval(scores, reps=300, seed=np.random.RandomState(11), chunk_reps=chunk)
        np.testing.assert_allclose(ours.point, point["a"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours.lower, interval["a"][0], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours.upper, interval["a"][1], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("method", ["percentile", "basic"])
def test_curve_interval_methods_and_a_statistic_of_ones_own(method: str) -> None:
    scores = cube((4, 3, 5), 2)

    def mean_per_point(x: np.ndarray) -> np.ndarray:  # rliable's contract: one array per point
        return x.mean(axis=(0, 1))

    point, interval = rliable_intervals({"a": scores}, mean_per_point, reps=200, seed=[3, 4], method=method)
    batch_mean = lambda b: b.mean(axis=(-3, -2))  # noqa: E731
    ours = bs.curve_interval(scores, batch_mean, reps=200, seed=np.random.RandomState([3, 4]), method=method)
    np.testing.assert_allclose(ours.point, point["a"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ours.lower, interval["a"][0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ours.upper, interval["a"][1], rtol=RTOL, atol=ATOL)


def test_curve_interval_seeding_contract() -> None:
    """An integer seed: a generator derived from (seed, key), the same curve in any chunking, the global
    generator untouched; the last point of an IQM curve is the IQM of the last scores."""
    scores = cube((6, 4, 8), 5)
    state = np.random.get_state()
    first = bs.curve_interval(scores, reps=500, seed=0, key="ppo")
    for same in (bs.curve_interval(scores, reps=500, seed=0, key="ppo", chunk_reps=3),
                 bs.curve_interval(scores.copy(), reps=500, seed=0, key="ppo")):  # fmt: skip
        np.testing.assert_array_equal(same.lower, first.lower)
        np.testing.assert_array_equal(same.upper, first.upper)
    assert not np.array_equal(bs.curve_interval(scores, reps=500, seed=0, key="dqn").lower, first.lower)
    assert not np.array_equal(bs.curve_interval(scores, reps=500, seed=1, key="ppo").lower, first.lower)
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]
    assert first.point[-1] == pytest.approx(metrics.aggregate_iqm(scores[..., -1]), abs=1e-14)
    assert np.all(first.lower <= first.point + 1e-12) and np.all(first.point <= first.upper + 1e-12)


# ----------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call",
    [
        lambda: bs.interval_estimates({"a": np.ones(3)}),
        lambda: bs.interval_estimates({"a": np.array([[np.nan]])}),
        lambda: bs.interval_estimates({"a": np.ones((2, 2))}, reps=0),
        lambda: bs.interval_estimates({"a": np.ones((2, 2))}, confidence=1.0),
        lambda: bs.interval_estimates({"a": np.ones((2, 2))}, method="bca"),
        lambda: bs.interval_estimates({"a": np.ones((2, 2))}, funcs=["iqr"]),
        lambda: bs.interval_estimates({"a": np.ones((2, 2))}, seed=-1),
        lambda: bs.poi_interval(np.ones((2, 2)), np.ones((2, 3))),
        lambda: bs.performance_profile({"a": np.ones((2, 2))}, []),
        lambda: bs.performance_profile({"a": np.ones((2, 2))}, [0.5], variant="task"),
        lambda: bs.curve_interval(np.ones((2, 2))),
        lambda: bs.curve_interval(np.ones((2, 0, 3))),
        lambda: bs.curve_interval(np.array([[[1.0, np.inf]]])),
        lambda: bs.curve_interval(np.ones((2, 2, 2)), reps=0),
        lambda: bs.curve_interval(np.ones((2, 2, 2)), method="bca"),
    ],
)
def test_bad_input_raises(call) -> None:
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("stat", ["iqm", "mean"])
def test_run_curve_interval_is_the_bootstrap_of_whole_runs(stat):
    """rlbench ui's bands: from the counts, the statistic of each replicate that resamples whole runs (the
    same draw at every point), equal to building the replicates and applying batch_iqm_per_point / the mean."""
    from rlbench_cli.bootstrap.curves import _rng, batch_iqm_per_point, run_counts, run_curve_interval

    rng = np.random.default_rng(7)
    for runs, points in ((13, 7), (4, 3), (1, 5), (40, 2)):
        curves = rng.normal(size=(runs, points))
        if runs > 3:
            curves[3] = curves[1]  # ties
        est = run_curve_interval(curves, stat, reps=300, seed=3, key="g")
        counts = run_counts(_rng(3, "g"), runs, 300)
        assert (counts.sum(axis=1) == runs).all()
        cube = curves[np.array([np.repeat(np.arange(runs), c) for c in counts])][:, :, None, :]
        dist = batch_iqm_per_point(cube.copy()) if stat == "iqm" else cube.mean(axis=(1, 2))
        lower, upper = np.percentile(dist, [2.5, 97.5], axis=0)
        point = (
            batch_iqm_per_point(curves[None, :, None, :].copy())[0] if stat == "iqm" else curves.mean(axis=0)
        )
        assert (
            np.allclose(est.point, point) and np.allclose(est.lower, lower) and np.allclose(est.upper, upper)
        )


@pytest.mark.parametrize("stat", ["iqm", "mean"])
def test_run_curve_intervals_are_run_curve_interval_of_each_block_to_the_bit(stat):
    """The UI's many bands at once (blocks of one shape stacked, each replicate's cumulative counts from one
    matrix product, percentiles from sorted replicates) equal ``run_curve_interval`` of each block, exactly:
    ties, one run, more runs than the stacked path takes, one point, shapes mixed in any order."""
    from rlbench_cli.bootstrap.curves import _GEMM_RUNS, run_curve_interval, run_curve_intervals

    rng = np.random.default_rng(11)
    shapes = [(20, 30)] * 7 + [(2, 1), (1, 4), (_GEMM_RUNS, 3), (_GEMM_RUNS + 1, 3), (5, 9), (20, 30), (3, 2)]
    blocks = [np.round(rng.normal(size=s), 1) for s in shapes]  # rounded: many ties
    keys = [f"group {i}" for i in range(len(blocks))]
    for reps in (50, 1000):
        got = run_curve_intervals(blocks, keys, stat, reps, seed=5)
        for block, key, est in zip(blocks, keys, got):
            want = run_curve_interval(block, stat, reps, seed=5, key=key)
            for a, b in zip(est, want):
                assert a.shape == b.shape and np.array_equal(a, b)


def test_a_live_groups_band_resamples_at_each_step_the_runs_present_there():
    """Live, runs are at different steps: each step's band resamples the runs that have it (the steps with
    the same runs present share one bootstrap), seeded by the group's label, whichever path computes it."""
    import pyarrow as pa

    from rlbench_cli.bootstrap.curves import run_curve_interval
    from rlbench_cli.ui import curves as ui_curves

    rng = np.random.default_rng(2)
    lengths = [6, 6, 4, 2, 6]  # runs 2 and 3 are behind
    rows = [(r, 10 * s, float(rng.normal()), float(s)) for r, n in enumerate(lengths) for s in range(n)]
    table = pa.table(
        {k: [row[i] for row in rows] for i, k in enumerate(("run", "step", "value", "wall_time"))}
    )
    runs = [(f"run{r}", r, "running", "ppo") for r in range(len(lengths))]
    ui_curves._CACHE.clear()
    (group,) = ui_curves.group_curves(table, runs, ["algo"], "iqm", reps=300, seed=4)["groups"]
    assert group["label"] == "algo=ppo" and group["step"] == [0, 10, 20, 30, 40, 50]
    values = np.full((5, 6), np.nan)
    for r, s, v, _ in rows:
        values[r, s // 10] = v
    for cols, present in (([0, 1], [0, 1, 2, 3, 4]), ([2, 3], [0, 1, 2, 4]), ([4, 5], [0, 1, 4])):
        want = run_curve_interval(values[np.ix_(present, cols)], "iqm", 300, seed=4, key="algo=ppo")
        assert group["y"][cols[0] : cols[-1] + 1] == want.point.tolist()
        assert group["lower"][cols[0] : cols[-1] + 1] == want.lower.tolist()
        assert group["upper"][cols[0] : cols[-1] + 1] == want.upper.tolist()


def test_the_ui_finds_the_distinct_steps_as_np_unique_does_with_or_without_its_sort():
    from rlbench_cli.ui.curves import _distinct

    rng = np.random.default_rng(0)
    for steps in (rng.integers(0, 100, 1000) * 1000, rng.integers(-5, 5, 50), np.array([0, 10**12, 7]),
                  np.array([], np.int64)):  # fmt: skip
        got, want = _distinct(steps), np.unique(steps, return_inverse=True)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1].reshape(-1))


def test_percentiles_of_sorted_replicates_are_np_percentile_to_the_bit():
    """The UI's bands read each percentile from the two sorted replicates around it (no partition of all):
    the same numbers as ``np.percentile``, for any count of replicates and confidence, ties, one replicate."""
    from rlbench_cli.bootstrap.core import percentile_interval, sorted_percentiles

    rng = np.random.default_rng(3)
    for reps in (1, 2, 3, 7, 40, 199, 200, 1000, 2001):
        dist = rng.normal(size=(reps, 5, 3)) * 10.0 ** rng.integers(-3, 4)
        dist[:, 0] = np.round(dist[:, 0])  # ties
        ascending = np.sort(dist, axis=0)
        for q in ([2.5, 97.5], [5.0, 95.0], [0.5, 99.5], [0.0, 100.0], [16.0, 84.0], [50.0]):
            want = np.percentile(dist, q, axis=0)
            for got, w in zip(sorted_percentiles(ascending, q), want):
                assert got.shape == w.shape and np.array_equal(got, w)
        for confidence in (0.95, 0.9, 0.68):
            for a, b in zip(percentile_interval(ascending, 0.0, confidence, presorted=True),
                            percentile_interval(dist, 0.0, confidence)):  # fmt: skip
                assert np.array_equal(a, b)
