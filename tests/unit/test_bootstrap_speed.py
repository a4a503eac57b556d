"""The faster bootstrap (#12) gives the same numbers, bit for bit, as the straightforward one it replaced:
probability of improvement by run counts x pair scores instead of comparing every resampled pair, the IQM by
sorting rank codes instead of float64 values, smaller chunks. The reference functions below are the code
before the change, applied to the same draws."""

from __future__ import annotations

import numpy as np
import pytest

from rlbench_cli import bootstrap as bs
from rlbench_cli.bootstrap.aggregates import _aggregate, _ranks
from rlbench_cli.bootstrap.core import _draw
from rlbench_cli.bootstrap.poi import _poi_batch


def _poi_reference(x, y, reps, rng, chunk):
    """poi_distribution before #12: resample both, compare every pair of resampled runs."""
    nx, ny, m = x.shape[0], y.shape[0], x.shape[1]
    high = nx if nx == ny else np.repeat([nx, ny], [nx, ny])[:, None]
    out = np.empty(reps)
    for start in range(0, reps, chunk):
        stop = min(reps, start + chunk)
        idx = _draw(rng, high, (stop - start, nx + ny, m))
        out[start:stop] = _poi_batch(bs.resample(x, idx[:, :nx]), bs.resample(y, idx[:, nx:]))
    return out


def _agg_reference(x, reps, rng, chunk, gamma=1.0):
    """bootstrap_distribution before #12: resample the values, sort them for the IQM."""
    n, m = x.shape
    out = np.empty((reps, 4))
    for start in range(0, reps, chunk):
        stop = min(reps, start + chunk)
        batch = bs.resample(x, _draw(rng, n, (stop - start, n, m)))
        out[start:stop] = _aggregate(batch, bs.METRICS, gamma)
    return out


SHAPES = [(1, 1), (3, 1), (5, 4), (10, 5), (7, 3), (20, 50), (4, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ties", [True, False])
def test_poi_distribution_bitwise_unchanged(shape, ties):
    gen = np.random.default_rng(sum(shape))
    x = gen.normal(size=shape)
    y = gen.normal(size=(shape[0] + 2, shape[1]))
    if ties:
        x, y = np.round(x, 1), np.round(y, 1)
    for a, b in ((x, y), (y, x), (x, x[::-1])):
        got = bs.poi_distribution(a, b, reps=700, rng=bs.derive_rng(3, "p"))
        ref = _poi_reference(a, b, 700, bs.derive_rng(3, "p"), 97)
        assert np.array_equal(got, ref)
    # rliable replay mode (RandomState) too
    got = bs.poi_distribution(x, y, reps=300, rng=np.random.RandomState(5))
    assert np.array_equal(got, _poi_reference(x, y, 300, np.random.RandomState(5), 300))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ties", [True, False])
def test_aggregates_bitwise_unchanged(shape, ties):
    gen = np.random.default_rng(sum(shape) + 1)
    x = gen.normal(size=shape) * 3
    if ties:
        x = np.round(x)
    got = bs.bootstrap_distribution(x, bs.METRICS, reps=900, rng=bs.derive_rng(1, "a"), gamma=0.5)
    ref = _agg_reference(x, 900, bs.derive_rng(1, "a"), 1000, gamma=0.5)
    assert np.array_equal(got, ref)
    for chunk in (1, 7, 900):
        assert np.array_equal(
            bs.bootstrap_distribution(x, ["iqm"], reps=900, rng=bs.derive_rng(1, "a"), chunk_reps=chunk),
            ref[:, [1]],
        )


def test_ranks_roundtrip():
    x = np.array([[3.0, -1.0, 3.0], [0.5, -1.0, 7.0]])
    ranks = _ranks(x)
    assert ranks.codes.dtype == np.uint16
    assert np.array_equal(ranks.values[ranks.codes], x)
    assert np.all(np.diff(ranks.values) >= 0)
