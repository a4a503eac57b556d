"""Sharing by URL: `rlbench export SUITE --out DIR` writes a checksummed bundle; `rlbench fetch --from
bundle:PATH_OR_URL` reads it back from a folder, loopback HTTP or a loopback S3 API (moto), losslessly, and
refuses a damaged one with one line before the database is touched."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.store import RUN_COLUMNS, Store

runner = CliRunner()
ROOT = Path(__file__).parents[2]
POINTS = [(1000, 10.0), (2000, 30.0), (3000, 50.0)]
FILES = [
    "MANIFEST.sha256",
    "artifacts.parquet",
    "bundle.json",
    "metrics.parquet",
    "runs.parquet",
    "suite.json",
    "suite.yaml",
]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(r, *needles):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output and "internal error" not in r.output
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory, make_results_db):
    """A results database with suite 'tiny' (3 finished runs with full manifests, 1 failed) and its suite file."""
    root = tmp_path_factory.mktemp("share-src")
    runs = [(a, "CartPole-v1", s, POINTS) for a in ("ppo", "random") for s in (0, 1)]
    store = make_results_db(root / "src.duckdb", runs, suite="tiny",
                            status=["finished", "finished", "finished", "failed"], config={"seeds": 2})  # fmt: skip
    (root / "tiny.yaml").write_text("name: tiny\nenvs: [CartPole-v1]\nalgorithms: [ppo, random]\nseeds: 2\n")
    with store.writer() as con:
        con.execute("UPDATE suites SET source_path = ?", [str(root / "tiny.yaml")])
        con.execute(
            """UPDATE runs SET host = 'gpu-box', device = 'cuda:0', git_commit = 'abc123', git_dirty = true,
               python = '3.11.9', packages = '{"torch": "2.13.0", "numpy": "2.1"}', executor = 'slurm',
               job_id = '4242_' || seed, config = '{"params": {"lr": 0.001}, "seed": ' || seed || '}'"""
        )
    return store


def counts(db: Path) -> dict[str, int] | None:
    """Rows per table; None when there is no database file."""
    if not db.exists():
        return None
    with Store(db).reader() as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
                for t in ("suites", "runs", "metrics", "artifacts")}  # fmt: skip


def finished_runs(db: Path, suite: str) -> list[dict]:
    with Store(db).reader() as con:
        return [r for r in Store(db).runs(con, suite) if r["status"] == "finished"]


def metric_rows(db: Path, suite: str) -> list[tuple]:
    with Store(db).reader() as con:
        return con.execute(
            """SELECT m.run_id, m.step, m.name, m.value, m.wall_time FROM metrics m JOIN runs r USING (run_id)
               WHERE r.suite = ? AND r.status = 'finished' ORDER BY ALL""",
            [suite],
        ).fetchall()


def without_ids(rows: list[dict]) -> list[dict]:
    """Runs rows without run_id and suite, in a stable order."""
    return sorted(({k: v for k, v in r.items() if k not in ("run_id", "suite")} for r in rows), key=repr)


@pytest.fixture(scope="module")
def bundle(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("share-bundle") / "tiny"
    r = invoke("export", "tiny", "--out", out, "--db", source.path)
    assert r.exit_code == 0, r.output
    assert "wrote 3 finished runs (9 metric rows) of suite 'tiny'" in r.output
    return out


def copy_bundle(bundle: Path, dest: Path) -> Path:
    shutil.copytree(bundle, dest)
    return dest


def legacy_bundle(dest: Path) -> Path:
    """results/reference/classic-control as bundles were written before MANIFEST.sha256 and bundle.json:
    runs.parquet, metrics.parquet and suite.json only."""
    copy_bundle(ROOT / "results" / "reference" / "classic-control", dest)
    for name in ("MANIFEST.sha256", "bundle.json", "suite.yaml", "artifacts.parquet"):
        (dest / name).unlink(missing_ok=True)
    return dest


@pytest.fixture
def target(tmp_path, make_results_db):
    """A database that already holds another suite (so 'unchanged' is checked on real counts)."""
    db = tmp_path / "target.duckdb"
    make_results_db(db, [("dqn", "Acrobot-v1", 0, POINTS)], suite="mine")
    return db


# -- loopback servers -------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_root(tmp_path):
    """(folder, base URL): a ThreadingHTTPServer on 127.0.0.1 serving the folder; stopped after the test."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def silent_url():
    """A URL whose server accepts the connection (the kernel's backlog) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield f"http://127.0.0.1:{s.getsockname()[1]}/tiny"
    s.close()


@pytest.fixture
def s3(monkeypatch):
    """A boto3 client of moto's S3 server on 127.0.0.1, bucket 'shared'; AWS_ENDPOINT_URL points at it."""
    pytest.importorskip("boto3")
    server_mod = pytest.importorskip("moto.server")
    port = free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    for key, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
    client.create_bucket(Bucket="shared")
    yield client
    server.stop()


def upload(client, folder: Path, prefix: str) -> None:
    for p in sorted(folder.iterdir()):
        client.upload_file(str(p), "shared", f"{prefix}/{p.name}")


# -- export -----------------------------------------------------------------------------------------------
def test_export_writes_a_complete_checksummed_bundle(bundle, source):
    assert sorted(p.name for p in bundle.iterdir()) == FILES
    assert not [p for p in bundle.parent.iterdir() if p.name.startswith(".")], "no temporary folder left"
    info = json.loads((bundle / "bundle.json").read_text())
    assert info["format_version"] == 1 and info["suite"] == "tiny"
    assert (info["runs"], info["metric_rows"]) == (3, 9) and info["created_at"].endswith("Z")
    assert set(pq.read_table(bundle / "runs.parquet").column_names) == set(RUN_COLUMNS)
    assert (bundle / "suite.yaml").read_text().startswith("name: tiny")
    manifest = (bundle / "MANIFEST.sha256").read_text()
    assert "# size" in manifest and all(f"  {n}" in manifest for n in FILES if n != "MANIFEST.sha256")
    if shutil.which("sha256sum"):
        p = subprocess.run(["sha256sum", "-c", "--strict", "MANIFEST.sha256"], cwd=bundle, capture_output=True,
                           text=True)  # fmt: skip
        assert p.returncode == 0, p.stdout + p.stderr


def test_fetch_format_bundle_is_the_same_writer_and_replaces_a_bundle(source, tmp_path):
    out = tmp_path / "b"
    for _ in range(2):  # the second time replaces the first bundle, atomically
        r = invoke("fetch", "--suite", "tiny", "--format", "bundle", "-o", out, "--db", source.path)
        assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_export_errors_are_one_line_and_leave_nothing(source, tmp_path, monkeypatch):
    one_line_error(
        invoke("export", "nope", "--out", tmp_path / "x", "--db", source.path), "'nope'", "no such suite"
    )
    (tmp_path / "file").write_text("x")
    one_line_error(invoke("export", "tiny", "--out", tmp_path / "file", "--db", source.path), "a file")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    one_line_error(invoke("export", "tiny", "--out", tmp_path / "mine", "--db", source.path), "other files")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"

    import rlbench_cli.bundle as bundle_mod

    def broken(folder):
        raise OSError(28, "No space left on device", str(folder))

    monkeypatch.setattr(bundle_mod, "write_manifest", broken)
    one_line_error(invoke("export", "tiny", "--out", tmp_path / "half", "--db", source.path), "No space left")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "mine"], "a half-written bundle was left"


# -- round trips ------------------------------------------------------------------------------------------
def test_folder_round_trip_is_lossless_and_idempotent(source, bundle, tmp_path):
    db = tmp_path / "fresh.duckdb"
    r = invoke("fetch", "--from", f"bundle:{bundle}", "--db", db)
    assert r.exit_code == 0, r.output
    assert "imported 3 runs (9 metric rows) into suite 'tiny'" in r.output
    assert finished_runs(db, "tiny") == finished_runs(source.path, "tiny")  # every runs column
    assert metric_rows(db, "tiny") == metric_rows(source.path, "tiny")  # every metric row, wall_time included
    assert all(row[4] is not None for row in metric_rows(db, "tiny"))
    with Store(db).reader() as con:
        assert Store(db).suite_info(con, "tiny")["config"] == {"seeds": 2}
    before = counts(db)
    r = invoke("fetch", "--from", f"bundle:{bundle}", "--db", db)
    assert "imported 0 runs (0 metric rows)" in r.output and "3 already present" in r.output
    assert counts(db) == before

    # into another suite: new run ids (those rlbench:DIR gives), everything else as recorded
    r = invoke("fetch", "--from", f"bundle:{bundle}", "--into", "copy", "--db", db)
    assert "imported 3 runs (9 metric rows) into suite 'copy'" in r.output, r.output
    assert without_ids(finished_runs(db, "copy")) == without_ids(finished_runs(source.path, "tiny"))
    legacy = invoke("fetch", "--from", f"rlbench:{bundle}", "--into", "copy", "--db", db)
    assert "imported 0 runs" in legacy.output and "3 already present" in legacy.output, legacy.output


def test_a_bundle_without_manifest_still_imports(tmp_path):
    ref = legacy_bundle(tmp_path / "classic-control")
    db = tmp_path / "db.duckdb"
    r = invoke("fetch", "--from", f"bundle:{ref}", "--db", db)
    assert r.exit_code == 0, r.output
    assert "imported 65 runs (85395 metric rows) into suite 'classic-control'" in r.output


def test_http_round_trip(bundle, source, http_root, tmp_path):
    root, url = http_root
    copy_bundle(bundle, root / "tiny")
    db = tmp_path / "fresh.duckdb"
    r = invoke("fetch", "--from", f"bundle:{url}/tiny/", "--into", "tiny", "--db", db)
    assert r.exit_code == 0, r.output
    assert f"imported 3 runs (9 metric rows) into suite 'tiny' from bundle:{url}/tiny/" in r.output
    assert finished_runs(db, "tiny") == finished_runs(source.path, "tiny")
    assert metric_rows(db, "tiny") == metric_rows(source.path, "tiny")
    # a bundle without a manifest, over HTTP
    legacy_bundle(root / "cc")
    r = invoke("fetch", "--from", f"bundle:{url}/cc", "--into", "cc", "--db", db)
    assert r.exit_code == 0 and "imported 65 runs" in r.output, r.output


def test_s3_round_trip(bundle, source, s3, tmp_path):
    upload(s3, bundle, "bundles/tiny")
    db = tmp_path / "fresh.duckdb"
    r = invoke("fetch", "--from", "bundle:s3://shared/bundles/tiny", "--db", db)
    assert r.exit_code == 0, r.output
    assert "imported 3 runs (9 metric rows) into suite 'tiny'" in r.output
    assert finished_runs(db, "tiny") == finished_runs(source.path, "tiny")
    assert metric_rows(db, "tiny") == metric_rows(source.path, "tiny")

    # a bundle without a manifest (written before there was one), from S3
    legacy = legacy_bundle(tmp_path / "legacy-cc")
    upload(s3, legacy, "legacy/cc")
    r = invoke("fetch", "--from", "bundle:s3://shared/legacy/cc", "--into", "cc", "--db", db)
    assert r.exit_code == 0 and "imported 65 runs" in r.output, r.output

    # an unlisted object under the prefix, a missing bucket, nothing under a prefix: one line, nothing written
    s3.put_object(Bucket="shared", Key="bundles/tiny/extra.parquet", Body=b"PAR1")
    before = counts(db)
    one_line_error(invoke("fetch", "--from", "bundle:s3://shared/bundles/tiny", "--db", db),
                   "s3://shared/bundles/tiny/extra.parquet", "not listed in MANIFEST.sha256")  # fmt: skip
    one_line_error(invoke("fetch", "--from", "bundle:s3://nope/tiny", "--db", db), "no bucket 'nope'")
    one_line_error(invoke("fetch", "--from", "bundle:s3://shared/empty", "--db", db), "nothing there")
    assert counts(db) == before


def test_s3_without_boto3_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "boto3", None)
    db = tmp_path / "db.duckdb"
    one_line_error(invoke("fetch", "--from", "bundle:s3://b/p", "--into", "s", "--db", db),
                   "pip install 'rlbench-cli[s3]'")  # fmt: skip
    assert not db.exists()


# -- damaged bundles --------------------------------------------------------------------------------------
def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


DAMAGE = {
    "flipped-byte": ("metrics.parquet", _flip, ["sha256 does not match MANIFEST.sha256"]),
    "truncated": ("runs.parquet", _truncate, ["MANIFEST.sha256 says", "(truncated)"]),
    "missing": ("metrics.parquet", Path.unlink, ["missing (listed in MANIFEST.sha256)"]),
    "extra": ("extra.parquet", lambda p: p.write_bytes(b"PAR1"), ["not listed in MANIFEST.sha256"]),
    "manifest-removed": ("MANIFEST.sha256", Path.unlink, ["missing, yet the bundle has bundle.json"]),
    "manifest-edited": ("MANIFEST.sha256", lambda p: p.write_text(p.read_text().replace("  suite.json", "  ../x")),
                        ["MANIFEST.sha256: line", "plain names"]),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_bundle_imports_nothing(kind, bundle, target, tmp_path):
    name, damage, needles = DAMAGE[kind]
    bad = copy_bundle(bundle, tmp_path / "bad")
    damage(bad / name)
    before = counts(target)
    line = one_line_error(invoke("fetch", "--from", f"bundle:{bad}", "--into", "x", "--db", target), *needles)
    assert f"{bad}/{name}" in line
    assert counts(target) == before


@pytest.mark.parametrize("kind", ["flipped-byte", "truncated", "missing", "manifest-removed"])
def test_a_damaged_bundle_over_http_imports_nothing(kind, bundle, http_root, tmp_path):
    root, url = http_root
    name, damage, needles = DAMAGE[kind]
    damage(copy_bundle(bundle, root / "bad") / name)
    db = tmp_path / "new.duckdb"
    line = one_line_error(invoke("fetch", "--from", f"bundle:{url}/bad", "--db", db), f"{url}/bad/{name}")
    assert any(n in line for n in needles) or "404" in line, line
    assert not db.exists(), "nothing is written"


def test_unreachable_urls_are_one_line(http_root, silent_url, tmp_path):
    _, url = http_root
    db = tmp_path / "new.duckdb"
    one_line_error(invoke("fetch", "--from", f"bundle:{url}/nothing-here", "--db", db),
                   f"{url}/nothing-here/MANIFEST.sha256", "not found (HTTP 404)")  # fmt: skip
    refused = f"http://127.0.0.1:{free_port()}/tiny"
    one_line_error(invoke("fetch", "--from", f"bundle:{refused}", "--db", db), refused, "connection refused")
    t0 = time.monotonic()
    one_line_error(invoke("fetch", "--from", f"bundle:{silent_url}", "--timeout", "0.5", "--db", db),
                   silent_url, "no answer within 0.5s (timed out)")  # fmt: skip
    assert time.monotonic() - t0 < 10
    one_line_error(invoke("fetch", "--from", f"bundle:{tmp_path / 'nope'}", "--db", db), "no such folder")
    one_line_error(invoke("fetch", "--timeout", "3", "--db", db), "--timeout", "add --from")
    one_line_error(invoke("fetch", "--from", "csv:x.csv", "--into", "s", "--timeout", "3", "--db", db),
                   "--timeout applies to --from bundle:")  # fmt: skip
    assert not db.exists()


# -- the real command -------------------------------------------------------------------------------------
def _rlbench() -> list[str]:
    exe = Path(sys.executable).with_name("rlbench")
    return (
        [str(exe)] if exe.exists() else [sys.executable, "-c", "from rlbench_cli.cli.app import main; main()"]
    )


def rl(*args, cwd: Path):
    """The real `rlbench` command in a subprocess."""
    env = {k: v for k, v in os.environ.items() if k not in ("RLBENCH_DEBUG", "RLBENCH_DB")}
    return subprocess.run(_rlbench() + [str(a) for a in args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)  # fmt: skip


def test_end_to_end_through_the_rlbench_command(source, http_root, tmp_path):
    root, url = http_root
    rl_ = functools.partial(rl, cwd=tmp_path)
    p = rl_("export", "tiny", "--out", root / "tiny", "--db", source.path)
    assert p.returncode == 0, p.stderr
    folder_db = tmp_path / "folder.duckdb"
    p = rl_("fetch", "--from", f"bundle:{root / 'tiny'}", "--db", folder_db)
    assert p.returncode == 0 and "imported 3 runs (9 metric rows)" in p.stdout, p.stderr
    assert finished_runs(folder_db, "tiny") == finished_runs(source.path, "tiny")
    db = tmp_path / "fresh.duckdb"
    p = rl_("fetch", "--from", f"bundle:{url}/tiny", "--db", db)
    assert p.returncode == 0 and "imported 3 runs (9 metric rows)" in p.stdout, p.stderr
    assert metric_rows(db, "tiny") == metric_rows(source.path, "tiny")
    _flip(root / "tiny" / "metrics.parquet")
    p = rl_("fetch", "--from", f"bundle:{url}/tiny", "--into", "again", "--db", db)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"{url}/tiny/metrics.parquet: sha256 does not match" in p.stderr
    p = rl_("fetch", "--from", f"bundle:{url}/gone", "--db", db)
    assert p.returncode == 2 and "not found (HTTP 404)" in p.stderr, p.stderr
    assert counts(db)["runs"] == 3


def test_end_to_end_s3_through_the_rlbench_command(source, s3, tmp_path):
    p = rl("export", "tiny", "--out", tmp_path / "tiny", "--db", source.path, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    upload(s3, tmp_path / "tiny", "e2e/tiny")
    db = tmp_path / "fresh.duckdb"
    p = rl("fetch", "--from", "bundle:s3://shared/e2e/tiny", "--into", "tiny", "--db", db, cwd=tmp_path)
    assert p.returncode == 0 and "imported 3 runs (9 metric rows)" in p.stdout, p.stderr
    assert finished_runs(db, "tiny") == finished_runs(source.path, "tiny")
    assert metric_rows(db, "tiny") == metric_rows(source.path, "tiny")
    s3.put_object(Bucket="shared", Key="e2e/tiny/metrics.parquet", Body=b"PAR1 truncated")
    p = rl("fetch", "--from", "bundle:s3://shared/e2e/tiny", "--into", "other", "--db", db, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "s3://shared/e2e/tiny/metrics.parquet: 14 bytes, MANIFEST.sha256 says" in p.stderr, p.stderr
    assert counts(db)["runs"] == 3


def test_help_imports_no_heavy_module():
    code = (
        "import sys\nfrom rlbench_cli.cli.app import app\nfrom typer.testing import CliRunner\n"
        "CliRunner().invoke(app, ['--help']); CliRunner().invoke(app, ['export', '--help'])\n"
        "print([m for m in ('boto3', 'botocore', 'pandas', 'duckdb', 'pyarrow') if m in sys.modules])\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "[]", p.stdout + p.stderr
