"""`rlbench fetch --from KIND:PATH` for every importer through the CLI: metric names, idempotency (a second
import adds nothing), read-only input (checksums before and after), one transaction (a bad file anywhere
leaves the database as it was), one-line errors; `duckdb:FILE` merges keep run ids and manifests."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

FIXTURES = Path(__file__).parents[1] / "fixtures"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def checksums(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files} | {"n": str(len(files))}


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr and "internal error" not in r.stderr
    return lines[0]


def rows(db: Path, sql: str):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def counts(db: Path) -> tuple:
    if not db.exists():
        return ()
    return tuple(
        rows(db, f"SELECT count(*) FROM {t}")[0][0] for t in ("suites", "runs", "metrics", "artifacts")
    )


CASES = {
    "tensorboard": (f"tensorboard:{FIXTURES / 'cleanrl_runs'}", [], 3,
                    {"train/episode_return", "train/episode_length", "losses/value_loss"}),
    "sb3": (f"sb3:{FIXTURES / 'sb3_zoo'}", [], 2,
            {"train/episode_return", "train/episode_length", "eval/return", "eval/return_std", "eval/episode_length"}),
    "sb3-tensorboard": (f"tensorboard:{FIXTURES / 'sb3_zoo' / 'tensorboard'}", ["--pattern", "{env}/{algo}_{seed}"], 2,
                        {"eval/return", "rollout/ep_rew_mean"}),
    "wandb-history": (f"csv:{FIXTURES / 'wandb_history.csv'}", ["--pattern", "{algo=ppo}{env=CartPole-v1}{seed=3}"], 1,
                      {"charts/episodic_return", "losses/value_loss"}),
    "wandb-chart": (f"csv:{FIXTURES / 'wandb_chart.csv'}", [], 2, {"charts/episodic_return"}),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_import_is_idempotent_read_only_and_names_metrics(tmp_path, case):
    source, extra, n_runs, names = CASES[case]
    path = Path(source.split(":", 1)[1])
    before = checksums(path)
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", source, "--into", "imported", *extra, "--db", db)
    assert r.exit_code == 0, r.output + r.stderr
    assert f"imported {n_runs} runs" in r.stdout and "0 already present" in r.stdout
    assert names <= {n for (n,) in rows(db, "SELECT DISTINCT name FROM metrics")}
    first = counts(db)
    r = invoke("fetch", "--from", source, "--into", "imported", *extra, "--db", db)
    assert r.exit_code == 0 and "imported 0 runs (0 metric rows)" in r.stdout, r.output
    assert f"{n_runs} already present" in r.stdout
    assert counts(db) == first
    assert checksums(path) == before  # the input is only read
    statuses = rows(db, "SELECT DISTINCT status FROM runs")
    assert statuses == [("finished",)]


def test_sb3_runs_keep_config_and_the_zoo_seed(tmp_path):
    db = tmp_path / "db.duckdb"
    assert (
        invoke("fetch", "--from", f"sb3:{FIXTURES / 'sb3_zoo'}", "--into", "zoo", "--db", db).exit_code == 0
    )
    got = rows(db, "SELECT algo, env, seed, config FROM runs ORDER BY seed")
    assert [(a, e, s) for a, e, s, _ in got] == [("ppo", "CartPole-v1", 7), ("ppo", "CartPole-v1", 8)]
    assert json.loads(got[0][3])["n_steps"] == 128
    wall = rows(db, "SELECT count(*) FROM metrics WHERE name = 'train/episode_return' AND wall_time IS NULL")
    assert wall == [(0,)]


def test_sb3_evaluations_with_a_trailing_length_one_axis_import(tmp_path):
    """A zoo folder whose evaluations.npz has results (evaluations, episodes, 1) imports with the others;
    one whose results are (evaluations, episodes, 2) stops the import with one line naming the file."""
    import numpy as np

    root = tmp_path / "logs"
    shutil.copytree(FIXTURES / "sb3_zoo", root)
    f = root / "ppo" / "CartPole-v1_2" / "evaluations.npz"
    with np.load(f) as data:
        timesteps, results = data["timesteps"], data["results"]
    np.savez(f, timesteps=timesteps, results=results[..., None], ep_lengths=results[..., None].astype(int))
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"sb3:{root}", "--into", "zoo", "--db", db)
    assert r.exit_code == 0, r.output
    got = rows(db, "SELECT m.step, m.value FROM metrics m JOIN runs USING (run_id) "
                   "WHERE runs.seed = 8 AND m.name = 'eval/return' ORDER BY m.step")  # fmt: skip
    assert got == list(zip(timesteps.tolist(), results.mean(axis=1).tolist()))
    np.savez(f, timesteps=timesteps, results=np.repeat(results[..., None], 2, axis=-1))
    line = one_line_error(
        invoke("fetch", "--from", f"sb3:{root}", "--into", "zoo2", "--db", tmp_path / "b.duckdb")
    )
    assert f"{f}: results has shape ({len(timesteps)}, {results.shape[1]}, 2)" in line, line


def test_parquet_import(tmp_path):
    import pandas as pd

    f = tmp_path / "runs.parquet"
    pd.DataFrame({"run": ["r1", "r1", "r2"], "algo": ["ppo", "ppo", "dqn"], "env": ["CartPole-v1"] * 3,
                  "seed": [0, 0, 0], "step": [1, 2, 1], "eval/return": [1.0, 2.0, 3.0]}).to_parquet(f)  # fmt: skip
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"parquet:{f}", "--into", "pq", "--db", db)
    assert r.exit_code == 0 and "imported 2 runs (3 metric rows)" in r.stdout, r.output


@pytest.mark.parametrize(
    "kind, setup, needle",
    [
        ("tensorboard", "empty", "no TensorBoard event files"),
        ("tensorboard", "cut", "cut off mid-record at byte"),
        ("sb3", "empty", "no Stable-Baselines3 runs in it"),
        ("sb3", "header", "has no column r, l, t"),
        ("csv", "columns", "no column 'Step_' (--columns step=Step_)"),
        (
            "csv",
            "truncated",
            "export.csv: line 4: 2 field(s), the header has 7 (a truncated or damaged line?)",
        ),
        ("parquet", "truncated", "not a readable parquet file"),
    ],
)
def test_a_bad_file_stops_the_import_and_writes_nothing(tmp_path, make_results_db, kind, setup, needle):
    """A good run next to a bad file: one line naming the file, exit 2, the database as it was."""
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(1, 1.0)])], suite="before")
    before = counts(db)
    root = tmp_path / "in"
    extra: list[str] = []
    if kind == "tensorboard":
        shutil.copytree(FIXTURES / "cleanrl_runs", root)
        if setup == "cut":
            f = next((root / "CartPole-v1__ppo__2__1700000002").glob("events.*"))
            f.write_bytes(f.read_bytes()[:-9])
        else:
            shutil.rmtree(root)
            root.mkdir()
    elif kind == "sb3":
        shutil.copytree(FIXTURES / "sb3_zoo", root)
        if setup == "header":
            f = root / "ppo" / "CartPole-v1_2" / "0.monitor.csv"
            f.write_text(f.read_text().replace("r,l,t", "return,length,time"))
        else:
            shutil.rmtree(root)
            (root / "ppo").mkdir(parents=True)
    elif kind == "csv":
        root = tmp_path / "export.csv"
        text = (FIXTURES / "wandb_chart.csv").read_text()
        if setup == "columns":
            extra = ["--columns", "step=Step_"]
        else:
            root.write_text(text)
            text = text[: text.rindex("\n", 0, len(text) - 1)] + "\n3000,5"  # a last line cut mid-number
        root.write_text(text)
    else:
        import pandas as pd

        root = tmp_path / "runs.parquet"
        pd.DataFrame({"run": ["CartPole-v1__a__1__2"], "step": [1], "x": [1.0]}).to_parquet(root)
        root.write_bytes(root.read_bytes()[:-20])
    line = one_line_error(invoke("fetch", "--from", f"{kind}:{root}", "--into", "new", *extra, "--db", db))
    assert needle in line, line
    assert counts(db) == before
    assert rows(db, "SELECT name FROM suites") == [("before",)]


def test_pattern_and_columns_apply_only_where_they_mean_something(tmp_path):
    db = tmp_path / "db.duckdb"
    line = one_line_error(invoke("fetch", "--from", f"sb3:{FIXTURES / 'sb3_zoo'}", "--into", "s", "--columns",
                                 "step=x", "--db", db))  # fmt: skip
    assert "--columns applies to --from csv: / parquet: sources, not sb3:" in line
    line = one_line_error(invoke("fetch", "--suite", "s", "--pattern", "{algo}", "--db", db))
    assert "--pattern says how to read files imported with --from" in line
    line = one_line_error(invoke("fetch", "--from", f"tensorboard:{FIXTURES / 'cleanrl_runs'}", "--into", "s",
                                 "--pattern", "{env}_{algo}", "--db", db))  # fmt: skip
    assert "--pattern '{env}_{algo}': no {seed}" in line
    assert not db.exists()


def test_fetch_help_lists_every_format():
    from rlbench_cli.importers import FORMATS

    text = " ".join(invoke("fetch", "--help").output.split())
    for kind in FORMATS:
        assert f"{kind}:" in text, kind
    for flag in ("--pattern", "--columns", "--status", "--steps", "--where", "--wide", "--scores"):
        assert flag in text


# -- duckdb: merging another rlbench database --------------------------------------------------------------
def _store(path: Path, make_results_db, suite: str, seeds, status="finished"):
    runs = [
        (algo, "CartPole-v1", s, [(100, 1.0 + s), (200, 2.0 + s)])
        for algo in ("ppo", "random")
        for s in seeds
    ]
    store = make_results_db(path, runs, suite=suite, status=status, config={"score": {"rule": "best"}})
    with store.writer() as con:
        con.execute("UPDATE runs SET host = 'gpu-box', device = 'cuda:0', git_commit = 'abc123', attempts = 2, "
                    "packages = '{\"torch\": \"2.13.0\"}'")  # fmt: skip
    return store


def test_duckdb_merge_keeps_ids_and_manifests_and_skips_duplicates(tmp_path, make_results_db):
    a, b = tmp_path / "a" / "a.duckdb", tmp_path / "b" / "b.duckdb"
    _store(a, make_results_db, "mine", [0, 1])
    _store(b, make_results_db, "theirs", [0, 1, 2])
    before = checksums(b)
    r = invoke("fetch", "--from", f"duckdb:{b}", "--db", a)
    assert r.exit_code == 0, r.output + r.stderr
    assert "imported 6 runs (12 metric rows) into suite 'theirs'" in r.stdout
    assert checksums(b) == before
    theirs = rows(b, "SELECT * FROM runs ORDER BY run_id")
    assert rows(a, "SELECT * FROM runs WHERE suite = 'theirs' ORDER BY run_id") == theirs  # every column
    assert rows(a, "SELECT config FROM suites WHERE name = 'theirs'") == rows(b, "SELECT config FROM suites")
    assert rows(a, "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE suite = 'theirs'") == [
        (12,)
    ]
    again = invoke("fetch", "--from", f"duckdb:{b}", "--db", a)
    assert "imported 0 runs (0 metric rows)" in again.stdout and "6 already present" in again.stdout
    assert rows(a, "SELECT count(*) FROM runs") == [(10,)]


def test_duckdb_merge_of_overlapping_stores_adds_only_new_run_ids(tmp_path, make_results_db):
    a, b = tmp_path / "a" / "a.duckdb", tmp_path / "b" / "b.duckdb"
    _store(a, make_results_db, "shared", [0, 1])
    _store(b, make_results_db, "shared", [1, 2])  # seed 1 is in both (same run ids)
    a_rows = rows(a, "SELECT count(*) FROM metrics")[0][0]
    r = invoke("fetch", "--from", f"duckdb:{b}", "--into", "shared", "--db", a)
    assert r.exit_code == 0, r.output
    assert "imported 2 runs (4 metric rows)" in r.stdout and "2 already present" in r.stdout
    assert rows(a, "SELECT count(*) FROM metrics")[0][0] == a_rows + 4
    assert rows(a, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(6, 6)]


@pytest.mark.parametrize(
    "kind, needle",
    [
        ("missing", "no such file"),
        ("same", "the same file as the database it would be merged into"),
        ("text", "not a usable DuckDB results file"),
        ("other-app", "a DuckDB file, but not an rlbench results database"),
        ("newer", "written by a newer rlbench (schema 99"),
        ("no-suite", "no suite 'nosuch' in it (suites there: theirs)"),
    ],
)
def test_duckdb_merge_bad_input(tmp_path, make_results_db, kind, needle):
    a = tmp_path / "a" / "a.duckdb"
    _store(a, make_results_db, "mine", [0])
    before = counts(a)
    other = tmp_path / "other.duckdb"
    into: list[str] = []
    if kind == "same":
        other = a
    elif kind == "text":
        other.write_text("not a database\n" * 10)
    elif kind == "other-app":
        con = duckdb.connect(str(other))
        con.execute("CREATE TABLE customers (id INTEGER)")
        con.close()
    elif kind == "newer":
        from rlbench_cli.store import Store

        with Store(other).writer() as con:
            con.execute("INSERT INTO schema_version (version) VALUES (99)")
    elif kind == "no-suite":
        _store(other, make_results_db, "theirs", [0])
        into = ["--into", "nosuch"]
    line = one_line_error(invoke("fetch", "--from", f"duckdb:{other}", *into, "--db", a))
    assert needle in line, line
    assert counts(a) == before


def test_imported_cleanrl_runs_answer_where_on_their_hyperparameters(tmp_path):
    db = tmp_path / "db.duckdb"
    assert (
        invoke(
            "fetch", "--from", f"tensorboard:{FIXTURES / 'cleanrl_runs'}", "--into", "c", "--db", db
        ).exit_code
        == 0
    )
    r = invoke("fetch", "--db", db, "--where", "seed=2", "--where", "learning_rate=2.5e-4", "--format", "json",
               "--metric", "train/episode_return")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert {(row["algo"], row["seed"]) for row in json.loads(r.stdout)} == {("ppo", 2)}


def test_duckdb_merge_of_an_older_schema_file_reads_it_as_it_is(tmp_path, make_results_db, monkeypatch):
    """A schema-1 file (no executor / job_id columns) merges without being migrated: it is only read."""
    from rlbench_cli.store import Store, schema

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)
    old = Store(tmp_path / "old" / "old.duckdb")
    with old.writer() as con:
        old.register_suite(con, "legacy", "", {}, "legacy.yaml")
        old.add_runs(con, [{"run_id": "r1", "suite": "legacy", "algo": "ppo", "algo_name": "ppo", "env": "E",
                            "seed": 0, "config": {"params": {"lr": 0.1}}}])  # fmt: skip
        con.execute("UPDATE runs SET status = 'finished', attempts = 1, host = 'h', device = 'cpu'")
        con.execute("INSERT INTO metrics VALUES ('r1', 0, 'eval/return', 1.5, 0.0)")
    monkeypatch.undo()
    before = checksums(old.path)
    a = tmp_path / "a" / "a.duckdb"
    _store(a, make_results_db, "mine", [0])
    r = invoke("fetch", "--from", f"duckdb:{old.path}", "--db", a)
    assert r.exit_code == 0 and "imported 1 runs (1 metric rows) into suite 'legacy'" in r.stdout, r.output
    assert checksums(old.path) == before
    assert rows(a, "SELECT status, host, device, executor, config FROM runs WHERE run_id = 'r1'") == [
        ("finished", "h", "cpu", None, '{"params": {"lr": 0.1}}')
    ]
    assert rows(old.path, "SELECT max(version) FROM schema_version") == [(1,)]
