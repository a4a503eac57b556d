"""Importers: d3rlpy folder names and files, and the store's one-transaction, idempotent import."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

from rlbench_cli.errors import ImportInvalid, UsageError
from rlbench_cli.importers import FORMATS, ImportedRun, import_source, metrics_table, parse_source
from rlbench_cli.importers.d3rlpy_logs import RunName, find_run_folders, parse_run_name, read_run
from rlbench_cli.store import Store


@pytest.mark.parametrize(
    "name, expected",
    [
        ("DiscreteCQL_breakout_3_20211206103030", RunName("DiscreteCQL", "breakout", 3, "20211206103030")),
        ("CQL_hopper-medium-v0_10_20220101000000", RunName("CQL", "hopper-medium-v0", 10, "20220101000000")),
        ("IQL_my_long_task_0_20230102030405", RunName("IQL", "my_long_task", 0, "20230102030405")),
        ("BC_pong_007_20230102030405", RunName("BC", "pong", 7, "20230102030405")),
    ],
    ids=["d3rlpy-benchmarks", "dashes-in-task", "underscores-in-task", "leading-zero-seed"],
)
def test_parse_run_name(name, expected):
    assert parse_run_name(name) == expected


@pytest.mark.parametrize(
    "name, needle",
    [
        ("DiscreteCQL_breakout_3", "expected <ALGO>_<task>_<seed>_<timestamp>"),
        ("CQL_pong_3_2021120610303", "is not a 14-digit timestamp"),
        ("CQL_pong_3_20211206103030_copy", "'copy' is not a 14-digit timestamp"),
        ("CQL_pong_s3_20211206103030", "'s3' before the timestamp is not an integer seed"),
        ("CQL_pong_-1_20211206103030", "'-1' before the timestamp is not an integer seed"),
        ("_pong_3_20211206103030", "empty algorithm or task name"),
        ("CQL__3_20211206103030", "empty algorithm or task name"),
    ],
    ids=["no-timestamp", "short-timestamp", "suffix", "seed-text", "seed-negative", "no-algo", "no-task"],
)
def test_parse_run_name_rejects(name, needle):
    with pytest.raises(ValueError, match="") as e:
        parse_run_name(name)
    assert needle in str(e.value)


def _run(root, name, files):
    folder = root / name
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    return folder


GOOD = {
    "environment.csv": "1,100,1.5\n2,200,2.5\n\n",
    "loss.csv": "1,100,nan\n",
    "params.json": '{"a": [1, 2]}',
}


def test_read_run_maps_files_to_metrics(tmp_path):
    folder = _run(tmp_path, "DQN_pong_2_20240101000000", {**GOOD, "model_1.d3": "binary", "notes.txt": "x"})
    run = read_run(folder)
    assert (run.key, run.algo, run.env, run.seed) == ("DQN_pong_2_20240101000000", "DQN", "pong", 2)
    assert run.config == {"a": [1, 2]}
    assert set(run.metrics) == {"eval/return", "loss"}
    assert run.metrics["eval/return"] == ([100, 200], [1.5, 2.5])
    steps, values = run.metrics["loss"]
    assert steps == [100] and values[0] != values[0]  # NaN is a value (diverged training), not an error
    assert run.num_rows == 3 and run.source == str(folder.resolve())


def test_read_run_without_params_has_empty_config(tmp_path):
    folder = _run(tmp_path, "DQN_pong_2_20240101000000", {"environment.csv": "1,100,1.0\n"})
    assert read_run(folder).config == {}


def test_params_must_be_a_json_object(tmp_path):
    folder = _run(tmp_path, "DQN_pong_2_20240101000000", {**GOOD, "params.json": "[1, 2]"})
    with pytest.raises(ImportInvalid, match="expected a JSON object"):
        read_run(folder)


def test_non_utf8_csv_is_named(tmp_path):
    folder = _run(tmp_path, "DQN_pong_2_20240101000000", GOOD)
    (folder / "loss.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ImportInvalid, match=r"loss.csv: not a text CSV file"):
        read_run(folder)


def test_find_run_folders(tmp_path):
    one = _run(tmp_path / "logs", "A_t_0_20240101000000", GOOD)
    _run(tmp_path / "logs" / "deeper" / "more", "B_t_0_20240101000000", GOOD)
    _run(tmp_path / "logs" / ".hidden", "C_t_0_20240101000000", GOOD)
    (tmp_path / "logs" / "summary.csv").write_text("not,a,run\n")  # a CSV beside runs is not a run
    names = [p.name for p in find_run_folders(tmp_path / "logs")]
    assert names == ["A_t_0_20240101000000", "B_t_0_20240101000000"]
    assert find_run_folders(one) == [one]
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ImportInvalid, match="empty: no d3rlpy run folders in it"):
        find_run_folders(tmp_path / "empty")
    with pytest.raises(ImportInvalid, match="no such folder"):
        find_run_folders(tmp_path / "nope")
    with pytest.raises(ImportInvalid, match="a file, not a folder"):
        find_run_folders(tmp_path / "logs" / "summary.csv")


def test_parse_source_lists_known_formats():
    assert parse_source("d3rlpy:some/path")[0] == "d3rlpy"
    assert "d3rlpy" in FORMATS
    with pytest.raises(UsageError, match=r"unknown format 'mlflow'; known: d3rlpy:PATH"):
        parse_source("mlflow:mlruns")
    with pytest.raises(UsageError, match="no path after 'd3rlpy:'"):
        parse_source("d3rlpy:")


def _count(store, sql):
    with store.reader() as con:
        return con.execute(sql).fetchall()[0][0]


def test_metrics_table_rows_in_order_with_null_wall_times_where_none_were_logged():
    runs = [
        ImportedRun("a", "dqn", "pong", 0, {}, {"eval/return": ([1, 2], [1.0, 2.0]), "loss": ([1], [0.5])},
                    wall_times={"eval/return": [10.0, float("nan")]}),
        ImportedRun("b", "dqn", "pong", 1, {}, {"loss": ([3, 4, 5], [1.5, 2.5, 3.5])}),
    ]  # fmt: skip
    table = metrics_table(runs, ["id-a", "id-b"])
    assert pa.types.is_dictionary(table["run_id"].type) and pa.types.is_dictionary(table["name"].type)
    assert table.cast(pa.schema([("run_id", pa.string()), ("step", pa.int64()), ("name", pa.string()),
                                 ("value", pa.float64()), ("wall_time", pa.float64())])).to_pylist() == [
        {"run_id": "id-a", "step": 1, "name": "eval/return", "value": 1.0, "wall_time": 10.0},
        {"run_id": "id-a", "step": 2, "name": "eval/return", "value": 2.0, "wall_time": None},
        {"run_id": "id-a", "step": 1, "name": "loss", "value": 0.5, "wall_time": None},
        {"run_id": "id-b", "step": 3, "name": "loss", "value": 1.5, "wall_time": None},
        {"run_id": "id-b", "step": 4, "name": "loss", "value": 2.5, "wall_time": None},
        {"run_id": "id-b", "step": 5, "name": "loss", "value": 3.5, "wall_time": None},
    ]  # fmt: skip
    assert metrics_table([], []).num_rows == 0


def test_import_is_idempotent_and_registers_the_suite(tmp_path):
    logs = tmp_path / "logs"
    for seed in (0, 1):
        _run(logs, f"DQN_pong_{seed}_20240101000000", GOOD)
    store = Store(tmp_path / "db.duckdb")
    first = import_source(store, f"d3rlpy:{logs}", "s")
    assert (first.found, first.new_runs, first.new_rows, first.present) == (2, 2, 6, 0)
    assert first.summary().startswith("imported 2 runs (6 metric rows) into suite 's'")
    rows = _count(store, "SELECT count(*) FROM metrics")
    _run(logs, "DQN_pong_2_20240101000000", GOOD)
    second = import_source(store, f"d3rlpy:{logs}", "s")
    assert (second.new_runs, second.new_rows, second.present) == (1, 3, 2)
    third = import_source(store, f"d3rlpy:{logs}", "s")
    assert (third.new_runs, third.new_rows, third.present) == (0, 0, 3)
    assert _count(store, "SELECT count(*) FROM metrics") == rows + 3
    with store.reader() as con:
        runs = store.runs(con, "s")
        suite = con.execute("SELECT description, config FROM suites WHERE name = 's'").fetchall()[0]
    assert {r["status"] for r in runs} == {"finished"} and [r["seed"] for r in runs] == [0, 1, 2]
    assert json.loads(runs[0]["config"]) == {"a": [1, 2]}
    assert suite[0] == f"imported from d3rlpy logs at {logs.resolve()}" and json.loads(suite[1]) == {}
    # the same folders in another suite are other runs
    assert import_source(store, f"d3rlpy:{logs}", "t").new_runs == 3


def test_two_runs_in_one_cell_warn(tmp_path):
    logs = tmp_path / "logs"
    _run(logs, "DQN_pong_0_20240101000000", GOOD)
    _run(logs, "DQN_pong_0_20240202000000", GOOD)
    result = import_source(Store(tmp_path / "db.duckdb"), f"d3rlpy:{logs}", "s")
    assert result.new_runs == 2
    assert len(result.warnings) == 1 and "2 runs of DQN on pong with seed 0" in result.warnings[0]


def test_same_folder_name_twice_is_an_error(tmp_path):
    logs = tmp_path / "logs"
    _run(logs / "a", "DQN_pong_0_20240101000000", GOOD)
    _run(logs / "b", "DQN_pong_0_20240101000000", GOOD)
    with pytest.raises(ImportInvalid, match="a second run named 'DQN_pong_0_20240101000000'"):
        import_source(Store(tmp_path / "db.duckdb"), f"d3rlpy:{logs}", "s")
    assert not (tmp_path / "db.duckdb").exists()


def test_store_import_rolls_back_on_failure(tmp_path):
    store = Store(tmp_path / "db.duckdb")
    run = {"run_id": "r1", "suite": "s", "algo": "a", "algo_name": "a", "env": "e", "seed": 0, "config": {}}
    bad = pa.table({"run_id": ["r1"], "step": ["not a number"], "name": ["x"], "value": [1.0],
                    "wall_time": pa.nulls(1, pa.float64())})  # fmt: skip
    with store.writer() as con, pytest.raises(duckdb.Error):
        store.import_runs(con, "s", "d", [run], bad)
    assert _count(store, "SELECT count(*) FROM runs") == 0
    assert _count(store, "SELECT count(*) FROM suites") == 0
