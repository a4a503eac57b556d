"""Results bundles as a way to share a suite: write one (``rlbench export``), fetch one from a folder, an
http(s) URL or S3, and check every file against its checksums before anything reaches a database.

A bundle is a folder::

    runs.parquet      one row per finished run, every runs column (the full manifest), config as JSON text
    metrics.parquet   run_id, step, name, value, wall_time: every metric row of those runs
    suite.json        the suite's name, description and config
    artifacts.parquet run_id, step, kind, path, bytes, sha256 of the runs' listed files (saved policies,
                      videos, transcripts), and ``file``: the bundle file holding it (``--with-policies``,
                      ``--with-videos``), else null
    policy-<sha256>   with --with-policies: each saved policy file, named by its content
    video-<sha256>    with --with-videos: each episode video (``transcript-<sha256>``: a text env's
                      transcript), named by its content
    suite.yaml        the suite file, when the path it was run from still exists
    bundle.json       format version, rlbench version, suite, counts, created_at
    MANIFEST.sha256   "SHA256  NAME" for every other file (``sha256sum -c MANIFEST.sha256`` checks it),
                      with "# size BYTES NAME" comment lines

It is written to a temporary folder next to its destination and renamed into place, so a half-written
bundle never looks complete. Reading (``fetch``) downloads into a temporary folder and ``verify`` checks
every file (missing, size, checksum, files the manifest does not list) and raises ``ImportInvalid`` naming
the file; a bundle without MANIFEST.sha256 (written before it existed; ``write_manifest`` adds one to such a
folder) is read with the checks its Parquet reader makes. Only this module touches the network; it never opens a
database.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import FetchFailed, ImportInvalid, UnknownName, UsageError

__all__ = [
    "FORMAT_VERSION", "MANIFEST", "INFO", "REQUIRED", "Fetched", "export_suite", "write_bundle", "write_manifest",
    "read_manifest", "verify", "fetch", "default_timeout",
]  # fmt: skip

FORMAT_VERSION = 1
MANIFEST = "MANIFEST.sha256"
INFO = "bundle.json"
REQUIRED = ("runs.parquet", "metrics.parquet", "suite.json")
LEGACY = ("runs.parquet", "metrics.parquet", "suite.json")  # what a bundle without a manifest may hold
_CHUNK = 1 << 20


def default_timeout() -> float:
    """Seconds a download waits for an answer: ``$RLBENCH_FETCH_TIMEOUT``, else 30."""
    try:
        return float(os.environ.get("RLBENCH_FETCH_TIMEOUT") or 30.0)
    except ValueError:
        raise UsageError(
            f"RLBENCH_FETCH_TIMEOUT={os.environ['RLBENCH_FETCH_TIMEOUT']!r}: use a number of seconds, e.g. 30"
        ) from None


# -- writing --------------------------------------------------------------------------------------------
def write_bundle(store: Any, con: Any, suite: str, out: Path, with_policies: bool = False,
                 with_videos: bool = False) -> tuple[int, int]:  # fmt: skip
    """Write ``suite``'s finished runs as a bundle at ``out``, atomically: everything goes to a temporary
    folder beside ``out``, which is renamed to ``out`` once complete (an existing bundle there is replaced;
    any other non-empty folder is refused). ``with_policies``: the runs' saved policy files go in too;
    ``with_videos``: their episode videos and transcripts (``carry_artifacts``). Returns ``(runs, metric
    rows)``.

    Raises:
        UsageError: ``out`` is a file, or a folder holding something other than a bundle; a policy (video)
            file missing or changed since its run recorded it, with ``with_policies`` (``with_videos``).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: a file; a bundle is a folder, name a new folder or an existing bundle")
    if (
        out.is_dir()
        and any(out.iterdir())
        and not any((out / n).exists() for n in (MANIFEST, "runs.parquet"))
    ):
        raise UsageError(
            f"{out}: a folder with other files in it; name a new folder (or an existing bundle to replace it)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        n_runs, n_rows = store.export_bundle(con, suite, tmp)
        kinds = carried_kinds(with_policies, with_videos)
        if kinds:
            carry_artifacts(tmp, _runs_root(store) / suite, kinds)
        info = store.suite_info(con, suite) or {}
        source = info.get("source_path")
        if source and Path(source).is_file():
            shutil.copyfile(source, tmp / "suite.yaml")
        (tmp / INFO).write_text(json.dumps({
            "format": "rlbench-bundle", "format_version": FORMAT_VERSION, "rlbench_version": __version__,
            "suite": suite, "runs": n_runs, "metric_rows": n_rows,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }, indent=1) + "\n")  # fmt: skip
        write_manifest(tmp)
        _replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return n_runs, n_rows


def _runs_root(store: Any) -> Path:
    from .coordinator import runs_root

    return runs_root(store)


def carried_kinds(with_policies: bool, with_videos: bool) -> tuple[str, ...]:
    """The artifact kinds a bundle carries the files of: saved policies (``--with-policies``), episode videos
    and text transcripts (``--with-videos``)."""
    return (("policy_best", "policy_final") if with_policies else ()) + (
        ("video", "transcript") if with_videos else ()
    )


def carried_file_name(kind: str, sha256: str) -> str:
    """The name a carried file has in a bundle: its kind's prefix and its content's sha256 (bundle files are
    plain names): ``policy-<sha256>`` for a saved policy's file, ``video-<sha256>``, ``transcript-<sha256>``."""
    return f"{'policy' if kind.startswith('policy_') else kind}-{sha256}"


def carry_artifacts(folder: Path, suite_dir: Path, kinds: tuple[str, ...]) -> int:
    """Copy the files that ``folder/artifacts.parquet`` lists with a kind in ``kinds`` from the suite's run
    folders into the bundle folder (``carried_file_name``), and name that file in the rows' ``file`` column
    (null for the rows whose file stays behind). Returns the files copied. The manifest, written after,
    checks them like every other file.

    Raises:
        UsageError: a listed file that is missing or no longer what its run recorded.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .artifacts import resolve

    table = pq.read_table(folder / "artifacts.parquet")
    names: list[str | None] = []
    copied = 0
    for r in table.to_pylist():
        if r["kind"] not in kinds:
            names.append(None)
            continue
        src = resolve(suite_dir / r["run_id"], r["path"])
        name = carried_file_name(r["kind"], r["sha256"])
        dest = folder / name
        if not dest.exists():
            if not src.is_file() or src.stat().st_size != r["bytes"] or _sha256(src) != r["sha256"]:
                flag = "--with-policies" if r["kind"].startswith("policy_") else "--with-videos"
                raise UsageError(f"{src}: missing or changed since run {r['run_id']} saved it; export without "
                                 f"{flag}, or run that run again")  # fmt: skip
            shutil.copyfile(src, dest)
            copied += 1
        names.append(name)
    pq.write_table(table.append_column("file", pa.array(names, pa.string())), folder / "artifacts.parquet",
                   compression="zstd")  # fmt: skip
    return copied


def place_artifacts(folder: Path, artifacts: Any, suite_dir: Path) -> Any:
    """The rows of a verified bundle's ``artifacts.parquet`` whose file it carries (saved policies, videos,
    transcripts), after putting each file at its path under ``suite_dir/<run_id>/`` (a file already there is
    left as it is). Returns them without the ``file`` column, for ``Store.import_bundle``.

    Raises:
        ImportInvalid: a row naming a file the bundle lacks, of another sha256, or a path out of its run
            folder.
    """
    import pyarrow.compute as pc

    from .artifacts import resolve

    if artifacts is None or "file" not in artifacts.column_names:
        return None
    carried = artifacts.filter(pc.is_valid(artifacts["file"]))
    for r in carried.to_pylist():
        src = folder / str(r["file"])
        if (r["file"] != carried_file_name(str(r["kind"]), r["sha256"]) or not src.is_file()
                or _sha256(src) != r["sha256"]):  # fmt: skip
            raise ImportInvalid(f"artifacts.parquet: run {r['run_id']}'s {r['path']} names {r['file']!r}, "
                                "which the bundle does not hold as recorded; the bundle is damaged")  # fmt: skip
        try:
            dest = resolve(suite_dir / r["run_id"], r["path"])
        except ValueError as e:
            raise ImportInvalid(f"artifacts.parquet: {e}; the bundle is damaged") from None
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.partial")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
    return carried.drop_columns(["file"])


def export_suite(store: Any, suite: str, out: Path, with_policies: bool = False,
                 with_videos: bool = False) -> tuple[int, int, int]:  # fmt: skip
    """``rlbench export``: ``write_bundle`` of ``suite`` on a connection of its own. Returns ``(runs, metric
    rows, bytes written)``.

    Raises:
        UnknownName: no such suite in the store (the message starts with the suite's name).
        UsageError: what ``write_bundle`` refuses.
    """
    with store.reader() as con:
        known = store.suites(con)
        if suite not in known:
            raise UnknownName(
                f"{suite!r}: no such suite in {store.path} (suites: {', '.join(known) or 'none yet'})"
            )
        n_runs, n_rows = write_bundle(store, con, suite, out, with_policies, with_videos)
    return n_runs, n_rows, sum(p.stat().st_size for p in Path(out).iterdir() if p.is_file())


def _replace(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and removed after."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    old.rmdir()
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path) -> None:
    """Write ``folder/MANIFEST.sha256``: the sha256 and size of every other file in it."""
    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name != MANIFEST)
    lines = [f"# rlbench bundle: check with `sha256sum -c {MANIFEST}`; '# size BYTES NAME' gives each size"]
    lines += [f"# size {p.stat().st_size} {p.name}" for p in files]
    lines += [f"{_sha256(p)}  {p.name}" for p in files]
    (Path(folder) / MANIFEST).write_text("\n".join(lines) + "\n")


# -- checking -------------------------------------------------------------------------------------------
def _no_manifest(where: str) -> str:
    return (f"{where}/{MANIFEST}: missing, yet the bundle has {INFO} (rlbench export always writes both); "
            "the bundle is incomplete or was changed")  # fmt: skip


def _safe_name(name: str) -> bool:
    return (
        bool(name)
        and "/" not in name
        and "\\" not in name
        and name not in (".", "..")
        and not name.startswith(".")
    )


def read_manifest(text: str, where: str) -> dict[str, tuple[str, int | None]]:
    """``MANIFEST.sha256`` text -> ``{file name: (sha256, size or None)}``.

    Raises:
        ImportInvalid: a line that is neither a comment nor ``SHA256  NAME``, or a name with a path in it.
    """
    sizes: dict[str, int] = {}
    sums: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line[1:].split(None, 2)
            if len(parts) == 3 and parts[0] == "size" and parts[1].isdigit():
                sizes[parts[2]] = int(parts[1])
            continue
        digest, sep, name = line.partition("  ")
        name = name[1:] if name.startswith("*") else name
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
            raise ImportInvalid(
                f"{where}/{MANIFEST}: line {i} is not 'SHA256  NAME'; the manifest is damaged"
            )
        if not _safe_name(name):
            raise ImportInvalid(
                f"{where}/{MANIFEST}: line {i} names {name!r}; a bundle's files are plain names"
            )
        sums[name] = digest.lower()
    if not sums:
        raise ImportInvalid(f"{where}/{MANIFEST}: lists no files; the manifest is damaged")
    return {name: (digest, sizes.get(name)) for name, digest in sums.items()}


def verify(folder: Path, where: str, present: list[str] | None = None) -> bool:
    """Check the bundle files in ``folder`` against its MANIFEST.sha256; True when it has one.

    Args:
        folder: Local folder holding the files.
        where: The bundle's location as the user gave it, used in messages (``where/FILE: ...``).
        present: The file names at the source (a listing), when it differs from ``folder`` (downloads);
            None lists ``folder``.

    Raises:
        ImportInvalid: a file listed but missing, of another size or checksum; a file not listed; a required
            file not listed.
    """
    folder = Path(folder)
    if present is None:
        present = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    if MANIFEST not in present:
        if INFO in present:
            raise ImportInvalid(_no_manifest(where))
        return False
    entries = read_manifest((folder / MANIFEST).read_text(errors="replace"), where)
    for name in REQUIRED:
        if name not in entries:
            raise ImportInvalid(f"{where}/{MANIFEST}: does not list {name}; not a complete rlbench bundle")
    for name in sorted(set(present) - set(entries) - {MANIFEST}):
        raise ImportInvalid(
            f"{where}/{name}: not listed in {MANIFEST}; the bundle was changed after it was written"
        )
    for name, (digest, size) in entries.items():
        path = folder / name
        if name not in present or not path.is_file():
            raise ImportInvalid(f"{where}/{name}: missing (listed in {MANIFEST}); the bundle is incomplete")
        have = path.stat().st_size
        if size is not None and have != size:
            what = "truncated" if have < size else "longer than written"
            raise ImportInvalid(f"{where}/{name}: {have} bytes, {MANIFEST} says {size} ({what})")
        if _sha256(path) != digest:
            raise ImportInvalid(
                f"{where}/{name}: sha256 does not match {MANIFEST} (corrupted or changed since it was written)"
            )
    return True


# -- fetching -------------------------------------------------------------------------------------------
@dataclass
class Fetched:
    """A bundle on local disk: ``folder`` (the user's folder, or a temporary copy of a remote one) and
    whether it had a manifest that checked out."""

    folder: Path
    where: str
    manifest: bool


@contextmanager
def fetch(location: str, timeout: float | None = None) -> Iterator[Fetched]:
    """The bundle at ``location`` (a folder, ``http(s)://...`` or ``s3://bucket/prefix``), verified.

    Remote bundles are downloaded into a temporary folder that is removed on exit. Nothing is written
    anywhere else.

    Raises:
        FetchFailed: a URL that cannot be reached, answers 404 or does not answer within ``timeout``.
        ImportInvalid: a file that fails the checks of ``verify``.
        UsageError: an s3:// location without boto3 installed.
    """
    timeout = default_timeout() if timeout is None else timeout
    if location.startswith(("http://", "https://", "s3://")):
        with tempfile.TemporaryDirectory(prefix="rlbench-bundle-") as tmp:
            source = _S3(location, timeout) if location.startswith("s3://") else _Http(location, timeout)
            yield Fetched(Path(tmp), location, source.download(Path(tmp)))
        return
    folder = Path(location)
    if not folder.is_dir():
        raise ImportInvalid(
            f"{location}: no such folder; a bundle is a folder, an http(s):// URL or s3://bucket/prefix "
            "(rlbench export SUITE --out DIR writes one)"
        )
    yield Fetched(folder, location.rstrip("/"), verify(folder, location.rstrip("/")))


class _Remote:
    """Downloads a bundle: the manifest, then every file it lists (or the legacy files), then checks."""

    where: str
    not_found = "not found"

    def names(self) -> list[str] | None:
        """The file names at the source, where it can list them (None: it cannot)."""
        return None

    def get(self, name: str, dest: Path, limit: int | None) -> bool:
        """Download ``name`` to ``dest`` (stopping past ``limit`` bytes); False when it is not there."""
        raise NotImplementedError

    def download(self, tmp: Path) -> bool:
        listing = self.names()
        if (listing is None or MANIFEST in listing) and self.get(MANIFEST, tmp / MANIFEST, 10 << 20):
            entries = read_manifest((tmp / MANIFEST).read_text(errors="replace"), self.where)
            for name, (_, size) in entries.items():
                if (listing is None or name in listing) and not self.get(name, tmp / name, size):
                    raise ImportInvalid(
                        f"{self.where}/{name}: missing (listed in {MANIFEST}); the bundle is incomplete"
                    )
            present = (listing if listing is not None else [n for n in entries if (tmp / n).exists()]) + [
                MANIFEST
            ]
            return verify(tmp, self.where, sorted(set(present)))
        if (listing is None or INFO in listing) and self.get(INFO, tmp / INFO, 1 << 20):
            raise ImportInvalid(_no_manifest(self.where))
        got = [n for n in LEGACY if (listing is None or n in listing) and self.get(n, tmp / n, None)]
        if "runs.parquet" not in got:
            raise FetchFailed(
                f"{self.where}/{MANIFEST}: {self.not_found}, nor runs.parquet; no rlbench bundle at that "
                "address (rlbench export SUITE --out DIR writes one; upload the whole folder)"
            )
        return False


def _copy(stream: Any, dest: Path, limit: int | None) -> None:
    """Copy a file-like ``stream`` to ``dest``, reading at most ``limit + 1`` bytes (a longer file fails
    its size check without being read to the end)."""
    left = None if limit is None else limit + 1
    with open(dest, "wb") as f:
        while left is None or left > 0:
            chunk = stream.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            f.write(chunk)
            if left is not None:
                left -= len(chunk)


class _Http(_Remote):
    not_found = "not found (HTTP 404)"

    def __init__(self, url: str, timeout: float):
        self.base = url.rstrip("/")
        self.where = self.base
        self.timeout = timeout

    def get(self, name: str, dest: Path, limit: int | None) -> bool:
        import urllib.error
        import urllib.parse
        import urllib.request

        url = f"{self.base}/{urllib.parse.quote(name)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as resp:  # noqa: S310 - http(s) only
                _copy(resp, dest, limit)
            return True
        except urllib.error.HTTPError as e:
            if e.code == 404:
                if name in (MANIFEST, INFO, *LEGACY):
                    return False
                raise FetchFailed(f"{url}: not found (HTTP 404); check the URL") from None
            raise FetchFailed(f"{url}: HTTP {e.code} {e.reason}; check the URL and the server") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, TimeoutError):
                raise FetchFailed(_timed_out(url, self.timeout)) from None
            if isinstance(reason, ConnectionRefusedError):
                raise FetchFailed(
                    f"{url}: connection refused; is the server running at that address?"
                ) from None
            raise FetchFailed(f"{url}: cannot be reached ({reason}); check the URL") from None
        except TimeoutError:
            raise FetchFailed(_timed_out(url, self.timeout)) from None
        except (ConnectionError, OSError) as e:
            raise FetchFailed(f"{url}: the download broke off ({type(e).__name__}: {e}); try again") from None


def _timed_out(url: str, timeout: float) -> str:
    return f"{url}: no answer within {timeout:g}s (timed out); check the address, or raise --timeout"


class _S3(_Remote):
    not_found = "no such key"

    def __init__(self, url: str, timeout: float):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise UsageError(
                f"{url}: reading s3:// needs boto3: pip install 'rlbench-cli[s3]' (or pip install boto3)"
            ) from None
        rest = url[len("s3://") :]
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise UsageError(f"{url}: no bucket; use s3://BUCKET/PREFIX")
        self.prefix = prefix.strip("/")
        self.where = url.rstrip("/")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            config=Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1}),
        )
        self.timeout = timeout

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        from botocore import exceptions as bx

        try:
            yield
        except bx.NoCredentialsError:
            raise FetchFailed(
                f"{what}: no AWS credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile)"
            ) from None
        except (bx.ConnectTimeoutError, bx.ReadTimeoutError):
            raise FetchFailed(_timed_out(what, self.timeout)) from None
        except bx.EndpointConnectionError as e:
            raise FetchFailed(
                f"{what}: cannot connect to {e.kwargs.get('endpoint_url', 'the S3 endpoint')}; check "
                "AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 and that the server is running"
            ) from None
        except bx.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket",):
                raise FetchFailed(f"{what}: no bucket {self.bucket!r} at this endpoint") from None
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise FetchFailed(f"{what}: access denied ({code}); check your AWS credentials") from None
            raise FetchFailed(f"{what}: S3 error {code or type(e).__name__}") from None
        except bx.BotoCoreError as e:
            raise FetchFailed(f"{what}: {type(e).__name__}: {e}") from None

    def names(self) -> list[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        out = []
        with self._errors(self.where):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base
            ):
                out += [obj["Key"][len(base) :] for obj in page.get("Contents", [])]
        if not out:
            raise FetchFailed(
                f"{self.where}: nothing there; upload the bundle folder's files under that prefix"
            )
        return out

    def get(self, name: str, dest: Path, limit: int | None) -> bool:
        from botocore import exceptions as bx

        with self._errors(f"{self.where}/{name}"):
            try:
                obj = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
            except bx.ClientError as e:
                if str(e.response.get("Error", {}).get("Code", "")) in ("NoSuchKey", "404"):
                    return False
                raise
            _copy(obj["Body"], dest, limit)
        return True
