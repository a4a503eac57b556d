"""The library functions ``rlbench datasets import`` and ``rlbench datasets export`` call:
``datasets.imaginebench.import_files`` and ``datasets.catalog.export_minari`` (imports minari)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from rlbench_cli.datasets.catalog import export_minari
from rlbench_cli.datasets.data import OfflineData
from rlbench_cli.datasets.hdf5 import read_hdf5, write_hdf5
from rlbench_cli.datasets.imaginebench import import_files
from rlbench_cli.envs.imagine.babyai import STATE_DIM
from rlbench_cli.errors import UsageError

ENV = "rlbench/BabyAI-Lang-v0"


def _pickle(path, n, words="go to the red ball"):
    with open(path, "wb") as f:
        pickle.dump({"observations": np.zeros((n, STATE_DIM), np.float32), "actions": np.arange(n) % 7,
                     "rewards": np.ones(n, np.float32), "masks": np.array([1, 1, 0] * (n // 3), np.float32),
                     "instructions": np.array([words] * n)}, f)  # fmt: skip
    return path


def test_import_files_writes_real_and_imagined_and_refuses_a_second_time(tmp_path):
    real, im = _pickle(tmp_path / "real.pkl", 6), _pickle(tmp_path / "im.pkl", 9, "grab the red ball")
    out, n_real, n_imagined = import_files(real, "ib", ENV, im, trust=True, root=tmp_path / "ds")
    assert (out, n_real, n_imagined) == (tmp_path / "ds" / "ib.hdf5", 6, 9)
    assert (
        read_hdf5(out).meta["level"] == "real" and len(read_hdf5(tmp_path / "ds" / "ib.imagined.hdf5")) == 9
    )
    assert import_files(real, "only", ENV, trust=True, root=tmp_path / "ds")[1:] == (6, None)
    with pytest.raises(UsageError, match="--name 'ib': .* exists already"):
        import_files(real, "ib", ENV, trust=True, root=tmp_path / "ds")
    with pytest.raises(UsageError, match="^--env: "):
        import_files(real, "other", "Nope-v0", trust=True, root=tmp_path / "ds")


def test_export_minari_names_the_id_and_folder(tmp_path):
    pytest.importorskip("minari")
    terminals = np.zeros(10, bool)
    terminals[[3, 9]] = True
    meta = {"name": "CartPole-v1-medium", "env_id": "CartPole-v1", "env_kwargs": {}, "level": "medium",
            "discrete": True, "n_actions": 2}  # fmt: skip
    data = OfflineData(np.zeros((10, 4), np.float32), np.array([0, 1] * 5), np.ones(10, np.float32), terminals,
                       np.zeros(10, bool), meta)  # fmt: skip
    write_hdf5(tmp_path / "CartPole-v1-medium.hdf5", data)
    dataset_id, folder, root = export_minari("CartPole-v1-medium", None, tmp_path / "m", tmp_path)
    assert (dataset_id, root) == ("rlbench/CartPole-v1-medium-v0", tmp_path / "m")
    assert folder == tmp_path / "m" / "rlbench" / "CartPole-v1-medium-v0" and folder.is_dir()
    with pytest.raises(UsageError, match="export CartPole-v1-medium as rlbench/CartPole-v1-medium-v0 into"):
        export_minari("CartPole-v1-medium", None, tmp_path / "m", tmp_path)
