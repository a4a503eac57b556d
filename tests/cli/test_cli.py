"""CLI tests with Typer's CliRunner: every command has help, bad input gives one line and exit code 2."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

runner = CliRunner()
ROOT = Path(__file__).parents[2]
COMMANDS = ["run", "status", "fetch", "plot", "validate"]


def invoke(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help_with_an_example(cmd):
    r = invoke(cmd, "--help")
    assert r.exit_code == 0, r.output
    assert "Example: rlbench " + cmd in " ".join(r.output.split())


def test_every_command_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for cmd in COMMANDS:
        assert f"rlbench {cmd}" in readme


def test_top_level_help_and_version():
    r = invoke("--help")
    assert r.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in r.output
    assert invoke("--version").output.startswith("rlbench ")


def _one_line_error(r, code=2):
    assert r.exit_code == code, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rlbench: error: ")
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


def test_validate_ok_and_dry_run_json():
    r = invoke("validate", ROOT / "suites/smoke.yaml", ROOT / "suites/quickstart.yaml")
    assert r.exit_code == 0, r.output
    assert r.output.count("ok: ") == 2
    r = invoke("run", ROOT / "suites/quickstart.yaml", "--dry-run", "--json")
    grid = json.loads(r.output)
    assert len(grid) == 18
    assert {g["algo"] for g in grid} == {"ppo", "dqn", "random"}
    assert len({g["run_id"] for g in grid}) == 18


def test_bad_suite_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nenvs: [CartPole-v1]\nalgorithms: [random]\nbudget: {stepz: 10}\n")
    line = _one_line_error(invoke("validate", bad))
    assert str(bad) in line and "budget.stepz" in line and "unknown field" in line
    line = _one_line_error(invoke("run", tmp_path / "nope.yaml", "--db", tmp_path / "db.duckdb"))
    assert "no such suite file" in line
    assert not (tmp_path / "db.duckdb").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--retries", "-1"], "--retries must be 0 or more"),
        (["--timeout", "-3"], "--timeout must be a positive number"),
    ],
)
def test_bad_run_flags(args, needle, tmp_path):
    assert needle in _one_line_error(
        invoke("run", ROOT / "suites/smoke.yaml", "--db", tmp_path / "x.duckdb", *args)
    )


def test_reading_commands_without_a_database(tmp_path):
    db = tmp_path / "none.duckdb"
    for args in (["status"], ["fetch"], ["plot", "smoke"]):
        line = _one_line_error(invoke(*args, "--db", db))
        assert "no results database here" in line


def test_not_a_database(tmp_path):
    db = tmp_path / "junk.duckdb"
    db.write_bytes(b"\x00garbage" * 1000)
    assert "not a usable DuckDB results file" in _one_line_error(invoke("status", "--db", db))


def test_fetch_parquet_needs_output_and_unknown_suite(tmp_path):
    from rlbench_cli.store import Store

    with Store(tmp_path / "db.duckdb").writer():
        pass
    db = tmp_path / "db.duckdb"
    assert "--output" in _one_line_error(invoke("fetch", "--db", db, "--format", "parquet"))
    assert "no suite 'nosuch'" in _one_line_error(invoke("status", "nosuch", "--db", db))
    assert "no suite 'nosuch'" in _one_line_error(invoke("plot", "nosuch", "--db", db))
    assert "--score 'median'" in _one_line_error(invoke("plot", "x", "--db", db, "--score", "median"))


def test_env_var_selects_the_database(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_DB", str(tmp_path / "env.duckdb"))
    line = _one_line_error(invoke("status"))
    assert str(tmp_path / "env.duckdb") in line
