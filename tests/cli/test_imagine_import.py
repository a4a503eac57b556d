"""`rlbench datasets import`: ImagineBench's files become a dataset with real and imagined rollouts; bad
files and a pickle without --trust are one-line errors (exit 2) and nothing is written."""

import pickle

import numpy as np
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.datasets.hdf5 import read_hdf5
from rlbench_cli.envs.imagine.babyai import STATE_DIM

runner = CliRunner()
ENV = "rlbench/BabyAI-Lang-v0"


def _ib(n=6, words="go to the red ball"):
    return {"observations": np.zeros((n, STATE_DIM), np.float32), "actions": np.arange(n) % 7,
            "rewards": np.ones(n, np.float32), "masks": np.array([1, 1, 0] * (n // 3), np.float32),
            "instructions": np.array([words] * n)}  # fmt: skip


def _pickle(path, d):
    with open(path, "wb") as f:
        pickle.dump(d, f)
    return path


def test_import_needs_trust_for_a_pickle_and_then_pairs_real_and_imagined(tmp_path):
    real, im = (
        _pickle(tmp_path / "real.pkl", _ib()),
        _pickle(tmp_path / "im.pkl", _ib(9, "grab the red ball")),
    )
    args = ["datasets", "import", str(real), "--imagined", str(im), "--name", "ib", "--env", ENV,
            "--datasets", str(tmp_path / "ds")]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert (
        "real.pkl: a pickled file, and loading a pickle can run any code" in r.output
        and "--trust" in r.output
    )
    assert not (tmp_path / "ds").exists()
    r = runner.invoke(app, [*args, "--trust"])
    assert r.exit_code == 0, r.output
    assert "6 real and 9 imagined transitions" in r.output
    got = read_hdf5(tmp_path / "ds" / "ib.hdf5")
    assert got.meta["env_id"] == ENV and got.meta["encoder"] == "rlbench-bow-ridge-v1"
    assert len(read_hdf5(tmp_path / "ds" / "ib.imagined.hdf5")) == 9


def test_import_of_a_bad_file_names_it_and_the_key_and_writes_nothing(tmp_path):
    d = _ib()
    del d["instructions"]
    bad = _pickle(tmp_path / "bad.pkl", d)
    r = runner.invoke(app, ["datasets", "import", str(bad), "--name", "ib", "--env", ENV, "--trust",
                            "--datasets", str(tmp_path / "ds")])  # fmt: skip
    assert r.exit_code == 2 and "bad.pkl: key 'instructions' is missing" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "ds").exists()
    wide = _pickle(tmp_path / "wide.pkl", {**_ib(), "observations": np.zeros((6, 5), np.float32)})
    r = runner.invoke(app, ["datasets", "import", str(wide), "--name", "ib", "--env", ENV, "--trust",
                            "--datasets", str(tmp_path / "ds")])  # fmt: skip
    assert r.exit_code == 2 and f"but {ENV} observes" in r.output and not (tmp_path / "ds").exists()
