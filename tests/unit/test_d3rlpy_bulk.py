"""d3rlpy logs read in bulk (one pyarrow read for every CSV) give what the line-by-line reader gives: the same
numbers for plain files, and for anything else (nan, blank lines, CRLF, bad fields) the same numbers or the
same error, since those files go through the line-by-line reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlbench_cli.errors import ImportInvalid
from rlbench_cli.importers import d3rlpy_logs as d

pytestmark = pytest.mark.fast

GOOD = {
    "plain": b"1,1000,1.5\n2,2000,-3e5\n3,3000,7\n",
    "no_final_newline": b"1,10,0.1\n2,20,0.30000000000000004",
    "signs": b"+1,+10,+.5\n-2,-20,-5.\n",
    "nan_inf": b"1,10,nan\n2,20,inf\n3,30,-Infinity\n",
    "blank_lines": b"\n1,10,2.5\n\n2,20,3.5\n  \n",
    "crlf": b"1,10,2.5\r\n2,20,3.5\r\n",
    "spaces": b"1, 10 , 2.5\n",
    "empty": b"",
    "long": b"".join(b"%d,%d,%.17g\n" % (i, i * 1000, v) for i, v in enumerate(np.random.default_rng(0).normal(size=500))),
}  # fmt: skip
BAD = {
    "two_columns": b"1,10\n",
    "four_columns": b"1,10,2,3\n",
    "float_step": b"1,1.5,2\n",
    "empty_value": b"1,10,\n",
    "exponent_step": b"1,1e3,2\n",
    "not_a_number": b"1,10,1e\n",
    "dots": b"1,10,.\n",
}


def _folder(root: Path, i: int, files: dict[str, bytes]) -> Path:
    run = root / f"CQL_hopper-medium-v2_{i}_20220101{i:06d}"
    run.mkdir(parents=True)
    (run / "params.json").write_text('{"gamma": 0.99}')
    for name, data in files.items():
        (run / f"{name}.csv").write_bytes(data)
    return run


def _same(a, b) -> None:
    assert (a.key, a.algo, a.env, a.seed, a.config, a.source) == (
        b.key,
        b.algo,
        b.env,
        b.seed,
        b.config,
        b.source,
    )
    assert list(a.metrics) == list(b.metrics)
    for name in a.metrics:
        (sa, va), (sb, vb) = a.metrics[name], b.metrics[name]
        assert np.array_equal(np.asarray(sa, np.int64), np.asarray(sb, np.int64))
        assert np.array_equal(np.asarray(va, float), np.asarray(vb, float), equal_nan=True)


def test_bulk_read_equals_line_by_line(tmp_path):
    for i, (name, data) in enumerate(GOOD.items()):
        _folder(tmp_path, i, {"environment": data, name: data, "loss": GOOD["plain"]})
    bulk = d.read(tmp_path)
    slow = [d.read_run(f) for f in d.find_run_folders(tmp_path)]
    assert len(bulk) == len(GOOD)
    for a, b in zip(bulk, slow, strict=True):
        _same(a, b)
    assert any(isinstance(r.metrics["loss"][0], np.ndarray) for r in bulk)  # the bulk path was taken


@pytest.mark.parametrize("name", sorted(BAD))
def test_bulk_read_errors_like_line_by_line(tmp_path, name):
    _folder(tmp_path, 0, {"environment": GOOD["plain"]})
    bad = _folder(tmp_path, 1, {"environment": GOOD["plain"], "loss": BAD[name]})
    _folder(tmp_path, 2, {"environment": GOOD["plain"]})
    with pytest.raises(ImportInvalid) as slow:
        d.read_run(bad)
    with pytest.raises(ImportInvalid) as bulk:
        d.read(tmp_path)
    assert str(bulk.value) == str(slow.value)


def test_plain_files_read_into_one_buffer_equal_line_by_line(tmp_path):
    """When every file is plain they are read straight into one buffer (``_read_whole``) and parsed once; the
    numbers are those of the line-by-line reader, and ``metrics_table`` takes them without copying."""
    from rlbench_cli.importers import metrics_table

    plain = ("plain", "no_final_newline", "empty", "long")  # "signs": pyarrow reads them one by one
    for i, name in enumerate(plain):
        _folder(tmp_path, i, {"environment": GOOD[name], name: GOOD[name], "loss": GOOD["no_final_newline"]})
    csvs = [c for f in d.find_run_folders(tmp_path) for c in d._csv_files(f)]
    assert d._read_whole(csvs) is not None
    bulk = d.read(tmp_path)
    slow = [d.read_run(f) for f in d.find_run_folders(tmp_path)]
    for a, b in zip(bulk, slow, strict=True):
        _same(a, b)
    ids = [f"r{i}" for i in range(len(bulk))]
    fast, copied = metrics_table(bulk, ids), metrics_table(slow, ids)
    assert fast.equals(copied)
    steps = fast.column("step").chunk(0)
    assert np.shares_memory(steps.to_numpy(zero_copy_only=True), bulk[0].metrics["loss"][0])  # no copy
