"""The Starlette app of ``rlbench ui``: one page, its vendored scripts, read-only JSON endpoints over
``data``, and a run folder's files. GET only (any other method is 405); a token, when set, is checked on
every route; an unknown run, file or route is a 404 page, an error a one-line JSON or page, never a
traceback."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import html
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import RlbenchError, StoreBusy, UnknownName, UsageError
from . import data
from .attached import AttachedStore
from .watch import MAX_WAIT_S, Watch

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"app.js": "text/javascript", "curves.js": "text/javascript", "stats.js": "text/javascript", "app.css": "text/css",
                "uPlot.iife.min.js": "text/javascript", "uPlot.min.css": "text/css", "uPlot.LICENSE": "text/plain; charset=utf-8"}  # fmt: skip
COOKIE = "rlbench_ui_token"
# the page runs only its own scripts; nothing is framed, fetched or posted elsewhere
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; media-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
WATCH_S = 0.1  # how often a held long poll looks again
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver")  # testserver: TestClient's


def _page(status: int, title: str, text: str) -> HTMLResponse:
    body = (f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p><p><a href='/'>rlbench ui</a></p>")  # fmt: skip
    return HTMLResponse(body, status_code=status)


def _error(request: Request, status: int, text: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": text}, status_code=status)
    return _page(status, {404: "Not found", 401: "Token required", 503: "Busy"}.get(status, "Error"), text)


class _Guard(BaseHTTPMiddleware):
    """The token on every route (``?token=`` once, then a cookie; or ``Authorization: Bearer``), the Host
    header when bound to loopback (a page of another site that resolves its name to 127.0.0.1 gets a 400),
    and the security headers on every answer."""

    def __init__(self, app: Any, token: str | None, loopback: bool):
        super().__init__(app)
        self.token, self.loopback = token, loopback

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._check(request, call_next)
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    async def _check(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if self.loopback and request.url.hostname not in LOOPBACK_NAMES:
            return _page(400, "Bad host", "this server answers only to 127.0.0.1 and localhost")
        if self.token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            # once through the address; from then on the cookie, and the token leaves the address bar
            query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            target = request.url.path + (f"?{query}" if query else "")
            response = (
                RedirectResponse(target, status_code=303)
                if request.method == "GET"
                else await call_next(request)
            )
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return response
        cookie = request.cookies.get(COOKIE, "")
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if any(v and hmac.compare_digest(v.encode(), self.token.encode()) for v in (cookie, bearer)):
            return await call_next(request)
        return _error(
            request, 401, "this rlbench ui needs its token: open the address it printed (?token=...)"
        )


def _filters(request: Request) -> list[tuple[str, list[str]]]:
    """``f=key:value`` parameters, repeated; the values of one key are alternatives."""
    out: dict[str, list[str]] = {}
    for item in request.query_params.getlist("f"):
        key, sep, value = item.partition(":")
        if not sep:
            raise UsageError(f"filter {item!r}: use f=key:value")
        out.setdefault(key, []).append(value)
    return list(out.items())


def _number(request: Request, name: str, default: float, kind: type = int) -> Any:
    """Query parameter ``name`` as ``kind`` (int or float); ``default`` when absent."""
    raw = request.query_params.get(name)
    try:
        return default if raw in (None, "") else kind(raw)
    except ValueError:
        raise UsageError(
            f"{name}={raw!r}: {'a whole number' if kind is int else 'a number'} is needed"
        ) from None


def _int(request: Request, name: str, default: int) -> int:
    return _number(request, name, default, int)


def _steps(request: Request) -> list[int | None]:
    """The ``step`` query parameters (repeated: one family over the steps, as ``--step-max`` repeated) as whole
    numbers; ``[None]`` (each run's end) when there is none."""
    steps: list[int | None] = []
    for raw in request.query_params.getlist("step"):
        try:
            steps += [int(raw)] if raw != "" else []
        except ValueError:
            raise UsageError(f"step={raw!r}: a whole number is needed") from None
    return steps or [None]


def _encode(value: Any) -> bytes:
    """JSON as Starlette's JSONResponse writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def tagged(parts: dict[str, Any], have: set[str]) -> Response:
    """``{"tags": {part: tag}, "same": [parts left out], part: value, ...}``: each part's tag a hash of its
    JSON, and a part whose tag is in ``have`` (the page has it) left out, so an unchanged part costs neither
    the transfer nor the page's parse and redraw."""
    encoded = {k: _encode(v) for k, v in parts.items()}
    tags = {k: hashlib.blake2b(v, digest_size=8).hexdigest() for k, v in encoded.items()}
    same = [k for k in parts if tags[k] in have]
    body = b"".join([b'{"tags":', _encode(tags), b',"same":', _encode(same)]
                    + [b',"%s":%s' % (k.encode(), v) for k, v in encoded.items() if k not in same] + [b"}"])  # fmt: skip
    return Response(body, media_type="application/json")


def create_app(store: Any, token: str | None = None, loopback: bool = True) -> Starlette:
    """The app over ``store`` (a ``Store`` whose ``wait`` bounds how long a request waits for the writer).
    Every route reads through ``AttachedStore`` but the query box, which reads through its own instance."""
    plain, store = store, AttachedStore(store)

    def api(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:  # sync: Starlette runs it on its thread pool
            try:
                out = fn(request)
            except StoreBusy as e:
                return JSONResponse({"error": str(e)}, status_code=503)
            except UnknownName as e:
                return JSONResponse({"error": str(e)}, status_code=404)
            except (UsageError, RlbenchError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            if out is None:
                return JSONResponse({"error": "not found"}, status_code=404)
            return out if isinstance(out, Response) else JSONResponse(out)

        return endpoint

    def suite_arg(request: Request) -> str:
        suite = request.query_params.get("suite") or request.path_params.get("suite")
        if not suite:
            raise UsageError("suite=NAME is needed")
        return suite

    def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return _page(404, "Not found", f"no file {name}")
        return FileResponse(STATIC / name, media_type=STATIC_FILES[name])

    def page_args(request: Request) -> dict[str, Any]:
        q = request.query_params
        return {"filters": _filters(request), "sort": q.get("sort") or "run_id", "descending": q.get("desc") in ("1", "true"),
                "offset": _int(request, "offset", 0), "limit": _int(request, "limit", 100),
                "with_config": q.get("config") not in ("0", "false")}  # fmt: skip

    def curve_args(request: Request) -> dict[str, Any]:
        q = request.query_params
        metric = q.get("metric")
        if not metric:
            raise UsageError("metric=NAME is needed")
        return {"metric": metric, "filters": _filters(request), "group_by": q.getlist("group"),
                "stat": q.get("stat") or "iqm", "smoothing": _number(request, "smooth", 0.0, float),
                "per_run": q.get("lines") in ("1", "true"), "reps": _int(request, "reps", 1000),
                "seed": _int(request, "seed", 0), "packed": q.get("pack") in ("1", "true")}  # fmt: skip

    def runs(request: Request) -> Any:
        return data.runs(store, suite_arg(request), **page_args(request))

    def curves(request: Request) -> Any:
        return data.curves(store, suite_arg(request), **curve_args(request))

    def suite_live(request: Request) -> Response:
        """A suite page's live refresh: the runs page (not with ``runs=0``: a new shard changes only the
        curves), the curves (with ``metric=``) and the keys (with ``keys=1``) of one read of the store; a
        part whose tag the page names in ``have=`` (it shows that already) is left out and listed in
        ``same``."""
        q = request.query_params
        page = None if q.get("runs") in ("0", "false") else page_args(request)
        out = data.suite_live(store, suite_arg(request), page,
                              curve_args(request) if q.get("metric") else None, q.get("keys") in ("1", "true"))  # fmt: skip
        return tagged(out, set(q.getlist("have")))

    def by_key(request: Request) -> Any:
        q = request.query_params
        key = q.get("x")
        if not key:
            raise UsageError("x=KEY is needed (a config key that varies, as /api/keys lists under settings)")
        return data.by_key(store, suite_arg(request), key, q.get("metric") or None, q.get("stat") or "iqm",
                           _int(request, "reps", 2000), _int(request, "seed", 0))  # fmt: skip

    def paired(request: Request) -> Any:
        q = request.query_params
        return data.paired(store, suite_arg(request), q.get("baseline") or None, q.get("metric") or None,
                           q.get("alternative") or "two-sided", _steps(request),
                           _int(request, "reps", 50_000), _int(request, "seed", 0))  # fmt: skip

    watch = Watch(store)

    async def changes(request: Request) -> Response:
        """The page's long poll: ``{db, files}`` stamps (``watch``; files: of ``run=ID``, or of ``suite=NAME``'s
        running runs' shards holding ``metric=``), answered as soon as one differs from the page's (``db=``, ``files=``; a part
        not given is not waited for; neither: at once), or after ``wait`` seconds (at most ``MAX_WAIT_S``)."""
        q = request.query_params
        run_id = q.get("run") or None
        suite = None if run_id else q.get("suite") or None  # files: its running runs' shard folders
        folders = None
        try:
            wait = min(max(float(q.get("wait") or MAX_WAIT_S), 0.0), MAX_WAIT_S)
        except ValueError:
            return JSONResponse({"error": f"wait={q.get('wait')!r}: a number of seconds is needed"}, 400)
        try:
            if run_id is not None and await run_in_threadpool(watch.suite_of, run_id) is None:
                return JSONResponse({"error": f"no run {run_id}"}, status_code=404)
            if suite is not None:
                folders = await run_in_threadpool(watch.running_folders, suite)
        except StoreBusy as e:
            return JSONResponse({"error": str(e)}, status_code=503)
        if not any(k in q for k in ("db", "files")):
            wait = 0.0  # nothing to wait for: the stamps now
        deadline = time.monotonic() + wait
        metric = q.get("metric") or ""
        for n in itertools.count():
            if folders is None or watch.shards_known(folders, metric):
                now = watch.stamp(run_id, folders, metric)  # stat calls only: cheap enough for the event loop
            else:  # a suite's new shards are parsed (once): on a thread
                now = await run_in_threadpool(watch.stamp, None, folders, metric)
            if any(k in q and q[k] != now[k] for k in ("db", "files")) or time.monotonic() >= deadline:
                break
            if n % 20 == 19 and await request.is_disconnected():  # the page gone: stop looking
                break
            await asyncio.sleep(WATCH_S)
        return JSONResponse(now)

    def points(request: Request) -> Any:
        q = request.query_params
        attempt = q.get("attempt")
        out = watch.points(request.path_params["run_id"], q.get("metric") or None, _int(request, "after", 0),
                           int(attempt) if attempt and attempt.isdigit() else None)  # fmt: skip
        return data.jsonable(out) if out is not None else None

    def log(request: Request) -> Any:
        run_id = request.path_params["run_id"]
        folder = watch.run_folder(run_id)  # the run's suite looked up once, not at every refresh
        return None if folder is None else data.log_tail(store, run_id, folder=folder)

    def run_file(request: Request) -> Response:
        try:
            found = data.safe_file(store, request.path_params["run_id"], request.path_params["path"])
        except StoreBusy as e:
            return _page(503, "Busy", str(e))
        if found is None:
            return _page(404, "Not found", "no such file in this run's folder")
        path, kind = found
        headers = {} if kind != "application/octet-stream" else {
            "Content-Disposition": f'attachment; filename="{path.name.replace(chr(34), "")}"'}  # fmt: skip
        return FileResponse(path, media_type=kind, headers=headers)

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/suites", api(lambda r: {"suites": data.suites(store)})),
        Route("/api/keys", api(lambda r: data.keys(store, suite_arg(r)))),
        Route("/api/runs", api(runs)),
        Route("/api/curves", api(curves)),
        Route("/api/run/{run_id}", api(lambda r: data.run(store, r.path_params["run_id"]))),
        Route("/api/changes", changes),
        Route("/api/run/{run_id}/points", api(points)),
        Route("/api/run/{run_id}/log", api(log)),
        Route("/api/sql", api(lambda r: data.query(plain, r.query_params.get("q") or ""))),
        Route("/api/compare", api(lambda r: data.compare_runs(store, r.query_params.getlist("run")))),
        Route(
            "/api/suite/{suite}/leaderboard",
            api(lambda r: data.leaderboard(store, suite_arg(r), _int(r, "reps", 50_000), _int(r, "seed", 0))),
        ),  # fmt: skip
        Route(
            "/api/suite/{suite}/improvement",
            api(lambda r: data.improvement(store, suite_arg(r), _int(r, "reps", 2000), _int(r, "seed", 0))),
        ),  # fmt: skip
        Route("/api/suite/{suite}/decisions", api(lambda r: data.decisions(store, suite_arg(r)))),
        Route("/api/suite/{suite}/tuning", api(lambda r: data.tuning(store, suite_arg(r)))),
        Route("/api/suite/{suite}/by-key", api(by_key)),
        Route("/api/suite/{suite}/paired", api(paired)),
        Route("/api/suite/{suite}/live", api(suite_live)),
        Route("/files/{run_id}/{path:path}", run_file),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return _error(request, status, "no such page" if status == 404 else str(getattr(exc, "detail", "")))

    async def failed(request: Request, exc: Exception) -> Response:
        return _error(request, 500, f"internal error: {type(exc).__name__}")

    return Starlette(
        routes=routes,
        middleware=[Middleware(_Guard, token=token, loopback=loopback)],
        exception_handlers={HTTPException: not_found, 404: not_found, 405: not_found, Exception: failed},
    )
