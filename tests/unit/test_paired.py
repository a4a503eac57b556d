"""Paired comparisons by seed (stats.paired): the sign and Wilcoxon tests equal scipy's on the same differences,
Holm's adjustment, the seeded bootstrap of the mean difference, ties that survive float subtraction, and the
family `rlbench compare --paired` prints."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import stats
from rlbench_cli.bootstrap import derive_rng

pytestmark = pytest.mark.fast


def differences(rng: np.random.Generator, kind: int, n: int) -> np.ndarray:
    """Continuous, tied-and-zero, and rounded differences: every branch of scipy's method='auto'."""
    if kind == 0:
        return rng.normal(0.3, 1.0, n)
    if kind == 1:
        return rng.integers(-4, 5, n).astype(float) * 5
    return np.round(rng.normal(0.2, 1.0, n), 1)


@pytest.mark.parametrize("alternative", stats.ALTERNATIVES)
def test_wilcoxon_and_sign_test_equal_scipy(alternative):
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(7)
    checked, branches = 0, set()
    for trial in range(150):
        d = differences(rng, trial % 3, int(rng.integers(1, 70)))
        if not (d != 0).any():
            continue
        tied = (d == 0).any() or len(np.unique(np.abs(d))) < len(d)
        branches.add("asymptotic" if len(d) > 50 or (tied and len(d) > 13) else "flips" if tied else "exact")
        reference = scipy_stats.wilcoxon(d, alternative=alternative).pvalue
        assert stats.wilcoxon(d, alternative) == pytest.approx(reference, rel=1e-9, abs=1e-15), d
        above, n = int((d > 0).sum()), int((d != 0).sum())
        sign = scipy_stats.binomtest(above, n, 0.5, alternative=alternative).pvalue
        assert stats.sign_test(d, alternative) == pytest.approx(sign, rel=1e-12)
        checked += 1
    assert checked > 130 and branches == {"exact", "flips", "asymptotic"}


def test_the_smallest_p_is_every_difference_one_way():
    for n in range(1, 9):
        ones = np.ones(n)
        assert stats.smallest_p(n) == pytest.approx(min(1.0, stats.wilcoxon(ones))) == stats.sign_test(ones)
        assert stats.smallest_p(n, "greater") == pytest.approx(stats.wilcoxon(ones, "greater"))
    assert stats.smallest_p(0) == 1.0
    test = stats.paired_test({s: 0.0 for s in range(7)}, {s: float(s > 1) for s in range(7)}, reps=10)
    assert test.min_p == stats.smallest_p(5) == 0.0625


def test_every_difference_zero_is_no_evidence():
    assert stats.wilcoxon([0.0, 0.0, 0.0]) == 1.0
    assert stats.sign_test([0.0, 0.0]) == 1.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="alternative must be one of two-sided, greater, less"):
        stats.wilcoxon([1.0, 2.0], "bigger")
    with pytest.raises(ValueError, match="finite"):
        stats.wilcoxon([1.0, float("nan")])
    with pytest.raises(ValueError, match="no seed in both"):
        stats.paired_test({1: 0.5}, {2: 0.5})


def test_holm_adjusts_step_down_in_the_given_order():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, None, 0.01]) == [pytest.approx(0.5), None, pytest.approx(0.02)]
    assert stats.holm([0.6, 0.9]) == [1.0, 1.0]


def test_the_mean_difference_interval_is_a_seeded_percentile_bootstrap():
    d = np.array([0.7, 0.3, 0.15, 0.0, -0.15, 0.1, 0.25, 0.05, 0.4, 0.1])
    lower, upper = stats.mean_diff_interval(d, reps=2000, seed=3, key="k")
    rng = derive_rng(3, "k")
    means = d[rng.integers(0, len(d), size=(2000, len(d)))].mean(axis=1)
    assert (lower, upper) == tuple(np.percentile(means, [2.5, 97.5]))
    assert stats.mean_diff_interval(d, reps=2000, seed=3, key="k") == (lower, upper)
    assert stats.mean_diff_interval(d, reps=2000, seed=4, key="k") != (lower, upper)


def test_the_bootstrap_in_chunks_is_the_bootstrap_in_one(monkeypatch):
    from rlbench_cli.stats import paired

    d = np.linspace(-1, 2, 40)
    whole = stats.mean_diff_interval(d, reps=3000, seed=0, key="x")
    monkeypatch.setattr(paired, "_CHUNK_ELEMENTS", 40 * 7)  # chunks of 7 replicates
    assert stats.mean_diff_interval(d, reps=3000, seed=0, key="x") == whole


def test_ties_survive_float_subtraction():
    # 0.6 - 0.45 and 0.35 - 0.2 are one tie, 0.3 - 0.3 a zero, though their floats differ in the last bits
    a = {1: 0.45, 2: 0.2, 3: 0.3, 4: 0.5}
    b = {1: 0.6, 2: 0.35, 3: 0.3, 4: 0.3}
    test = stats.paired_test(a, b, reps=100)
    assert (test.above, test.below, test.tied) == (2, 1, 1)
    assert test.wilcoxon_p == pytest.approx(stats.wilcoxon([0.15, 0.15, -0.2]))
    assert test.seeds == (1, 2, 3, 4)
    assert test.mean_a == pytest.approx(0.3625) and test.mean_diff == pytest.approx(0.025)


def frame(rows):
    return pd.DataFrame(rows, columns=["algo", "env", "seed", "score"])


def test_the_family_pairs_tasks_within_each_algorithm_and_adjusts_over_all():
    rows = []
    for seed in range(6):
        for algo, shift in (("a", 0.0), ("b", 0.1)):
            rows.append((algo, "real", seed, 0.5 + shift))
            rows.append((algo, "mix", seed, 0.6 + shift + 0.01 * seed))
    rows.append(("a", "mix", 99, 1.0))  # a seed with no partner
    dimension, baseline, family = stats.paired_family(frame(rows), "real", reps=200)
    assert (dimension, baseline) == ("task", "real")
    assert [(r["group"], r["other"], r["pairs"], r["unpaired"]) for r in family] == [
        ("a", "mix", 6, [99]),
        ("b", "mix", 6, []),
    ]
    assert family[0]["above"] == 6 and family[0]["sign_p"] == pytest.approx(2 / 64)
    assert [r["holm_p"] for r in family] == stats.holm([r["wilcoxon_p"] for r in family])
    # the other way: algorithms within each task
    dimension, baseline, family = stats.paired_family(frame(rows), "algo:a", alternative="greater", reps=200)
    assert (dimension, baseline) == ("algo", "a")
    assert [(r["group"], r["other"]) for r in family] == [("mix", "b"), ("real", "b")]
    assert family[1]["mean_diff"] == pytest.approx(0.1) and family[1]["wilcoxon_p"] == pytest.approx(1 / 64)


def test_a_row_level_on_every_seed_has_no_test_and_is_not_in_holms_family():
    rows = []
    for seed in range(7):
        rows += [("clone", "t", seed, 0.9), ("same", "t", seed, 0.9), ("worse", "t", seed, 0.5 - 0.01 * seed)]
    _, _, family = stats.paired_family(frame(rows), "clone", reps=100)
    same, worse = family
    assert (same["other"], same["tied"], same["sign_p"], same["wilcoxon_p"], same["holm_p"]) == (
        "same", 7, None, None, None)  # fmt: skip
    assert same["min_p"] == 1.0  # and marked as unable to show anything
    # no seed off level, nothing tested (scipy's binomtest refuses n = 0): the family is the one test there is
    from scipy import stats as scipy_stats

    with pytest.raises(ValueError):
        scipy_stats.binomtest(0, 0)
    assert worse["wilcoxon_p"] == pytest.approx(2 / 2**7) and worse["holm_p"] == worse["wilcoxon_p"]


def test_the_baseline_is_named_or_refused_in_one_line():
    rows = [("real", "real", 0, 1.0), ("b", "real", 0, 2.0), ("b", "mix", 0, 1.0), ("real", "mix", 0, 1.5)]
    with pytest.raises(
        stats.StatsError, match=r"names both a task and an algorithm; write task:real or algo:real"
    ):
        stats.paired_family(frame(rows), "real")
    assert stats.paired_family(frame(rows), "task:real", reps=10)[:2] == ("task", "real")
    with pytest.raises(stats.StatsError, match=r"--paired 'rael' names no task or algorithm .*; close: real"):
        stats.paired_family(frame(rows), "rael")
    with pytest.raises(stats.StatsError, match=r"no algo 'c' has finished runs; there: b, real"):
        stats.paired_family(frame(rows), "algo:c")
    twice = frame([("a", "real", 0, 1.0), ("a", "real", 0, 2.0), ("a", "mix", 0, 1.0)])
    with pytest.raises(stats.StatsError, match=r"a on real has two finished runs with seed 0"):
        stats.paired_family(twice, "real")


def test_non_finite_scores_are_left_out():
    rows = [("a", "real", s, 1.0) for s in range(3)] + [("a", "mix", 0, float("nan")), ("a", "mix", 1, 2.0)]
    _, _, family = stats.paired_family(frame(rows), "real", reps=10)
    assert family[0]["seeds"] == [1] and family[0]["unpaired"] == [0, 2]
