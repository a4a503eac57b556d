"""End to end, as a user would: an ImagineBench-style suite (real vs imagined rollouts of rlbench's
generator) through the real `rlbench run`, then per-level success from `rlbench fetch` and `rlbench plot`."""

import json

import pytest
from e2e_cli import rl

from rlbench_cli.datasets.hdf5 import read_meta

pytestmark = pytest.mark.slow


def test_imagine_suite_builds_real_and_imagined_data_and_reports_success_per_level(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_DATASETS", str(tmp_path / "ds"))
    suite = tmp_path / "im.yaml"
    suite.write_text(
        "name: im-tiny\nseeds: 1\nbudget: {steps: 20, eval_every: 20, eval_episodes: 2}\n"
        "datasets:\n  - name: BabyAI-Lang-v0-imagine\n    data_mix: [{real: 0.5, imagined: 0.5}, real+oracle]\n"
        "    imagine: {real_episodes: 20, imagined_episodes: 3, generator_steps: 10, horizon: 8}\n"
        "algorithms:\n  - {name: bc, params: {hidden_units: [16], batch_size: 16, logging_steps: 10}}\n"
    )
    db = tmp_path / "r.duckdb"
    out = rl("run", suite, "--db", db, "--workers", "2").stdout
    assert "rlbench-generator" in out and "encoder rlbench-bow-ridge-v1" in out  # the run says which encoder
    results = [json.loads(p.read_text()) for p in tmp_path.rglob("result.json")]  # each run's record on disk
    mixed = [r["data"] for r in results if r.get("data", {}).get("data_mix") == "real=0.5,imagined=0.5"]
    assert mixed and mixed[0]["imagined_generator"] == "rlbench-generator" and mixed[0]["encoder"]
    assert (tmp_path / "ds" / "BabyAI-Lang-v0-imagine.imagined.hdf5").is_file()
    meta = read_meta(tmp_path / "ds" / "BabyAI-Lang-v0-imagine.imagined.hdf5")[0]
    assert meta["generator"] == "rlbench-generator" and meta["encoder"] == "rlbench-bow-ridge-v1"
    oracle = read_meta(tmp_path / "ds" / "BabyAI-Lang-v0-imagine.oracle.hdf5")[0]  # real rollouts of the same
    assert oracle["level"] == "oracle" and oracle["episodes"] == 9  # new instructions: 3 per new level
    rows = json.loads(rl("fetch", "--suite", "im-tiny", "--db", db, "--format", "json").stdout)
    names = {(r["env"], r["name"]) for r in rows}
    for level in ("real", "rephrase", "easy", "hard"):
        for mix in ("real=0.5,imagined=0.5", "real+oracle"):
            assert (f"BabyAI-Lang-v0-imagine[mix={mix}]", f"eval/success/{level}") in names
    rl(
        "plot",
        "im-tiny",
        "--db",
        db,
        "--metric",
        "eval/success/hard",
        "--out",
        tmp_path / "figs",
        "--no-curves",
    )
    assert (tmp_path / "figs" / "success_by_level.png").is_file()  # every level in one figure
    # the same dataset name asked for with other build settings: refused, naming the field; nothing rebuilt
    built = (tmp_path / "ds" / "BabyAI-Lang-v0-imagine.hdf5").stat().st_mtime_ns
    other = tmp_path / "im2.yaml"
    other.write_text(suite.read_text().replace("name: im-tiny", "name: im-other").replace("real_episodes: 20",
                                                                                        "real_episodes: 40"))  # fmt: skip
    proc = rl("run", other, "--db", db, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "datasets[0].imagine" in proc.stderr and "real_episodes: 20 -> 40" in proc.stderr
    assert "--datasets" in proc.stderr
    assert (tmp_path / "ds" / "BabyAI-Lang-v0-imagine.hdf5").stat().st_mtime_ns == built
