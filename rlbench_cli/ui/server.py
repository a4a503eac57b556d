"""Starting ``rlbench ui``: the checks (a results file there, a token off loopback, a free port) as one-line
errors before anything listens, then uvicorn on a socket bound here."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

READ_WAIT_S = 10.0  # a request waits this long for rlbench run's write burst before answering 503


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Prepared:
    """A checked configuration: the bound socket, the address to open, the token (None on loopback without
    one) and the app."""

    sock: socket.socket
    url: str
    token: str | None
    app: Any


def prepare(db: Path | None, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> Prepared:
    """Checks the options and binds the port. ``token="auto"`` generates one. Raises UsageError (one line,
    exit 2) for a missing database, a host off loopback without a token, or a port in use."""
    from ..store import Store
    from .app import create_app

    store = Store(db, wait=READ_WAIT_S)
    if not store.path.is_file():
        raise UsageError(f"--db {store.path}: no results database there; run a suite first (rlbench run "
                         "SUITE.yaml) or pass your file with --db")  # fmt: skip
    with store.reader():  # a DuckDB file of rlbench, of a schema this version reads: said now, in one line
        pass
    loopback = is_loopback(host)
    if token == "auto":
        token = secrets.token_urlsafe(24)
    if not loopback and not token:
        raise UsageError(f"--host {host} serves the results beyond this machine: it needs a token; pass "
                         "--token auto (one is generated and printed) or --token YOURS")  # fmt: skip
    if token is not None and len(token) < 8:
        raise UsageError("--token: use at least 8 characters, or --token auto")
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        if e.errno == 98:  # EADDRINUSE
            raise UsageError(f"--port {port}: already in use on {host}; pass another --port (0 picks a free "
                             "one)") from None  # fmt: skip
        raise UsageError(f"--host {host} --port {port}: cannot listen there ({e.strerror}); pass "
                         "another --host or --port") from None  # fmt: skip
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    return Prepared(sock=sock, url=url, token=token, app=create_app(store, token=token, loopback=loopback))


def preload() -> None:
    """Imports what a suite page's first requests use (~0.4 s of CPU: DuckDB, pyarrow, pandas through the
    scoring and tuning modules and pyarrow's to_numpy), while the server waits for its first page rather than in that page's
    requests. Nothing is read from the store."""
    import importlib

    for name in ("duckdb", "numpy", "pandas", "pyarrow.parquet", "pyarrow.compute", "rlbench_cli.analysis",
                 "rlbench_cli.scoring", "rlbench_cli.tune", "rlbench_cli.ui.curves"):  # fmt: skip
        importlib.import_module(name)


def serve(prepared: Prepared, say: Callable[[str], None] = print) -> None:
    """Serves until interrupted (Ctrl-C), on the socket ``prepare`` bound."""
    import uvicorn

    say(f"rlbench ui: {prepared.url}  (Ctrl-C stops it)")
    threading.Thread(target=preload, daemon=True).start()
    # an open page holds a long poll (/api/changes) for up to MAX_WAIT_S: Ctrl-C does not wait for it
    config = uvicorn.Config(prepared.app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[prepared.sock])
    finally:
        prepared.sock.close()
