"""Security: user values reach SQL only as bound parameters, names cannot escape the results folder, and
reading suites or importing runs never executes anything from the data (no pickle, no eval, safe YAML)."""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import rlbench_cli
from rlbench_cli.cli.app import app
from rlbench_cli.errors import RlbenchError, SuiteInvalid
from rlbench_cli.runner import attempt_dir
from rlbench_cli.store import Store
from rlbench_cli.suite import loader as spec_module
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import load_suite, parse_suite
from rlbench_cli.suite.models import NAME_RE

INJECTIONS = [
    "x' OR '1'='1",
    "x'); DROP TABLE metrics; --",
    "'; DELETE FROM runs; SELECT '",
    '" OR ""="',
    "tiny' UNION SELECT run_id, suite, algo, env, seed, 0, 'x', 1.0, 0.0, status FROM runs --",
    "%",
    "*",
    "\\'; DROP TABLE suites; --",
    "tiny\x00",
]
TABLES = ("suites", "runs", "metrics", "shards", "artifacts", "schema_version", "adaptive_decisions")
RUNS = [(algo, "CartPole-v1", seed, [(1000, 10.0 + seed), (2000, 20.0 + seed)]) for algo in ("ppo", "random")
        for seed in (0, 1)]  # fmt: skip


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def table_counts(db: Path) -> dict[str, int]:
    store = Store(db)
    with store.reader() as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}


@pytest.fixture(scope="module")
def db(tmp_path_factory, make_results_db):
    """Shared by the tests that must leave it unchanged (each checks that they did)."""
    path = tmp_path_factory.mktemp("security") / "db.duckdb"
    make_results_db(path, RUNS, suite="tiny")
    return path


def marker_payload(marker: Path) -> bytes:
    """A pickle that creates ``marker`` when it is loaded."""

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    return pickle.dumps(Evil())


# -- SQL: bound parameters only -------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--suite", "--algo", "--env", "--metric"])
@pytest.mark.parametrize("evil", INJECTIONS, ids=range(len(INJECTIONS)))
def test_fetch_filters_with_injection_strings_match_nothing_and_change_nothing(flag, evil, db):
    before = table_counts(db)
    r = invoke("fetch", "--db", db, flag, evil, "--format", "json")
    assert r.exit_code == 2, (
        r.output + r.stderr
    )  # a filter that matches nothing is an error, not an empty file
    assert r.stdout == ""
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "no metric rows match" in line or "no suite" in line
    assert table_counts(db) == before


def test_store_queries_bind_every_filter(db):
    store = Store(db)
    with store.reader() as con:
        everything = store.query_metrics(con).num_rows
        assert everything == 8
        for evil in INJECTIONS:
            for kw in ("algos", "envs", "metrics", "statuses"):
                assert store.query_metrics(con, **{kw: [evil]}).num_rows == 0
            assert store.query_metrics(con, suite=evil).num_rows == 0
            assert store.runs(con, evil) == []
        assert store.query_metrics(con, seeds=[0, 1]).num_rows == everything
    assert table_counts(db)["metrics"] == everything


@pytest.mark.parametrize("evil", ["0 OR 1=1", "0; DROP TABLE runs", "1'", "0x1", "1.5"])
def test_fetch_seed_must_be_an_integer(evil, db):
    before = table_counts(db)
    r = invoke("fetch", "--db", db, "--seed", evil)
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Invalid value for '--seed'" in lines[0]
    assert table_counts(db) == before


@pytest.mark.parametrize("command", ["status", "plot", "leaderboard"])
def test_suite_arguments_with_injection_strings_are_unknown_suites(command, db):
    before = table_counts(db)
    for evil in INJECTIONS[:4]:
        r = invoke(command, evil, "--db", db)
        assert r.exit_code == 2, r.output
        assert "no suite" in r.stderr and "(suites there: tiny)" in r.stderr
    assert table_counts(db) == before


def test_imported_names_with_sql_in_them_are_stored_verbatim(tmp_path):
    algo = "x');DROP TABLE runs;--"
    folder = tmp_path / "logs" / f"{algo}_Pong' OR '1'='1_0_20240101000000"
    folder.mkdir(parents=True)
    (folder / "environment.csv").write_text("1,1000,5.0\n2,2000,7.0\n")
    (folder / "params.json").write_text(json.dumps({"note": "'; DROP TABLE metrics; --"}))
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--db", db, "--from", f"d3rlpy:{tmp_path / 'logs'}", "--into", "imported")
    assert r.exit_code == 0, r.stderr
    r = invoke("fetch", "--db", db, "--algo", algo, "--env", "Pong' OR '1'='1", "--format", "json")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert [row["value"] for row in got] == [5.0, 7.0] and {row["algo"] for row in got} == {algo}
    counts = table_counts(db)
    assert counts["runs"] == 1 and counts["metrics"] == 2
    with Store(db).reader() as con:
        (config,) = con.execute("SELECT config FROM runs").fetchall()[0]
    assert json.loads(config) == {"note": "'; DROP TABLE metrics; --"}


def test_into_names_with_sql_or_paths_are_refused(tmp_path):
    db = tmp_path / "db.duckdb"
    for evil in ["x'; DROP TABLE runs; --", "../x", "a/b", ".."]:
        r = invoke("fetch", "--db", db, "--from", f"d3rlpy:{tmp_path}", "--into", evil)
        assert r.exit_code == 2 and "--into" in r.stderr
    assert not db.exists()


# -- names and paths ------------------------------------------------------------------------------------------
BAD_NAMES = ["../x", "../../etc/passwd", "a/b", "/abs", "..", ".", ".hidden", "a\\b", "a\x00b", "", " ", "a b",
             "~", "$HOME", "x" * 101, "-rf", "naïve", "a\nb"]  # fmt: skip


@pytest.mark.parametrize("name", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_suite_names_that_are_not_single_safe_names_are_rejected(name):
    data = {"name": name, "envs": ["CartPole-v1"], "algorithms": ["random"]}
    with pytest.raises(SuiteInvalid, match="field 'name'") as err:
        parse_suite(data, "s.yaml")
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("label", ["../ppo", "a/b", "..", "a\\b", "x" * 101])
def test_algorithm_labels_that_are_paths_are_rejected(label):
    data = {"name": "s", "envs": ["CartPole-v1"], "algorithms": [{"name": "ppo", "label": label}]}
    with pytest.raises(SuiteInvalid, match=r"field 'algorithms\[0\]\.label'"):
        parse_suite(data, "s.yaml")


def test_the_default_name_from_the_file_name_is_checked_too(tmp_path):
    f = tmp_path / "my suite.yaml"
    f.write_text("envs: [CartPole-v1]\nalgorithms: [random]\n")
    with pytest.raises(SuiteInvalid, match="field 'name'"):
        load_suite(f)


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(NAME_RE, fullmatch=True),
    seeds=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=3, unique=True),
    attempt=st.integers(1, 1000),
)
def test_run_folders_of_valid_suites_stay_under_the_runs_root(name, seeds, attempt, tmp_path_factory):
    root = (tmp_path_factory.getbasetemp() / "results" / "runs").resolve()
    data = {"name": name, "seeds": seeds, "envs": ["CartPole-v1", "Acrobot-v1"],
            "algorithms": ["ppo", {"name": "random", "label": "r..x"}]}  # fmt: skip
    for spec in expand(parse_suite(data, "s.yaml")):
        folder = attempt_dir(root, spec, attempt=attempt)
        assert folder.resolve().is_relative_to(root)
        assert folder.relative_to(root).parts == (name, spec.run_id, f"attempt-{attempt}")
        assert attempt_dir(root, spec.suite, spec.run_id, attempt) == folder


@pytest.mark.parametrize("suite, run_id", [("../x", "abc"), ("..", "abc"), ("s", "../../x"), ("s", "a/b"),
                                           ("/etc", "abc"), ("s", ""), ("s\\..", "abc")])  # fmt: skip
def test_run_folders_refuse_names_from_a_crafted_database(suite, run_id, tmp_path):
    with pytest.raises(RlbenchError, match="cannot name a run folder"):
        attempt_dir(tmp_path / "runs", suite, run_id, 1)


# -- nothing from the data is executed ------------------------------------------------------------------------
TAGS = [
    "!!python/object/apply:builtins.open ['{marker}', 'w']",
    "!!python/object/new:builtins.open ['{marker}', 'w']",
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/name:os.system ''",
    "!!python/module:os ''",
    "!!python/object:argparse.Namespace {{x: 1}}",
    "!!python/tuple [1, 2]",
]


@pytest.mark.parametrize("tag", TAGS, ids=[t.split(" ")[0] for t in TAGS])
@pytest.mark.parametrize("where", ["name", "params", "top"])
def test_yaml_python_tags_are_refused_and_never_run(tag, where, tmp_path):
    marker = tmp_path / "PWNED"
    value = tag.format(marker=marker)
    text = {
        "name": f"name: {value}\nenvs: [CartPole-v1]\nalgorithms: [random]\n",
        "params": f"envs: [CartPole-v1]\nalgorithms:\n  - name: random\n    params: {{x: {value}}}\n",
        "top": f"{value}\n",
    }[where]
    f = tmp_path / "evil.yaml"
    f.write_text(text)
    with pytest.raises(SuiteInvalid, match="is not allowed") as err:
        load_suite(f)
    assert str(err.value).startswith(f"{f}: line ")
    assert not marker.exists()
    r = invoke("run", f, "--dry-run")
    assert r.exit_code == 2 and "remove the tag" in r.stderr
    assert not marker.exists()


def test_the_suite_loader_is_a_safe_loader():
    assert issubclass(spec_module._SuiteLoader, yaml.SafeLoader)
    assert not issubclass(spec_module._SuiteLoader, (yaml.FullLoader, yaml.UnsafeLoader))


def test_no_module_that_reads_data_can_execute_it():
    """pickle, eval, exec, unsafe YAML and torch.load have no place where files or databases are read."""
    pkg = Path(rlbench_cli.__file__).parent
    readers = [*sorted((pkg / "suite").glob("*.py")), pkg / "report.py", *sorted((pkg / "stats").glob("*.py")), pkg / "references.py",
               pkg / "leaderboard.py", *sorted((pkg / "importers").glob("*.py")), *sorted((pkg / "store").glob("*.py")),
               *sorted((pkg / "cli").glob("*.py"))]  # fmt: skip
    forbidden = ["import pickle", "pickle.load", "cloudpickle", "dill", "eval(", "exec(", "yaml.load(text)",
                 "yaml.Loader", "FullLoader", "UnsafeLoader", "unsafe_load", "torch.load", "marshal.load",
                 "shelve", "jsonpickle", "np.load(", "allow_pickle"]  # fmt: skip
    for path in readers:
        source = path.read_text()
        for word in forbidden:
            assert word not in source, f"{path.name} uses {word}"


def _evil_run_folder(root: Path, marker: Path) -> Path:
    folder = root / "d3rlpy_logs" / "DQN_pong_0_20240101000000"
    folder.mkdir(parents=True)
    payload = marker_payload(marker)
    (folder / "environment.csv").write_text("1,1000,3.0\n2,2000,4.0\n")
    params = {
        "__reduce__": ["builtins.open", [str(marker), "w"]],
        "py/reduce": [{"py/function": "os.system"}, {"py/tuple": [f"touch {marker}"]}],
        "pickle": base64.b64encode(payload).decode(),
        "yaml": f"!!python/object/apply:os.system ['touch {marker}']",
        "code": f"__import__('os').system('touch {marker}')",
        "learning_rate": 0.001,
    }
    (folder / "params.json").write_text(json.dumps(params))
    (folder / "model_2000.pt").write_bytes(payload)  # d3rlpy's model snapshots are pickles: never opened
    (folder / "model.pkl").write_bytes(payload)
    return folder


def test_d3rlpy_import_stores_pickle_looking_params_as_json_text_and_runs_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    folder = _evil_run_folder(tmp_path, marker)
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--db", db, "--from", f"d3rlpy:{folder.parent}", "--into", "pong")
    assert r.exit_code == 0, r.stderr
    assert not marker.exists()
    with Store(db).reader() as con:
        (config,) = con.execute("SELECT config FROM runs WHERE suite = 'pong'").fetchall()[0]
        names = {n for (n,) in con.execute("SELECT DISTINCT name FROM metrics").fetchall()}
    assert json.loads(config) == json.loads((folder / "params.json").read_text())  # the same JSON, as text
    assert names == {"eval/return"}  # the .pt and .pkl files are not read
    for args in (["status", "pong"], ["fetch", "--suite", "pong"], ["leaderboard", "pong", "--per-task"]):
        assert invoke(*args, "--db", db).exit_code == 0
    assert not marker.exists()


def test_d3rlpy_import_of_a_pickle_as_params_json_is_refused(tmp_path):
    marker = tmp_path / "PWNED"
    folder = _evil_run_folder(tmp_path, marker)
    (folder / "params.json").write_bytes(marker_payload(marker))
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--db", db, "--from", f"d3rlpy:{folder}", "--into", "pong")
    assert r.exit_code == 2
    assert "params.json: not valid JSON" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not marker.exists() and not db.exists()


def test_d3rlpy_import_of_code_in_a_metric_csv_is_refused(tmp_path):
    marker = tmp_path / "PWNED"
    folder = _evil_run_folder(tmp_path, marker)
    (folder / "loss.csv").write_text(f"1,1000,__import__('os').system('touch {marker}')\n")
    r = invoke("fetch", "--db", tmp_path / "db.duckdb", "--from", f"d3rlpy:{folder}", "--into", "pong")
    assert r.exit_code == 2 and "is not a number" in r.stderr
    assert not marker.exists()
