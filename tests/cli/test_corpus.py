"""The malformed-input corpus (tests/corpus/cases.yaml): each case is one clear line, exit code 2, no traceback.

Every case runs through the real CLI entry in-process (Typer's CliRunner); a handful run again through the
installed `rlbench` command in a subprocess, to prove the same behaviour end to end.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "corpus"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
BY_ID = {c["id"]: c for c in CASES}
SUBPROCESS_CASES = [
    "python-object-tag",
    "unknown-env-typo",
    "run-with-a-param-typo",
    "db-sqlite",
    "plot-format-xml",
    "fetch-from-without-into",
    "import-tensorboard-cut-mid-record",
    "sql-write-refused",
    "bundle-checksum-mismatch",
]
POINTS = [(1000, 10.0), (2000, 30.0), (3000, 50.0)]


@pytest.fixture(scope="module")
def databases(tmp_path_factory, make_results_db):
    """One database of each kind `db:` names in cases.yaml (made once; the cases only read them)."""
    root = tmp_path_factory.mktemp("corpus-dbs")
    runs = [(algo, "CartPole-v1", seed, POINTS) for algo in ("ppo", "random") for seed in (0, 1)]
    make_results_db(root / "results" / "db.duckdb", runs, suite="tiny")
    make_results_db(root / "no-finished" / "db.duckdb", runs, suite="tiny", status="failed")
    (root / "not-duckdb.duckdb").write_text("run_id,value\nabc,1.0\n" * 50)
    (root / "empty.duckdb").write_bytes(b"")
    con = sqlite3.connect(root / "sqlite.duckdb")
    con.execute("CREATE TABLE runs (run_id TEXT, value REAL)")
    con.commit()
    con.close()
    import duckdb

    con = duckdb.connect(str(root / "other-app.duckdb"))
    con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
    con.close()
    from rlbench_cli.store import Store

    with Store(root / "newer-schema.duckdb").writer() as con:
        con.execute("INSERT INTO schema_version (version) VALUES (99)")
    (root / "folder.duckdb").mkdir()
    return {
        "results": root / "results" / "db.duckdb",
        "no-finished": root / "no-finished" / "db.duckdb",
        **{kind: root / f"{kind}.duckdb" for kind in ("not-duckdb", "empty", "sqlite", "other-app",
                                                       "newer-schema", "folder")},
    }  # fmt: skip


def _args(case: dict, tmp: Path, databases: dict, monkeypatch=None) -> tuple[list[str], Path | None]:
    kind = case.get("db")
    db = tmp / "missing" / "db.duckdb" if kind == "missing" else databases.get(kind)
    if case.get("setup") == "unreadable":
        target = tmp / "unreadable.yaml"
        target.write_text("name: x\nenvs: [CartPole-v1]\nalgorithms: [random]\n")
        target.chmod(0)
        if os.access(target, os.R_OK):  # root reads anything: make reading it fail as it would for a user
            if monkeypatch is None:
                pytest.skip("file permissions are not enforced here (running as root)")
            read_text = Path.read_text

            def denied(self, *a, **kw):
                if self == target:
                    raise PermissionError(13, "Permission denied", str(self))
                return read_text(self, *a, **kw)

            monkeypatch.setattr(Path, "read_text", denied)
    values = {"corpus": str(CORPUS), "suites": str(ROOT / "suites"), "tmp": str(tmp), "db": str(db)}
    return [a.format(**values) for a in case["args"]], db


def _check_one_line(code: int, stdout: str, stderr: str, case: dict, args: list[str]) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, f"exit code {code}\nstdout: {stdout}\nstderr: {stderr}"
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    line = lines[0]
    assert line.startswith("rlbench: error: "), line
    assert "Traceback" not in stdout + stderr
    assert "internal error" not in line
    for needle in case["expect"]:
        assert needle in line, f"{needle!r} not in {line!r}"
    for arg in args:  # a suite file's error names the file
        if arg.startswith(str(CORPUS) + os.sep):
            assert line.startswith(f"rlbench: error: {arg}: "), line
    return line


def test_the_corpus_is_large_and_every_file_is_used():
    assert len(CASES) >= 30
    assert len(BY_ID) == len(CASES), "case ids must be unique"
    used = {a.split("{corpus}/")[1].split("/")[0] for c in CASES for a in c["args"] if "{corpus}/" in a}
    files = {p.name for p in CORPUS.iterdir() if p.name != "cases.yaml"}
    assert files == used, f"files no case uses: {sorted(files - used)}; missing files: {sorted(used - files)}"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_case(case, tmp_path, databases, monkeypatch):
    args, db = _args(case, tmp_path, databases, monkeypatch)
    r = CliRunner().invoke(app, args)
    _check_one_line(r.exit_code, r.stdout, r.stderr, case, args)
    if case.get("db") == "missing":
        assert not db.exists(), "a command that failed on its input must not create the database"
    assert not (CORPUS / "PWNED").exists() and not Path("tests/corpus/PWNED").exists()


def _rlbench() -> list[str]:
    exe = Path(sys.executable).with_name("rlbench")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("rlbench")
    return [found] if found else [sys.executable, "-c", "from rlbench_cli.cli.app import main; main()"]


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_corpus_case_in_a_real_subprocess(case_id, tmp_path, databases):
    case = BY_ID[case_id]
    args, _ = _args(case, tmp_path, databases)
    env = {k: v for k, v in os.environ.items() if k not in ("RLBENCH_DEBUG", "RLBENCH_DB")}
    p = subprocess.run(_rlbench() + args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    _check_one_line(p.returncode, p.stdout, p.stderr, case, args)
    assert not (tmp_path / "tests" / "corpus" / "PWNED").exists()
