"""``query_metrics`` / ``metrics_to_parquet`` order rows by suite, algo, env, seed, name and step whatever
order the rows went into the table (runs ingested interleaved, tick by tick, as ``rlbench run`` writes them),
NULL envs and seeds last, as an ORDER BY of the strings would."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq

from rlbench_cli.store import Store


def test_rows_come_back_sorted_whatever_their_insertion_order(tmp_path):
    rng = random.Random(0)
    runs = []
    for i, (suite, algo, env, seed) in enumerate([("b", "ppo", "Pong", 1), ("a", "ppo", "Pong", 0),
                                                  ("a", "dqn", None, None), ("a", "dqn", "Alien", 2),
                                                  ("a", "dqn", "Alien", None), ("a", "sac", "Alien", 10)]):  # fmt: skip
        runs.append({"run_id": f"run{i}", "suite": suite, "algo": algo, "algo_name": algo, "env": env,
                     "seed": seed, "config": {}})  # fmt: skip
    rows = [(r["run_id"], step, name, rng.random(), None)
            for r in runs for name in ("z/last", "eval/return", "a/first") for step in (3, 1, 20, 2)]  # fmt: skip
    rng.shuffle(rows)
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        for suite in ("a", "b"):
            store.import_runs(con, suite, "", [r for r in runs if r["suite"] == suite],
                              pa.table(dict(zip(["run_id", "step", "name", "value", "wall_time"],
                                                map(list, zip(*rows))))))  # fmt: skip
    by_id = {r["run_id"]: r for r in runs}

    def key(row):
        r = by_id[row[0]]
        return (r["suite"], r["algo"], r["env"] is None, r["env"] or "", r["seed"] is None, r["seed"] or 0,
                row[2], row[1])  # fmt: skip

    expected = [(rid, step, name) for rid, step, name, _, _ in sorted(rows, key=key)]
    with store.reader() as con:
        got = store.query_metrics(con)
        assert list(zip(*(got[c].to_pylist() for c in ("run_id", "step", "name")))) == expected
        store.metrics_to_parquet(con, tmp_path / "all.parquet", ["run_id", "step", "name", "value"])
        written = pq.read_table(tmp_path / "all.parquet").to_pylist()
        assert written == got.select(["run_id", "step", "name", "value"]).to_pylist()
        one = store.query_metrics(con, suite="a", algos=["dqn"], metrics=["eval/return"])
        assert one["run_id"].to_pylist() == [e[0] for e in expected if e[2] == "eval/return" and
                                             by_id[e[0]]["algo"] == "dqn"]  # fmt: skip


def test_parquet_export_has_the_rows_of_query_metrics_with_filters_quotes_and_nulls(tmp_path):
    """The export casts the text columns to ENUMs on the way (``_enum_types``): every column, filter and odd
    value (a quote, NULL env and seed, a name or algorithm that no run has) reads back as ``query_metrics``
    returns it."""
    runs = [{"run_id": f"r'{i}", "suite": "s", "algo": algo, "algo_name": algo, "env": env, "seed": seed,
             "config": {}} for i, (algo, env, seed) in enumerate([("o'brien", "Pong", 0), ("dqn", None, None),
                                                                   ("dqn", "Alien's", 1)])]  # fmt: skip
    rows = [(r["run_id"], step, name, float(step), 1.5 if step % 2 else None)
            for r in runs for name in ("it's/x", "eval/return") for step in (1, 2, 3)]  # fmt: skip
    store = Store(tmp_path / "db.duckdb")
    with store.writer() as con:
        store.import_runs(con, "s", "", runs, pa.table(dict(zip(["run_id", "step", "name", "value", "wall_time"],
                                                                 map(list, zip(*rows))))))  # fmt: skip
    columns = ["run_id", "suite", "algo", "env", "seed", "step", "name", "value", "wall_time"]
    with store.reader() as con:
        for filters in ({}, {"suite": "s", "algos": ["o'brien"]}, {"metrics": ["it's/x"], "step_min": 2},
                        {"envs": ["Alien's"], "seeds": [1]}, {"algos": ["nosuch"]}, {"run_ids": ["r'1"]}):  # fmt: skip
            path = tmp_path / "out.parquet"
            n = store.metrics_to_parquet(con, path, columns, **filters)
            expected = store.query_metrics(con, **filters).select(columns).to_pylist()
            assert n == len(expected)
            assert pq.read_table(path).to_pylist() == expected, filters
