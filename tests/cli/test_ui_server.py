"""`rlbench ui`'s guard and bad input: one line and exit 2 for a missing database, a host off loopback
without a token, a port in use; the token on every route (query once, then a cookie; or a bearer header); the
Host header on loopback; security headers; 404 pages without tracebacks; only the page's own static files."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.errors import UsageError
from rlbench_cli.store import Store
from rlbench_cli.ui.app import create_app
from rlbench_cli.ui.server import is_loopback, prepare

runner = CliRunner()
TOKEN = "a-long-enough-token"


@pytest.fixture(scope="module")
def db(tmp_path_factory, make_results_db):
    path = tmp_path_factory.mktemp("uiserver") / "rlbench.duckdb"
    make_results_db(path, [("ppo", "CartPole-v1", 0, [(0, 1.0), (100, 2.0)]),
                           ("ppo", "CartPole-v1", 1, [(0, 2.0), (100, 3.0)])], suite="s")  # fmt: skip
    return path


def one_line_error(args: list[str]) -> str:
    r = runner.invoke(app, ["ui", *args])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(db, tmp_path):
    assert "no results database" in one_line_error(["--db", str(tmp_path / "missing.duckdb")])
    (tmp_path / "text.duckdb").write_text("not a database at all")
    assert "not a usable DuckDB" in one_line_error(["--db", str(tmp_path / "text.duckdb")])
    line = one_line_error(["--db", str(db), "--host", "0.0.0.0"])
    assert "--host 0.0.0.0" in line and "--token auto" in line
    assert "--token" in one_line_error(["--db", str(db), "--host", "0.0.0.0", "--token", "short"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_line_error(["--db", str(db), "--port", str(port)])
    assert f"--port {port}" in line and "in use" in line


def test_prepare_binds_a_free_port_and_generates_a_token(db):
    p = prepare(db, host="127.0.0.1", port=0)
    try:
        assert p.token is None and re.fullmatch(r"http://127\.0\.0\.1:\d+/", p.url)
        assert p.sock.getsockname()[1] == int(p.url.rsplit(":", 1)[1].strip("/"))
    finally:
        p.sock.close()
    p = prepare(db, host="0.0.0.0", port=0, token="auto")
    try:
        assert len(p.token) >= 24 and p.url.endswith(f"?token={p.token}")
    finally:
        p.sock.close()
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    with pytest.raises(UsageError, match="needs a token"):
        prepare(db, host="192.168.1.2", port=0)


def test_the_token_is_checked_on_every_route(db):
    client = TestClient(create_app(Store(db, wait=5), token=TOKEN, loopback=False))
    for url in ("/", "/api/suites", "/static/app.js", "/files/x/y", "/nothing"):
        r = client.get(url)
        assert r.status_code == 401, url
    assert client.get("/api/suites", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert client.get("/api/suites?token=wrong-token").status_code == 401
    assert client.get("/api/suites", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    # once in the address: a cookie from then on, and the token leaves the address bar
    r = client.get(f"/api/runs?suite=s&token={TOKEN}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/api/runs?suite=s"
    assert (
        "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
    )
    assert client.get("/api/runs?suite=s").json()["total"] == 2


def test_loopback_answers_only_to_loopback_names_with_security_headers(db):
    client = TestClient(create_app(Store(db, wait=5)), base_url="http://127.0.0.1:8765")
    r = client.get("/")
    assert r.status_code == 200 and "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/api/suites", headers={"Host": "localhost:8765"}).status_code == 200
    # a page elsewhere whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing
    assert client.get("/api/suites", headers={"Host": "evil.example:8765"}).status_code == 400


def test_unknown_pages_runs_and_static_files_are_404_pages(db):
    client = TestClient(create_app(Store(db, wait=5)))
    for url in (
        "/nothing",
        "/static/../data.py",
        "/static/app.py",
        "/static/index.html",
        "/files/nope/x.txt",
    ):
        r = client.get(url)
        assert r.status_code == 404 and "Traceback" not in r.text and "<h1>Not found</h1>" in r.text, url
    assert client.get("/api/run/nope").json() == {"error": "not found"}
    assert client.get("/api/run/nope/log").status_code == 404
    assert client.get("/api/runs?suite=nope").status_code == 404
    assert client.get("/api/runs?suite=s&offset=x").status_code == 400
    assert client.get("/static/uPlot.LICENSE").text.startswith("The MIT License")
    assert client.get("/static/uPlot.iife.min.js").headers["content-type"].startswith("text/javascript")


@pytest.mark.slow
def test_rlbench_ui_serves_on_a_free_loopback_port(db):
    proc = subprocess.Popen([shutil.which("rlbench"), "ui", "--db", str(db), "--port", "0"],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        assert httpx.get(url + "api/suites", timeout=30).json()["suites"][0]["name"] == "s"
        # an open page holds a long poll for up to 30 s; stopping the server does not wait for it
        stamp = httpx.get(url + "api/changes", timeout=30).json()["db"]

        def hold() -> None:
            try:
                httpx.get(f"{url}api/changes?db={stamp}&wait=30", timeout=60)
            except httpx.HTTPError:  # the server went away mid-poll, as a page sees it
                pass

        held = threading.Thread(target=hold)
        held.start()
        time.sleep(0.5)
        proc.terminate()
        assert proc.wait(timeout=15) is not None
        held.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
